//! The crawler's page, stage by stage: microseconds a page (CPU time of this thread) of each
//! step of `DocumentIndex::find_or_insert_document` on real-text HTML pages: the visible
//! text, the fingerprint, the sketch (each recipe), the fingerprint and sketch in one scan,
//! and the whole call on a new index with sketches (k = 8 confirmed at 0.90).
//!
//!     python3 benches/gen_docs.py --html --median-bytes 7500 --docs 3000 --out DIR
//!     cargo bench -p simdex-fingerprint --bench page -- DIR/docs.jsonl [COUNT]
//!
//! Prints a table; the Python and Scrapy figures beside the baseline build come from
//! `benches/page_speed.py` (benches/RESULTS.md).

// A bench may unwrap and index: a panic there is a failed run (the crate's lint policy is
// for the library).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use simdex_fingerprint::sketch::{SketchOptions, Sketcher};
use simdex_fingerprint::{visible_text, DocumentIndex, DocumentInput, DocumentKind, DocumentQuery, FingerprintOptions, Fingerprinter};
use std::hint::black_box;
use std::time::Duration;

/// CPU time consumed by this thread.
fn thread_time() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID is supported on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Microseconds a page of `work` over all pages: the median of three runs.
fn per_page<T>(pages: usize, mut work: impl FnMut() -> T) -> f64 {
    let mut runs: Vec<f64> = (0..3)
        .map(|_| {
            let t = thread_time();
            black_box(work());
            (thread_time() - t).as_secs_f64() * 1e6 / pages as f64
        })
        .collect();
    runs.sort_by(f64::total_cmp);
    runs[1]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: cargo bench -p simdex-fingerprint --bench page -- PAGES.jsonl [COUNT]   (pages: benches/gen_docs.py --html)");
        return;
    };
    let count: usize = args.get(1).map_or(3000, |c| c.parse().unwrap());
    let pages: Vec<Vec<u8>> = std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .take(count)
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["html"].as_str().unwrap().as_bytes().to_vec())
        .collect();
    let n = pages.len();
    let bytes = pages.iter().map(Vec::len).sum::<usize>() as f64 / n as f64;
    let texts: Vec<String> = pages.iter().map(|p| visible_text(std::str::from_utf8(p).unwrap())).collect();
    let mut fp = Fingerprinter::new(FingerprintOptions::default()).unwrap();
    let mut rows: Vec<(String, f64)> = Vec::new();
    rows.push(("visible text of the HTML".into(), per_page(n, || pages.iter().map(|p| visible_text(std::str::from_utf8(p).unwrap()).len()).sum::<usize>())));
    rows.push(("fingerprint of the text".into(), per_page(n, || texts.iter().map(|t| fp.fingerprint(t).unwrap().value).fold(0, u64::wrapping_add))));
    for version in [1, 2] {
        let mut sketcher = Sketcher::new(SketchOptions::default().with_version(version)).unwrap();
        rows.push((format!("sketch recipe {version}: shingles"), per_page(n, || texts.iter().map(|t| sketcher.shingles(t).len()).sum::<usize>())));
        let sets: Vec<Vec<u64>> = texts.iter().map(|t| sketcher.shingles(t).to_vec()).collect();
        rows.push((
            format!("sketch recipe {version}: values of the set"),
            per_page(n, || sets.iter().map(|s| sketcher.sketch_of_set(s).as_bytes()[0]).fold(0u8, u8::wrapping_add)),
        ));
    }
    let mut sketcher = Sketcher::new(SketchOptions::default()).unwrap();
    rows.push((
        "fingerprint + sketch (recipe 2), one scan".into(),
        per_page(n, || texts.iter().map(|t| fp.fingerprint_and_sketch(t, &mut sketcher).1.as_bytes()[0]).fold(0u8, u8::wrapping_add)),
    ));
    let dir = tempfile::tempdir().unwrap();
    let mut next = 0u64;
    let whole = per_page(n, || {
        // a new index each run: every page is checked against the ones before it
        next += 1;
        let index = DocumentIndex::open(dir.path().join(format!("i{next}")), simdex::IndexOptions::default().with_sketches(Some(SketchOptions::default().column()))).unwrap();
        let query = DocumentQuery::default();
        let found = pages
            .iter()
            .enumerate()
            .filter(|(i, p)| {
                !matches!(index.find_or_insert_document(DocumentInput { bytes: p, kind: DocumentKind::Html }, *i as u64, &query).unwrap().1, simdex::FindOrInsert::Inserted { .. })
            })
            .count();
        index.close().unwrap();
        found
    });
    rows.push(("find_or_insert_document (HTML page, new index, sketches)".into(), whole));
    println!("{n} pages, {:.1} KB on average (visible text {:.1} KB)\n", bytes / 1000.0, texts.iter().map(String::len).sum::<usize>() as f64 / n as f64 / 1000.0);
    println!("| step | us a page (CPU) |\n|---|---|");
    for (what, us) in rows {
        println!("| {what} | {us:.1} |");
    }
}
