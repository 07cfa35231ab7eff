//! `simdex dump`: the decoded entries of a segment.

use anyhow::{bail, Result};
use clap::Args as ClapArgs;
use simdex::Segment;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use crate::input::hex;

/// Print the decoded entries of a segment.
///
/// Without `--table`: every fingerprint in ascending order, one per line, as
/// `hex[<TAB>doc_id]` (the format `simdex build` reads back). With `--table T`: table T's
/// entries in stored order as `permuted_hex<TAB>fingerprint_hex`.
#[derive(Debug, ClapArgs)]
#[command(after_help = "Examples:\n  simdex dump stored.sdx | head")]
pub struct Args {
    /// The segment file.
    file: PathBuf,
    /// Show one table's permuted entries.
    #[arg(long, short)]
    table: Option<usize>,
}

pub fn run(args: Args) -> Result<()> {
    let seg = Segment::open(&args.file)?;
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    match args.table {
        None => {
            for e in seg.entries() {
                match e? {
                    (fp, Some(id)) => writeln!(out, "{}\t{id}", hex(fp))?,
                    (fp, None) => writeln!(out, "{}", hex(fp))?,
                }
            }
        }
        Some(t) => {
            let Some(table) = seg.tables().get(t) else {
                bail!("--table {t}: the segment has tables 0..{}", seg.tables().len());
            };
            for v in seg.table_entries(t) {
                let v = v?;
                writeln!(out, "{}\t{}", hex(v), hex(table.design().permutation.invert(v)))?;
            }
        }
    }
    out.flush()?;
    Ok(())
}
