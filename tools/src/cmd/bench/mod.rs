//! `simdex bench`: timed operations on real files.

mod generate;
mod index;
mod query;
mod sketch;

use generate::GenerateArgs;
use index::IndexArgs;
use query::QueryArgs;

use anyhow::Result;
use clap::{Args as ClapArgs, Subcommand};

/// Time queries on an index, or write fingerprints to time them with.
#[derive(Debug, ClapArgs)]
#[command(
    after_help = "Examples:\n  simdex bench generate --count 100000 > stored.txt\n  simdex bench generate --count 1000 --near stored.txt --flips 2 > queries.txt\n  simdex bench query stored.sdx --input queries.txt -k 3\n  simdex bench query sketched --input queries.txt -k 8 --confirmed"
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
    /// microseconds. `--confirmed` times the check confirmed by sketch instead.
    #[command(after_help = "Examples:\n  simdex bench query stored.sdx --input queries.txt -k 3\n  simdex bench query sketched --input queries.txt -k 8 --confirmed")]
    Query(QueryArgs),
    /// Write random fingerprints, or near copies of an existing list, for benchmarks.
    ///
    /// Uses a seeded xorshift generator, so the same arguments give the same file.
    /// With `--near FILE`, each output line is a fingerprint of FILE (cycled) with
    /// `--flips` random bits flipped.
    #[command(after_help = "Examples:\n  simdex bench generate --count 100000 > stored.txt\n  simdex bench generate --count 1000 --near stored.txt --flips 2 > queries.txt")]
    Generate(GenerateArgs),
    /// Make an index directory whose fingerprints each store a synthetic sketch, for
    /// `bench query --confirmed`.
    ///
    /// Each fingerprint of INPUT (with its document id when the input gives ids, else its
    /// line number) is stored with a pseudo-random 64-byte sketch seeded by its id, in the
    /// library's default sketch column; the index is then compacted to one segment.
    #[command(after_help = "Examples:\n  simdex bench index sketched --input stored.txt")]
    Index(IndexArgs),
}

pub fn run(args: Args) -> Result<()> {
    match args.what {
        What::Query(a) => query::query(a),
        What::Generate(a) => generate::generate(a),
        What::Index(a) => index::index(a),
    }
}
