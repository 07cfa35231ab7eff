//! The records joins hand to the sorter: a batch query's `(query, fingerprint)` pair
//! ([`QueryPair`]) and a near-duplicate pair ([`near_pair`]).

use crate::sort::{take_u64, Record};

/// A `(query, stored fingerprint)` pair of a join, ordered as batch answers are: by query,
/// then distance, then fingerprint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct QueryPair {
    pub(crate) query: u64,
    pub(crate) fingerprint: u64,
}

impl QueryPair {
    /// The pair as a join finds it (the `make` of [`join`] for batch queries).
    pub(crate) fn new(query: u64, fingerprint: u64) -> Option<Self> {
        Some(Self { query, fingerprint })
    }

    /// Hamming distance between the query and the fingerprint.
    pub(crate) fn distance(&self) -> u32 {
        (self.query ^ self.fingerprint).count_ones()
    }

    fn key(&self) -> (u64, u32, u64) {
        (self.query, self.distance(), self.fingerprint)
    }
}

impl Ord for QueryPair {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

impl PartialOrd for QueryPair {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Record for QueryPair {
    const BYTES: usize = 16;

    fn encode(&self, out: &mut Vec<u8>) {
        (self.query, self.fingerprint).encode(out);
    }

    fn decode(bytes: &[u8]) -> Option<Self> {
        let (query, rest) = take_u64(bytes)?;
        let (fingerprint, _) = take_u64(rest)?;
        Some(Self { query, fingerprint })
    }
}

/// A near-duplicate pair of distinct fingerprints as `(smaller, larger)` (the `make` of
/// [`join`] for near pairs; `None` for a fingerprint met with itself).
pub(crate) fn near_pair(a: u64, b: u64) -> Option<(u64, u64)> {
    (a != b).then(|| (a.min(b), a.max(b)))
}
