//! Chunks: the runs of text between ASCII whitespace (recipe step 2.1), found 64 bytes at a
//! time.
//!
//! Every 64-byte block of the text becomes three bit masks (ASCII whitespace; bytes that are
//! neither whitespace nor ASCII letters or digits; non-ASCII bytes), computed with SSE2 on
//! x86-64 and with a portable loop elsewhere. Chunk boundaries and each chunk's kind then
//! come from bit scans, without a branch per byte. What a chunk's words are is `tokenize`'s
//! business.

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

/// Bytes per scan window: masks of at most this many bytes are computed ahead.
const WINDOW: usize = 4096;
const BLOCKS: usize = WINDOW / 64;

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

/// Calls `f(start, end, kind)` for every chunk of `text` (a maximal run of bytes that are
/// not ASCII whitespace), in order.
pub fn for_each_chunk(text: &[u8], mut f: impl FnMut(usize, usize, ChunkKind)) {
    let mut masks = [Masks::default(); BLOCKS];
    let mut base = 0;
    while base < text.len() {
        let window = &text[base..text.len().min(base + WINDOW)];
        let is_last = base + window.len() == text.len();
        let blocks = window.len().div_ceil(64);
        for (b, m) in masks[..blocks].iter_mut().enumerate() {
            *m = classify(&window[64 * b..window.len().min(64 * b + 64)]);
        }
        let masks = &masks[..blocks];
        let mut pos = 0;
        base = loop {
            // common case: the next chunk starts and ends inside the block of `pos`
            if let Some(m) = masks.get(pos / 64) {
                let block = 64 * (pos / 64);
                let rest = !m.space & (u64::MAX << (pos % 64));
                let start = rest.trailing_zeros();
                let after = m.space & u64::MAX.checked_shl(start).unwrap_or(0);
                if after != 0 {
                    let end = after.trailing_zeros();
                    let range = (1u64 << end) - (1u64 << start);
                    let kind = if m.high & range != 0 {
                        ChunkKind::Unicode
                    } else if m.other & range != 0 {
                        ChunkKind::Ascii
                    } else {
                        ChunkKind::Alnum
                    };
                    f(base + block + start as usize, base + block + end as usize, kind);
                    pos = block + end as usize;
                    continue;
                }
            }
            let Some(start) = next(masks, pos, |m| !m.space) else {
                break base + window.len();
            };
            let end = match next(masks, start, |m| m.space) {
                Some(end) => end.min(window.len()),
                None if is_last => window.len(),
                // the chunk may go on past the window: scan again from its start
                None if start > 0 => break base + start,
                None => {
                    let end = long_chunk(text, base);
                    f(base, end, kind_of(&text[base..end]));
                    break end;
                }
            };
            let kind = if any(masks, start, end, |m| m.high) {
                ChunkKind::Unicode
            } else if any(masks, start, end, |m| m.other) {
                ChunkKind::Ascii
            } else {
                ChunkKind::Alnum
            };
            f(base + start, base + end, kind);
            pos = end;
        };
    }
}

/// The end of a chunk that starts at `start` and fills a whole window.
#[cold]
fn long_chunk(text: &[u8], start: usize) -> usize {
    text[start..]
        .iter()
        .position(|b| is_space(*b))
        .map_or(text.len(), |i| start + i)
}

#[cold]
fn kind_of(chunk: &[u8]) -> ChunkKind {
    if !chunk.is_ascii() {
        ChunkKind::Unicode
    } else if chunk.iter().all(u8::is_ascii_alphanumeric) {
        ChunkKind::Alnum
    } else {
        ChunkKind::Ascii
    }
}

/// The first position `>= from` whose bit is set in `bits(mask)`.
#[inline]
fn next(masks: &[Masks], from: usize, bits: impl Fn(&Masks) -> u64) -> Option<usize> {
    let mut b = from / 64;
    let mut m = bits(masks.get(b)?) & (u64::MAX << (from % 64));
    loop {
        if m != 0 {
            return Some(64 * b + m.trailing_zeros() as usize);
        }
        b += 1;
        m = bits(masks.get(b)?);
    }
}

/// Whether any position in `start..end` has its bit set in `bits(mask)` (`start < end`).
#[inline]
fn any(masks: &[Masks], start: usize, end: usize, bits: impl Fn(&Masks) -> u64) -> bool {
    let (first, last) = (start / 64, (end - 1) / 64);
    let low = u64::MAX << (start % 64);
    let high = u64::MAX >> (63 - (end - 1) % 64);
    if first == last {
        return bits(&masks[first]) & low & high != 0;
    }
    bits(&masks[first]) & low != 0
        || masks[first + 1..last].iter().any(|m| bits(m) != 0)
        || bits(&masks[last]) & high != 0
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
            (
                _mm_movemask_epi8(space),
                _mm_movemask_epi8(word_or_space),
                _mm_movemask_epi8(x),
            )
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
    fn chunks_across_windows_and_long_chunks() {
        for len in [0, 1, 63, 64, 65, 4095, 4096, 4097, 9000] {
            for start in [0, 1, 60, 4090] {
                let mut text = vec![b' '; start];
                text.extend(std::iter::repeat(b'x').take(len));
                text.extend_from_slice(b" a,b \xc3\xa9 ");
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
                0..9000,
            )
        ) {
            prop_assert_eq!(chunks(&text), naive(&text));
        }
    }
}
