//! Sorting: LSD radix sort of fingerprint arrays, which beats comparison sorts by several
//! times on the large uniform arrays the segment builder sorts once per table; and the
//! external sort under batch queries and near-duplicate pairs ([`SpillSorter`]): records
//! past a memory budget are sorted into run files in a private spill directory and merged
//! back, so a join's results need not fit in memory. Sorted runs and their merge are
//! `runs`', shared with the compaction's resumable sorter.

// Indexing: radix sorts index 256-entry count arrays by a byte and buffers by positions they counted; the hot loop of batch and cluster.
#![allow(clippy::indexing_slicing)]
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::storage::FsStorage;

mod buckets;
mod runs;
pub(crate) use buckets::sort_u64_parallel;
pub(crate) use runs::{read_runs, take_u64, Record, RunMerge, RunWriter};

/// Below this length a comparison sort is faster than setting up the radix passes.
pub(crate) const SMALL: usize = 1 << 12;

/// Sorts `values` ascending.
pub fn sort_u64(values: &mut Vec<u64>) {
    if values.len() < SMALL {
        values.sort_unstable();
        return;
    }
    lsd_by(values, |&v| v, 0, 64, 8);
}

/// Sorts `(fingerprint, id)` pairs ascending (by fingerprint, then id).
pub fn sort_pairs(pairs: &mut Vec<(u64, u64)>) {
    if pairs.len() < SMALL {
        pairs.sort_unstable();
        return;
    }
    // LSD: by id, then stably by fingerprint. Ids usually arrive in order: skip that pass.
    if !pairs.windows(2).all(|w| w[0].1 <= w[1].1) {
        lsd_by(pairs, |p| p.1, 0, 64, 8);
    }
    lsd_by(pairs, |p| p.0, 0, 64, 8);
}

/// Stably sorts `values` by their top `bits` bits only. Used to derive a permuted table's
/// order from table 0's in one or two passes (see `segment::writer::build_segment`).
pub fn sort_by_top_bits(values: &mut Vec<u64>, bits: u32) {
    if bits == 0 {
        return;
    }
    if values.len() < SMALL {
        values.sort_by_key(|&v| v >> (64 - bits));
        return;
    }
    lsd_by(values, |&v| v, 64 - bits, bits, 8);
}

/// Stable LSD radix sort by bits `low .. low + bits` of `key` (the bits above ignored), in as
/// few passes of at most `digit` bits as cover them.
fn lsd_by<T: Copy + Default>(values: &mut Vec<T>, key: impl Fn(&T) -> u64, low: u32, bits: u32, digit: u32) {
    let passes = bits.div_ceil(digit);
    let width = bits.div_ceil(passes);
    let digits: Vec<(u32, u64)> = (0..passes).map(|p| (low + p * width, u64::MAX >> (64 - width.min(bits - p * width)))).collect();
    // One pass over the data counts every digit at once.
    let mut counts = vec![0usize; (passes as usize) << width];
    for v in values.iter() {
        let k = key(v);
        for (c, &(shift, mask)) in counts.chunks_exact_mut(1 << width).zip(&digits) {
            c[((k >> shift) & mask) as usize] += 1;
        }
    }
    let n = values.len();
    let mut src = std::mem::take(values);
    let mut dst = vec![T::default(); n];
    for (c, &(shift, mask)) in counts.chunks_exact_mut(1 << width).zip(&digits) {
        // A digit shared by every value does not reorder anything.
        if c.contains(&n) {
            continue;
        }
        let mut sum = 0;
        for o in c.iter_mut() {
            let x = *o;
            *o = sum;
            sum += x;
        }
        for v in &src {
            let d = ((key(v) >> shift) & mask) as usize;
            dst[c[d]] = *v;
            c[d] += 1;
        }
        std::mem::swap(&mut src, &mut dst);
    }
    *values = src;
}

/// Runs merged at once; more are first merged in groups of this many (a merge's heap
/// holds one record of each).
const FAN_IN: usize = 64;

/// A fresh directory for one sort's run files (`simdex-spill-PID-N` under the caller's
/// directory), removed with everything in it when dropped: after success, on an error and
/// when a half-read merge is abandoned.
#[derive(Debug)]
pub(crate) struct SpillDir {
    path: PathBuf,
}

impl SpillDir {
    fn create(parent: &Path) -> Result<Self> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        loop {
            let path = parent.join(format!("simdex-spill-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(Self { path }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(Error::io(path, "create spill directory", e)),
            }
        }
    }
}

impl Drop for SpillDir {
    fn drop(&mut self) {
        // Nothing else can be done about a failure here; the directory's name says what it is.
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Sorts records in bounded memory, each distinct record once: at most `held` records are
/// kept (the memory budget over the record's size); beyond that they are sorted into run
/// files in a [`SpillDir`] created on the first spill, which [`SpillSorter::finish`] merges.
#[derive(Debug)]
pub(crate) struct SpillSorter<T> {
    held: usize,
    buf: Vec<T>,
    parent: PathBuf,
    dir: Option<SpillDir>,
    runs: Vec<PathBuf>,
    /// Run files written, their names' counter.
    written: usize,
    /// Reserve all `held` records at the first record, rather than growing by doubling
    /// (whose reallocations hold the old and the new buffer at once).
    reserve_all: bool,
}

impl<T: Record> SpillSorter<T> {
    /// A sorter keeping at most `memory` bytes of records (at least one record), spilling
    /// into a new directory under `parent`.
    pub(crate) fn new(memory: usize, parent: &Path) -> Self {
        let held = (memory / std::mem::size_of::<T>().max(1)).max(1);
        Self { held, buf: Vec::new(), parent: parent.to_path_buf(), dir: None, runs: Vec::new(), written: 0, reserve_all: false }
    }

    /// Adds one record.
    pub(crate) fn push(&mut self, x: T) -> Result<()> {
        grow_capped(&mut self.buf, 1, self.held);
        self.buf.push(x);
        if self.buf.len() >= self.held {
            self.spill()?;
        }
        Ok(())
    }

    /// Adds every record of `xs`, leaving it empty.
    pub(crate) fn append(&mut self, xs: &mut Vec<T>) -> Result<()> {
        let mut rest: &[T] = xs;
        while !rest.is_empty() {
            let room = self.held.saturating_sub(self.buf.len()).max(1);
            let (now, later) = rest.split_at(room.min(rest.len()));
            if self.reserve_all && self.buf.capacity() < self.held {
                self.buf.reserve_exact(self.held - self.buf.len());
            }
            grow_capped(&mut self.buf, now.len(), self.held);
            self.buf.extend_from_slice(now);
            if self.buf.len() >= self.held {
                self.spill()?;
            }
            rest = later;
        }
        xs.clear();
        Ok(())
    }

    fn next_run_path(&mut self) -> Result<PathBuf> {
        let dir = match &self.dir {
            Some(d) => d,
            None => self.dir.insert(SpillDir::create(&self.parent)?),
        };
        let path = dir.path.join(format!("run-{}", self.written));
        self.written += 1;
        Ok(path)
    }

    fn spill(&mut self) -> Result<()> {
        self.buf.sort_unstable();
        self.buf.dedup();
        let path = self.next_run_path()?;
        let mut out = RunWriter::create(&FsStorage, path)?;
        out.write_all(&self.buf)?;
        self.runs.push(out.finish(false)?);
        self.buf.clear();
        Ok(())
    }

    /// The records in order, each once: from memory when nothing spilled, otherwise merged
    /// from the runs (in groups of [`FAN_IN`] first when there are more).
    pub(crate) fn finish(mut self) -> Result<Sorted<T>> {
        if self.runs.is_empty() {
            let mut buf = std::mem::take(&mut self.buf);
            buf.sort_unstable();
            buf.dedup();
            return Ok(Sorted::Memory(buf.into_iter()));
        }
        if !self.buf.is_empty() {
            self.spill()?;
        }
        self.buf = Vec::new();
        while self.runs.len() > FAN_IN {
            let group: Vec<PathBuf> = self.runs.drain(..FAN_IN).collect();
            let path = self.next_run_path()?;
            let mut out = RunWriter::create(&FsStorage, path)?;
            for x in Distinct::new(RunMerge::<T>::new(read_runs(&FsStorage, &group)?, &group, None)?) {
                out.write(&x)?;
            }
            self.runs.push(out.finish(false)?);
            for p in &group {
                std::fs::remove_file(p).map_err(|e| Error::io(p, "remove spill run", e))?;
            }
        }
        let merge = Distinct::new(RunMerge::new(read_runs(&FsStorage, &self.runs)?, &self.runs, None)?);
        Ok(Sorted::Runs { merge, _dir: self.dir.take() })
    }
}

/// Reserves room for `more` elements, doubling up to `cap` (so a buffer never holds much
/// more than its budget).
fn grow_capped<T>(v: &mut Vec<T>, more: usize, cap: usize) {
    let need = v.len() + more;
    if need > v.capacity() {
        let want = v.capacity().saturating_mul(2).max(need).min(cap.max(need));
        v.reserve_exact(want - v.len());
    }
}

/// The records of a finished [`SpillSorter`], in order, each once.
pub(crate) enum Sorted<T> {
    /// Nothing spilled: the sorted records.
    Memory(std::vec::IntoIter<T>),
    /// The merge of the run files (mapped); the directory goes when this is dropped.
    Runs { merge: Distinct<RunMerge<T>, T>, _dir: Option<SpillDir> },
}

impl<T: Record> Iterator for Sorted<T> {
    type Item = Result<T>;

    fn next(&mut self) -> Option<Result<T>> {
        match self {
            Sorted::Memory(it) => it.next().map(Ok),
            Sorted::Runs { merge, .. } => merge.next().map(Ok),
        }
    }
}

/// The distinct records of a sorted stream (each run holds each record once; several runs
/// may hold the same).
pub(crate) struct Distinct<I, T> {
    inner: I,
    last: Option<T>,
}

impl<I, T> Distinct<I, T> {
    fn new(inner: I) -> Self {
        Self { inner, last: None }
    }
}

impl<T: Copy + PartialEq, I: Iterator<Item = T>> Iterator for Distinct<I, T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        loop {
            let x = self.inner.next()?;
            if self.last != Some(x) {
                self.last = Some(x);
                return Some(x);
            }
        }
    }
}

/// A [`SpillSorter`] shared by the worker threads of a join, each adding through its own
/// [`Collector`] (a small buffer handed over in chunks).
pub(crate) struct SharedSorter<T> {
    sorter: Mutex<SpillSorter<T>>,
    chunk: usize,
}

impl<T: Record> SharedSorter<T> {
    /// A sorter within about `memory` bytes in all for `threads` workers: a quarter of it
    /// for the workers' buffers, the rest for the shared one. Each buffer is reserved whole
    /// when its first record comes (no reallocation ever holds two copies).
    pub(crate) fn new(memory: usize, threads: usize, parent: &Path) -> Self {
        let records = (memory / std::mem::size_of::<T>().max(1)).max(1);
        let chunk = (records / (4 * threads.max(1))).max(1);
        let shared = records.saturating_sub(chunk * threads.max(1)).max(1);
        let sorter = SpillSorter { reserve_all: true, ..SpillSorter::new(shared * std::mem::size_of::<T>(), parent) };
        Self { sorter: Mutex::new(sorter), chunk }
    }

    /// A worker's buffer in front of the shared sorter.
    pub(crate) fn collector(&self) -> Collector<'_, T> {
        Collector { buf: Vec::new(), sink: self, error: None }
    }

    /// The shared sorter, with every collector's records.
    pub(crate) fn into_inner(self) -> SpillSorter<T> {
        self.sorter.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// One worker's buffer of a [`SharedSorter`]; [`Collector::finish`] hands over the rest and
/// reports the first error.
pub(crate) struct Collector<'a, T> {
    buf: Vec<T>,
    sink: &'a SharedSorter<T>,
    error: Option<Error>,
}

impl<T: Record> Collector<'_, T> {
    /// Adds one record (an error is kept for [`Collector::finish`]).
    #[inline]
    pub(crate) fn push(&mut self, x: T) {
        if self.buf.capacity() == 0 {
            self.buf.reserve_exact(self.sink.chunk);
        }
        self.buf.push(x);
        if self.buf.len() >= self.sink.chunk {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.error.is_none() && !self.buf.is_empty() {
            let mut sorter = self.sink.sorter.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if let Err(e) = sorter.append(&mut self.buf) {
                self.error = Some(e);
            }
        }
        self.buf.clear();
    }

    /// Hands over the records left; the first error of any hand-over.
    pub(crate) fn finish(mut self) -> Result<()> {
        self.flush();
        self.error.take().map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` successive states of a xorshift64 generator started at `seed`: the tests' inputs.
    fn xorshift(mut x: u64, n: usize) -> Vec<u64> {
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            })
            .collect()
    }

    #[test]
    fn sorts_like_the_standard_library() {
        let mut v: Vec<u64> = xorshift(0x1234_5678, 100_000).into_iter().enumerate().map(|(i, x)| if i % 7 == 0 { x & 0xffff } else { x }).collect();
        let mut want = v.clone();
        want.sort_unstable();
        sort_u64(&mut v);
        assert_eq!(v, want);
        let mut same = vec![42u64; 10_000];
        sort_u64(&mut same);
        assert!(same.iter().all(|&x| x == 42));
    }

    #[test]
    fn pairs_sort_by_fingerprint_then_id() {
        let mut pairs: Vec<(u64, u64)> = xorshift(3, 20_000).into_iter().zip(0u64..).map(|(x, i)| (x % 5000, if i % 3 == 0 { x >> 3 } else { i })).collect();
        let mut want = pairs.clone();
        want.sort_unstable();
        sort_pairs(&mut pairs);
        assert_eq!(pairs, want);
    }

    #[test]
    fn sort_by_top_bits_is_stable_and_orders_the_key() {
        let base = xorshift(0xfeed, 50_000);
        for bits in [1u32, 7, 8, 12, 16, 25, 26, 33, 48, 63, 64] {
            for len in [100usize, 50_000] {
                let mut v = base[..len].to_vec();
                let mut want = v.clone();
                want.sort_by_key(|&y| y >> (64 - bits)); // std's sort_by_key is stable
                sort_by_top_bits(&mut v, bits);
                assert_eq!(v, want, "bits {bits} len {len}");
            }
        }
    }
}
