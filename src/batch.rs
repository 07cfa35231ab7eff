//! Batch queries (paper section 3.3): a whole list of queries against a stored set in one
//! merge join per table (`join/`) instead of one probe per query.
//!
//! A segment (or [`SortedTables`]) is joined table by table and its matches sorted; a
//! snapshot is joined one live segment at a time, leaving out the pairs newer deletes hide,
//! and its unflushed pairs are sorted into tables in memory; its matches are sorted together
//! and handed out at the end. Matches past [`BatchOptions::match_memory`] are sorted into
//! run files in a spill directory and merged back, in the same order.

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::join::{join, QueryPair, Tables};
use crate::sort::{take_u64, Record, SharedSorter, Sorted, SpillSorter};
use crate::stored::{SortedTables, Stored};

/// The automatic match budget is the size of the queries, but at least this many bytes.
const MIN_AUTO_MATCH_MEMORY: usize = 1 << 20;

/// How to run a batch.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct BatchOptions {
    /// Largest Hamming distance to report: at most [`crate::plan::MAX_K`] (above the
    /// design's `k`, each table is joined with the queries' prefix variants: multi-probe).
    pub k: u32,
    /// Worker threads (at least 1).
    pub threads: usize,
    /// Bytes of matches held in memory at a time before sorted runs spill to disk (16 bytes
    /// a match while joining, up to 40 with ids). `None`: as many bytes as the queries take
    /// (8 each), at least 1 MiB, so that peak heap stays about twice the queries.
    pub match_memory: Option<usize>,
    /// Where the spill directory is made (`simdex-spill-PID-N`, removed when the batch ends,
    /// fails or is dropped). `None`: [`std::env::temp_dir`].
    pub spill_dir: Option<PathBuf>,
}

__with_fields!(BatchOptions { k: u32 => with_k, threads: usize => with_threads, match_memory: Option<usize> => with_match_memory, spill_dir: Option<PathBuf> => with_spill_dir });

impl BatchOptions {
    /// Distance `k`, one thread per available core, the automatic match budget, the system's
    /// temporary directory for spills.
    pub fn new(k: u32) -> Self {
        Self { k, threads: std::thread::available_parallelism().map_or(1, |n| n.get()), match_memory: None, spill_dir: None }
    }

    fn memory(&self, queries: usize) -> usize {
        self.match_memory.unwrap_or_else(|| queries.saturating_mul(8).max(MIN_AUTO_MATCH_MEMORY))
    }

    fn spill_parent(&self) -> PathBuf {
        self.spill_dir.clone().unwrap_or_else(std::env::temp_dir)
    }
}

/// One match of a batch query.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BatchMatch {
    /// The query.
    pub query: u64,
    /// Hamming distance between the query and the stored fingerprint.
    pub distance: u32,
    /// The stored fingerprint.
    pub fingerprint: u64,
    /// Its document id, when the segment keeps ids (one match per id).
    pub doc_id: Option<u64>,
}

impl Record for BatchMatch {
    const BYTES: usize = 25;

    fn encode(&self, out: &mut Vec<u8>) {
        // The distance is the popcount of query ^ fingerprint; one byte says whether an id follows.
        (self.query, self.fingerprint).encode(out);
        out.extend_from_slice(&self.doc_id.unwrap_or(0).to_le_bytes());
        out.push(u8::from(self.doc_id.is_some()));
    }

    fn decode(bytes: &[u8]) -> Option<Self> {
        let (query, rest) = take_u64(bytes)?;
        let (fingerprint, rest) = take_u64(rest)?;
        let (id, rest) = take_u64(rest)?;
        let doc_id = match rest.first()? {
            0 => None,
            _ => Some(id),
        };
        Some(Self { query, distance: (query ^ fingerprint).count_ones(), fingerprint, doc_id })
    }
}

/// All stored fingerprints within `options.k` of every query, each (query, fingerprint, id)
/// once, sorted by query, then distance, fingerprint and id.
pub fn batch_query<'a>(stored: impl Into<Stored<'a>>, queries: &[u64], options: &BatchOptions) -> Result<Vec<BatchMatch>> {
    let mut out = Vec::new();
    batch_query_each(stored, queries, options, |m| {
        out.push(m);
        Ok(())
    })?;
    Ok(out)
}

/// [`batch_query`], handing each match to `emit` in order instead of collecting them.
/// Returns the number of matches.
///
/// Peak memory over a segment: one sorted copy of the queries, and at most
/// `options.match_memory` bytes of matches (by default the size of the queries); more
/// matches are sorted into run files in the spill directory and merged back (with ids, the
/// merged matches are sorted once more by fingerprint, in bounded memory too, to look their
/// ids up in one pass). The stored tables are streamed. Over a snapshot (unless one segment
/// holds all its live pairs), the matches of its parts are sorted together within one more
/// such budget, and its unflushed pairs are sorted into tables in memory.
pub fn batch_query_each<'a>(stored: impl Into<Stored<'a>>, queries: &[u64], options: &BatchOptions, mut emit: impl FnMut(BatchMatch) -> Result<()>) -> Result<u64> {
    let snapshot = match stored.into().simplest() {
        Stored::Segment(s) => return emit_matches(s, queries, options, &mut emit),
        Stored::Sorted(t) => return emit_matches(t, queries, options, &mut emit),
        Stored::Snapshot(s) => s,
    };
    let parent = options.spill_parent();
    let mut all: SpillSorter<BatchMatch> = SpillSorter::new(options.memory(queries.len()), &parent);
    let deletes = snapshot.deletes();
    for (i, segment) in snapshot.segments().into_iter().enumerate() {
        emit_matches(segment, queries, options, &mut |m| {
            if deletes.is_empty() || !deletes.hidden_in_segment(i, m.fingerprint, m.doc_id.unwrap_or(0)) {
                all.push(m)?;
            }
            Ok(())
        })?;
    }
    let unflushed = snapshot.unflushed();
    if !unflushed.is_empty() {
        let tables = SortedTables::new(unflushed.to_vec(), options.k)?;
        emit_matches(&tables, queries, options, &mut |m| all.push(m))?;
    }
    // A pair stored in several places was found in each: the sorter keeps it once.
    let mut n = 0u64;
    for m in all.finish()? {
        emit(m?)?;
        n += 1;
    }
    Ok(n)
}

/// The batch over one table source, in order. Returns the number of matches.
fn emit_matches(tables: &impl Tables, queries: &[u64], options: &BatchOptions, emit: &mut impl FnMut(BatchMatch) -> Result<()>) -> Result<u64> {
    let memory = options.memory(queries.len());
    let parent = options.spill_parent();
    if tables.has_ids() {
        return emit_matches_with_ids(tables, queries, options, memory, &parent, emit);
    }
    let sink = SharedSorter::new(memory, options.threads, &parent);
    join(tables, queries, options.k, options.threads, &sink, QueryPair::new)?;
    let mut n = 0u64;
    for p in sink.into_inner().finish()? {
        let p = p?;
        emit(BatchMatch { query: p.query, distance: p.distance(), fingerprint: p.fingerprint, doc_id: None })?;
        n += 1;
    }
    Ok(n)
}

/// [`emit_matches`] over tables with ids: the join's matches are sorted by fingerprint, as
/// `(fingerprint, query)`, so that their ids are looked up in one pass over table 0; then
/// they are sorted into query order (in place when they fit in `memory`; otherwise the
/// lookup goes a chunk of fingerprints at a time and the matches with ids are sorted on disk).
fn emit_matches_with_ids(
    tables: &impl Tables,
    queries: &[u64],
    options: &BatchOptions,
    memory: usize,
    parent: &Path,
    emit: &mut impl FnMut(BatchMatch) -> Result<()>,
) -> Result<u64> {
    let sink: SharedSorter<(u64, u64)> = SharedSorter::new(memory, options.threads, parent);
    join(tables, queries, options.k, options.threads, &sink, |q, fp| Some((fp, q)))?;
    let mut n = 0u64;
    let spilled = match sink.into_inner().finish()? {
        Sorted::Memory(pairs) => {
            let mut pairs: Vec<(u64, u64)> = pairs.collect();
            let mut fps: Vec<u64> = pairs.iter().map(|p| p.0).collect();
            fps.dedup();
            let ids = tables.id_map(fps)?;
            pairs.sort_unstable_by_key(|&(fp, q)| (q, (q ^ fp).count_ones(), fp));
            for (fp, q) in pairs {
                for &id in ids.ids(fp) {
                    emit(BatchMatch { query: q, distance: (q ^ fp).count_ones(), fingerprint: fp, doc_id: Some(id) })?;
                    n += 1;
                }
            }
            return Ok(n);
        }
        spilled @ Sorted::Runs { .. } => spilled,
    };
    let mut out: SpillSorter<BatchMatch> = SpillSorter::new(memory / 2, parent);
    // A chunk of (fingerprint, query) pairs and its id map: 16 + 20 bytes a pair at most.
    let per_chunk = (memory / 4 / 36).max(1);
    let mut chunk: Vec<(u64, u64)> = Vec::new();
    let resolve = |chunk: &mut Vec<(u64, u64)>, out: &mut SpillSorter<BatchMatch>| -> Result<()> {
        let mut fps: Vec<u64> = chunk.iter().map(|c| c.0).collect();
        fps.dedup();
        let ids = tables.id_map(fps)?;
        for &(fp, q) in chunk.iter() {
            for &id in ids.ids(fp) {
                out.push(BatchMatch { query: q, distance: (q ^ fp).count_ones(), fingerprint: fp, doc_id: Some(id) })?;
            }
        }
        chunk.clear();
        Ok(())
    };
    for p in spilled {
        chunk.push(p?);
        if chunk.len() >= per_chunk {
            resolve(&mut chunk, &mut out)?;
        }
    }
    resolve(&mut chunk, &mut out)?;
    for m in out.finish()? {
        emit(m?)?;
        n += 1;
    }
    Ok(n)
}
