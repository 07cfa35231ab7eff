//! `simdex bench`: timed operations on real files.

mod generate;
mod index;
mod query;
mod sketch;

use anyhow::Result;
use clap::{Args as ClapArgs, Subcommand};
use std::path::PathBuf;

use crate::input::InputFormat;

/// Time queries on an index, or write fingerprints to time them with.
#[derive(Debug, ClapArgs)]
#[command(
    after_help = "Examples:\n  simdex bench generate --count 100000 > stored.txt\n  simdex bench generate --count 1000 --near stored.txt --flips 2 > queries.txt\n  simdex bench query stored.sdx --input queries.txt -k 3\n  simdex bench query sketched --input queries.txt -k 8 --verified"
)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(Debug, Subcommand)]
enum What {
    /// Time queries one at a time (on one thread or several) and report throughput and latency.
    ///
    /// Runs every query of the input once as a warm-up (so the page cache holds the file),
    /// then `--rounds` times timed; prints queries/s and latency mean, p50 and p99 in
    /// microseconds. `--verified` times the check confirmed by sketch instead.
    #[command(after_help = "Examples:\n  simdex bench query stored.sdx --input queries.txt -k 3\n  simdex bench query sketched --input queries.txt -k 8 --verified")]
    Query(QueryArgs),
    /// Write random fingerprints, or near copies of an existing list, for benchmarks.
    ///
    /// Uses a seeded xorshift generator, so the same arguments give the same file.
    /// With `--near FILE`, each output line is a fingerprint of FILE (cycled) with
    /// `--flips` random bits flipped.
    #[command(after_help = "Examples:\n  simdex bench generate --count 100000 > stored.txt\n  simdex bench generate --count 1000 --near stored.txt --flips 2 > queries.txt")]
    Generate(GenerateArgs),
    /// Make an index directory whose fingerprints each store a synthetic sketch, for
    /// `bench query --verified`.
    ///
    /// Each fingerprint of INPUT (with its document id when the input gives ids, else its
    /// line number) is stored with a pseudo-random 64-byte sketch seeded by its id, in the
    /// library's default sketch column; the index is then compacted to one segment.
    #[command(after_help = "Examples:\n  simdex bench index sketched --input stored.txt")]
    Index(IndexArgs),
}

#[derive(Debug, ClapArgs)]
struct IndexArgs {
    /// The new index directory.
    dir: PathBuf,
    /// The fingerprints (formats as `simdex add` reads them).
    #[arg(long, short)]
    input: PathBuf,
    #[command(flatten)]
    format: InputFormat,
    /// Largest Hamming distance the index serves.
    #[arg(short, long, default_value_t = 3)]
    k: u32,
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
    /// Threads querying the one open index (or segment) at once, each taking the next 64
    /// queries when it is free (as a server's threads take requests); queries/s is the
    /// total, latencies are every thread's together.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    threads: u32,
    /// Measure cold: no untimed warm-up pass over the queries first (drop the page cache
    /// before, e.g. `echo 3 > /proc/sys/vm/drop_caches` as root, to measure reads from disk).
    #[arg(long)]
    no_warmup: bool,
    /// Time the check confirmed by sketch (`Index::query_confirmed` at `-k`) on an index
    /// directory that stores sketches (e.g. `simdex bench index`'s). Each query's sketch is
    /// the synthetic sketch of its document id when the query file gives ids (so a near
    /// copy from `bench generate --near --with-ids` is confirmed), else one seeded by its
    /// fingerprint (confirmed by nothing, but every candidate's sketch is still read and
    /// compared).
    #[arg(long)]
    verified: bool,
    /// With --verified: the resemblance a candidate's sketch must reach.
    #[arg(long, default_value_t = 0.9, requires = "verified")]
    min_similarity: f64,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<()> {
    match args.what {
        What::Query(a) => query::query(a),
        What::Generate(a) => generate::generate(a),
        What::Index(a) => index::index(a),
    }
}
