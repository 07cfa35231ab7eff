//! Splitting a stored set into self-contained chunk segments by fingerprint range, for batch
//! jobs on many machines (the paper's MapReduce, section 3.3).
//!
//! Chunks are contiguous ranges of fingerprints (table 0's order) of about equal size; equal
//! fingerprints stay in one chunk. Each chunk is a complete segment with its own design (the
//! planner's, for the chunk's size) and document ids. Ranges rather than round-robin keep
//! each chunk's fingerprints dense, which compresses better (the bound is per chunk size)
//! and lets a job skip chunks by range; a batch over all chunks finds the same matches as
//! over the whole set, since every entry is in exactly one chunk.

use std::path::{Path, PathBuf};

use crate::codec::Codec;
use crate::error::{Error, Result};
use crate::segment::{build_segment, BuildOptions};
use crate::storage::Storage;
use crate::stored::Stored;

/// How to split.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct SplitOptions {
    /// Number of chunks (at least 1; fewer are written when equal fingerprints fill them).
    pub parts: usize,
    /// Distance the chunks' designs must serve; `None` keeps the set's.
    pub k: Option<u32>,
    /// Gap code of the chunks' tables.
    pub codec: Codec,
}

impl SplitOptions {
    /// `parts` chunks, each keeping the set's `k`, in the XOR code.
    pub fn new(parts: usize) -> Self {
        SplitOptions { parts, k: None, codec: Codec::Xor }
    }
}

__with_fields!(SplitOptions { parts: usize => with_parts, k: Option<u32> => with_k, codec: Codec => with_codec });

/// One chunk written by [`split`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// The segment file, `part-NNNNN.sdx` in the output directory.
    pub path: PathBuf,
    /// Entries in the chunk.
    pub count: u64,
    /// Its first and last fingerprint (`None` for an empty chunk).
    pub first: Option<u64>,
    /// See [`Self::first`].
    pub last: Option<u64>,
}

/// What [`split`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunks {
    /// The chunks, in fingerprint order.
    pub chunks: Vec<Chunk>,
    /// Entries each chunk was cut at (the last one holds the rest).
    pub per_chunk: u64,
}

/// Writes every entry of `stored` (every live pair of a snapshot) as `options.parts` chunk
/// segments `dir/part-00000.sdx`, ... through `storage`; `dir` must exist. Calls
/// `progress(entries done, entries)` now and then. Holds one chunk in memory (16 bytes per
/// entry); counting a snapshot's live pairs first reads its segments' table 0 once more.
pub fn split<'a>(stored: impl Into<Stored<'a>>, storage: &dyn Storage, dir: &Path, options: &SplitOptions, progress: &mut dyn FnMut(u64, u64)) -> Result<Chunks> {
    if options.parts == 0 {
        return Err(Error::InvalidArgument("split into 0 parts: at least one chunk is needed".into()));
    }
    let stored = stored.into();
    let total = stored.live_len()?;
    let per_chunk = total.div_ceil(options.parts as u64).max(1);
    let mut writer = ChunkWriter {
        storage,
        dir,
        build: BuildOptions { design: None, k: options.k.unwrap_or(stored.k()), codec: options.codec, progress: None },
        has_ids: stored.has_ids(),
        chunks: Vec::new(),
    };
    let (mut fps, mut ids) = (Vec::new(), Vec::new());
    let mut n = 0u64;
    stored.for_each_entry(|fp, id| {
        // Cut when the chunk is full, but never between equal fingerprints.
        if fps.len() as u64 >= per_chunk && fps.last() != Some(&fp) && writer.chunks.len() + 1 < options.parts {
            writer.write(&mut fps, &mut ids)?;
        }
        fps.push(fp);
        ids.extend(id);
        if n % 65536 == 0 {
            progress(n, total);
        }
        n += 1;
        Ok(())
    })?;
    writer.write(&mut fps, &mut ids)?;
    Ok(Chunks { chunks: writer.chunks, per_chunk })
}

/// Writes chunks one after the other.
struct ChunkWriter<'a> {
    storage: &'a dyn Storage,
    dir: &'a Path,
    build: BuildOptions,
    has_ids: bool,
    chunks: Vec<Chunk>,
}

impl ChunkWriter<'_> {
    /// Writes the next chunk from `fps` and `ids` (in table 0's order), and empties them.
    fn write(&mut self, fps: &mut Vec<u64>, ids: &mut Vec<u64>) -> Result<()> {
        let path = self.dir.join(format!("part-{:05}.sdx", self.chunks.len()));
        build_segment(self.storage, &path, fps, self.has_ids.then_some(&ids[..]), &self.build)?;
        self.chunks.push(Chunk { path, count: fps.len() as u64, first: fps.first().copied(), last: fps.last().copied() });
        fps.clear();
        ids.clear();
        Ok(())
    }
}
