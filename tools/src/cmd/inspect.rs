//! `simdex inspect`: what a segment holds and how well each table compresses.

use anyhow::Result;
use clap::Args as ClapArgs;
use serde_json::json;
use simdex::codec::{SymbolHistogram, BLOCK_BYTES, EQUAL};
use simdex::plan::information_bound_bits;
use simdex::segment::FORMAT_VERSION;
use simdex::Segment;
use std::path::PathBuf;

use crate::progress;

/// Bytes of block index per block (key, count, CRC), as in format-spec/segment.md.
const INDEX_BYTES_PER_BLOCK: u64 = 14;

/// Show a segment's header, design and per-table statistics.
///
/// Per table: entries, blocks, prefix bits, bits per fingerprint for the blocks alone and
/// with the block index, the Huffman code lengths, and the histogram of h (the position of
/// the top differing bit between successive entries: the paper's Figure 2a). `--json`
/// gives the same with fields `count`, `file_bytes` and `tables[]` (`entries`, `blocks`,
/// `prefix_bits`, `bits_per_entry_blocks`, `bits_per_entry_total`, ...).
///
/// Example: `simdex inspect pages.sdx --json`
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// The segment file.
    file: PathBuf,
    /// Skip the h histogram (it decodes every block).
    #[arg(long)]
    no_histogram: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<()> {
    let seg = Segment::open(&args.file)?;
    let n = seg.len();
    let bound = information_bound_bits(n);
    let total_blocks: u64 = seg.tables().iter().map(|t| t.block_count()).sum();
    let bar = progress::steps(if args.no_histogram { 0 } else { total_blocks }, "decoding blocks");
    let mut tables = Vec::new();
    for (i, t) in seg.tables().iter().enumerate() {
        let histogram = if args.no_histogram {
            None
        } else {
            let mut h = SymbolHistogram::new();
            for (j, v) in seg.table_entries(i).enumerate() {
                h.push(t.codec(), v?);
                if j % (1 << 16) == 0 {
                    bar.set_position(bar.position() + 1);
                }
            }
            Some(h)
        };
        let blocks_bits = (t.block_count() * BLOCK_BYTES as u64 * 8) as f64;
        let index_bits = (t.block_count() * INDEX_BYTES_PER_BLOCK * 8) as f64;
        let per = |bits: f64| if n == 0 { 0.0 } else { bits / n as f64 };
        tables.push(json!({
            "table": i,
            "entries": t.entries(),
            "blocks": t.block_count(),
            "prefix_bits": t.design().prefix_bits,
            "codec": t.codec().name(),
            "permutation": t.design().permutation.describe(),
            "bits_per_entry_blocks": per(blocks_bits),
            "bits_per_entry_total": per(blocks_bits + index_bits),
            "ratio_to_bound_total": if bound > 0.0 { per(blocks_bits + index_bits) / bound } else { 0.0 },
            "code_lengths": by_symbol(t.code().lengths().iter().map(|&l| u64::from(l))),
            "h_histogram": histogram.map(|h| by_symbol(h.counts().iter().copied())),
        }));
    }
    bar.finish_and_clear();
    let report = json!({
        "file": args.file,
        "format_version": FORMAT_VERSION,
        "f": 64,
        "k": seg.design().k(),
        "levels": seg.design().levels(),
        "design": seg.design().summary(),
        "has_ids": seg.has_ids(),
        "count": n,
        "file_bytes": seg.file_len(),
        "bytes_per_entry": if n == 0 { 0.0 } else { seg.file_len() as f64 / n as f64 },
        "information_bound_bits": bound,
        "tables": tables,
    });
    if args.json {
        out!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_text(&report)?;
    }
    Ok(())
}

/// `{symbol: value}` for the symbols with a non-zero value (`"equal"` for `EQUAL`).
fn by_symbol(values: impl IntoIterator<Item = u64>) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    for (s, v) in values.into_iter().enumerate().filter(|&(_, v)| v > 0) {
        m.insert(symbol_name(s), json!(v));
    }
    serde_json::Value::Object(m)
}

fn symbol_name(s: usize) -> String {
    if s == EQUAL {
        "equal".to_string()
    } else {
        s.to_string()
    }
}

fn print_text(r: &serde_json::Value) -> Result<()> {
    out!("file:            {}", r["file"].as_str().unwrap_or_default());
    out!("format version:  {}", r["format_version"]);
    out!("fingerprints:    {} (f = 64){}", r["count"], if r["has_ids"] == true { ", with document ids" } else { "" });
    out!("design:          {}", r["design"].as_str().unwrap_or_default());
    out!("file size:       {} bytes ({:.2} bytes per fingerprint)", r["file_bytes"], r["bytes_per_entry"].as_f64().unwrap_or(0.0));
    out!("info. bound:     {:.2} bits per fingerprint per table", r["information_bound_bits"].as_f64().unwrap_or(0.0));
    for t in r["tables"].as_array().into_iter().flatten() {
        out!();
        out!(
            "table {}: {} entries in {} blocks, prefix {} bits, codec {}, permutation {}",
            t["table"], t["entries"], t["blocks"], t["prefix_bits"], t["codec"].as_str().unwrap_or_default(), t["permutation"].as_str().unwrap_or_default()
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
