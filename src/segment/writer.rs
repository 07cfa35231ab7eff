//! Writing a segment: a streaming [`SegmentWriter`] (one sorted table at a time, then the
//! document ids) and [`build_segment`], which sorts an in-memory set and drives the writer.
//!
//! A segment is written under `NAME.tmp`, synced, renamed to `NAME` and its directory
//! synced, so a reader never sees a partial segment under the final name.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::layout::*;
use crate::codec::{Codec, SymbolHistogram};
use crate::error::{Error, Result};
use crate::plan::Design;
use crate::storage::{parent_dir, temporary_path, Storage, TempFile, WriteFile};

/// Streams a segment to disk. Call [`Self::write_table`] once per table in order, then
/// [`Self::write_ids`] if the segment has ids, then [`Self::finish`]. Dropping the writer
/// before `finish` leaves only the temporary file, which the engine removes as an orphan.
pub struct SegmentWriter<'s> {
    pub(super) storage: &'s dyn Storage,
    pub(super) path: PathBuf,
    /// `NAME.tmp`: the name the file is written under where the storage cannot make an
    /// unnamed file, or linked for the instant before the rename where it can.
    pub(super) tmp_path: PathBuf,
    /// Removes `NAME.tmp` if the writer is dropped unfinished (`None`: the file is unnamed,
    /// and a writer dropped, or a process killed, leaves nothing behind).
    pub(super) tmp: Option<TempFile<'s>>,
    pub(super) out: BufWriter<Box<dyn WriteFile>>,
    pub(super) offset: u64,
    pub(super) header: Header,
    pub(super) tables: Vec<DirTable>,
    /// Offsets of the column heads written so far.
    pub(super) ids_head: Option<u64>,
    pub(super) sketches: Option<SketchColumn>,
    pub(super) sketches_head: Option<u64>,
    /// Set for a writer a merge can resume (`resumable`): its block-index journal.
    pub(super) journal: Option<Journal>,
}

/// The layout of a segment's sketch column: `bytes` per entry (1..=64), and `scheme`, an
/// opaque 8-byte tag naming the sketch's encoding (stored in the column head; readers
/// compare it, never interpret it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SketchColumn {
    /// Bytes per sketch.
    pub bytes: u16,
    /// The encoding's tag.
    pub scheme: [u8; 8],
}


/// Whether a segment stores a document id beside each fingerprint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdColumn {
    /// An id column follows the tables.
    Present,
    /// Fingerprints only.
    Absent,
}

impl<'s> SegmentWriter<'s> {
    /// Starts a segment at `path` with `design`, one codec per table, and an id column when
    /// `ids` says so.
    pub fn create(storage: &'s dyn Storage, path: &Path, design: &Design, codecs: &[Codec], ids: IdColumn) -> Result<Self> {
        Self::create_with(storage, path, design, codecs, ids, None)
    }

    /// [`Self::create`] with a sketch column when `sketches` is given: call
    /// [`Self::write_sketches`] after the ids.
    pub fn create_with(storage: &'s dyn Storage, path: &Path, design: &Design, codecs: &[Codec], ids: IdColumn, sketches: Option<SketchColumn>) -> Result<Self> {
        Self::check_layout(design, codecs, sketches)?;
        let tmp_path = temporary_path(path);
        let dir = parent_dir(path);
        let (file, tmp) = match storage.create_unnamed(&dir).map_err(|e| Error::io(&dir, "create an unnamed file in", e))? {
            Some(file) => (file, None),
            None => {
                let tmp = TempFile::new(storage, tmp_path.clone());
                (storage.create(&tmp_path).map_err(|e| Error::io(&tmp_path, "create", e))?, Some(tmp))
            }
        };
        let mut w = Self::with_file(storage, path, &tmp_path, file, design, codecs, ids, sketches)?;
        w.tmp = tmp;
        let bytes = w.header.encode();
        w.put(&bytes)?;
        Ok(w)
    }

    /// Refuses a sketch width outside 1..=64 and a codec list that does not match the design.
    fn check_layout(design: &Design, codecs: &[Codec], sketches: Option<SketchColumn>) -> Result<()> {
        if let Some(s) = sketches {
            if s.bytes == 0 || usize::from(s.bytes) > MAX_SKETCH_BYTES {
                return Err(Error::InvalidArgument(format!("a sketch of {} bytes: sketches hold 1 to {MAX_SKETCH_BYTES} bytes", s.bytes)));
            }
        }
        if codecs.len() != design.tables().len() {
            return Err(Error::InvalidArgument(format!("{} codecs given for {} tables", codecs.len(), design.tables().len())));
        }
        Ok(())
    }

    /// The writer over `file` (written under `tmp_path`), before its header is written.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn with_file(storage: &'s dyn Storage, path: &Path, tmp_path: &Path, file: Box<dyn WriteFile>, design: &Design, codecs: &[Codec], ids: IdColumn, sketches: Option<SketchColumn>) -> Result<Self> {
        Self::check_layout(design, codecs, sketches)?;
        let has_ids = ids == IdColumn::Present;
        let header = Header {
            version: version_for(sketches.is_some()),
            k: design.k() as u8,
            levels: design.levels().iter().map(|&r| r as u8).collect(),
            has_ids,
            has_sketches: sketches.is_some(),
            tables: design
                .tables()
                .iter()
                .zip(codecs)
                .map(|(t, &codec)| HeaderTable { prefix_bits: t.prefix_bits as u8, codec, order: *t.permutation.order() })
                .collect(),
        };
        Ok(Self {
            storage,
            path: path.to_path_buf(),
            tmp_path: tmp_path.to_path_buf(),
            tmp: None,
            out: BufWriter::with_capacity(1 << 20, file),
            offset: 0,
            header,
            tables: Vec::new(),
            ids_head: None,
            sketches,
            sketches_head: None,
            journal: None,
        })
    }

    pub(super) fn put(&mut self, bytes: &[u8]) -> Result<()> {
        self.out.write_all(bytes).map_err(|e| Error::io(&self.tmp_path, "write", e))?;
        self.offset += bytes.len() as u64;
        Ok(())
    }

    pub(super) fn pad_to(&mut self, align: u64) -> Result<()> {
        let pad = align_up(self.offset, align) - self.offset;
        self.put(&vec![0u8; pad as usize])
    }

    /// Writes the directory and footer, syncs, and renames the segment into place.
    pub fn finish(mut self) -> Result<u64> {
        if self.tables.len() != self.header.tables.len() {
            return Err(Error::InvalidArgument(format!("{} of {} tables written", self.tables.len(), self.header.tables.len())));
        }
        if self.header.has_ids && self.ids_head.is_none() {
            return Err(Error::InvalidArgument("the segment has ids but none were written".into()));
        }
        if self.sketches.is_some() && self.sketches_head.is_none() {
            return Err(Error::InvalidArgument("the segment has sketches but none were written".into()));
        }
        let entries = self.tables.first().map_or(0, |t| t.entries);
        if let Some((i, t)) = self.tables.iter().enumerate().find(|(_, t)| t.entries != entries) {
            return Err(Error::InvalidArgument(format!("table {i} has {} entries, table 0 has {entries}", t.entries)));
        }
        self.remove_journals();
        self.pad_to(8)?;
        let columns = DirColumns::V2 { ids_head: self.ids_head.unwrap_or(0), sketches_head: self.sketches_head.unwrap_or(0) };
        let dir = Directory { entries, tables: self.tables.clone(), columns }.encode();
        let footer = Footer { dir_offset: self.offset, dir_len: dir.len() as u32, dir_crc: crc32fast::hash(&dir), version: self.header.version };
        self.put(&dir)?;
        self.put(&footer.encode())?;
        let len = self.offset;
        let tmp_path = self.tmp_path;
        let mut file = self.out.into_inner().map_err(|e| Error::io(&tmp_path, "write", e.into_error()))?;
        file.sync().map_err(|e| Error::io(&tmp_path, "fsync", e))?;
        let tmp = match self.tmp {
            Some(tmp) => tmp,
            // a resumable writer's file has its name (`create_resumable`)
            None if self.journal.is_some() => TempFile::new(self.storage, tmp_path.clone()),
            None => {
                // An unnamed file gets the temporary name only now, for the rename (which
                // replaces an existing file; linking cannot). A stale one goes first.
                let _ = self.storage.remove(&tmp_path);
                file.link_as(&tmp_path).map_err(|e| Error::io(&tmp_path, "link", e))?;
                TempFile::new(self.storage, tmp_path.clone())
            }
        };
        drop(file);
        self.storage.rename(&tmp_path, &self.path).map_err(|e| Error::io(&self.path, "rename", e))?;
        tmp.keep();
        let dir = parent_dir(&self.path);
        self.storage.sync_dir(&dir).map_err(|e| Error::io(&dir, "fsync directory", e))?;
        Ok(len)
    }
}

/// A journal open for a table: the table, its file, the blocks it holds.
pub(super) type OpenJournal = (usize, BufWriter<Box<dyn WriteFile>>, usize);

/// The block-index journal of a resumable writer's current table (`resumable`): the
/// name its files are derived from, and the table it is open for, its file and how many
/// of that table's blocks it holds.
pub(super) struct Journal {
    pub(super) part: PathBuf,
    pub(super) open: Option<OpenJournal>,
}

/// How [`build_segment`] lays out a segment.
#[derive(Clone)]
#[non_exhaustive]
pub struct BuildOptions {
    /// The design; `None` asks the planner with [`Self::k`] and the entry count.
    pub design: Option<Design>,
    /// Distance for the planner when no design is given.
    pub k: u32,
    /// Gap codec for every table.
    pub codec: Codec,
    /// Called as `progress(tables_done, tables)` after each table is written
    /// ([`Self::with_progress`]); `None` by default.
    pub progress: Option<Arc<dyn Fn(usize, usize) + Send + Sync>>,
}

__with_fields!(BuildOptions { design: Option<Design> => with_design, k: u32 => with_k, codec: Codec => with_codec });

impl BuildOptions {
    /// The same options, calling `progress(tables_done, tables)` after each table.
    #[must_use]
    pub fn with_progress(mut self, progress: impl Fn(usize, usize) + Send + Sync + 'static) -> Self {
        self.progress = Some(Arc::new(progress));
        self
    }
}

impl Default for BuildOptions {
    fn default() -> Self {
        Self { design: None, k: 3, codec: Codec::Xor, progress: None }
    }
}

impl std::fmt::Debug for BuildOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuildOptions").field("design", &self.design).field("k", &self.k).field("codec", &self.codec).field("progress", &self.progress.is_some()).finish()
    }
}

/// Builds a segment at `path` from unsorted fingerprints and optional document ids
/// (`ids`, when given, has one id per fingerprint). Returns the file's size in bytes.
/// Calls `options.progress` after each table.
pub fn build_segment(storage: &dyn Storage, path: &Path, fingerprints: &[u64], ids: Option<&[u64]>, options: &BuildOptions) -> Result<u64> {
    if let Some(ids) = ids {
        if ids.len() != fingerprints.len() {
            return Err(Error::InvalidArgument(format!("{} ids for {} fingerprints", ids.len(), fingerprints.len())));
        }
    }
    let design = match &options.design {
        Some(d) => d.clone(),
        None => crate::plan::plan(&crate::plan::PlanOptions::new(fingerprints.len() as u64, options.k))?.chosen.design,
    };
    let codecs = vec![options.codec; design.tables().len()];
    let mut writer = SegmentWriter::create(storage, path, &design, &codecs, if ids.is_some() { IdColumn::Present } else { IdColumn::Absent })?;
    // Table 0 is the identity: sort (fingerprint, id) pairs so ids follow its order.
    let mut pairs: Vec<(u64, u64)> = match ids {
        Some(ids) => fingerprints.iter().copied().zip(ids.iter().copied()).collect(),
        None => Vec::new(),
    };
    // Table 0 is the identity: its order is the fingerprints sorted.
    let table0: Vec<u64> = if ids.is_some() {
        crate::sort::sort_pairs(&mut pairs);
        pairs.iter().map(|p| p.0).collect()
    } else {
        let mut v = fingerprints.to_vec();
        crate::sort::sort_u64(&mut v);
        v
    };
    let mut scratch: Vec<u64> = Vec::with_capacity(fingerprints.len());
    for (t, table) in design.tables().iter().enumerate() {
        // Every other table keeps the bits outside its prefix in their original order
        // (plan/design.rs), so its order is table 0's, stably sorted by the permuted prefix alone:
        // one or two radix passes instead of a full sort.
        let values: &[u64] = if t == 0 {
            &table0
        } else {
            scratch.clear();
            scratch.extend(table0.iter().map(|&x| table.permutation.apply(x)));
            crate::sort::sort_by_top_bits(&mut scratch, table.prefix_bits);
            &scratch
        };
        let code = SymbolHistogram::of_sorted(options.codec, values).code();
        writer.write_table(&code, values.iter().copied())?;
        if let Some(progress) = &options.progress {
            progress(t + 1, design.tables().len());
        }
    }
    if ids.is_some() {
        writer.write_ids(pairs.iter().map(|p| p.1))?;
    }
    writer.finish()
}
