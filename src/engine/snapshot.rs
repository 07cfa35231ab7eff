//! A read-only snapshot of an index for whole-index jobs (batch queries, clusters, split):
//! its live segments, which stored pairs newer deletes hide, and the pairs not yet flushed.
//! It holds one version alive (an `Arc`), so a writer can go on meanwhile.
//!
//! The memtables are read once, on the first whole-index read ([`Snapshot::deletes`],
//! [`Snapshot::unflushed`], [`Snapshot::for_each_live`]): their deletes and live pairs are
//! copied, so a job checks pairs without taking a lock and sees one moment throughout.

// Indexing: indexes the version's segment list by positions below its length.
#![allow(clippy::indexing_slicing)]
use crate::query::Entry;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use super::version::{TombstoneSet, Version};
use crate::error::Result;
use crate::query::{Match, QueryOptions};
use crate::segment::Segment;

/// What an index holds at one moment.
pub struct Snapshot {
    version: Arc<Version>,
    /// The index design's `k`: the largest distance its tables answer.
    k: u32,
    /// The memtables' deletes and live pairs, copied on first use.
    memtables: OnceLock<Memtables>,
    /// Live pairs, once a pass over all of them has counted them.
    live_len: OnceLock<u64>,
}

/// A copy of what the memtables of a version hold.
struct Memtables {
    deletes: Deletes,
    unflushed: Vec<(u64, u64)>,
}

/// Which stored pairs the deletes of a snapshot hide ([`Snapshot::deletes`]): the tombstone
/// files and a copy of the memtables' deletes, gathered once for a whole job.
pub struct Deletes {
    tombstones: Arc<TombstoneSet>,
    /// The latest delete of each pair held in a memtable.
    memtables: HashMap<(u64, u64), u64>,
    /// The `max_seq` of each live segment, oldest first: a delete hides a copy it is newer
    /// than.
    segment_bounds: Vec<u64>,
}

impl Deletes {
    /// True when no delete hides anything: every stored pair is live.
    pub fn is_empty(&self) -> bool {
        self.tombstones.files.is_empty() && self.memtables.is_empty()
    }

    /// True when the pair `(fp, id)` stored in segment `i` (of [`Snapshot::segments`]) is
    /// hidden by a newer delete.
    pub fn hidden_in_segment(&self, i: usize, fp: u64, id: u64) -> bool {
        let bound = self.segment_bounds[i];
        self.tombstones.get(fp, id).is_some_and(|s| s > bound) || self.memtables.get(&(fp, id)).is_some_and(|&s| s > bound)
    }
}

impl Snapshot {
    pub(crate) fn new(version: Arc<Version>, k: u32) -> Self {
        Self { version, k, memtables: OnceLock::new(), live_len: OnceLock::new() }
    }

    /// The distance the index's design was built for; queries up to [`crate::plan::MAX_K`]
    /// are answered above it by multi-probe.
    pub fn k(&self) -> u32 {
        self.k
    }

    /// Every live pair within `options.k` bits of `fingerprint` at the snapshot's moment,
    /// each once, sorted by distance, fingerprint and id.
    pub fn query(&self, fingerprint: u64, options: &QueryOptions) -> Result<Vec<Match>> {
        let mut out = Vec::new();
        self.query_into(fingerprint, options, &mut out)?;
        Ok(out)
    }

    /// [`Self::query`] into a reused vector (cleared first).
    pub fn query_into(&self, fingerprint: u64, options: &QueryOptions, out: &mut Vec<Match>) -> Result<()> {
        options.check_against(self.k)?;
        self.version.query_into(fingerprint, options, out)
    }

    /// The live segments, oldest data first.
    pub fn segments(&self) -> Vec<&Segment> {
        self.version.segments.iter().map(|s| &s.segment).collect()
    }

    /// Which stored pairs newer deletes hide.
    pub fn deletes(&self) -> &Deletes {
        &self.memtables().deletes
    }

    /// The live pairs held only in memtables (not flushed yet), sorted, each once.
    pub fn unflushed(&self) -> &[(u64, u64)] {
        &self.memtables().unflushed
    }

    /// The one segment that holds every live pair, each once, when nothing else is live (one
    /// segment, no delete, nothing unflushed): whole-index jobs then read it directly.
    pub(crate) fn single_segment(&self) -> Option<&Segment> {
        match self.version.segments.as_slice() {
            [only] if self.deletes().is_empty() && self.unflushed().is_empty() => Some(&only.segment),
            _ => None,
        }
    }

    /// The fingerprints some delete touches of which no copy is live (every copy the
    /// segments hold is hidden, none is unflushed), sorted: a stored fingerprint not in it
    /// has a live copy. One exact lookup per deleted fingerprint and segment.
    pub(crate) fn dead_fingerprints(&self) -> Result<Vec<u64>> {
        let deletes = self.deletes();
        let mut deleted: Vec<u64> =
            self.version.tombstones.files.iter().flat_map(|(_, ts)| ts.iter().map(|t| t.fingerprint)).chain(deletes.memtables.keys().map(|&(fp, _)| fp)).collect();
        deleted.sort_unstable();
        deleted.dedup();
        let unflushed = self.unflushed();
        let exact = QueryOptions::within(0);
        let mut found = Vec::new();
        let mut dead = Vec::new();
        'next: for fp in deleted {
            if unflushed.binary_search_by_key(&fp, |p| p.0).is_ok() {
                continue;
            }
            for (i, s) in self.version.segments.iter().enumerate() {
                s.segment.query_into(fp, &exact, &mut found)?;
                if found.iter().any(|m| !deletes.hidden_in_segment(i, fp, m.doc_id.unwrap_or(0))) {
                    continue 'next;
                }
            }
            dead.push(fp);
        }
        Ok(dead)
    }

    /// Calls `each` with every live pair in `(fingerprint, id)` order, each once: the
    /// streaming form of [`Self::live_entries`]. Reads table 0 of every segment in step and
    /// holds one run of equal fingerprints at a time.
    pub fn for_each_live(&self, mut each: impl FnMut(u64, u64) -> Result<()>) -> Result<()> {
        let deletes = self.deletes();
        type Pairs<'a> = Box<dyn Iterator<Item = Result<(u64, u64)>> + 'a>;
        let mut sources: Vec<Pairs<'_>> = Vec::new();
        for (i, s) in self.version.segments.iter().enumerate() {
            let hides = !deletes.is_empty();
            sources.push(Box::new(s.segment.entries().filter_map(move |e| match e {
                Ok((fp, id)) => {
                    let id = id.unwrap_or(0);
                    (!(hides && deletes.hidden_in_segment(i, fp, id))).then_some(Ok((fp, id)))
                }
                Err(e) => Some(Err(e)),
            })));
        }
        sources.push(Box::new(self.unflushed().iter().map(|&pair| Ok(pair))));
        let mut heads: Vec<Option<(u64, u64)>> = sources.iter_mut().map(|s| s.next().transpose()).collect::<Result<_>>()?;
        let mut run: Vec<u64> = Vec::new();
        let mut count = 0u64;
        // A pair may be stored in several sources: merge one fingerprint's ids from all.
        while let Some(fp) = heads.iter().flatten().map(|h| h.0).min() {
            run.clear();
            for (head, source) in heads.iter_mut().zip(&mut sources) {
                while let Some((_, id)) = head.filter(|h| h.0 == fp) {
                    run.push(id);
                    *head = source.next().transpose()?;
                }
            }
            run.sort_unstable();
            run.dedup();
            for &id in &run {
                each(fp, id)?;
            }
            count += run.len() as u64;
        }
        let _ = self.live_len.set(count);
        Ok(())
    }

    /// The number of live pairs: one pass over every segment's table 0, unless a pass has
    /// counted them already or one segment holds them all.
    pub fn live_len(&self) -> Result<u64> {
        if let Some(segment) = self.single_segment() {
            return Ok(segment.len());
        }
        if let Some(&n) = self.live_len.get() {
            return Ok(n);
        }
        self.for_each_live(|_, _| Ok(()))?;
        Ok(self.live_len.get().copied().unwrap_or(0))
    }

    /// Every live pair, sorted, each once (holds them all in memory).
    pub fn live_entries(&self) -> Result<Vec<Entry>> {
        self.version.live_entries().map(|v| v.into_iter().map(Entry::from).collect())
    }

    fn memtables(&self) -> &Memtables {
        self.memtables.get_or_init(|| {
            let version = &self.version;
            let unflushed = {
                let views = version.views();
                let mut out: Vec<(u64, u64)> = views.0.iter().flat_map(|v| v.entries()).filter(|e| !version.hidden(&views, e.fp, e.id, e.seq)).map(|e| (e.fp, e.id)).collect();
                out.sort_unstable();
                out.dedup();
                out
            };
            // The memtable lends its deletes only as a flush's tombstones; most memtables
            // (a crawler's) hold none and are skipped.
            let mut deletes: HashMap<(u64, u64), u64> = HashMap::new();
            for m in version.frozen.iter().chain(std::iter::once(&version.active)) {
                if m.view().has_deletes() {
                    for t in m.flush_output().1 {
                        let seq = deletes.entry((t.fingerprint, t.doc_id)).or_insert(0);
                        *seq = (*seq).max(t.seq);
                    }
                }
            }
            let deletes = Deletes { tombstones: version.tombstones.clone(), memtables: deletes, segment_bounds: version.segments.iter().map(|s| s.meta.max_seq).collect() };
            Memtables { deletes, unflushed }
        })
    }
}
