//! The small tiers' absorbing merge, while the index is small.
//!
//! Every live segment costs a query a probe of each of its tables, and below about 10^7
//! entries a probe's cost hardly depends on the segment's size (it decodes about half a
//! block before its prefix run starts), so a few small segments cost as much as the one
//! large segment they sit next to. So while the index is small (at most `F^3` flushes in
//! all, `F` the fan-out), the small tiers also *absorb* ([`pick`]): when the two newest
//! segments together hold at most `F^2` flushes and the older holds at most `F` times the
//! newer, they merge. This keeps such an index at one segment plus a smaller one or two (at
//! 10^7 entries and 2^20-entry flushes: 9.4M + the last flush, or 8M + 1M + the last flush,
//! depending on how flushes and merges interleave; the tiered policy alone leaves 4M + 4M +
//! 1M + 0.5M), for about two more rewrites of each entry while the index is small. A larger
//! index tiers (`tiered`): its large segments dominate a query's cost (from about 1.7e7
//! entries a compacted design has 10 tables, not 4), and rewrites there are what the
//! ingest time budget can least afford.

use std::ops::Range;

use crate::engine::manifest::SegmentMeta;

/// The small tiers' absorbing merge (see the module doc): while all segments together
/// hold at most `fanout^3 * flush_size` entries, the two newest segments, when together
/// they hold at most `fanout^2 * flush_size` entries (and at most `max_merge`) and the older
/// holds at most `fanout` times the newer's entries. Each such merge removes a segment, so
/// repeated picks end; a segment past `fanout^2` flushes is never an input.
pub(super) fn pick(segments: &[SegmentMeta], flush_size: u64, fanout: usize, max_merge: u64) -> Option<Range<usize>> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::compaction::test_segments::meta;
    use crate::engine::compaction::tiered;

    #[test]
    fn small_tiers_absorb_the_newest_segment() {
        // flush size 100, fan-out 4: merges of up to 1,600 entries, the older at most 4x
        let pick_s = |sizes: &[u64]| pick(&sizes.iter().copied().map(meta).collect::<Vec<_>>(), 100, 4, u64::MAX);
        assert_eq!(pick_s(&[100]), None);
        assert_eq!(pick_s(&[100, 100]), Some(0..2));
        assert_eq!(pick_s(&[3000, 400, 100]), Some(1..3));
        assert_eq!(pick_s(&[3000, 500, 100]), None, "the older is more than 4x the newer");
        assert_eq!(pick_s(&[3000, 1000, 700]), None, "together above 16 flushes");
        assert_eq!(pick_s(&[800, 800]), Some(0..2));
        assert_eq!(tiered::pick(&[800, 800].map(meta), 100, 4, u64::MAX), None, "the tiered policy alone waits for four");
        // within max_merge entries, and a fan-out below 2 counts as 2
        assert_eq!(pick(&[100, 100].map(meta), 100, 4, 199), None);
        assert_eq!(pick(&[200, 100].map(meta), 100, 0, u64::MAX), Some(0..2));
        assert_eq!(pick(&[300, 100].map(meta), 100, 1, u64::MAX), None);
        // only while the whole index holds at most fanout^3 flushes
        assert_eq!(pick_s(&[4700, 1200, 400, 100]), Some(2..4));
        assert_eq!(pick_s(&[4800, 1200, 400, 100]), None);
    }
}
