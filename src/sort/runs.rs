//! Sorted runs of fixed-size records, the one external-sort merge of the crate: a run is
//! written by [`RunWriter`] (through a [`Storage`], synced when the caller needs it to
//! survive a crash) and read back whole ([`FileBytes`], mapped); [`RunMerge`] is the k-way
//! merge of many, from the first record at or above a given one. Both external sorts use
//! them: [`SpillSorter`](super::SpillSorter) under batch queries and near-duplicate pairs,
//! and the compaction's resumable sorter of a merge's permuted tables.

// Indexing: runs by run number below the count it was built with.
#![allow(clippy::indexing_slicing)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::storage::{FileBytes, Storage, WriteFile};

/// A fixed-size record that runs hold.
pub(crate) trait Record: Copy + Ord + Send {
    /// Encoded size in bytes.
    const BYTES: usize;
    /// Appends the `BYTES`-byte encoding to `out`.
    fn encode(&self, out: &mut Vec<u8>);
    /// The record encoded in the first `BYTES` bytes (`None` when they are too few).
    fn decode(bytes: &[u8]) -> Option<Self>;
}

/// Splits a little-endian u64 off the front of `bytes`.
pub(crate) fn take_u64(bytes: &[u8]) -> Option<(u64, &[u8])> {
    let (head, rest) = bytes.split_first_chunk::<8>()?;
    Some((u64::from_le_bytes(*head), rest))
}

impl Record for u64 {
    const BYTES: usize = 8;

    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }

    fn decode(bytes: &[u8]) -> Option<Self> {
        take_u64(bytes).map(|(v, _)| v)
    }
}

impl Record for (u64, u64) {
    const BYTES: usize = 16;

    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0.to_le_bytes());
        out.extend_from_slice(&self.1.to_le_bytes());
    }

    fn decode(bytes: &[u8]) -> Option<Self> {
        let (a, rest) = take_u64(bytes)?;
        let (b, _) = take_u64(rest)?;
        Some((a, b))
    }
}

/// Bytes of a run writer's buffer.
const WRITE_BUFFER: usize = 1 << 20;

/// Writes one sorted run.
pub(crate) struct RunWriter {
    path: PathBuf,
    out: BufWriter<Box<dyn WriteFile>>,
    bytes: Vec<u8>,
}

impl RunWriter {
    /// Creates (or truncates) the run at `path`.
    pub(crate) fn create(storage: &dyn Storage, path: PathBuf) -> Result<Self> {
        let file = storage.create(&path).map_err(|e| Error::io(&path, "create run", e))?;
        Ok(Self { path, out: BufWriter::with_capacity(WRITE_BUFFER, file), bytes: Vec::new() })
    }

    /// Appends one record (records must come in order).
    pub(crate) fn write<T: Record>(&mut self, x: &T) -> Result<()> {
        self.bytes.clear();
        x.encode(&mut self.bytes);
        self.out.write_all(&self.bytes).map_err(|e| Error::io(&self.path, "write run", e))
    }

    /// Appends every record of `xs`.
    pub(crate) fn write_all<T: Record>(&mut self, xs: &[T]) -> Result<()> {
        xs.iter().try_for_each(|x| self.write(x))
    }

    /// Flushes the run (and syncs it when `sync`: a run a checkpoint names must survive a
    /// crash); returns its path.
    pub(crate) fn finish(self, sync: bool) -> Result<PathBuf> {
        let Self { path, out, .. } = self;
        let mut file = out.into_inner().map_err(|e| Error::io(&path, "write run", e.into_error()))?;
        if sync {
            file.sync().map_err(|e| Error::io(&path, "fsync run", e))?;
        }
        Ok(path)
    }
}

/// Reads the runs at `paths` whole.
pub(crate) fn read_runs(storage: &dyn Storage, paths: &[PathBuf]) -> Result<Vec<FileBytes>> {
    paths.iter().map(|p| storage.read(p).map_err(|e| Error::io(p, "read run", e))).collect()
}

/// K-way merge of sorted runs of records, in order (every copy of equal records).
pub(crate) struct RunMerge<T> {
    runs: Vec<FileBytes>,
    /// Byte position of each run's next record.
    at: Vec<usize>,
    heap: BinaryHeap<Reverse<(T, usize)>>,
}

impl<T: Record> RunMerge<T> {
    /// The merge of `runs` (named `paths`, for messages) from the first record `>= from` in
    /// each (every record when `None`). A run whose length is not a whole number of
    /// records is refused.
    pub(crate) fn new(runs: Vec<FileBytes>, paths: &[PathBuf], from: Option<T>) -> Result<Self> {
        if let Some((i, _)) = runs.iter().enumerate().find(|(_, r)| r.len() % T::BYTES != 0) {
            let path = paths.get(i).map_or_else(|| Path::new("run").to_path_buf(), |p| p.clone());
            return Err(Error::io(&path, "read run", std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the run ends inside a record")));
        }
        let mut m = Self { at: vec![0; runs.len()], heap: BinaryHeap::with_capacity(runs.len()), runs };
        for i in 0..m.runs.len() {
            if let Some(from) = from {
                m.at[i] = m.first_at_or_above(i, from) * T::BYTES;
            }
            m.refill(i);
        }
        Ok(m)
    }

    /// The position of run `i`'s first record `>= from` (binary search: the run is sorted).
    fn first_at_or_above(&self, i: usize, from: T) -> usize {
        let run = &self.runs[i];
        let (mut lo, mut hi) = (0usize, run.len() / T::BYTES);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if T::decode(&run[mid * T::BYTES..]).is_some_and(|x| x < from) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Pushes run `i`'s next record, if any, on the heap.
    fn refill(&mut self, i: usize) {
        let at = self.at[i];
        if let Some(x) = self.runs[i].get(at..).and_then(T::decode) {
            self.heap.push(Reverse((x, i)));
            self.at[i] = at + T::BYTES;
        }
    }
}

impl<T: Record> Iterator for RunMerge<T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        let Reverse((x, i)) = self.heap.pop()?;
        self.refill(i);
        Some(x)
    }
}
