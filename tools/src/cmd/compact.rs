//! `simdex compact`: flush the memtable and merge every segment of an index into one (or,
//! with `--max-merge-entries`, as far as merges of bounded size go).

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
/// A merge records how far it has come (the `merge.*` files) about twice a second: if the
/// process is killed, running the command again goes on from there, so a compaction killed
/// again and again still ends in one segment. With `--max-merge-entries N` the compaction is
/// instead a sequence of merges of at most N input entries each, every one installed before
/// the next starts; the index then ends as several segments when it holds more than N
/// entries.
#[derive(Debug, ClapArgs)]
#[command(after_help = "Examples:\n  simdex compact pages.idx\n  simdex compact pages.idx --max-merge-entries 4000000")]
pub struct Args {
    /// The index directory.
    dir: PathBuf,
    /// Largest number of entries one merge reads (default: unbounded, one merge)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(2..))]
    max_merge_entries: Option<u64>,
    #[command(flatten)]
    log_recovery: crate::log_recovery::LogRecoveryArg,
}

pub fn run(args: Args) -> Result<()> {
    let mut options = IndexOptions::default().with_create(false).with_background(false).with_log_recovery(args.log_recovery.mode());
    if let Some(n) = args.max_merge_entries {
        options.compaction.max_merge_entries = n;
    }
    let index = Index::open(&args.dir, options)?;
    crate::log_recovery::warn_of_loss(&index);
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
    let mut bound = args.max_merge_entries.map(|n| format!(" (merges of at most {n} entries)")).unwrap_or_default();
    if after.compaction_resumed > 0 {
        bound.push_str(" (went on from where an interrupted compaction stopped)");
    }
    let dropped = after.compaction_dropped_deleted + after.compaction_dropped_repeats;
    let expired = if after.expired_segments > 0 { format!(", {} expired segment(s) dropped whole", after.expired_segments) } else { String::new() };
    eprintln!(
        "compacted {}: {} segments ({} bytes) + {} memtable operations -> {} segment(s){bound} ({} bytes, {} fingerprints); {} of {} stored pairs dropped as deleted or repeated{expired}; {:.2}s",
        args.dir.display(),
        before.segments.len(),
        bytes(&before),
        before.memtable_inserts + before.memtable_deletes + before.frozen_ops,
        after.segments.len(),
        bytes(&after),
        kept,
        if after.expired_segments > 0 { dropped } else { held.saturating_sub(kept) },
        held,
        start.elapsed().as_secs_f64()
    );
    Ok(())
}
