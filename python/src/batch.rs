//! The fingerprint batch calls of `Index` (`query_many`, `find_or_insert_many`): many
//! fingerprints in one call with the GIL released, the answers grouped per item
//! ([`Grouped`]) and handed to Python as lists of rows or as columns that
//! `simdex/__init__.py` turns into numpy arrays.
//!
//! A large `query_many` is answered by the Rust batch path (`simdex::batch`: one merge join
//! per table over a snapshot); a small one by one table probe per item on every core, over
//! the same kind of snapshot. Both are exact, so the choice is only about speed.

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use simdex::batch::{batch_query, BatchOptions};
use simdex::{FindOrInsert, Match, QueryOptions, Snapshot};

/// One match as Python sees it: (fingerprint, distance, doc_id).
pub(crate) type Row = (u64, u32, Option<u64>);

pub(crate) fn row(m: &Match) -> Row {
    (m.fingerprint, m.distance, m.doc_id)
}

/// The little-endian u64s of `bytes` (what `simdex._u64_bytes` makes of arrays and sequences).
pub(crate) fn u64s(bytes: &[u8], what: &str) -> PyResult<Vec<u64>> {
    if bytes.len() % 8 != 0 {
        return Err(pyo3::exceptions::PyValueError::new_err(format!("{what}: not a whole number of u64s")));
    }
    Ok(bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default())).collect())
}

/// The matches of many items: item `i`'s are `rows[offsets[i]..offsets[i + 1]]`.
#[derive(Debug, Default)]
pub(crate) struct Grouped {
    offsets: Vec<usize>,
    rows: Vec<Row>,
}

impl Grouped {
    fn with_capacity(items: usize) -> Self {
        let mut offsets = Vec::with_capacity(items + 1);
        offsets.push(0);
        Grouped { offsets, rows: Vec::with_capacity(items) }
    }

    /// Ends the next item, whose matches are `rows`.
    fn push_item(&mut self, rows: impl IntoIterator<Item = Row>) {
        self.rows.extend(rows);
        self.offsets.push(self.rows.len());
    }

    fn append(&mut self, other: Grouped) {
        let base = self.rows.len();
        self.offsets.extend(other.offsets.iter().skip(1).map(|o| o + base));
        self.rows.extend(other.rows);
    }

    /// One list of rows per item.
    pub(crate) fn into_lists(self) -> Vec<Vec<Row>> {
        self.offsets.windows(2).map(|w| self.rows.get(w[0]..w[1]).unwrap_or_default().to_vec()).collect()
    }

    /// Columns as little-endian bytes, one entry per match in item order: the item's
    /// position (u64), the fingerprint (u64), the document id (u64; an index always
    /// stores one) and the distance (u32).
    pub(crate) fn into_columns(self, py: Python<'_>) -> (Py<PyBytes>, Py<PyBytes>, Py<PyBytes>, Py<PyBytes>) {
        let n = self.rows.len();
        let (mut items, mut fps, mut ids, mut distances) = (Vec::with_capacity(n * 8), Vec::with_capacity(n * 8), Vec::with_capacity(n * 8), Vec::with_capacity(n * 4));
        for (item, w) in self.offsets.windows(2).enumerate() {
            for &(fp, distance, id) in self.rows.get(w[0]..w[1]).unwrap_or_default() {
                items.extend_from_slice(&(item as u64).to_le_bytes());
                fps.extend_from_slice(&fp.to_le_bytes());
                ids.extend_from_slice(&id.unwrap_or(0).to_le_bytes());
                distances.extend_from_slice(&distance.to_le_bytes());
            }
        }
        let bytes = |b: Vec<u8>| PyBytes::new(py, &b).unbind();
        (bytes(items), bytes(fps), bytes(ids), bytes(distances))
    }
}

/// A batch of at least this many queries may be answered by the merge join.
const MIN_JOIN_QUERIES: usize = 1024;
/// The merge join reads every stored entry once per table; one probe per query reads a few
/// blocks. The join is chosen when there is a query per this many stored entries or more
/// (measured in python/benches/bench.py: see benches/RESULTS.md, "Python batch API").
const STORED_PER_JOIN_QUERY: u64 = 64;

/// Every live pair within `options.k` of each of `fps`, per item, all items answered over
/// one snapshot of the index.
pub(crate) fn query_many(index: &simdex::Index, fps: &[u64], options: &QueryOptions) -> simdex::Result<Grouped> {
    let snapshot = index.snapshot();
    let stored: u64 = snapshot.segments().iter().map(|s| s.len()).sum();
    let join = options.k <= simdex::plan::MAX_K && fps.len() >= MIN_JOIN_QUERIES && fps.len() as u64 * STORED_PER_JOIN_QUERY >= stored;
    if join {
        query_many_joined(&snapshot, fps, options.k)
    } else {
        query_many_probed(&snapshot, fps, options)
    }
}

/// The batch path: one merge join of the distinct queries with every table (any `k` up to
/// `MAX_K` is valid for every design: above it, the join probes prefix variants).
fn query_many_joined(snapshot: &Snapshot, fps: &[u64], k: u32) -> simdex::Result<Grouped> {
    // (query, position) sorted: the distinct queries in order, and each position's place
    let mut sorted: Vec<(u64, usize)> = fps.iter().copied().zip(0..).collect();
    sorted.sort_unstable();
    let mut distinct: Vec<u64> = sorted.iter().map(|&(q, _)| q).collect();
    distinct.dedup();
    // sorted by query, then distance, fingerprint and id: each query's matches in `query`'s order
    let found = batch_query(snapshot, &distinct, &BatchOptions::new(k))?;
    // each position's run of matches, found by one merge of the two sorted lists (a binary
    // search per item would miss the cache at every step: 4x slower at 1M)
    let mut runs = vec![(0, 0); fps.len()];
    let mut at = 0;
    for &(q, position) in &sorted {
        while found.get(at).is_some_and(|m| m.query < q) {
            at += 1;
        }
        let len = found.get(at..).unwrap_or_default().iter().take_while(|m| m.query == q).count();
        runs[position] = (at, at + len);
    }
    let mut out = Grouped::with_capacity(fps.len());
    for &(start, end) in &runs {
        out.push_item(found.get(start..end).unwrap_or_default().iter().map(|m| (m.fingerprint, m.distance, m.doc_id)));
    }
    Ok(out)
}

/// One table probe per item, the items split over every core.
fn query_many_probed(snapshot: &Snapshot, fps: &[u64], options: &QueryOptions) -> simdex::Result<Grouped> {
    let parts = on_every_core(fps, 256, |part| {
        let mut out = Grouped::with_capacity(part.len());
        let mut found = Vec::new();
        for &fp in part {
            snapshot.query_into(fp, options, &mut found)?;
            out.push_item(found.iter().map(row));
        }
        Ok::<_, simdex::Error>(out)
    })?;
    let mut out = Grouped::with_capacity(fps.len());
    for part in parts {
        out.append(part);
    }
    Ok(out)
}

/// `work` of consecutive parts of `items`, one part per core (parts of at least
/// `min_per_thread` items, all on this thread when that makes one part); the answers in order.
pub(crate) fn on_every_core<I: Sync, R: Send, E: Send>(items: &[I], min_per_thread: usize, work: impl Fn(&[I]) -> Result<R, E> + Sync) -> Result<Vec<R>, E> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = cores.min(items.len().div_ceil(min_per_thread.max(1))).max(1);
    if threads == 1 {
        return Ok(vec![work(items)?]);
    }
    let work = &work;
    std::thread::scope(|s| {
        let handles: Vec<_> = items.chunks(items.len().div_ceil(threads)).map(|part| s.spawn(move || work(part))).collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    })
}

/// `find_or_insert` of each `(fps[i], ids[i])` in order: an item's matches, or none when it
/// was inserted. An error stops the batch; the items before it stay stored.
pub(crate) fn find_or_insert_many(index: &simdex::Index, fps: &[u64], ids: &[u64], options: &QueryOptions) -> simdex::Result<Grouped> {
    let mut out = Grouped::with_capacity(fps.len());
    for (&fp, &id) in fps.iter().zip(ids) {
        match index.find_or_insert(fp, id, options)? {
            FindOrInsert::Found(m) => out.push_item(m.iter().map(row)),
            FindOrInsert::Inserted { .. } => out.push_item([]),
        }
    }
    Ok(out)
}
