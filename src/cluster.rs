//! Near-duplicate pairs and clusters of a stored set, and the union-find under them
//! (format-spec/DESIGN.md, "Batch queries": near-duplicate pairs are grouped with union-find).
//!
//! [`near_pairs`] is the self-join of a set's permuted tables (`join/`): a segment's, an
//! in-memory set's ([`SortedTables`]), or, for an index snapshot of several parts, each
//! part's and the joins between parts. [`clusters`] joins the pairs by union-find and adds
//! fingerprints stored more than once. `UnionFind` and [`clusters_from_pairs`] know nothing
//! of fingerprints: items are `0..n`, pairs are `(a, b)`.

// Indexing: union-find over dense ids below the number of fingerprints, assigned here.
#![allow(clippy::indexing_slicing)]
use std::collections::HashMap;
use std::path::PathBuf;

use crate::error::Result;
use crate::join::{join, near_pair, self_join, Part, Tables};
use crate::sort::SharedSorter;
use crate::stored::{SortedTables, Stored};

/// The default [`ClusterOptions::pair_memory`]: 64 MiB (4M pairs; reserved when the
/// first pair is found).
pub(crate) const DEFAULT_PAIR_MEMORY: usize = 64 << 20;

/// How to find near-duplicate pairs and clusters.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ClusterOptions {
    /// Largest Hamming distance between near-duplicates: at most [`crate::plan::MAX_K`]
    /// (above the set's own `k`, answered by multi-probe).
    pub k: u32,
    /// Worker threads (at least 1).
    pub threads: usize,
    /// Bytes of near-duplicate pairs held in memory at a time (16 bytes a pair); past it,
    /// sorted runs of pairs spill to disk and are merged back. Default
    /// 64 MiB.
    pub pair_memory: usize,
    /// Where the spill directory is made (`simdex-spill-PID-N`, removed when the job ends,
    /// fails or is dropped). `None`: [`std::env::temp_dir`].
    pub spill_dir: Option<PathBuf>,
}

__with_fields!(ClusterOptions { k: u32 => with_k, threads: usize => with_threads, pair_memory: usize => with_pair_memory, spill_dir: Option<PathBuf> => with_spill_dir });

impl ClusterOptions {
    /// Distance `k`, one thread per available core, 64 MiB of pairs in memory, the system's
    /// temporary directory for spills.
    pub fn new(k: u32) -> Self {
        Self { k, threads: std::thread::available_parallelism().map_or(1, |n| n.get()), pair_memory: DEFAULT_PAIR_MEMORY, spill_dir: None }
    }
}

/// Every pair of distinct stored fingerprints within `options.k` of each other (`a < b`),
/// sorted. Exact duplicates (the same fingerprint stored more than once) are not pairs; see
/// [`clusters`]. `options.k` is at most [`crate::plan::MAX_K`] (above the set's own `k`,
/// answered by multi-probe). [`clusters_and_pairs`] streams the pairs instead of holding
/// them all.
///
/// Memory while joining: at most `options.pair_memory` bytes of pairs (more spill to sorted
/// run files in `options.spill_dir` and are merged back, plus 64 KiB of read buffer per run
/// merged at once, at most 64). A snapshot of several parts (segments, unflushed pairs) is
/// the self-join of each part and the join of each part's fingerprints (held in memory, 8
/// bytes each) with the tables of every larger part; pairs with a fingerprint whose every
/// copy is deleted are left out.
pub fn near_pairs<'a>(stored: impl Into<Stored<'a>>, options: &ClusterOptions) -> Result<Vec<(u64, u64)>> {
    let mut pairs = Vec::new();
    each_near_pair(stored, options, |p| {
        pairs.push(p);
        Ok(())
    })?;
    Ok(pairs)
}

/// [`near_pairs`], handing each pair to `emit` in order; returns the number of pairs.
fn each_near_pair<'a>(stored: impl Into<Stored<'a>>, options: &ClusterOptions, mut emit: impl FnMut((u64, u64)) -> Result<()>) -> Result<u64> {
    let (k, threads) = (options.k, options.threads);
    let parent = options.spill_dir.clone().unwrap_or_else(std::env::temp_dir);
    let sink = SharedSorter::new(options.pair_memory, threads, &parent);
    let mut dead = Vec::new();
    match stored.into().simplest() {
        Stored::Segment(s) => self_join(s, k, threads, &sink)?,
        Stored::Sorted(t) => self_join(t, k, threads, &sink)?,
        Stored::Snapshot(snapshot) => {
            let unflushed = snapshot.unflushed();
            let memory = if unflushed.is_empty() { None } else { Some(SortedTables::new(unflushed.to_vec(), k)?) };
            let mut parts: Vec<Part<'_>> = snapshot.segments().into_iter().map(Part::Segment).chain(memory.as_ref().map(Part::Sorted)).collect();
            parts.sort_by_key(|p| p.len());
            for (i, part) in parts.iter().enumerate() {
                self_join(part, k, threads, &sink)?;
                if i + 1 < parts.len() {
                    let fps = part.fingerprints()?;
                    for larger in &parts[i + 1..] {
                        join(larger, &fps, k, threads, &sink, near_pair)?;
                    }
                }
            }
            dead = snapshot.dead_fingerprints()?;
        }
    }
    let mut n = 0u64;
    for pair in sink.into_inner().finish()? {
        let (a, b) = pair?;
        if dead.is_empty() || (dead.binary_search(&a).is_err() && dead.binary_search(&b).is_err()) {
            emit((a, b))?;
            n += 1;
        }
    }
    Ok(n)
}

/// A group of stored entries connected by near-duplicate pairs (or sharing one fingerprint).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cluster {
    /// Every stored `(fingerprint, document id)` of the cluster, sorted.
    pub members: Vec<(u64, Option<u64>)>,
}

/// Near-duplicate clusters of a stored set: entries whose fingerprints are within
/// `options.k` (transitively, by union-find), plus fingerprints stored more than once.
/// Largest first. Memory: the pairs as in [`near_pairs`] (streamed into the
/// union-find, never all held), about 40 bytes per distinct paired fingerprint for the
/// union-find, and the clusters' members.
pub fn clusters<'a>(stored: impl Into<Stored<'a>>, options: &ClusterOptions) -> Result<Vec<Cluster>> {
    clusters_and_pairs(stored, options, |_| Ok(()))
}

/// [`clusters`], handing each near-duplicate pair to `each_pair` too, in the order
/// (and with the memory) of [`near_pairs`], without holding them: the pairs and the
/// clusters of one join.
pub fn clusters_and_pairs<'a>(stored: impl Into<Stored<'a>>, options: &ClusterOptions, mut each_pair: impl FnMut((u64, u64)) -> Result<()>) -> Result<Vec<Cluster>> {
    let stored = stored.into();
    let mut graph = PairGraph::default();
    each_near_pair(stored, options, |(a, b)| {
        graph.union(a, b);
        each_pair((a, b))
    })?;
    let mut members = Members::new(graph);
    // One pass over the entries in fingerprint order collects the members.
    stored.for_each_entry(|fp, id| {
        members.push(fp, id);
        Ok(())
    })?;
    Ok(members.finish())
}

/// The connected components of `pairs` of fingerprints: every fingerprint of a pair with
/// the smallest fingerprint of its component, sorted by fingerprint. Memory: about 40 bytes
/// per distinct fingerprint (the pairs are streamed).
pub fn pair_components(pairs: impl IntoIterator<Item = (u64, u64)>) -> Vec<(u64, u64)> {
    let mut graph = PairGraph::default();
    pairs.into_iter().for_each(|(a, b)| graph.union(a, b));
    let PairGraph { node_of, mut uf } = graph;
    let mut nodes: Vec<(u64, u32)> = node_of.into_iter().collect();
    nodes.sort_unstable();
    // in fingerprint order, the first of a component is its smallest
    let mut smallest: HashMap<u32, u64> = HashMap::new();
    nodes.into_iter().map(|(fp, node)| (fp, *smallest.entry(uf.find(node)).or_insert(fp))).collect()
}

/// The union-find over paired fingerprints, built one pair at a time.
#[derive(Default)]
struct PairGraph {
    node_of: HashMap<u64, u32>,
    uf: UnionFind,
}

impl PairGraph {
    fn node(&mut self, fp: u64) -> u32 {
        let next = self.node_of.len() as u32;
        let node = *self.node_of.entry(fp).or_insert(next);
        if node == next {
            self.uf.parent.push(node);
            self.uf.size.push(1);
        }
        node
    }

    fn union(&mut self, a: u64, b: u64) {
        let (a, b) = (self.node(a), self.node(b));
        self.uf.union(a, b);
    }
}

/// A stored entry: fingerprint and document id.
type Entry = (u64, Option<u64>);

/// The members of clusters, gathered from runs of equal fingerprints in fingerprint order:
/// every entry of a paired fingerprint, by the root of its pairs, and runs of one unpaired
/// fingerprint stored more than once (exact duplicates).
struct Members {
    /// The paired fingerprints, sorted, each with its union-find node.
    nodes: Vec<(u64, u32)>,
    /// The first node not below the current run's fingerprint (runs come in order, so the
    /// nodes are walked once rather than searched).
    next_node: usize,
    uf: UnionFind,
    by_root: HashMap<u32, Vec<Entry>>,
    exact: Vec<Vec<Entry>>,
    run: Vec<Entry>,
}

impl Members {
    fn new(graph: PairGraph) -> Self {
        let PairGraph { node_of, uf } = graph;
        let mut nodes: Vec<(u64, u32)> = node_of.into_iter().collect();
        nodes.sort_unstable();
        Self { nodes, next_node: 0, uf, by_root: HashMap::new(), exact: Vec::new(), run: Vec::new() }
    }

    fn push(&mut self, fp: u64, id: Option<u64>) {
        if self.run.first().is_some_and(|r| r.0 != fp) {
            self.end_run();
        }
        self.run.push((fp, id));
    }

    fn end_run(&mut self) {
        if let Some(&(fp, _)) = self.run.first() {
            while self.nodes.get(self.next_node).is_some_and(|&(n, _)| n < fp) {
                self.next_node += 1;
            }
            match self.nodes.get(self.next_node) {
                Some(&(n, node)) if n == fp => {
                    let root = self.uf.find(node);
                    self.by_root.entry(root).or_default().append(&mut self.run);
                }
                _ if self.run.len() > 1 => self.exact.push(std::mem::take(&mut self.run)),
                _ => {}
            }
        }
        self.run.clear();
    }

    fn finish(mut self) -> Vec<Cluster> {
        self.end_run();
        let mut out: Vec<Cluster> = self
            .by_root
            .into_values()
            .chain(self.exact)
            .map(|mut members| {
                members.sort_unstable();
                Cluster { members }
            })
            .collect();
        out.sort_by(|a, b| b.members.len().cmp(&a.members.len()).then(a.members.cmp(&b.members)));
        out
    }
}

/// Disjoint sets over `0..n` with path halving and union by size.
#[derive(Debug, Clone, Default)]
pub(crate) struct UnionFind {
    parent: Vec<u32>,
    size: Vec<u32>,
}

impl UnionFind {
    /// `n` singleton sets.
    ///
    /// # Panics
    /// If `n` exceeds `u32::MAX` (document numbers are u32).
    pub fn new(n: usize) -> Self {
        assert!(u32::try_from(n).is_ok(), "at most u32::MAX elements");
        UnionFind { parent: (0..n as u32).collect(), size: vec![1; n] }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.parent.len()
    }

    /// The representative of `x`'s set.
    pub fn find(&mut self, mut x: u32) -> u32 {
        while self.parent[x as usize] != x {
            let grandparent = self.parent[self.parent[x as usize] as usize];
            self.parent[x as usize] = grandparent;
            x = grandparent;
        }
        x
    }

    /// Merges the sets of `a` and `b`; returns whether they were apart.
    pub fn union(&mut self, a: u32, b: u32) -> bool {
        let (mut ra, mut rb) = (self.find(a), self.find(b));
        if ra == rb {
            return false;
        }
        if self.size[ra as usize] < self.size[rb as usize] {
            std::mem::swap(&mut ra, &mut rb);
        }
        self.parent[rb as usize] = ra;
        self.size[ra as usize] += self.size[rb as usize];
        true
    }

    /// The sets with more than one element, each sorted ascending; largest first, ties by
    /// smallest member.
    pub fn clusters(&mut self) -> Vec<Vec<u32>> {
        let n = self.len() as u32;
        let mut by_root: std::collections::HashMap<u32, Vec<u32>> = std::collections::HashMap::new();
        for x in 0..n {
            let r = self.find(x);
            if self.size[r as usize] > 1 {
                by_root.entry(r).or_default().push(x);
            }
        }
        let mut out: Vec<Vec<u32>> = by_root.into_values().collect();
        out.sort_by(|a, b| b.len().cmp(&a.len()).then(a[0].cmp(&b[0])));
        out
    }
}

/// Groups `n` documents into clusters given the pairs that are near-duplicates.
pub fn clusters_from_pairs(n: usize, pairs: impl IntoIterator<Item = (u32, u32)>) -> Vec<Vec<u32>> {
    let mut uf = UnionFind::new(n);
    for (a, b) in pairs {
        uf.union(a, b);
    }
    uf.clusters()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn groups_transitively() {
        let c = clusters_from_pairs(7, [(0, 1), (5, 6), (1, 2), (6, 4)]);
        assert_eq!(c, vec![vec![0, 1, 2], vec![4, 5, 6]]);
        assert!(clusters_from_pairs(3, []).is_empty());
    }

    proptest! {
        // oracle: connected components by repeated relabelling
        #[test]
        fn matches_naive_components(pairs in proptest::collection::vec((0u32..30, 0u32..30), 0..40)) {
            let mut label: Vec<u32> = (0..30).collect();
            loop {
                let mut changed = false;
                for &(a, b) in &pairs {
                    let m = label[a as usize].min(label[b as usize]);
                    for x in [a, b] {
                        if label[x as usize] != m { label[x as usize] = m; changed = true; }
                    }
                }
                if !changed { break; }
            }
            let mut expect: std::collections::BTreeMap<u32, Vec<u32>> = Default::default();
            for x in 0..30u32 { expect.entry(label[x as usize]).or_default().push(x); }
            let mut expect: Vec<Vec<u32>> = expect.into_values().filter(|c| c.len() > 1).collect();
            expect.sort_by(|a, b| b.len().cmp(&a.len()).then(a[0].cmp(&b[0])));
            prop_assert_eq!(clusters_from_pairs(30, pairs), expect);
        }
    }
}
