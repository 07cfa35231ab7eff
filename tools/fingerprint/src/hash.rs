//! The feature hash: a stable, documented 64-bit hash of byte strings (`sfh64`), and the
//! order-sensitive combiner that turns a run of token hashes into a shingle hash.
//!
//! Fingerprints are persisted, so this module must never change its output: the algorithm is
//! specified byte by byte in `format-spec/fingerprint.md` and pinned by the tests below and by
//! the golden fingerprints in `tests/it/fingerprint.rs`. It is not a cryptographic hash: it only
//! needs every output bit to be an unbiased coin for simhash's bit rule.

// Indexing: the feature hash reads 8-byte blocks at offsets below the length it checked; the hot path of every feature.
#![allow(clippy::indexing_slicing)]

/// Odd 64-bit constant (2^64 / golden ratio), the multiplier of the block step.
pub const K1: u64 = 0x9E37_79B9_7F4A_7C15;
/// Odd 64-bit constant from xxHash64 (PRIME64_2), the pre-multiplier of each block.
pub const K2: u64 = 0xC2B2_AE3D_27D4_EB4F;

/// MurmurHash3's 64-bit finaliser: a bijection on u64 with full avalanche.
#[inline]
pub fn fmix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    x ^= x >> 33;
    x = x.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    x ^ (x >> 33)
}

#[inline]
pub(crate) fn step(h: u64, block: u64) -> u64 {
    (h ^ block.wrapping_mul(K2).rotate_left(31)).rotate_left(27).wrapping_mul(K1)
}

/// The last `bytes.len() % 8` bytes of `bytes` (1 to 7 of them) as a little-endian u64,
/// zero-padded: the final block of [`sfh64`], read without a byte-wise copy.
#[inline]
fn tail_block(bytes: &[u8]) -> u64 {
    let n = bytes.len() % 8;
    let len = bytes.len();
    if len >= 8 {
        // the last 8 bytes, shifted so only the tail remains
        let mut w = [0u8; 8];
        w.copy_from_slice(&bytes[len - 8..]);
        u64::from_le_bytes(w) >> (8 * (8 - n))
    } else if n >= 4 {
        // two overlapping 4-byte reads; overlapping bytes are equal, so `|` keeps them
        let (mut lo, mut hi) = ([0u8; 4], [0u8; 4]);
        lo.copy_from_slice(&bytes[..4]);
        hi.copy_from_slice(&bytes[n - 4..n]);
        u64::from(u32::from_le_bytes(lo)) | (u64::from(u32::from_le_bytes(hi)) << (8 * (n - 4)))
    } else {
        let b = |i: usize| u64::from(bytes[i]) << (8 * i);
        b(0) | b(n / 2) | b(n - 1)
    }
}

/// `sfh64(seed, bytes)`: the feature hash of `bytes` in domain `seed`.
///
/// `h = seed ^ (len * K1)`; then for each 8-byte little-endian block of `bytes` (the last one
/// zero-padded) `h = rotl(h ^ rotl(block * K2, 31), 27) * K1`; the result is `fmix64(h)`.
/// All arithmetic wraps modulo 2^64.
#[inline]
pub fn sfh64(seed: u64, bytes: &[u8]) -> u64 {
    let mut h = seed ^ (bytes.len() as u64).wrapping_mul(K1);
    let mut blocks = bytes.chunks_exact(8);
    for b in &mut blocks {
        let mut w = [0u8; 8];
        w.copy_from_slice(b);
        h = step(h, u64::from_le_bytes(w));
    }
    if !blocks.remainder().is_empty() {
        h = step(h, tail_block(bytes));
    }
    fmix64(h)
}

/// `sfh64(seed, lowercase(bytes))` for ASCII `bytes`, lowercasing eight bytes at a time on
/// the fly (no copy of the word).
#[inline]
pub fn sfh64_ascii_lower(seed: u64, bytes: &[u8]) -> u64 {
    sfh64_ascii_lower_at(seed, bytes, 0, bytes.len())
}

/// `sfh64(seed, lowercase(text[start..end]))` for ASCII `text[start..end]`: the tokenizer's
/// fast path. Reads whole 8-byte words of `text`, also past `end` where `text` goes on (the
/// extra bytes are masked off), so that a word of up to eight bytes costs one load.
#[inline]
pub fn sfh64_ascii_lower_at(seed: u64, text: &[u8], start: usize, end: usize) -> u64 {
    let bytes = &text[start..end];
    debug_assert!(bytes.is_ascii());
    #[inline]
    fn lower(w: u64) -> u64 {
        // per byte (all < 0x80): high bit of `ge_a` set iff byte >= 'A', of `gt_z` iff > 'Z'
        const LO: u64 = 0x0101_0101_0101_0101;
        let ge_a = w + LO * (0x80 - u64::from(b'A'));
        let gt_z = w + LO * (0x7F - u64::from(b'Z'));
        let upper = ge_a & !gt_z & (LO * 0x80);
        w | (upper >> 2)
    }
    #[inline]
    fn load(text: &[u8], at: usize) -> Option<u64> {
        let w: [u8; 8] = text.get(at..at + 8)?.try_into().ok()?;
        Some(u64::from_le_bytes(w))
    }
    let mut h = seed ^ (bytes.len() as u64).wrapping_mul(K1);
    let mut at = start;
    while at + 8 <= end {
        h = step(h, lower(load(text, at).unwrap_or_default()));
        at += 8;
    }
    let rest = end - at;
    if rest > 0 {
        let tail = match load(text, at) {
            Some(w) => w & (u64::MAX >> (8 * (8 - rest))),
            None => tail_block(bytes),
        };
        h = step(h, lower(tail));
    }
    fmix64(h)
}

/// Appends one more token hash to a shingle hash: `fmix64(acc * K1 + next)`.
///
/// Order-sensitive, so "a b" and "b a" differ; a shingle of n tokens with hashes
/// `t1..tn` hashes to `combine(...combine(t1, t2)..., tn)`.
#[inline]
pub fn combine(acc: u64, next: u64) -> u64 {
    fmix64(acc.wrapping_mul(K1).wrapping_add(next))
}

/// Domain seeds, so a word, a char n-gram and a stop-word probe never share a hash space.
pub mod seed {
    /// Words (and the tokens that shingles are built from).
    pub const WORD: u64 = 0;
    /// Character n-grams.
    pub const CHAR_NGRAM: u64 = 0x6368_6172_6e67_7261; // "chargram" as ASCII digits of a u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_values() {
        // Part of the persisted recipe (format-spec/fingerprint.md); computed independently by
        // the Python transcription of the spec in format-spec/fingerprint.md.
        assert_eq!(sfh64(seed::WORD, b""), fmix64(0));
        assert_eq!(sfh64(seed::WORD, b"cat"), 0xcc48_6143_cba4_1604);
        assert_eq!(sfh64(seed::WORD, b"the quick brown fox"), 0xddbf_2b43_22c7_d28e);
        assert_eq!(combine(1, 2), 0xf8f7_6353_b6d8_77c5);
    }

    #[test]
    fn tail_block_is_the_zero_padded_tail() {
        let data: Vec<u8> = (1..=40).collect();
        for len in 0..=data.len() {
            let bytes = &data[..len];
            let n = len % 8;
            if n == 0 {
                continue;
            }
            let mut w = [0u8; 8];
            w[..n].copy_from_slice(&bytes[len - n..]);
            assert_eq!(tail_block(bytes), u64::from_le_bytes(w), "len {len}");
        }
    }

    #[test]
    fn length_and_seed_are_mixed_in() {
        assert_ne!(sfh64(0, b"a"), sfh64(0, b"a\0"));
        assert_ne!(sfh64(seed::WORD, b"abc"), sfh64(seed::CHAR_NGRAM, b"abc"));
        assert_ne!(combine(1, 2), combine(2, 1));
    }

    proptest::proptest! {
        #[test]
        fn ascii_lower_hash_equals_hash_of_lowercase(s in "[ -~]{0,40}", a in 0usize..41, b in 0usize..41) {
            proptest::prop_assert_eq!(
                sfh64_ascii_lower(7, s.as_bytes()),
                sfh64(7, s.to_ascii_lowercase().as_bytes())
            );
            // any slice, near the end of the text or not
            let (a, b) = (a.min(b).min(s.len()), a.max(b).min(s.len()));
            proptest::prop_assert_eq!(
                sfh64_ascii_lower_at(7, s.as_bytes(), a, b),
                sfh64(7, s[a..b].to_ascii_lowercase().as_bytes())
            );
        }
    }

    #[test]
    fn bits_are_balanced() {
        // every output bit is set for about half of 20,000 distinct inputs
        let mut ones = [0u32; 64];
        for i in 0..20_000u32 {
            let h = sfh64(0, format!("w{i}").as_bytes());
            for (b, n) in ones.iter_mut().enumerate() {
                *n += ((h >> b) & 1) as u32;
            }
        }
        for n in ones {
            assert!((9_500..=10_500).contains(&n), "{n}");
        }
    }
}
