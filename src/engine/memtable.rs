//! The memtable: operations that are in the log but not yet in a segment, indexed in memory
//! so that a query sees a write made a moment earlier.
//!
//! Inserts land in a small unsorted tail (scanned linearly). A full tail is sorted into a
//! *run*: the entries sorted by `(fingerprint, id, seq)` (table 0 of the design, the
//! identity) plus one sorted array of permuted fingerprints per further table, so a query
//! probes a run the way it probes a segment, by prefix ranges (found by interpolation
//! search: permuted fingerprints are close to uniform, and a binary search over a large
//! run would miss the cache at every step). Runs of similar size merge
//! (linear merges: every run has the same design), so there are O(log n) of them.
//! Deletes are a map from `(fingerprint, id)` to the sequence number of the last delete.
//! The inserts under a document id are found by scanning the tail and, in each run, an
//! array sorted by id that the first such lookup builds (and run merges keep), so writers
//! that never look ids up pay nothing for it.
//! In an index that stores sketches, each insert's sketch sits in an arena indexed by its
//! sequence number (all zero: the insert carried none), and the sealed inserts' sketches are
//! found by band through `mem_bands` (one chained hash table a band over the arena).
//!
//! Only one thread writes a memtable (the engine's writer, under its lock); queries take a
//! read lock. Merges are computed under the read lock and swapped in under the write lock,
//! so queries wait only for the swap. The memtable knows nothing of files.

// Indexing: sorted in-memory runs indexed by positions from their own binary searches, on the write and query hot paths; nothing here reads file bytes.
#![allow(clippy::indexing_slicing)]
use crate::query::Entry;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::mem_bands::MemBands;
use super::tombstone::Tombstone;
use crate::interpolation::{lower_bound, lower_bound_by};
use crate::plan::Design;
use crate::query::Match;
use crate::sort::sort_u64;

/// Inserts gathered before the tail is sorted into a run.
const TAIL: usize = 1024;

/// One insert.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct MemEntry {
    pub fp: u64,
    pub id: u64,
    pub seq: u64,
}

/// A sorted, indexed group of inserts.
pub(crate) struct Run {
    /// Sorted by `(fp, id, seq)`: table 0 of the design.
    pub entries: Vec<MemEntry>,
    /// `tables[i]`: table `i + 1`'s permuted fingerprints, sorted.
    pub tables: Vec<Vec<u64>>,
    /// `(id, fingerprint, seq)` of every entry, sorted: built by the first lookup by id.
    by_id: OnceLock<Vec<(u64, u64, u64)>>,
}

/// The memtable's sketch arena, as the tail's band check reads it.
#[derive(Clone, Copy)]
struct BandSource<'a> {
    sketches: &'a [u8],
    base: u64,
    width: usize,
    bands: u32,
}

impl<'a> BandSource<'a> {
    fn of(d: &'a MemData, width: usize) -> Option<BandSource<'a>> {
        let bands = crate::bands::BandDesign::for_segment(1, width)?.bands;
        Some(BandSource { sketches: &d.sketches, base: d.sketch_base?, width, bands })
    }

    /// The band keys of `e`'s sketch (`None`: it has none, or its offset is not a u32).
    fn keys(&self, e: &MemEntry) -> Option<(u64, &'a [u8])> {
        let off = e.seq.checked_sub(self.base)?;
        let at = usize::try_from(off).ok()?.checked_mul(self.width)?;
        let sketch = self.sketches.get(at..at + self.width).filter(|s| !crate::bands::is_empty_sketch(s))?;
        u32::try_from(off).is_ok().then_some((off, sketch))
    }
}

impl Run {
    /// The sorted tables of `entries` with `design`.
    pub(crate) fn build(mut entries: Vec<MemEntry>, design: &Design) -> Run {
        entries.sort_unstable();
        let tables = design.tables()[1..]
            .iter()
            .map(|t| {
                let mut v: Vec<u64> = entries.iter().map(|e| t.permutation.apply(e.fp)).collect();
                sort_u64(&mut v);
                v
            })
            .collect();
        Run { entries, tables, by_id: OnceLock::new() }
    }

    fn merge(a: &Run, b: &Run) -> Run {
        let by_id = OnceLock::new();
        if let (Some(x), Some(y)) = (a.by_id.get(), b.by_id.get()) {
            let _ = by_id.set(merge_sorted(x, y));
        }
        Run { entries: merge_sorted(&a.entries, &b.entries), tables: a.tables.iter().zip(&b.tables).map(|(x, y)| merge_sorted(x, y)).collect(), by_id }
    }

    /// The run's entries stored under document id `id`.
    fn entries_of(&self, id: u64, out: &mut Vec<MemEntry>) {
        let by_id = self.by_id.get_or_init(|| {
            let mut v: Vec<(u64, u64, u64)> = self.entries.iter().map(|e| (e.id, e.fp, e.seq)).collect();
            v.sort_unstable();
            v
        });
        let start = by_id.partition_point(|e| e.0 < id);
        out.extend(by_id[start..].iter().take_while(|e| e.0 == id).map(|&(id, fp, seq)| MemEntry { fp, id, seq }));
    }

    fn query(&self, design: &Design, q: u64, k: u32, out: &mut Vec<(Match, u64)>, scratch: &mut Vec<u64>) {
        scratch.clear();
        for (t, table) in design.tables().iter().enumerate() {
            let pq = table.permutation.apply(q);
            let mask = table.prefix_mask();
            let (lo, hi) = (pq & mask, pq | !mask);
            if t == 0 {
                let start = lower_bound_by(&self.entries, lo, |e| e.fp);
                for e in self.entries[start..].iter().take_while(|e| e.fp <= hi) {
                    if (e.fp ^ q).count_ones() <= k {
                        out.push(entry_match(e, q));
                    }
                }
            } else {
                let values = &self.tables[t - 1];
                let start = lower_bound(values, lo);
                for &v in values[start..].iter().take_while(|&&v| v <= hi) {
                    if (v ^ pq).count_ones() <= k {
                        scratch.push(table.permutation.invert(v));
                    }
                }
            }
        }
        scratch.sort_unstable();
        scratch.dedup();
        for &fp in scratch.iter() {
            let start = lower_bound_by(&self.entries, fp, |e| e.fp);
            for e in self.entries[start..].iter().take_while(|e| e.fp == fp) {
                out.push(entry_match(e, q));
            }
        }
    }
}

/// The sketch of the insert with sequence number `seq`, `None` when it carried none.
fn sketch_at(d: &MemData, width: usize, seq: u64) -> Option<&[u8]> {
    let at = (seq.checked_sub(d.sketch_base?)? as usize).checked_mul(width)?;
    d.sketches.get(at..at + width).filter(|s| s.iter().any(|&b| b != 0))
}

fn entry_match(e: &MemEntry, q: u64) -> (Match, u64) {
    (Match::new(e.fp, (e.fp ^ q).count_ones(), Some(e.id)), e.seq)
}

fn merge_sorted<T: Copy + Ord>(a: &[T], b: &[T]) -> Vec<T> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        // Branch-free: the comparison's outcome is data, not control flow.
        let take_b = b[j] < a[i];
        out.push(if take_b { b[j] } else { a[i] });
        j += usize::from(take_b);
        i += usize::from(!take_b);
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

#[derive(Default)]
struct MemData {
    tail: Vec<MemEntry>,
    runs: Vec<Run>,
    deletes: HashMap<(u64, u64), u64>,
    /// Sketches of the inserts, `sketch_width` bytes per sequence number from
    /// `sketch_base` on (deletes and inserts without a sketch hold zeros).
    sketches: Vec<u8>,
    /// The `(fingerprint, id)` of each insert of the sketch arena, by the same offset.
    pairs: Vec<(u64, u64)>,
    sketch_base: Option<u64>,
    /// The sealed inserts' sketches by band (empty until the first sketch).
    bands: MemBands,
    inserts: u64,
    delete_ops: u64,
    seqs: Option<(u64, u64)>,
}

/// Unflushed operations of one log: all of them, or (after a reopen) a piece of a long one
/// (`replay`).
pub(crate) struct Memtable {
    design: Arc<Design>,
    /// Bytes of sketch per insert (0: the index stores no sketches).
    sketch_width: usize,
    /// The log holding this memtable's operations: once the memtable is in a segment, logs
    /// before the next memtable's are obsolete (`flush`).
    pub log_number: u64,
    /// The time slice of its inserts, in an index with an expiry window (`expiry`).
    pub epoch: Option<u64>,
    /// Operations it is expected to hold before it is frozen (its band index is made ready
    /// for them; 0: grown as it fills).
    expected_ops: u64,
    data: RwLock<MemData>,
}

/// A read view of a memtable, held for the length of one query.
pub(crate) struct MemView<'a> {
    design: &'a Design,
    sketch_width: usize,
    data: RwLockReadGuard<'a, MemData>,
}

impl Memtable {
    /// An empty memtable; `sketch_width` bytes of sketch per insert (0 for none).
    pub fn new(design: Arc<Design>, log_number: u64, sketch_width: usize) -> Self {
        Self { design, sketch_width, log_number, epoch: None, expected_ops: 0, data: RwLock::new(MemData::default()) }
    }

    /// The memtable, made ready to hold about `ops` operations.
    pub fn expecting(self, ops: u64) -> Self {
        Self { expected_ops: ops, ..self }
    }

    /// An empty memtable like this one (what an expired memtable looks like to queries).
    pub fn emptied(&self) -> Self {
        Self::new(self.design.clone(), self.log_number, self.sketch_width).with_epoch(self.epoch).expecting(self.expected_ops)
    }

    /// The memtable stamped with the time slice `epoch` (an index with an expiry window).
    pub fn with_epoch(self, epoch: Option<u64>) -> Self {
        Self { epoch, ..self }
    }

    fn read_data(&self) -> RwLockReadGuard<'_, MemData> {
        self.data.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write_data(&self) -> RwLockWriteGuard<'_, MemData> {
        self.data.write().unwrap_or_else(|p| p.into_inner())
    }

    /// A consistent view for queries.
    pub fn view(&self) -> MemView<'_> {
        MemView { design: &self.design, sketch_width: self.sketch_width, data: self.read_data() }
    }

    /// Operations held (inserts and deletes).
    pub fn ops(&self) -> u64 {
        let d = self.read_data();
        d.inserts + d.delete_ops
    }

    /// `(inserts, deletes)` held.
    pub fn counts(&self) -> (u64, u64) {
        let d = self.read_data();
        (d.inserts, d.delete_ops)
    }

    /// First and last sequence number held.
    pub fn seq_range(&self) -> Option<(u64, u64)> {
        self.read_data().seqs
    }

    fn note_seqs(d: &mut MemData, first: u64, n: usize) {
        let last = first + n as u64 - 1;
        d.seqs = Some((d.seqs.map_or(first, |s| s.0), last));
    }

    /// Adds inserts with sequence numbers `seq, seq + 1, ...`, with one sketch each in
    /// `sketches` (the memtable's width each, concatenated) when given. Only the writer
    /// calls this.
    pub fn insert(&self, seq: u64, ops: &[Entry], sketches: Option<&[u8]>) {
        if ops.is_empty() {
            return;
        }
        let seal = {
            let mut d = self.write_data();
            if let Some(sketches) = sketches.filter(|_| self.sketch_width > 0) {
                if d.sketch_base.is_none() {
                    d.bands = MemBands::expecting(crate::bands::BandDesign::for_segment(1, self.sketch_width).map_or(0, |b| b.bands), self.expected_ops as usize);
                    // the arena and its pairs sized for the freeze threshold once (at most
                    // the band index's cap; resident only as they fill), not copied as they double
                    let expected = (self.expected_ops as usize).min(super::mem_bands::MAX_EXPECTED);
                    d.sketches.reserve(expected.saturating_mul(self.sketch_width));
                    d.pairs.reserve(expected);
                }
                let base = *d.sketch_base.get_or_insert(seq);
                let at = (seq.saturating_sub(base) as usize).saturating_mul(self.sketch_width);
                if d.sketches.len() < at {
                    d.sketches.resize(at, 0);
                }
                d.sketches.truncate(at);
                d.sketches.extend_from_slice(sketches);
                d.sketches.resize(at + ops.len() * self.sketch_width, 0);
                let off = at / self.sketch_width;
                d.pairs.resize(off, (0, 0));
                d.pairs.extend(ops.iter().map(|e| (e.fingerprint, e.doc_id)));
            }
            d.tail.extend(ops.iter().enumerate().map(|(i, e)| MemEntry { fp: e.fingerprint, id: e.doc_id, seq: seq + i as u64 }));
            d.inserts += ops.len() as u64;
            Self::note_seqs(&mut d, seq, ops.len());
            d.tail.len() >= TAIL
        };
        if seal {
            self.seal_tail();
        }
    }

    /// Applies a replace with sequence numbers `seq, seq + 1, ...`: the deletes of `deletes`,
    /// then the insert of `insert` (with `sketch`). Only the writer calls this.
    pub fn replace(&self, seq: u64, deletes: &[Entry], insert: Entry, sketch: Option<&[u8]>) {
        self.delete(seq, deletes);
        self.insert(seq + deletes.len() as u64, &[insert], sketch);
    }

    /// Adds deletes with sequence numbers `seq, seq + 1, ...`. Only the writer calls this.
    pub fn delete(&self, seq: u64, ops: &[Entry]) {
        if ops.is_empty() {
            return;
        }
        let mut d = self.write_data();
        for (i, e) in ops.iter().enumerate() {
            d.deletes.insert((e.fingerprint, e.doc_id), seq + i as u64);
        }
        d.delete_ops += ops.len() as u64;
        Self::note_seqs(&mut d, seq, ops.len());
    }

    /// Sorts the tail into a run and merges runs of similar size. The tail stays visible
    /// until its run replaces it; only the writer changes the memtable, so what was read
    /// under the read lock is still current when the write lock is taken.
    fn seal_tail(&self) {
        // (a band index that must grow is rebuilt here, outside the write lock)
        let (run, grown) = {
            let d = self.read_data();
            (Run::build(d.tail.clone(), &self.design), d.bands.grown(&d.sketches, self.sketch_width))
        };
        {
            let mut guard = self.write_data();
            let d = &mut *guard;
            match grown {
                Some(bands) => d.bands = bands,
                None => d.bands.index_to_end(&d.sketches, self.sketch_width),
            }
            d.tail.clear();
            d.runs.push(run);
        }
        loop {
            let merged = {
                let d = self.read_data();
                let n = d.runs.len();
                // A binary counter: merge while the previous run is less than twice the
                // last, so every entry is merged about log2(len / TAIL) times.
                if n < 2 || d.runs[n - 2].entries.len() >= 2 * d.runs[n - 1].entries.len() {
                    break;
                }
                Run::merge(&d.runs[n - 2], &d.runs[n - 1])
            };
            let mut d = self.write_data();
            let n = d.runs.len();
            d.runs.truncate(n - 2);
            d.runs.push(merged);
        }
    }

    /// The memtable as the sorted tables of a segment with the memtable's design, when it
    /// can be written without sorting again: it holds no delete and no repeated pair (the
    /// common case for a crawler). The runs are merged, smallest first.
    pub fn sorted_tables(&self) -> Option<Run> {
        let d = self.read_data();
        if !d.deletes.is_empty() {
            return None;
        }
        // a flush writes the tables, not the bands
        let mut merged = Run::build(d.tail.clone(), &self.design);
        for r in d.runs.iter().rev() {
            merged = Run::merge(&merged, r);
        }
        let repeated = merged.entries.windows(2).any(|w| (w[0].fp, w[0].id) == (w[1].fp, w[1].id));
        (!repeated).then_some(merged)
    }

    /// The design of the memtable's runs.
    pub fn design(&self) -> &Design {
        &self.design
    }

    /// The sketches of `entries`, in order, concatenated (zeros for an insert without one);
    /// empty when the memtable stores no sketches.
    #[cfg(test)]
    pub fn sketches_of<'e>(&self, entries: impl IntoIterator<Item = &'e MemEntry>) -> Vec<u8> {
        self.with_sketches_of(entries, |sketches| sketches.flatten().copied().collect())
    }

    /// Calls `f` with the sketches of `entries`, in order (zeros for an insert without one;
    /// nothing when the memtable stores no sketches), read from the arena in place: a
    /// flush streams them into the segment's column without a copy of the column.
    pub fn with_sketches_of<'e, R>(&self, entries: impl IntoIterator<Item = &'e MemEntry>, f: impl FnOnce(&mut dyn Iterator<Item = &[u8]>) -> R) -> R {
        let d = self.read_data();
        let zeros = vec![0u8; self.sketch_width];
        let width = self.sketch_width;
        let mut sketches = entries.into_iter().filter(|_| width > 0).map(|e| sketch_at(&d, width, e.seq).unwrap_or(&zeros));
        f(&mut sketches)
    }

    /// What a flush writes: the live inserts (one per `(fingerprint, id)` pair, the last,
    /// sorted; a pair whose last operation here is a delete is left out), and the deletes
    /// as tombstones, sorted.
    pub fn flush_output(&self) -> (Vec<MemEntry>, Vec<Tombstone>) {
        let d = self.read_data();
        let mut all: Vec<MemEntry> = Vec::with_capacity(d.inserts as usize);
        for r in &d.runs {
            all.extend_from_slice(&r.entries);
        }
        all.extend_from_slice(&d.tail);
        all.sort_unstable();
        let mut live: Vec<MemEntry> = Vec::with_capacity(all.len());
        for (i, e) in all.iter().enumerate() {
            let last_of_pair = all.get(i + 1).is_none_or(|n| (n.fp, n.id) != (e.fp, e.id));
            if last_of_pair && d.deletes.get(&(e.fp, e.id)).is_none_or(|&s| s < e.seq) {
                live.push(*e);
            }
        }
        let mut tombs: Vec<Tombstone> = d.deletes.iter().map(|(&(fingerprint, doc_id), &seq)| Tombstone { fingerprint, doc_id, seq }).collect();
        tombs.sort_unstable();
        (live, tombs)
    }
}

impl MemView<'_> {
    /// Appends every insert within `k` of `q`, each with its sequence number. A `k` above
    /// the design's scans every entry.
    pub fn query(&self, q: u64, k: u32, out: &mut Vec<(Match, u64)>) {
        if k > self.design.k() {
            out.extend(self.entries().filter(|e| (e.fp ^ q).count_ones() <= k).map(|e| entry_match(e, q)));
            return;
        }
        for e in &self.data.tail {
            if (e.fp ^ q).count_ones() <= k {
                out.push(entry_match(e, q));
            }
        }
        let mut scratch = Vec::new();
        for r in &self.data.runs {
            r.query(self.design, q, k, out, &mut scratch);
        }
    }

    /// The inserts whose sketch shares a band (`crate::bands`) with `sketch`, each once
    /// (unsorted); empty when the memtable stores no sketches.
    pub fn band_candidates(&self, sketch: &[u8]) -> Vec<MemEntry> {
        let Some(src) = BandSource::of(&self.data, self.sketch_width) else { return Vec::new() };
        let shares = |stored: &[u8]| crate::bands::shares_band(sketch, stored, src.bands);
        let mut out: Vec<MemEntry> = self.data.tail.iter().filter(|e| src.keys(e).is_some_and(|(_, s)| shares(s))).copied().collect();
        let mut offsets = Vec::new();
        self.data.bands.candidates(sketch, &self.data.sketches, self.sketch_width, &mut offsets);
        for off in offsets {
            if let Some(&(fp, id)) = self.data.pairs.get(off as usize) {
                out.push(MemEntry { fp, id, seq: src.base + u64::from(off) });
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The sketch of the insert with sequence number `seq` (`None`: it carried none).
    pub fn sketch(&self, seq: u64) -> Option<&[u8]> {
        sketch_at(&self.data, self.sketch_width, seq)
    }

    /// The sketch of the newest insert of `(fp, id)` held here, with that insert's sequence
    /// number; `None` when no insert of the pair is held, `Some((seq, None))` when the
    /// newest carried no sketch.
    pub fn find_sketch(&self, fp: u64, id: u64) -> Option<(u64, Option<&[u8]>)> {
        if self.sketch_width == 0 {
            return None;
        }
        let newest = self
            .data
            .runs
            .iter()
            .flat_map(|r| r.entries[lower_bound_by(&r.entries, fp, |e| e.fp)..].iter().take_while(|e| e.fp == fp))
            .chain(self.data.tail.iter().filter(|e| e.fp == fp))
            .filter(|e| e.id == id)
            .map(|e| e.seq)
            .max()?;
        Some((newest, self.sketch(newest)))
    }

    /// Every insert held under document id `id`, with its sequence number (unsorted).
    pub fn entries_of(&self, id: u64) -> Vec<MemEntry> {
        let mut out: Vec<MemEntry> = self.data.tail.iter().filter(|e| e.id == id).copied().collect();
        for r in &self.data.runs {
            r.entries_of(id, &mut out);
        }
        out
    }

    /// Sequence number of the last delete of `(fp, id)` held here.
    pub fn delete_seq(&self, fp: u64, id: u64) -> Option<u64> {
        self.data.deletes.get(&(fp, id)).copied()
    }

    /// True when the memtable holds deletes.
    pub fn has_deletes(&self) -> bool {
        !self.data.deletes.is_empty()
    }

    /// Every insert held, with its sequence number (unsorted).
    pub fn entries(&self) -> impl Iterator<Item = &MemEntry> + '_ {
        self.data.runs.iter().flat_map(|r| r.entries.iter()).chain(self.data.tail.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(pairs: &[(u64, u64)]) -> Vec<Entry> {
        pairs.iter().map(|&p| Entry::from(p)).collect()
    }

    #[test]
    fn queries_match_a_linear_scan_across_tail_and_runs() {
        let design = Arc::new(Design::new(3, &[4]).unwrap());
        let m = Memtable::new(design, 1, 0);
        let mut x = 5u64;
        let mut all = Vec::new();
        for i in 0..5000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            all.push((x, i));
        }
        for (i, chunk) in all.chunks(333).enumerate() {
            m.insert(1 + (i * 333) as u64, &entries(chunk), None);
        }
        m.delete(10_000, &entries(&[all[17]]));
        let view = m.view();
        for (i, &(fp, _)) in all.iter().enumerate().step_by(101) {
            let q = fp ^ (1 << (i % 64));
            let mut got = Vec::new();
            view.query(q, 3, &mut got);
            let mut got: Vec<u64> = got.iter().map(|(m, _)| m.doc_id.unwrap()).collect();
            got.sort_unstable();
            got.dedup();
            let want: Vec<u64> = all.iter().filter(|(f, _)| (f ^ q).count_ones() <= 3).map(|p| p.1).collect();
            assert_eq!(got, want);
        }
        assert_eq!(view.delete_seq(all[17].0, 17), Some(10_000));
        drop(view);
        let (live, tombs) = m.flush_output();
        assert_eq!(live.len(), 4999);
        assert_eq!(tombs.len(), 1);
    }

    #[test]
    fn the_inserts_under_an_id_are_found_in_the_tail_and_in_every_run() {
        let design = Arc::new(Design::new(3, &[4]).unwrap());
        let m = Memtable::new(design, 1, 0);
        let all: Vec<(u64, u64)> = (0..5000u64).map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15), i % 97)).collect();
        for (i, chunk) in all.chunks(700).enumerate() {
            m.insert(1 + (i * 700) as u64, &entries(chunk), None);
            // looked up between inserts: runs built before and after a lookup merge alike
            let view = m.view();
            let mut got: Vec<u64> = view.entries_of(3).iter().map(|e| e.fp).collect();
            got.sort_unstable();
            let mut want: Vec<u64> = all.iter().take((i + 1) * 700).filter(|p| p.1 == 3).map(|p| p.0).collect();
            want.sort_unstable();
            assert_eq!(got, want, "after {} inserts", (i + 1) * 700);
        }
        let view = m.view();
        for id in [0u64, 50, 96, 97] {
            let mut got: Vec<(u64, u64)> = view.entries_of(id).iter().map(|e| (e.fp, e.seq)).collect();
            got.sort_unstable();
            let mut want: Vec<(u64, u64)> = (1u64..).zip(&all).filter(|(_, p)| p.1 == id).map(|(seq, p)| (p.0, seq)).collect();
            want.sort_unstable();
            assert_eq!(got, want, "id {id}");
        }
    }

    #[test]
    fn sketches_follow_their_inserts_by_sequence_number() {
        let design = Arc::new(Design::new(3, &[4]).unwrap());
        let m = Memtable::new(design, 1, 2);
        // seqs 1..=3 with sketches, 4 a delete, 5 without a sketch, 6..=7 with.
        m.insert(1, &entries(&[(10, 1), (20, 2), (30, 3)]), Some(&[1, 1, 2, 2, 3, 3]));
        m.delete(4, &entries(&[(20, 2)]));
        m.insert(5, &entries(&[(40, 4)]), None);
        m.insert(6, &entries(&[(50, 5), (10, 6)]), Some(&[5, 5, 0, 6]));
        let view = m.view();
        let got: Vec<Option<Vec<u8>>> = (1..=7).map(|s| view.sketch(s).map(<[u8]>::to_vec)).collect();
        assert_eq!(got, vec![Some(vec![1, 1]), Some(vec![2, 2]), Some(vec![3, 3]), None, None, Some(vec![5, 5]), Some(vec![0, 6])]);
        drop(view);
        let (live, _) = m.flush_output();
        assert_eq!(live.iter().map(|e| (e.fp, e.id)).collect::<Vec<_>>(), vec![(10, 1), (10, 6), (30, 3), (40, 4), (50, 5)]);
        assert_eq!(m.sketches_of(&live), vec![1, 1, 0, 6, 3, 3, 0, 0, 5, 5]);
        // Without a width, nothing is kept.
        let plain = Memtable::new(Arc::new(Design::new(3, &[4]).unwrap()), 1, 0);
        plain.insert(1, &entries(&[(1, 1)]), Some(&[9, 9]));
        assert_eq!(plain.view().sketch(1), None);
    }

    #[test]
    fn band_candidates_are_the_inserts_sharing_a_band_in_the_tail_and_the_runs() {
        let design = Arc::new(Design::new(3, &[4]).unwrap());
        let m = Memtable::new(design, 1, 64);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        // bands of 64 values (so many share), some inserts without a sketch, some deletes
        let (mut all, mut seq) = (Vec::new(), 1u64);
        for round in 0..9u64 {
            let n = 300 + 97 * round as usize;
            let pairs: Vec<(u64, u64)> = (0..n).map(|i| (next(), seq + i as u64)).collect();
            let sketches: Vec<u8> = (0..n * 16).flat_map(|_| ((next() % 64) as u32 + 1).to_le_bytes()).collect();
            if round % 4 == 3 {
                m.insert(seq, &entries(&pairs), None);
            } else {
                m.insert(seq, &entries(&pairs), Some(&sketches));
                all.extend(pairs.iter().zip(sketches.chunks_exact(64)).map(|(&(fp, id), s)| (fp, id, s.to_vec())));
            }
            seq += n as u64;
            m.delete(seq, &entries(&[pairs[0]]));
            seq += 1;
        }
        let view = m.view();
        for _ in 0..50 {
            let q: Vec<u8> = (0..16).flat_map(|_| ((next() % 64) as u32 + 1).to_le_bytes()).collect();
            let mut got: Vec<(u64, u64)> = view.band_candidates(&q).iter().map(|e| (e.fp, e.id)).collect();
            got.sort_unstable();
            let mut want: Vec<(u64, u64)> = all.iter().filter(|(_, _, s)| crate::bands::shares_band(&q, s, 16)).map(|&(fp, id, _)| (fp, id)).collect();
            want.sort_unstable();
            assert!(!want.is_empty());
            assert_eq!(got, want);
        }
    }
}
