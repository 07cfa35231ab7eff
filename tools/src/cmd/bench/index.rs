//! `simdex bench index`: an index directory whose every fingerprint stores a synthetic sketch
//! (`super::sketch`), compacted to one segment (or, `--live`, left as the engine's policy
//! leaves a crawl's inserts), for `bench query --confirmed`.

use anyhow::{bail, Context, Result};
use clap::Args as ClapArgs;
use simdex::{Durability, Index, IndexOptions};
use simdex_fingerprint::sketch::SketchOptions;
use std::path::PathBuf;
use std::time::Instant;

use super::sketch::synthetic_sketch;
use crate::input::{self, InputFormat};

/// Fingerprints inserted per batch.
const BATCH: usize = 1 << 16;

#[derive(Debug, ClapArgs)]
pub(super) struct IndexArgs {
    /// The new index directory.
    pub(super) dir: PathBuf,
    /// The fingerprints (formats as `simdex insert` reads them).
    #[arg(long, short)]
    pub(super) input: PathBuf,
    #[command(flatten)]
    pub(super) format: InputFormat,
    /// Largest Hamming distance the index serves.
    #[arg(short, long, default_value_t = 3)]
    pub(super) k: u32,
    /// Leave the index as a crawl's inserts leave it (segments by the engine's own
    /// compaction policy, closed as `simdex add` closes it) instead of compacting it into
    /// one segment.
    #[arg(long)]
    pub(super) live: bool,
    /// Store no sketches (an index without a sketch column): the same ingest for a
    /// baseline, so that what sketches cost is a ratio of one build's two runs.
    #[arg(long)]
    pub(super) no_sketches: bool,
}

pub(super) fn index(args: IndexArgs) -> Result<()> {
    let read = input::read_all(&args.input, args.format, |_| {})?;
    if read.fps.is_empty() {
        bail!("{}: no fingerprints", args.input.display());
    }
    if args.dir.exists() {
        bail!("{}: already exists (bench index makes a new index)", args.dir.display());
    }
    let started = Instant::now();
    let column = SketchOptions::default().column();
    let options = IndexOptions::default().with_k(args.k).with_sketches((!args.no_sketches).then_some(column)).with_durability(Durability::NoSync);
    let index = Index::open(&args.dir, options).with_context(|| format!("{}: creating the index", args.dir.display()))?;
    let width = usize::from(column.bytes);
    let ids = |i: usize| read.ids.as_ref().and_then(|ids| ids.get(i).copied()).unwrap_or(i as u64);
    let (mut pairs, mut sketches) = (Vec::with_capacity(BATCH), Vec::with_capacity(BATCH * width));
    for (start, chunk) in read.fps.chunks(BATCH).enumerate().map(|(c, chunk)| (c * BATCH, chunk)) {
        pairs.clear();
        sketches.clear();
        for (j, &fp) in chunk.iter().enumerate() {
            let id = ids(start + j);
            pairs.push(simdex::Entry::new(fp, id));
            if !args.no_sketches {
                sketches.extend_from_slice(&synthetic_sketch(id, width));
            }
        }
        if args.no_sketches {
            index.insert_many(&pairs)?;
        } else {
            index.insert_many_sketched(&pairs, &sketches)?;
        }
    }
    if !args.live {
        index.compact()?;
    }
    index.close()?;
    let segments = Index::open_read_only(&args.dir, IndexOptions::default())?.stats().segments.len();
    let each = if args.no_sketches { "without sketches".to_string() } else { format!("each with a {width}-byte synthetic sketch") };
    out!("{}: {} fingerprints, {each}, in {segments} segment(s) ({:.1} s)", args.dir.display(), read.fps.len(), started.elapsed().as_secs_f64());
    Ok(())
}
