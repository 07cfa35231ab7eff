//! What a query asks and what it returns, shared by segments and the engine.

use crate::plan::MAX_K;

/// A stored pair: a fingerprint and the document id stored with it. What the batch writes
/// take ([`crate::Index::insert_many`], [`crate::Index::delete_many`]) and
/// [`crate::Index::live_entries`] returns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(C)]
pub struct Entry {
    /// The fingerprint.
    pub fingerprint: u64,
    /// The document id stored with it.
    pub doc_id: u64,
}

impl Entry {
    /// `(fingerprint, doc_id)` as an entry.
    pub const fn new(fingerprint: u64, doc_id: u64) -> Self {
        Entry { fingerprint, doc_id }
    }
}

impl From<Entry> for (u64, u64) {
    fn from(e: Entry) -> Self {
        (e.fingerprint, e.doc_id)
    }
}

impl From<(u64, u64)> for Entry {
    fn from((fingerprint, doc_id): (u64, u64)) -> Self {
        Entry { fingerprint, doc_id }
    }
}

/// One stored fingerprint within the query distance: the stored entry, its distance and,
/// for a confirmed query, the resemblance its sketch and the query's estimate.
///
/// Matches compare and sort by distance, then fingerprint, document id and similarity.
#[derive(Clone, Copy, Debug)]
pub struct Match {
    /// Hamming distance to the query.
    pub distance: u32,
    /// The stored fingerprint.
    pub fingerprint: u64,
    /// The document id stored with it, when the index keeps ids. A fingerprint stored under
    /// several ids gives one match per id.
    pub doc_id: Option<u64>,
    /// The resemblance (estimated Jaccard similarity of the two documents' shingles) that the
    /// stored sketch and the query's sketch estimate: set by the confirmed calls
    /// ([`crate::Index::query_confirmed`], [`crate::Index::find_or_insert_confirmed`]) when
    /// both sides have a sketch, `None` otherwise.
    pub similarity: Option<f64>,
}

impl Match {
    /// A match without a similarity.
    pub const fn new(fingerprint: u64, distance: u32, doc_id: Option<u64>) -> Self {
        Match { distance, fingerprint, doc_id, similarity: None }
    }

    fn key(&self) -> (u32, u64, Option<u64>, Option<u64>) {
        (self.distance, self.fingerprint, self.doc_id, self.similarity.map(f64::to_bits))
    }
}

impl PartialEq for Match {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Match {}

impl PartialOrd for Match {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Match {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

impl std::hash::Hash for Match {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
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
