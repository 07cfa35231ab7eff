//! `simdex bench`: timed operations on real files.

use anyhow::{bail, Result};
use clap::{Args as ClapArgs, Subcommand};
use serde_json::json;
use simdex::{QueryOptions, Source};
use std::path::PathBuf;
use std::time::Instant;

use crate::input::{self, InputFormat};

/// Time queries on an index, or write fingerprints to time them with.
#[derive(Debug, ClapArgs)]
#[command(
    after_help = "Examples:\n  simdex bench generate --count 100000 > stored.txt\n  simdex bench generate --count 1000 --near stored.txt --flips 2 > queries.txt\n  simdex bench query stored.sdx --input queries.txt -k 3"
)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(Debug, Subcommand)]
enum What {
    /// Time one query at a time (single thread) and report throughput and latency.
    ///
    /// Runs every query of QFILE once as a warm-up (so the page cache holds the file),
    /// then `--rounds` times timed; prints queries/s and latency mean, p50 and p99 in
    /// microseconds.
    #[command(after_help = "Examples:\n  simdex bench query stored.sdx --input queries.txt -k 3")]
    Query(QueryArgs),
    /// Write random fingerprints, or near copies of an existing list, for benchmarks.
    ///
    /// Uses a seeded xorshift generator, so the same arguments give the same file.
    /// With `--near FILE`, each output line is a fingerprint of FILE (cycled) with
    /// `--flips` random bits flipped.
    #[command(after_help = "Examples:\n  simdex bench generate --count 100000 > stored.txt\n  simdex bench generate --count 1000 --near stored.txt --flips 2 > queries.txt")]
    Generate(GenerateArgs),
}

#[derive(Debug, ClapArgs)]
struct GenerateArgs {
    /// How many fingerprints.
    #[arg(long, short = 'n')]
    count: u64,
    /// Generator seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write near copies of this file's fingerprints instead of random ones.
    #[arg(long)]
    near: Option<PathBuf>,
    /// Bits flipped in each near copy.
    #[arg(long, default_value_t = 2)]
    flips: u32,
    /// Write little-endian u64s instead of text.
    #[arg(long)]
    binary: bool,
    /// Append a document id (the line number) to each fingerprint.
    #[arg(long)]
    with_ids: bool,
    /// Plant this many clusters first: each a random center and `--cluster-size` copies
    /// with up to `--flips` random bits flipped (the rest of the count is random).
    #[arg(long, default_value_t = 0)]
    clusters: u64,
    /// Members per planted cluster.
    #[arg(long, default_value_t = 10)]
    cluster_size: u64,
}

#[derive(Debug, ClapArgs)]
struct QueryArgs {
    /// A segment file, or an index directory (opened read-only: every live segment, the
    /// tombstones and the unflushed writes, as `simdex query DIR` answers).
    file: PathBuf,
    /// The queries (same formats as `simdex build`).
    #[arg(long, short)]
    input: PathBuf,
    /// Hamming distance.
    #[arg(short, long, default_value_t = 3)]
    k: u32,
    /// The query file is little-endian u64s.
    #[arg(long)]
    binary: bool,
    /// Timed passes over the queries.
    #[arg(long, default_value_t = 1)]
    rounds: u32,
    /// Threads querying the one open index (or segment) at once, each taking every N-th
    /// query; queries/s is the total, latencies are every thread's together.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    threads: u32,
    /// Measure cold: no untimed warm-up pass over the queries first (drop the page cache
    /// before, e.g. `echo 3 > /proc/sys/vm/drop_caches` as root, to measure reads from disk).
    #[arg(long)]
    no_warmup: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<()> {
    match args.what {
        What::Query(a) => query(a),
        What::Generate(a) => generate(a),
    }
}

fn generate(args: GenerateArgs) -> Result<()> {
    use std::io::Write;
    let mut state = args.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let base = match &args.near {
        Some(path) => {
            let fps = input::read_all(path, InputFormat { binary: false, with_ids: false }, |_| {})?.fps;
            if fps.is_empty() {
                bail!("{}: no fingerprints to copy", path.display());
            }
            Some(fps)
        }
        None => None,
    };
    if args.flips > 64 {
        bail!("--flips {}: at most 64 bits can be flipped", args.flips);
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let planted = args.clusters.saturating_mul(args.cluster_size).min(args.count);
    let mut center = 0u64;
    for i in 0..args.count {
        if i < planted {
            if i % args.cluster_size.max(1) == 0 {
                center = next();
            }
            let flips = (next() % (u64::from(args.flips) + 1)) as u32;
            let mut y = center;
            while (y ^ center).count_ones() < flips {
                y ^= 1 << (next() % 64);
            }
            write_fp(&mut out, y, i, args.binary, args.with_ids)?;
            continue;
        }
        let fp = match &base {
            Some(fps) => {
                let x = fps[(i % fps.len() as u64) as usize];
                let mut y = x;
                while (y ^ x).count_ones() < args.flips {
                    y ^= 1 << (next() % 64);
                }
                y
            }
            None => next(),
        };
        write_fp(&mut out, fp, i, args.binary, args.with_ids)?;
    }
    out.flush()?;
    Ok(())
}

fn write_fp(out: &mut impl std::io::Write, fp: u64, id: u64, binary: bool, with_ids: bool) -> Result<()> {
    match (binary, with_ids) {
        (true, false) => out.write_all(&fp.to_le_bytes())?,
        (true, true) => {
            out.write_all(&fp.to_le_bytes())?;
            out.write_all(&id.to_le_bytes())?;
        }
        (false, false) => writeln!(out, "{fp:016x}")?,
        (false, true) => writeln!(out, "{fp:016x}\t{id}")?,
    }
    Ok(())
}

fn query(args: QueryArgs) -> Result<()> {
    let queries = input::read_all(&args.input, InputFormat { binary: args.binary, with_ids: false }, |_| {})?.fps;
    if queries.is_empty() {
        bail!("{}: no queries", args.input.display());
    }
    let opened = Instant::now();
    let source = Source::open(&args.file)?;
    let open_ms = opened.elapsed().as_secs_f64() * 1e3;
    let (entries, design) = match &source {
        Source::Segment(seg) => (seg.len(), seg.design().summary()),
        Source::Snapshot(snap) => {
            let segments = snap.segments();
            let held = segments.iter().map(|s| s.len()).sum::<u64>() + snap.unflushed().len() as u64;
            (held, format!("{} segments and {} unflushed pairs", segments.len(), snap.unflushed().len()))
        }
    };
    let options = QueryOptions::within(args.k);
    let mut out = Vec::new();
    let mut matches = 0u64;
    if !args.no_warmup {
        for &q in &queries {
            source.query_into(q, &options, &mut out)?;
        }
    }
    let threads = args.threads as usize;
    let start = Instant::now();
    // Each thread queries its share (every `threads`-th query) through the one shared source.
    let shares: Vec<Result<(Vec<u64>, u64)>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (source, queries, options) = (&source, &queries, &options);
                scope.spawn(move || -> Result<(Vec<u64>, u64)> {
                    let (mut latencies, mut matches, mut out) = (Vec::new(), 0u64, Vec::new());
                    for _ in 0..args.rounds {
                        for &q in queries.iter().skip(t).step_by(threads) {
                            let started = Instant::now();
                            source.query_into(q, options, &mut out)?;
                            latencies.push(started.elapsed().as_nanos() as u64);
                            matches += out.len() as u64;
                        }
                    }
                    Ok((latencies, matches))
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a query thread panicked")))).collect()
    });
    let wall = start.elapsed().as_secs_f64();
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
    if args.json {
        out!(
            "{}",
            json!({"file": args.file, "entries": entries, "design": design, "k": args.k, "queries": n, "threads": threads, "warmup": !args.no_warmup, "open_ms": open_ms,
                   "matches": matches, "qps": qps, "queries_per_second": qps, "mean_us": mean, "p50_us": p50, "p99_us": p99})
        );
    } else {
        out!("{}: {entries} fingerprints, {design}; opened in {open_ms:.1} ms{}", args.file.display(), if args.no_warmup { ", no warm-up" } else { "" });
        let on = if threads > 1 { format!(" on {threads} threads") } else { String::new() };
        out!("{n} queries (k = {}){on}, {matches} matches: {qps:.0} queries/s; latency mean {mean:.2} us, p50 {p50:.2} us, p99 {p99:.2} us", args.k);
    }
    Ok(())
}
