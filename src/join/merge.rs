//! The merge joins themselves: batch queries against the tables ([`join`], multi-probe for a
//! `k` above the tables' own) and every near pair within the tables ([`self_join`]), each
//! table's prefix ranges split between threads.

// Indexing: the joins' hot loops index the sorted queries and the per-table prefix ranges they computed; no index comes from file bytes.
#![allow(clippy::indexing_slicing)]
use super::cross::cross_pairs;
use super::records::near_pair;
use super::tables::{check_k, prefix, PrefixRange, Tables};
use crate::error::Result;
use crate::plan::ProbePlan;
use crate::sort::{Collector, Record, SharedSorter};

/// Most (variant, query) pairs held at once by a multi-probe join: the queries are taken in
/// chunks of at most this many variants (16 bytes each).
const MAX_VARIANTS_HELD: usize = 1 << 22;

/// Hands `make(query, entry)` (in original bit order) to `sink` for every `(query, entry)`
/// pair within `k` between `queries` and the entries of `tables` (an entry stored under
/// several ids, or found by several variants, may be handed over more than once: the
/// sorter keeps each record once).
///
/// Peak memory: two copies of the queries (sorted, and the buffer they are partitioned
/// through) and the sorter's budget; the tables are walked.
pub(crate) fn join<T: Record>(tables: &impl Tables, queries: &[u64], k: u32, threads: usize, sink: &SharedSorter<T>, make: fn(u64, u64) -> Option<T>) -> Result<()> {
    check_k(tables, k)?;
    if k > tables.k() {
        return join_probing(tables, queries, k, threads, sink, make);
    }
    let designs = tables.designs();
    let mut sorted: Vec<u64> = queries.to_vec();
    let mut scratch: Vec<u64> = Vec::new();
    let mut current = 0usize;
    for t in 0..designs.len() {
        // Re-permute the queries in place from the previous table's order to this one's.
        let (from, to) = (&designs[current].permutation, &designs[t].permutation);
        in_chunks(&mut sorted, threads, |part| {
            for q in part {
                *q = to.apply(from.invert(*q));
            }
        });
        current = t;
        crate::sort::sort_u64_parallel(&mut sorted, &mut scratch, threads);
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

/// Queries at or above which [`in_chunks`] splits its work between threads.
const PARALLEL_FROM: usize = 1 << 16;

/// `work` on consecutive parts of `values`, one per thread (on this thread alone for a few
/// values): the serial re-permutation of a million queries was a tenth of a batch's time.
fn in_chunks(values: &mut [u64], threads: usize, work: impl Fn(&mut [u64]) + Sync) {
    if threads <= 1 || values.len() < PARALLEL_FROM {
        work(values);
        return;
    }
    let work = &work;
    std::thread::scope(|s| {
        for part in values.chunks_mut(values.len().div_ceil(threads)) {
            s.spawn(move || work(part));
        }
    });
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
    // the groups the queries land in (a table large against the batch is read only there),
    // and where each one's queries start
    let mut wanted: Vec<u64> = Vec::new();
    let mut starts: Vec<usize> = Vec::new();
    for (i, &q) in queries.iter().enumerate() {
        if wanted.last() != Some(&prefix(q, p)) {
            wanted.push(prefix(q, p));
            starts.push(i);
        }
    }
    starts.push(queries.len());
    tables.for_each_wanted_group(t, range, &wanted, |wi, entries| {
        let qs = &queries[starts[wi]..starts[wi + 1]];
        cross_pairs(qs, entries, k, &mut |q, v| {
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
