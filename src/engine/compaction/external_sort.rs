//! Sorting in bounded memory, for the permuted tables of a merge's output: values are
//! buffered up to a capacity, sorted and spilled to a temporary run file whenever the buffer
//! fills, and the runs are merged when the sort is read (the crate's one run format and
//! merge: `crate::sort`'s `RunWriter` and `RunMerge`). Unlike the spill sorter of batch
//! jobs, its runs are synced and named after the merge, so that a merge that resumes can
//! use the runs its checkpoint names. The run files are the only files it writes, and it
//! removes them (a run a crash leaves behind is a `*.tmp` orphan, removed at the next open).

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::sort::{read_runs, sort_u64, RunMerge, RunWriter};
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

/// A finished sort: in memory, or runs to merge (and their paths, for messages).
pub(super) enum Sorted {
    Memory(Vec<u64>),
    Runs(Vec<FileBytes>, Vec<PathBuf>),
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
                self.sorted = Some(Sorted::Runs(read_runs(self.storage, &self.runs)?, self.runs.clone()));
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
    let mut out = RunWriter::create(storage, path.to_path_buf())?;
    out.write_all(values)?;
    out.finish(true).map(drop)
}

impl Sorted {
    /// The sorted values from the first `>= from` (each run is searched for it).
    pub(super) fn iter_from(&self, from: u64) -> Result<Box<dyn Iterator<Item = u64> + '_>> {
        Ok(match self {
            Sorted::Memory(v) => Box::new(v.get(v.partition_point(|&x| x < from)..).unwrap_or_default().iter().copied()),
            Sorted::Runs(runs, paths) => Box::new(RunMerge::new(runs.clone(), paths, Some(from))?),
        })
    }
}
