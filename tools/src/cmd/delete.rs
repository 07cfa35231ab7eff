//! `simdex delete`: delete (fingerprint, document id) pairs from an index directory.

use anyhow::{bail, Result};
use clap::Args as ClapArgs;
use simdex::{Durability, Index, IndexOptions, QueryOptions};
use std::path::PathBuf;

use crate::input::{self, InputFormat};
use crate::progress;

/// Delete (fingerprint, document id) pairs from an index.
///
/// INPUT holds pairs in the formats `simdex insert` reads, with ids (text lines
/// `HEX<TAB>ID`, or `--binary --with-ids`). Queries stop returning a deleted pair at once;
/// compaction drops it from the segments. Deleting a pair that is not stored is harmless.
/// The deletes are synced before the command exits 0.
#[derive(Debug, ClapArgs)]
#[command(after_help = "Examples:\n  simdex bench generate --count 100 --seed 8 --with-ids > gone.txt\n  simdex delete pages.idx gone.txt")]
pub struct Args {
    #[command(flatten)]
    pairs: PairArgs,
}

/// The arguments of a command that writes (fingerprint, document id) pairs into an existing
/// index (`delete`, `replace`).
#[derive(Debug, ClapArgs)]
pub struct PairArgs {
    /// The index directory.
    pub dir: PathBuf,
    /// The pairs (`-` for stdin).
    input: PathBuf,
    /// Input is little-endian u64 (fingerprint, id) pairs.
    #[arg(long)]
    binary: bool,
    #[command(flatten)]
    log_recovery: crate::log_recovery::LogRecoveryArg,
}

impl PairArgs {
    /// The pairs read, and the index opened for writing without a sync per write (the
    /// command syncs before it exits); `command` names it where the input has no ids.
    pub fn open(&self, command: &str) -> Result<(Index, Vec<(u64, u64)>)> {
        let data = input::read_all(&self.input, InputFormat { binary: self.binary, with_ids: self.binary }, |_| {})?;
        let Some(ids) = data.ids else {
            bail!("{}: {command} needs (fingerprint, document id) pairs: give `HEX<TAB>ID` lines (or --binary pairs)", input::display_name(&self.input));
        };
        let options = IndexOptions::default().with_create(false).with_durability(Durability::NoSync).with_log_recovery(self.log_recovery.mode());
        let index = Index::open(&self.dir, options)?;
        crate::log_recovery::warn_of_loss(&index);
        Ok((index, data.fps.into_iter().zip(ids).collect()))
    }
}

pub fn run(args: Args) -> Result<()> {
    let (index, pairs) = args.pairs.open("delete")?;
    // Count what is really stored, so the summary does not claim deletes of pairs that
    // were never there (a delete of such a pair is harmless and still logged).
    let exact = QueryOptions::within(0);
    let mut stored = 0u64;
    for &(fp, id) in &pairs {
        if index.query(fp, &exact)?.iter().any(|m| m.doc_id == Some(id)) {
            stored += 1;
        }
    }
    let bar = progress::steps(pairs.len() as u64, "deleting");
    for chunk in pairs.chunks(1 << 16) {
        index.delete_many(&chunk.iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>())?;
        bar.inc(chunk.len() as u64);
    }
    index.sync()?;
    bar.finish_and_clear();
    index.close()?;
    let absent = pairs.len() as u64 - stored;
    eprintln!(
        "deleted {stored} pairs from {}{}; synced",
        args.pairs.dir.display(),
        if absent > 0 { format!(" ({absent} of the {} given were not stored)", pairs.len()) } else { String::new() }
    );
    Ok(())
}
