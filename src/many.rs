//! Many fingerprints in one call, answered per item: [`query_many`] (every item over one
//! snapshot) and [`find_or_insert_many`] (the items' check-then-adds in order), their
//! answers grouped per item ([`Grouped`]). The fronts that take batches (the Python
//! package, `simdex serve`) call these, so a batch means the same thing through each.
//!
//! A large `query_many` is answered by the batch path ([`crate::batch`]: one merge join per
//! table over a snapshot, reading the blocks the sorted batch lands in); a small one by one
//! table probe per item on every core, over the same kind of snapshot. Both are exact, so
//! the choice is only about speed.

use crate::batch::{batch_query, BatchOptions};
use crate::confirm::ConfirmOptions;
use crate::cpu::on_every_core;
use crate::engine::snapshot::Snapshot;
use crate::engine::{FindOrInsert, Index};
use crate::error::Result;
use crate::query::{Match, QueryOptions};

/// The matches of many items: item `i`'s are `matches[offsets[i]..offsets[i + 1]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grouped {
    offsets: Vec<usize>,
    matches: Vec<Match>,
}

impl Default for Grouped {
    fn default() -> Self {
        Self::with_capacity(0)
    }
}

impl Grouped {
    /// No items yet, room for `items`.
    pub fn with_capacity(items: usize) -> Self {
        let mut offsets = Vec::with_capacity(items + 1);
        offsets.push(0);
        Grouped { offsets, matches: Vec::with_capacity(items) }
    }

    /// Ends the next item, whose matches are `matches`.
    pub fn push_item(&mut self, matches: impl IntoIterator<Item = Match>) {
        self.matches.extend(matches);
        self.offsets.push(self.matches.len());
    }

    /// Appends `other`'s items after this one's.
    pub fn append(&mut self, other: Grouped) {
        let base = self.matches.len();
        self.offsets.extend(other.offsets.iter().skip(1).map(|o| o + base));
        self.matches.extend(other.matches);
    }

    /// How many items.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// True when there are no items.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Each item's matches, in item order.
    pub fn items(&self) -> impl ExactSizeIterator<Item = &[Match]> + '_ {
        self.offsets.iter().zip(self.offsets.iter().skip(1)).map(|(&a, &b)| self.matches.get(a..b).unwrap_or_default())
    }

    /// Every match with its item's position, in item order.
    pub fn flat(&self) -> impl Iterator<Item = (usize, &Match)> + '_ {
        self.items().enumerate().flat_map(|(i, m)| m.iter().map(move |m| (i, m)))
    }

    /// How many matches in all.
    pub fn matches(&self) -> usize {
        self.matches.len()
    }

    /// The matches as little-endian columns, one entry per match in item order: the item's
    /// position (u64), the fingerprint (u64), the document id (u64; 0 where none) and the
    /// distance (u32). The columnar form every front hands out (the Python package's
    /// `columnar=True`, the server's binary answers; `format-spec/protocol.md`).
    pub fn columns(&self) -> MatchColumns {
        let n = self.matches();
        let mut c =
            MatchColumns { items: Vec::with_capacity(n * 8), fingerprints: Vec::with_capacity(n * 8), doc_ids: Vec::with_capacity(n * 8), distances: Vec::with_capacity(n * 4) };
        for (item, m) in self.flat() {
            c.items.extend_from_slice(&(item as u64).to_le_bytes());
            c.fingerprints.extend_from_slice(&m.fingerprint.to_le_bytes());
            c.doc_ids.extend_from_slice(&m.doc_id.unwrap_or(0).to_le_bytes());
            c.distances.extend_from_slice(&m.distance.to_le_bytes());
        }
        c
    }
}

/// [`Grouped::columns`]: a batch's matches as little-endian byte columns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MatchColumns {
    /// Each match's item position, u64.
    pub items: Vec<u8>,
    /// Each match's fingerprint, u64.
    pub fingerprints: Vec<u8>,
    /// Each match's document id, u64 (0 where none).
    pub doc_ids: Vec<u8>,
    /// Each match's distance, u32.
    pub distances: Vec<u8>,
}

/// A batch of at least this many queries may be answered by the merge join.
const MIN_JOIN_QUERIES: usize = 1024;
/// The merge join decodes the blocks of each stored table that the sorted queries land in
/// (the whole table once the batch covers it); one probe per query decodes a few blocks per
/// table, at random. The join is chosen when there is a query per this many stored entries
/// or more: against 2^26 stored (10 tables), 2^14 queries cost about the same CPU either way
/// (0.44 s joined in a new process, 0.36 s probed warm) and 2^18 too (5.4 s, 5.8 s), while
/// 2^20 joined take 10.6 s, under half their probes (issue 48, benches/RESULTS.md).
const STORED_PER_JOIN_QUERY: u64 = 1024;

/// A confirmed batch of at least this many items has its band lookups made in batch mode
/// (each band's keys in order, then the candidates' sketches in ordinal order); a smaller
/// one, a check per item (the same answers either way).
const MIN_BAND_BATCH: usize = 256;
/// Items whose band lookups are held at once (about 16 bytes a candidate they keep, a few
/// candidates an item on every segment): larger batches go in parts of this many.
const MAX_BAND_BATCH: usize = 1 << 20;

/// Every live pair within `options.k` of each of `fps`, per item (each item's matches in
/// [`Index::query`]'s order), all items answered over one snapshot of the index.
pub fn query_many(index: &Index, fps: &[u64], options: &QueryOptions) -> Result<Grouped> {
    let snapshot = index.snapshot();
    let stored: u64 = snapshot.segments().iter().map(|s| s.len()).sum();
    let join = options.k <= crate::plan::MAX_K && fps.len() >= MIN_JOIN_QUERIES && fps.len() as u64 * STORED_PER_JOIN_QUERY >= stored;
    if join {
        query_many_joined(&snapshot, fps, options.k)
    } else {
        query_many_probed(&snapshot, fps, options)
    }
}

/// [`Index::query_confirmed`] of many documents over one version of the live set: item `i` is
/// `fps[i]` with the sketch `sketches[i * w..(i + 1) * w]` (`w` the index's sketch width),
/// judged by the same rule and code as the single check (and so as the crawler's
/// check-then-add), the items split over every core. A large batch has its band lookups
/// made first, for all its items at once, the paper's batch mode applied to the band files:
/// each band's keys in sorted order (a walk through the band's entry pages, a lookup per
/// distinct key), then the candidates' sketches tested in ordinal order; each item's check
/// then goes on from those lookups, so the answers are the single check's. With `sketches` empty no item has a
/// sketch: each is answered by fingerprint alone within `options.unsketched_k`, by
/// [`query_many`] (one merge join of the sorted batch with each stored table when the batch
/// is large against the index, the paper's batch mode; else a probe per item). For front ends
/// that check a batch against an index (`simdex.spark dedup --index` and `cluster --against`).
pub fn query_confirmed_many(index: &Index, fps: &[u64], sketches: &[u8], options: &ConfirmOptions) -> Result<Grouped> {
    if sketches.is_empty() {
        return query_many(index, fps, &QueryOptions::within(options.unsketched_k));
    }
    let view = index.confirmed_view();
    let width = view.sketch_width();
    if width == 0 || sketches.len() != fps.len() * width {
        return Err(crate::Error::InvalidArgument(format!("{} bytes of sketches for {} fingerprints: the index's sketches are {width} bytes", sketches.len(), fps.len())));
    }
    let items: Vec<(u64, &[u8])> = fps.iter().copied().zip(sketches.chunks_exact(width)).collect();
    if items.len() >= MIN_BAND_BATCH {
        let mut out = Grouped::with_capacity(fps.len());
        for chunk in items.chunks(MAX_BAND_BATCH) {
            view.confirmed_batch(chunk, options, |m| out.push_item(m))?;
        }
        return Ok(out);
    }
    let parts = on_every_core(&items, 256, |part| {
        let mut out = Grouped::with_capacity(part.len());
        for &(fp, sketch) in part {
            out.push_item(view.confirmed(fp, sketch, options)?);
        }
        Ok::<_, crate::Error>(out)
    })?;
    let mut out = Grouped::with_capacity(fps.len());
    parts.into_iter().for_each(|p| out.append(p));
    Ok(out)
}

/// The batch path: one merge join of the distinct queries with every table (any `k` up to
/// `MAX_K` is valid for every design: above it, the join probes prefix variants).
fn query_many_joined(snapshot: &Snapshot, fps: &[u64], k: u32) -> Result<Grouped> {
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
        if let Some(run) = runs.get_mut(position) {
            *run = (at, at + len);
        }
    }
    let mut out = Grouped::with_capacity(fps.len());
    for &(start, end) in &runs {
        out.push_item(found.get(start..end).unwrap_or_default().iter().map(|m| Match::new(m.fingerprint, m.distance, m.doc_id)));
    }
    Ok(out)
}

/// One table probe per item, the items split over every core.
fn query_many_probed(snapshot: &Snapshot, fps: &[u64], options: &QueryOptions) -> Result<Grouped> {
    let parts = on_every_core(fps, 256, |part| {
        let mut out = Grouped::with_capacity(part.len());
        let mut found = Vec::new();
        for &fp in part {
            snapshot.query_into(fp, options, &mut found)?;
            out.push_item(found.iter().copied());
        }
        Ok::<_, crate::Error>(out)
    })?;
    let mut out = Grouped::with_capacity(fps.len());
    for part in parts {
        out.append(part);
    }
    Ok(out)
}

/// `find_or_insert` of each `(fps[i], ids[i])` in order (as many as the shorter has): an
/// item's matches, or none when it was inserted. An error stops the batch; the items before
/// it stay stored.
pub fn find_or_insert_many(index: &Index, fps: &[u64], ids: &[u64], options: &QueryOptions) -> Result<Grouped> {
    let mut out = Grouped::with_capacity(fps.len());
    for (&fp, &id) in fps.iter().zip(ids) {
        match index.find_or_insert(fp, id, options)? {
            FindOrInsert::Found(m) => out.push_item(m),
            FindOrInsert::Inserted { .. } => out.push_item([]),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouped_keeps_items_apart_across_appends() {
        let m = |fp| Match::new(fp, 0, Some(fp));
        let mut a = Grouped::with_capacity(2);
        a.push_item([m(1), m(2)]);
        a.push_item([]);
        let mut b = Grouped::default();
        b.push_item([m(3)]);
        a.append(b);
        let items: Vec<Vec<u64>> = a.items().map(|i| i.iter().map(|m| m.fingerprint).collect()).collect();
        assert_eq!(items, vec![vec![1, 2], vec![], vec![3]]);
        assert_eq!(a.flat().map(|(i, m)| (i, m.fingerprint)).collect::<Vec<_>>(), vec![(0, 1), (0, 2), (2, 3)]);
        assert_eq!((a.len(), a.matches()), (3, 3));
    }
}
