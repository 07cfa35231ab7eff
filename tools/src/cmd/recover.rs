//! `simdex recover`: salvage what is intact of a damaged index into a new one.

use anyhow::{Context, Result};
use clap::Args as ClapArgs;
use serde_json::json;
use simdex::IndexOptions;
use std::path::PathBuf;

/// Copy what is intact of a damaged index into a new index, and report exactly what was
/// lost.
///
/// Reads every segment block by block (a damaged block is rebuilt from the segment's other
/// tables; a damaged header, directory or footer, or a lost tail, is worked around by
/// finding the tables that are whole), every tombstone file and every log record that
/// passes its checksums (skipping damaged stretches, which the engine itself never does),
/// applies the deletes, and writes the live pairs to a new index in NEWDIR, compacted into
/// one segment. The report names every file and what was recovered from it, and every loss:
/// segment entries (counted exactly from block and id-page counts), log operations
/// (counted from the sequence numbers around the damage, or as bytes when the damage runs
/// to the end of a log), tombstone files. The damaged index is not modified.
///
/// The new index is built under a temporary name beside NEWDIR (`.NAME.recovering`) and
/// renamed to NEWDIR only when it is complete, so an interrupted recover leaves nothing
/// that looks like an index, and running it again starts afresh.
#[derive(Debug, ClapArgs)]
#[command(after_help = "Examples:\n  simdex recover pages.idx --out salvaged.idx")]
pub struct Args {
    /// The damaged index directory.
    dir: PathBuf,
    /// Where to create the new index (must not hold one).
    #[arg(long, short)]
    out: PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<()> {
    let bar = crate::progress::spinner("recovering");
    let report =
        simdex::recovery::recover_into(&args.dir, &args.out, IndexOptions::default()).with_context(|| format!("recovering {} into {}", args.dir.display(), args.out.display()))?;
    bar.finish_and_clear();
    if args.json {
        let pairs = |v: &[(String, String)]| v.iter().map(|(f, d)| json!({"file": f, "detail": d})).collect::<Vec<_>>();
        out!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "from": args.dir, "to": args.out, "manifest_problem": report.manifest_problem,
                "recovered": pairs(&report.recovered), "lost": pairs(&report.lost), "damage_worked_around": pairs(&report.bypassed),
                "segment_entries": report.segment_entries, "segment_entries_lost": report.segment_entries_lost,
                "tombstones": report.tombstones, "log_operations": report.log_ops, "log_inserts": report.log_inserts, "log_operations_lost": report.log_ops_lost,
                "pairs_deleted": report.pairs_deleted, "copies": report.copies, "merged": report.merged,
                "log_operations_possibly_lost": report.log_ops_possibly_lost, "log_tail_bytes_lost": report.log_tail_bytes_lost, "live_pairs": report.live_pairs,
                "deletes_possibly_undone": report.deletes_possibly_undone, "document_ids_lost": report.doc_ids_lost,
            }))?
        );
        return Ok(());
    }
    if let Some(p) = &report.manifest_problem {
        out!("manifest unusable ({p}): took every file in the directory; tombstones applied to every segment");
    }
    for (file, what) in &report.recovered {
        out!("recovered {file}: {what}");
    }
    for (file, what) in &report.bypassed {
        out!("damaged {file}: {what}");
    }
    for (file, what) in &report.lost {
        out!("LOST {file}: {what}");
    }
    // every pair read is accounted for: read = live + deleted + copies + merged
    out!(
        "{} pairs read ({} segment entries, {} logged inserts): {} deleted, {} copies of a pair read twice, {} merged (their ids lost, the same fingerprint)",
        report.segment_entries + report.log_inserts,
        report.segment_entries,
        report.log_inserts,
        report.pairs_deleted,
        report.copies,
        report.merged
    );
    out!(
        "{} live pairs written to {}; lost: {} segment entries, {} log operations{}{}",
        report.live_pairs,
        args.out.display(),
        report.segment_entries_lost,
        report.log_ops_lost,
        if report.log_ops_possibly_lost > 0 { format!(" (and {} possibly acknowledged ones in a record cut short)", report.log_ops_possibly_lost) } else { String::new() },
        if report.log_tail_bytes_lost > 0 { format!(", {} bytes at the end of a log", report.log_tail_bytes_lost) } else { String::new() }
    );
    if report.doc_ids_lost > 0 {
        out!("{} fingerprints kept without their document id (id {}: their id pages are lost; see LOST above)", report.doc_ids_lost, simdex::recovery::UNKNOWN_DOC_ID);
    }
    if report.deletes_possibly_undone > 0 {
        out!("up to {} deleted pairs may be in {} again (see LOST above): delete them again if you know them", report.deletes_possibly_undone, args.out.display());
    }
    Ok(())
}
