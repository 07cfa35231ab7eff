//! A read-only snapshot of an index for whole-index jobs (batch queries, clusters, split):
//! its live segments, which stored pairs newer deletes hide, and the pairs not yet flushed.
//! It holds one version alive (an `Arc`), so a writer can go on meanwhile.

use std::sync::Arc;

use super::version::Version;
use crate::error::{Error, Result};
use crate::query::{Match, QueryOptions};
use crate::segment::Segment;

/// What an index holds at one moment.
pub struct Snapshot {
    version: Arc<Version>,
    /// The index design's `k`: the largest distance its tables answer.
    k: u32,
}

impl Snapshot {
    pub(crate) fn new(version: Arc<Version>, k: u32) -> Self {
        Self { version, k }
    }

    /// The largest distance the index's tables answer without a full scan.
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
        let design_k = self.k;
        if options.k > design_k && !options.full_scan {
            return Err(Error::KTooLarge { requested: options.k, design_k });
        }
        self.version.query_into(fingerprint, options, out)
    }

    /// The live segments, oldest data first.
    pub fn segments(&self) -> Vec<&Segment> {
        self.version.segments.iter().map(|s| &s.segment).collect()
    }

    /// True when some delete may hide stored pairs (when false, every stored pair is live).
    pub fn has_deletes(&self) -> bool {
        !self.version.tombstones.files.is_empty() || self.version.views().0.iter().any(|v| v.has_deletes())
    }

    /// True when the pair `(fp, id)` stored in segment `i` (of [`Self::segments`]) is hidden
    /// by a newer delete.
    pub fn hidden_in_segment(&self, i: usize, fp: u64, id: u64) -> bool {
        let views = self.version.views();
        self.version.hidden(&views, fp, id, self.version.segments[i].meta.max_seq)
    }

    /// The live pairs held only in memtables (not flushed yet), sorted, each once.
    pub fn unflushed(&self) -> Vec<(u64, u64)> {
        let views = self.version.views();
        let mut out: Vec<(u64, u64)> = views
            .0
            .iter()
            .flat_map(|v| v.entries())
            .filter(|e| !self.version.hidden(&views, e.fp, e.id, e.seq))
            .map(|e| (e.fp, e.id))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Every live pair, sorted, each once (holds them all in memory).
    pub fn live_entries(&self) -> Result<Vec<(u64, u64)>> {
        self.version.live_entries()
    }
}
