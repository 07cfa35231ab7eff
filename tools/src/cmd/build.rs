//! `simdex build`: a segment file from a list of fingerprints.

use anyhow::{bail, Result};
use clap::Args as ClapArgs;
use serde_json::json;
use simdex::build_segment;
use simdex::plan::{plan, Design, PlanOptions};
use simdex::storage::FsStorage;
use simdex::BuildOptions;
use simdex::Codec;
use std::path::PathBuf;
use std::time::Instant;

use crate::input::{self, InputFormat};
use crate::progress;

/// Build a segment file from fingerprints.
///
/// INPUT has one fingerprint per line as 16 hex digits, optionally followed by a tab and a
/// decimal document id (ids on every line or on none); `-` reads stdin. With `--binary` it
/// holds little-endian u64 fingerprints (u64 fingerprint + u64 id pairs with `--with-ids`).
/// The planner picks the table design for the number of fingerprints unless `-k` or
/// `--tables` say otherwise. The file is written under FILE.tmp and renamed when complete.
#[derive(Debug, ClapArgs)]
#[command(after_help = "Examples:\n  simdex build --out stored.sdx stored.txt")]
pub struct Args {
    /// Where to write the segment.
    #[arg(long, short)]
    out: PathBuf,
    /// The fingerprints (`-` for stdin).
    input: PathBuf,
    /// Gap code of every table: `xor` (the paper's) or `delta` (about 4% smaller).
    #[arg(long, default_value = "xor")]
    codec: Codec,
    /// Largest Hamming distance the design must serve.
    #[arg(short, long, default_value_t = 3)]
    k: u32,
    /// Exactly this many tables (see `simdex plan`).
    #[arg(long)]
    tables: Option<usize>,
    #[command(flatten)]
    format: InputFormat,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<()> {
    if args.out.is_dir() {
        bail!("--out {}: is a directory; give the segment file's name (e.g. {})", args.out.display(), args.out.join("pages.sdx").display());
    }
    let start = Instant::now();
    let bar = progress::bytes(input::size_hint(&args.input), "reading");
    let data = input::read_all(&args.input, args.format, |b| bar.set_position(b))?;
    bar.finish_and_clear();
    let read_time = start.elapsed();
    let design: Design = plan(&(PlanOptions::new(data.fps.len() as u64, args.k)).with_tables(args.tables))?.chosen.design;
    let bar = progress::steps(design.tables().len() as u64, "building tables");
    let shown = bar.clone();
    let options = BuildOptions::default().with_design(Some(design.clone())).with_k(args.k).with_codec(args.codec).with_progress(move |done, _| shown.set_position(done as u64));
    let built = Instant::now();
    let bytes = build_segment(&FsStorage, &args.out, &data.fps, data.ids.as_deref(), &options)?;
    bar.finish_and_clear();
    let build_time = built.elapsed();
    let n = data.fps.len();
    if args.json {
        out!(
            "{}",
            json!({
                "out": args.out, "count": n, "file_bytes": bytes, "has_ids": data.ids.is_some(),
                "design": design.summary(), "tables": design.tables().len(), "codec": args.codec.name(),
                "read_seconds": read_time.as_secs_f64(), "build_seconds": build_time.as_secs_f64(),
            })
        );
    } else {
        eprintln!(
            "wrote {}: {n} fingerprints{}, {}, codec {}, {bytes} bytes ({:.2} bytes per fingerprint) in {:.2}s",
            args.out.display(),
            if data.ids.is_some() { " with ids" } else { "" },
            design.summary(),
            args.codec.name(),
            bytes as f64 / n.max(1) as f64,
            build_time.as_secs_f64()
        );
    }
    Ok(())
}
