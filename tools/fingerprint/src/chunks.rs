//! Chunks: the runs of text between ASCII whitespace (recipe step 2.1), found 64 bytes at a
//! time.
//!
//! Every 64-byte block of the text becomes three bit masks (ASCII whitespace; bytes that are
//! neither whitespace nor ASCII letters or digits; non-ASCII bytes), computed with SSE2 on
//! x86-64 and with a portable loop elsewhere, one block at a time. Chunk boundaries and each
//! chunk's kind then come from bit scans, without a branch per byte. What a chunk's words are
//! is `tokenize`'s business.

// Indexing: chunk buffers are sliced at lengths the reader filled.
#![allow(clippy::indexing_slicing)]

/// What a chunk is made of; decides the tokenizer's path for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkKind {
    /// Only ASCII letters and digits: one word, its normalised form is its ASCII lowercase.
    Alnum,
    /// ASCII with punctuation.
    Ascii,
    /// Has a non-ASCII character.
    Unicode,
}

/// The masks of one 64-byte block: bit i describes byte i.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Masks {
    /// ASCII whitespace: 0x09, 0x0A, 0x0C, 0x0D, 0x20
    space: u64,
    /// neither ASCII whitespace nor `A-Za-z0-9`
    other: u64,
    /// >= 0x80
    high: u64,
}

impl Masks {
    /// The kind of a chunk whose bytes are the bits `range` of these masks (plus `seen`, the
    /// or of the masks of its bytes in earlier blocks).
    #[inline]
    fn kind(&self, range: u64, seen: &Masks) -> ChunkKind {
        if (self.high & range) | seen.high != 0 {
            ChunkKind::Unicode
        } else if (self.other & range) | seen.other != 0 {
            ChunkKind::Ascii
        } else {
            ChunkKind::Alnum
        }
    }
}

/// Calls `f(start, end, kind)` for every chunk of `text` (a maximal run of bytes that are
/// not ASCII whitespace), in order.
#[inline]
pub fn for_each_chunk(text: &[u8], mut f: impl FnMut(usize, usize, ChunkKind)) {
    let blocks = text.len().div_ceil(64);
    if blocks == 0 {
        return;
    }
    let masks = |b: usize| classify(&text[64 * b..text.len().min(64 * b + 64)]);
    let (mut b, mut m) = (0, masks(0));
    // the scan resumes at bit `from` of block `b`
    let mut from = 0;
    loop {
        let rest = !m.space & (u64::MAX << from);
        if rest == 0 {
            b += 1;
            if b == blocks {
                return;
            }
            (m, from) = (masks(b), 0);
            continue;
        }
        let start = rest.trailing_zeros();
        let after = m.space & (u64::MAX << start);
        if after != 0 {
            // the common case: the chunk ends in the block it starts in
            let end = after.trailing_zeros();
            let kind = m.kind((1 << end) - (1 << start), &Masks::default());
            f(64 * b + start as usize, 64 * b + end as usize, kind);
            from = end;
            continue;
        }
        let first = 64 * b + start as usize;
        let tail = u64::MAX << start;
        let mut seen = Masks { space: 0, other: m.other & tail, high: m.high & tail };
        loop {
            b += 1;
            if b == blocks {
                // ends with the text (missing bytes of the last block count as whitespace,
                // so this is a text of whole blocks)
                f(first, text.len(), m.kind(0, &seen));
                return;
            }
            m = masks(b);
            if m.space != 0 {
                let end = m.space.trailing_zeros();
                f(first, 64 * b + end as usize, m.kind((1 << end) - 1, &seen));
                from = end;
                break;
            }
            seen.other |= m.other;
            seen.high |= m.high;
        }
    }
}

#[inline]
fn is_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0C | b'\r' | b' ')
}

/// The masks of up to 64 bytes; missing bytes count as whitespace.
#[inline]
fn classify(block: &[u8]) -> Masks {
    match <&[u8; 64]>::try_from(block) {
        Ok(full) => classify_full(full),
        Err(_) => {
            let mut padded = [b' '; 64];
            padded[..block.len()].copy_from_slice(block);
            classify_full(&padded)
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn classify_full(block: &[u8; 64]) -> Masks {
    use std::arch::x86_64::*;
    let mut m = Masks::default();
    for (i, lane) in block.chunks_exact(16).enumerate() {
        // SAFETY: `lane` is 16 readable bytes (`chunks_exact(16)`), `_mm_loadu_si128` reads
        // exactly those without alignment requirements; the other intrinsics are SSE2
        // arithmetic, which every x86-64 CPU has.
        let (space, word_or_space, high) = unsafe {
            let x = _mm_loadu_si128(lane.as_ptr().cast());
            let splat = |b: u8| _mm_set1_epi8(b as i8);
            // v in lo..=lo+n (unsigned) <=> min(v - lo, n) == v - lo
            let within = |v: __m128i, lo: u8, n: u8| {
                let d = _mm_sub_epi8(v, splat(lo));
                _mm_cmpeq_epi8(_mm_min_epu8(d, splat(n)), d)
            };
            let controls = _mm_andnot_si128(_mm_cmpeq_epi8(x, splat(0x0B)), within(x, b'\t', 4));
            let space = _mm_or_si128(controls, _mm_cmpeq_epi8(x, splat(b' ')));
            let digit = within(x, b'0', 9);
            let letter = within(_mm_or_si128(x, splat(0x20)), b'a', 25);
            let word_or_space = _mm_or_si128(space, _mm_or_si128(digit, letter));
            (_mm_movemask_epi8(space), _mm_movemask_epi8(word_or_space), _mm_movemask_epi8(x))
        };
        let shift = 16 * i;
        m.space |= u64::from(space as u16) << shift;
        m.other |= u64::from(!(word_or_space as u16)) << shift;
        m.high |= u64::from(high as u16) << shift;
    }
    m
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn classify_full(block: &[u8; 64]) -> Masks {
    classify_portable(block)
}

#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn classify_portable(block: &[u8; 64]) -> Masks {
    let mut m = Masks::default();
    for (i, &b) in block.iter().enumerate() {
        m.space |= u64::from(is_space(b)) << i;
        m.other |= u64::from(!is_space(b) && !b.is_ascii_alphanumeric()) << i;
        m.high |= u64::from(b >= 0x80) << i;
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::{prop_assert_eq, prop_oneof, proptest, Just};

    fn kind_of(chunk: &[u8]) -> ChunkKind {
        if !chunk.is_ascii() {
            ChunkKind::Unicode
        } else if chunk.iter().all(u8::is_ascii_alphanumeric) {
            ChunkKind::Alnum
        } else {
            ChunkKind::Ascii
        }
    }

    /// The definition: split at ASCII whitespace.
    fn naive(text: &[u8]) -> Vec<(usize, usize, ChunkKind)> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < text.len() {
            if is_space(text[i]) {
                i += 1;
                continue;
            }
            let start = i;
            while i < text.len() && !is_space(text[i]) {
                i += 1;
            }
            out.push((start, i, kind_of(&text[start..i])));
        }
        out
    }

    fn chunks(text: &[u8]) -> Vec<(usize, usize, ChunkKind)> {
        let mut out = Vec::new();
        for_each_chunk(text, |a, b, k| out.push((a, b, k)));
        out
    }

    #[test]
    fn classify_matches_portable_on_every_byte() {
        for b in 0..=255u8 {
            let mut block = [b'a'; 64];
            block[5] = b;
            block[63] = b;
            assert_eq!(classify_full(&block), classify_portable(&block), "{b:#04x}");
        }
    }

    #[test]
    fn chunks_across_blocks_and_long_chunks() {
        for len in [0, 1, 63, 64, 65, 127, 128, 129, 200] {
            for start in [0, 1, 60, 64, 65] {
                let mut text = vec![b' '; start];
                text.extend(std::iter::repeat_n(b'x', len));
                assert_eq!(chunks(&text), naive(&text), "len {len} start {start}");
                text.extend_from_slice(b" a,b \xc3\xa9 ");
                assert_eq!(chunks(&text), naive(&text), "len {len} start {start}");
                text.truncate(text.len() - 1);
                assert_eq!(chunks(&text), naive(&text), "len {len} start {start}");
            }
        }
    }

    proptest! {
        #[test]
        fn chunks_match_the_definition(
            text in proptest::collection::vec(
                prop_oneof![
                    8 => Just(b'a'), 1 => Just(b'Z'), 1 => Just(b'7'), 2 => Just(b' '),
                    1 => Just(b'\n'), 1 => Just(b'\t'), 1 => Just(0x0B), 1 => Just(0x0C),
                    1 => Just(b'\r'), 1 => Just(b','), 1 => Just(0xC3), 1 => Just(0xA9),
                    1 => proptest::arbitrary::any::<u8>()
                ],
                0..600,
            )
        ) {
            prop_assert_eq!(chunks(&text), naive(&text));
        }
    }
}
