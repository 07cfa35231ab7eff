//! Compressed sorted runs of fingerprints: the gap symbols, the Huffman code over them and
//! the 1 KB block that stores a run (paper section 3.2).
//!
//! A sorted sequence `x_0 <= x_1 <= ...` is stored as gaps between successive entries. Each
//! gap is one *symbol* followed by the symbol's payload bits:
//!
//! | codec | symbol for `prev -> cur` | payload | decode |
//! |---|---|---|---|
//! | [`Codec::Xor`] (the paper's) | `h` = position of the top 1-bit of `prev ^ cur` | the `h` bits of `cur` below `h` | `cur = (prev >> (h+1) << (h+1)) \| 1 << h \| payload` |
//! | [`Codec::Delta`] | `h` = position of the top 1-bit of `cur - prev` | the `h` bits of `cur - prev` below `h` | `cur = prev + (1 << h \| payload)` |
//!
//! Symbol [`EQUAL`] (64) means `cur == prev` and has no payload: exact duplicates are common
//! (every empty page has fingerprint 0). Symbols `0..=63` are `h`.
//!
//! The module owns the encoding and decoding of blocks and never reads outside the bytes it
//! is given; bad bytes produce a [`BlockError`], never a panic.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::undocumented_unsafe_blocks)]

mod block;
mod huffman;
pub mod reference;

pub(crate) use block::{Cursor, DeltaGaps, Gaps, XorGaps};
pub use block::{decode_block, encode_all, BlockEncoder, BlockError, BLOCK_BITS, BLOCK_BYTES};
pub use huffman::{limited_lengths, Code, CodeError};

/// Number of gap symbols: `h` in `0..=63` plus [`EQUAL`].
pub const SYMBOLS: usize = 65;
/// The symbol meaning "equal to the previous fingerprint".
pub const EQUAL: usize = 64;
/// Longest Huffman code word, in bits. Part of the format: readers reject longer codes.
pub const MAX_CODE_LEN: u32 = 12;

/// How the gap between successive sorted fingerprints is coded. Stored per table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Codec {
    /// The paper's code: the top set bit of the XOR, then the bits below it.
    #[default]
    Xor,
    /// The top set bit of the difference, then the bits below it.
    Delta,
}

impl Codec {
    /// The byte stored in the file.
    pub fn id(self) -> u8 {
        match self {
            Codec::Xor => 0,
            Codec::Delta => 1,
        }
    }

    /// The codec stored as `id`, if any.
    pub fn from_id(id: u8) -> Option<Self> {
        match id {
            0 => Some(Codec::Xor),
            1 => Some(Codec::Delta),
            _ => None,
        }
    }

    /// Lower-case name, as on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Codec::Xor => "xor",
            Codec::Delta => "delta",
        }
    }

    /// The symbol and payload for the gap `prev -> cur` (`prev <= cur`).
    #[inline]
    pub fn gap(self, prev: u64, cur: u64) -> (usize, u64) {
        let g = match self {
            Codec::Xor => prev ^ cur,
            Codec::Delta => cur.wrapping_sub(prev),
        };
        if g == 0 {
            return (EQUAL, 0);
        }
        let h = 63 - g.leading_zeros();
        // The XOR code stores cur's own bits below h; the delta code the difference's.
        let low = match self {
            Codec::Xor => cur,
            Codec::Delta => g,
        };
        (h as usize, low & low_mask(h))
    }

    /// Inverse of [`Codec::gap`] for a symbol `h < 64`; `None` when no sorted successor of
    /// `prev` has this gap (the XOR code's bit `h` is already set, or the sum overflows).
    #[inline]
    pub fn apply(self, prev: u64, h: u32, payload: u64) -> Option<u64> {
        use block::Gaps;
        match self {
            Codec::Xor => block::XorGaps::apply(prev, h, payload),
            Codec::Delta => block::DeltaGaps::apply(prev, h, payload),
        }
    }
}

impl std::str::FromStr for Codec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "xor" => Ok(Codec::Xor),
            "delta" => Ok(Codec::Delta),
            other => Err(format!("unknown codec {other:?}: expected xor or delta")),
        }
    }
}

/// Bits `0..h` set.
#[inline]
pub(crate) fn low_mask(h: u32) -> u64 {
    if h == 0 {
        0
    } else {
        u64::MAX >> (64 - h)
    }
}

/// Counts the gap symbols of a sorted sequence, to build its table's code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SymbolHistogram {
    counts: [u64; SYMBOLS],
    prev: Option<u64>,
}

impl SymbolHistogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Self { counts: [0; SYMBOLS], prev: None }
    }

    /// Adds the next value of the sorted sequence.
    #[inline]
    pub fn push(&mut self, codec: Codec, value: u64) {
        if let Some(prev) = self.prev {
            // The symbol is below SYMBOLS: `gap` returns `h <= 63` or EQUAL.
            if let Some(count) = self.counts.get_mut(codec.gap(prev, value).0) {
                *count += 1;
            }
        }
        self.prev = Some(value);
    }

    /// The histogram of a whole sorted slice.
    pub fn of_sorted(codec: Codec, values: &[u64]) -> Self {
        let mut h = Self::new();
        for &v in values {
            h.push(codec, v);
        }
        h
    }

    /// Occurrences per symbol.
    pub fn counts(&self) -> &[u64; SYMBOLS] {
        &self.counts
    }

    /// The optimal limited code for these counts.
    pub fn code(&self) -> Code {
        Code::from_frequencies(&self.counts)
    }
}

impl Default for SymbolHistogram {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn gap_and_apply_are_inverse() {
        let pairs = [(0u64, 1u64), (0, u64::MAX), (5, 5), (0x7fff_ffff_ffff_ffff, 0x8000_0000_0000_0000), (12, 13), (1 << 40, (1 << 40) + 12345)];
        for codec in [Codec::Xor, Codec::Delta] {
            for &(a, b) in &pairs {
                let (s, payload) = codec.gap(a, b);
                if s == EQUAL {
                    assert_eq!(a, b);
                } else {
                    assert_eq!(codec.apply(a, s as u32, payload), Some(b), "{codec:?} {a:x} {b:x}");
                }
            }
        }
    }

    #[test]
    fn impossible_gaps_are_refused() {
        assert_eq!(Codec::Xor.apply(0b100, 2, 0), None);
        assert_eq!(Codec::Delta.apply(u64::MAX, 0, 0), None);
    }
}
