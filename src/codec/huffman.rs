//! Canonical, length-limited Huffman codes over the 65 gap symbols.
//!
//! This module owns the code itself: optimal code lengths under a length limit
//! (package-merge), the canonical assignment of code words from lengths, validation of
//! lengths read from a file, and the table-driven decoder. It knows nothing about blocks.
//!
//! Code words are assigned canonically: symbols sorted by (length, symbol), the first gets
//! the all-zero word of its length, each next word is the previous plus one, shifted left
//! when the length grows (as in DEFLATE, RFC 1951 section 3.2.2). So the lengths alone
//! define the code, and a segment stores just the 65 lengths.

use super::gap::{EQUAL, MAX_CODE_LEN, SYMBOLS};

/// Why a set of stored code lengths is not a usable prefix code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodeError {
    /// A length is above [`MAX_CODE_LEN`].
    #[error("symbol {symbol} has code length {length}, above the limit {MAX_CODE_LEN}")]
    TooLong {
        /// The symbol.
        symbol: usize,
        /// Its stored length.
        length: u8,
    },
    /// The lengths violate the Kraft inequality: no prefix code has them.
    #[error("code lengths are over-subscribed (Kraft sum {numerator}/{denominator} > 1)")]
    OverSubscribed {
        /// Kraft sum numerator over `2^MAX_CODE_LEN`.
        numerator: u64,
        /// `2^MAX_CODE_LEN`.
        denominator: u64,
    },
}

/// A canonical prefix code over the 65 symbols, ready to encode and decode.
#[derive(Clone, Debug)]
pub struct Code {
    lengths: [u8; SYMBOLS],
    words: [u16; SYMBOLS],
    /// Longest length in use (0 when no symbol has a code).
    max_len: u32,
    /// Indexed by the next `max_len` bits: `symbol | length << 8`, or [`INVALID`].
    table: Vec<u16>,
    /// Indexed by the next [`FAST_BITS`] bits: a packed [`FastEntry`] for code words of
    /// up to `FAST_BITS` bits whose payload fits the decoder's common case, or [`SLOW`].
    /// 2 KB: stays in L1.
    fast: [u32; 1 << FAST_BITS],
    /// The `low_bits` the fast table's [`CHANGES_PREFIX`] flags were set for (0: none).
    marked_low_bits: u32,
}

/// A decoded code word in the fast table: `len | h << 4 | (len + h) << 12`, with
/// [`FAST_EQUAL`] for the `EQUAL` symbol (then `h = 0`), or [`SLOW`].
pub type FastEntry = u32;
/// Fast-table marker: decode this word with [`Code::decode_word`] (the word is longer than
/// [`FAST_BITS`], or its payload is too long for one 57-bit peek).
pub const SLOW: FastEntry = 1 << 31;
/// Fast-table flag: the word is the `EQUAL` symbol (the entry repeats the previous one).
pub const FAST_EQUAL: FastEntry = 1 << 29;
/// Fast-table flag set by [`Code::mark_prefix_changes`]: the word's `h` is at least the
/// table's number of low (non-prefix) bits, so with the XOR code the entry changes the
/// prefix.
pub const CHANGES_PREFIX: FastEntry = 1 << 30;
/// Longest word plus payload the fast path decodes from one peek.
pub const FAST_SPAN: u32 = 57;

/// Decoder table entry for bit patterns that start no code word.
pub const INVALID: u16 = u16::MAX;
/// Fast-table entry for bit patterns that start a word longer than [`FAST_BITS`].
const LONG: u16 = u16::MAX - 1;
/// Bits resolved by the small first-level decoding table.
pub const FAST_BITS: u32 = 9;

/// Fails unless `lengths` (0 = symbol unused) are all within [`MAX_CODE_LEN`] and satisfy
/// the Kraft inequality, that is, unless some prefix code has them.
fn check_lengths(lengths: &[u8; SYMBOLS]) -> Result<(), CodeError> {
    let mut kraft: u64 = 0;
    for (symbol, &length) in lengths.iter().enumerate() {
        if u32::from(length) > MAX_CODE_LEN {
            return Err(CodeError::TooLong { symbol, length });
        }
        if length > 0 {
            kraft += 1u64 << (MAX_CODE_LEN - u32::from(length));
        }
    }
    if kraft > 1u64 << MAX_CODE_LEN {
        return Err(CodeError::OverSubscribed { numerator: kraft, denominator: 1 << MAX_CODE_LEN });
    }
    Ok(())
}

impl Code {
    /// The optimal code for `freqs` with no word longer than [`MAX_CODE_LEN`] bits.
    /// Symbols with frequency 0 get no code. A single used symbol gets a 1-bit word.
    pub fn from_frequencies(freqs: &[u64; SYMBOLS]) -> Self {
        let lengths = limited_lengths(freqs, MAX_CODE_LEN);
        debug_assert_eq!(check_lengths(&lengths), Ok(()), "package-merge yields a valid limited code");
        Self::build(&lengths)
    }

    /// Validates stored lengths (0 = symbol unused) and builds the code.
    pub fn from_lengths(lengths: &[u8; SYMBOLS]) -> Result<Self, CodeError> {
        check_lengths(lengths)?;
        Ok(Self::build(lengths))
    }

    /// The code of lengths that passed [`check_lengths`]. (Other lengths give a code that
    /// decodes wrongly, but building it does not panic.)
    fn build(lengths: &[u8; SYMBOLS]) -> Self {
        let max_len = lengths.iter().copied().max().map_or(0, u32::from);
        // Symbols with a code, by (length, symbol): the canonical order.
        let mut order: Vec<(u32, usize)> = lengths.iter().enumerate().filter(|(_, &l)| l > 0).map(|(s, &l)| (u32::from(l), s)).collect();
        order.sort_unstable();
        let mut words = [0u16; SYMBOLS];
        let mut table = vec![INVALID; 1usize << max_len];
        let mut word: u32 = 0;
        let mut prev_len: u32 = 0;
        for (i, &(len, s)) in order.iter().enumerate() {
            if i > 0 {
                word = (word + 1) << (len - prev_len);
            } else {
                word <<= len;
            }
            prev_len = len;
            if let Some(w) = words.get_mut(s) {
                *w = word as u16;
            }
            // Every pattern of max_len bits that starts with the word decodes to it.
            let first = (word << (max_len - len)) as usize;
            let span = 1usize << (max_len - len);
            for e in table.get_mut(first..first + span).into_iter().flatten() {
                *e = s as u16 | (len as u16) << 8;
            }
        }
        // The table entry for the longest word starting with a pattern's FAST_BITS bits.
        let entry = |i: usize| {
            let at = if max_len <= FAST_BITS { i >> (FAST_BITS - max_len) } else { i << (max_len - FAST_BITS) };
            table.get(at).copied().unwrap_or(INVALID)
        };
        let fast: [u16; 1 << FAST_BITS] = std::array::from_fn(|i| {
            let e = entry(i);
            if e != INVALID && u32::from(e >> 8) > FAST_BITS {
                LONG
            } else if e == INVALID && max_len > FAST_BITS {
                // A pattern whose first FAST_BITS bits start no short word may still start
                // a long one somewhere below it: send those to the full table too.
                let span = 1usize << (max_len - FAST_BITS);
                let below = table.get(i * span..(i + 1) * span).unwrap_or_default();
                if below.iter().any(|&e| e != INVALID) {
                    LONG
                } else {
                    INVALID
                }
            } else {
                e
            }
        });
        let fast = fast.map(|e| {
            let (symbol, len) = ((e & 0xff) as u32, u32::from(e >> 8));
            if e >= LONG {
                SLOW
            } else if symbol == EQUAL as u32 {
                len | len << 12 | FAST_EQUAL
            } else if len + symbol > FAST_SPAN {
                SLOW
            } else {
                len | symbol << 4 | (len + symbol) << 12
            }
        });
        Self { lengths: *lengths, words, max_len, table, fast, marked_low_bits: 0 }
    }

    /// Code length per symbol (0 = no code).
    pub fn lengths(&self) -> &[u8; SYMBOLS] {
        &self.lengths
    }

    /// The code word of `symbol` (right-aligned) and its length; length 0 means no code.
    #[inline]
    pub fn word(&self, symbol: usize) -> (u64, u32) {
        match (self.words.get(symbol), self.lengths.get(symbol)) {
            (Some(&w), Some(&len)) => (u64::from(w), u32::from(len)),
            _ => (0, 0),
        }
    }

    /// Longest code word in bits.
    #[inline]
    pub fn max_len(&self) -> u32 {
        self.max_len
    }

    /// Decodes from the next `max_len` bits (MSB first): `(symbol, length)`, or `None` when
    /// they begin no code word.
    #[inline]
    pub fn decode(&self, peek: usize) -> Option<(usize, u32)> {
        match self.table.get(peek) {
            Some(&e) if e != INVALID => Some(((e & 0xff) as usize, u32::from(e >> 8))),
            _ => None,
        }
    }

    /// Decodes the code word at the top of `bits` (MSB first; at least `max_len` valid
    /// bits): `(symbol, length)`, or `None` when they begin no code word.
    #[inline(always)]
    pub fn decode_word(&self, bits: u64) -> Option<(usize, u32)> {
        if self.max_len == 0 {
            return None;
        }
        self.decode((bits >> (64 - self.max_len)) as usize)
    }

    /// Flags the fast-table entries whose `h` is at least `low_bits` with
    /// [`CHANGES_PREFIX`], for a table whose prefix leaves `low_bits` bits below it.
    pub fn mark_prefix_changes(&mut self, low_bits: u32) {
        for e in self.fast.iter_mut() {
            *e &= !CHANGES_PREFIX;
            if *e & (SLOW | FAST_EQUAL) == 0 && (*e >> 4) & 63 >= low_bits {
                *e |= CHANGES_PREFIX;
            }
        }
        self.marked_low_bits = low_bits;
    }

    /// True when the [`CHANGES_PREFIX`] flags are set for `low_bits`.
    #[inline(always)]
    pub fn marks_prefix(&self, low_bits: u32) -> bool {
        self.marked_low_bits == low_bits && low_bits != 0
    }

    /// The fast-table entry for the code word at the top of `bits` (see [`FastEntry`]).
    #[inline(always)]
    pub fn fast_entry(&self, bits: u64) -> FastEntry {
        // The index is below 2^FAST_BITS, the table's length: the check compiles away.
        self.fast.get((bits >> (64 - FAST_BITS)) as usize).copied().unwrap_or(SLOW)
    }
}

/// Optimal code lengths with no length above `limit` (package-merge, Larmore and Hirschberg
/// 1990). Symbols of frequency 0 get length 0; a lone used symbol gets length 1.
pub fn limited_lengths(freqs: &[u64; SYMBOLS], limit: u32) -> [u8; SYMBOLS] {
    let mut leaves: Vec<(u64, usize)> = freqs.iter().enumerate().filter(|(_, &f)| f > 0).map(|(s, &f)| (f, s)).collect();
    leaves.sort();
    // One symbol (a 1) per leaf.
    let only = |s: usize| -> [u8; SYMBOLS] { std::array::from_fn(|i| u8::from(i == s)) };
    match leaves.as_slice() {
        [] => return [0; SYMBOLS],
        &[(_, s)] => return only(s),
        _ => {}
    }
    debug_assert!(leaves.len() <= 1 << limit);
    // A node is a weight and how many times each symbol occurs below it.
    type Node = (u128, [u8; SYMBOLS]);
    let leaf_nodes: Vec<Node> = leaves.iter().map(|&(f, s)| (u128::from(f), only(s))).collect();
    let mut list: Vec<Node> = leaf_nodes.clone();
    for _ in 1..limit {
        let packages: Vec<Node> = list
            .chunks_exact(2)
            .filter_map(|pair| match pair {
                [(wa, ca), (wb, cb)] => {
                    let mut c = *ca;
                    for (a, b) in c.iter_mut().zip(cb) {
                        *a += b;
                    }
                    Some((wa + wb, c))
                }
                _ => None,
            })
            .collect();
        // Merge leaves and packages by weight; leaves first on ties keeps it deterministic.
        let mut merged = Vec::with_capacity(leaf_nodes.len() + packages.len());
        let (mut leaves, mut packages) = (leaf_nodes.iter().copied().peekable(), packages.into_iter().peekable());
        loop {
            let leaf_first = match (leaves.peek(), packages.peek()) {
                (Some(l), Some(p)) => l.0 <= p.0,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            merged.extend(if leaf_first { leaves.next() } else { packages.next() });
        }
        list = merged;
    }
    let mut lengths = [0u8; SYMBOLS];
    for node in list.iter().take(2 * leaves.len() - 2) {
        for (l, &c) in lengths.iter_mut().zip(&node.1) {
            *l += c;
        }
    }
    lengths
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn kraft(lengths: &[u8; SYMBOLS]) -> f64 {
        lengths.iter().filter(|&&l| l > 0).map(|&l| 0.5f64.powi(l as i32)).sum()
    }

    fn cost(freqs: &[u64; SYMBOLS], lengths: &[u8; SYMBOLS]) -> u64 {
        freqs.iter().zip(lengths).map(|(&f, &l)| f * u64::from(l)).sum()
    }

    /// Plain Huffman lengths (no limit) by repeatedly merging the two lightest nodes.
    fn huffman_unlimited(freqs: &[u64; SYMBOLS]) -> [u8; SYMBOLS] {
        let mut nodes: Vec<(u64, Vec<usize>)> =
            freqs.iter().enumerate().filter(|(_, &f)| f > 0).map(|(s, &f)| (f, vec![s])).collect();
        let mut lengths = [0u8; SYMBOLS];
        while nodes.len() > 1 {
            nodes.sort_by_key(|n| std::cmp::Reverse(n.0));
            let a = nodes.pop().unwrap();
            let b = nodes.pop().unwrap();
            for &s in a.1.iter().chain(&b.1) {
                lengths[s] += 1;
            }
            nodes.push((a.0 + b.0, [a.1, b.1].concat()));
        }
        lengths
    }

    #[test]
    fn limited_equals_huffman_when_limit_is_loose() {
        let mut freqs = [0u64; SYMBOLS];
        for (i, f) in freqs.iter_mut().enumerate().take(20) {
            *f = (i as u64 * 7919) % 101 + 1;
        }
        let a = limited_lengths(&freqs, MAX_CODE_LEN);
        let b = huffman_unlimited(&freqs);
        assert_eq!(cost(&freqs, &a), cost(&freqs, &b));
        assert!((kraft(&a) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn limit_is_respected_on_geometric_frequencies() {
        let mut freqs = [0u64; SYMBOLS];
        for (i, f) in freqs.iter_mut().enumerate() {
            *f = 1u64 << (63 - i.min(63));
        }
        let l = limited_lengths(&freqs, MAX_CODE_LEN);
        assert!(l.iter().all(|&x| (1..=MAX_CODE_LEN as u8).contains(&x)));
        assert!(kraft(&l) <= 1.0 + 1e-12);
        let code = Code::from_lengths(&l).unwrap();
        // Every symbol decodes back from its own word.
        for s in 0..SYMBOLS {
            let (w, len) = code.word(s);
            let peek = (w << (code.max_len() - len)) as usize;
            assert_eq!(code.decode(peek), Some((s, len)));
        }
    }

    #[test]
    fn lone_symbol_gets_one_bit_and_the_other_half_is_invalid() {
        let mut freqs = [0u64; SYMBOLS];
        freqs[64] = 1000;
        let code = Code::from_frequencies(&freqs);
        assert_eq!(code.word(64), (0, 1));
        assert_eq!(code.decode(0), Some((64, 1)));
        assert_eq!(code.decode(1), None);
    }

    #[test]
    fn oversubscribed_and_too_long_are_rejected() {
        let mut l = [0u8; SYMBOLS];
        l[0] = 1;
        l[1] = 1;
        l[2] = 1;
        assert!(matches!(Code::from_lengths(&l), Err(CodeError::OverSubscribed { .. })));
        let mut l = [0u8; SYMBOLS];
        l[3] = 13;
        assert!(matches!(Code::from_lengths(&l), Err(CodeError::TooLong { symbol: 3, length: 13 })));
    }
}
