//! A slow, independent block decoder built on `bitvec`, used as the oracle in tests and as
//! the baseline in the codec benchmark.
//!
//! It shares no decoding logic with [`super::decode_block`]: it derives the canonical code
//! words from the lengths itself, matches them bit by bit (longest-first search over the
//! code words of each length, with no lookup table) and rebuilds every fingerprint bit by
//! bit with `bitvec`. Only the format constants are shared.

use bitvec::prelude::*;

use super::block::BLOCK_BYTES;
use super::gap::{Codec, EQUAL, SYMBOLS};

/// Decodes a whole block with the reference algorithm. Returns `None` on any malformation
/// (the fast decoder reports the exact error; the oracle only needs to agree on validity).
pub fn decode_block_reference(codec: Codec, lengths: &[u8; SYMBOLS], block: &[u8], count: u32) -> Option<Vec<u64>> {
    if block.len() != BLOCK_BYTES || count == 0 {
        return None;
    }
    let bits = block.view_bits::<Msb0>();
    let words = canonical_words(lengths);
    let mut out = Vec::with_capacity(count as usize);
    let first: u64 = bits.get(..64)?.load_be();
    out.push(first);
    let mut pos = 64usize;
    for _ in 1..count {
        let prev = *out.last()?;
        let (symbol, len) = match_word(bits, pos, lengths, &words)?;
        pos += len;
        if symbol == EQUAL {
            out.push(prev);
            continue;
        }
        let h = symbol;
        let payload = bits.get(pos..pos + h)?;
        pos += h;
        let mut value = bitarr![u64, Msb0; 0; 64];
        let prev_bits = prev.view_bits::<Msb0>().to_bitvec();
        match codec {
            Codec::Xor => {
                // Bit h (from the LSB) is position 63 - h from the MSB.
                let top = 63 - h;
                if *prev_bits.get(top)? {
                    return None;
                }
                value.get_mut(..top)?.copy_from_bitslice(prev_bits.get(..top)?);
                value.set(top, true);
                value.get_mut(top + 1..)?.clone_from_bitslice(payload);
                out.push(value.load_be::<u64>());
            }
            Codec::Delta => {
                let mut gap = bitarr![u64, Msb0; 0; 64];
                gap.set(63 - h, true);
                gap.get_mut(64 - h..)?.clone_from_bitslice(payload);
                out.push(prev.checked_add(gap.load_be::<u64>())?);
            }
        }
    }
    if bits.get(pos..)?.any() {
        return None;
    }
    Some(out)
}

fn canonical_words(lengths: &[u8; SYMBOLS]) -> Vec<Option<BitVec<u8, Msb0>>> {
    let mut symbols: Vec<(u8, usize)> = lengths.iter().enumerate().filter(|(_, &l)| l > 0).map(|(s, &l)| (l, s)).collect();
    symbols.sort_unstable();
    let mut out = vec![None; SYMBOLS];
    let mut word: Option<u64> = None;
    let mut prev_len = 0u8;
    for (len, s) in symbols {
        let w = match word {
            None => 0,
            Some(w) => (w + 1) << (len - prev_len),
        };
        let mut bv = BitVec::<u8, Msb0>::new();
        for i in (0..len).rev() {
            bv.push((w >> i) & 1 == 1);
        }
        if let Some(slot) = out.get_mut(s) {
            *slot = Some(bv);
        }
        word = Some(w);
        prev_len = len;
    }
    out
}

fn match_word(
    bits: &BitSlice<u8, Msb0>,
    pos: usize,
    lengths: &[u8; SYMBOLS],
    words: &[Option<BitVec<u8, Msb0>>],
) -> Option<(usize, usize)> {
    words.iter().zip(lengths).enumerate().find_map(|(s, (w, &len))| {
        let len = len as usize;
        (bits.get(pos..pos + len)? == w.as_ref()?.as_bitslice()).then_some((s, len))
    })
}
