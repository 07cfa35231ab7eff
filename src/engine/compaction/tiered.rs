//! The size-tiered policy: which adjacent segments merge after flushes, its backlog rule,
//! and the budget past which the engine stalls writes until merges catch up.
//!
//! Segments are kept in the order of their data (sequence numbers), oldest first. A
//! segment's *tier* is `floor(log_F(entries / flush_size))` with `F` the fan-out
//! (`CompactionOptions::fanout`, default 4). Whenever the newest `F` segments share a
//! tier (or are smaller), they merge into one (which lands about one tier up), and the
//! check repeats; a longer run of such segments (left by merges that crashes cut short, or
//! by flushes that arrived while a long merge ran) merges `F` at a time, oldest first, so
//! no merge grows with the backlog and none is stranded between larger segments; segments
//! within a factor of 2 of each other count as one tier there, so sizes straddling a tier
//! boundary (3 and 4 flushes) still merge. Like a base-`F` counter, this keeps at most
//! `F - 1` segments per tier, so the live count stays below
//! `(F - 1) * (1 + log_F(total / flush_size))` and query cost grows with the log of the
//! data size, while each entry is rewritten about `log_F(total / flush_size)` times.

// Indexing: the policy indexes the live segment list by positions below its length, found by its own scans.
#![allow(clippy::indexing_slicing)]
use std::ops::Range;

use crate::engine::manifest::SegmentMeta;

/// The segments (index range into `segments`, oldest first) the tiered policy merges next:
/// `fanout` adjacent segments of one tier, holding at most `max_merge` entries together.
pub(super) fn pick(segments: &[SegmentMeta], flush_size: u64, fanout: usize, max_merge: u64) -> Option<Range<usize>> {
    let fanout = fanout.max(2);
    if segments.len() < fanout {
        return None;
    }
    let tier = |entries: u64| {
        let mut t = 0u32;
        let mut size = flush_size.max(1);
        while entries >= size.saturating_mul(fanout as u64) && size < u64::MAX / fanout as u64 {
            size *= fanout as u64;
            t += 1;
        }
        t
    };
    let tiers: Vec<u32> = segments.iter().map(|s| tier(s.entries)).collect();
    let fits = |r: &Range<usize>| segments[r.clone()].iter().map(|s| s.entries).fold(0u64, u64::saturating_add) <= max_merge;
    let newest = tiers[tiers.len() - 1];
    let same = tiers.iter().rev().take_while(|&&t| t <= newest).count();
    // The oldest `fanout` of that run: a merge's size stays bounded even when segments
    // piled up (merges cut short by crashes again and again), and its output stays older
    // than the small segments left after it, so repeated picks work through the run. (When
    // they hold too many entries, the next `fanout` of the run.)
    let run = (tiers.len() - same..=tiers.len().saturating_sub(fanout)).map(|start| start..start + fanout);
    // Otherwise `fanout` adjacent segments of one tier further back (what working through a
    // backlog leaves behind the newest, smaller segments): of the newest such run, its
    // oldest `fanout`. (Taking its newest would strand the older ones between larger
    // segments, where no segment of their tier can join them again: with merges lagging
    // behind flushes, 2^28 entries were left as 22 segments that way.)
    // Segments of about one size count as one tier here even across a tier boundary (a run
    // alternating 3 and 4 flushes, which absorbing merges leave, would never merge).
    let alike = |a: usize, b: usize| tiers[a] == tiers[b] || segments[a].entries.max(segments[b].entries) <= segments[a].entries.min(segments[b].entries).saturating_mul(2);
    let back = (0..=tiers.len() - fanout).rev().filter(|&i| (i + 1..i + fanout).all(|j| alike(i, j))).map(|i| {
        let start = (0..i).rev().take_while(|&j| alike(j, i)).count();
        i - start..i - start + fanout
    });
    run.chain(back).find(fits)
}

/// True when the live segments are more than twice what the tiered policy keeps for their
/// total size, `2 * ((fanout - 1) * (2 + log_F(total / flush_size)) + fanout)`, not counting
/// segments too large to merge `fanout` at a time within `max_merge` entries: merges have
/// fallen behind flushes (the engine then stalls writes until they catch up).
pub(super) fn over_budget(segments: &[SegmentMeta], flush_size: u64, fanout: usize, max_merge: u64) -> bool {
    let full = max_merge / fanout.max(2) as u64;
    let mergeable: Vec<&SegmentMeta> = segments.iter().filter(|s| s.entries <= full).collect();
    let fanout = fanout.max(2) as f64;
    let total: u64 = mergeable.iter().map(|s| s.entries).sum();
    let tiers = (total as f64 / flush_size.max(1) as f64).max(1.0).log(fanout);
    mergeable.len() as f64 > 2.0 * ((fanout - 1.0) * (2.0 + tiers) + fanout)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::compaction::test_segments::meta;

    #[test]
    fn tiered_policy_merges_the_newest_fanout_of_a_tier() {
        let segs: Vec<SegmentMeta> = [100, 100, 100].map(meta).to_vec();
        assert_eq!(pick(&segs, 100, 4, u64::MAX), None);
        let segs: Vec<SegmentMeta> = [1600, 400, 100, 100, 100, 100].map(meta).to_vec();
        assert_eq!(pick(&segs, 100, 4, u64::MAX), Some(2..6));
        let segs: Vec<SegmentMeta> = [1600, 400, 400, 400, 400].map(meta).to_vec();
        assert_eq!(pick(&segs, 100, 4, u64::MAX), Some(1..5));
        let segs: Vec<SegmentMeta> = [400, 400, 400, 100].map(meta).to_vec();
        assert_eq!(pick(&segs, 100, 4, u64::MAX), None);
        // a backlog merges `fanout` at a time, oldest first
        let segs: Vec<SegmentMeta> = [1600, 100, 100, 100, 100, 100, 100, 100].map(meta).to_vec();
        assert_eq!(pick(&segs, 100, 4, u64::MAX), Some(1..5));
    }

    #[test]
    fn tiered_merges_stay_within_max_merge_entries() {
        // tiered: the oldest four of the run hold too much, the next four fit
        let segs: Vec<SegmentMeta> = [100, 100, 100, 100, 10, 10, 10, 10].map(meta).to_vec();
        assert_eq!(pick(&segs, 100, 4, 400), Some(0..4));
        assert_eq!(pick(&segs, 100, 4, 399), Some(1..5));
        assert_eq!(pick(&segs, 100, 4, 100), Some(4..8));
        assert_eq!(pick(&segs, 100, 4, 39), None);
    }

    #[test]
    fn a_backlog_of_small_segments_converges_with_bounded_merges() {
        // 3,000 segments of 20 entries (what thousands of flushes whose merges were all cut
        // short leave), flush size 24, fan-out 3: applying the policy to completion must use
        // merges of exactly 3 inputs and end within the tier bound.
        let (flush, fanout) = (24u64, 3usize);
        let mut segs: Vec<SegmentMeta> = vec![meta(20); 3000];
        let mut merges = 0;
        while let Some(r) = pick(&segs, flush, fanout, u64::MAX) {
            assert_eq!(r.len(), fanout);
            let entries = segs[r.clone()].iter().map(|s| s.entries).sum();
            segs.splice(r, [meta(entries)]);
            merges += 1;
        }
        let total: u64 = segs.iter().map(|s| s.entries).sum();
        assert_eq!(total, 60_000);
        let bound = (fanout as f64 - 1.0) * (1.0 + (total as f64 / flush as f64).log(fanout as f64));
        assert!((segs.len() as f64) <= bound, "{} segments left, bound {bound:.1}", segs.len());
        // each merge removes fanout - 1 segments
        assert_eq!(merges, (3000 - segs.len()) / (fanout - 1));
    }
}
