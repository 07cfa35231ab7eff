//! What the compaction tests build from: the segment metadata the policy tests feed the
//! policies (only sizes matter to them), and the pairs the merge tests store.

use crate::engine::manifest::SegmentMeta;

/// `count` xorshift fingerprints from `seed`, with ids `base..`.
pub(super) fn random_pairs(seed: u64, count: usize, base: u64) -> Vec<(u64, u64)> {
    let mut x = seed;
    (0..count as u64)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x, base + i)
        })
        .collect()
}

/// A segment of `entries` entries (the rest zero).
pub(super) fn meta(entries: u64) -> SegmentMeta {
    SegmentMeta { number: 0, entries, file_len: 0, min_seq: 0, max_seq: 0, epoch: 0 }
}
