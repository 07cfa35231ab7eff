//! Synthetic sketches for benchmarks: a document id's sketch is a seeded pseudo-random byte
//! string, so `bench index` (which stores them) and `bench query --confirmed` (which queries
//! with them) agree without a corpus. Random bytes are valid b-bit MinHash values: two
//! sketches of one id estimate resemblance 1, of two ids about 0.

/// `width` bytes of a splitmix64 stream seeded by `seed`.
pub(super) fn synthetic_sketch(seed: u64, width: usize) -> Vec<u8> {
    let mut state = seed;
    let mut out = Vec::with_capacity(width + 8);
    while out.len() < width {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(width);
    out
}

#[cfg(test)]
mod tests {
    use super::synthetic_sketch;
    use simdex::minhash_resemblance;

    #[test]
    fn one_id_resembles_itself_and_two_ids_do_not() {
        let (a, b) = (synthetic_sketch(7, 64), synthetic_sketch(8, 64));
        assert_eq!(a.len(), 64);
        assert_eq!(a, synthetic_sketch(7, 64), "seeded: the same id, the same sketch");
        assert_eq!(minhash_resemblance(&a, &a, 512, 1), Some(1.0));
        let other = minhash_resemblance(&a, &b, 512, 1).unwrap();
        assert!(other < 0.3, "two ids' sketches estimate {other}");
    }
}
