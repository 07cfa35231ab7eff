//! Compaction: which segments to merge (size-tiered, over adjacent segments) and the
//! streaming merge itself (in `merge`, from the streams of `stream` and the sort of
//! `external_sort`).
//!
//! # Policy
//! Segments are kept in the order of their data (sequence numbers), oldest first. A
//! segment's *tier* is `floor(log_F(entries / flush_size))` with `F` the fan-out
//! ([`CompactionOptions::fanout`], default 4). Whenever the newest `F` segments share a
//! tier (or are smaller), they merge into one (which lands about one tier up), and the
//! check repeats; a longer run of such segments (left by merges that crashes cut short, or
//! by flushes that arrived while a long merge ran) merges `F` at a time, oldest first, so
//! no merge grows with the backlog and none is stranded between larger segments; segments
//! within a factor of 2 of each other count as one tier there, so sizes straddling a tier
//! boundary (3 and 4 flushes) still merge. Like a
//! base-`F` counter, this keeps at most `F - 1` segments per tier, so the live count stays
//! below `(F - 1) * (1 + log_F(total / flush_size))` and query cost grows with the log of
//! the data size, while each entry is rewritten about `log_F(total / flush_size)` times.
//!
//! Every live segment costs a query a probe of each of its tables, and below about 10^7
//! entries a probe's cost hardly depends on the segment's size (it decodes about half a
//! block before its prefix run starts), so a few small segments cost as much as the one
//! large segment they sit next to. So while the index is small (at most `F^3` flushes in
//! all), the small tiers also *absorb* ([`pick_small`]): when the two newest segments
//! together hold at most `F^2` flushes and the older holds at most `F` times the newer,
//! they merge. This keeps such an index at one segment plus a smaller one or two (at 10^7
//! entries and 2^20-entry flushes: 9.4M + the last flush, or 8M + 1M + the last flush,
//! depending on how flushes and merges interleave; the tiered policy alone leaves 4M + 4M +
//! 1M + 0.5M), for about two more rewrites of each entry while the index is small. A larger
//! index tiers as above: its large segments dominate a query's cost (from about 1.7e7
//! entries a compacted design has 10 tables, not 4), and rewrites there are what the
//! ingest time budget can least afford.
//! Only adjacent segments merge, so sequence ranges stay disjoint and the tombstone rule
//! (a delete hides copies in segments whose `max_seq` is older) keeps working. A full
//! compaction ([`crate::engine::Index::compact`]) merges everything into one segment.
//!
//! # Bounded merges
//! A merge is installed (its manifest durable) only when it is done: a process killed
//! during a merge loses that merge's work, and a merge longer than the time between kills
//! never lands. [`CompactionOptions::max_merge_entries`] bounds the input of every merge,
//! tiered and full alike: a full compaction then is a sequence of merges of adjacent
//! segments, each of at most that many entries and each installed before the next starts
//! ([`pick_full`]), so a kill loses at most one of them and every attempt after a kill
//! starts where the last one ended. The price: an index larger than the bound ends as
//! several segments (any two adjacent ones together above the bound, so at most
//! `2 * total / max_merge_entries + 1`), and queries probe each.

mod external_sort;
mod merge;
mod stream;

pub(crate) use merge::{merge, OutputFormat};

use crate::manifest::SegmentMeta;

/// How compaction chooses and merges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompactionOptions {
    /// Segments of one tier that trigger a merge, and the size ratio between tiers (>= 2);
    /// below `fanout^2` flushes the newest segments also absorb each other (see the
    /// module's policy; only while the index holds at most `fanout^3` flushes).
    pub fanout: usize,
    /// Fingerprints buffered in memory for sorting the permuted tables (8 bytes each),
    /// across all tables; beyond it the merge spills sorted runs to temporary files.
    pub buffer_entries: usize,
    /// Merge automatically after flushes (in the background thread when there is one).
    pub automatic: bool,
    /// Largest number of input entries one merge takes (tiered or full); segments whose
    /// merge would exceed it are left as they are. Unbounded by default (a full compaction
    /// is one merge); set it to what the machine merges between two kills where processes
    /// are killed often (about a million entries a second on one core).
    pub max_merge_entries: u64,
}

impl Default for CompactionOptions {
    fn default() -> Self {
        Self { fanout: 4, buffer_entries: 8 << 20, automatic: true, max_merge_entries: u64::MAX }
    }
}

/// The segments (index range into `segments`, oldest first) the tiered policy merges next:
/// `fanout` adjacent segments of one tier, holding at most `max_merge` entries together.
pub(crate) fn pick(segments: &[SegmentMeta], flush_size: u64, fanout: usize, max_merge: u64) -> Option<std::ops::Range<usize>> {
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
    let fits = |r: &std::ops::Range<usize>| segments[r.clone()].iter().map(|s| s.entries).fold(0u64, u64::saturating_add) <= max_merge;
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

/// The small tiers' absorbing merge (see the module's policy): while all segments together
/// hold at most `fanout^3 * flush_size` entries, the two newest segments, when together
/// they hold at most `fanout^2 * flush_size` entries (and at most `max_merge`) and the older
/// holds at most `fanout` times the newer's entries. Each such merge removes a segment, so
/// repeated picks end; a segment past `fanout^2` flushes is never an input.
pub(crate) fn pick_small(segments: &[SegmentMeta], flush_size: u64, fanout: usize, max_merge: u64) -> Option<std::ops::Range<usize>> {
    let fanout = fanout.max(2) as u64;
    let flush_size = flush_size.max(1);
    let cap = flush_size.saturating_mul(fanout * fanout).min(max_merge);
    if segments.iter().map(|s| s.entries).fold(0u64, u64::saturating_add) > flush_size.saturating_mul(fanout * fanout * fanout) {
        return None;
    }
    let n = segments.len();
    let [older, newer] = segments.get(n.checked_sub(2)?..)? else { return None };
    let together = older.entries.saturating_add(newer.entries);
    (together <= cap && older.entries <= newer.entries.saturating_mul(fanout)).then_some(n - 2..n)
}

/// The automatic policy's next merge: the tiered merge ([`pick`]) when one is due (it
/// works through backlogs `fanout` at a time), else the small tiers' absorbing merge
/// ([`pick_small`]).
pub(crate) fn pick_next(segments: &[SegmentMeta], flush_size: u64, fanout: usize, max_merge: u64) -> Option<std::ops::Range<usize>> {
    pick(segments, flush_size, fanout, max_merge).or_else(|| pick_small(segments, flush_size, fanout, max_merge))
}

/// The next merge of a full compaction bounded by `max_merge` entries: the longest run of
/// at least two adjacent segments (the oldest such run on a tie) that holds at most
/// `max_merge` entries, or a lone segment worth rewriting (`rewrite_single`: tombstones hide
/// some of its pairs) within the bound. `None` when no merge within the bound is left.
pub(crate) fn pick_full(segments: &[SegmentMeta], max_merge: u64, rewrite_single: bool) -> Option<std::ops::Range<usize>> {
    if segments.len() == 1 {
        return (rewrite_single && segments[0].entries <= max_merge).then_some(0..1);
    }
    let mut best: Option<std::ops::Range<usize>> = None;
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

/// True when the live segments are more than twice what the tiered policy keeps for their
/// total size, `2 * ((fanout - 1) * (2 + log_F(total / flush_size)) + fanout)`, not counting
/// segments too large to merge `fanout` at a time within `max_merge` entries: merges have
/// fallen behind flushes (the engine then stalls writes until they catch up).
pub(crate) fn over_budget(segments: &[SegmentMeta], flush_size: u64, fanout: usize, max_merge: u64) -> bool {
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

    fn meta(entries: u64) -> SegmentMeta {
        SegmentMeta { number: 0, entries, file_len: 0, min_seq: 0, max_seq: 0 }
    }

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
    fn merges_stay_within_max_merge_entries() {
        // tiered: the oldest four of the run hold too much, the next four fit
        let segs: Vec<SegmentMeta> = [100, 100, 100, 100, 10, 10, 10, 10].map(meta).to_vec();
        assert_eq!(pick(&segs, 100, 4, 400), Some(0..4));
        assert_eq!(pick(&segs, 100, 4, 399), Some(1..5));
        assert_eq!(pick(&segs, 100, 4, 100), Some(4..8));
        assert_eq!(pick(&segs, 100, 4, 39), None);
        // full: the longest run within the bound, oldest first on a tie; a lone segment only
        // when tombstones hide some of it and it fits
        let segs: Vec<SegmentMeta> = [500, 30, 30, 30, 200, 10, 10].map(meta).to_vec();
        assert_eq!(pick_full(&segs, u64::MAX, false), Some(0..7));
        assert_eq!(pick_full(&segs, 100, false), Some(1..4));
        assert_eq!(pick_full(&segs, 60, false), Some(1..3));
        assert_eq!(pick_full(&segs, 19, false), None);
        assert_eq!(pick_full(&[meta(50)], 100, false), None);
        assert_eq!(pick_full(&[meta(50)], 100, true), Some(0..1));
        assert_eq!(pick_full(&[meta(500)], 100, true), None);
    }

    #[test]
    fn small_tiers_absorb_the_newest_segment() {
        // flush size 100, fan-out 4: merges of up to 1,600 entries, the older at most 4x
        let pick_s = |sizes: &[u64]| pick_small(&sizes.iter().copied().map(meta).collect::<Vec<_>>(), 100, 4, u64::MAX);
        assert_eq!(pick_s(&[100]), None);
        assert_eq!(pick_s(&[100, 100]), Some(0..2));
        assert_eq!(pick_s(&[3000, 400, 100]), Some(1..3));
        assert_eq!(pick_s(&[3000, 500, 100]), None, "the older is more than 4x the newer");
        assert_eq!(pick_s(&[3000, 1000, 700]), None, "together above 16 flushes");
        assert_eq!(pick_s(&[800, 800]), Some(0..2));
        assert_eq!(pick(&[800, 800].map(meta), 100, 4, u64::MAX), None, "the tiered policy alone waits for four");
        // within max_merge entries, and a fan-out below 2 counts as 2
        assert_eq!(pick_small(&[100, 100].map(meta), 100, 4, 199), None);
        assert_eq!(pick_small(&[200, 100].map(meta), 100, 0, u64::MAX), Some(0..2));
        assert_eq!(pick_small(&[300, 100].map(meta), 100, 1, u64::MAX), None);
        // only while the whole index holds at most fanout^3 flushes
        assert_eq!(pick_s(&[4700, 1200, 400, 100]), Some(2..4));
        assert_eq!(pick_s(&[4800, 1200, 400, 100]), None);
        // the tiered merge comes first (it works through backlogs fanout at a time)
        let segs: Vec<SegmentMeta> = [1600, 100, 100, 100, 100, 100].map(meta).to_vec();
        assert_eq!(pick_next(&segs, 100, 4, u64::MAX), Some(1..5));
        assert_eq!(pick_next(&[1600, 400, 100].map(meta), 100, 4, u64::MAX), Some(1..3));
    }

    /// Applies the automatic policy after every flush of `flushes` (entries each) and returns,
    /// after each, the live segment sizes; plus the entries all merges wrote.
    fn settle_after_flushes(flushes: &[u64], flush: u64, fanout: usize) -> (Vec<Vec<u64>>, u64) {
        let mut segs: Vec<SegmentMeta> = Vec::new();
        let mut written = 0u64;
        let mut shapes = Vec::new();
        for &f in flushes {
            segs.push(meta(f));
            while let Some(r) = pick_next(&segs, flush, fanout, u64::MAX) {
                assert!(r.len() >= 2);
                let entries: u64 = segs[r.clone()].iter().map(|s| s.entries).sum();
                written += entries;
                segs.splice(r, [meta(entries)]);
            }
            shapes.push(segs.iter().map(|s| s.entries).collect());
        }
        (shapes, written)
    }

    #[test]
    fn the_policy_keeps_few_segments_below_fanout_squared_flushes_and_bounded_rewrites() {
        for fanout in [2usize, 3, 4, 5] {
            let flush = 1000u64;
            let f = fanout as u64;
            // full flushes: up to fanout^2 flushes of data the live set is one segment and
            // at most two smaller ones (each a fan-out below the one before it)
            let (shapes, _) = settle_after_flushes(&vec![flush; (f * f) as usize], flush, fanout);
            for (i, shape) in shapes.iter().enumerate() {
                assert!(shape.len() <= 3, "fan-out {fanout}, after flush {}: {shape:?}", i + 1);
                assert!(shape.windows(2).all(|w| w[0] > f * w[1]), "fan-out {fanout}, after flush {}: {shape:?}", i + 1);
            }
            // far more data: still logarithmic, and each entry rewritten at most
            // log_F(total / flush) + fanout - 1 times (the absorbing merges cost up to fanout - 1 of them)
            let n = 300usize;
            let (shapes, written) = settle_after_flushes(&vec![flush; n], flush, fanout);
            let log = (n as f64).log(fanout as f64);
            for (i, shape) in shapes.iter().enumerate() {
                let bound = (fanout as f64 - 1.0) * (1.0 + ((i + 1) as f64).log(fanout as f64)) + 2.0;
                assert!(shape.len() as f64 <= bound, "fan-out {fanout}, after flush {}: {} segments (bound {bound:.1})", i + 1, shape.len());
            }
            let rewrites = written as f64 / (n as u64 * flush) as f64;
            assert!(rewrites <= log + fanout as f64 - 1.0, "fan-out {fanout}: each entry rewritten {rewrites:.2} times (log_F {log:.2})");
        }
    }

    #[test]
    fn the_policy_stays_logarithmic_under_random_flushes_deletes_and_lost_merges() {
        random_flushes_stay_logarithmic(0x9e37_79b9_7f4a_7c15, pick_next, false);
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
            while let Some(r) = pick_full(&segs, bound, false) {
                let entries: u64 = segs[r.clone()].iter().map(|s| s.entries).sum();
                assert!(entries <= bound && r.len() >= 2);
                segs.splice(r, [meta(entries)]);
            }
            assert_eq!(segs.iter().map(|s| s.entries).sum::<u64>(), total);
            assert!(segs.windows(2).all(|w| w[0].entries + w[1].entries > bound), "bound {bound}: two adjacent segments left that fit");
            assert!((segs.len() as u64) <= 2 * total / bound + 1, "bound {bound}: {} segments", segs.len());
        }
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

    #[test]
    fn the_live_segment_count_stays_logarithmic_under_flushes_deletes_and_lost_merges() {
        random_flushes_stay_logarithmic(0x2545_f491_4f6c_dd1d, pick, true);
    }

    type Picker = fn(&[SegmentMeta], u64, usize, u64) -> Option<std::ops::Range<usize>>;

    /// Flushes of 1 to 100 entries, one round in ten losing its merges (a crash), merges
    /// chosen by `picker` (each of exactly `fanout` segments when `exact_fanout`) keeping 70%
    /// to 100% of their inputs (deleted pairs dropped): after every round the live count is
    /// within the tiered bound.
    /// The background thread's view: merges take time (`cost` flush intervals per flush of
    /// entries merged) while flushes keep arriving, one merge at a time, as in `simdex add`;
    /// at the end (`close`) the merge in flight lands and the policy runs to completion.
    /// Returns the segments left, the most seen while flushing, and the entries rewritten.
    fn lagging_merges(flushes: usize, fanout: usize, cost: f64) -> (Vec<u64>, usize, u64) {
        let flush = 1u64 << 20;
        let mut segs: Vec<SegmentMeta> = Vec::new();
        let mut busy: Option<(std::ops::Range<usize>, u64, f64)> = None;
        let mut free_at = 0f64;
        let (mut most, mut written) = (0usize, 0u64);
        for round in 0..=flushes {
            let now = round as f64;
            if round < flushes {
                segs.push(meta(flush));
            }
            loop {
                if let Some((r, entries, done)) = busy.clone() {
                    if done > now && round < flushes {
                        break;
                    }
                    segs.splice(r, [meta(entries)]);
                    written += entries;
                    free_at = done;
                    busy = None;
                }
                match pick_next(&segs, flush, fanout, u64::MAX) {
                    Some(r) => {
                        let entries: u64 = segs[r.clone()].iter().map(|s| s.entries).sum();
                        busy = Some((r, entries, free_at.max(now - 1.0) + cost * entries as f64 / flush as f64));
                    }
                    None => break,
                }
            }
            most = most.max(segs.len());
        }
        (segs.iter().map(|s| s.entries / flush).collect(), most, written)
    }

    #[test]
    fn merges_that_lag_behind_flushes_strand_no_segments() {
        // 2^28 entries in 256 flushes of 2^20 (`scale.sh 28`), merges from 5x faster than
        // ingest to as slow: once the last merges land, the shape is the tiered policy's (at
        // most F - 1 segments a tier; a merge that took the newest F of a longer run of one
        // tier used to strand the older ones between larger segments: 22 segments were left
        // at 2^28), and every entry is rewritten about log_F(flushes) times, not more.
        for cost in [0.2, 0.5, 1.0] {
            let (left, most, written) = lagging_merges(256, 4, cost);
            let rewrites = written as f64 / (256u64 << 20) as f64;
            eprintln!("cost {cost}: left {left:?}, at most {most} while flushing, {rewrites:.2} rewrites per entry");
            let bound = 3 * (1 + 4);
            assert!(left.len() <= bound, "cost {cost}: {} segments left: {left:?}", left.len());
            for w in left.windows(2) {
                assert!(w[0] >= w[1], "cost {cost}: a smaller segment older than a larger one: {left:?}");
            }
            assert!(rewrites <= 6.0, "cost {cost}: {rewrites:.2} rewrites per entry");
        }
    }

    fn random_flushes_stay_logarithmic(seed: u64, picker: Picker, exact_fanout: bool) {
        for fanout in [2usize, 3, 4] {
            let flush = 100u64;
            let mut x = seed ^ fanout as u64;
            let mut rand = |n: u64| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x % n
            };
            let mut segs: Vec<SegmentMeta> = Vec::new();
            for round in 0..5000 {
                segs.push(meta(1 + rand(flush)));
                if rand(10) == 0 {
                    continue;
                }
                while let Some(r) = picker(&segs, flush, fanout, u64::MAX) {
                    assert!(!exact_fanout || r.len() == fanout, "{r:?}");
                    let entries: u64 = segs[r.clone()].iter().map(|s| s.entries).sum();
                    segs.splice(r, [meta((entries * (70 + rand(31)) / 100).max(1))]);
                }
                let total: u64 = segs.iter().map(|s| s.entries).sum();
                let bound = (fanout as f64 - 1.0) * (2.0 + (total as f64 / flush as f64).max(1.0).log(fanout as f64)) + 3.0;
                assert!((segs.len() as f64) <= bound, "fan-out {fanout}, round {round}: {} segments for {total} entries (bound {bound:.1})", segs.len());
            }
        }
    }
}
