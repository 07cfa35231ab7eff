//! `simdex replace`: store (fingerprint, document id) pairs as what each id holds, each a
//! changed page replacing its old version in one log record.

use anyhow::Result;
use clap::Args as ClapArgs;

use crate::progress;

/// Store pairs as what each document id holds, replacing its old fingerprints.
///
/// INPUT holds pairs in the formats `simdex insert` reads, with ids (text lines
/// `HEX<TAB>ID`, or `--binary` pairs). For each pair, every other fingerprint stored under its
/// id is deleted and the pair inserted, as one log record: a process killed at any point
/// leaves each id with its old version or its new one, never both or neither, and an id keeps
/// one entry however often it is replaced (a re-crawled page). Ids not stored yet are
/// inserted. The writes are synced before the command exits 0.
#[derive(Debug, ClapArgs)]
#[command(after_help = "Examples:\n  simdex bench generate --count 100 --seed 9 --with-ids > recrawled.txt\n  simdex replace pages.idx recrawled.txt")]
pub struct Args {
    #[command(flatten)]
    pairs: super::delete::PairArgs,
}

pub fn run(args: Args) -> Result<()> {
    let (index, pairs) = args.pairs.open("replace")?;
    let bar = progress::steps(pairs.len() as u64, "replacing");
    let (mut changed, mut new, mut same) = (0u64, 0u64, 0u64);
    for (i, &(fp, id)) in pairs.iter().enumerate() {
        let previous = index.replace(fp, id)?.previous;
        match previous.as_slice() {
            [] => new += 1,
            [only] if *only == fp => same += 1,
            _ => changed += 1,
        }
        if i % 4096 == 4095 {
            bar.inc(4096);
        }
    }
    index.sync()?;
    bar.finish_and_clear();
    index.close()?;
    eprintln!("replaced {} pairs in {}: {changed} ids changed, {new} new, {same} already held that fingerprint; synced", pairs.len(), args.pairs.dir.display());
    Ok(())
}
