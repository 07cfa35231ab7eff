//! Segment build throughput and online query latency (criterion), at N = 1e6 and 1e7
//! random fingerprints with the planner's default design and k = 3.
//!
//! Set `SIMDEX_BENCH_SIZES=1000000` to run one size only.

// A bench may unwrap and index: a panic there is a failed run (the crate's lint policy is
// for the library).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use simdex::storage::FsStorage;
use simdex::{build_segment, BuildOptions, QueryOptions, Segment};

#[path = "common.rs"]
mod common;

fn sizes() -> Vec<usize> {
    std::env::var("SIMDEX_BENCH_SIZES").map(|s| s.split(',').map(|x| x.trim().parse().expect("size")).collect()).unwrap_or_else(|_| vec![1_000_000, 10_000_000])
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    for n in sizes() {
        let fps = common::random(n, 7);
        let path = dir.path().join(format!("s{n}.sdx"));
        let mut g = c.benchmark_group("build");
        g.sample_size(10);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(BenchmarkId::from_parameter(n), |b| b.iter(|| build_segment(&FsStorage, &path, &fps, None, &BuildOptions::default()).unwrap()));
        g.finish();

        let seg = Segment::open(&path).unwrap();
        let qs = common::queries(&fps, 10_000, 99);
        let mut out = Vec::new();
        let mut i = 0;
        let mut g = c.benchmark_group("query");
        g.throughput(Throughput::Elements(1));
        g.bench_function(BenchmarkId::new("k3", n), |b| {
            b.iter(|| {
                i = (i + 1) % qs.len();
                seg.query_into(qs[i], &QueryOptions::within(3), &mut out).unwrap();
                out.len()
            })
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
