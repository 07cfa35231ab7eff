//! Simulations of the policies over many flushes: the automatic policy as [`choose`] runs
//! it (tiered, then absorbing), and the tiered policy alone, under flushes of random sizes,
//! lost merges and merges that lag behind flushes. They check the shapes the module docs
//! promise: few segments while the index is small, a live count logarithmic in the data,
//! and bounded rewrites.

use std::ops::Range;

use super::test_segments::meta;
use super::{choose, tiered, Choice, CompactionOptions, Strategy};
use crate::engine::manifest::SegmentMeta;

/// The automatic policy's next merge, as the engine asks for it.
fn automatic(segments: &[SegmentMeta], flush_size: u64, fanout: usize, max_merge: u64) -> Option<Range<usize>> {
    let options = CompactionOptions { fanout, max_merge_entries: max_merge, ..CompactionOptions::default() };
    match choose(Strategy::Automatic { flush_size }, segments, &options) {
        Choice::Merge(range) => Some(range),
        Choice::DoNothing => None,
    }
}

#[test]
fn the_automatic_policy_tries_the_tiered_merge_first() {
    // the tiered merge comes first (it works through backlogs fanout at a time)
    let segs: Vec<SegmentMeta> = [1600, 100, 100, 100, 100, 100].map(meta).to_vec();
    assert_eq!(automatic(&segs, 100, 4, u64::MAX), Some(1..5));
    assert_eq!(automatic(&[1600, 400, 100].map(meta), 100, 4, u64::MAX), Some(1..3));
}

/// Applies the automatic policy after every flush of `flushes` (entries each) and returns,
/// after each, the live segment sizes; plus the entries all merges wrote.
fn settle_after_flushes(flushes: &[u64], flush: u64, fanout: usize) -> (Vec<Vec<u64>>, u64) {
    let mut segs: Vec<SegmentMeta> = Vec::new();
    let mut written = 0u64;
    let mut shapes = Vec::new();
    for &f in flushes {
        segs.push(meta(f));
        while let Some(r) = automatic(&segs, flush, fanout, u64::MAX) {
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
    random_flushes_stay_logarithmic(0x9e37_79b9_7f4a_7c15, automatic, false);
}

#[test]
fn the_live_segment_count_stays_logarithmic_under_flushes_deletes_and_lost_merges() {
    random_flushes_stay_logarithmic(0x2545_f491_4f6c_dd1d, tiered::pick, true);
}

type Picker = fn(&[SegmentMeta], u64, usize, u64) -> Option<Range<usize>>;

/// The background thread's view: merges take time (`cost` flush intervals per flush of
/// entries merged) while flushes keep arriving, one merge at a time, as in `simdex insert`;
/// at the end (`close`) the merge in flight lands and the policy runs to completion.
/// Returns the segments left, the most seen while flushing, and the entries rewritten.
fn lagging_merges(flushes: usize, fanout: usize, cost: f64) -> (Vec<u64>, usize, u64) {
    let flush = 1u64 << 20;
    let mut segs: Vec<SegmentMeta> = Vec::new();
    let mut busy: Option<(Range<usize>, u64, f64)> = None;
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
            match automatic(&segs, flush, fanout, u64::MAX) {
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

/// Flushes of 1 to 100 entries, one round in ten losing its merges (a crash), merges
/// chosen by `picker` (each of exactly `fanout` segments when `exact_fanout`) keeping 70%
/// to 100% of their inputs (deleted pairs dropped): after every round the live count is
/// within the tiered bound.
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
