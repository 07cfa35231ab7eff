//! The bounded full compaction ([`crate::engine::Index::compact`]): every segment merged
//! into one, in merges of bounded size.
//!
//! A merge is installed (its manifest durable) only when it is done: a process killed
//! during a merge loses that merge's work, and a merge longer than the time between kills
//! never lands. `CompactionOptions::max_merge_entries` bounds the input of every merge,
//! tiered and full alike: a full compaction then is a sequence of merges of adjacent
//! segments, each of at most that many entries and each installed before the next starts
//! ([`pick`]), so a kill loses at most one of them and every attempt after a kill
//! starts where the last one ended. The price: an index larger than the bound ends as
//! several segments (any two adjacent ones together above the bound, so at most
//! `2 * total / max_merge_entries + 1`), and queries probe each.

// Indexing: the policy indexes the live segment list by positions below its length, found by its own scans.
#![allow(clippy::indexing_slicing)]
use std::ops::Range;

use crate::engine::manifest::SegmentMeta;

/// The next merge of a full compaction bounded by `max_merge` entries: the longest run of
/// at least two adjacent segments (the oldest such run on a tie) that holds at most
/// `max_merge` entries, or a lone segment worth rewriting (`rewrite_single`: tombstones hide
/// some of its pairs) within the bound. `None` when no merge within the bound is left.
pub(super) fn pick(segments: &[SegmentMeta], max_merge: u64, rewrite_single: bool) -> Option<Range<usize>> {
    if segments.len() == 1 {
        return (rewrite_single && segments[0].entries <= max_merge).then_some(0..1);
    }
    let mut best: Option<Range<usize>> = None;
    for start in 0..segments.len() {
        let mut total = 0u64;
        let mut end = start;
        while end < segments.len() && total.saturating_add(segments[end].entries) <= max_merge {
            total += segments[end].entries;
            end += 1;
        }
        if end - start >= 2 && best.as_ref().is_none_or(|b| end - start > b.len()) {
            best = Some(start..end);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::compaction::test_segments::meta;

    #[test]
    fn full_merges_stay_within_max_merge_entries() {
        // full: the longest run within the bound, oldest first on a tie; a lone segment only
        // when tombstones hide some of it and it fits
        let segs: Vec<SegmentMeta> = [500, 30, 30, 30, 200, 10, 10].map(meta).to_vec();
        assert_eq!(pick(&segs, u64::MAX, false), Some(0..7));
        assert_eq!(pick(&segs, 100, false), Some(1..4));
        assert_eq!(pick(&segs, 60, false), Some(1..3));
        assert_eq!(pick(&segs, 19, false), None);
        assert_eq!(pick(&[meta(50)], 100, false), None);
        assert_eq!(pick(&[meta(50)], 100, true), Some(0..1));
        assert_eq!(pick(&[meta(500)], 100, true), None);
    }

    #[test]
    fn a_bounded_full_compaction_ends_with_no_two_adjacent_segments_within_the_bound() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for bound in [50u64, 333, 1000, 5000] {
            let mut segs: Vec<SegmentMeta> = (0..200)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    meta(1 + x % 120)
                })
                .collect();
            let total: u64 = segs.iter().map(|s| s.entries).sum();
            while let Some(r) = pick(&segs, bound, false) {
                let entries: u64 = segs[r.clone()].iter().map(|s| s.entries).sum();
                assert!(entries <= bound && r.len() >= 2);
                segs.splice(r, [meta(entries)]);
            }
            assert_eq!(segs.iter().map(|s| s.entries).sum::<u64>(), total);
            assert!(segs.windows(2).all(|w| w[0].entries + w[1].entries > bound), "bound {bound}: two adjacent segments left that fit");
            assert!((segs.len() as u64) <= 2 * total / bound + 1, "bound {bound}: {} segments", segs.len());
        }
    }
}
