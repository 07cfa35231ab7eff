//! `simdex batch`: every query of a file against a segment, in one merge join.

use anyhow::{bail, Result};
use clap::Args as ClapArgs;
use serde_json::json;
use simdex::batch::{batch_query_each, BatchOptions};
use simdex::{Source, Stored};
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::Instant;

use crate::input::{self, hex, InputFormat};

/// Check a file of queries against an index in one pass (the paper's batch mode).
///
/// Prints every match as `query_hex<TAB>match_hex<TAB>distance[<TAB>doc_id]` (as `simdex
/// query` does), sorted by query, then distance, fingerprint and id, each once. Instead of
/// one lookup per query, the queries are sorted in each table's order and merged with the
/// stored table, which is read sequentially: memory is about the size of the query file.
///
/// Example: `simdex batch pages.sdx --queries new.txt -k 3 > matches.tsv`
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// The index: a segment file or an index directory.
    index: PathBuf,
    /// The queries (same formats as `simdex build`; `-` for stdin).
    #[arg(long, short)]
    queries: PathBuf,
    /// Largest Hamming distance to report (at most the index design's k).
    #[arg(short, long, default_value_t = 3)]
    k: u32,
    /// The query file is little-endian u64s.
    #[arg(long)]
    binary: bool,
    /// Worker threads (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// One JSON object per match instead of tab-separated lines.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<()> {
    let start = Instant::now();
    let queries = input::read_all(&args.queries, InputFormat { binary: args.binary, with_ids: false }, |_| {})?.fps;
    let mut options = BatchOptions::new(args.k);
    if let Some(t) = args.threads {
        if t == 0 {
            bail!("--threads 0: at least one thread is needed");
        }
        options.threads = t;
    }
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(1 << 20, stdout.lock());
    let mut matches = 0u64;
    let mut write = |m: simdex::batch::BatchMatch| -> std::io::Result<()> {
        matches += 1;
        if args.json {
            writeln!(out, "{}", json!({"query": hex(m.query), "match": hex(m.fingerprint), "distance": m.distance, "doc_id": m.doc_id}))
        } else {
            match m.doc_id {
                Some(id) => writeln!(out, "{}\t{}\t{}\t{id}", hex(m.query), hex(m.fingerprint), m.distance),
                None => writeln!(out, "{}\t{}\t{}", hex(m.query), hex(m.fingerprint), m.distance),
            }
        }
    };
    let emit = |m| write(m).map_err(|e| simdex::Error::io("<stdout>", "write", e));
    let source = Source::open(&args.index)?;
    batch_query_each(&source, &queries, &options, emit)?;
    out.flush()?;
    eprintln!("{} queries against {} fingerprints: {} matches in {:.2}s", queries.len(), Stored::from(&source).held_len(), matches, start.elapsed().as_secs_f64());
    Ok(())
}
