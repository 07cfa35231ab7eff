//! `simdex stats`: what an index directory holds.

use anyhow::Result;
use clap::Args as ClapArgs;
use serde_json::json;
use simdex::{Index, IndexOptions};
use std::path::PathBuf;

/// Show an index's segments (sizes, counts, designs), tombstones, memtable and logs.
///
/// Opens the index read-only, so it works while a writer runs (and shows the state as of
/// the open). The memtable is what the logs hold beyond the segments.
#[derive(Debug, ClapArgs)]
#[command(after_help = "Examples:\n  simdex stats pages.idx --json")]
pub struct Args {
    /// The index directory.
    dir: PathBuf,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<()> {
    let index = Index::open_read_only(&args.dir, IndexOptions::default())?;
    let s = index.stats();
    let report = index.open_report();
    let fingerprints: u64 = s.segments.iter().map(|x| x.entries).sum();
    let bytes: u64 = s.segments.iter().map(|x| x.file_len).sum();
    if args.json {
        let segments: Vec<_> = s
            .segments
            .iter()
            .map(|x| json!({"name": x.name, "entries": x.entries, "bytes": x.file_len, "min_seq": x.min_seq, "max_seq": x.max_seq, "tables": x.tables, "design": x.design, "slice_start_secs": x.slice_start_secs}))
            .collect();
        let logs: Vec<_> =
            report.logs.iter().map(|l| json!({"name": l.name, "bytes": l.len, "valid_bytes": l.valid_len, "end": format!("{:?}", l.end), "operations": l.ops})).collect();
        out!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "dir": s.dir, "k": s.k, "codec": s.codec.name(),
                "sketch_bytes": s.sketches.map_or(0, |c| c.bytes), "sketch_scheme": s.sketches.map(|c| hex(&c.scheme)),
                "segments": segments, "segment_fingerprints": fingerprints, "segment_bytes": bytes,
                "tombstone_files": s.tombstone_files, "tombstones": s.tombstones,
                "memtable": {"inserts": s.memtable_inserts, "deletes": s.memtable_deletes},
                "frozen": {"memtables": s.frozen_memtables, "operations": s.frozen_ops},
                "logs": logs, "last_seq": s.last_seq, "flushed_seq": s.flushed_seq,
                "expiry": s.expiry.map(|x| json!({"window_secs": x.window().as_secs(), "granularity_secs": x.granularity().as_secs(), "oldest_live_secs": s.oldest_live_secs})),
                "unknown_files": s.unknown_files, "lost": report.lost,
            }))?
        );
        return Ok(());
    }
    out!("index {} (k = {}, codec {})", s.dir.display(), s.k, s.codec.name());
    match s.sketches {
        Some(c) => out!("sketches: {} bytes per document (scheme {})", c.bytes, hex(&c.scheme)),
        None => out!("sketches: none (fingerprints only)"),
    }
    out!("{}", crate::expiry_text::window_line(&s));
    out!("segments: {} ({fingerprints} fingerprints, {bytes} bytes)", s.segments.len());
    for x in &s.segments {
        out!("  {}  {:>12} fingerprints  {:>14} bytes  seq {}..{}  {}", x.name, x.entries, x.file_len, x.min_seq, x.max_seq, x.design);
    }
    out!("tombstones: {} in {} file(s)", s.tombstones, s.tombstone_files);
    out!("memtable: {} inserts, {} deletes (replayed from the logs)", s.memtable_inserts, s.memtable_deletes);
    if s.frozen_memtables > 0 {
        out!("frozen: {} memtables, {} operations (replayed from the logs, flushed by the next writable open)", s.frozen_memtables, s.frozen_ops);
    }
    for l in &report.logs {
        out!(
            "log {}: {} bytes, {} operations{}",
            l.name,
            l.len,
            l.ops,
            if l.len != l.valid_len { format!(", {} bytes of an unfinished record at the end", l.len - l.valid_len) } else { String::new() }
        );
    }
    out!("sequence numbers: last {}, in segments up to {}", s.last_seq, s.flushed_seq);
    for loss in &report.lost {
        out!("LOST {loss}");
    }
    if !s.unknown_files.is_empty() {
        out!("files that are not simdex's (left alone): {}", s.unknown_files.join(", "));
    }
    Ok(())
}

/// Lower-case hex of a scheme tag.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
