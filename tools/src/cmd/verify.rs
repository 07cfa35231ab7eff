//! `simdex verify`: check every byte of a segment.

use anyhow::Result;
use clap::Args as ClapArgs;
use serde_json::json;
use simdex::segment::verify::verify_segment;
use std::path::PathBuf;
use std::process::ExitCode;

/// Check every checksum and invariant of a segment file.
///
/// Reads every block and checks its CRC-32, decodes it (sorted order, entry counts, block
/// keys, zero padding), checks that every table holds the same fingerprints, and checks the
/// header, directory, footer and document-id pages. Exits 0 only when the file is clean,
/// 1 when it found damage (each fault named by table, block and byte offset), 2 when the
/// file cannot be read at all.
///
/// Example: `simdex verify pages.sdx`
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// The segment file.
    file: PathBuf,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let report = verify_segment(&args.file)?;
    if args.json {
        let problems: Vec<_> = report
            .problems
            .iter()
            .map(|p| json!({"offset": p.offset, "table": p.location.table, "block": p.location.block, "detail": p.detail}))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "file": args.file, "clean": report.is_clean(), "entries": report.entries,
                "tables": report.tables, "blocks": report.blocks, "problems": problems,
            }))?
        );
    } else if report.is_clean() {
        println!("{}: ok ({} fingerprints, {} tables, {} blocks checked)", args.file.display(), report.entries, report.tables, report.blocks);
    } else {
        for p in &report.problems {
            println!("{}: {p}", args.file.display());
        }
        println!("{}: {} problem(s) found", args.file.display(), report.problems.len());
    }
    Ok(if report.is_clean() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
