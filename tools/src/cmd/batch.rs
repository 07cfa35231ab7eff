//! `simdex batch`: every query of a file against a segment, in one merge join.

use anyhow::{bail, Result};
use clap::Args as ClapArgs;
use simdex::{batch_query_each, BatchOptions};
use simdex::{Source, Stored};
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::Instant;

use super::query::{json_record, write_tsv};
use crate::input::{self, InputFormat};
use std::collections::{HashMap, HashSet};

/// Check a file of queries against an index in one pass (the paper's batch mode).
///
/// Prints every match as `query_hex<TAB>match_hex<TAB>distance[<TAB>doc_id]` (as `simdex
/// query` does), sorted by query, then distance, fingerprint and id, each once. When the
/// query file has ids, each line starts with the query's id (a fingerprint queried under
/// several ids gives its matches once per id); with `--json`, objects carry `query_id`, and
/// every query without matches gets one object with `"match": null` (after the matches). Instead of
/// one lookup per query, the queries are sorted in each table's order and merged with the
/// stored table, which is read sequentially: memory is about twice the size of the query
/// file. Matches beyond `--match-memory` (by default the queries' size) are sorted into
/// runs in a directory made under `--spill-dir` (removed at the end, on errors too) and
/// merged back, in the same order.
#[derive(Debug, ClapArgs)]
#[command(after_help = "Examples:\n  simdex batch stored.sdx --queries queries.txt -k 3 > matches.tsv")]
pub struct Args {
    /// The index: a segment file or an index directory.
    index: PathBuf,
    /// The queries (same formats as `simdex build`; `-` for stdin).
    #[arg(long, short)]
    queries: PathBuf,
    /// Largest Hamming distance to report (at most 8; above the design's k by multi-probe).
    #[arg(short, long, default_value_t = 3)]
    k: u32,
    /// The query file is little-endian u64s.
    #[arg(long)]
    binary: bool,
    /// With --binary: each query is followed by a u64 id (echoed with its matches).
    #[arg(long, requires = "binary")]
    with_ids: bool,
    /// Worker threads (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// One JSON object per match instead of tab-separated lines.
    #[arg(long)]
    json: bool,
    /// Matches held in memory before sorted runs spill to disk, in bytes with an optional K,
    /// M or G suffix (default: 8 bytes per query, at least 1M).
    #[arg(long, value_parser = super::cluster::parse_bytes)]
    match_memory: Option<usize>,
    /// Where the spill directory is made (default: the system's temporary directory, $TMPDIR).
    #[arg(long)]
    spill_dir: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<()> {
    let start = Instant::now();
    let read = input::read_all(&args.queries, InputFormat { binary: args.binary, with_ids: args.with_ids }, |_| {})?;
    let queries = read.fps;
    let read_s = start.elapsed().as_secs_f64();
    // the ids each query fingerprint was given, for echoing; and which were answered
    let mut ids_of: HashMap<u64, Vec<u64>> = HashMap::new();
    if let Some(ids) = &read.ids {
        for (&q, &id) in queries.iter().zip(ids) {
            ids_of.entry(q).or_default().push(id);
        }
    }
    let mut answered: HashSet<u64> = HashSet::new();
    let mut options = BatchOptions::new(args.k).with_match_memory(args.match_memory).with_spill_dir(args.spill_dir.clone());
    if let Some(t) = args.threads {
        if t == 0 {
            bail!("--threads 0: at least one thread is needed");
        }
        options.threads = t;
    }
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(1 << 20, stdout.lock());
    let mut matches = 0u64;
    // When the first match is handed over: the join is done, the sorted matches stream out.
    let mut first_match: Option<Instant> = None;
    let mut write = |m: simdex::BatchMatch| -> std::io::Result<()> {
        if first_match.is_none() {
            first_match = Some(Instant::now());
        }
        matches += 1;
        if args.json {
            answered.insert(m.query);
        }
        let one = simdex::Match::new(m.fingerprint, m.distance, m.doc_id);
        let ids = ids_of.get(&m.query).map_or(&[][..], Vec::as_slice);
        let qids = ids.iter().copied().map(Some).chain(ids.is_empty().then_some(None));
        for qid in qids {
            if args.json {
                writeln!(out, "{}", json_record(m.query, qid, Some(&one)))?;
            } else {
                write_tsv(&mut out, m.query, qid, &one)?;
            }
        }
        Ok(())
    };
    let emit = |m| write(m).map_err(|e| simdex::Error::io("<stdout>", "write", e));
    let opening = Instant::now();
    let source = Source::open(&args.index)?;
    let open_s = opening.elapsed().as_secs_f64();
    let querying = Instant::now();
    batch_query_each(&source, &queries, &options, emit)?;
    let done = Instant::now();
    let query_s = done.duration_since(querying).as_secs_f64();
    let write_s = first_match.map_or(0.0, |t| done.duration_since(t).as_secs_f64());
    let ending = Instant::now();
    if args.json {
        for (i, &q) in queries.iter().enumerate() {
            if !answered.contains(&q) {
                let qid = read.ids.as_ref().and_then(|ids| ids.get(i).copied());
                writeln!(out, "{}", json_record(q, qid, None))?;
            }
        }
    }
    out.flush()?;
    let end_s = ending.elapsed().as_secs_f64();
    eprintln!("{} queries against {} fingerprints: {} matches in {:.2}s", queries.len(), Stored::from(&source).held_len(), matches, start.elapsed().as_secs_f64());
    // where the time went (the parts that do not run in parallel show here)
    eprintln!(
        "phases: read queries {read_s:.3}s, open {open_s:.3}s, join {:.3}s, merge and write matches {:.3}s, unanswered and flush {end_s:.3}s",
        (query_s - write_s).max(0.0),
        write_s
    );
    Ok(())
}
