//! Data generators shared by the benches (deterministic, so runs are comparable).

// A bench may unwrap and index: a panic there is a failed run.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]
#![allow(dead_code)]

/// xorshift64* stream.
pub fn random(n: usize, seed: u64) -> Vec<u64> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            x.wrapping_mul(0x2545_f491_4f6c_dd1d)
        })
        .collect()
}

/// Clustered fingerprints: `n / 64` random centers, each with 64 near copies (0..=6 bit
/// flips), plus 10% exact duplicates of fingerprint 0 (empty pages).
pub fn clustered(n: usize, seed: u64) -> Vec<u64> {
    let centers = random(n / 64 + 1, seed);
    let noise = random(n, seed ^ 0xabcdef);
    (0..n)
        .map(|i| {
            if i % 10 == 0 {
                return 0;
            }
            let c = centers[i / 64];
            let r = noise[i];
            let flips = (r % 7) as u32;
            let mut y = c;
            for j in 0..flips {
                y ^= 1 << ((r >> (8 + 6 * j)) & 63);
            }
            y
        })
        .collect()
}

/// Queries: half near copies (1..=3 bits) of stored fingerprints, half random.
pub fn queries(stored: &[u64], n: usize, seed: u64) -> Vec<u64> {
    let r = random(n, seed);
    (0..n)
        .map(|i| {
            if i % 2 == 0 {
                r[i]
            } else {
                let x = stored[(r[i] % stored.len() as u64) as usize];
                x ^ (1 << (r[i] >> 58)) ^ (1 << ((r[i] >> 52) & 63))
            }
        })
        .collect()
}
