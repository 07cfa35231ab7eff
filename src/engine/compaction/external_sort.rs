//! Sorting in bounded memory, for the permuted tables of a merge's output: values are
//! buffered up to a capacity, sorted and spilled to a temporary run file whenever the buffer
//! fills, and the runs are merged when the sort is read. The run files are the only files
//! it writes, and it removes them (a run a crash leaves behind is a `*.tmp` orphan, removed
//! at the next open).

// Indexing: runs by run number, and a 4 KiB buffer by chunks of at most 512 values; run
// files' bytes are read with split_first_chunk.
#![allow(clippy::indexing_slicing)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use byteorder::{ByteOrder, LittleEndian as LE};

use crate::error::{Error, Result};
use crate::sort::sort_u64;
use crate::storage::{FileBytes, Storage};

/// Sorts a stream of u64 in bounded memory: sorted chunks spill to run files
/// (`BASE.tN.rM.run`, raw little-endian u64s, synced when written, so that a merge that
/// resumes can use the runs its checkpoint names).
pub(super) struct ExternalSorter<'s> {
    storage: &'s dyn Storage,
    base: PathBuf,
    table: usize,
    chunk: Vec<u64>,
    capacity: usize,
    runs: Vec<PathBuf>,
    pub(super) spilled: usize,
    sorted: Option<Sorted>,
    /// The sort is in memory and also written as a run ([`Self::persist`]).
    persisted: bool,
}

impl Drop for ExternalSorter<'_> {
    /// A merge that fails (a full disk) removes its spilled runs at once.
    fn drop(&mut self) {
        self.remove_runs();
    }
}

/// A finished sort: in memory, or runs to merge.
pub(super) enum Sorted {
    Memory(Vec<u64>),
    Runs(Vec<FileBytes>),
}

impl<'s> ExternalSorter<'s> {
    /// A sorter for table `table` whose runs are named after `base`, going on from its
    /// first `runs` runs (files a stopped merge wrote; 0 for a new sort).
    pub(super) fn resume(storage: &'s dyn Storage, base: &Path, table: usize, capacity: usize, runs: usize) -> Self {
        let mut s = Self { storage, base: base.to_path_buf(), table, chunk: Vec::new(), capacity, runs: Vec::new(), spilled: runs, sorted: None, persisted: false };
        s.runs = (0..runs).map(|r| s.run_path(r)).collect();
        s
    }

    fn run_path(&self, run: usize) -> PathBuf {
        let mut name = self.base.file_name().map(|n| n.to_os_string()).unwrap_or_default();
        name.push(format!(".t{}.r{run}.run", self.table));
        self.base.with_file_name(name)
    }

    /// The finished sort ([`Self::finish`]).
    pub(super) fn sorted(&self) -> Option<&Sorted> {
        self.sorted.as_ref()
    }

    /// Runs on disk, all synced.
    pub(super) fn runs(&self) -> usize {
        self.runs.len()
    }

    /// Spills what is buffered (a checkpoint: every value pushed is then in a run).
    pub(super) fn spill_buffered(&mut self) -> Result<()> {
        if self.chunk.is_empty() {
            return Ok(());
        }
        self.spill()
    }

    /// After [`Self::finish`]: writes a sort kept in memory as a run too, so that a
    /// checkpoint can name it.
    pub(super) fn persist(&mut self) -> Result<()> {
        if self.persisted || !matches!(self.sorted, Some(Sorted::Memory(_))) {
            return Ok(());
        }
        if let Some(Sorted::Memory(v)) = self.sorted.as_ref() {
            let path = self.run_path(self.runs.len());
            write_run(self.storage, &path, v)?;
            self.runs.push(path);
        }
        self.persisted = true;
        Ok(())
    }

    pub(super) fn push(&mut self, v: u64) -> Result<()> {
        self.chunk.push(v);
        if self.chunk.len() >= self.capacity {
            self.spill()?;
        }
        Ok(())
    }

    fn spill(&mut self) -> Result<()> {
        sort_u64(&mut self.chunk);
        let path = self.run_path(self.runs.len());
        write_run(self.storage, &path, &self.chunk)?;
        self.runs.push(path);
        self.chunk.clear();
        self.spilled += 1;
        Ok(())
    }

    pub(super) fn finish(&mut self) -> Result<&Sorted> {
        if self.sorted.is_none() {
            if self.runs.is_empty() && !self.persisted {
                sort_u64(&mut self.chunk);
                self.sorted = Some(Sorted::Memory(std::mem::take(&mut self.chunk)));
            } else {
                if !self.chunk.is_empty() {
                    self.spill()?;
                }
                self.chunk = Vec::new();
                let runs = self.runs.iter().map(|p| self.storage.read(p).map_err(|e| Error::io(p, "read", e))).collect::<Result<Vec<_>>>()?;
                self.sorted = Some(Sorted::Runs(runs));
            }
        }
        Ok(self.sorted.as_ref().expect("set above"))
    }

    pub(super) fn remove_runs(&mut self) {
        self.sorted = None;
        self.persisted = false;
        for p in self.runs.drain(..) {
            // A run left behind is a *.tmp orphan, removed at the next open.
            let _ = self.storage.remove(&p);
        }
    }
}

/// Writes sorted `values` as a run file and syncs it.
fn write_run(storage: &dyn Storage, path: &Path, values: &[u64]) -> Result<()> {
    let file = storage.create(path).map_err(|e| Error::io(path, "create", e))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let mut buf = [0u8; 8 * 512];
    for chunk in values.chunks(512) {
        LE::write_u64_into(chunk, &mut buf[..chunk.len() * 8]);
        out.write_all(&buf[..chunk.len() * 8]).map_err(|e| Error::io(path, "write", e))?;
    }
    out.flush().map_err(|e| Error::io(path, "write", e))?;
    out.get_mut().sync().map_err(|e| Error::io(path, "fsync", e))
}

impl Sorted {
    /// The sorted values from the first `>= from` (each run is searched for it).
    pub(super) fn iter_from(&self, from: u64) -> Box<dyn Iterator<Item = u64> + '_> {
        match self {
            Sorted::Memory(v) => Box::new(v.get(v.partition_point(|&x| x < from)..).unwrap_or_default().iter().copied()),
            Sorted::Runs(runs) => Box::new(RunMerge::new(runs, from)),
        }
    }
}

/// K-way merge of sorted runs of little-endian u64s.
struct RunMerge<'a> {
    runs: Vec<&'a [u8]>,
    heap: BinaryHeap<Reverse<(u64, usize)>>,
}

impl<'a> RunMerge<'a> {
    fn new(runs: &'a [FileBytes], from: u64) -> Self {
        let start = |r: &'a [u8]| {
            let n = r.len() / 8;
            let (mut lo, mut hi) = (0usize, n);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if LE::read_u64(&r[mid * 8..mid * 8 + 8]) < from {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            &r[lo * 8..]
        };
        let mut m = Self { runs: runs.iter().map(|r| start(&r[..])).collect(), heap: BinaryHeap::new() };
        for i in 0..m.runs.len() {
            m.refill(i);
        }
        m
    }

    fn refill(&mut self, i: usize) {
        if let Some((head, rest)) = self.runs[i].split_first_chunk::<8>() {
            self.heap.push(Reverse((u64::from_le_bytes(*head), i)));
            self.runs[i] = rest;
        }
    }
}

impl Iterator for RunMerge<'_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        let Reverse((v, i)) = self.heap.pop()?;
        self.refill(i);
        Some(v)
    }
}
