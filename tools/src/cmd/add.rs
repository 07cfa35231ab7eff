//! `simdex add`: append fingerprints to an index directory (creating it if missing).

use anyhow::{Context, Result};
use clap::Args as ClapArgs;
use serde_json::json;
use simdex::{Durability, Index, IndexOptions};
use std::path::PathBuf;
use std::time::Instant;

use crate::input::{self, InputFormat};
use crate::progress;

/// Add fingerprints to an index directory, creating the index if it is missing.
///
/// INPUT is in the formats `simdex build` reads (text: 16 hex digits per line, optionally a
/// tab and a decimal document id; `--binary`: little-endian u64s, with `--with-ids` u64
/// pairs; `-` reads stdin). Without ids, each fingerprint gets the sequence number of its
/// insert as its document id. Everything read is synced to the index's log before the
/// command exits 0, so a script can treat exit 0 as the acknowledgement.
///
/// Example: `simdex add pages.idx fingerprints.txt`
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// The index directory.
    dir: PathBuf,
    /// The fingerprints (`-` for stdin).
    input: PathBuf,
    /// Largest Hamming distance the index serves (only when it is created).
    #[arg(short, long, default_value_t = 3)]
    k: u32,
    #[command(flatten)]
    format: InputFormat,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

/// Pairs per log record.
const BATCH: usize = 1 << 16;

pub fn run(args: Args) -> Result<()> {
    let start = Instant::now();
    let bar = progress::bytes(input::size_hint(&args.input), "reading");
    let data = input::read_all(&args.input, args.format, |b| bar.set_position(b))?;
    bar.finish_and_clear();
    // Writes go to the OS per batch; one sync at the end acknowledges them all.
    let options = IndexOptions { k: args.k, durability: Durability::NoSync, ..IndexOptions::default() };
    let index = Index::open(&args.dir, options)?;
    let first_seq = index.stats().last_seq + 1;
    let pairs: Vec<(u64, u64)> = match &data.ids {
        Some(ids) => data.fps.iter().copied().zip(ids.iter().copied()).collect(),
        None => data.fps.iter().enumerate().map(|(i, &fp)| (fp, first_seq + i as u64)).collect(),
    };
    let bar = progress::steps(pairs.len() as u64, "adding");
    for chunk in pairs.chunks(BATCH) {
        index.insert_batch(chunk).with_context(|| format!("adding to {}", args.dir.display()))?;
        bar.inc(chunk.len() as u64);
    }
    index.sync().with_context(|| format!("syncing {}", args.dir.display()))?;
    bar.finish_and_clear();
    let stats = index.stats();
    index.close()?;
    let n = pairs.len();
    if args.json {
        out!(
            "{}",
            json!({"dir": args.dir, "added": n, "first_seq": first_seq, "last_seq": stats.last_seq, "ids_assigned": data.ids.is_none(), "segments": stats.segments.len(), "seconds": start.elapsed().as_secs_f64()})
        );
    } else {
        eprintln!(
            "added {n} fingerprints to {} (sequence numbers {first_seq}..{}{}); synced",
            args.dir.display(),
            stats.last_seq,
            if data.ids.is_none() { ", ids = sequence numbers" } else { "" }
        );
    }
    Ok(())
}
