//! The self-join of a set too large for one machine, cut by block ([`BlockSplit`]): the
//! paper's batch mode (format-spec/DESIGN.md, "Batch queries") laid out for a cluster that moves data by
//! key, as Spark does.
//!
//! A design of `r > k` blocks (its first level) has one table per choice of leading blocks;
//! a table's *group* is its first leading block. Two fingerprints within `k` agree on every
//! leading block of some table, so on its group's block. A group's partition key is that
//! block's value: sent once per group (`k + 1` groups whatever the number of tables: 4 for
//! the 10 tables of 5 blocks at `k = 3`), every fingerprint meets, in the partition of its
//! key, every fingerprint that shares one of the group's tables with it.
//!
//! Inside a partition the group's tables are built one at a time (permuted, sorted by the
//! prefix) and each prefix group is self-joined with a population count, as
//! [`crate::near_pairs`] does in memory. A pair is reported only by its first
//! shared table of the whole design (one AND per earlier table, the merge join's rule), so
//! over all groups and partitions each pair of distinct fingerprints comes out exactly once,
//! with no distinct step. Copies of one fingerprint are noted, not joined: a map task
//! ([`BlockSplit::scatter`]) sends a fingerprint it holds a million times on once, marked as
//! repeated, and it is one value of its partition's tables.
//!
//! The map side packs each partition's fingerprints together, so a shuffle moves 8 bytes
//! per fingerprint and group, not a row each. This module knows nothing of Spark: it plans,
//! keys, scatters and joins what a caller hands it.

// Indexing: positions below lengths computed here (blocks of the design, runs of a sorted array).
#![allow(clippy::indexing_slicing)]
use crate::error::{Error, Result};
use crate::join::cross_pairs;
use crate::plan::{block_widths, planned_design, Design, PlanOptions};
use crate::sort::{sort_by_top_bits, sort_u64};

/// The self-join of a set cut into `k + 1` groups of partitions by block (see the module
/// docs): which block keys each group, and the join of one partition.
#[derive(Clone, Debug)]
pub struct BlockSplit {
    design: Design,
    groups: Vec<BlockGroup>,
    /// Per table, the original bit positions of its prefix (a pair shares the table's
    /// prefix when their XOR has none of them).
    prefixes: Vec<u64>,
}

/// One group: the block that keys its partitions and the tables it joins.
#[derive(Clone, Debug)]
struct BlockGroup {
    /// The key is `(fp >> shift) & mask`.
    shift: u32,
    mask: u64,
    tables: Vec<usize>,
}

/// What one partition of a group found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionPairs {
    /// Pairs of distinct fingerprints within `k`, `(a, b)` with `a < b`, each reported by
    /// exactly one partition of one group (unsorted).
    pub pairs: Vec<(u64, u64)>,
    /// Group 0 only: the fingerprints stored more than once, sorted (every copy of a
    /// fingerprint has the same key, so one partition sees them all).
    pub repeated: Vec<u64>,
}

/// One map task's fingerprints cut into partitions ([`BlockSplit::scatter`]), indexed by
/// partition, groups one after the other.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scattered {
    /// Each partition's distinct fingerprints.
    pub fps: Vec<Vec<u64>>,
    /// Each group-0 partition's fingerprints the task held more than once (empty for
    /// the other groups').
    pub repeated: Vec<Vec<u64>>,
}

impl BlockSplit {
    /// The split of the planner's design for `count` fingerprints and distance `k` (at most
    /// [`crate::plan::MAX_K`]), with prefixes long enough that a prefix group expects at
    /// most `2^max_candidates_log2` fingerprints (a join in memory wants few: 1 to 4).
    pub fn new(count: u64, k: u32, max_candidates_log2: f64) -> Result<Self> {
        let options = PlanOptions { max_candidates_log2, ..PlanOptions::new(count, k) };
        Self::for_design(planned_design(&options)?)
    }

    /// The split of `design`.
    pub fn for_design(design: Design) -> Result<Self> {
        let tables = design.tables();
        let prefixes: Vec<u64> = tables.iter().map(|t| t.permutation.invert(t.prefix_mask())).collect();
        let Some(&r) = design.levels().first() else {
            // No blocks (a set small enough to scan): one group, one key.
            let groups = vec![BlockGroup { shift: 0, mask: 0, tables: (0..tables.len()).collect() }];
            return Ok(Self { design, groups, prefixes });
        };
        let mut starts = Vec::new();
        let mut at = 0u32;
        for w in block_widths(64, r) {
            starts.push((at, w));
            at += w;
        }
        let mut groups: Vec<(u32, BlockGroup)> = Vec::new();
        for (t, table) in tables.iter().enumerate() {
            let first = u32::from(table.permutation.order()[0]);
            let Some(&(start, width)) = starts.iter().find(|&&(s, w)| (s..s + w).contains(&first)) else {
                return Err(Error::InvalidArgument(format!("table {t} of {} leads with bit {first}, in no block", design.summary())));
            };
            match groups.iter_mut().find(|(s, _)| *s == start) {
                Some((_, g)) => g.tables.push(t),
                None => {
                    let mask = if width >= 64 { u64::MAX } else { (1u64 << width) - 1 };
                    groups.push((start, BlockGroup { shift: 64 - start - width, mask, tables: vec![t] }));
                }
            }
        }
        groups.sort_by_key(|(s, _)| *s);
        Ok(Self { design, groups: groups.into_iter().map(|(_, g)| g).collect(), prefixes })
    }

    /// The design whose tables are joined.
    pub fn design(&self) -> &Design {
        &self.design
    }

    /// Number of groups: each fingerprint is handed to one partition of each.
    pub fn groups(&self) -> usize {
        self.groups.len()
    }

    /// The tables group `group` joins (indexes into the design's tables).
    pub fn tables_of(&self, group: usize) -> &[usize] {
        self.groups.get(group).map_or(&[], |g| &g.tables)
    }

    /// How group `group` keys a fingerprint: `(shift, mask)`, the key being
    /// `(fp >> shift) & mask` (a logical shift), for callers that compute it themselves.
    pub fn key_bits(&self, group: usize) -> (u32, u64) {
        self.groups.get(group).map_or((0, 0), |g| (g.shift, g.mask))
    }

    /// The key of `fp` in group `group`: fingerprints with equal keys must meet in one
    /// partition of the group.
    pub fn key(&self, group: usize, fp: u64) -> u64 {
        let (shift, mask) = self.key_bits(group);
        fp.checked_shr(shift).unwrap_or(0) & mask
    }

    /// The partition of `fp` among the `parts` partitions of group `group`: a hash of its
    /// key, so that equal keys meet.
    pub fn partition(&self, group: usize, fp: u64, parts: usize) -> usize {
        let h = self.key(group, fp).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32;
        ((h * parts as u64) >> 32) as usize
    }

    /// The map side of a distributed run: one task's fingerprints (any order, repeats
    /// allowed) cut into the partitions of every group, `parts[g]` partitions for group
    /// `g`, numbered group after group. Each distinct fingerprint goes once to its
    /// partition in each group; a fingerprint the task holds more than once also goes to
    /// the `repeated` list of its group-0 partition, so a task holding a million copies
    /// sends one value (and one repeat) on.
    pub fn scatter(&self, mut fps: Vec<u64>, parts: &[usize]) -> Result<Scattered> {
        if parts.len() != self.groups.len() || parts.contains(&0) {
            return Err(Error::InvalidArgument(format!("{} partition counts for {} groups (each at least 1): {parts:?}", parts.len(), self.groups.len())));
        }
        sort_u64(&mut fps);
        let total: usize = parts.iter().sum();
        let mut out = Scattered { fps: vec![Vec::new(); total], repeated: vec![Vec::new(); total] };
        let parts0 = parts[0];
        for run in fps.chunk_by(|a, b| a == b).filter(|r| r.len() > 1) {
            out.repeated[self.partition(0, run[0], parts0)].push(run[0]);
        }
        fps.dedup();
        let mut first = 0usize;
        for (g, &n) in parts.iter().enumerate() {
            for &fp in &fps {
                out.fps[first + self.partition(g, fp, n)].push(fp);
            }
            first += n;
        }
        Ok(out)
    }

    /// Joins one partition of group `group`: `fps` must hold every fingerprint whose key in
    /// this group is one of the partition's keys (any order; repeats allowed, and counted
    /// as stored more than once), `repeated` those known to be stored more than once (from
    /// [`Self::scatter`]). Memory: `fps` and one permuted copy of its distinct values.
    pub fn join_partition(&self, group: usize, fps: Vec<u64>, repeated: &[u64]) -> Result<PartitionPairs> {
        let g = self.groups.get(group).ok_or_else(|| Error::InvalidArgument(format!("group {group}: the split has {} groups", self.groups.len())))?;
        let k = self.design.k();
        let mut out = PartitionPairs::default();
        // The group's first table, sorted by its prefix and then within each (small) prefix
        // group: copies are adjacent there, so the values are made distinct (and repeats
        // noted) without a full sort of the partition first.
        let Some((&first, rest)) = g.tables.split_first() else { return Ok(out) };
        let table = &self.design.tables()[first];
        let mut values: Vec<u64> = fps.iter().map(|&x| table.permutation.apply(x)).collect();
        drop(fps);
        sort_by_top_bits(&mut values, table.prefix_bits);
        let mask = table.prefix_mask();
        let mut distinct: Vec<u64> = Vec::with_capacity(values.len());
        let mut i = 0usize;
        while i < values.len() {
            let end = group_end(&values, i, mask);
            let run = &mut values[i..end];
            run.sort_unstable();
            for copies in run.chunk_by(|a, b| a == b) {
                distinct.push(copies[0]);
                if group == 0 && copies.len() > 1 {
                    out.repeated.push(table.permutation.invert(copies[0]));
                }
            }
            i = end;
        }
        if group == 0 {
            out.repeated.extend_from_slice(repeated);
            out.repeated.sort_unstable();
            out.repeated.dedup();
        }
        self.join_table(first, &distinct, k, &mut out.pairs);
        let fps: Vec<u64> = distinct.iter().map(|&v| table.permutation.invert(v)).collect();
        for &t in rest {
            let table = &self.design.tables()[t];
            values.clear();
            values.extend(fps.iter().map(|&x| table.permutation.apply(x)));
            sort_by_top_bits(&mut values, table.prefix_bits);
            self.join_table(t, &values, k, &mut out.pairs);
        }
        Ok(out)
    }

    /// The self-join of table `t` over `values` (distinct, permuted by the table, sorted by
    /// its prefix): every pair within `k` whose first shared table is `t`, into `pairs`.
    fn join_table(&self, t: usize, values: &[u64], k: u32, pairs: &mut Vec<(u64, u64)>) {
        let table = &self.design.tables()[t];
        let perm = &table.permutation;
        let earlier = &self.prefixes[..t];
        let mut emit = |a: u64, b: u64| {
            let (a, b) = (perm.invert(a), perm.invert(b));
            if earlier.iter().all(|&m| (a ^ b) & m != 0) {
                pairs.push((a.min(b), a.max(b)));
            }
        };
        // Prefix groups hold about one fingerprint each (the design's bound): walk them
        // linearly and join only the groups of two or more.
        let mask = table.prefix_mask();
        let mut i = 0usize;
        while i < values.len() {
            let end = group_end(values, i, mask);
            for x in i..end.saturating_sub(1) {
                cross_pairs(&values[x..=x], &values[x + 1..end], k, &mut emit);
            }
            i = end;
        }
    }
}

/// The end of the prefix group (values equal under `mask`) starting at `i`.
fn group_end(values: &[u64], i: usize, mask: u64) -> usize {
    let pv = values[i] & mask;
    let mut end = i + 1;
    while end < values.len() && values[end] & mask == pv {
        end += 1;
    }
    end
}
