//! Counting a sorted sequence's gap symbols ([`SymbolHistogram`]), from which its table's
//! Huffman code is built.

use super::gap::{Codec, SYMBOLS};
use super::huffman::Code;

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

    /// A histogram that goes on counting where one stopped: its counts, and the last value
    /// it was given (`None`: none yet).
    pub fn resume(counts: [u64; SYMBOLS], prev: Option<u64>) -> Self {
        Self { counts, prev }
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
