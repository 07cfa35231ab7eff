//! The gap symbols: how the gap between two successive sorted fingerprints becomes a symbol
//! and its payload ([`Codec`], [`EQUAL`]), and back (the [`Gaps`] rule per codec that the
//! block decoder is compiled for).

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::undocumented_unsafe_blocks)]

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
        match self {
            Codec::Xor => XorGaps::apply(prev, h, payload),
            Codec::Delta => DeltaGaps::apply(prev, h, payload),
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

/// How a gap rebuilds the next entry; one implementation per [`Codec`], so the decoding
/// loop is compiled once per codec with no dispatch inside it.
pub(crate) trait Gaps {
    /// True when an entry's bits above its gap symbol `h` are the previous entry's, so
    /// that entries with a small `h` cannot change a prefix (the XOR code).
    const KEEPS_HIGH_BITS: bool;

    /// The entry after `prev` with gap symbol `h < 64` and `payload`, or `None` when no
    /// sorted successor has this gap.
    fn apply(prev: u64, h: u32, payload: u64) -> Option<u64>;
}

/// The paper's XOR code.
pub(crate) enum XorGaps {}
/// The difference code.
pub(crate) enum DeltaGaps {}

impl Gaps for XorGaps {
    const KEEPS_HIGH_BITS: bool = true;

    #[inline(always)]
    fn apply(prev: u64, h: u32, payload: u64) -> Option<u64> {
        // Above h the entries agree, bit h goes from 0 to 1, below it is the payload.
        let high = prev >> h;
        if high & 1 != 0 {
            return None;
        }
        Some((high | 1) << h | payload)
    }
}

impl Gaps for DeltaGaps {
    const KEEPS_HIGH_BITS: bool = false;

    #[inline(always)]
    fn apply(prev: u64, h: u32, payload: u64) -> Option<u64> {
        prev.checked_add(1u64 << h | payload)
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
