//! `simdex cluster`: every near-duplicate pair of an index, grouped into clusters.

use anyhow::{bail, Result};
use clap::Args as ClapArgs;
use serde_json::json;
use simdex::{clusters_and_pairs, ClusterOptions};
use simdex::{Source, Stored};
use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::Instant;

use crate::input::hex;

/// Group the stored fingerprints into near-duplicate clusters (all pairs within k).
///
/// `--pairs FILE` also writes every pair, one a line, `fp_a<TAB>fp_b<TAB>distance` (16 hex
/// digits each, `fp_a < fp_b`, sorted), as `python -m simdex.spark cluster --pairs` does.
///
/// Finds every pair of stored fingerprints within k bits (a self-join over the permuted
/// tables), joins pairs into clusters with union-find, and adds fingerprints stored more
/// than once (exact duplicates). Writes one JSON object per cluster (largest first:
/// `{"cluster", "size", "fingerprints", "members": [{"fingerprint", "doc_id"}]}`) to
/// `--out` or stdout, and a summary (cluster count and size histogram) to stderr.
///
/// Memory: the pairs are held up to `--pair-memory` (16 bytes each); past it, sorted runs
/// of pairs spill to a directory made under `--spill-dir` (removed at the end, on errors
/// too) and are merged back into the union-find, with the same clusters.
#[derive(Debug, ClapArgs)]
#[command(after_help = "Examples:\n  simdex cluster stored.sdx -k 3 --out clusters.jsonl")]
pub struct Args {
    /// The index: a segment file or an index directory (read as a snapshot: its live pairs).
    index: PathBuf,
    /// Largest Hamming distance between near-duplicates (at most 8; above the design's k by
    /// multi-probe).
    #[arg(short, long, default_value_t = 3)]
    k: u32,
    /// Write the JSON lines here instead of stdout.
    #[arg(long, short)]
    out: Option<PathBuf>,
    /// Also write every near-duplicate pair to FILE: fp_a<TAB>fp_b<TAB>distance, sorted.
    #[arg(long, value_name = "FILE")]
    pairs: Option<PathBuf>,
    /// Worker threads (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// Near-duplicate pairs held in memory before sorted runs spill to disk, in bytes with an
    /// optional K, M or G suffix (powers of 1024).
    #[arg(long, default_value = "64M", value_parser = parse_bytes)]
    pair_memory: usize,
    /// Where the spill directory is made (default: the system's temporary directory, $TMPDIR).
    #[arg(long)]
    spill_dir: Option<PathBuf>,
}

/// A byte count: digits with an optional `K`, `M` or `G` suffix (powers of 1024, `B` and
/// `iB` allowed).
pub(crate) fn parse_bytes(s: &str) -> std::result::Result<usize, String> {
    let t = s.trim();
    let t = t.strip_suffix("iB").or_else(|| t.strip_suffix('B')).unwrap_or(t);
    let (digits, shift) = match t.char_indices().last() {
        Some((i, 'K' | 'k')) => (&t[..i], 10),
        Some((i, 'M' | 'm')) => (&t[..i], 20),
        Some((i, 'G' | 'g')) => (&t[..i], 30),
        _ => (t, 0),
    };
    let n: usize = digits.trim().parse().map_err(|_| format!("{s:?} is not a byte count (such as 4096, 64K, 256M or 2G)"))?;
    n.checked_mul(1 << shift).ok_or_else(|| format!("{s:?} is too large"))
}

pub fn run(args: Args) -> Result<()> {
    let start = Instant::now();
    let source = Source::open(&args.index)?;
    let threads = match args.threads {
        Some(0) => bail!("--threads 0: at least one thread is needed"),
        Some(t) => t,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let options = ClusterOptions::new(args.k).with_threads(threads).with_pair_memory(args.pair_memory).with_spill_dir(args.spill_dir.clone());
    let mut pairs = match &args.pairs {
        Some(path) => Some(BufWriter::with_capacity(1 << 20, std::fs::File::create(path).map_err(|e| anyhow::anyhow!("cannot create {}: {e}", path.display()))?)),
        None => None,
    };
    let mut pair_error = None;
    let found = clusters_and_pairs(&source, &options, |(a, b)| {
        if let Some(out) = pairs.as_mut() {
            if let Err(e) = simdex_fingerprint::write_pair_line(out, a, b) {
                // the first write error, reported with the file's name below
                pair_error.get_or_insert(e);
            }
        }
        Ok(())
    })?;
    if let (Some(path), Some(mut out)) = (&args.pairs, pairs) {
        match pair_error {
            Some(e) => bail!("cannot write {}: {e}", path.display()),
            None => out.flush().map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?,
        }
    }
    let sink: Box<dyn Write> = match &args.out {
        Some(path) => Box::new(std::fs::File::create(path).map_err(|e| anyhow::anyhow!("cannot create {}: {e}", path.display()))?),
        None => Box::new(std::io::stdout().lock()),
    };
    let mut out = BufWriter::with_capacity(1 << 20, sink);
    let mut histogram: BTreeMap<usize, usize> = BTreeMap::new();
    let mut in_clusters = 0usize;
    for (i, c) in found.iter().enumerate() {
        *histogram.entry(c.members.len()).or_default() += 1;
        in_clusters += c.members.len();
        let mut fps: Vec<u64> = c.members.iter().map(|m| m.0).collect();
        fps.dedup();
        let members: Vec<_> = c.members.iter().map(|(fp, id)| json!({"fingerprint": hex(*fp), "doc_id": id})).collect();
        writeln!(out, "{}", json!({"cluster": i + 1, "size": c.members.len(), "fingerprints": fps.len(), "members": members}))?;
    }
    out.flush()?;
    eprintln!(
        "{} fingerprints, k = {}: {} clusters holding {} entries, in {:.2}s",
        Stored::from(&source).live_len()?,
        args.k,
        found.len(),
        in_clusters,
        start.elapsed().as_secs_f64()
    );
    let sizes: Vec<String> = histogram.iter().rev().map(|(size, n)| format!("{n}x{size}")).collect();
    eprintln!("cluster sizes (count x size): {}", if sizes.is_empty() { "none".to_string() } else { sizes.join(" ") });
    Ok(())
}
