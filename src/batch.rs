//! Batch queries (paper section 3.3): a whole list of queries against a stored set in one
//! merge join per table (`join.rs`) instead of one probe per query.
//!
//! A segment (or [`SortedTables`]) streams its matches in order. A snapshot is joined one
//! live segment at a time, leaving out the pairs newer deletes hide, and its unflushed pairs
//! are sorted into tables in memory; its matches are collected, sorted and handed out at the
//! end.

use crate::error::Result;
use crate::join::{join, Tables};
use crate::stored::{SortedTables, Stored};

/// How to run a batch.
#[derive(Clone, Copy, Debug)]
pub struct BatchOptions {
    /// Largest Hamming distance to report: at most [`crate::plan::MAX_K`] (above the
    /// design's `k`, each table is joined with the queries' prefix variants: multi-probe).
    pub k: u32,
    /// Worker threads (at least 1).
    pub threads: usize,
}

impl BatchOptions {
    /// Distance `k`, one thread per available core.
    pub fn new(k: u32) -> Self {
        Self { k, threads: std::thread::available_parallelism().map_or(1, |n| n.get()) }
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
/// Peak memory over a segment: one sorted copy of the queries (freed before the output
/// phase), 16 bytes per (query, fingerprint) match, and 20 bytes per distinct matched
/// fingerprint for its ids; the stored tables are streamed. Over a snapshot (unless one
/// segment holds all its live pairs), the matches are also collected (32 bytes each) to be
/// sorted together, and its unflushed pairs are sorted into tables in memory.
pub fn batch_query_each<'a>(stored: impl Into<Stored<'a>>, queries: &[u64], options: &BatchOptions, mut emit: impl FnMut(BatchMatch) -> Result<()>) -> Result<u64> {
    let snapshot = match stored.into().simplest() {
        Stored::Segment(s) => return emit_matches(s, queries, options, &mut emit),
        Stored::Sorted(t) => return emit_matches(t, queries, options, &mut emit),
        Stored::Snapshot(s) => s,
    };
    let mut all: Vec<BatchMatch> = Vec::new();
    let deletes = snapshot.deletes();
    for (i, segment) in snapshot.segments().into_iter().enumerate() {
        emit_matches(segment, queries, options, &mut |m| {
            if deletes.is_empty() || !deletes.hidden_in_segment(i, m.fingerprint, m.doc_id.unwrap_or(0)) {
                all.push(m);
            }
            Ok(())
        })?;
    }
    let unflushed = snapshot.unflushed();
    if !unflushed.is_empty() {
        let tables = SortedTables::new(unflushed.to_vec(), options.k)?;
        emit_matches(&tables, queries, options, &mut |m| {
            all.push(m);
            Ok(())
        })?;
    }
    // A pair stored in several places was found in each.
    all.sort_unstable();
    all.dedup();
    let n = all.len() as u64;
    for m in all {
        emit(m)?;
    }
    Ok(n)
}

/// The batch over one table source, in order. Returns the number of matches.
fn emit_matches(tables: &impl Tables, queries: &[u64], options: &BatchOptions, emit: &mut impl FnMut(BatchMatch) -> Result<()>) -> Result<u64> {
    let pairs = join(tables, queries, options.k, options.threads)?;
    let ids = if tables.has_ids() {
        let mut fps: Vec<u64> = pairs.iter().map(|p| p.1).collect();
        fps.sort_unstable();
        fps.dedup();
        fps.shrink_to_fit();
        Some(tables.id_map(fps)?)
    } else {
        None
    };
    let mut n = 0u64;
    for &(q, fp) in &pairs {
        let distance = (q ^ fp).count_ones();
        match &ids {
            Some(map) => {
                for &id in map.ids(fp) {
                    emit(BatchMatch { query: q, distance, fingerprint: fp, doc_id: Some(id) })?;
                    n += 1;
                }
            }
            None => {
                emit(BatchMatch { query: q, distance, fingerprint: fp, doc_id: None })?;
                n += 1;
            }
        }
    }
    Ok(n)
}
