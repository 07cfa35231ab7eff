//! The 1 KB block: one sorted run of fingerprints, the first stored whole and each next one
//! as a Huffman-coded gap symbol plus payload bits, MSB first, zero-padded to 1024 bytes.
//!
//! The block does not record how many entries it holds or its checksum: the table's block
//! index does (see `format-spec/block.md`). The decoder is given that count and must be
//! told the bytes are the block's; it never reads outside them.

use byteorder::{BigEndian as BE, ByteOrder};

use super::huffman::{CHANGES_PREFIX, FAST_EQUAL, FAST_SPAN, SLOW};
use super::gap::{Codec, DeltaGaps, Gaps, XorGaps, EQUAL};
use super::huffman::Code;

/// Bytes in one block.
pub const BLOCK_BYTES: usize = 1024;
/// Bits in one block.
pub const BLOCK_BITS: usize = BLOCK_BYTES * 8;
/// Bits of the first, whole fingerprint.
const FIRST_BITS: usize = 64;
/// The encoder writes 16-byte words; this much slack keeps those writes in bounds.
const SLACK: usize = 16;

/// Why a block could not be decoded. Positions are bit offsets from the block's start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BlockError {
    /// The block is not [`BLOCK_BYTES`] long.
    #[error("block is {len} bytes, expected {BLOCK_BYTES}")]
    WrongSize {
        /// The length given.
        len: usize,
    },
    /// The block index says the block holds no entries, or more than can fit.
    #[error("entry count {count} is impossible for a {BLOCK_BYTES}-byte block")]
    BadCount {
        /// The stored count.
        count: u32,
    },
    /// The bits at `bit` begin no code word of the table's code.
    #[error("bit {bit}: no code word starts here (entry {entry})")]
    BadCode {
        /// Bit offset in the block.
        bit: usize,
        /// Entry index in the block.
        entry: u32,
    },
    /// A gap that no sorted successor can have (XOR bit already set, or overflow).
    #[error("bit {bit}: gap h = {h} is impossible after {prev:#018x} (entry {entry})")]
    BadGap {
        /// Bit offset in the block.
        bit: usize,
        /// Entry index in the block.
        entry: u32,
        /// The decoded symbol.
        h: u32,
        /// The previous entry.
        prev: u64,
    },
    /// The entries run past the end of the block.
    #[error("entry {entry} ends at bit {end}, past the block's {BLOCK_BITS} bits")]
    Overrun {
        /// Entry index in the block.
        entry: u32,
        /// Bit where it would end.
        end: usize,
    },
    /// Bits after the last entry are not zero.
    #[error("padding bits after bit {bit} are not zero")]
    DirtyPadding {
        /// Where the padding starts.
        bit: usize,
    },
    /// The last entry is not the key the block index records.
    #[error("last entry {last:#018x} differs from the block key {key:#018x}")]
    KeyMismatch {
        /// The decoded last entry.
        last: u64,
        /// The stored key.
        key: u64,
    },
}

/// Fills one block at a time from a sorted sequence.
pub struct BlockEncoder<'c> {
    codec: Codec,
    code: &'c Code,
    buf: [u8; BLOCK_BYTES + SLACK],
    bit: usize,
    count: u32,
    prev: u64,
}

impl<'c> BlockEncoder<'c> {
    /// An empty encoder for a table's codec and code.
    pub fn new(codec: Codec, code: &'c Code) -> Self {
        Self { codec, code, buf: [0; BLOCK_BYTES + SLACK], bit: 0, count: 0, prev: 0 }
    }

    /// Entries in the current block.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Appends `value` (not below the previous one) if it fits; returns false when the
    /// block is full, in which case the caller takes the block with [`Self::finish`] and
    /// pushes again.
    ///
    /// # Panics
    /// If `value` is below the previous value, or its gap symbol has no code: both are bugs
    /// of the caller, who must sort and build the code from the same sequence.
    #[inline]
    pub fn push(&mut self, value: u64) -> bool {
        if self.count == 0 {
            self.put(value, 64);
            self.count = 1;
            self.prev = value;
            return true;
        }
        assert!(value >= self.prev, "BlockEncoder::push: input not sorted");
        let (symbol, payload) = self.codec.gap(self.prev, value);
        let (word, len) = self.code.word(symbol);
        assert!(len > 0, "BlockEncoder::push: symbol {symbol} has no code");
        let h = if symbol == EQUAL { 0 } else { symbol as u32 };
        if self.bit + (len + h) as usize > BLOCK_BITS {
            return false;
        }
        self.put(word, len);
        self.put(payload, h);
        self.count += 1;
        self.prev = value;
        true
    }

    /// The finished block, its entry count and its key (last entry); resets the encoder.
    /// Returns `None` when the block is empty.
    pub fn finish(&mut self) -> Option<([u8; BLOCK_BYTES], u32, u64)> {
        if self.count == 0 {
            return None;
        }
        let mut block = [0u8; BLOCK_BYTES];
        block.copy_from_slice(&self.buf[..BLOCK_BYTES]);
        let out = (block, self.count, self.prev);
        self.buf = [0; BLOCK_BYTES + SLACK];
        self.bit = 0;
        self.count = 0;
        Some(out)
    }

    /// Writes the low `n` bits of `value` (n <= 64) at the current bit, MSB first.
    // The encoder's inner loop. In bounds: `push` only writes while `bit <= BLOCK_BITS`, so
    // `byte <= BLOCK_BYTES` and the 16-byte window ends within the SLACK bytes after it.
    #[allow(clippy::indexing_slicing)]
    #[inline]
    fn put(&mut self, value: u64, n: u32) {
        if n == 0 {
            return;
        }
        let byte = self.bit / 8;
        let shift = (self.bit % 8) as u32;
        let window = &mut self.buf[byte..byte + 16];
        let mut word = BE::read_u128(window);
        word |= u128::from(value) << (128 - shift - n);
        BE::write_u128(window, word);
        self.bit += n as usize;
    }
}

/// The bits of `block` from bit `bit` on, at the top of a word: at least 57 valid bits,
/// zeros past the block's end.
#[inline(always)]
fn peek(block: &[u8; BLOCK_BYTES], bit: usize) -> u64 {
    let byte = bit / 8;
    let word = match block.get(byte..byte + 8) {
        Some(w) => BE::read_u64(w),
        None => {
            let mut w = [0u8; 8];
            for (to, &from) in w.iter_mut().zip(block.get(byte..).unwrap_or_default()) {
                *to = from;
            }
            u64::from_be_bytes(w)
        }
    };
    word << (bit % 8)
}

/// The top `h` bits of `bits` (`h <= 63`), right-aligned; shifting in two steps keeps
/// `h = 0` well defined.
#[inline(always)]
fn top_bits(bits: u64, h: u32) -> u64 {
    (bits >> 1) >> (63 - h)
}

/// Decodes the `count` entries of `block`, calling `visit` with each in order until it
/// returns false. Returns the bit offset where the decoded entries end.
///
/// When every entry was decoded, the padding after the last entry is checked to be zero:
/// a decoder that stopped early (because `visit` said so) does not check it.
#[inline(always)]
pub fn decode_block(codec: Codec, code: &Code, block: &[u8], count: u32, visit: impl FnMut(u64) -> bool) -> Result<usize, BlockError> {
    let block: &[u8; BLOCK_BYTES] = block.try_into().map_err(|_| BlockError::WrongSize { len: block.len() })?;
    match codec {
        Codec::Xor => decode_with::<XorGaps>(code, block, count, visit),
        Codec::Delta => decode_with::<DeltaGaps>(code, block, count, visit),
    }
}

#[inline(always)]
fn decode_with<G: Gaps>(code: &Code, block: &[u8; BLOCK_BYTES], count: u32, mut visit: impl FnMut(u64) -> bool) -> Result<usize, BlockError> {
    let mut cursor = Cursor::new(code, block, count)?;
    if !visit(cursor.first()) {
        return Ok(cursor.bit());
    }
    while cursor.remaining() > 0 {
        let value = cursor.next::<G>()?;
        if !visit(value) {
            return Ok(cursor.bit());
        }
    }
    check_padding(block, cursor.bit())?;
    Ok(cursor.bit())
}

/// Decoding state of one block: small enough to live in registers, so a caller can advance
/// several cursors in one loop and let the CPU overlap their serial decoding chains.
#[derive(Clone, Copy)]
pub(crate) struct Cursor<'a> {
    code: &'a Code,
    block: &'a [u8; BLOCK_BYTES],
    bit: usize,
    prev: u64,
    entry: u32,
    count: u32,
}

impl<'a> Cursor<'a> {
    /// A cursor before the first of the `count` entries of `block`.
    #[inline(always)]
    pub(crate) fn new(code: &'a Code, block: &'a [u8; BLOCK_BYTES], count: u32) -> Result<Self, BlockError> {
        if count == 0 || count as usize > BLOCK_BITS - FIRST_BITS + 1 {
            return Err(BlockError::BadCount { count });
        }
        Ok(Self { code, block, bit: 0, prev: 0, entry: 0, count })
    }

    /// Entries not yet decoded.
    #[inline(always)]
    pub(crate) fn remaining(&self) -> u32 {
        self.count - self.entry
    }

    /// The last entry decoded (stale after a seek over an XOR code that did not find one).
    #[inline(always)]
    pub(crate) fn prev(&self) -> u64 {
        self.prev
    }

    /// Bit offset where the entries decoded so far end.
    #[inline(always)]
    pub(crate) fn bit(&self) -> usize {
        self.bit
    }

    /// The first entry, stored whole. Call once, first.
    #[inline(always)]
    pub(crate) fn first(&mut self) -> u64 {
        self.entry = 1;
        self.bit = FIRST_BITS;
        self.prev = BE::read_u64(&self.block[..8]);
        self.prev
    }

    /// Decodes the next entry after [`Self::first`]. Call only while [`Self::remaining`]
    /// is positive.
    #[inline(always)]
    pub(crate) fn next<G: Gaps>(&mut self) -> Result<u64, BlockError> {
        self.entry += 1;
        let word = peek(self.block, self.bit);
        let e = self.code.fast_entry(word);
        if e & (SLOW | FAST_EQUAL) != 0 {
            if e & SLOW != 0 {
                return self.next_slow::<G>(word);
            }
            self.bit += (e & 15) as usize;
            if self.bit > BLOCK_BITS {
                return Err(BlockError::Overrun { entry: self.entry - 1, end: self.bit });
            }
            return Ok(self.prev);
        }
        // The common case: a short word and a payload within the same peek.
        let len = e & 15;
        let h = (e >> 4) & 63;
        let payload = top_bits(word << len, h);
        let Some(value) = G::apply(self.prev, h, payload) else {
            return Err(BlockError::BadGap { bit: self.bit, entry: self.entry - 1, h, prev: self.prev });
        };
        self.bit += ((e >> 12) & 127) as usize;
        self.prev = value;
        if self.bit > BLOCK_BITS {
            return Err(BlockError::Overrun { entry: self.entry - 1, end: self.bit });
        }
        Ok(value)
    }

    /// Decodes up to the first entry `>= lo` (among those after the current one) and
    /// returns it, or `None` when the block ends first. `low_bits` is the number of bits
    /// below the prefix that `lo` starts (`lo`'s low `low_bits` bits are zero).
    ///
    /// With a code that keeps high bits (XOR), an entry whose gap symbol is below
    /// `low_bits` leaves the prefix unchanged, so those entries are skipped without being
    /// rebuilt: only their code word and length are read. That is most of the entries a
    /// query passes over before its prefix run. An entry that changes the prefix has only
    /// its new prefix read (the payload's top bits), and is rebuilt whole once it is not
    /// below `lo`'s: where prefix groups hold an entry or two (a batch join's walk over a
    /// large table), that is most of them. The skipped entries' low bits are not checked;
    /// callers have checked the block's CRC.
    #[inline(always)]
    pub(crate) fn seek<G: Gaps>(&mut self, lo: u64, low_bits: u32) -> Result<Option<u64>, BlockError> {
        let mut top = self.seek_start(low_bits);
        while self.remaining() > 0 {
            if let Some(v) = self.seek_step::<G>(lo, low_bits, &mut top)? {
                return Ok(Some(v));
            }
        }
        // The block ended below lo; the caller moves on without using `prev`.
        Ok(None)
    }

    /// Moves the cursor to entry `entry`, which starts at bit `bit`, for a seek that goes on
    /// from there ([`Self::seek_step`] with a `top` the caller knows): a restart point found
    /// by an earlier decoding of the same block. `prev` is left stale, which a seek over an
    /// XOR code does not read. False, and no move, when the point is outside the block.
    #[inline(always)]
    pub(crate) fn restart(&mut self, bit: usize, entry: u32) -> bool {
        if entry <= self.entry || entry >= self.count || !(FIRST_BITS..BLOCK_BITS).contains(&bit) {
            return false;
        }
        self.bit = bit;
        self.entry = entry;
        true
    }

    /// The state [`Self::seek_step`] carries from one entry to the next, for a seek that
    /// starts after the current entry.
    #[inline(always)]
    pub(crate) fn seek_start(&self, low_bits: u32) -> u64 {
        self.prev.checked_shr(low_bits).unwrap_or(0)
    }

    /// One entry of [`Self::seek`], for callers that advance several cursors in turn:
    /// decodes the next entry and returns it when it is `>= lo` (the seek is over), `None`
    /// when it is below (passed over, maybe without being rebuilt). `top` carries the
    /// previous entry's prefix between calls, from [`Self::seek_start`]. Call only while
    /// [`Self::remaining`] is positive.
    #[inline(always)]
    pub(crate) fn seek_step<G: Gaps>(&mut self, lo: u64, low_bits: u32, top: &mut u64) -> Result<Option<u64>, BlockError> {
        if !G::KEEPS_HIGH_BITS || low_bits == 0 || low_bits >= 64 {
            let v = self.next::<G>()?;
            return Ok((v >= lo).then_some(v));
        }
        // Only the prefix of the previous entry is tracked (in `top`), not `prev`.
        let entry = self.entry;
        self.entry += 1;
        let bit = self.bit;
        let word = peek(self.block, bit);
        let e = self.code.fast_entry(word);
        if e & (SLOW | CHANGES_PREFIX) == 0 && self.code.marks_prefix(low_bits) {
            // A short word whose h is below the prefix: only its length matters.
            self.bit += ((e >> 12) & 127) as usize;
            if self.bit > BLOCK_BITS {
                return Err(BlockError::Overrun { entry, end: self.bit });
            }
            return Ok(None);
        }
        let (symbol, len) = if e & FAST_EQUAL != 0 {
            (EQUAL as u32, e & 15)
        } else if e & SLOW == 0 {
            ((e >> 4) & 63, e & 15)
        } else {
            let Some((symbol, len)) = self.code.decode_word(word) else {
                return Err(BlockError::BadCode { bit, entry });
            };
            (symbol as u32, len)
        };
        if symbol as usize == EQUAL {
            self.bit += len as usize;
        } else {
            let h = symbol;
            self.bit += (len + h) as usize;
            if h >= low_bits {
                // The prefix changes to the bits above h, bit h set and the payload's top
                // `h - low_bits` bits: when they follow the code word within the peeked
                // word, the new prefix alone is compared with lo's (whose low bits are
                // zero), and the entry is rebuilt whole only once it is not below lo.
                let d = h - low_bits;
                if len + d <= FAST_SPAN {
                    let above = *top >> d;
                    if above & 1 != 0 {
                        return Err(BlockError::BadGap { bit, entry, h, prev: *top << low_bits });
                    }
                    let prefix = (above | 1) << d | top_bits(word << len, d);
                    if prefix < lo >> low_bits {
                        if self.bit > BLOCK_BITS {
                            return Err(BlockError::Overrun { entry, end: self.bit });
                        }
                        *top = prefix;
                        return Ok(None);
                    }
                }
                // The entry is rebuilt whole from the prefix (bits above h) and its payload
                // (all bits below h).
                let at = bit + len as usize;
                let head = h.min(57);
                let payload = top_bits(peek(self.block, at), head) << (h - head) | top_bits(peek(self.block, at + 57), h - head);
                let above = *top >> (h - low_bits);
                if above & 1 != 0 {
                    return Err(BlockError::BadGap { bit, entry, h, prev: *top << low_bits });
                }
                let value = (above | 1) << h | payload;
                if value >= lo {
                    if self.bit > BLOCK_BITS {
                        return Err(BlockError::Overrun { entry, end: self.bit });
                    }
                    self.prev = value;
                    return Ok(Some(value));
                }
                *top = value >> low_bits;
            }
        }
        if self.bit > BLOCK_BITS {
            return Err(BlockError::Overrun { entry, end: self.bit });
        }
        Ok(None)
    }

    /// Every other case: long words, `EQUAL`, `h = 0`, long payloads, bad codes.
    #[cold]
    #[inline(never)]
    fn next_slow<G: Gaps>(&mut self, word: u64) -> Result<u64, BlockError> {
        let (bit, entry) = (self.bit, self.entry - 1);
        let Some((symbol, len)) = self.code.decode_word(word) else {
            return Err(BlockError::BadCode { bit, entry });
        };
        if symbol == EQUAL {
            self.bit += len as usize;
        } else {
            let h = symbol as u32;
            let at = bit + len as usize;
            let head = h.min(57);
            let payload = top_bits(peek(self.block, at), head) << (h - head) | top_bits(peek(self.block, at + 57), h - head);
            let Some(value) = G::apply(self.prev, h, payload) else {
                return Err(BlockError::BadGap { bit, entry, h, prev: self.prev });
            };
            self.bit += (len + h) as usize;
            self.prev = value;
        }
        if self.bit > BLOCK_BITS {
            return Err(BlockError::Overrun { entry, end: self.bit });
        }
        Ok(self.prev)
    }
}

fn check_padding(block: &[u8; BLOCK_BYTES], bit: usize) -> Result<(), BlockError> {
    let rest = block.get(bit / 8..).unwrap_or_default();
    // The bits of the byte the last entry ends in, below it, then the whole bytes after.
    let (partial, whole) = match (bit % 8, rest.split_first()) {
        (0, _) | (_, None) => (0, rest),
        (used, Some((&first, after))) => (first & (0xffu8 >> used), after),
    };
    if partial != 0 || whole.iter().any(|&b| b != 0) {
        return Err(BlockError::DirtyPadding { bit });
    }
    Ok(())
}

/// Encodes a sorted slice into full blocks: `(block, count, key)` each. For tests, benches
/// and small tools; the segment writer streams through [`BlockEncoder`] instead.
pub fn encode_all(codec: Codec, code: &Code, values: &[u64]) -> Vec<([u8; BLOCK_BYTES], u32, u64)> {
    let mut enc = BlockEncoder::new(codec, code);
    let mut out = Vec::new();
    for &v in values {
        if !enc.push(v) {
            out.extend(enc.finish());
            assert!(enc.push(v), "a fresh block takes any value");
        }
    }
    out.extend(enc.finish());
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::super::histogram::SymbolHistogram;
    use super::*;

    fn roundtrip(codec: Codec, values: &[u64]) {
        let code = SymbolHistogram::of_sorted(codec, values).code();
        let blocks = encode_all(codec, &code, values);
        let mut decoded = Vec::new();
        for (block, count, key) in &blocks {
            let before = decoded.len();
            decode_block(codec, &code, block, *count, |v| {
                decoded.push(v);
                true
            })
            .unwrap();
            assert_eq!(decoded.len() - before, *count as usize);
            assert_eq!(decoded.last(), Some(key));
        }
        assert_eq!(decoded, values);
    }

    #[test]
    fn roundtrip_edges() {
        for codec in [Codec::Xor, Codec::Delta] {
            roundtrip(codec, &[]);
            roundtrip(codec, &[0]);
            roundtrip(codec, &[u64::MAX]);
            roundtrip(codec, &[0, 0, 0, 1, u64::MAX, u64::MAX]);
            roundtrip(codec, &vec![7; 20_000]);
            let mut v: Vec<u64> = (0..50_000u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
            v.sort_unstable();
            roundtrip(codec, &v);
        }
    }

    #[test]
    fn a_seek_finds_the_first_entry_not_below_any_prefix() {
        // Oracle: the sorted input. Sparse and clustered values (prefix groups of one entry
        // and of many), every prefix length, with and without the fast table's prefix marks.
        let mut x = 77u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut values: Vec<u64> = (0..3_000).map(|_| next()).collect();
        values.extend((0..3_000).map(|i| (i / 40) << 52 | next() >> 40));
        values.extend([0, 0, 5, u64::MAX, u64::MAX]);
        values.sort_unstable();
        let mut code = SymbolHistogram::of_sorted(Codec::Xor, &values).code();
        let blocks = encode_all(Codec::Xor, &code, &values);
        for low_bits in [1, 5, 20, 38, 50, 63] {
            for marked in [false, true] {
                if marked {
                    code.mark_prefix_changes(low_bits);
                }
                let (mut start, mut checked) = (0usize, 0);
                for (block, count, _) in &blocks {
                    let entries = &values[start..start + *count as usize];
                    start += *count as usize;
                    for (i, &e) in entries.iter().enumerate().step_by(7) {
                        for lo in [e >> low_bits << low_bits, (e >> low_bits).saturating_add(1) << low_bits] {
                            let mut cursor = Cursor::new(&code, block, *count).unwrap();
                            let first = cursor.first();
                            let want = entries[1..].iter().copied().find(|&v| v >= lo);
                            if first < lo {
                                assert_eq!(cursor.seek::<XorGaps>(lo, low_bits).unwrap(), want, "low_bits {low_bits} lo {lo:#x} entry {i}");
                                checked += 1;
                            }
                        }
                    }
                }
                assert!(checked > 100, "{checked} seeks at low_bits {low_bits}");
            }
        }
    }

    #[test]
    fn all_equal_run_packs_one_bit_per_entry() {
        let code = SymbolHistogram::of_sorted(Codec::Xor, &[0; 10]).code();
        let blocks = encode_all(Codec::Xor, &code, &vec![0; 10_000]);
        assert_eq!(blocks[0].1 as usize, BLOCK_BITS - 64 + 1);
    }

    #[test]
    fn truncated_or_dirty_blocks_are_errors() {
        let values: Vec<u64> = (0..100u64).map(|i| i << 50).collect();
        let code = SymbolHistogram::of_sorted(Codec::Xor, &values).code();
        let (block, count, _) = encode_all(Codec::Xor, &code, &values)[0];
        assert!(matches!(decode_block(Codec::Xor, &code, &block[..1000], count, |_| true), Err(BlockError::WrongSize { .. })));
        assert!(matches!(decode_block(Codec::Xor, &code, &block, 0, |_| true), Err(BlockError::BadCount { .. })));
        let mut dirty = block;
        dirty[BLOCK_BYTES - 1] = 1;
        assert!(matches!(decode_block(Codec::Xor, &code, &dirty, count, |_| true), Err(BlockError::DirtyPadding { .. })));
        // Claiming more entries than were written runs into the zero padding, which decodes
        // as some symbol until the bits run out: it must end in an error, not a panic.
        assert!(decode_block(Codec::Xor, &code, &block, 8000, |_| true).is_err());
    }
}
