//! `simdex query`: near-duplicates of fingerprints in a segment file or an index directory.

use anyhow::{bail, Result};
use clap::Args as ClapArgs;
use serde_json::json;
use simdex::QueryOptions;
use simdex::Source;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use crate::input::{self, hex, InputFormat};

/// Find stored fingerprints within k bits of each query, in a segment file or an index directory.
///
/// An index directory is opened read-only, so a query works while a writer runs.
/// Prints one line per match: `query_hex<TAB>match_hex<TAB>distance[<TAB>doc_id]`, nothing
/// for a query without matches. Queries come from the FP arguments (16 hex digits each)
/// and/or `--input QFILE` (same formats as `simdex build`). When the query file has ids
/// (`simdex fingerprint --for-index` writes them), each line starts with the query's id:
/// `query_id<TAB>query_hex<TAB>...`. With `--json`, one object per match, with
/// `query_id` when the query has one, and one with `"match": null` for a query without
/// matches.
#[derive(Debug, ClapArgs)]
#[command(after_help = "Examples:\n  simdex query stored.sdx -k 3 0123456789abcdef\n  simdex query stored.sdx -k 3 --input queries.txt --json")]
pub struct Args {
    /// The segment file or index directory.
    file: PathBuf,
    /// Fingerprints to look up (16 hex digits each).
    fps: Vec<String>,
    /// Largest Hamming distance to report (at most 8 unless --full-scan: above the design's
    /// k, the tables answer it exactly by multi-probe, see `simdex plan --for-design`).
    #[arg(short, long, default_value_t = 3)]
    k: u32,
    /// A file of queries (`-` for stdin).
    #[arg(long, short)]
    input: Option<PathBuf>,
    /// The query file is little-endian u64s.
    #[arg(long, requires = "input")]
    binary: bool,
    /// With --binary: each query is followed by a u64 id (echoed with its matches).
    #[arg(long, requires = "binary")]
    with_ids: bool,
    /// Answer a k above 8 by scanning every entry (segment files only).
    #[arg(long)]
    full_scan: bool,
    /// One JSON object per match instead of tab-separated lines.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<()> {
    let mut queries: Vec<(u64, Option<u64>)> = Vec::new();
    for (i, fp) in args.fps.iter().enumerate() {
        queries.push((input::parse_hex(fp).map_err(|e| anyhow::anyhow!("argument {} ({fp:?}): {e}", i + 1))?, None));
    }
    if let Some(path) = &args.input {
        let read = input::read_all(path, InputFormat { binary: args.binary, with_ids: args.with_ids }, |_| {})?;
        match read.ids {
            Some(ids) => queries.extend(read.fps.into_iter().zip(ids.into_iter().map(Some))),
            None => queries.extend(read.fps.into_iter().map(|f| (f, None))),
        }
    }
    if queries.is_empty() {
        bail!("no queries: give fingerprints as arguments or --input QFILE");
    }
    let options = if args.full_scan { QueryOptions::within(args.k).with_full_scan() } else { QueryOptions::within(args.k) };
    if args.full_scan && args.file.is_dir() {
        bail!("--full-scan applies to segment files; an index answers up to k = 8");
    }
    let source = Source::open(&args.file)?;
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut matches = Vec::new();
    for (q, qid) in queries {
        source.query_into(q, &options, &mut matches)?;
        if args.json && matches.is_empty() {
            writeln!(out, "{}", json_record(q, qid, None))?;
        }
        for m in &matches {
            if args.json {
                writeln!(out, "{}", json_record(q, qid, Some(m)))?;
            } else {
                write_tsv(&mut out, q, qid, m)?;
            }
        }
    }
    out.flush()?;
    Ok(())
}

/// One match (or, with `m` None, a query without matches) as a JSON object; `query_id`
/// only when the query has one.
pub fn json_record(q: u64, qid: Option<u64>, m: Option<&simdex::Match>) -> serde_json::Value {
    let mut v = match m {
        Some(m) => json!({"query": hex(q), "match": hex(m.fingerprint), "distance": m.distance, "doc_id": m.doc_id}),
        None => json!({"query": hex(q), "match": null, "distance": null, "doc_id": null}),
    };
    if let (Some(id), Some(o)) = (qid, v.as_object_mut()) {
        o.insert("query_id".into(), id.into());
    }
    v
}

/// One match as a tab-separated line: `[query_id<TAB>]query_hex<TAB>match_hex<TAB>distance[<TAB>doc_id]`,
/// with its newline, written without allocating (a batch writes millions of them).
pub fn write_tsv(out: &mut impl std::io::Write, q: u64, qid: Option<u64>, m: &simdex::Match) -> std::io::Result<()> {
    // At most 20 + 1 + 16 + 1 + 16 + 1 + 2 + 1 + 20 + 1 bytes.
    let mut line = [0u8; 80];
    let mut at = 0usize;
    let mut put = |bytes: &[u8]| {
        if let Some(to) = line.get_mut(at..at + bytes.len()) {
            to.copy_from_slice(bytes);
            at += bytes.len();
        }
    };
    let mut digits = [0u8; 20];
    let mut decimal = |mut x: u64, put: &mut dyn FnMut(&[u8])| {
        let mut i = digits.len();
        loop {
            i -= 1;
            if let Some(d) = digits.get_mut(i) {
                *d = b'0' + (x % 10) as u8;
            }
            x /= 10;
            if x == 0 || i == 0 {
                break;
            }
        }
        put(digits.get(i..).unwrap_or_default());
    };
    let hex16 = |x: u64| {
        let mut h = [0u8; 16];
        for (i, d) in h.iter_mut().enumerate() {
            *d = b"0123456789abcdef"[((x >> (60 - 4 * i)) & 15) as usize];
        }
        h
    };
    if let Some(id) = qid {
        decimal(id, &mut put);
        put(b"\t");
    }
    put(&hex16(q));
    put(b"\t");
    put(&hex16(m.fingerprint));
    put(b"\t");
    decimal(u64::from(m.distance), &mut put);
    if let Some(id) = m.doc_id {
        put(b"\t");
        decimal(id, &mut put);
    }
    put(b"\n");
    out.write_all(line.get(..at).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::write_tsv;

    #[test]
    fn tsv_lines_are_the_formatted_fields() {
        let values = [0u64, 1, 9, 10, 255, 1 << 32, 0x0123_4567_89ab_cdef, u64::MAX - 1, u64::MAX];
        for &q in &values {
            for &fp in &values {
                for qid in [None, Some(0u64), Some(q), Some(u64::MAX)] {
                    for doc_id in [None, Some(fp), Some(u64::MAX)] {
                        let m = simdex::Match::new(fp, (q ^ fp).count_ones(), doc_id);
                        let mut got = Vec::new();
                        write_tsv(&mut got, q, qid, &m).unwrap();
                        let mut want = qid.map_or(String::new(), |id| format!("{id}\t"));
                        want += &format!("{q:016x}\t{fp:016x}\t{}", m.distance);
                        if let Some(id) = doc_id {
                            want += &format!("\t{id}");
                        }
                        assert_eq!(String::from_utf8(got).unwrap(), want + "\n");
                    }
                }
            }
        }
    }
}
