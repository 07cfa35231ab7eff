//! `simdex split`: an index as N self-contained segment files, by fingerprint range.

use anyhow::{bail, Context, Result};
use clap::Args as ClapArgs;
use serde_json::json;
use simdex::codec::Codec;
use simdex::storage::FsStorage;
use simdex::{build_segment, BuildOptions};
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
///
/// Example: `simdex split pages.sdx --parts 8 --out chunks/`
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// The index: a segment file or an index directory (an index with more than one
    /// segment, deletes or unflushed writes is first consolidated into a temporary segment).
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
    let scratch = tempfile::tempdir().map_err(|e| anyhow::anyhow!("creating a scratch directory: {e}"))?;
    let segment = crate::source::consolidated(&args.index, scratch.path())?;
    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out.display()))?;
    let k = args.k.unwrap_or(segment.design().k());
    let total = segment.len();
    let per = total.div_ceil(args.parts as u64).max(1);
    let bar = progress::steps(total, "splitting");
    let mut manifest = Vec::new();
    let (mut fps, mut ids) = (Vec::new(), Vec::new());
    let mut part = 0usize;
    let mut write = |fps: &mut Vec<u64>, ids: &mut Vec<u64>, part: &mut usize| -> Result<()> {
        let path = args.out.join(format!("part-{:05}.sdx", *part));
        let options = BuildOptions { design: None, k, codec: args.codec };
        let id_slice = segment.has_ids().then_some(&ids[..]);
        build_segment(&FsStorage, &path, fps, id_slice, &options).with_context(|| format!("writing {}", path.display()))?;
        manifest.push(json!({"file": path.file_name().map(|n| n.to_string_lossy().into_owned()), "count": fps.len(),
            "first": fps.first().map(|f| format!("{f:016x}")), "last": fps.last().map(|f| format!("{f:016x}"))}));
        fps.clear();
        ids.clear();
        *part += 1;
        Ok(())
    };
    for (n, e) in segment.entries().enumerate() {
        let (fp, id) = e?;
        // Cut when the chunk is full, but never between equal fingerprints.
        if fps.len() as u64 >= per && fps.last() != Some(&fp) && part + 1 < args.parts {
            write(&mut fps, &mut ids, &mut part)?;
        }
        fps.push(fp);
        ids.extend(id);
        if n % 65536 == 0 {
            bar.set_position(n as u64);
        }
    }
    write(&mut fps, &mut ids, &mut part)?;
    bar.finish_and_clear();
    let listing = args.out.join("parts.json");
    std::fs::write(&listing, serde_json::to_string_pretty(&json!({"source": args.index, "parts": manifest}))?)
        .with_context(|| format!("cannot write {}", listing.display()))?;
    eprintln!("wrote {part} chunks of about {per} fingerprints to {}", args.out.display());
    Ok(())
}
