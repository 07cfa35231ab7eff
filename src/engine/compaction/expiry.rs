//! The expiry policy: in an index with an expiry window, which segments expired
//! (dropped whole: their manifest entries go, their files are deleted, nothing is
//! rewritten) and which segments may merge (only segments of one time slice, so that a
//! segment's slice stays the slice of every pair in it). The time slices themselves are the
//! engine's `expiry` module's; here a slice is a number on each segment's manifest entry.
//!
//! Segments are stored oldest first and slices never go back along them (the engine stamps
//! inserts no older than the log before), so the segments of one slice are adjacent: the
//! policy cuts the live list into runs of one slice and lets the strategy of the other
//! files choose within each. An index without a window has every segment in slice 0: one
//! run, and the choices are exactly the strategy's. Dropping costs a manifest replacement
//! per run of expired segments and the removal of their files: it grows with what expired,
//! not with what is kept.

// Indexing: ranges come from scans of the same list.
#![allow(clippy::indexing_slicing)]
use std::ops::Range;

use super::{choose, Choice, CompactionOptions, Strategy};
use crate::engine::manifest::SegmentMeta;

/// The maximal runs of adjacent segments of one time slice, oldest first.
pub(crate) fn slice_runs(segments: &[SegmentMeta]) -> Vec<Range<usize>> {
    let mut runs = Vec::new();
    let mut start = 0;
    for i in 1..=segments.len() {
        if i == segments.len() || segments[i].epoch != segments[start].epoch {
            if i > start {
                runs.push(start..i);
            }
            start = i;
        }
    }
    runs
}

/// The next merge `strategy` makes within one time slice: the newest run first (where
/// flushes arrive), then older ones. A range into `segments`.
pub(crate) fn choose_within_slices(strategy: Strategy, segments: &[SegmentMeta], options: &CompactionOptions) -> Choice {
    for run in slice_runs(segments).into_iter().rev() {
        if let Choice::Merge(r) = choose(strategy, &segments[run.clone()], options) {
            return Choice::Merge(run.start + r.start..run.start + r.end);
        }
    }
    Choice::DoNothing
}

/// True when some slice's run of segments is over the tiered policy's budget
/// ([`super::over_budget`]).
pub(crate) fn over_budget_within_slices(segments: &[SegmentMeta], flush_size: u64, options: &CompactionOptions) -> bool {
    slice_runs(segments).into_iter().any(|r| super::over_budget(&segments[r], flush_size, options))
}

/// The runs of adjacent segments whose slice is no longer `live`, oldest first: each is
/// dropped whole by one manifest replacement.
pub(crate) fn expired_runs(segments: &[SegmentMeta], live: impl Fn(u64) -> bool) -> Vec<Range<usize>> {
    let mut runs: Vec<Range<usize>> = Vec::new();
    for (i, s) in segments.iter().enumerate() {
        if live(s.epoch) {
            continue;
        }
        match runs.last_mut() {
            Some(r) if r.end == i => r.end = i + 1,
            _ => runs.push(i..i + 1),
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::compaction::test_segments::meta;

    fn sliced(sizes: &[(u64, u64)]) -> Vec<SegmentMeta> {
        sizes.iter().map(|&(entries, epoch)| SegmentMeta { epoch, ..meta(entries) }).collect()
    }

    #[test]
    fn merges_never_cross_a_slice() {
        let options = CompactionOptions::default();
        let auto = Strategy::Automatic { flush_size: 100 };
        // four alike segments, but of two slices: nothing merges across; the newest slice's
        // two absorb each other
        let segs = sliced(&[(100, 1), (100, 1), (100, 2), (100, 2)]);
        assert_eq!(choose(auto, &segs, &options), Choice::Merge(0..4), "without slices the tiered rule merges all four");
        assert_eq!(choose_within_slices(auto, &segs, &options), Choice::Merge(2..4));
        let segs = sliced(&[(100, 1), (100, 1), (200, 2)]);
        assert_eq!(choose_within_slices(auto, &segs, &options), Choice::Merge(0..2));
        assert_eq!(choose_within_slices(Strategy::Full { rewrite_single: false }, &sliced(&[(5, 1), (5, 2), (5, 3)]), &options), Choice::DoNothing);
        // every choice applied to the end leaves one segment per slice, never a mixed one
        let mut segs = sliced(&[(10, 1), (10, 1), (10, 1), (10, 2), (10, 3), (10, 3), (10, 3), (10, 3), (10, 3)]);
        while let Choice::Merge(r) = choose_within_slices(Strategy::Full { rewrite_single: false }, &segs, &options) {
            assert!(segs[r.clone()].iter().all(|s| s.epoch == segs[r.start].epoch));
            let entries = segs[r.clone()].iter().map(|s| s.entries).sum();
            let epoch = segs[r.start].epoch;
            segs.splice(r, [SegmentMeta { epoch, ..meta(entries) }]);
        }
        assert_eq!(segs.iter().map(|s| (s.entries, s.epoch)).collect::<Vec<_>>(), vec![(30, 1), (10, 2), (50, 3)]);
    }

    #[test]
    fn the_settling_merge_never_crosses_a_slice() {
        let options = CompactionOptions::default();
        let settle = Strategy::Settle { k: 3, percent: 150 };
        // 1e7 as `add` leaves it settles into one segment, unless its two are two slices
        let segs = sliced(&[(9_440_000, 0), (560_000, 0)]);
        assert_eq!(choose_within_slices(settle, &segs, &options), Choice::Merge(0..2));
        assert_eq!(choose(settle, &sliced(&[(9_440_000, 1), (560_000, 2)]), &options), Choice::Merge(0..2), "across slices the rule alone merges");
        assert_eq!(choose_within_slices(settle, &sliced(&[(9_440_000, 1), (560_000, 2)]), &options), Choice::DoNothing);
        // the newest slice settles on its own
        let segs = sliced(&[(9_440_000, 1), (9_440_000, 2), (560_000, 2)]);
        assert_eq!(choose_within_slices(settle, &segs, &options), Choice::Merge(1..3));
    }

    #[test]
    fn expired_runs_are_the_runs_of_dead_slices() {
        let segs = sliced(&[(1, 1), (1, 1), (1, 2), (1, 5), (1, 6)]);
        assert_eq!(expired_runs(&segs, |e| e >= 3), vec![0..3]);
        assert_eq!(expired_runs(&segs, |e| e != 2), vec![2..3]);
        assert!(expired_runs(&segs, |_| true).is_empty());
        assert_eq!(slice_runs(&segs), vec![0..2, 2..3, 3..4, 4..5]);
        assert!(slice_runs(&[]).is_empty());
    }
}
