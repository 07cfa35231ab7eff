//! Batch queries and all-pairs search over a segment (paper section 3.3), and clusters.
//!
//! Both are merge joins on the segment's own permuted tables. For each table `t`, the
//! queries are permuted by `pi_t` and sorted in memory; the stored table, already sorted,
//! is decoded block by block and walked in step with them, one prefix group (entries
//! sharing the table's top `p_t` bits) at a time. Every query-entry pair of a group is
//! checked with a popcount. Memory is the sorted queries (one array the size of Q, permuted
//! in place from table to table) plus one prefix group; the stored tables are read
//! sequentially from the page cache and never held.
//!
//! The paper's map tasks build tables over Q and stream F once instead. That needs one
//! permuted copy of Q per table (t times the memory) and random probes into them; the merge
//! join needs one copy, probes nothing and streams each stored table once, which on two
//! cores is the faster of the two (see `benches/RESULTS.md`).
//!
//! A pair within distance `k` shares its prefix in at least one table and often in several.
//! It is reported only by the first such table: permutations are linear over XOR, so the
//! pair shares table `j`'s prefix exactly when `a ^ b` has no bit in table `j`'s prefix
//! positions, which is one AND per earlier table. Work is split between threads by ranges
//! of prefixes, balanced by block count.

use std::collections::HashMap;
use std::path::Path;

use crate::cluster::UnionFind;
use crate::engine::snapshot::Snapshot;
use crate::error::{Error, Result};
use crate::search::lower_bound;
use crate::segment::{build_segment, BuildOptions, Segment};
use crate::storage::FsStorage;

/// How to run a batch.
#[derive(Clone, Copy, Debug)]
pub struct BatchOptions {
    /// Largest Hamming distance to report (at most the segment design's `k`).
    pub k: u32,
    /// Worker threads (at least 1).
    pub threads: usize,
}

impl BatchOptions {
    /// Distance `k`, one thread per available core.
    pub fn new(k: u32) -> Self {
        Self { k, threads: std::thread::available_parallelism().map_or(1, |n| n.get()) }
    }
}

/// One match of a batch query.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BatchMatch {
    /// The query.
    pub query: u64,
    /// Hamming distance between the query and the stored fingerprint.
    pub distance: u32,
    /// The stored fingerprint.
    pub fingerprint: u64,
    /// Its document id, when the segment keeps ids (one match per id).
    pub doc_id: Option<u64>,
}

/// All stored fingerprints within `options.k` of every query, each (query, fingerprint, id)
/// once, sorted by query, then distance, fingerprint and id.
pub fn batch_query(segment: &Segment, queries: &[u64], options: &BatchOptions) -> Result<Vec<BatchMatch>> {
    let mut out = Vec::new();
    batch_query_each(segment, queries, options, |m| {
        out.push(m);
        Ok(())
    })?;
    Ok(out)
}

/// [`batch_query`], handing each match to `emit` in order instead of collecting them.
/// Returns the number of matches.
///
/// Peak memory: one sorted copy of the queries (freed before the output phase), 16 bytes
/// per (query, fingerprint) match, and 20 bytes per distinct matched fingerprint for its
/// ids; the stored tables are streamed.
pub fn batch_query_each(segment: &Segment, queries: &[u64], options: &BatchOptions, mut emit: impl FnMut(BatchMatch) -> Result<()>) -> Result<u64> {
    check_k(segment, options.k)?;
    let mut sorted: Vec<u64> = queries.to_vec();
    let mut pairs: Vec<(u64, u64)> = Vec::new();
    let mut current = 0usize;
    for t in 0..segment.tables().len() {
        // Re-permute the queries in place from the previous table's order to this one's.
        let (from, to) = (&segment.tables()[current].design().permutation, &segment.tables()[t].design().permutation);
        for q in sorted.iter_mut() {
            *q = to.apply(from.invert(*q));
        }
        current = t;
        sorted.sort_unstable();
        sorted.dedup();
        let qs = &sorted;
        for mut found in in_parallel(segment, t, options.threads, |range| {
            let mut out = Vec::new();
            join_range(segment, t, range, qs, options.k, &mut out).map(|_| out)
        })? {
            pairs.append(&mut found);
        }
    }
    drop(sorted);
    // A fingerprint stored under several ids was found once per entry.
    pairs.sort_unstable_by_key(|&(q, fp)| (q, (q ^ fp).count_ones(), fp));
    pairs.dedup();
    pairs.shrink_to_fit();
    let ids = IdMap::new(segment, &pairs)?;
    for &(q, fp) in &pairs {
        let distance = (q ^ fp).count_ones();
        match &ids {
            Some(map) => {
                for &id in map.ids(fp) {
                    emit(BatchMatch { query: q, distance, fingerprint: fp, doc_id: Some(id) })?;
                }
            }
            None => emit(BatchMatch { query: q, distance, fingerprint: fp, doc_id: None })?,
        }
    }
    Ok(pairs.len() as u64)
}

/// [`batch_query`] over a whole index: every live segment of `snapshot`, minus the pairs
/// newer deletes hide, plus the pairs not flushed yet (written to a temporary segment in
/// `scratch`, removed afterwards). The matches of all segments are collected (32 bytes
/// each), sorted and handed to `emit` in order. Returns the number of matches.
pub fn batch_query_index(
    snapshot: &Snapshot,
    queries: &[u64],
    options: &BatchOptions,
    scratch: &Path,
    mut emit: impl FnMut(BatchMatch) -> Result<()>,
) -> Result<u64> {
    let mut all: Vec<BatchMatch> = Vec::new();
    let deletes = snapshot.deletes();
    for (i, segment) in snapshot.segments().into_iter().enumerate() {
        batch_query_each(segment, queries, options, |m| {
            if !(!deletes.is_empty() && deletes.hidden_in_segment(i, m.fingerprint, m.doc_id.unwrap_or(0))) {
                all.push(m);
            }
            Ok(())
        })?;
    }
    let unflushed = snapshot.unflushed();
    if !unflushed.is_empty() {
        let path = scratch.join("unflushed.sdx");
        let (fps, ids): (Vec<u64>, Vec<u64>) = unflushed.iter().copied().unzip();
        build_segment(&FsStorage, &path, &fps, Some(&ids), &BuildOptions { k: options.k, ..BuildOptions::default() })?;
        let segment = Segment::open(&path)?;
        batch_query_each(&segment, queries, options, |m| {
            all.push(m);
            Ok(())
        })?;
        drop(segment);
        std::fs::remove_file(&path).map_err(|e| Error::io(&path, "remove", e))?;
    }
    all.sort_unstable();
    all.dedup();
    let n = all.len() as u64;
    for m in all {
        emit(m)?;
    }
    Ok(n)
}

/// Every pair of distinct stored fingerprints within `k` of each other (`a < b`), sorted.
/// Exact duplicates (the same fingerprint stored more than once) are not pairs; see
/// [`clusters`].
pub fn near_pairs(segment: &Segment, k: u32, threads: usize) -> Result<Vec<(u64, u64)>> {
    check_k(segment, k)?;
    let mut pairs = Vec::new();
    for t in 0..segment.tables().len() {
        for mut found in in_parallel(segment, t, threads, |range| {
            let mut out = Vec::new();
            self_join_range(segment, t, range, k, &mut out).map(|_| out)
        })? {
            pairs.append(&mut found);
        }
    }
    for p in pairs.iter_mut() {
        if p.0 > p.1 {
            *p = (p.1, p.0);
        }
    }
    pairs.sort_unstable();
    pairs.dedup();
    Ok(pairs)
}

/// A group of stored entries connected by near-duplicate pairs (or sharing one fingerprint).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cluster {
    /// Every stored `(fingerprint, document id)` of the cluster, sorted.
    pub members: Vec<(u64, Option<u64>)>,
}

/// Near-duplicate clusters of a segment: entries whose fingerprints are within `k`
/// (transitively, by union-find), plus fingerprints stored more than once. Largest first.
pub fn clusters(segment: &Segment, k: u32, threads: usize) -> Result<Vec<Cluster>> {
    let pairs = near_pairs(segment, k, threads)?;
    let mut nodes: Vec<u64> = pairs.iter().flat_map(|&(a, b)| [a, b]).collect();
    nodes.sort_unstable();
    nodes.dedup();
    let index = |fp: u64| nodes.binary_search(&fp).expect("node of a pair") as u32;
    let mut uf = UnionFind::new(nodes.len());
    for &(a, b) in &pairs {
        uf.union(index(a), index(b));
    }
    // One pass over table 0 collects the members: every entry of a paired fingerprint, and
    // runs of equal fingerprints (exact duplicates).
    let mut by_root: HashMap<u32, Vec<(u64, Option<u64>)>> = HashMap::new();
    let mut exact: Vec<Vec<(u64, Option<u64>)>> = Vec::new();
    let mut run: Vec<(u64, Option<u64>)> = Vec::new();
    let mut flush = |run: &mut Vec<(u64, Option<u64>)>, by_root: &mut HashMap<u32, Vec<(u64, Option<u64>)>>, uf: &mut UnionFind| {
        if let Some(&(fp, _)) = run.first() {
            match nodes.binary_search(&fp) {
                Ok(i) => by_root.entry(uf.find(i as u32)).or_default().append(run),
                Err(_) if run.len() > 1 => exact.push(std::mem::take(run)),
                Err(_) => {}
            }
        }
        run.clear();
    };
    for e in segment.entries() {
        let e = e?;
        if run.first().is_some_and(|r| r.0 != e.0) {
            flush(&mut run, &mut by_root, &mut uf);
        }
        run.push(e);
    }
    flush(&mut run, &mut by_root, &mut uf);
    let mut out: Vec<Cluster> = by_root.into_values().chain(exact).map(|mut members| {
        members.sort_unstable();
        Cluster { members }
    }).collect();
    out.sort_by(|a, b| b.members.len().cmp(&a.members.len()).then(a.members.cmp(&b.members)));
    Ok(out)
}

fn check_k(segment: &Segment, k: u32) -> Result<()> {
    if k > segment.design().k() {
        return Err(Error::KTooLarge { requested: k, design_k: segment.design().k() });
    }
    Ok(())
}

/// Prefixes `[lo, hi)` of one table, as a thread's share of the work.
type PrefixRange = (u64, u64);

/// The prefix value of a permuted entry in a table with `p` prefix bits (0 when `p = 0`).
#[inline]
fn prefix(v: u64, p: u32) -> u64 {
    if p == 0 {
        0
    } else {
        v >> (64 - p)
    }
}

/// Splits table `t`'s prefixes into `threads` ranges holding about equal numbers of blocks,
/// runs `work` on each in its own thread and concatenates the results.
fn in_parallel<T: Send>(
    segment: &Segment,
    t: usize,
    threads: usize,
    work: impl Fn(PrefixRange) -> Result<Vec<T>> + Sync,
) -> Result<Vec<Vec<T>>> {
    let table = &segment.tables()[t];
    let p = table.design().prefix_bits;
    let end = if p == 0 { 1 } else if p == 64 { u64::MAX } else { 1u64 << p };
    let blocks = table.block_count();
    let parts = threads.max(1).min(blocks.max(1) as usize);
    let mut bounds = vec![0u64];
    for i in 1..parts {
        let key = table.keys()[(blocks as usize * i) / parts];
        let b = prefix(key, p).max(*bounds.last().expect("non-empty"));
        bounds.push(b);
    }
    bounds.push(end);
    let ranges: Vec<PrefixRange> = bounds.windows(2).map(|w| (w[0], w[1])).filter(|r| r.0 < r.1 || r.1 == u64::MAX).collect();
    let results: Vec<Result<Vec<T>>> = std::thread::scope(|s| {
        let work = &work;
        let handles: Vec<_> = ranges.iter().map(|&r| s.spawn(move || work(r))).collect();
        handles.into_iter().map(|h| h.join().expect("batch worker panicked")).collect()
    });
    results.into_iter().collect()
}

/// Original-bit masks of the prefixes of tables `0..t`.
fn earlier_prefixes(segment: &Segment, t: usize) -> Vec<u64> {
    segment.tables()[..t].iter().map(|tb| tb.design().permutation.invert(tb.design().prefix_mask())).collect()
}

/// Calls `group` with each prefix group of table `t` in `range`: the group's prefix and its
/// entries (permuted, sorted, duplicates kept), one group at a time.
fn for_each_group(segment: &Segment, t: usize, range: PrefixRange, mut group: impl FnMut(u64, &[u64])) -> Result<()> {
    let table = &segment.tables()[t];
    let p = table.design().prefix_bits;
    let start = if p == 0 { 0 } else { range.0 << (64 - p) };
    let mut b = lower_bound(table.keys(), start) as u64;
    let mut buf: Vec<u64> = Vec::new();
    let mut current = u64::MAX;
    let mut done = false;
    while b < table.block_count() && !done {
        segment.visit_block(t, b, |v| {
            let pv = prefix(v, p);
            if pv < range.0 {
                return true;
            }
            if pv >= range.1 && range.1 != u64::MAX {
                done = true;
                return false;
            }
            if pv != current {
                if !buf.is_empty() {
                    group(current, &buf);
                    buf.clear();
                }
                current = pv;
            }
            buf.push(v);
            true
        })?;
        b += 1;
    }
    if !buf.is_empty() {
        group(current, &buf);
    }
    Ok(())
}

/// The batch join of table `t` over `range`: pushes `(query, fingerprint)` pairs in
/// original bit order.
fn join_range(segment: &Segment, t: usize, range: PrefixRange, queries: &[u64], k: u32, out: &mut Vec<(u64, u64)>) -> Result<()> {
    let table = &segment.tables()[t];
    let p = table.design().prefix_bits;
    let perm = &table.design().permutation;
    let earlier = earlier_prefixes(segment, t);
    let mut qi = 0usize;
    for_each_group(segment, t, range, |pv, entries| {
        // Queries are sorted by the same permutation: advance to this group's queries.
        while qi < queries.len() && prefix(queries[qi], p) < pv {
            qi += 1;
        }
        let qs = &queries[qi..];
        let n = qs.iter().take_while(|&&q| prefix(q, p) == pv).count();
        cross_pairs(&qs[..n], entries, k, &mut |q, v| {
            if earlier.iter().all(|&m| perm.invert(q ^ v) & m != 0) {
                out.push((perm.invert(q), perm.invert(v)));
            }
        });
    })
}

/// The self-join of table `t` over `range`: pushes pairs of distinct fingerprints.
fn self_join_range(segment: &Segment, t: usize, range: PrefixRange, k: u32, out: &mut Vec<(u64, u64)>) -> Result<()> {
    let table = &segment.tables()[t];
    let perm = &table.design().permutation;
    let earlier = earlier_prefixes(segment, t);
    let mut distinct: Vec<u64> = Vec::new();
    for_each_group(segment, t, range, |_, entries| {
        distinct.clear();
        distinct.extend_from_slice(entries);
        distinct.dedup();
        for (i, &a) in distinct.iter().enumerate() {
            cross_pairs(&[a], &distinct[i + 1..], k, &mut |a, b| {
                if earlier.iter().all(|&m| perm.invert(a ^ b) & m != 0) {
                    out.push((perm.invert(a), perm.invert(b)));
                }
            });
        }
    })
}

/// Calls `hit(a, b)` for every `a` of `xs` and `b` of `ys` within distance `k`: the inner
/// loop of both joins, compiled for the widest population count the CPU has (AVX-512
/// VPOPCNTQ checks eight pairs per instruction, POPCNT one).
fn cross_pairs(xs: &[u64], ys: &[u64], k: u32, hit: &mut dyn FnMut(u64, u64)) {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::cpu::has_avx512_popcnt() {
            // SAFETY: `cross_pairs_avx512` needs AVX-512F/VL/BW and VPOPCNTDQ, all just
            // confirmed by `has_avx512_popcnt`. Exercised by every batch test on such CPUs
            // against the brute-force oracle in tests/it/batch.rs.
            unsafe { cross_pairs_avx512(xs, ys, k, hit) };
            return;
        }
        if crate::cpu::has_bmi2_popcnt() {
            // SAFETY: `cross_pairs_popcnt` needs only BMI1/2 and POPCNT, just confirmed by
            // `has_bmi2_popcnt`; tested as above.
            unsafe { cross_pairs_popcnt(xs, ys, k, hit) };
            return;
        }
    }
    cross_pairs_portable(xs, ys, k, hit);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512vpopcntdq,bmi1,bmi2,popcnt")]
fn cross_pairs_avx512(xs: &[u64], ys: &[u64], k: u32, hit: &mut dyn FnMut(u64, u64)) {
    cross_pairs_portable(xs, ys, k, hit);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "bmi1,bmi2,popcnt")]
fn cross_pairs_popcnt(xs: &[u64], ys: &[u64], k: u32, hit: &mut dyn FnMut(u64, u64)) {
    cross_pairs_portable(xs, ys, k, hit);
}

/// Pairs are checked eight at a time into a bit mask (a shape compilers vectorize), and
/// `hit` is called only for the rare set bits.
#[inline(always)]
fn cross_pairs_portable(xs: &[u64], ys: &[u64], k: u32, hit: &mut dyn FnMut(u64, u64)) {
    const LANES: usize = 8;
    let chunks = ys.chunks_exact(LANES);
    let rest = chunks.remainder();
    for &x in xs {
        for (c, chunk) in ys.chunks_exact(LANES).enumerate() {
            let mut mask = 0u32;
            for (i, &y) in chunk.iter().enumerate() {
                mask |= u32::from((x ^ y).count_ones() <= k) << i;
            }
            while mask != 0 {
                let i = mask.trailing_zeros() as usize;
                hit(x, ys[c * LANES + i]);
                mask &= mask - 1;
            }
        }
        for &y in rest {
            if (x ^ y).count_ones() <= k {
                hit(x, y);
            }
        }
    }
}

/// The document ids of the matched fingerprints: sorted distinct fingerprints, and for
/// each the range of its ids in one flat array (20 bytes per fingerprint with one id).
struct IdMap {
    fps: Vec<u64>,
    starts: Vec<u32>,
    ids: Vec<u64>,
}

impl IdMap {
    /// `None` when the segment has no ids.
    fn new(segment: &Segment, pairs: &[(u64, u64)]) -> Result<Option<Self>> {
        if !segment.has_ids() {
            return Ok(None);
        }
        let mut fps: Vec<u64> = pairs.iter().map(|p| p.1).collect();
        fps.sort_unstable();
        fps.dedup();
        fps.shrink_to_fit();
        let mut starts = Vec::with_capacity(fps.len() + 1);
        let mut ids = Vec::with_capacity(fps.len());
        // Walk table 0 (the identity, ids in its order) over the blocks holding them.
        let table = &segment.tables()[0];
        let mut i = 0usize;
        let mut b = 0u64;
        while i < fps.len() && b < table.block_count() {
            b = b.max(lower_bound(table.keys(), fps[i]) as u64);
            if b >= table.block_count() {
                break;
            }
            let mut ordinal = table.first_ordinal(b);
            let mut hits: Vec<(usize, u64)> = Vec::new();
            segment.visit_block(0, b, |v| {
                while i < fps.len() && fps[i] < v {
                    i += 1;
                }
                if i < fps.len() && fps[i] == v {
                    hits.push((i, ordinal));
                }
                ordinal += 1;
                true
            })?;
            for (j, ordinal) in hits {
                while starts.len() <= j {
                    starts.push(ids.len() as u32);
                }
                ids.push(segment.doc_id(ordinal)?);
            }
            // The last fingerprint of this block may continue in the next one.
            b += 1;
        }
        while starts.len() <= fps.len() {
            starts.push(ids.len() as u32);
        }
        Ok(Some(Self { fps, starts, ids }))
    }

    fn ids(&self, fp: u64) -> &[u64] {
        match self.fps.binary_search(&fp) {
            Ok(i) => &self.ids[self.starts[i] as usize..self.starts[i + 1] as usize],
            Err(_) => &[],
        }
    }
}
