//! The merge join under batch queries, near pairs and clusters (paper section 3.3), over the
//! permuted tables of a segment or of [`SortedTables`] in memory.
//!
//! For each table `t`, the queries are permuted by `pi_t` and sorted in memory; the stored
//! table, already sorted, is walked in step with them, one prefix group (entries sharing the
//! table's top `p_t` bits) at a time. Every query-entry pair of a group is checked with a
//! popcount. Memory is the sorted queries (one array the size of Q, permuted in place from
//! table to table) plus one prefix group; a segment's tables are decoded block by block from
//! the page cache and never held.
//!
//! The paper's map tasks build tables over Q and stream F once instead. That needs one
//! permuted copy of Q per table (t times the memory) and random probes into them; the merge
//! join needs one copy, probes nothing and streams each stored table once, which on two
//! cores is the faster of the two (see `benches/RESULTS.md`).
//!
//! A pair within distance `k` shares its prefix in at least one table and often in several.
//! It is reported only by the first such table: permutations are linear over XOR, so the
//! pair shares table `j`'s prefix exactly when `a ^ b` has no bit in table `j`'s prefix
//! positions, which is one AND per earlier table. Work is split between threads by ranges
//! of prefixes, balanced by block count (by entry count in memory).
//!
//! The joins hand their pairs to a [`SharedSorter`], which sorts them, each once, and spills
//! sorted runs to disk past its memory budget; the caller reads them back in order.

use crate::error::{Error, Result};
use crate::interpolation::lower_bound;
use crate::plan::{ProbePlan, TableDesign, MAX_K};
use crate::segment::Segment;
use crate::sort::{take_u64, Collector, Record, SharedSorter};
use crate::stored::SortedTables;

/// Prefixes `[lo, hi)` of one table, as a thread's share of the work (`hi == u64::MAX`: up
/// to the last prefix, for 64-bit prefixes).
type PrefixRange = (u64, u64);

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
        let p = self.designs()[t].prefix_bits;
        let mut buf: Vec<u64> = Vec::new();
        let mut current = u64::MAX;
        self.for_each_entry(t, range, |v| {
            let pv = prefix(v, p);
            if pv != current {
                if !buf.is_empty() {
                    group(current, &buf);
                    buf.clear();
                }
                current = pv;
            }
            buf.push(v);
            true
        })?;
        if !buf.is_empty() {
            group(current, &buf);
        }
        Ok(())
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

/// Most (variant, query) pairs held at once by a multi-probe join: the queries are taken in
/// chunks of at most this many variants (16 bytes each).
const MAX_VARIANTS_HELD: usize = 1 << 22;

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

/// Hands `make(query, entry)` (in original bit order) to `sink` for every `(query, entry)`
/// pair within `k` between `queries` and the entries of `tables` (an entry stored under
/// several ids, or found by several variants, may be handed over more than once: the
/// sorter keeps each record once).
///
/// Peak memory: one sorted copy of the queries and the sorter's budget; the tables are walked.
pub(crate) fn join<T: Record>(tables: &impl Tables, queries: &[u64], k: u32, threads: usize, sink: &SharedSorter<T>, make: fn(u64, u64) -> Option<T>) -> Result<()> {
    check_k(tables, k)?;
    if k > tables.k() {
        return join_probing(tables, queries, k, threads, sink, make);
    }
    let designs = tables.designs();
    let mut sorted: Vec<u64> = queries.to_vec();
    let mut current = 0usize;
    for t in 0..designs.len() {
        // Re-permute the queries in place from the previous table's order to this one's.
        let (from, to) = (&designs[current].permutation, &designs[t].permutation);
        for q in sorted.iter_mut() {
            *q = to.apply(from.invert(*q));
        }
        current = t;
        crate::sort::sort_u64_in_place(&mut sorted, threads);
        sorted.dedup();
        let qs = &sorted;
        in_parallel(tables, t, threads, |range| {
            let mut out = sink.collector();
            join_range(tables, t, range, qs, k, &mut out, make)?;
            out.finish()
        })?;
    }
    Ok(())
}

/// [`join`] for a `k` above the tables' own: each table is walked with the queries' prefix
/// variants of a [`ProbePlan`] (every variant an extra query that is compared with the
/// original at distance `k`), in chunks of at most [`MAX_VARIANTS_HELD`] variants.
fn join_probing<T: Record>(tables: &impl Tables, queries: &[u64], k: u32, threads: usize, sink: &SharedSorter<T>, make: fn(u64, u64) -> Option<T>) -> Result<()> {
    let designs = tables.designs();
    let plan = ProbePlan::for_tables(designs, tables.k(), None, k, tables.entries())?;
    for (t, probes) in plan.tables().iter().enumerate() {
        let perm = &designs[t].permutation;
        let per_chunk = (MAX_VARIANTS_HELD / probes.flips.len().max(1)).max(1);
        for chunk in queries.chunks(per_chunk) {
            // (permuted variant, permuted query), sorted by variant.
            let mut variants: Vec<(u64, u64)> = chunk
                .iter()
                .flat_map(|&q| {
                    let pq = perm.apply(q);
                    probes.flips.iter().map(move |&f| (pq ^ f, pq))
                })
                .collect();
            variants.sort_unstable();
            variants.dedup();
            let vs = &variants;
            in_parallel(tables, t, threads, |range| {
                let mut out = sink.collector();
                variant_join_range(tables, t, range, vs, probes.probe_bits, k, &mut out, make)?;
                out.finish()
            })?;
        }
    }
    Ok(())
}

/// The multi-probe join of table `t` over `range`: each prefix group meets the variants
/// sharing its top `bits` bits (`bits` at most the table's prefix, so several consecutive
/// groups can meet the same variants); pushes `(query, entry)` pairs in original bit order.
#[allow(clippy::too_many_arguments)]
fn variant_join_range<T: Record>(
    tables: &impl Tables,
    t: usize,
    range: PrefixRange,
    variants: &[(u64, u64)],
    bits: u32,
    k: u32,
    out: &mut Collector<'_, T>,
    make: fn(u64, u64) -> Option<T>,
) -> Result<()> {
    let design = &tables.designs()[t];
    let (p, perm) = (design.prefix_bits, &design.permutation);
    let mut vi = 0usize;
    tables.for_each_group(t, range, |pv, entries| {
        let top = if bits == 0 { 0 } else { pv >> (p - bits) };
        while vi < variants.len() && prefix(variants[vi].0, bits) < top {
            vi += 1;
        }
        for &(_, q) in variants[vi..].iter().take_while(|v| prefix(v.0, bits) == top) {
            cross_pairs(&[q], entries, k, &mut |q, v| {
                if let Some(x) = make(perm.invert(q), perm.invert(v)) {
                    out.push(x);
                }
            });
        }
    })
}

/// Hands every pair of distinct entries of `tables` within `k` of each other to `sink` as
/// `(a, b)` with `a < b`.
pub(crate) fn self_join(tables: &impl Tables, k: u32, threads: usize, sink: &SharedSorter<(u64, u64)>) -> Result<()> {
    check_k(tables, k)?;
    if k > tables.k() {
        // Above the tables' k: the join of every stored fingerprint with the tables.
        let fps = tables.fingerprints()?;
        return join_probing(tables, &fps, k, threads, sink, near_pair);
    }
    for t in 0..tables.designs().len() {
        in_parallel(tables, t, threads, |range| {
            let mut out = sink.collector();
            self_join_range(tables, t, range, k, &mut out)?;
            out.finish()
        })?;
    }
    Ok(())
}

/// The prefix value of a permuted entry in a table with `p` prefix bits (0 when `p = 0`).
#[inline]
fn prefix(v: u64, p: u32) -> u64 {
    if p == 0 {
        0
    } else {
        v >> (64 - p)
    }
}

/// Splits table `t`'s prefixes into `threads` ranges holding about equal numbers of marks
/// and runs `work` on each in its own thread; the first error.
fn in_parallel(tables: &impl Tables, t: usize, threads: usize, work: impl Fn(PrefixRange) -> Result<()> + Sync) -> Result<()> {
    let p = tables.designs()[t].prefix_bits;
    let marks = tables.marks(t);
    let end = if p == 0 {
        1
    } else if p == 64 {
        u64::MAX
    } else {
        1u64 << p
    };
    let parts = threads.max(1).min(marks.len().max(1));
    let mut bounds = vec![0u64];
    for i in 1..parts {
        let key = marks[(marks.len() * i) / parts];
        let b = prefix(key, p).max(*bounds.last().expect("non-empty"));
        bounds.push(b);
    }
    bounds.push(end);
    let ranges: Vec<PrefixRange> = bounds.windows(2).map(|w| (w[0], w[1])).filter(|r| r.0 < r.1 || r.1 == u64::MAX).collect();
    let results: Vec<Result<()>> = std::thread::scope(|s| {
        let work = &work;
        let handles: Vec<_> = ranges.iter().map(|&r| s.spawn(move || work(r))).collect();
        handles.into_iter().map(|h| h.join().expect("join worker panicked")).collect()
    });
    results.into_iter().collect()
}

/// Original-bit masks of the prefixes of tables `0..t`.
fn earlier_prefixes(tables: &impl Tables, t: usize) -> Vec<u64> {
    tables.designs()[..t].iter().map(|d| d.permutation.invert(d.prefix_mask())).collect()
}

/// The batch join of table `t` over `range`: pushes `make(query, entry)` in original bit
/// order. Each prefix group meets the queries of its prefix (prefix groups hold a hundred
/// entries or more and about one query per ten entries: a small cross product, vectorized).
fn join_range<T: Record>(tables: &impl Tables, t: usize, range: PrefixRange, queries: &[u64], k: u32, out: &mut Collector<'_, T>, make: fn(u64, u64) -> Option<T>) -> Result<()> {
    let design = &tables.designs()[t];
    let p = design.prefix_bits;
    let perm = &design.permutation;
    let earlier = earlier_prefixes(tables, t);
    // The queries of this range only.
    let from = queries.partition_point(|&q| prefix(q, p) < range.0);
    let to = if range.1 == u64::MAX { queries.len() } else { queries.partition_point(|&q| prefix(q, p) < range.1) };
    let queries = queries.get(from..to.max(from)).unwrap_or_default();
    if queries.is_empty() {
        return Ok(());
    }
    let mut qi = 0usize;
    tables.for_each_group(t, range, |pv, entries| {
        // Queries are sorted by the same permutation: advance to this group's queries.
        while qi < queries.len() && prefix(queries[qi], p) < pv {
            qi += 1;
        }
        let qs = &queries[qi..];
        let n = qs.iter().take_while(|&&q| prefix(q, p) == pv).count();
        if n == 0 {
            return;
        }
        cross_pairs(&qs[..n], entries, k, &mut |q, v| {
            if earlier.iter().all(|&m| perm.invert(q ^ v) & m != 0) {
                if let Some(x) = make(perm.invert(q), perm.invert(v)) {
                    out.push(x);
                }
            }
        });
    })
}

/// The self-join of table `t` over `range`: pushes pairs of distinct entries as `(a, b)`,
/// `a < b`.
fn self_join_range(tables: &impl Tables, t: usize, range: PrefixRange, k: u32, out: &mut Collector<'_, (u64, u64)>) -> Result<()> {
    let perm = &tables.designs()[t].permutation;
    let earlier = earlier_prefixes(tables, t);
    let mut distinct: Vec<u64> = Vec::new();
    tables.for_each_group(t, range, |_, entries| {
        distinct.clear();
        distinct.extend_from_slice(entries);
        distinct.dedup();
        for (i, &a) in distinct.iter().enumerate() {
            cross_pairs(&[a], &distinct[i + 1..], k, &mut |a, b| {
                if earlier.iter().all(|&m| perm.invert(a ^ b) & m != 0) {
                    if let Some(pair) = near_pair(perm.invert(a), perm.invert(b)) {
                        out.push(pair);
                    }
                }
            });
        }
    })
}

/// Calls `hit(a, b)` for every `a` of `xs` and `b` of `ys` within distance `k`: the inner
/// loop of both joins, compiled for the widest population count the CPU has (AVX-512
/// VPOPCNTQ checks eight pairs per instruction, POPCNT one).
fn cross_pairs(xs: &[u64], ys: &[u64], k: u32, hit: &mut dyn FnMut(u64, u64)) {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::cpu::has_avx512_popcnt() {
            // SAFETY: `cross_pairs_avx512` needs AVX-512F/VL/BW and VPOPCNTDQ, all just
            // confirmed by `has_avx512_popcnt`. Exercised by every batch test on such CPUs
            // against the brute-force oracle in tests/it/batch.rs.
            unsafe { cross_pairs_avx512(xs, ys, k, hit) };
            return;
        }
        if crate::cpu::has_bmi2_popcnt() {
            // SAFETY: `cross_pairs_popcnt` needs only BMI1/2 and POPCNT, just confirmed by
            // `has_bmi2_popcnt`; tested as above.
            unsafe { cross_pairs_popcnt(xs, ys, k, hit) };
            return;
        }
    }
    cross_pairs_portable(xs, ys, k, hit);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512vpopcntdq,bmi1,bmi2,popcnt")]
fn cross_pairs_avx512(xs: &[u64], ys: &[u64], k: u32, hit: &mut dyn FnMut(u64, u64)) {
    cross_pairs_portable(xs, ys, k, hit);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "bmi1,bmi2,popcnt")]
fn cross_pairs_popcnt(xs: &[u64], ys: &[u64], k: u32, hit: &mut dyn FnMut(u64, u64)) {
    cross_pairs_portable(xs, ys, k, hit);
}

/// Most `x` have no `y` within `k` (a batch query meets a prefix group of a hundred or more
/// entries and matches about one of them in all the tables): the smallest distance from `x`
/// to the group is a plain minimum reduction, which compilers vectorize (XOR, population
/// count and minimum, lane by lane; one horizontal step per `x`), and only an `x` within
/// `k` of something is walked again to report its pairs.
#[inline(always)]
fn cross_pairs_portable(xs: &[u64], ys: &[u64], k: u32, hit: &mut dyn FnMut(u64, u64)) {
    for &x in xs {
        let nearest = ys.iter().fold(u64::MAX, |m, &y| m.min(u64::from((x ^ y).count_ones())));
        if nearest > u64::from(k) {
            continue;
        }
        // Near-duplicate queries pass in most tables: find their pairs eight entries at a
        // time the same way, looking at single entries only in a chunk within `k`.
        for chunk in ys.chunks(8) {
            let nearest = chunk.iter().fold(u64::MAX, |m, &y| m.min(u64::from((x ^ y).count_ones())));
            if nearest > u64::from(k) {
                continue;
            }
            for &y in chunk {
                if (x ^ y).count_ones() <= k {
                    hit(x, y);
                }
            }
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kernel this CPU runs (AVX-512 or POPCNT, and the portable one) finds exactly
    /// the pairs a plain double loop finds, remainders of the 8-lane chunks included.
    #[test]
    fn cross_pairs_equals_a_double_loop() {
        let mut x = 0x5eed_u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let base = next();
        for (nx, ny) in [(0usize, 5usize), (1, 0), (3, 7), (5, 8), (15, 153), (40, 17)] {
            // near copies of one value, so that every k finds some pairs and misses others
            let xs: Vec<u64> = (0..nx).map(|i| base ^ (next() & next() & next()) ^ (i as u64)).collect();
            let ys: Vec<u64> = (0..ny).map(|_| base ^ (next() & next() & next())).collect();
            for k in [0, 3, 8, 20, 64] {
                let want: Vec<(u64, u64)> = xs.iter().flat_map(|&a| ys.iter().filter(move |&&b| (a ^ b).count_ones() <= k).map(move |&b| (a, b))).collect();
                let mut got = Vec::new();
                cross_pairs(&xs, &ys, k, &mut |a, b| got.push((a, b)));
                assert_eq!(got, want, "{nx} x {ny}, k = {k}");
                let mut portable = Vec::new();
                cross_pairs_portable(&xs, &ys, k, &mut |a, b| portable.push((a, b)));
                assert_eq!(portable, want, "{nx} x {ny}, k = {k}");
            }
        }
    }
}
