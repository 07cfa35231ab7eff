//! Seek hints: where a seek inside an XOR block may start instead of at its first entry.
//! A block's hints are found on its first use and kept beside its index entry
//! (`BlockIndex::hints`).

use crate::codec::{Cursor, XorGaps};
use crate::segment::block_index::SEEK_HINTS;

use super::table::Table;
use super::Segment;

impl Segment {
    /// Moves `cursor` (on block `b` of `table`, an XOR table, after its first entry) ahead
    /// to the furthest seek hint that is still below `lo`, and returns the `top` for
    /// [`Cursor::seek_step`] with `low_bits` from there; `None` leaves the cursor where it
    /// is. The block's hints are found on its first use.
    ///
    /// A hint marks an entry where the table's prefix changes (the XOR code rebuilds that
    /// entry whole from the prefix before it): its bit offset, its index and the prefix
    /// before it. Every entry before a hint has at most that prefix, so when the prefix
    /// is below `lo`'s, the seek may start at the hint, knowing only the prefix. Layout of
    /// a word: bit 63 set once the block's hints are found; bits 0..14 the bit offset (0:
    /// no hint in this word); bits 14..28 the entry; bits 28..63 the prefix before it.
    #[inline(always)]
    pub(super) fn restart_seek(&self, table: &Table, b: u64, cursor: &mut Cursor<'_>, lo: u64, low_bits: u32) -> Option<u64> {
        let table_low = 64 - table.design.prefix_bits;
        if table.design.prefix_bits > HINT_PREFIX_BITS || table.design.prefix_bits == 0 || low_bits < table_low || low_bits >= 64 {
            return None;
        }
        let mut hints = table.index.hints(b);
        if hints[0] & HINT_BUILT == 0 {
            hints = self.find_hints(table, cursor, table_low);
            table.index.set_hints(b, hints);
        }
        let lo_prefix = lo >> table_low;
        let mut best = None;
        for h in hints {
            let (bit, entry, before) = ((h & 0x3fff) as usize, ((h >> 14) & 0x3fff) as u32, (h >> 28) & HINT_PREFIX_MASK);
            if bit != 0 && before < lo_prefix {
                best = Some((bit, entry, before));
            }
        }
        let (bit, entry, before) = best?;
        cursor.restart(bit, entry).then(|| before >> (low_bits - table_low))
    }

    /// Decodes the block under `cursor` (a copy: the cursor does not move) and returns its
    /// seek hints: for each quarter of its entries, the first entry from there on where
    /// the prefix (the bits above `table_low`) changes. A block that does not decode gets
    /// no hints (the query's own decoding reports it).
    #[cold]
    #[inline(never)]
    fn find_hints(&self, table: &Table, cursor: &Cursor<'_>, table_low: u32) -> [u64; SEEK_HINTS] {
        let mut hints = [HINT_BUILT; SEEK_HINTS];
        let _ = table;
        let mut c = *cursor;
        let count = c.remaining() + 1;
        let mut prefix = c.prev() >> table_low;
        let mut slot = 0usize;
        let mut entry = 1u32;
        while c.remaining() > 0 && slot < SEEK_HINTS {
            let bit = c.bit();
            let Ok(v) = c.next::<XorGaps>() else { return [HINT_BUILT; SEEK_HINTS] };
            let p = v >> table_low;
            if p != prefix {
                // This entry fills every slot whose quarter starts at or before it.
                while slot < SEEK_HINTS && (slot as u64 * u64::from(count)).div_ceil(SEEK_HINTS as u64) <= u64::from(entry) {
                    if let Some(h) = hints.get_mut(slot) {
                        *h = HINT_BUILT | (prefix & HINT_PREFIX_MASK) << 28 | u64::from(entry) << 14 | bit as u64;
                    }
                    slot += 1;
                }
                prefix = p;
            }
            entry += 1;
        }
        hints
    }
}

/// Set in every seek hint word once the block's hints are found.
const HINT_BUILT: u64 = 1 << 63;
/// Longest table prefix seek hints hold.
const HINT_PREFIX_BITS: u32 = 35;
const HINT_PREFIX_MASK: u64 = (1 << HINT_PREFIX_BITS) - 1;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use std::path::Path;

    use super::HINT_BUILT;
    use crate::codec::XorGaps;
    use crate::segment::block_index::SEEK_HINTS;
    use crate::segment::{build_segment, BuildOptions, Segment};

    #[test]
    fn a_seek_starts_at_the_furthest_hint_below_its_prefix() {
        let mut x = 9u64;
        let fps: Vec<u64> = (0..20_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            })
            .collect();
        let storage = crate::storage::MemStorage::default();
        let path = Path::new("s.sdx");
        build_segment(&storage, path, &fps, None, &BuildOptions::default()).unwrap();
        let seg = Segment::open_with(&storage, path).unwrap();
        let table = &seg.tables()[0];
        let low = 64 - table.design().prefix_bits;
        let b = table.block_count() / 2;
        let mut entries = Vec::new();
        seg.visit_block(0, b, |v| {
            entries.push(v);
            true
        })
        .unwrap();
        assert_eq!(table.index.hints(b), [0; SEEK_HINTS], "no query has used the block yet");
        // Seek to the prefix of every entry of the block: the cursor lands on a prefix
        // change below it, and the seek from there finds the first entry of that prefix.
        let mut moved = 0;
        for &v in entries.iter().skip(1) {
            let lo = v >> low << low;
            let mut cursor = seg.cursor(0, b, table.block_entries(b)).unwrap();
            let first = cursor.first();
            if first >= lo {
                continue;
            }
            let mut top = cursor.seek_start(low);
            if let Some(t) = seg.restart_seek(table, b, &mut cursor, lo, low) {
                top = t;
                moved += 1;
            }
            assert!(table.index.hints(b)[0] & HINT_BUILT != 0);
            let mut found = None;
            while cursor.remaining() > 0 {
                if let Some(v) = cursor.seek_step::<XorGaps>(lo, low, &mut top).unwrap() {
                    found = Some(v);
                    break;
                }
            }
            assert_eq!(found, entries.iter().copied().find(|&e| e >= lo));
        }
        assert!(moved > entries.len() / 2, "{moved} of {} seeks started at a hint", entries.len());
    }
}
