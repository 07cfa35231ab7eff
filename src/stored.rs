//! What whole-set jobs (batch queries, near pairs, clusters, split) read: a segment file, an
//! index [`Snapshot`], or fingerprints held in memory as [`SortedTables`].
//!
//! A job walks sorted permuted tables (`join/`). A segment's are on disk; a snapshot's
//! live segments are walked one by one, with the pairs newer deletes hide left out, and its
//! unflushed pairs are permuted and sorted in memory for the job. Nothing is written to
//! disk to read a snapshot.

// Indexing: in-memory sorted tables indexed by table numbers of their own design.
#![allow(clippy::indexing_slicing)]
use std::path::Path;

use crate::engine::snapshot::Snapshot;
use crate::engine::{Index, IndexOptions};
use crate::error::{Error, Result};
use crate::plan::{block_widths, planned_design, Permutation, PlanOptions, TableDesign, MAX_K};
use crate::query::{Match, QueryOptions};
use crate::segment::Segment;
use crate::sort::{sort_by_top_bits, sort_pairs};

/// A set of stored fingerprints that a whole-set job reads.
#[derive(Clone, Copy)]
pub enum Stored<'a> {
    /// Every entry of one segment file.
    Segment(&'a Segment),
    /// Every live pair of an index at one moment.
    Snapshot(&'a Snapshot),
    /// Entries held in memory.
    Sorted(&'a SortedTables),
}

impl<'a> From<&'a Segment> for Stored<'a> {
    fn from(segment: &'a Segment) -> Self {
        Stored::Segment(segment)
    }
}

impl<'a> From<&'a Snapshot> for Stored<'a> {
    fn from(snapshot: &'a Snapshot) -> Self {
        Stored::Snapshot(snapshot)
    }
}

impl<'a> From<&'a SortedTables> for Stored<'a> {
    fn from(tables: &'a SortedTables) -> Self {
        Stored::Sorted(tables)
    }
}

impl<'a> From<&'a Source> for Stored<'a> {
    fn from(source: &'a Source) -> Self {
        match source {
            Source::Segment(s) => Stored::Segment(s),
            Source::Snapshot(s) => Stored::Snapshot(s),
        }
    }
}

impl<'a> Stored<'a> {
    /// The same set in its simplest form: a snapshot whose live pairs are all in one
    /// segment (no delete, nothing unflushed) is that segment.
    pub(crate) fn simplest(self) -> Stored<'a> {
        match self {
            Stored::Snapshot(s) => s.single_segment().map_or(self, Stored::Segment),
            _ => self,
        }
    }

    /// The largest distance the set's tables answer.
    pub fn k(&self) -> u32 {
        match self {
            Stored::Segment(s) => s.design().k(),
            Stored::Snapshot(s) => s.k(),
            Stored::Sorted(t) => t.k,
        }
    }

    /// True when the entries have document ids (a snapshot's always do).
    pub fn has_ids(&self) -> bool {
        match self {
            Stored::Segment(s) => s.has_ids(),
            Stored::Snapshot(_) | Stored::Sorted(_) => true,
        }
    }

    /// Entries held, counted without reading a table: a segment's entries; a snapshot's
    /// segment entries (those newer deletes hide included) plus its live unflushed pairs.
    pub fn held_len(&self) -> u64 {
        match self {
            Stored::Segment(s) => s.len(),
            Stored::Snapshot(s) => s.segments().iter().map(|s| s.len()).sum::<u64>() + s.unflushed().len() as u64,
            Stored::Sorted(t) => t.len() as u64,
        }
    }

    /// The entries a job sees: every entry of a segment or of sorted tables, every live pair
    /// of a snapshot once ([`Snapshot::live_len`]).
    pub fn live_len(&self) -> Result<u64> {
        match self {
            Stored::Snapshot(s) => s.live_len(),
            _ => Ok(self.held_len()),
        }
    }

    /// Calls `each` with every entry a job sees, in fingerprint order: `(fingerprint,
    /// document id)`, the id `None` for a segment without ids.
    pub fn for_each_entry(self, mut each: impl FnMut(u64, Option<u64>) -> Result<()>) -> Result<()> {
        match self.simplest() {
            Stored::Segment(s) => {
                for e in s.entries() {
                    let (fp, id) = e?;
                    each(fp, id)?;
                }
                Ok(())
            }
            Stored::Snapshot(s) => s.for_each_live(|fp, id| each(fp, Some(id))),
            Stored::Sorted(t) => {
                for (&fp, &id) in t.values[0].iter().zip(&t.ids) {
                    each(fp, Some(id))?;
                }
                Ok(())
            }
        }
    }
}

/// A segment file or an index directory, opened for whole-set jobs and queries.
pub enum Source {
    /// A segment file.
    Segment(Segment),
    /// A snapshot of an index directory opened read-only (a writer may go on meanwhile).
    Snapshot(Snapshot),
}

impl Source {
    /// Opens `path`: a directory as an index, read-only; anything else as a segment file.
    pub fn open(path: impl AsRef<Path>) -> Result<Source> {
        let path = path.as_ref();
        if path.is_dir() {
            Ok(Source::Snapshot(Index::open_read_only(path, IndexOptions::default())?.snapshot()))
        } else {
            Ok(Source::Segment(Segment::open(path)?))
        }
    }

    /// Every stored pair within `options.k` bits of `fingerprint`, as [`Segment::query_into`]
    /// and [`Snapshot::query_into`] answer it.
    pub fn query_into(&self, fingerprint: u64, options: &QueryOptions, out: &mut Vec<Match>) -> Result<()> {
        match self {
            Source::Segment(s) => s.query_into(fingerprint, options, out),
            Source::Snapshot(s) => s.query_into(fingerprint, options, out),
        }
    }
}

/// `(fingerprint, document id)` entries held in memory as the sorted permuted tables of a
/// design, for the same jobs as a segment: an index's unflushed pairs, a corpus being
/// deduplicated.
///
/// The design is the planner's for the entry count and `k`, as a segment's would be; above
/// [`MAX_K`] it is the pigeonhole rule alone: `k + 1` blocks, one table led by each.
pub struct SortedTables {
    pub(crate) designs: Vec<TableDesign>,
    pub(crate) k: u32,
    /// `values[t]`: table `t`'s permuted fingerprints, sorted (table 0 is the identity).
    pub(crate) values: Vec<Vec<u64>>,
    /// The ids in table 0's order.
    pub(crate) ids: Vec<u64>,
}

impl SortedTables {
    /// Tables of `entries` (in any order; repeats are kept) that answer every distance up to
    /// `k`, which must be below 64.
    pub fn new(mut entries: Vec<(u64, u64)>, k: u32) -> Result<Self> {
        let designs = if k <= MAX_K {
            planned_design(&PlanOptions::new(entries.len() as u64, k))?.tables().to_vec()
        } else if k < 64 {
            pigeonhole_tables(k)
        } else {
            return Err(Error::InvalidArgument(format!("k = {k}: at most 63 bits can differ in a pair that tables find")));
        };
        sort_pairs(&mut entries);
        let (table0, ids): (Vec<u64>, Vec<u64>) = entries.into_iter().unzip();
        let mut values = Vec::with_capacity(designs.len());
        for d in &designs[1..] {
            // The bits outside a table's prefix keep their order (as in plan.rs), so its
            // order is table 0's, stably sorted by the permuted prefix alone.
            let mut v: Vec<u64> = table0.iter().map(|&x| d.permutation.apply(x)).collect();
            sort_by_top_bits(&mut v, d.prefix_bits);
            values.push(v);
        }
        values.insert(0, table0);
        Ok(Self { designs, k, values, ids })
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// True when no entry is held.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

/// One table per block of `k + 1` (`k < 64`): the block leads, the other bits follow in
/// their order. Two fingerprints within `k` agree on a whole block.
fn pigeonhole_tables(k: u32) -> Vec<TableDesign> {
    let mut start = 0u32;
    block_widths(64, k + 1)
        .into_iter()
        .map(|width| {
            let block = start..start + width;
            start += width;
            let rest = (0..64).filter(|b| !block.contains(b));
            let order: Vec<u8> = block.clone().chain(rest).map(|b| b as u8).collect();
            let order: [u8; 64] = order.try_into().expect("64 positions");
            TableDesign { permutation: Permutation::from_order(order).expect("a permutation of 0..64"), prefix_bits: width }
        })
        .collect()
}
