//! The segment metadata the policy tests feed the policies: only sizes matter to them.

use crate::engine::manifest::SegmentMeta;

/// A segment of `entries` entries (the rest zero).
pub(super) fn meta(entries: u64) -> SegmentMeta {
    SegmentMeta { number: 0, entries, file_len: 0, min_seq: 0, max_seq: 0 }
}
