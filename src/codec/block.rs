//! The 1 KB block: one sorted run of fingerprints, the first stored whole and each next one
//! as a Huffman-coded gap symbol plus payload bits, MSB first, zero-padded to 1024 bytes.
//!
//! The block does not record how many entries it holds or its checksum: the table's block
//! index does (see `format-spec/block.md`). The decoder is given that count and must be
//! told the bytes are the block's; it never reads outside them.

use super::{Code, Codec, EQUAL};

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
    #[inline]
    fn put(&mut self, value: u64, n: u32) {
        if n == 0 {
            return;
        }
        let byte = self.bit / 8;
        let shift = (self.bit % 8) as u32;
        let word_bytes: [u8; 16] = self.buf[byte..byte + 16].try_into().expect("slack keeps 16 bytes");
        let mut word = u128::from_be_bytes(word_bytes);
        word |= u128::from(value) << (128 - shift - n);
        self.buf[byte..byte + 16].copy_from_slice(&word.to_be_bytes());
        self.bit += n as usize;
    }
}

/// The 64 bits at byte `byte` of `block` (big-endian), zero past its end.
#[inline(always)]
fn load(block: &[u8], byte: usize) -> u64 {
    match block.get(byte..byte + 8) {
        Some(w) => u64::from_be_bytes(w.try_into().expect("8 bytes")),
        None => {
            let mut w = [0u8; 8];
            let tail = block.get(byte..).unwrap_or(&[]);
            w[..tail.len()].copy_from_slice(tail);
            u64::from_be_bytes(w)
        }
    }
}

/// The bits of `block` from bit `bit` on, at the top of a word: at least 57 valid bits.
#[inline(always)]
fn peek(block: &[u8], bit: usize) -> u64 {
    load(block, bit / 8) << (bit % 8)
}

/// The top `h` bits of `bits` (`h <= 63`), right-aligned; shifting in two steps keeps
/// `h = 0` well defined.
#[inline(always)]
fn top_bits(bits: u64, h: u32) -> u64 {
    (bits >> 1) >> (63 - h)
}

/// Decodes a block one entry at a time. Several cursors can be advanced in turn, which
/// lets the CPU overlap their (otherwise serial) decoding chains.
pub struct BlockCursor<'a> {
    codec: Codec,
    code: &'a Code,
    block: &'a [u8],
    bit: usize,
    next: u32,
    count: u32,
    prev: u64,
}

impl<'a> BlockCursor<'a> {
    /// A cursor over the `count` entries of `block`.
    pub fn new(codec: Codec, code: &'a Code, block: &'a [u8], count: u32) -> Result<Self, BlockError> {
        if block.len() != BLOCK_BYTES {
            return Err(BlockError::WrongSize { len: block.len() });
        }
        if count == 0 || count as usize > BLOCK_BITS - FIRST_BITS + 1 {
            return Err(BlockError::BadCount { count });
        }
        Ok(Self { codec, code, block, bit: 0, next: 0, count, prev: 0 })
    }

    /// Bit offset where the entries decoded so far end.
    pub fn bit(&self) -> usize {
        self.bit
    }

    /// The next entry, `None` after the last, or the error that stops decoding.
    #[inline(always)]
    pub fn next_entry(&mut self) -> Option<Result<u64, BlockError>> {
        if self.next == self.count {
            return None;
        }
        let entry = self.next;
        self.next += 1;
        if entry == 0 {
            self.prev = u64::from_be_bytes(self.block[..8].try_into().expect("8 bytes"));
            self.bit = FIRST_BITS;
            return Some(Ok(self.prev));
        }
        let bit = self.bit;
        let word = peek(self.block, bit);
        let Some((symbol, len)) = self.code.decode_word(word) else {
            self.next = self.count;
            return Some(Err(BlockError::BadCode { bit, entry }));
        };
        if symbol == EQUAL {
            self.bit += len as usize;
        } else {
            let h = symbol as u32;
            // One load holds at least 57 bits: enough for the word and a typical payload.
            let payload = if len + h <= 57 {
                top_bits(word << len, h)
            } else {
                let at = bit + len as usize;
                let head = h.min(57);
                top_bits(peek(self.block, at), head) << (h - head) | top_bits(peek(self.block, at + 57), h - head)
            };
            self.bit += (len + h) as usize;
            match self.codec.apply(self.prev, h, payload) {
                Some(v) => self.prev = v,
                None => {
                    self.next = self.count;
                    return Some(Err(BlockError::BadGap { bit, entry, h, prev: self.prev }));
                }
            }
        }
        if self.bit > BLOCK_BITS {
            self.next = self.count;
            return Some(Err(BlockError::Overrun { entry, end: self.bit }));
        }
        Some(Ok(self.prev))
    }

    /// After the last entry: checks that the rest of the block is zero.
    pub fn check_padding(&self) -> Result<(), BlockError> {
        check_padding(self.block, self.bit)
    }
}

/// Decodes the `count` entries of `block`, calling `visit` with each in order until it
/// returns false. Returns the bit offset where the decoded entries end.
///
/// When every entry was decoded, the padding after the last entry is checked to be zero:
/// a decoder that stopped early (because `visit` said so) does not check it.
#[inline]
pub fn decode_block(
    codec: Codec,
    code: &Code,
    block: &[u8],
    count: u32,
    mut visit: impl FnMut(u64) -> bool,
) -> Result<usize, BlockError> {
    let mut cursor = BlockCursor::new(codec, code, block, count)?;
    while let Some(value) = cursor.next_entry() {
        if !visit(value?) {
            return Ok(cursor.bit());
        }
    }
    cursor.check_padding()?;
    Ok(cursor.bit())
}

fn check_padding(block: &[u8], bit: usize) -> Result<(), BlockError> {
    let byte = bit / 8;
    let partial_dirty = bit % 8 != 0 && block[byte] & (0xffu8 >> (bit % 8)) != 0;
    let tail_start = byte + usize::from(bit % 8 != 0);
    if partial_dirty || block[tail_start.min(BLOCK_BYTES)..].iter().any(|&b| b != 0) {
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
mod tests {
    use super::super::SymbolHistogram;
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
