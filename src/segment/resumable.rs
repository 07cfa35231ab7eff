//! A segment written so that a killed writer can go on where it stopped: the file is
//! written under a name of the caller's (not an unnamed file), and at a boundary (between
//! sections, after a block of a table, after a page of a column) the writer makes what it
//! wrote durable and returns a [`WriterState`] naming it. The table being written keeps the
//! index of its blocks in a journal beside the file (`PART.tN`, 14 bytes a block), so a
//! checkpoint costs what was written since the last, not the table so far. A caller that
//! keeps the last state reopens the file with [`SegmentWriter::resume`] and goes on with
//! the section it names. The bytes are the same as a writer that never stopped.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use byteorder::{ByteOrder, LittleEndian as LE};

use super::layout::{ColumnHead, ColumnKind, DirTable};
use super::sections::{BlockEntry, ColumnWriter, TableProgress, TableWriter};
use super::writer::{IdColumn, Journal, SegmentWriter, SketchColumn};
use crate::codec::{Code, Codec, SYMBOLS};
use crate::error::{Error, Result};
use crate::plan::Design;
use crate::storage::Storage;

const BLOCK_RECORD: usize = 14;

/// The journal of table `table` of the segment written under `part`.
fn journal_path(part: &Path, table: usize) -> PathBuf {
    let mut name = part.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(format!(".t{table}"));
    part.with_file_name(name)
}

/// What a resumable writer has made durable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct WriterState {
    /// Bytes of the file that hold it (the rest is cut when it resumes).
    pub offset: u64,
    /// The tables written whole.
    pub tables: Vec<DirTable>,
    pub ids_head: Option<u64>,
    pub sketches_head: Option<u64>,
    /// The section being written, if any.
    pub section: Section,
}

/// A section part-written at a checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Section {
    /// Between sections.
    None,
    /// A table: its head, its code's lengths, its progress and the blocks journaled.
    Table { head_offset: u64, lengths: [u8; SYMBOLS], progress: TableProgress, blocks: u64 },
    /// A column: its head and the values on disk.
    Column { kind: ColumnKind, head_offset: u64, values: u64 },
}

impl<'s> SegmentWriter<'s> {
    /// [`Self::create_with`], written under `part` (kept when the writer is dropped, for
    /// [`Self::resume`]) and renamed to `path` by [`Self::finish`].
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn create_resumable(storage: &'s dyn Storage, path: &Path, part: &Path, design: &Design, codecs: &[Codec], ids: IdColumn, sketches: Option<SketchColumn>) -> Result<Self> {
        let file = storage.create(part).map_err(|e| Error::io(part, "create", e))?;
        let mut w = Self::with_file(storage, path, part, file, design, codecs, ids, sketches)?;
        let bytes = w.header.encode();
        w.put(&bytes)?;
        w.journal = Some(Journal { part: part.to_path_buf(), open: None });
        Ok(w)
    }

    /// Reopens `part`, which a resumable writer of the same design left at `state`: the
    /// bytes past `state.offset` are cut. The caller goes on with `state.section`
    /// ([`Self::resume_table`], [`Self::resume_column`]) or the next section.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn resume(storage: &'s dyn Storage, path: &Path, part: &Path, design: &Design, codecs: &[Codec], ids: IdColumn, sketches: Option<SketchColumn>, state: &WriterState) -> Result<Self> {
        let bytes = storage.read(part).map_err(|e| Error::io(part, "read", e))?;
        let corrupt = |what: &str| Error::InvalidArgument(format!("{}: cannot resume: {what}", part.display()));
        if (bytes.len() as u64) < state.offset {
            return Err(corrupt(&format!("{} bytes, the checkpoint names {}", bytes.len(), state.offset)));
        }
        drop(bytes);
        storage.truncate(part, state.offset).map_err(|e| Error::io(part, "truncate", e))?;
        let file = storage.append(part).map_err(|e| Error::io(part, "open", e))?;
        let mut w = Self::with_file(storage, path, part, file, design, codecs, ids, sketches)?;
        let header = w.header.encode();
        let on_disk = storage.read(part).map_err(|e| Error::io(part, "read", e))?;
        if on_disk.get(..header.len()) != Some(&header[..]) {
            return Err(corrupt("its header is not the one this merge writes"));
        }
        w.offset = state.offset;
        w.tables = state.tables.clone();
        w.ids_head = state.ids_head;
        w.sketches_head = state.sketches_head;
        w.journal = Some(Journal { part: part.to_path_buf(), open: None });
        Ok(w)
    }

    /// Goes on with the table `state` names (`code` from its lengths).
    pub(crate) fn resume_table<'w, 'c>(&'w mut self, code: &'c Code, state: &WriterState) -> Result<TableWriter<'w, 's, 'c>> {
        let Section::Table { head_offset, progress, blocks, .. } = state.section else {
            return Err(Error::InvalidArgument("no table to resume".into()));
        };
        let index = self.tables.len();
        let codec = self.header.tables.get(index).map(|t| t.codec).ok_or_else(|| Error::InvalidArgument(format!("the design has only {index} tables")))?;
        let journal = self.journal.as_mut().ok_or_else(|| Error::InvalidArgument("not a resumable writer".into()))?;
        let path = journal_path(&journal.part, index);
        let bytes = self.storage.read_copy(&path).map_err(|e| Error::io(&path, "read", e))?;
        let want = usize::try_from(blocks).unwrap_or(usize::MAX).saturating_mul(BLOCK_RECORD);
        let Some(records) = bytes.get(..want) else {
            return Err(Error::InvalidArgument(format!("{}: {} bytes, the checkpoint names {blocks} blocks", path.display(), bytes.len())));
        };
        let list: Vec<BlockEntry> = records
            .chunks_exact(BLOCK_RECORD)
            .filter_map(|r| {
                let (key, rest) = r.split_first_chunk::<8>()?;
                let (count, crc) = rest.split_first_chunk::<2>()?;
                Some(BlockEntry { key: u64::from_le_bytes(*key), count: u16::from_le_bytes(*count), crc: u32::from_le_bytes(crc.first_chunk::<4>().copied()?) })
            })
            .collect();
        self.storage.truncate(&path, want as u64).map_err(|e| Error::io(&path, "truncate", e))?;
        let file = self.storage.append(&path).map_err(|e| Error::io(&path, "open", e))?;
        journal.open = Some((index, BufWriter::new(file), list.len()));
        Ok(TableWriter::new(self, code, codec, head_offset, progress, list))
    }

    /// Goes on with the column `state` names.
    pub(crate) fn resume_column(&mut self, state: &WriterState) -> Result<ColumnWriter<'_, 's>> {
        let Section::Column { kind, head_offset, values } = state.section else {
            return Err(Error::InvalidArgument("no column to resume".into()));
        };
        let entries = self.tables.first().map_or(0, |t| t.entries);
        let (bytes, scheme) = match kind {
            ColumnKind::Ids => (8, [0; 8]),
            ColumnKind::Sketches => self.sketches.map(|s| (s.bytes, s.scheme)).ok_or_else(|| Error::InvalidArgument("the segment has no sketches".into()))?,
        };
        Ok(ColumnWriter::new(self, ColumnHead::new(kind, bytes, entries, scheme), head_offset, values))
    }

    fn sync_part(&mut self) -> Result<()> {
        let path = self.tmp_path.clone();
        self.out.flush().map_err(|e| Error::io(&path, "write", e))?;
        self.out.get_mut().sync().map_err(|e| Error::io(&path, "fsync", e))
    }

    fn state(&self, section: Section) -> WriterState {
        WriterState { offset: self.offset, tables: self.tables.clone(), ids_head: self.ids_head, sketches_head: self.sketches_head, section }
    }

    /// Removes the journals (the segment is finished, or the merge gives up).
    pub(super) fn remove_journals(&mut self) {
        if let Some(journal) = self.journal.as_mut() {
            journal.open = None;
            for t in 0..self.header.tables.len() {
                let _ = self.storage.remove(&journal_path(&journal.part, t));
            }
        }
    }
}

impl TableWriter<'_, '_, '_> {
    /// Makes the blocks written durable (the file, then the new blocks' journal records)
    /// and returns the state at the last block boundary.
    pub(crate) fn checkpoint(&mut self) -> Result<WriterState> {
        self.w.sync_part()?;
        let index = self.w.tables.len();
        let storage = self.w.storage;
        let journal = self.w.journal.as_mut().ok_or_else(|| Error::InvalidArgument("not a resumable writer".into()))?;
        if journal.open.as_ref().is_none_or(|(t, _, _)| *t != index) {
            let path = journal_path(&journal.part, index);
            let file = storage.create(&path).map_err(|e| Error::io(&path, "create", e))?;
            journal.open = Some((index, BufWriter::new(file), 0));
        }
        let path = journal_path(&journal.part, index);
        if let Some((_, out, done)) = journal.open.as_mut() {
            for b in self.blocks.get(*done..).unwrap_or_default() {
                let mut r = [0u8; BLOCK_RECORD];
                LE::write_u64(&mut r[..8], b.key);
                LE::write_u16(&mut r[8..10], b.count);
                LE::write_u32(&mut r[10..14], b.crc);
                out.write_all(&r).map_err(|e| Error::io(&path, "write", e))?;
            }
            *done = self.blocks.len();
            out.flush().map_err(|e| Error::io(&path, "write", e))?;
            out.get_mut().sync().map_err(|e| Error::io(&path, "fsync", e))?;
        }
        let section = Section::Table { head_offset: self.head_offset, lengths: *self.code().lengths(), progress: self.boundary, blocks: self.blocks.len() as u64 };
        Ok(self.w.state(section))
    }
}

impl ColumnWriter<'_, '_> {
    /// Makes the pages written durable and returns the state after the last of them.
    pub(crate) fn checkpoint(&mut self) -> Result<WriterState> {
        self.w.sync_part()?;
        let section = Section::Column { kind: self.head.kind, head_offset: self.head_offset, values: self.values_written() };
        Ok(self.w.state(section))
    }
}

impl WriterState {
    /// The state as bytes (`format-spec/engine.md`, "Merge checkpoints").
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&(self.tables.len() as u32).to_le_bytes());
        for t in &self.tables {
            for v in [t.head_offset, t.block_count, t.entries, t.index_offset] {
                out.extend_from_slice(&v.to_le_bytes());
            }
            out.extend_from_slice(&t.index_crc.to_le_bytes());
        }
        out.extend_from_slice(&self.ids_head.unwrap_or(0).to_le_bytes());
        out.extend_from_slice(&self.sketches_head.unwrap_or(0).to_le_bytes());
        match &self.section {
            Section::None => out.push(0),
            Section::Table { head_offset, lengths, progress, blocks } => {
                out.push(1);
                out.extend_from_slice(&head_offset.to_le_bytes());
                out.extend_from_slice(lengths);
                for v in [progress.entries, progress.last, progress.tail, *blocks] {
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
            Section::Column { kind, head_offset, values } => {
                out.push(1 + kind.id());
                out.extend_from_slice(&head_offset.to_le_bytes());
                out.extend_from_slice(&values.to_le_bytes());
            }
        }
    }

    /// Reads a state from the front of `r` (advanced past it); `None` when it is not one.
    pub(crate) fn decode(r: &mut &[u8]) -> Option<Self> {
        let offset = take_u64(r)?;
        let count = take_u32(r)?;
        let mut tables = Vec::new();
        for _ in 0..count {
            let (head_offset, block_count, entries, index_offset) = (take_u64(r)?, take_u64(r)?, take_u64(r)?, take_u64(r)?);
            tables.push(DirTable { head_offset, block_count, entries, index_offset, index_crc: take_u32(r)? });
        }
        let head = |v: u64| (v != 0).then_some(v);
        let (ids_head, sketches_head) = (head(take_u64(r)?), head(take_u64(r)?));
        let (&tag, rest) = r.split_first()?;
        *r = rest;
        let section = match tag {
            0 => Section::None,
            1 => {
                let head_offset = take_u64(r)?;
                let (lengths, rest) = r.split_first_chunk::<SYMBOLS>()?;
                *r = rest;
                let progress = TableProgress { entries: take_u64(r)?, last: take_u64(r)?, tail: take_u64(r)? };
                Section::Table { head_offset, lengths: *lengths, progress, blocks: take_u64(r)? }
            }
            2 | 3 => {
                let kind = if tag == 2 { ColumnKind::Ids } else { ColumnKind::Sketches };
                Section::Column { kind, head_offset: take_u64(r)?, values: take_u64(r)? }
            }
            _ => return None,
        };
        Some(Self { offset, tables, ids_head, sketches_head, section })
    }
}

/// Reads a little-endian u64 from the front of `r`.
pub(crate) fn take_u64(r: &mut &[u8]) -> Option<u64> {
    let (v, rest) = r.split_first_chunk::<8>()?;
    *r = rest;
    Some(u64::from_le_bytes(*v))
}

/// Reads a little-endian u32 from the front of `r`.
pub(crate) fn take_u32(r: &mut &[u8]) -> Option<u32> {
    let (v, rest) = r.split_first_chunk::<4>()?;
    *r = rest;
    Some(u32::from_le_bytes(*v))
}
