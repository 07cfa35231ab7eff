//! Writing a segment: a streaming [`SegmentWriter`] (one sorted table at a time, then the
//! document ids) and [`build_segment`], which sorts an in-memory set and drives the writer.
//!
//! A segment is written under `NAME.tmp`, synced, renamed to `NAME` and its directory
//! synced, so a reader never sees a partial segment under the final name.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::layout::*;
use crate::codec::{BlockEncoder, Code, Codec, SymbolHistogram, BLOCK_BYTES};
use crate::error::{Error, Result};
use crate::plan::Design;
use crate::storage::{parent_dir, temporary_path, Storage, TempFile, WriteFile};

/// Streams a segment to disk. Call [`Self::write_table`] once per table in order, then
/// [`Self::write_ids`] if the segment has ids, then [`Self::finish`]. Dropping the writer
/// before `finish` leaves only the temporary file, which the engine removes as an orphan.
pub struct SegmentWriter<'s> {
    storage: &'s dyn Storage,
    path: PathBuf,
    /// `NAME.tmp`: the name the file is written under where the storage cannot make an
    /// unnamed file, or linked for the instant before the rename where it can.
    tmp_path: PathBuf,
    /// Removes `NAME.tmp` if the writer is dropped unfinished (`None`: the file is unnamed,
    /// and a writer dropped, or a process killed, leaves nothing behind).
    tmp: Option<TempFile<'s>>,
    out: BufWriter<Box<dyn WriteFile>>,
    offset: u64,
    header: Header,
    tables: Vec<DirTable>,
    /// Offsets of the column heads written so far.
    ids_head: Option<u64>,
    sketches: Option<SketchColumn>,
    sketches_head: Option<u64>,
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
        let has_ids = ids == IdColumn::Present;
        if let Some(s) = sketches {
            if s.bytes == 0 || usize::from(s.bytes) > MAX_SKETCH_BYTES {
                return Err(Error::InvalidArgument(format!("a sketch of {} bytes: sketches hold 1 to {MAX_SKETCH_BYTES} bytes", s.bytes)));
            }
        }
        if codecs.len() != design.tables().len() {
            return Err(Error::InvalidArgument(format!(
                "{} codecs given for {} tables",
                codecs.len(),
                design.tables().len()
            )));
        }
        let header = Header {
            version: FORMAT_VERSION,
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
        let tmp_path = temporary_path(path);
        let dir = parent_dir(path);
        let (file, tmp) = match storage.create_unnamed(&dir).map_err(|e| Error::io(&dir, "create an unnamed file in", e))? {
            Some(file) => (file, None),
            None => {
                let tmp = TempFile::new(storage, tmp_path.clone());
                (storage.create(&tmp_path).map_err(|e| Error::io(&tmp_path, "create", e))?, Some(tmp))
            }
        };
        let mut w = Self {
            storage,
            path: path.to_path_buf(),
            tmp_path,
            tmp,
            out: BufWriter::with_capacity(1 << 20, file),
            offset: 0,
            header,
            tables: Vec::new(),
            ids_head: None,
            sketches,
            sketches_head: None,
        };
        let bytes = w.header.encode();
        w.put(&bytes)?;
        Ok(w)
    }

    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        self.out.write_all(bytes).map_err(|e| Error::io(&self.tmp_path, "write", e))?;
        self.offset += bytes.len() as u64;
        Ok(())
    }

    fn pad_to(&mut self, align: u64) -> Result<()> {
        let pad = align_up(self.offset, align) - self.offset;
        self.put(&vec![0u8; pad as usize])
    }

    /// Writes the next table from its entries, already permuted and sorted ascending, coded
    /// with `code` (normally built by [`SymbolHistogram`] from the same sequence). Returns
    /// the number of entries written.
    pub fn write_table(&mut self, code: &Code, values: impl IntoIterator<Item = u64>) -> Result<u64> {
        let index = self.tables.len();
        let Some(spec) = self.header.tables.get(index).cloned() else {
            return Err(Error::InvalidArgument(format!("the design has only {} tables", self.header.tables.len())));
        };
        self.pad_to(ALIGN)?;
        let head_offset = self.offset;
        let design = HeadDesign {
            table_count: self.header.tables.len() as u16,
            k: self.header.k,
            levels: self.header.levels.clone(),
            flags: self.header.flags(),
            order: spec.order,
        };
        let head = TableHead { index: index as u16, codec: spec.codec, prefix_bits: spec.prefix_bits, lengths: *code.lengths(), design: Some(design) };
        self.put(&head.encode())?;
        let mut keys: Vec<u64> = Vec::new();
        let mut counts: Vec<u16> = Vec::new();
        let mut crcs: Vec<u32> = Vec::new();
        let mut entries = 0u64;
        let mut enc = BlockEncoder::new(spec.codec, code);
        let mut prev: Option<u64> = None;
        for v in values {
            if let Some(p) = prev {
                if v < p {
                    return Err(Error::InvalidArgument(format!("table {index}: entry {entries} ({v:#018x}) is below the previous one ({p:#018x}); tables must be sorted")));
                }
                if code.word(spec.codec.gap(p, v).0).1 == 0 {
                    return Err(Error::InvalidArgument(format!("table {index}: the code has no word for the gap before entry {entries}; build the code from the same sequence")));
                }
            }
            prev = Some(v);
            entries += 1;
            if !enc.push(v) {
                self.emit_block(&mut enc, &mut keys, &mut counts, &mut crcs)?;
                enc.push(v);
            }
        }
        self.emit_block(&mut enc, &mut keys, &mut counts, &mut crcs)?;
        let index_offset = self.offset;
        let mut index_bytes = Vec::with_capacity(keys.len() * INDEX_BYTES_PER_BLOCK as usize);
        for &k in &keys {
            index_bytes.extend_from_slice(&k.to_le_bytes());
        }
        for &c in &counts {
            index_bytes.extend_from_slice(&c.to_le_bytes());
        }
        for &c in &crcs {
            index_bytes.extend_from_slice(&c.to_le_bytes());
        }
        self.put(&index_bytes)?;
        // The summary: per chunk of blocks, its first ordinal and the CRC of its slices of
        // the three columns; the table's index CRC covers the summary.
        let mut summary = Vec::new();
        let mut base = 0u64;
        let chunk = INDEX_CHUNK_BLOCKS as usize;
        for (c, ((k, n), r)) in keys.chunks(chunk).zip(counts.chunks(chunk)).zip(crcs.chunks(chunk)).enumerate() {
            let at = c * chunk;
            let n_blocks = keys.len();
            let mut h = crc32fast::Hasher::new();
            h.update(index_bytes.get(at * 8..(at + k.len()) * 8).unwrap_or_default());
            h.update(index_bytes.get(n_blocks * 8 + at * 2..n_blocks * 8 + (at + n.len()) * 2).unwrap_or_default());
            h.update(index_bytes.get(n_blocks * 10 + at * 4..n_blocks * 10 + (at + r.len()) * 4).unwrap_or_default());
            summary.extend_from_slice(&base.to_le_bytes());
            summary.extend_from_slice(&h.finalize().to_le_bytes());
            summary.extend_from_slice(&[0; 4]);
            base += n.iter().map(|&c| u64::from(c)).sum::<u64>();
        }
        let index_crc = crc32fast::hash(&summary);
        self.put(&summary)?;
        let table = DirTable { head_offset, block_count: keys.len() as u64, entries, index_offset, index_crc };
        let trailer_at = table.trailer_offset();
        self.put(&vec![0u8; (trailer_at - self.offset) as usize])?;
        self.put(&TableTrailer { index: index as u16, table }.encode())?;
        self.tables.push(table);
        Ok(entries)
    }

    fn emit_block(&mut self, enc: &mut BlockEncoder<'_>, keys: &mut Vec<u64>, counts: &mut Vec<u16>, crcs: &mut Vec<u32>) -> Result<()> {
        if let Some((block, count, key)) = enc.finish() {
            debug_assert_eq!(block.len(), BLOCK_BYTES);
            keys.push(key);
            counts.push(count as u16);
            crcs.push(crc32fast::hash(&block));
            self.put(&block)?;
        }
        Ok(())
    }

    /// Writes the document ids, in the order of table 0's entries (one per entry).
    pub fn write_ids(&mut self, ids: impl IntoIterator<Item = u64>) -> Result<()> {
        if !self.header.has_ids {
            return Err(Error::InvalidArgument("the segment was created without ids".into()));
        }
        if self.ids_head.is_some() {
            return Err(Error::InvalidArgument("the ids are already written".into()));
        }
        let head = self.write_column(ColumnKind::Ids, 8, [0; 8], ids.into_iter().map(u64::to_le_bytes))?;
        self.ids_head = Some(head);
        Ok(())
    }

    /// Writes the sketches (each [`SketchColumn::bytes`] long), in the order of table 0's
    /// entries, after the ids.
    pub fn write_sketches<S: AsRef<[u8]>>(&mut self, sketches: impl IntoIterator<Item = S>) -> Result<()> {
        let Some(spec) = self.sketches else {
            return Err(Error::InvalidArgument("the segment was created without sketches".into()));
        };
        if self.header.has_ids && self.ids_head.is_none() {
            return Err(Error::InvalidArgument("write the ids before the sketches".into()));
        }
        if self.sketches_head.is_some() {
            return Err(Error::InvalidArgument("the sketches are already written".into()));
        }
        let head = self.write_column(ColumnKind::Sketches, spec.bytes, spec.scheme, sketches)?;
        self.sketches_head = Some(head);
        Ok(())
    }

    /// Writes one column section (`format-spec/segment.md`): its head, then pages of
    /// values each ending with its CRC. Returns the head's offset.
    fn write_column<S: AsRef<[u8]>>(&mut self, kind: ColumnKind, value_bytes: u16, scheme: [u8; 8], values: impl IntoIterator<Item = S>) -> Result<u64> {
        if self.tables.len() != self.header.tables.len() {
            return Err(Error::InvalidArgument(format!("write every table before the {} column", kind.name())));
        }
        let entries = self.tables.first().map_or(0, |t| t.entries);
        let head = ColumnHead::new(kind, value_bytes, entries, scheme);
        self.pad_to(ALIGN)?;
        let head_offset = self.offset;
        self.put(&head.encode())?;
        let data_bytes = (PAGE_BYTES - PAGE_CRC_BYTES) as usize;
        let mut page = Vec::with_capacity(PAGE_BYTES as usize);
        let mut n = 0u64;
        for value in values {
            let value = value.as_ref();
            if value.len() != usize::from(value_bytes) {
                return Err(Error::InvalidArgument(format!("{} value {n} is {} bytes, the column holds {value_bytes}", kind.name(), value.len())));
            }
            page.extend_from_slice(value);
            n += 1;
            if n % u64::from(head.per_page) == 0 {
                self.put_page(&mut page, data_bytes)?;
            }
        }
        if !page.is_empty() {
            self.put_page(&mut page, data_bytes)?;
        }
        if n != entries {
            return Err(Error::InvalidArgument(format!("{n} {} values for {entries} entries", kind.name())));
        }
        Ok(head_offset)
    }

    /// Pads `page` to `data_bytes`, appends its CRC and writes it.
    fn put_page(&mut self, page: &mut Vec<u8>, data_bytes: usize) -> Result<()> {
        page.resize(data_bytes, 0);
        let crc = crc32fast::hash(page);
        page.extend_from_slice(&crc.to_le_bytes());
        self.put(page)?;
        page.clear();
        Ok(())
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
        self.pad_to(8)?;
        let columns = DirColumns::V2 { ids_head: self.ids_head.unwrap_or(0), sketches_head: self.sketches_head.unwrap_or(0) };
        let dir = Directory { entries, tables: self.tables.clone(), columns }.encode();
        let footer = Footer { dir_offset: self.offset, dir_len: dir.len() as u32, dir_crc: crc32fast::hash(&dir), version: FORMAT_VERSION };
        self.put(&dir)?;
        self.put(&footer.encode())?;
        let len = self.offset;
        let tmp_path = self.tmp_path;
        let mut file = self.out.into_inner().map_err(|e| Error::io(&tmp_path, "write", e.into_error()))?;
        file.sync().map_err(|e| Error::io(&tmp_path, "fsync", e))?;
        let tmp = match self.tmp {
            Some(tmp) => tmp,
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

/// How [`build_segment`] lays out a segment.
#[derive(Clone, Debug)]
pub struct BuildOptions {
    /// The design; `None` asks the planner with [`Self::k`] and the entry count.
    pub design: Option<Design>,
    /// Distance for the planner when no design is given.
    pub k: u32,
    /// Gap codec for every table.
    pub codec: Codec,
}

impl Default for BuildOptions {
    fn default() -> Self {
        Self { design: None, k: 3, codec: Codec::Xor }
    }
}

/// Builds a segment at `path` from unsorted fingerprints and optional document ids
/// (`ids`, when given, has one id per fingerprint). Returns the file's size in bytes.
pub fn build_segment(storage: &dyn Storage, path: &Path, fingerprints: &[u64], ids: Option<&[u64]>, options: &BuildOptions) -> Result<u64> {
    build_segment_with_progress(storage, path, fingerprints, ids, options, &mut |_, _| {})
}

/// [`build_segment`], calling `progress(tables_done, tables)` after each table.
pub fn build_segment_with_progress(
    storage: &dyn Storage,
    path: &Path,
    fingerprints: &[u64],
    ids: Option<&[u64]>,
    options: &BuildOptions,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<u64> {
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
        progress(t + 1, design.tables().len());
    }
    if ids.is_some() {
        writer.write_ids(pairs.iter().map(|p| p.1))?;
    }
    writer.finish()
}
