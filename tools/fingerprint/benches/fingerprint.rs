//! Fingerprinting throughput, per core: plain text and HTML (visible-text extraction
//! included), with the default recipe. Inputs are the bundled corpus (fixtures/corpus), so the
//! numbers are reproducible anywhere. Time is the CPU time of the benchmark thread (Linux
//! `CLOCK_THREAD_CPUTIME_ID`), so that a machine shared with other jobs still reports what one
//! core does; elsewhere it is wall-clock time.
//!
//!     cargo bench -p simdex-fingerprint --bench fingerprint
//!
//! Results and the machine they were measured on: benches/FINGERPRINT.md.

// A bench may unwrap and index: a panic there is a failed run (the crate's lint policy is
// for the library).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use simdex_fingerprint::InvalidUtf8;
use simdex_fingerprint::{extract_text, fingerprint_html_reader};
use simdex_fingerprint::{FeatureKind, FingerprintOptions, Fingerprinter, TfMode};
use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

/// CPU time consumed by this thread.
#[cfg(target_os = "linux")]
fn thread_time() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID is supported on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[cfg(not(target_os = "linux"))]
fn thread_time() -> Duration {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed()
}

/// Runs `work` `iters` times and returns the CPU time it took.
fn timed<T>(iters: u64, mut work: impl FnMut() -> T) -> Duration {
    let start = thread_time();
    for _ in 0..iters {
        black_box(work());
    }
    thread_time() - start
}

/// The corpus pages whose names start with `prefix`, in name order.
fn pages(prefix: &str) -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/corpus/pages");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .expect("fixtures/corpus/pages")
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.starts_with(prefix) && n.ends_with(".html"))
        .collect();
    names.sort();
    names.iter().map(|n| std::fs::read_to_string(dir.join(n)).expect("page")).collect()
}

fn visible(html: &str) -> String {
    let mut text = String::new();
    extract_text(html.as_bytes(), |p| text.push_str(p)).expect("extract");
    text
}

fn bench(c: &mut Criterion) {
    let en: Vec<String> = pages("en-").iter().map(|p| visible(p)).collect();
    let all_html = pages("");
    let mixed: Vec<String> = all_html.iter().map(|p| visible(p)).collect();
    let recipes = [
        ("default", FingerprintOptions::default()),
        ("words-tf", FingerprintOptions::default().with_features(vec![FeatureKind::Words]).with_tf(TfMode::Raw)),
        ("short-text", FingerprintOptions::short_text()),
    ];

    let mut g = c.benchmark_group("text");
    for (corpus, docs) in [("english", &en), ("multilingual", &mixed)] {
        let bytes: usize = docs.iter().map(String::len).sum();
        g.throughput(Throughput::Bytes(bytes as u64));
        for (name, o) in &recipes {
            let mut f = Fingerprinter::new(o.clone()).expect("recipe");
            g.bench_with_input(BenchmarkId::new(*name, corpus), docs, |b, docs| {
                b.iter_custom(|iters| timed(iters, || docs.iter().map(|d| f.fingerprint(d).map_or(0, |x| x.value)).fold(0, |a, x| a ^ x)))
            });
        }
    }
    g.finish();

    let mut g = c.benchmark_group("html");
    let bytes: usize = all_html.iter().map(String::len).sum();
    g.throughput(Throughput::Bytes(bytes as u64));
    let mut f = Fingerprinter::new(FingerprintOptions::default()).expect("recipe");
    g.bench_function("default/multilingual", |b| {
        b.iter_custom(|iters| {
            timed(iters, || all_html.iter().map(|p| fingerprint_html_reader(&mut f, p.as_bytes(), InvalidUtf8::Replace).map_or(0, |o| o.fingerprint.value)).fold(0, |a, x| a ^ x))
        })
    });
    g.bench_function("extract-only/multilingual", |b| b.iter_custom(|iters| timed(iters, || all_html.iter().map(|p| visible(p).len()).sum::<usize>())));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
