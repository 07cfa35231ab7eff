//! `simdex bench index`: an index directory whose every fingerprint stores a synthetic sketch
//! (`super::sketch`), compacted to one segment (or, `--live`, left as the engine's policy
//! leaves a crawl's inserts), for `bench query --confirmed`.

use anyhow::{bail, Context, Result};
use clap::Args as ClapArgs;
use simdex::{Durability, Index, IndexOptions};
use simdex_fingerprint::sketch::SketchOptions;
use std::path::PathBuf;
use std::time::Instant;

use super::sketch::synthetic_sketch;
use crate::input::InputFormat;
use crate::input::{self, Decoder, Position, Record};

/// Fingerprints inserted per batch.
const BATCH: usize = 1 << 16;

#[derive(Debug, ClapArgs)]
pub(super) struct IndexArgs {
    /// The new index directory.
    pub(super) dir: PathBuf,
    /// The fingerprints (formats as `simdex insert` reads them).
    #[arg(long, short)]
    pub(super) input: PathBuf,
    #[command(flatten)]
    pub(super) format: InputFormat,
    /// Largest Hamming distance the index serves.
    #[arg(short, long, default_value_t = 3)]
    pub(super) k: u32,
    /// Leave the index as a crawl's inserts leave it (segments by the engine's own
    /// compaction policy, closed as `simdex add` closes it) instead of compacting it into
    /// one segment.
    #[arg(long)]
    pub(super) live: bool,
    /// Store no sketches (an index without a sketch column): the same ingest for a
    /// baseline, so that what sketches cost is a ratio of one build's two runs.
    #[arg(long)]
    pub(super) no_sketches: bool,
}

pub(super) fn index(args: IndexArgs) -> Result<()> {
    if args.dir.exists() {
        bail!("{}: already exists (bench index makes a new index)", args.dir.display());
    }
    // The input is streamed (read a chunk at a time, inserted a batch at a time), so the
    // process's memory is the index's whatever the input's size; a first chunk is read
    // before the index is made, so an input without fingerprints makes none.
    let mut input = Stream::open(&args)?;
    let mut pending: Vec<(u64, u64)> = Vec::with_capacity(BATCH);
    let mut more = true;
    while pending.is_empty() && more {
        more = input.read_into(&mut pending)?;
    }
    if pending.is_empty() {
        bail!("{}: no fingerprints", args.input.display());
    }
    let started = Instant::now();
    let column = SketchOptions::default().column();
    let options = IndexOptions::default().with_k(args.k).with_sketches((!args.no_sketches).then_some(column)).with_durability(Durability::NoSync);
    let index = Index::open(&args.dir, options).with_context(|| format!("{}: creating the index", args.dir.display()))?;
    let width = usize::from(column.bytes);
    let (mut pairs, mut sketches) = (Vec::with_capacity(BATCH), Vec::with_capacity(BATCH * width));
    loop {
        while pending.len() >= BATCH || (!more && !pending.is_empty()) {
            let n = pending.len().min(BATCH);
            pairs.clear();
            sketches.clear();
            for &(fp, id) in &pending[..n] {
                pairs.push(simdex::Entry::new(fp, id));
                if !args.no_sketches {
                    sketches.extend_from_slice(&synthetic_sketch(id, width));
                }
            }
            if args.no_sketches {
                index.insert_many(&pairs)?;
            } else {
                index.insert_many_sketched(&pairs, &sketches)?;
            }
            pending.drain(..n);
        }
        if !more {
            break;
        }
        more = input.read_into(&mut pending)?;
    }
    let count = input.count;
    if !args.live {
        index.compact()?;
    }
    index.close()?;
    let segments = Index::open_read_only(&args.dir, IndexOptions::default())?.stats().segments.len();
    let each = if args.no_sketches { "without sketches".to_string() } else { format!("each with a {width}-byte synthetic sketch") };
    out!("{}: {count} fingerprints, {each}, in {segments} segment(s) ({:.1} s)", args.dir.display(), started.elapsed().as_secs_f64());
    Ok(())
}

/// The input, read a chunk at a time.
struct Stream {
    reader: Box<dyn std::io::Read + Send>,
    decoder: Decoder,
    name: String,
    buf: Vec<u8>,
    /// Fingerprints read so far.
    count: u64,
}

impl Stream {
    fn open(args: &IndexArgs) -> Result<Stream> {
        let name = input::display_name(&args.input);
        Ok(Stream { reader: input::open(&args.input)?, decoder: Decoder::new(name.clone(), args.format), name, buf: vec![0u8; input::CHUNK_BYTES], count: 0 })
    }

    /// Appends the next chunk's fingerprints to `pending`, each with its id (the input's,
    /// else its number in the input); false once the input has ended.
    fn read_into(&mut self, pending: &mut Vec<(u64, u64)>) -> Result<bool> {
        let n = loop {
            match self.reader.read(&mut self.buf) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                other => break other.with_context(|| format!("reading {}", self.name))?,
            }
        };
        let count = &mut self.count;
        let mut take = |r: Record, _: Position| {
            pending.push((r.fp, r.id.unwrap_or(*count)));
            *count += 1;
            Ok(())
        };
        if n == 0 {
            self.decoder.finish(&mut take)?;
        } else {
            self.decoder.feed(&self.buf[..n], &mut take)?;
        }
        Ok(n > 0)
    }
}
