//! A version: one consistent snapshot of what an index holds (live segments, tombstones,
//! frozen memtables and the active memtable), shared by queries through an `Arc` and
//! replaced whole by the writer, a flush or a compaction.
//!
//! Recency rule: every answer carries a *bound*, the sequence number of its copy (a
//! memtable entry's own, a segment's `max_seq`). A delete of the same pair with a larger
//! sequence number, in a tombstone file or a memtable, hides it.

use std::collections::HashMap;
use std::sync::Arc;

use super::expiry::Expiry;
use super::manifest::{SegmentMeta, TombstoneMeta};
use super::memtable::{MemView, Memtable};
use super::tombstone::Tombstone;
use crate::error::Result;
use crate::query::{finish_matches, Match, QueryOptions};
use crate::segment::Segment;

/// A segment the manifest lists, open.
#[derive(Debug)]
pub(crate) struct LiveSegment {
    pub meta: SegmentMeta,
    pub segment: Segment,
    /// Its band file (`crate::bands`), when it stores sketches (none in use also while one
    /// is missing or damaged, until it is built again: its tables answer instead).
    pub bands: super::band_slot::BandSlot,
    /// Its id table (`crate::ids`; empty: its id column is scanned).
    pub ids: crate::ids::IdSlot,
}

/// The tombstones of the live tombstone files, by pair.
#[derive(Debug, Default)]
pub(crate) struct TombstoneSet {
    pub files: Vec<(TombstoneMeta, Arc<Vec<Tombstone>>)>,
    latest: HashMap<(u64, u64), u64>,
}

impl TombstoneSet {
    pub fn new(files: Vec<(TombstoneMeta, Arc<Vec<Tombstone>>)>) -> Self {
        let mut latest: HashMap<(u64, u64), u64> = HashMap::new();
        for t in files.iter().flat_map(|(_, ts)| ts.iter()) {
            let e = latest.entry((t.fingerprint, t.doc_id)).or_insert(0);
            *e = (*e).max(t.seq);
        }
        Self { files, latest }
    }

    /// Sequence number of the latest delete of the pair.
    pub fn get(&self, fp: u64, id: u64) -> Option<u64> {
        self.latest.get(&(fp, id)).copied()
    }

    /// True when some tombstone hides a copy whose bound is `bound`.
    pub fn hides_any_below(&self, bound: u64) -> bool {
        self.files.iter().any(|(m, _)| m.max_seq > bound)
    }

    /// Tombstones held.
    pub fn len(&self) -> u64 {
        self.files.iter().map(|(m, _)| m.count).sum()
    }
}

/// The snapshot.
#[derive(Clone)]
pub(crate) struct Version {
    pub active: Arc<Memtable>,
    /// Frozen memtables waiting for their flush, oldest first.
    pub frozen: Vec<Arc<Memtable>>,
    /// Live segments, oldest data first.
    pub segments: Vec<Arc<LiveSegment>>,
    pub tombstones: Arc<TombstoneSet>,
}

/// Read views of every memtable of a version, held for one query.
pub(crate) struct MemViews<'a>(pub Vec<MemView<'a>>);

impl Version {
    /// This version as a query at `now_secs` sees it, in an index with the expiry window
    /// `expiry`: without the segments and memtables of expired time slices (an expired
    /// active memtable looks empty). The version itself when nothing in it expired.
    pub(crate) fn live_at(self: Arc<Self>, expiry: &Expiry, now_secs: u64) -> Arc<Version> {
        let live = |epoch: Option<u64>| epoch.is_none_or(|e| expiry.is_live(e, now_secs));
        let all_live = self.segments.iter().all(|s| live(Some(s.meta.epoch))) && self.frozen.iter().all(|m| live(m.epoch)) && live(self.active.epoch);
        if all_live {
            return self;
        }
        let mut v = (*self).clone();
        v.segments.retain(|s| live(Some(s.meta.epoch)));
        v.frozen.retain(|m| live(m.epoch));
        if !live(v.active.epoch) {
            v.active = Arc::new(v.active.emptied());
        }
        Arc::new(v)
    }

    /// The live segments' manifest entries, oldest first.
    pub(crate) fn segment_metas(&self) -> Vec<super::manifest::SegmentMeta> {
        self.segments.iter().map(|s| s.meta).collect()
    }

    pub(crate) fn views(&self) -> MemViews<'_> {
        MemViews(self.frozen.iter().chain(std::iter::once(&self.active)).map(|m| m.view()).collect())
    }

    /// True when a delete newer than `bound` hides `(fp, id)`.
    pub(crate) fn hidden(&self, views: &MemViews<'_>, fp: u64, id: u64, bound: u64) -> bool {
        self.tombstones.get(fp, id).is_some_and(|s| s > bound) || views.0.iter().any(|v| v.delete_seq(fp, id).is_some_and(|s| s > bound))
    }

    /// Every live pair within `options.k` of `q`, each once, sorted like segment answers.
    pub fn query_into(&self, q: u64, options: &QueryOptions, out: &mut Vec<Match>) -> Result<()> {
        self.query_tables_into(q, options, |_| true, out)
    }

    /// [`Self::query_into`] over the memtables and the segments `asked` selects (by their
    /// position in `segments`): the pairs of the others are not found.
    pub(crate) fn query_tables_into(&self, q: u64, options: &QueryOptions, asked: impl Fn(usize) -> bool, out: &mut Vec<Match>) -> Result<()> {
        let mut found: Vec<(Match, u64)> = Vec::new();
        let mut tmp = Vec::new();
        let segments = || self.segments.iter().enumerate().filter(|&(i, _)| asked(i)).map(|(_, s)| s);
        // Segments reading from the disk start every segment's reads before any is decoded.
        if self.segments.len() > 1 {
            for s in segments() {
                s.segment.prefetch_if_cold(q);
            }
        }
        for s in segments() {
            s.segment.query_into(q, options, &mut tmp)?;
            found.extend(tmp.iter().map(|&m| (m, s.meta.max_seq)));
        }
        let views = self.views();
        for v in &views.0 {
            v.query(q, options.k, &mut found);
        }
        out.clear();
        let any_deletes = !self.tombstones.files.is_empty() || views.0.iter().any(|v| v.has_deletes());
        for (m, bound) in found {
            if any_deletes && self.hidden(&views, m.fingerprint, m.doc_id.unwrap_or(0), bound) {
                continue;
            }
            out.push(m);
        }
        finish_matches(out);
        Ok(())
    }

    /// The sketch stored with the newest copy of `(fp, id)` (memtables newest first, then
    /// segments newest first); `None` when that copy has none or the pair is not held.
    pub fn sketch_of(&self, views: &MemViews<'_>, fp: u64, id: u64) -> Result<Option<Vec<u8>>> {
        for v in views.0.iter().rev() {
            if let Some((_, sketch)) = v.find_sketch(fp, id) {
                return Ok(sketch.map(<[u8]>::to_vec));
            }
        }
        for s in self.segments.iter().rev() {
            if let Some(sketch) = s.segment.sketch_of(fp, id)? {
                return Ok(sketch.iter().any(|&b| b != 0).then(|| sketch.to_vec()));
            }
        }
        Ok(None)
    }

    /// Every live pair, sorted, each once (reads every segment: for tools and tests).
    pub fn live_entries(&self) -> Result<Vec<(u64, u64)>> {
        let views = self.views();
        let mut out = Vec::new();
        for s in &self.segments {
            for e in s.segment.entries() {
                let (fp, id) = e?;
                let id = id.unwrap_or(0);
                if !self.hidden(&views, fp, id, s.meta.max_seq) {
                    out.push((fp, id));
                }
            }
        }
        for v in &views.0 {
            for e in v.entries() {
                if !self.hidden(&views, e.fp, e.id, e.seq) {
                    out.push((e.fp, e.id));
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }
}
