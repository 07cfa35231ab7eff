//! [`Permutation`]: a bit permutation stored as contiguous runs of bits, so applying it and
//! its inverse is a few shifts and masks. It knows nothing of blocks or designs.

// Indexing: 64-entry bit-order arrays indexed by bit positions below 64.
#![allow(clippy::indexing_slicing)]
use std::fmt;

/// A bit permutation made of contiguous runs of bits, applied with shifts and masks.
///
/// Bits are numbered from the most significant (position 0) to the least (63), as in the
/// paper's figures. `order[i]` is the source position of destination position `i`.
#[derive(Clone, PartialEq, Eq)]
pub struct Permutation {
    order: [u8; 64],
    moves: Vec<Move>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Move {
    /// Shift of the run's least significant bit in the source word.
    src_shift: u8,
    /// Shift of the run's least significant bit in the destination word.
    dst_shift: u8,
    mask: u64,
}

impl Permutation {
    /// The identity permutation.
    pub fn identity() -> Self {
        let mut order = [0u8; 64];
        for (i, o) in order.iter_mut().enumerate() {
            *o = i as u8;
        }
        Self::from_order(order).expect("identity is a permutation")
    }

    /// Builds a permutation from `order[dst] = src` (positions counted from the MSB).
    /// Returns `None` unless `order` is a bijection of `0..64`.
    pub fn from_order(order: [u8; 64]) -> Option<Self> {
        let mut seen = 0u64;
        for &s in &order {
            if s >= 64 || seen & (1u64 << s) != 0 {
                return None;
            }
            seen |= 1u64 << s;
        }
        let mut moves = Vec::new();
        let mut i = 0usize;
        while i < 64 {
            let mut j = i + 1;
            while j < 64 && order[j] == order[j - 1] + 1 {
                j += 1;
            }
            let width = (j - i) as u32;
            // The run covers destination positions i..j and source positions order[i]..;
            // position q (from the MSB) is bit 63 - q.
            let dst_shift = (64 - j) as u8;
            let src_shift = (64 - (order[i] as usize + (j - i))) as u8;
            let mask = if width == 64 { u64::MAX } else { (1u64 << width) - 1 };
            moves.push(Move { src_shift, dst_shift, mask });
            i = j;
        }
        Some(Self { order, moves })
    }

    /// `order[dst] = src`, positions counted from the most significant bit.
    pub fn order(&self) -> &[u8; 64] {
        &self.order
    }

    /// True when the permutation moves no bit.
    pub fn is_identity(&self) -> bool {
        self.moves.len() == 1 && self.moves[0].src_shift == 0 && self.moves[0].dst_shift == 0
    }

    /// Applies the permutation: bit at source position `order[i]` goes to position `i`.
    #[inline]
    pub fn apply(&self, x: u64) -> u64 {
        let mut y = 0u64;
        for m in &self.moves {
            y |= ((x >> m.src_shift) & m.mask) << m.dst_shift;
        }
        y
    }

    /// The inverse of [`Permutation::apply`].
    #[inline]
    pub fn invert(&self, y: u64) -> u64 {
        let mut x = 0u64;
        for m in &self.moves {
            x |= ((y >> m.dst_shift) & m.mask) << m.src_shift;
        }
        x
    }
}

impl fmt::Debug for Permutation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Permutation({})", self.describe())
    }
}

impl Permutation {
    /// Human-readable runs of source positions in destination order, e.g. `16-31,0-15,32-63`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        let mut i = 0usize;
        while i < 64 {
            let mut j = i + 1;
            while j < 64 && self.order[j] == self.order[j - 1] + 1 {
                j += 1;
            }
            parts.push(format!("{}-{}", self.order[i], self.order[j - 1]));
            i = j;
        }
        parts.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_order_rejects_non_bijections() {
        let mut order = *Permutation::identity().order();
        order[5] = 4;
        assert!(Permutation::from_order(order).is_none());
        order[5] = 64;
        assert!(Permutation::from_order(order).is_none());
    }
}
