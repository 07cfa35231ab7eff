//! Bits per fingerprint per table against the information bound log2(C(2^64, N)) / N, for
//! both codecs on random and clustered data. Prints a table (no timing).
//!
//! `cargo bench --bench space` (sizes: 1e6, 1e7, 2^26; `SIMDEX_BENCH_SIZES` overrides).

// A bench may unwrap and index: a panic there is a failed run (the crate's lint policy is
// for the library).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use simdex::codec::{Codec, SymbolHistogram, BLOCK_BYTES};
use simdex::plan::information_bound_bits;

#[path = "common.rs"]
mod common;

/// Block index bytes per block (key, count, CRC).
const INDEX_BYTES: usize = 14;

fn main() {
    let sizes: Vec<usize> =
        std::env::var("SIMDEX_BENCH_SIZES").map(|s| s.split(',').map(|x| x.trim().parse().expect("size")).collect()).unwrap_or_else(|_| vec![1_000_000, 10_000_000, 1 << 26]);
    println!("| data | N | codec | bound (bits) | blocks (bits/fp) | + index (bits/fp) | ratio to bound |");
    println!("|---|---|---|---|---|---|---|");
    for &n in &sizes {
        for kind in ["random", "clustered"] {
            let mut v = if kind == "random" { common::random(n, 3) } else { common::clustered(n, 3) };
            v.sort_unstable();
            let distinct = {
                let mut d = v.clone();
                d.dedup();
                d.len() as u64
            };
            // The bound for a multiset is below the set bound; report the set bound of the
            // distinct values, which is what the targets use for random data.
            let bound = information_bound_bits(distinct);
            for codec in [Codec::Xor, Codec::Delta] {
                let code = SymbolHistogram::of_sorted(codec, &v).code();
                let blocks = simdex::codec::encode_all(codec, &code, &v).len();
                let block_bits = (blocks * BLOCK_BYTES * 8) as f64 / n as f64;
                let total_bits = (blocks * (BLOCK_BYTES + INDEX_BYTES) * 8) as f64 / n as f64;
                println!("| {kind} | {n} | {} | {bound:.2} | {block_bits:.3} | {total_bits:.3} | {:.4} |", codec.name(), total_bits / bound);
            }
        }
    }
}
