//! `simdex bench query`: latency and throughput of queries on an open index or segment, from
//! one thread or several sharing it, plain or confirmed by sketch.

use anyhow::{bail, Context, Result};
use clap::Args as ClapArgs;
use serde_json::json;
use simdex::{ConfirmOptions, Index, IndexOptions, Match, QueryOptions, Source};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use super::sketch::synthetic_sketch;
use crate::input::{self, InputFormat};

#[derive(Debug, ClapArgs)]
pub(super) struct QueryArgs {
    /// A segment file, or an index directory (opened read-only: every live segment, the
    /// tombstones and the unflushed writes, as `simdex query DIR` answers).
    pub(super) file: PathBuf,
    /// The queries (same formats as `simdex build`).
    #[arg(long, short)]
    pub(super) input: PathBuf,
    /// Hamming distance.
    #[arg(short, long, default_value_t = 3)]
    pub(super) k: u32,
    /// The query file is little-endian u64s.
    #[arg(long)]
    pub(super) binary: bool,
    /// Timed passes over the queries.
    #[arg(long, default_value_t = 1)]
    pub(super) rounds: u32,
    /// Threads querying the one open index (or segment) at once, each taking the next 64
    /// queries when it is free (as a server's threads take requests); queries/s is the
    /// total, latencies are every thread's together.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub(super) threads: u32,
    /// Measure cold: no untimed warm-up pass over the queries first (drop the page cache
    /// before, e.g. `echo 3 > /proc/sys/vm/drop_caches` as root, to measure reads from disk).
    #[arg(long)]
    pub(super) no_warmup: bool,
    /// Time the check confirmed by sketch (`Index::query_confirmed` at `-k`) on an index
    /// directory that stores sketches (e.g. `simdex bench index`'s). Each query's sketch is
    /// the synthetic sketch of its document id when the query file gives ids (so a near
    /// copy from `bench generate --near --with-ids` is confirmed), else one seeded by its
    /// fingerprint (confirmed by nothing, but every candidate's sketch is still read and
    /// compared).
    #[arg(long, alias = "verified")]
    pub(super) confirmed: bool,
    /// With --confirmed: the resemblance a candidate's sketch must reach.
    #[arg(long, default_value_t = 0.9, requires = "confirmed")]
    pub(super) min_similarity: f64,
    /// With --confirmed: find every candidate within -k through the tables (multi-probe), as
    /// before band files, instead of the default check (`ConfirmOptions::exhaustive`).
    #[arg(long, requires = "confirmed")]
    pub(super) exhaustive: bool,
    /// With --confirmed: only pairs within -k are answers (`ConfirmOptions::band_candidates`
    /// off): the check before band candidates.
    #[arg(long, requires = "confirmed")]
    pub(super) no_band_candidates: bool,
    /// With --confirmed: how far above --min-similarity a band candidate beyond -k must be
    /// estimated (`ConfirmOptions::band_margin`; default the library's)
    #[arg(long, requires = "confirmed", conflicts_with = "no_band_candidates")]
    pub(super) band_margin: Option<f64>,
    /// With --confirmed: check all the queries in one library call (`query_confirmed_many`,
    /// the batch a front such as `simdex.spark dedup --index` hands over: batch mode when it
    /// is large), timed per round as a whole (wall and CPU seconds; no latencies).
    #[arg(long, requires = "confirmed", conflicts_with = "threads")]
    pub(super) many: bool,
    /// Print JSON.
    #[arg(long)]
    pub(super) json: bool,
}

pub(super) fn query(args: QueryArgs) -> Result<()> {
    let read = input::read_all(&args.input, InputFormat { binary: args.binary, with_ids: false }, |_| {})?;
    let queries = read.fps;
    if queries.is_empty() {
        bail!("{}: no queries", args.input.display());
    }
    let opened = Instant::now();
    let target = if args.confirmed {
        let index = Index::open_read_only(&args.file, IndexOptions::default()).with_context(|| format!("{}: --confirmed needs an index directory", args.file.display()))?;
        let Some(column) = index.sketches() else {
            bail!("{}: --confirmed needs an index that stores sketches (e.g. made by `simdex bench index`)", args.file.display());
        };
        // A query's sketch: its document id's synthetic sketch when the file gives ids (a near
        // copy made by `bench generate --near --with-ids` has its original's id, so it is
        // confirmed), else one seeded by the fingerprint (it confirms nothing, but costs the
        // same: every candidate's stored sketch is read and compared).
        let width = usize::from(column.bytes);
        let sketches = match &read.ids {
            Some(ids) => ids.iter().flat_map(|&id| synthetic_sketch(id, width)).collect(),
            None => queries.iter().flat_map(|&fp| synthetic_sketch(fp ^ UNRELATED, width)).collect(),
        };
        let options = ConfirmOptions::within(args.k).with_min_similarity(args.min_similarity).with_exhaustive(args.exhaustive).with_band_candidates(!args.no_band_candidates);
        let options = args.band_margin.map_or(options, |m| options.with_band_margin(m));
        Target::Verified { index, sketches, width, options }
    } else {
        Target::Plain { source: Box::new(Source::open(&args.file)?), options: QueryOptions::within(args.k) }
    };
    let open_ms = opened.elapsed().as_secs_f64() * 1e3;
    let (entries, design) = target.describe()?;
    if let (true, Target::Verified { index, sketches, options, .. }) = (args.many, &target) {
        return many(&args, index, &queries, sketches, options, (entries, &design, open_ms));
    }
    let mut matches = 0u64;
    let mut scratch = Vec::new();
    if !args.no_warmup {
        for (i, &q) in queries.iter().enumerate() {
            target.query(i, q, &mut scratch)?;
        }
    }
    let threads = args.threads as usize;
    let (start, cpu) = (Instant::now(), crate::progress::cpu_seconds("/proc/self/stat"));
    // The threads take the queries (every round's, in order) from one shared cursor, a
    // chunk at a time, as a server's threads take requests: a thread the OS holds back
    // leaves its work to the others instead of finishing last with a fixed share.
    let total = queries.len() * args.rounds as usize;
    let cursor = AtomicUsize::new(0);
    let shares: Vec<Result<(Vec<u64>, u64)>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let (target, queries, cursor) = (&target, &queries, &cursor);
                scope.spawn(move || -> Result<(Vec<u64>, u64)> {
                    let (mut latencies, mut matches, mut scratch) = (Vec::new(), 0u64, Vec::new());
                    loop {
                        let from = cursor.fetch_add(CHUNK, Ordering::Relaxed);
                        if from >= total {
                            break;
                        }
                        for j in from..(from + CHUNK).min(total) {
                            let i = j % queries.len();
                            let q = queries.get(i).copied().unwrap_or_default();
                            let started = Instant::now();
                            let found = target.query(i, q, &mut scratch)?;
                            latencies.push(started.elapsed().as_nanos() as u64);
                            matches += found as u64;
                        }
                    }
                    Ok((latencies, matches))
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a query thread panicked")))).collect()
    });
    let (wall, cpu) = (start.elapsed().as_secs_f64(), crate::progress::cpu_seconds("/proc/self/stat") - cpu);
    let mut latencies = Vec::with_capacity(queries.len() * args.rounds as usize);
    for share in shares {
        let (l, m) = share?;
        latencies.extend(l);
        matches += m;
    }
    latencies.sort_unstable();
    let us = |ns: u64| ns as f64 / 1000.0;
    let n = latencies.len();
    let mean = latencies.iter().sum::<u64>() as f64 / n as f64 / 1000.0;
    let p50 = us(latencies[n / 2]);
    let p99 = us(latencies[(n * 99 / 100).min(n - 1)]);
    let qps = n as f64 / wall;
    let confirmed = args.confirmed.then_some(args.min_similarity);
    if args.json {
        out!(
            "{}",
            json!({"file": args.file, "entries": entries, "design": design, "k": args.k, "confirmed": confirmed, "exhaustive": args.exhaustive, "band_candidates": !args.no_band_candidates, "queries": n, "threads": threads, "warmup": !args.no_warmup, "open_ms": open_ms,
                   "matches": matches, "qps": qps, "queries_per_second": qps, "mean_us": mean, "p50_us": p50, "p99_us": p99, "wall_s": wall, "cpu_s": cpu})
        );
    } else {
        out!("{}: {entries} fingerprints, {design}; opened in {open_ms:.1} ms{}", args.file.display(), if args.no_warmup { ", no warm-up" } else { "" });
        let on = if threads > 1 { format!(" on {threads} threads") } else { String::new() };
        let how = confirmed.map_or(String::new(), |s| {
            format!(", confirmed by sketch at {s}{}{}", if args.exhaustive { ", exhaustive" } else { "" }, if args.no_band_candidates { ", no band candidates" } else { "" })
        });
        out!("{n} queries (k = {}{how}){on}, {matches} matches: {qps:.0} queries/s; latency mean {mean:.2} us, p50 {p50:.2} us, p99 {p99:.2} us", args.k);
    }
    if let Target::Verified { index, .. } = &target {
        warn_band_fallbacks(index);
    }
    Ok(())
}

/// `--many`: every query checked in one `query_confirmed_many` call per round (after an
/// untimed one unless `--no-warmup`); prints the matches, wall and CPU seconds.
fn many(args: &QueryArgs, index: &Index, queries: &[u64], sketches: &[u8], options: &ConfirmOptions, (entries, design, open_ms): (u64, &str, f64)) -> Result<()> {
    if !args.no_warmup {
        simdex::query_confirmed_many(index, queries, sketches, options)?;
    }
    let (start, cpu) = (Instant::now(), crate::progress::cpu_seconds("/proc/self/stat"));
    let mut matches = 0u64;
    for _ in 0..args.rounds {
        matches += simdex::query_confirmed_many(index, queries, sketches, options)?.matches() as u64;
    }
    let (wall, cpu) = (start.elapsed().as_secs_f64(), crate::progress::cpu_seconds("/proc/self/stat") - cpu);
    let n = queries.len() as u64 * u64::from(args.rounds);
    let qps = n as f64 / wall;
    if args.json {
        out!(
            "{}",
            json!({"file": args.file, "entries": entries, "design": design, "k": args.k, "confirmed": args.min_similarity, "exhaustive": args.exhaustive, "band_candidates": !args.no_band_candidates, "queries": n, "many": true, "warmup": !args.no_warmup, "open_ms": open_ms,
                   "matches": matches, "qps": qps, "queries_per_second": qps, "wall_s": wall, "cpu_s": cpu})
        );
    } else {
        out!("{}: {entries} fingerprints, {design}; opened in {open_ms:.1} ms{}", args.file.display(), if args.no_warmup { ", no warm-up" } else { "" });
        out!(
            "{n} queries (k = {}, confirmed by sketch at {}) in {} call(s) of {} documents, {matches} matches: {qps:.0} queries/s; wall {wall:.2} s, CPU {cpu:.2} s",
            args.k,
            args.min_similarity,
            args.rounds,
            queries.len()
        );
    }
    warn_band_fallbacks(index);
    Ok(())
}

/// Warns on stderr when checks on `index` found a band file damaged or missing and were
/// answered from the tables instead (right answers, slower): which files, and what
/// rebuilds them.
fn warn_band_fallbacks(index: &simdex::Index) {
    let stats = index.stats();
    if stats.band_fallbacks == 0 && stats.band_files_unusable.is_empty() {
        return;
    }
    let how = if stats.read_only {
        "a writing process rebuilds a missing band file when it opens the index, a damaged one when its own checks meet the damage; `simdex verify` names every damaged page"
    } else {
        "they are being rebuilt"
    };
    eprintln!("warning: {} check(s) answered from the tables instead of a band file ({how}):", stats.band_fallbacks);
    for why in &stats.band_files_unusable {
        eprintln!("  {why}");
    }
}

/// Queries a thread takes from the shared cursor at a time.
const CHUNK: usize = 64;

/// Mixed into a fingerprint to seed the sketch of a query without a document id.
const UNRELATED: u64 = 0x5ca1_ab1e_0ddb_a110;

/// What the queries run against.
enum Target {
    /// A segment file or an index directory, queried by fingerprint (boxed: a segment's
    /// reader is several times the other variant's size).
    Plain { source: Box<Source>, options: QueryOptions },
    /// An index with sketches, each query confirmed by its sketch (`sketches`: `width` bytes
    /// per query, in query order).
    Verified { index: Index, sketches: Vec<u8>, width: usize, options: ConfirmOptions },
}

impl Target {
    /// Entries held and a description of the design or live set.
    fn describe(&self) -> Result<(u64, String)> {
        Ok(match self {
            Target::Plain { source, .. } => match &**source {
                Source::Segment(seg) => (seg.len(), seg.design().summary()),
                Source::Snapshot(snap) => {
                    let segments = snap.segments();
                    let held = segments.iter().map(|s| s.len()).sum::<u64>() + snap.unflushed().len() as u64;
                    (held, format!("{} segments and {} unflushed pairs", segments.len(), snap.unflushed().len()))
                }
            },
            Target::Verified { index, width, .. } => {
                let stats = index.stats();
                let held = stats.segments.iter().map(|s| s.entries).sum::<u64>() + stats.memtable_inserts;
                (held, format!("{} segments, {width}-byte sketches", stats.segments.len()))
            }
        })
    }

    /// Runs query `i` (fingerprint `q`); returns how many matches it found.
    fn query(&self, i: usize, q: u64, scratch: &mut Vec<Match>) -> Result<usize> {
        Ok(match self {
            Target::Plain { source, options } => {
                source.query_into(q, options, scratch)?;
                scratch.len()
            }
            Target::Verified { index, sketches, width, options } => {
                let sketch = sketches.get(i * width..(i + 1) * width).unwrap_or_default();
                index.query_confirmed(q, sketch, options)?.len()
            }
        })
    }
}
