//! `simdex inspect`: what a segment (or every live segment of an index) holds and how well
//! each table compresses.

use anyhow::{Context, Result};
use clap::Args as ClapArgs;
use serde_json::json;
use simdex::inspect::{gap_histogram, segment_anatomy, GapSymbol};
use simdex::{Index, IndexOptions, Segment};
use std::path::PathBuf;

use crate::progress;

/// Show how a segment file, or each live segment of an index directory, is laid out and compressed.
///
/// A segment's header and design, then per table: entries, blocks, prefix bits, bits per
/// fingerprint for the blocks alone and with the block index, the Huffman code lengths, and
/// the histogram of h (the position of the top differing bit between successive entries:
/// the paper's Figure 2a). For an index directory, first its memtable, logs and tombstones.
/// `--json`
/// gives the same with fields `count`, `file_bytes` and `tables[]` (`entries`, `blocks`,
/// `prefix_bits`, `bits_per_entry_blocks`, `bits_per_entry_total`, ...); for a directory,
/// `memtable`, `logs`, `tombstones` and `segments[]` (each as for a file).
#[derive(Debug, ClapArgs)]
#[command(after_help = "Examples:\n  simdex inspect stored.sdx --plot h.svg\n  simdex inspect pages.idx --no-histogram")]
pub struct Args {
    /// The segment file, or an index directory (every live segment, the memtable and the
    /// logs).
    file: PathBuf,
    /// Skip the h histogram (it decodes every block).
    #[arg(long)]
    no_histogram: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Draw the histogram of h of every table (the paper's Figure 2a) to FILE.svg.
    #[arg(long, value_name = "FILE.svg", conflicts_with = "no_histogram")]
    plot: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<()> {
    if args.file.is_dir() {
        return run_index(&args);
    }
    let seg = Segment::open(&args.file)?;
    let (report, plotted) = inspect_segment(&seg, args.no_histogram)?;
    if let Some(path) = &args.plot {
        crate::plot::histogram_svg(path, &[histogram(&seg, plotted)]).with_context(|| format!("cannot draw {}", path.display()))?;
    }
    if args.json {
        out!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_text(&report)?;
    }
    Ok(())
}

/// An index directory: what `stats` says of it (memtable, logs, tombstones), then every live
/// segment of one consistent snapshot as a segment file is shown; `--plot` draws one curve
/// per segment (the mean over its tables, their range as a band).
fn run_index(args: &Args) -> Result<()> {
    let index = Index::open_read_only(&args.file, IndexOptions::default()).with_context(|| format!("opening index {}", args.file.display()))?;
    let stats = index.stats();
    let snapshot = index.snapshot();
    let mut segments = Vec::new();
    let mut curves = Vec::new();
    for seg in snapshot.segments() {
        let (report, plotted) = inspect_segment(seg, args.no_histogram)?;
        curves.push(histogram(seg, plotted));
        segments.push(report);
    }
    if let Some(path) = &args.plot {
        crate::plot::histogram_svg(path, &curves).with_context(|| format!("cannot draw {}", path.display()))?;
    }
    let report = json!({
        "dir": args.file,
        "k": stats.k,
        "last_seq": stats.last_seq,
        "memtable": {"inserts": stats.memtable_inserts, "deletes": stats.memtable_deletes, "frozen_memtables": stats.frozen_memtables, "frozen_ops": stats.frozen_ops},
        "logs": stats.logs.iter().map(|(name, bytes)| json!({"name": name, "bytes": bytes})).collect::<Vec<_>>(),
        "tombstone_files": stats.tombstone_files,
        "tombstones": stats.tombstones,
        "expiry": stats.expiry.map(|x| json!({"window_secs": x.window().as_secs(), "granularity_secs": x.granularity().as_secs(), "oldest_live_secs": stats.oldest_live_secs})),
        "segments": segments,
    });
    if args.json {
        out!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    out!("index:           {} (k = {}, last sequence number {})", args.file.display(), stats.k, stats.last_seq);
    out!("expiry:          {}", crate::expiry_text::window_line(&stats).trim_start_matches("expiry: "));
    out!("segments:        {}", stats.segments.len());
    out!("memtable:        {} inserts, {} deletes; {} frozen ({} operations)", stats.memtable_inserts, stats.memtable_deletes, stats.frozen_memtables, stats.frozen_ops);
    out!("tombstones:      {} in {} files", stats.tombstones, stats.tombstone_files);
    for (name, bytes) in &stats.logs {
        out!("log:             {name} ({bytes} bytes)");
    }
    for segment in &report["segments"].as_array().cloned().unwrap_or_default() {
        out!();
        print_text(segment)?;
    }
    Ok(())
}

/// Counts of entries by h (the top differing bit), one list per table.
type CountsByH = Vec<Vec<(u32, u64)>>;

/// A segment's tables' counts by h, to be drawn as one curve named by its file.
fn histogram(seg: &Segment, tables: CountsByH) -> crate::plot::Histogram {
    let name = seg.path().file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    crate::plot::Histogram { label: name, fingerprints: seg.len(), tables }
}

/// One segment's report (as JSON) and its tables' counts by h.
fn inspect_segment(seg: &Segment, no_histogram: bool) -> Result<(serde_json::Value, CountsByH)> {
    let anatomy = segment_anatomy(seg);
    let n = anatomy.entries;
    let bound = anatomy.information_bound_bits;
    let total_entries: u64 = anatomy.tables.iter().map(|t| t.entries).sum();
    let bar = progress::steps(if no_histogram { 0 } else { total_entries }, "decoding tables");
    let mut tables = Vec::new();
    let mut plotted: CountsByH = Vec::new();
    let mut done = 0;
    for t in &anatomy.tables {
        let histogram = if no_histogram {
            None
        } else {
            let h = gap_histogram(seg, t.table, |decoded| bar.set_position(done + decoded))?;
            done += t.entries;
            plotted.push(h.iter().filter_map(|&(s, c)| if let GapSymbol::Top(h) = s { Some((h, c)) } else { None }).collect());
            Some(h)
        };
        let blocks_bits = (t.block_bytes * 8) as f64;
        let index_bits = (t.index_bytes * 8) as f64;
        let per = |bits: f64| if n == 0 { 0.0 } else { bits / n as f64 };
        tables.push(json!({
            "table": t.table,
            "entries": t.entries,
            "blocks": t.blocks,
            "prefix_bits": t.prefix_bits,
            "codec": t.codec.name(),
            "permutation": t.permutation,
            "bits_per_entry_blocks": per(blocks_bits),
            "bits_per_entry_total": per(blocks_bits + index_bits),
            "ratio_to_bound_total": if bound > 0.0 { per(blocks_bits + index_bits) / bound } else { 0.0 },
            "code_lengths": by_symbol(t.code_lengths.iter().map(|&(s, l)| (s, u64::from(l)))),
            "h_histogram": histogram.map(by_symbol),
        }));
    }
    bar.finish_and_clear();
    let report = json!({
        "file": seg.path(),
        "format_version": anatomy.format_version,
        "f": 64,
        "k": anatomy.k,
        "levels": anatomy.levels,
        "design": anatomy.design,
        "has_ids": anatomy.has_ids,
        "sketch_bytes": anatomy.sketch_bytes,
        "count": n,
        "file_bytes": anatomy.file_bytes,
        "bytes_per_entry": if n == 0 { 0.0 } else { anatomy.file_bytes as f64 / n as f64 },
        "information_bound_bits": bound,
        "tables": tables,
    });
    Ok((report, plotted))
}

fn by_symbol(values: impl IntoIterator<Item = (GapSymbol, u64)>) -> serde_json::Value {
    serde_json::Value::Object(values.into_iter().map(|(s, v)| (s.to_string(), json!(v))).collect())
}

fn print_text(r: &serde_json::Value) -> Result<()> {
    out!("file:            {}", r["file"].as_str().unwrap_or_default());
    out!("format version:  {}", r["format_version"]);
    let sketches = r["sketch_bytes"].as_u64().map_or(String::new(), |b| format!(", {b}-byte sketches"));
    out!("fingerprints:    {} (f = 64){}{sketches}", r["count"], if r["has_ids"] == true { ", with document ids" } else { "" });
    out!("design:          {}", r["design"].as_str().unwrap_or_default());
    out!("file size:       {} bytes ({:.2} bytes per fingerprint)", r["file_bytes"], r["bytes_per_entry"].as_f64().unwrap_or(0.0));
    out!("info. bound:     {:.2} bits per fingerprint per table", r["information_bound_bits"].as_f64().unwrap_or(0.0));
    for t in r["tables"].as_array().into_iter().flatten() {
        out!();
        out!(
            "table {}: {} entries in {} blocks, prefix {} bits, codec {}, permutation {}",
            t["table"],
            t["entries"],
            t["blocks"],
            t["prefix_bits"],
            t["codec"].as_str().unwrap_or_default(),
            t["permutation"].as_str().unwrap_or_default()
        );
        out!(
            "  bits per fingerprint: {:.3} in blocks, {:.3} with the block index ({:.4}x the bound)",
            t["bits_per_entry_blocks"].as_f64().unwrap_or(0.0),
            t["bits_per_entry_total"].as_f64().unwrap_or(0.0),
            t["ratio_to_bound_total"].as_f64().unwrap_or(0.0)
        );
        let lengths = t["code_lengths"].as_object().map(|m| m.iter().map(|(s, l)| format!("{s}:{l}")).collect::<Vec<_>>().join(" "));
        out!("  code lengths (symbol:bits): {}", lengths.unwrap_or_default());
        if let Some(h) = t["h_histogram"].as_object() {
            let total: u64 = h.values().filter_map(|v| v.as_u64()).sum();
            out!("  histogram of h (top differing bit between successive entries):");
            for (s, c) in h {
                let c = c.as_u64().unwrap_or(0);
                let frac = c as f64 / total.max(1) as f64;
                out!("    {:>5} {:>12} {:>7.3}% {}", s, c, 100.0 * frac, "#".repeat((frac * 60.0).round() as usize));
            }
        }
    }
    Ok(())
}
