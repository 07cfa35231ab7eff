//! The settling merge: the live set a query meets within a bound of one segment's cost,
//! kept by the maintenance thread in the background while the index is open (after the
//! automatic policy's merges; a close stops it at a checkpoint, and the next open goes on).
//!
//! Every live segment costs a query a search and a block of every table, whatever its size
//! (about 1 us a table, against about 4 ns an entry decoded: `benches/RESULTS.md`, "Speed
//! III"), so the size-tiered policy's shape (up to three segments a tier: 11 segments, 6x one
//! segment's query at 2^28) is what queries pay until more merges. So ([`pick`]): when the
//! live set's modeled query cost is above `target` times one segment's holding everything,
//! the newest segments merge, as few as bring it within the bound (a small tail merges alone
//! when that is enough: a crawl resumed on a large index rewrites only what it added), else
//! all of them.
//!
//! The model ([`query_cost`]) is the planner's: each table's probe decodes its expected run
//! plus [`SEARCH_ENTRIES`] for the search and the entries before the run.

// Indexing: the policy indexes the live segment list by positions below its length.
#![allow(clippy::indexing_slicing)]
use std::ops::Range;

use crate::engine::manifest::SegmentMeta;
use crate::plan::{planned_design, PlanOptions, ProbePlan};

/// A table probe's cost besides its run, in entries decoded: the search over block keys,
/// the block's first read and the entries before the run. Measured on the live sets of
/// `benches/speed.py` (a 9.44M + 0.56M live set at 1e7 costs 1.72x one segment).
pub(crate) const SEARCH_ENTRIES: f64 = 250.0;

/// The modeled cost of a `k` query on one segment of `count` entries with the planner's
/// design for it, in entries decoded.
pub(crate) fn query_cost(count: u64, k: u32) -> f64 {
    let Ok(design) = planned_design(&PlanOptions::new(count.max(1), k)) else { return f64::INFINITY };
    match ProbePlan::new(&design, k, count) {
        Ok(p) => p.tables().iter().map(|t| SEARCH_ENTRIES + count as f64 / 2f64.powi(t.probe_bits as i32)).sum(),
        Err(_) => f64::INFINITY,
    }
}

/// The modeled cost of a live set over that of one segment holding all its entries.
pub(crate) fn cost_ratio(sizes: impl Iterator<Item = u64> + Clone, k: u32) -> f64 {
    let total: u64 = sizes.clone().sum();
    sizes.map(|n| query_cost(n, k)).sum::<f64>() / query_cost(total, k)
}

/// The settling merge of `segments` (oldest first): `None` when their modeled cost is
/// within `target` times one segment's (or one segment is left); else the shortest run of
/// the newest segments whose merge brings it within the bound, else all of them; each
/// within `max_merge` entries (none when even the smallest such run is above it).
pub(super) fn pick(segments: &[SegmentMeta], k: u32, target: f64, max_merge: u64) -> Option<Range<usize>> {
    let n = segments.len();
    if n < 2 {
        return None;
    }
    let sizes = |merged: usize| {
        let tail: u64 = segments[merged..].iter().map(|s| s.entries).sum();
        segments[..merged].iter().map(|s| s.entries).chain(std::iter::once(tail))
    };
    if cost_ratio(segments.iter().map(|s| s.entries), k) <= target {
        return None;
    }
    let start = (0..n - 1).rev().find(|&start| cost_ratio(sizes(start), k) <= target).unwrap_or(0);
    let entries: u64 = segments[start..].iter().map(|s| s.entries).fold(0, u64::saturating_add);
    (entries <= max_merge).then_some(start..n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::compaction::test_segments::meta;

    const M: u64 = 1 << 20;

    #[test]
    fn a_tiered_live_set_settles_into_one_segment() {
        // what the tiered policy leaves at 2^28: 11 segments, about 6x one
        let tiered = [67 * M, 67 * M, 67 * M, 16 * M, 16 * M, 16 * M, 4 * M, 4 * M, 4 * M, M, M];
        let segs: Vec<SegmentMeta> = tiered.map(meta).to_vec();
        assert!(cost_ratio(tiered.iter().copied(), 3) > 4.0);
        assert_eq!(pick(&segs, 3, 1.5, u64::MAX), Some(0..11));
        assert_eq!(pick(&segs, 3, 1.5, 100 * M), None, "a merge above max_merge is not made");
        // 1e7 as `add` leaves it: 9.44M + 0.56M is more than 1.5x one segment
        assert_eq!(pick(&[meta(9_440_000), meta(560_000)], 3, 1.5, u64::MAX), Some(0..2));
        assert_eq!(pick(&[meta(10 * M)], 3, 1.5, u64::MAX), None);
    }

    #[test]
    fn a_small_tail_on_a_large_segment_merges_alone() {
        // a large segment and one flush: within the bound, nothing to do
        assert_eq!(pick(&[meta(256 * M), meta(M)], 3, 1.5, u64::MAX), None);
        // a resumed crawl's flushes: only they merge
        let segs: Vec<SegmentMeta> = [256 * M, M, M / 2, M / 2].map(meta).to_vec();
        let r = pick(&segs, 3, 1.5, u64::MAX).unwrap();
        assert_eq!(r, 1..4);
        let mut after: Vec<u64> = segs[..r.start].iter().map(|s| s.entries).collect();
        after.push(segs[r.clone()].iter().map(|s| s.entries).sum());
        assert!(cost_ratio(after.iter().copied(), 3) <= 1.5);
        // a larger tail (8M in a 4-table segment) would cost more than the bound: all merge
        assert_eq!(pick(&[256 * M, 4 * M, M, M, M, M].map(meta), 3, 1.5, u64::MAX), Some(0..6));
    }
}
