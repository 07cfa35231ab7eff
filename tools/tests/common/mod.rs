//! What several CLI test binaries share; each uses a part.
#![allow(dead_code)]

pub mod streaming;

/// `n` deterministic (fingerprint, id) pairs: xorshift fingerprints, ids `seed * 1e6 + i`.
pub fn pairs(n: u64, seed: u64) -> Vec<(u64, u64)> {
    let mut x = seed;
    (0..n)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x, seed * 1_000_000 + i)
        })
        .collect()
}
