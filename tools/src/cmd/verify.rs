//! `simdex verify`: check every byte of a segment file or of every file of an index.

use anyhow::Result;
use clap::Args as ClapArgs;
use serde_json::json;
use simdex::recovery::{verify_index, verify_segment};
use simdex::storage::FsStorage;
use std::path::PathBuf;
use std::process::ExitCode;

/// Check every checksum and invariant of a segment file, or of every file of an index
/// directory.
///
/// Reads every block and checks its CRC-32, decodes it (sorted order, entry counts, block
/// keys, zero padding), checks that every table holds the same fingerprints, and checks the
/// header, directory, footer and document-id pages. Exits 0 only when the file is clean,
/// 1 when it found damage (each fault named by table, block and byte offset), 2 when the
/// file cannot be read at all.
///
/// For a directory: the manifest, every segment as above, every tombstone file, every live
/// log record, and that they agree (sizes, counts, sequence numbers). Orphans, torn log
/// tails and unknown files are listed as notes, not damage. Safe beside a running writer:
/// it checks one consistent version, reading again when a flush or compaction replaced
/// the manifest meanwhile; if that happens during every one of 20 passes it exits 3
/// (inconclusive) rather than call the index damaged.
#[derive(Debug, ClapArgs)]
#[command(after_help = "Examples:\n  simdex verify stored.sdx\n  simdex verify pages.idx --json")]
pub struct Args {
    /// The segment file or index directory.
    file: PathBuf,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<ExitCode> {
    if args.file.is_dir() {
        return run_dir(&args);
    }
    let report = verify_segment(&FsStorage, &args.file)?;
    if args.json {
        let problems: Vec<_> = report.problems.iter().map(|p| json!({"offset": p.offset, "table": p.location.table, "block": p.location.block, "detail": p.detail})).collect();
        out!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "file": args.file, "clean": report.is_clean(), "entries": report.entries,
                "tables": report.tables, "blocks": report.blocks, "problems": problems,
            }))?
        );
    } else if report.is_clean() {
        out!("{}: ok ({} fingerprints, {} tables, {} blocks checked)", args.file.display(), report.entries, report.tables, report.blocks);
    } else {
        for p in &report.problems {
            out!("{}: {p}", args.file.display());
        }
        out!("{}: {} problem(s) found", args.file.display(), report.problems.len());
    }
    Ok(if report.is_clean() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn run_dir(args: &Args) -> Result<ExitCode> {
    let report = verify_index(&FsStorage, &args.file)?;
    if args.json {
        let problems: Vec<_> = report.problems.iter().map(|p| json!({"file": p.file, "offset": p.offset, "detail": p.detail})).collect();
        let checked: Vec<_> = report.checked.iter().map(|(f, s)| json!({"file": f, "summary": s})).collect();
        out!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "dir": args.file, "clean": report.is_clean(), "checked": checked, "problems": problems,
                "notes": report.notes, "unknown_files": report.unknown, "passes": report.passes, "unsettled": report.unsettled,
                "recoverable": report.recoverable.iter().map(|(f, s)| json!({"file": f, "recover_rebuilds": s})).collect::<Vec<_>>(),
            }))?
        );
    } else {
        for (file, summary) in &report.checked {
            out!("{}: ok ({summary})", args.file.join(file).display());
        }
        for note in &report.notes {
            out!("{}", args.file.join(note).display());
        }
        for name in &report.unknown {
            out!("{}: not a simdex file (left alone)", args.file.join(name).display());
        }
        if report.passes > 1 {
            out!(
                "{}: a writer replaced the manifest while verify read the index; verified again ({} passes{})",
                args.file.display(),
                report.passes,
                if report.unsettled { ", never one undisturbed" } else { "" }
            );
        }
        for p in &report.problems {
            out!("{}", args.file.join(p.to_string()).display());
        }
        if report.unsettled && !report.is_clean() {
            out!(
                "{}: INCONCLUSIVE: a writer replaced the manifest during each of {} passes, so the problems above may be files it added or removed meanwhile; run verify again when the writer is quieter",
                args.file.display(),
                report.passes
            );
            return Ok(ExitCode::from(3));
        }
        for (file, what) in &report.recoverable {
            out!("{}: DAMAGED; `simdex recover` can rebuild {what}", args.file.join(file).display());
        }
        if report.is_clean() {
            out!("{}: ok ({} files checked)", args.file.display(), report.checked.len());
        } else {
            out!(
                "{}: {} problem(s) found in {} file(s); {} file(s) clean. To copy what is intact into a new index: simdex recover {} --out NEWDIR",
                args.file.display(),
                report.problems.len(),
                report.problems.iter().map(|p| &p.file).collect::<std::collections::BTreeSet<_>>().len(),
                report.checked.len(),
                args.file.display()
            );
        }
    }
    Ok(match (report.is_clean(), report.unsettled) {
        (true, _) => ExitCode::SUCCESS,
        (false, true) => ExitCode::from(3),
        (false, false) => ExitCode::from(1),
    })
}
