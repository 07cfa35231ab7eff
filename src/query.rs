//! What a query asks and what it returns, shared by segments and the engine.

use crate::plan::MAX_K;

/// One stored fingerprint within the query distance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Match {
    /// Hamming distance to the query.
    pub distance: u32,
    /// The stored fingerprint.
    pub fingerprint: u64,
    /// The document id stored with it, when the index keeps ids. A fingerprint stored under
    /// several ids gives one match per id.
    pub doc_id: Option<u64>,
}

/// How to answer a query: the one argument every `query` takes ([`crate::Index::query`],
/// [`crate::Snapshot::query`], [`crate::Segment::query`]).
///
/// ```
/// use simdex::QueryOptions;
/// let options = QueryOptions::within(3);
/// assert_eq!((options.k, options.full_scan), (3, false));
/// let scan = QueryOptions::within(6).with_full_scan();
/// assert!(scan.full_scan);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueryOptions {
    /// Largest Hamming distance to report.
    pub k: u32,
    /// Answer a `k` above [`MAX_K`] by scanning every entry instead of refusing. A `k` above
    /// the design's but at most [`MAX_K`] needs no scan: the tables answer it exactly by
    /// probing prefix variants (or scan by themselves where that is cheaper).
    pub full_scan: bool,
    /// Above the design's `k`, probe prefix variants even where a scan is expected to be
    /// cheaper (for tests and benchmarks that compare the two; both are exact).
    pub always_probe: bool,
}

impl QueryOptions {
    /// Matches within `k`, using the tables (an error if `k` exceeds [`MAX_K`] and the design's).
    pub fn within(k: u32) -> Self {
        Self { k, full_scan: false, always_probe: false }
    }

    /// The same options, answering a `k` above [`MAX_K`] by a full scan.
    pub fn with_full_scan(self) -> Self {
        Self { full_scan: true, ..self }
    }

    /// The same options, answering a `k` above the design's by probing prefix variants
    /// even where a scan is expected to be cheaper.
    pub fn with_always_probe(self) -> Self {
        Self { always_probe: true, ..self }
    }
}

impl QueryOptions {
    /// Fails unless `k` is a distance two 64-bit fingerprints can have.
    pub(crate) fn check(&self) -> crate::Result<()> {
        if self.k > 64 {
            return Err(crate::Error::InvalidArgument(format!("k = {}: fingerprints have 64 bits, so k is at most 64", self.k)));
        }
        Ok(())
    }
}

impl QueryOptions {
    /// Fails unless `k` can be answered by tables built for `design_k`: any `k` up to
    /// [`MAX_K`] can (above `design_k` by multi-probe, or by a scan where that is cheaper;
    /// see [`crate::plan::ProbePlan`]); a larger one only when a full scan was asked for.
    pub(crate) fn check_against(&self, design_k: u32) -> crate::Result<()> {
        self.check()?;
        if self.k > design_k.max(MAX_K) && !self.full_scan {
            return Err(crate::Error::KTooLarge { requested: self.k, design_k });
        }
        Ok(())
    }
}

impl Default for QueryOptions {
    /// The paper's choice: `k = 3`, tables only.
    fn default() -> Self {
        Self::within(3)
    }
}

/// Sorts matches by distance, then fingerprint, then id, and removes repeats.
pub(crate) fn finish_matches(matches: &mut Vec<Match>) {
    matches.sort_unstable();
    matches.dedup();
}
