//! Block codec speed: encode, and decode with the production decoder versus the bitvec
//! reference decoder, on random and clustered sorted data, both codecs.

// A bench may unwrap and index: a panic there is a failed run (the crate's lint policy is
// for the library).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use simdex::codec::reference::decode_block_reference;
use simdex::codec::{decode_block, encode_all, Codec, SymbolHistogram};

#[path = "common.rs"]
mod common;

fn data(kind: &str) -> Vec<u64> {
    let mut v = match kind {
        "random" => common::random(1_000_000, 1),
        _ => common::clustered(1_000_000, 1),
    };
    v.sort_unstable();
    v
}

fn bench(c: &mut Criterion) {
    for kind in ["random", "clustered"] {
        let values = data(kind);
        for codec in [Codec::Xor, Codec::Delta] {
            let code = SymbolHistogram::of_sorted(codec, &values).code();
            let blocks = encode_all(codec, &code, &values);
            let mut g = c.benchmark_group(format!("codec/{kind}/{}", codec.name()));
            g.sample_size(10);
            g.throughput(Throughput::Elements(values.len() as u64));
            g.bench_function("encode", |b| b.iter(|| encode_all(codec, &code, &values).len()));
            g.bench_function(BenchmarkId::new("decode", "fast"), |b| {
                b.iter(|| {
                    let mut sum = 0u64;
                    for (block, count, _) in &blocks {
                        decode_block(codec, &code, block, *count, |v| {
                            sum = sum.wrapping_add(v);
                            true
                        })
                        .unwrap();
                    }
                    sum
                })
            });
            // The reference decoder is ~two orders of magnitude slower: time a slice.
            let some = &blocks[..blocks.len() / 50];
            let some_entries: u64 = some.iter().map(|b| u64::from(b.1)).sum();
            g.throughput(Throughput::Elements(some_entries));
            g.bench_function(BenchmarkId::new("decode", "bitvec-reference"), |b| {
                b.iter(|| some.iter().map(|(block, count, _)| decode_block_reference(codec, code.lengths(), block, *count).unwrap().len()).sum::<usize>())
            });
            g.finish();
        }
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
