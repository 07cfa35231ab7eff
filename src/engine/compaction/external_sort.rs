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

/// Sorts a stream of u64 in bounded memory: sorted chunks spill to temporary run files
/// (`SEGMENT.tN.rM.tmp`, raw little-endian u64s, never synced: they die with the merge).
pub(super) struct ExternalSorter<'s> {
    storage: &'s dyn Storage,
    base: PathBuf,
    table: usize,
    chunk: Vec<u64>,
    capacity: usize,
    runs: Vec<PathBuf>,
    pub(super) spilled: usize,
    sorted: Option<Sorted>,
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
    pub(super) fn new(storage: &'s dyn Storage, segment: &Path, table: usize, capacity: usize) -> Self {
        Self { storage, base: segment.to_path_buf(), table, chunk: Vec::new(), capacity, runs: Vec::new(), spilled: 0, sorted: None }
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
        let mut name = self.base.file_name().map(|n| n.to_os_string()).unwrap_or_default();
        name.push(format!(".t{}.r{}.tmp", self.table, self.runs.len()));
        let path = self.base.with_file_name(name);
        let file = self.storage.create(&path).map_err(|e| Error::io(&path, "create", e))?;
        self.runs.push(path.clone());
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let mut buf = [0u8; 8 * 512];
        for chunk in self.chunk.chunks(512) {
            LE::write_u64_into(chunk, &mut buf[..chunk.len() * 8]);
            out.write_all(&buf[..chunk.len() * 8]).map_err(|e| Error::io(&path, "write", e))?;
        }
        out.flush().map_err(|e| Error::io(&path, "write", e))?;
        self.chunk.clear();
        self.spilled += 1;
        Ok(())
    }

    pub(super) fn finish(&mut self) -> Result<&Sorted> {
        if self.sorted.is_none() {
            if self.runs.is_empty() {
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
        for p in self.runs.drain(..) {
            // A run left behind is a *.tmp orphan, removed at the next open.
            let _ = self.storage.remove(&p);
        }
    }
}

impl Sorted {
    pub(super) fn iter(&self) -> Box<dyn Iterator<Item = u64> + '_> {
        match self {
            Sorted::Memory(v) => Box::new(v.iter().copied()),
            Sorted::Runs(runs) => Box::new(RunMerge::new(runs)),
        }
    }
}

/// K-way merge of sorted runs of little-endian u64s.
struct RunMerge<'a> {
    runs: Vec<&'a [u8]>,
    heap: BinaryHeap<Reverse<(u64, usize)>>,
}

impl<'a> RunMerge<'a> {
    fn new(runs: &'a [FileBytes]) -> Self {
        let mut m = Self { runs: runs.iter().map(|r| &r[..]).collect(), heap: BinaryHeap::new() };
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
