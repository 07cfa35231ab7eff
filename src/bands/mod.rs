//! Sketch bands: the index that finds a segment's entries by their stored sketch, so that
//! the crawler's check (candidates within a wide `k`, confirmed by sketch at resemblance
//! 0.9: `crate::confirm`) costs a few exact-match lookups instead of thousands of
//! multi-probes (`format-spec/bands.md`).
//!
//! A sketch of 512 one-bit MinHash values is cut into 16 *bands* of 32 bits. Two documents
//! whose sketches agree on a whole band are candidates. The band file of a segment
//! (`seg-N.sdb`, beside `seg-N.sdx`) holds, for every band, the segment's entries bucketed by
//! the band's top bits, in blocks of 8 buckets: a directory of block ends (a base a group of
//! 64 blocks, and each block's end relative to it, in as few bits as the file needs) and
//! an entry stream, block after block: the entries' ordinals in table 0 (where their sketch,
//! id and fingerprint are found) Elias-Fano coded (high bits in unary, low bits packed) with
//! the band's low 5 bits as a tag (version 4; 6 in version 3): about 3.3 to 3.9 bytes an
//! entry and band at 2^22 to 2^28 entries. Looking a sketch up costs, per band, one
//! directory page and one or two entry pages, whatever the segment's size; a reader of a
//! mapped file keeps the directory pages in memory (0.45 bytes a fingerprint at 2^22 to
//! 2^26, 0.25 at 2^28) and, when its lookups wait for the disk, asks for every band's entry
//! pages at once, so that a cold check waits for one read instead of 16 in turn. Version 1 files
//! (5-byte entries, u32 bucket ends), version 2 files (bit-packed entries, grouped bucket
//! ends) and version 3 files (6-bit tags) are still read.
//!
//! What it finds: every stored sketch that shares a band with the query's. Pigeonhole: a
//! pair whose sketches differ in at most 15 of 512 bits (estimated resemblance >= 0.94)
//! always shares one of 16 bands; at the 0.90 threshold (25 bits) 98.9% do
//! (`benches/RESULTS.md`, "Speed III"). The band file is derived data: a pure function of
//! the segment's sketch column, rebuilt when missing or damaged, and checked page by page
//! like every other section.
//!
//! - `layout`: the head, the page layout and the offsets (mirrors the spec page);
//! - `build`: writing a segment's band file in bounded memory;
//! - `stream`: version 3's entry stream (writing blocks, finding a bucket in one);
//! - `read`: opening one (`BandFile`) and looking sketches up; checking every byte.
//!
//! It reads segments and writes its own files; which band files exist is the engine's.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::undocumented_unsafe_blocks)]

mod bins;
mod build;
pub(crate) mod layout;
#[cfg(test)]
mod oracle_tests;
mod read;
mod stream;

pub(crate) use build::{design_for, write_band_file, BuildBudget};
pub(crate) use read::BandFile;

pub use crate::plan::BandDesign;
pub(crate) use crate::plan::{BAND_BITS, MAX_BANDS, MAX_BUCKET_BITS, TAG_BITS};

/// The tag of band value `key` in a file with `bits`-bit tags: its low `bits` bits
/// (`TAG_BITS`, 5, in version 4; 6 in versions 2 and 3; 8 in version 1's).
#[inline]
pub fn tag(key: u32, bits: u32) -> u32 {
    key & ((1u32 << bits) - 1)
}

/// Band `b` of `sketch`: its bytes `4b .. 4b + 4`, little-endian (`None` past the end).
#[inline]
pub fn band_key(sketch: &[u8], b: u32) -> Option<u32> {
    let at = b as usize * 4;
    let bytes: &[u8; 4] = sketch.get(at..at + 4)?.try_into().ok()?;
    Some(u32::from_le_bytes(*bytes))
}

/// True when `a` and `b` agree on a whole band (of the first `bands`): what a band lookup
/// finds, once the candidates that share only a bucket and a tag are left out.
#[inline]
pub fn shares_band(a: &[u8], b: &[u8], bands: u32) -> bool {
    (0..bands).any(|i| band_key(a, i).is_some_and(|k| band_key(b, i) == Some(k)))
}

/// True when `sketch` stands for "no sketch" (all zero): such entries are not banded.
#[inline]
pub fn is_empty_sketch(sketch: &[u8]) -> bool {
    sketch.iter().all(|&b| b == 0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn keys_buckets_and_tags_are_the_band_bits() {
        let mut sketch = [0u8; 64];
        sketch[4..8].copy_from_slice(&0xdead_beefu32.to_le_bytes());
        assert_eq!(band_key(&sketch, 1), Some(0xdead_beef));
        assert_eq!(band_key(&sketch, 16), None);
        let d = BandDesign { bands: 16, bucket_bits: 12 };
        assert_eq!(d.bucket(0xdead_beef), 0xdea);
        assert_eq!(tag(0xdead_beef, 8), 0xef);
        assert_eq!(tag(0xdead_beef, 6), 0x2f);
        assert_eq!(BandDesign { bands: 16, bucket_bits: 0 }.bucket(0xdead_beef), 0);
    }
}
