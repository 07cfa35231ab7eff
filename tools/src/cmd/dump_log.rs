//! `simdex dump-log`: the records of an index's logs.

use anyhow::{Context, Result};
use clap::Args as ClapArgs;
use serde_json::json;
use simdex::inspect::log_files;
use simdex::storage::FsStorage;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use crate::input::hex;

/// Print the records of an index's append logs.
///
/// One line per record: `LOG OFFSET seq=S insert|delete N`, then, with `--ops`, one line
/// per operation: `  FINGERPRINT<TAB>DOC_ID`. Damaged stretches are skipped and printed as
/// `LOG OFFSET DAMAGE ...` (the engine itself refuses to open such a log; see `simdex
/// recover`). Logs older than the manifest's log number (already flushed) are marked
/// obsolete. Exits 1 when a log is damaged.
#[derive(Debug, ClapArgs)]
#[command(after_help = "Examples:\n  simdex dump-log pages.idx --ops | head")]
pub struct Args {
    /// The index directory.
    dir: PathBuf,
    /// Print every operation, not only the record headers.
    #[arg(long)]
    ops: bool,
    /// One JSON object per record instead.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let storage = FsStorage;
    let logs = log_files(&storage, &args.dir)?;
    if logs.is_empty() && !args.dir.join("MANIFEST").exists() {
        anyhow::bail!("{}: no simdex index here (no MANIFEST and no log file)", args.dir.display());
    }
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut damaged = false;
    for log in logs {
        let name = &log.name;
        if !args.json {
            // the size when listed (a live log may grow while it is read)
            let listed = std::fs::metadata(&log.path).with_context(|| format!("cannot read {}", log.path.display()))?.len();
            writeln!(out, "# {name}: {listed} bytes{}", if log.obsolete { " (obsolete: already flushed)" } else { "" })?;
        }
        let mut result = Ok(());
        let (scan, len) = log.scan(&storage, |r| {
            let w = if args.json {
                let ops: Option<Vec<_>> = args.ops.then(|| r.ops().map(|(fp, id)| json!([hex(fp), id])).collect());
                writeln!(out, "{}", json!({"log": name, "offset": r.offset, "seq": r.seq, "kind": r.kind.name(), "count": r.len(), "sketch_bytes": r.sketch_bytes(), "ops": ops}))
            } else {
                let sketched = if r.sketch_bytes() > 0 { format!(" with {}-byte sketches", r.sketch_bytes()) } else { String::new() };
                let mut w = writeln!(out, "{name} {} seq={} {} {}{sketched}", r.offset, r.seq, r.kind.name(), r.len());
                if args.ops {
                    for (fp, id) in r.ops() {
                        w = w.and_then(|()| writeln!(out, "  {}\t{id}", hex(fp)));
                    }
                }
                w
            };
            if let Err(e) = w {
                result = Err(e);
            }
            Ok(())
        })?;
        result?;
        for d in &scan.damage {
            damaged = true;
            if args.json {
                writeln!(out, "{}", json!({"log": name, "offset": d.offset, "damage_bytes": d.len, "detail": d.detail}))?;
            } else {
                writeln!(out, "{name} {} DAMAGE {} bytes skipped: {}", d.offset, d.len, d.detail)?;
            }
        }
        if !args.json && scan.valid_len < len && scan.damage.is_empty() {
            writeln!(out, "# {name}: {} bytes at the end are an unfinished record ({:?})", len - scan.valid_len, scan.end)?;
        }
    }
    out.flush()?;
    Ok(if damaged { ExitCode::from(1) } else { ExitCode::SUCCESS })
}
