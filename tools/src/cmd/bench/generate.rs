//! `simdex bench generate`: seeded fingerprints, random or near copies of a list.

use anyhow::{bail, Result};
use clap::Args as ClapArgs;
use std::path::PathBuf;

use crate::input::{self, InputFormat};

#[derive(Debug, ClapArgs)]
pub(super) struct GenerateArgs {
    /// How many fingerprints.
    #[arg(long, short = 'n')]
    pub(super) count: u64,
    /// Generator seed.
    #[arg(long, default_value_t = 1)]
    pub(super) seed: u64,
    /// Write near copies of this file's fingerprints instead of random ones.
    #[arg(long)]
    pub(super) near: Option<PathBuf>,
    /// Bits flipped in each near copy.
    #[arg(long, default_value_t = 2)]
    pub(super) flips: u32,
    /// Write little-endian u64s instead of text.
    #[arg(long)]
    pub(super) binary: bool,
    /// Append a document id (the line number) to each fingerprint.
    #[arg(long)]
    pub(super) with_ids: bool,
    /// Plant this many clusters first: each a random center and `--cluster-size` copies
    /// with up to `--flips` random bits flipped (the rest of the count is random).
    #[arg(long, default_value_t = 0)]
    pub(super) clusters: u64,
    /// Members per planted cluster.
    #[arg(long, default_value_t = 10)]
    pub(super) cluster_size: u64,
}

pub(super) fn generate(args: GenerateArgs) -> Result<()> {
    use std::io::Write;
    let mut state = args.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let base = match &args.near {
        Some(path) => {
            let fps = input::read_all(path, InputFormat { binary: false, with_ids: false }, |_| {})?.fps;
            if fps.is_empty() {
                bail!("{}: no fingerprints to copy", path.display());
            }
            Some(fps)
        }
        None => None,
    };
    if args.flips > 64 {
        bail!("--flips {}: at most 64 bits can be flipped", args.flips);
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let planted = args.clusters.saturating_mul(args.cluster_size).min(args.count);
    let mut center = 0u64;
    for i in 0..args.count {
        if i < planted {
            if i % args.cluster_size.max(1) == 0 {
                center = next();
            }
            let flips = (next() % (u64::from(args.flips) + 1)) as u32;
            let mut y = center;
            while (y ^ center).count_ones() < flips {
                y ^= 1 << (next() % 64);
            }
            write_fp(&mut out, y, i, args.binary, args.with_ids)?;
            continue;
        }
        let fp = match &base {
            Some(fps) => {
                let x = fps[(i % fps.len() as u64) as usize];
                let mut y = x;
                while (y ^ x).count_ones() < args.flips {
                    y ^= 1 << (next() % 64);
                }
                y
            }
            None => next(),
        };
        write_fp(&mut out, fp, i, args.binary, args.with_ids)?;
    }
    out.flush()?;
    Ok(())
}

fn write_fp(out: &mut impl std::io::Write, fp: u64, id: u64, binary: bool, with_ids: bool) -> Result<()> {
    match (binary, with_ids) {
        (true, false) => out.write_all(&fp.to_le_bytes())?,
        (true, true) => {
            out.write_all(&fp.to_le_bytes())?;
            out.write_all(&id.to_le_bytes())?;
        }
        (false, false) => writeln!(out, "{fp:016x}")?,
        (false, true) => writeln!(out, "{fp:016x}\t{id}")?,
    }
    Ok(())
}
