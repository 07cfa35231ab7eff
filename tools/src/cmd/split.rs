//! `simdex split`: an index as N self-contained segment files, by fingerprint range.

use anyhow::{bail, Context, Result};
use clap::Args as ClapArgs;
use serde_json::json;
use simdex::storage::FsStorage;
use simdex::Codec;
use simdex::Source;
use simdex::{split, SplitOptions};
use std::path::PathBuf;

use crate::progress;

/// Write an index as N self-contained chunks, for batch jobs on many machines.
///
/// Chunks are contiguous ranges of fingerprints (table 0's order) of about equal size;
/// equal fingerprints stay in one chunk. Each chunk is a complete segment with its own
/// design (the planner's, for the chunk's size) and document ids, so `simdex batch` and
/// `simdex cluster` run on it unchanged. Ranges rather than round-robin keep each chunk's
/// fingerprints dense, which compresses better (the bound is per chunk size) and lets a
/// job skip chunks by range; a batch over all chunks finds the same matches as over the
/// whole index, since every stored fingerprint is in exactly one chunk. (Clusters that
/// straddle two chunks are only found whole on the whole index.)
///
/// Output: DIR/part-00000.sdx ... and DIR/parts.json listing each chunk's range and count.
#[derive(Debug, ClapArgs)]
#[command(after_help = "Examples:\n  simdex split stored.sdx --parts 4 --out chunks/")]
pub struct Args {
    /// The index: a segment file or an index directory (read as a snapshot: its live pairs).
    index: PathBuf,
    /// Number of chunks.
    #[arg(long)]
    parts: usize,
    /// Output directory (created if missing).
    #[arg(long)]
    out: PathBuf,
    /// Distance the chunks' designs must serve (default: the index's).
    #[arg(short, long)]
    k: Option<u32>,
    /// Gap code of the chunks.
    #[arg(long, default_value = "xor")]
    codec: Codec,
}

pub fn run(args: Args) -> Result<()> {
    if args.parts == 0 {
        bail!("--parts 0: at least one chunk is needed");
    }
    let source = Source::open(&args.index)?;
    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out.display()))?;
    let bar = progress::steps(0, "splitting");
    let options = SplitOptions::new(args.parts).with_k(args.k).with_codec(args.codec);
    let written = split(&source, &FsStorage, &args.out, &options, &mut |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    })?;
    bar.finish_and_clear();
    let parts: Vec<_> = written
        .chunks
        .iter()
        .map(|c| {
            json!({"file": c.path.file_name().map(|n| n.to_string_lossy().into_owned()), "count": c.count,
                "first": c.first.map(|f| format!("{f:016x}")), "last": c.last.map(|f| format!("{f:016x}"))})
        })
        .collect();
    let listing = args.out.join("parts.json");
    std::fs::write(&listing, serde_json::to_string_pretty(&json!({"source": args.index, "parts": parts}))?).with_context(|| format!("cannot write {}", listing.display()))?;
    eprintln!("wrote {} chunks of about {} fingerprints to {}", written.chunks.len(), written.per_chunk, args.out.display());
    Ok(())
}
