//! The memtable's band index: the inserts whose sketch shares a band (`crate::bands`) with
//! a query's, found without sorting anything.
//!
//! One chained hash table a band over the memtable's sketch arena: a bucket's head and each
//! entry's link are arena offsets (plus one; 0 ends a chain), so an insert costs two stores
//! a band and nothing is merged or sorted later (a seal's entries are added band by band,
//! so one band's heads are in cache at a time). A lookup walks one chain a band and keeps the entries whose band equals the
//! query's (read back from the arena: the table stores no keys). The heads double when the
//! entries pass twice their number (the chains are rebuilt from the arena), so a chain holds
//! about two entries besides the true matches. About 96 bytes an entry at 16 bands (64 of
//! links, 16-32 of heads), against 128 for sorted `key << 32 | offset` arrays and their
//! merges' copies.
//!
//! It owns no sketches: the memtable passes its arena (`width` bytes an offset, all zero for
//! an offset without a sketch, which is not indexed).

// Indexing: heads and links are indexed by offsets and slots this file computed below their lengths.
#![allow(clippy::indexing_slicing)]

use crate::bands::{band_key, is_empty_sketch};
use crate::segment::prefetch_line;

/// Heads a band starts with (log2).
const FIRST_BITS: u32 = 12;

/// Most offsets an index is made ready for at once ([`MemBands::expecting`]: 32 MiB of
/// heads at 16 bands).
pub(super) const MAX_EXPECTED: usize = 1 << 20;

/// The multiplier that spreads a band's value over the heads (its top bits are taken).
const HASH: u32 = 0x9e37_79b1;

/// How many offsets ahead [`MemBands::index_to_end`] asks the CPU for a head's cache line.
const AHEAD: usize = 16;

/// The band index of a memtable's sketch arena.
#[derive(Default)]
pub(crate) struct MemBands {
    bands: u32,
    /// log2 of the heads a band.
    bits: u32,
    /// `heads[b << bits | slot]`: the newest offset (plus one) whose band `b` hashes to `slot`.
    heads: Vec<u32>,
    /// `links[b][offset]`: the next offset (plus one) of band `b`'s chain.
    links: Vec<Vec<u32>>,
    /// Offsets below this have been indexed (when they have a sketch).
    end: usize,
    /// Offsets indexed.
    count: usize,
}

impl MemBands {
    /// An empty index of `bands` bands with heads and links for `offsets` offsets (at most
    /// [`MAX_EXPECTED`]): a memtable that fills to its freeze threshold then never rebuilds
    /// its chains as the heads double (which would index every entry about twice more).
    pub fn expecting(bands: u32, offsets: usize) -> Self {
        let offsets = offsets.min(MAX_EXPECTED);
        let bits = MemBands { bits: FIRST_BITS, ..Self::default() }.bits_for(offsets);
        Self { bands, bits, heads: vec![0; (bands as usize) << bits], links: (0..bands).map(|_| Vec::with_capacity(offsets)).collect(), ..Self::default() }
    }

    fn slot(&self, b: u32, key: u32) -> usize {
        ((b as usize) << self.bits) | (key.wrapping_mul(HASH) >> (32 - self.bits)) as usize
    }

    /// Offsets of `arena` an index goes to (those below `u32::MAX`).
    fn end_of(arena: &[u8], width: usize) -> usize {
        arena.len().checked_div(width).map_or(0, |n| n.min(u32::MAX as usize - 1))
    }

    /// Heads a band (log2) for `count` offsets: at most two a head.
    fn bits_for(&self, count: usize) -> u32 {
        let mut bits = self.bits;
        while count > 2 << bits && bits < 31 {
            bits += 1;
        }
        bits
    }

    /// When indexing `arena` to its end calls for more heads: the whole index of it, built
    /// anew (with the heads doubled as often as needed); `None` when [`Self::index_to_end`]
    /// can add to this one. It reads `self` only, so a reader's lock will do.
    pub fn grown(&self, arena: &[u8], width: usize) -> Option<MemBands> {
        let end = Self::end_of(arena, width);
        let added = arena.get(self.end * width..end * width)?.chunks_exact(width.max(1)).filter(|s| !is_empty_sketch(s)).count();
        let bits = self.bits_for(self.count + added);
        (bits > self.bits).then(|| {
            let mut fresh =
                MemBands { bands: self.bands, bits, heads: vec![0; (self.bands as usize) << bits], links: vec![Vec::new(); self.bands as usize], ..MemBands::default() };
            fresh.index_to_end(arena, width);
            fresh
        })
    }

    /// Indexes the offsets of `arena` (`width` bytes each) from the first not yet indexed to
    /// its end, those below `u32::MAX` with a sketch.
    pub fn index_to_end(&mut self, arena: &[u8], width: usize) {
        let end = Self::end_of(arena, width);
        if end <= self.end {
            return;
        }
        if let Some(grown) = self.grown(arena, width) {
            *self = grown;
            return;
        }
        let (start, bits) = (self.end, self.bits);
        // the offsets with a sketch, found once (not once a band)
        let offsets: Vec<u32> = (start..end).filter(|&off| !is_empty_sketch(&arena[off * width..(off + 1) * width])).map(|off| off as u32).collect();
        let mut slots: Vec<(u32, u32)> = Vec::with_capacity(offsets.len());
        for (b, links) in (0u32..).zip(&mut self.links) {
            links.resize(end, 0);
            let heads = &mut self.heads[(b as usize) << bits..(b as usize + 1) << bits];
            // each offset's head slot first, so that a slot's head (a random line of the
            // band's heads, rarely in cache) is asked of the CPU AHEAD offsets before it is
            // read: the loads overlap instead of waiting one after another
            slots.clear();
            slots.extend(offsets.iter().filter_map(|&off| {
                let at = off as usize * width;
                band_key(&arena[at..at + width], b).map(|key| (off, key.wrapping_mul(HASH) >> (32 - bits)))
            }));
            for (i, &(off, slot)) in slots.iter().enumerate() {
                if let Some(&(_, ahead)) = slots.get(i + AHEAD) {
                    prefetch_line(&heads[ahead as usize]);
                }
                links[off as usize] = heads[slot as usize];
                heads[slot as usize] = off + 1;
            }
        }
        self.count += offsets.len();
        self.end = end;
    }

    /// Appends the indexed offsets whose sketch in `arena` shares a band with `sketch` (an
    /// offset once a band it shares).
    pub fn candidates(&self, sketch: &[u8], arena: &[u8], width: usize, out: &mut Vec<u32>) {
        if self.heads.is_empty() {
            return;
        }
        for b in 0..self.bands {
            let Some(key) = band_key(sketch, b) else { continue };
            let mut at = self.heads[self.slot(b, key)];
            while at != 0 {
                let off = (at - 1) as usize;
                if arena.get(off * width..(off + 1) * width).and_then(|s| band_key(s, b)) == Some(key) {
                    out.push(at - 1);
                }
                at = self.links[b as usize][off];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sketches of 16 bands whose band `b` takes one of `values` values (so bands collide).
    fn arena(n: usize, values: u32, seed: u64) -> Vec<u8> {
        let mut x = seed;
        let mut out = Vec::with_capacity(n * 64);
        for i in 0..n {
            for _ in 0..16 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let v = if i % 7 == 3 { 0 } else { (x % u64::from(values)) as u32 + 1 };
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        out
    }

    #[test]
    fn candidates_are_the_offsets_sharing_a_band_as_a_scan_finds_them() {
        let width = 64;
        for values in [3u32, 50, 5000, u32::MAX - 1] {
            let all = arena(9000, values, 0x2545_f491_4f6c_dd1d ^ u64::from(values));
            for expected in [0usize, 700, 9000] {
                let mut index = MemBands::expecting(16, expected);
                // indexed in growing prefixes, as seals do (and through the heads' doublings)
                for end in [0usize, 1, 700, 701, 4096, 9000] {
                    index.index_to_end(&all[..end * width], width);
                    let query_arena = arena(40, values, 7);
                    for q in query_arena.chunks_exact(width) {
                        let mut got = Vec::new();
                        index.candidates(q, &all, width, &mut got);
                        got.sort_unstable();
                        got.dedup();
                        let want: Vec<u32> = (0..end as u32)
                            .filter(|&o| {
                                let s = &all[o as usize * width..(o as usize + 1) * width];
                                !is_empty_sketch(s) && crate::bands::shares_band(q, s, 16)
                            })
                            .collect();
                        assert_eq!(got, want, "values {values}, {end} indexed, {expected} expected");
                    }
                }
            }
        }
    }

    #[test]
    fn empty_sketches_are_not_indexed() {
        let mut index = MemBands::expecting(16, 0);
        let all = vec![0u8; 64 * 10];
        index.index_to_end(&all, 64);
        let mut got = Vec::new();
        index.candidates(&[0u8; 64], &all, 64, &mut got);
        assert!(got.is_empty());
        assert_eq!(index.count, 0);
    }
}
