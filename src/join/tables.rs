//! What a merge join walks: the [`Tables`] trait over sorted permuted tables (a segment's,
//! [`SortedTables`] in memory, or a [`Part`] of either), and the [`IdMap`] that gives the
//! document ids of matched fingerprints.

// Indexing: the joins' hot loops index sorted in-memory arrays by positions from their own searches and range bounds; no index comes from file bytes (blocks are decoded by codec/, which denies it).
#![allow(clippy::indexing_slicing)]
use crate::error::{Error, Result};
use crate::interpolation::lower_bound;
use crate::plan::{TableDesign, MAX_K};
use crate::segment::Segment;
use crate::stored::SortedTables;

/// Prefixes `[lo, hi)` of one table, as a thread's share of the work (`hi == u64::MAX`: up
/// to the last prefix, for 64-bit prefixes).
pub(super) type PrefixRange = (u64, u64);

/// Sorted permuted tables that a merge join walks.
pub(crate) trait Tables: Sync {
    /// The tables' permutations and prefix lengths, table 0 (the identity) first.
    fn designs(&self) -> &[TableDesign];

    /// The largest distance the tables answer.
    fn k(&self) -> u32;

    /// Sorted values spread evenly over table `t`, where its work can be cut between
    /// threads: a segment's block keys, an in-memory table's entries.
    fn marks(&self, t: usize) -> &[u64];

    /// Calls `visit` with each entry of table `t` in `range` (permuted, sorted, duplicates
    /// kept) until it returns false.
    fn for_each_entry(&self, t: usize, range: PrefixRange, visit: impl FnMut(u64) -> bool) -> Result<()>;

    /// Calls `group` with each prefix group of table `t` in `range`: the group's prefix and
    /// its entries (permuted, sorted, duplicates kept), one group at a time.
    fn for_each_group(&self, t: usize, range: PrefixRange, mut group: impl FnMut(u64, &[u64])) -> Result<()> {
        let mut groups = Groups::new(self.designs()[t].prefix_bits);
        self.for_each_entry(t, range, |v| {
            groups.push(v, &mut group);
            true
        })?;
        groups.finish(&mut group);
        Ok(())
    }

    /// The prefix groups of table `t` whose prefix is in `wanted` (sorted, distinct, within
    /// `range`): `group` gets each one's position in `wanted` and its entries (permuted,
    /// sorted, duplicates kept), each group whole and once, in no set order (a wanted prefix
    /// with no entries is not passed). A segment decodes only the blocks holding a wanted
    /// group, so a batch small against a table reads the blocks its queries land in.
    fn for_each_wanted_group(&self, t: usize, range: PrefixRange, wanted: &[u64], group: impl FnMut(usize, &[u64])) -> Result<()> {
        self.for_each_group(t, range, only_wanted(wanted, group))
    }

    /// True when the entries have document ids.
    fn has_ids(&self) -> bool;

    /// The document ids of `fps` (sorted, distinct).
    fn id_map(&self, fps: Vec<u64>) -> Result<IdMap>;

    /// Entries held (repeats counted).
    fn entries(&self) -> u64;

    /// The distinct fingerprints held, sorted.
    fn fingerprints(&self) -> Result<Vec<u64>>;
}

impl Tables for Segment {
    fn entries(&self) -> u64 {
        self.len()
    }

    fn fingerprints(&self) -> Result<Vec<u64>> {
        let mut fps = self.table_entries(0).collect::<Result<Vec<u64>>>()?;
        fps.dedup();
        Ok(fps)
    }

    fn designs(&self) -> &[TableDesign] {
        self.design().tables()
    }

    fn k(&self) -> u32 {
        self.design().k()
    }

    fn marks(&self, t: usize) -> &[u64] {
        // Only cut points between threads (made monotone by `in_parallel`): unchecked keys
        // can unbalance the work, never change an answer.
        self.tables()[t].raw_keys()
    }

    fn for_each_entry(&self, t: usize, range: PrefixRange, mut visit: impl FnMut(u64) -> bool) -> Result<()> {
        let table = &self.tables()[t];
        let p = table.design().prefix_bits;
        let start = if p == 0 { 0 } else { range.0 << (64 - p) };
        let mut b = table.lower_bound(start)?;
        let mut done = false;
        while b < table.block_count() && !done {
            self.visit_block(t, b, |v| {
                let pv = prefix(v, p);
                if pv < range.0 {
                    return true;
                }
                if (pv >= range.1 && range.1 != u64::MAX) || !visit(v) {
                    done = true;
                    return false;
                }
                true
            })?;
            b += 1;
        }
        Ok(())
    }

    fn for_each_wanted_group(&self, t: usize, range: PrefixRange, wanted: &[u64], group: impl FnMut(usize, &[u64])) -> Result<()> {
        let p = self.tables()[t].design().prefix_bits;
        if p == 0 || p == 64 {
            return self.for_each_group(t, range, only_wanted(wanted, group));
        }
        // only the wanted groups, sought block by block (`wanted` lies within `range`)
        self.for_each_wanted_prefix(t, wanted, group)
    }

    fn has_ids(&self) -> bool {
        Segment::has_ids(self)
    }

    fn id_map(&self, fps: Vec<u64>) -> Result<IdMap> {
        let mut starts = Vec::with_capacity(fps.len() + 1);
        let mut ids = Vec::with_capacity(fps.len());
        // Walk table 0 (the identity, ids in its order) over the blocks holding them.
        let table = &self.tables()[0];
        let mut i = 0usize;
        let mut b = 0u64;
        while i < fps.len() && b < table.block_count() {
            b = b.max(table.lower_bound(fps[i])?);
            if b >= table.block_count() {
                break;
            }
            let mut ordinal = table.first_ordinal(b);
            let mut hits: Vec<(usize, u64)> = Vec::new();
            self.visit_block(0, b, |v| {
                while i < fps.len() && fps[i] < v {
                    i += 1;
                }
                if i < fps.len() && fps[i] == v {
                    hits.push((i, ordinal));
                }
                ordinal += 1;
                true
            })?;
            for (j, ordinal) in hits {
                while starts.len() <= j {
                    starts.push(ids.len() as u32);
                }
                ids.push(self.doc_id(ordinal)?);
            }
            // The last fingerprint of this block may continue in the next one.
            b += 1;
        }
        while starts.len() <= fps.len() {
            starts.push(ids.len() as u32);
        }
        Ok(IdMap { fps, starts, ids })
    }
}

impl Tables for SortedTables {
    fn entries(&self) -> u64 {
        self.len() as u64
    }

    fn fingerprints(&self) -> Result<Vec<u64>> {
        let mut fps = self.values[0].clone();
        fps.dedup();
        Ok(fps)
    }

    fn designs(&self) -> &[TableDesign] {
        &self.designs
    }

    fn k(&self) -> u32 {
        self.k
    }

    fn marks(&self, t: usize) -> &[u64] {
        &self.values[t]
    }

    fn for_each_entry(&self, t: usize, range: PrefixRange, mut visit: impl FnMut(u64) -> bool) -> Result<()> {
        let values = &self.values[t];
        let p = self.designs[t].prefix_bits;
        let from = lower_bound(values, if p == 0 { 0 } else { range.0 << (64 - p) });
        for &v in &values[from..] {
            if (prefix(v, p) >= range.1 && range.1 != u64::MAX) || !visit(v) {
                break;
            }
        }
        Ok(())
    }

    fn for_each_group(&self, t: usize, range: PrefixRange, mut group: impl FnMut(u64, &[u64])) -> Result<()> {
        let values = &self.values[t];
        let p = self.designs[t].prefix_bits;
        let mut i = lower_bound(values, if p == 0 { 0 } else { range.0 << (64 - p) });
        while i < values.len() {
            let pv = prefix(values[i], p);
            if pv >= range.1 && range.1 != u64::MAX {
                break;
            }
            let end = i + values[i..].partition_point(|&v| prefix(v, p) == pv);
            group(pv, &values[i..end]);
            i = end;
        }
        Ok(())
    }

    fn has_ids(&self) -> bool {
        true
    }

    fn id_map(&self, fps: Vec<u64>) -> Result<IdMap> {
        let table0 = &self.values[0];
        let mut starts = Vec::with_capacity(fps.len() + 1);
        let mut ids = Vec::with_capacity(fps.len());
        for &fp in &fps {
            starts.push(ids.len() as u32);
            let from = lower_bound(table0, fp);
            ids.extend(table0[from..].iter().zip(&self.ids[from..]).take_while(|(&v, _)| v == fp).map(|(_, &id)| id));
        }
        starts.push(ids.len() as u32);
        Ok(IdMap { fps, starts, ids })
    }
}

/// One part of a snapshot: a live segment, or its unflushed pairs in memory.
pub(crate) enum Part<'a> {
    Segment(&'a Segment),
    Sorted(&'a SortedTables),
}

impl Part<'_> {
    /// Entries held.
    pub(crate) fn len(&self) -> u64 {
        match self {
            Part::Segment(s) => s.len(),
            Part::Sorted(t) => t.len() as u64,
        }
    }
}

impl Tables for Part<'_> {
    fn entries(&self) -> u64 {
        self.len()
    }

    fn fingerprints(&self) -> Result<Vec<u64>> {
        match self {
            Part::Segment(s) => s.fingerprints(),
            Part::Sorted(t) => t.fingerprints(),
        }
    }

    fn designs(&self) -> &[TableDesign] {
        match self {
            Part::Segment(s) => s.designs(),
            Part::Sorted(t) => t.designs(),
        }
    }

    fn k(&self) -> u32 {
        match self {
            Part::Segment(s) => Tables::k(*s),
            Part::Sorted(t) => t.k(),
        }
    }

    fn marks(&self, t: usize) -> &[u64] {
        match self {
            Part::Segment(s) => s.marks(t),
            Part::Sorted(m) => m.marks(t),
        }
    }

    fn for_each_entry(&self, t: usize, range: PrefixRange, visit: impl FnMut(u64) -> bool) -> Result<()> {
        match self {
            Part::Segment(s) => s.for_each_entry(t, range, visit),
            Part::Sorted(m) => m.for_each_entry(t, range, visit),
        }
    }

    fn for_each_group(&self, t: usize, range: PrefixRange, group: impl FnMut(u64, &[u64])) -> Result<()> {
        match self {
            Part::Segment(s) => s.for_each_group(t, range, group),
            Part::Sorted(m) => m.for_each_group(t, range, group),
        }
    }

    fn for_each_wanted_group(&self, t: usize, range: PrefixRange, wanted: &[u64], group: impl FnMut(usize, &[u64])) -> Result<()> {
        match self {
            Part::Segment(s) => s.for_each_wanted_group(t, range, wanted, group),
            Part::Sorted(m) => m.for_each_wanted_group(t, range, wanted, group),
        }
    }

    fn has_ids(&self) -> bool {
        match self {
            Part::Segment(s) => Tables::has_ids(*s),
            Part::Sorted(t) => t.has_ids(),
        }
    }

    fn id_map(&self, fps: Vec<u64>) -> Result<IdMap> {
        match self {
            Part::Segment(s) => s.id_map(fps),
            Part::Sorted(t) => t.id_map(fps),
        }
    }
}

/// Refuses a distance the tables cannot answer exactly (above their `k` and [`MAX_K`]).
pub(crate) fn check_k(tables: &impl Tables, k: u32) -> Result<()> {
    if k > tables.k().max(MAX_K) {
        return Err(Error::KTooLarge { requested: k, design_k: tables.k() });
    }
    Ok(())
}

/// The document ids of matched fingerprints: sorted distinct fingerprints, and for each
/// the range of its ids in one flat array (20 bytes per fingerprint with one id).
pub(crate) struct IdMap {
    fps: Vec<u64>,
    starts: Vec<u32>,
    ids: Vec<u64>,
}

impl IdMap {
    /// The ids of `fp` (empty for a fingerprint not asked for).
    pub(crate) fn ids(&self, fp: u64) -> &[u64] {
        match self.fps.binary_search(&fp) {
            Ok(i) => &self.ids[self.starts[i] as usize..self.starts[i + 1] as usize],
            Err(_) => &[],
        }
    }
}

/// `group` of the wanted groups among groups passed in prefix order: each wanted one with its
/// position in `wanted` (sorted, distinct).
fn only_wanted<'w>(wanted: &'w [u64], mut group: impl FnMut(usize, &[u64]) + 'w) -> impl FnMut(u64, &[u64]) + 'w {
    let mut wi = 0usize;
    move |pv, entries| {
        while wi < wanted.len() && wanted[wi] < pv {
            wi += 1;
        }
        if wi < wanted.len() && wanted[wi] == pv {
            group(wi, entries);
        }
    }
}

/// Sorted entries cut into prefix groups: each group is handed over when an entry of
/// another prefix arrives, the last one by [`Groups::finish`].
struct Groups {
    p: u32,
    current: u64,
    buf: Vec<u64>,
}

impl Groups {
    fn new(p: u32) -> Self {
        Groups { p, current: u64::MAX, buf: Vec::new() }
    }

    #[inline]
    fn push(&mut self, v: u64, group: &mut impl FnMut(u64, &[u64])) {
        let pv = prefix(v, self.p);
        if pv != self.current {
            self.finish(group);
            self.current = pv;
        }
        self.buf.push(v);
    }

    fn finish(&mut self, group: &mut impl FnMut(u64, &[u64])) {
        if !self.buf.is_empty() {
            group(self.current, &self.buf);
            self.buf.clear();
        }
    }
}

/// The prefix value of a permuted entry in a table with `p` prefix bits (0 when `p = 0`).
#[inline]
pub(super) fn prefix(v: u64, p: u32) -> u64 {
    if p == 0 {
        0
    } else {
        v >> (64 - p)
    }
}
