//! `simdex compact`: flush the memtable and merge every segment of an index into one.

use anyhow::{Context, Result};
use clap::Args as ClapArgs;
use simdex::{Index, IndexOptions};
use std::path::PathBuf;
use std::time::Instant;

/// Flush an index's memtable and merge all its segments into one.
///
/// Drops deleted and repeated pairs, picks the table design for the merged size, and
/// removes tombstone files that no longer hide anything. Old files are deleted only after
/// the new manifest is durable. Needs the writer's lock (fails while another writer runs).
///
/// Example: `simdex compact pages.idx`
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// The index directory.
    dir: PathBuf,
}

pub fn run(args: Args) -> Result<()> {
    let options = IndexOptions { create: false, background: false, ..IndexOptions::default() };
    let index = Index::open(&args.dir, options)?;
    let before = index.stats();
    let bar = crate::progress::spinner("compacting");
    let start = Instant::now();
    index.compact().with_context(|| format!("compacting {}", args.dir.display()))?;
    bar.finish_and_clear();
    let after = index.stats();
    index.close()?;
    let bytes = |s: &simdex::Stats| s.segments.iter().map(|x| x.file_len).sum::<u64>();
    let stored = |s: &simdex::Stats| s.segments.iter().map(|x| x.entries).sum::<u64>() + s.memtable_inserts + s.frozen_ops;
    let (held, kept) = (stored(&before), stored(&after));
    eprintln!(
        "compacted {}: {} segments ({} bytes) + {} memtable operations -> {} segment(s) ({} bytes, {} fingerprints); {} of {} stored pairs dropped as deleted or repeated; {:.2}s",
        args.dir.display(),
        before.segments.len(),
        bytes(&before),
        before.memtable_inserts + before.memtable_deletes,
        after.segments.len(),
        bytes(&after),
        kept,
        held.saturating_sub(kept),
        held,
        start.elapsed().as_secs_f64()
    );
    Ok(())
}
