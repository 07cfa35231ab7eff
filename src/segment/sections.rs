//! The sections of a segment as they are written: a table ([`TableWriter`], entries pushed
//! in order and packed into blocks) and a column ([`ColumnWriter`], values pushed in order
//! and packed into pages). Each knows where it stands at its last boundary (a block or a
//! page on disk), which is what a resumable writer (`resumable`) records and goes on from.

use super::layout::*;
use super::writer::SegmentWriter;
use crate::codec::{BlockEncoder, Code, Codec, BLOCK_BYTES};
use crate::error::{Error, Result};

/// One block of a table as its index lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlockEntry {
    /// The block's last entry.
    pub key: u64,
    /// Entries in the block.
    pub count: u16,
    /// CRC-32 of the block's bytes.
    pub crc: u32,
}

/// Where a table being written stands at its last block boundary: every entry before it is
/// in a block on disk, none after it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TableProgress {
    /// Entries in the blocks written.
    pub entries: u64,
    /// The last of them (0 when there is none).
    pub last: u64,
    /// How many entries equal to `last` end the blocks written (a sorted stream resumes
    /// after skipping that many copies of `last`).
    pub tail: u64,
}

/// A table being written: [`Self::push`] its entries (permuted, ascending), then
/// [`Self::end`] it.
pub(crate) struct TableWriter<'w, 's, 'c> {
    pub(super) w: &'w mut SegmentWriter<'s>,
    code: &'c Code,
    codec: Codec,
    pub(super) head_offset: u64,
    enc: BlockEncoder<'c>,
    pub(super) blocks: Vec<BlockEntry>,
    entries: u64,
    prev: Option<u64>,
    run: u64,
    pub(super) boundary: TableProgress,
}

impl<'w, 's, 'c> TableWriter<'w, 's, 'c> {
    /// A table whose head is at `head_offset`, with `blocks` on disk holding what
    /// `progress` says (nothing for a new table).
    pub(super) fn new(w: &'w mut SegmentWriter<'s>, code: &'c Code, codec: Codec, head_offset: u64, progress: TableProgress, blocks: Vec<BlockEntry>) -> Self {
        let prev = (progress.entries > 0).then_some(progress.last);
        Self { w, code, codec, head_offset, enc: BlockEncoder::new(codec, code), blocks, entries: progress.entries, prev, run: progress.tail, boundary: progress }
    }

    /// Appends `v`; true when the block before it was just written (a boundary: see
    /// [`Self::progress`]).
    pub(crate) fn push(&mut self, v: u64) -> Result<bool> {
        let index = self.w.tables.len();
        if let Some(p) = self.prev {
            if v < p {
                return Err(Error::InvalidArgument(format!("table {index}: entry {} ({v:#018x}) is below the previous one ({p:#018x}); tables must be sorted", self.entries)));
            }
            if self.code.word(self.codec.gap(p, v).0).1 == 0 {
                return Err(Error::InvalidArgument(format!("table {index}: the code has no word for the gap before entry {}; build the code from the same sequence", self.entries)));
            }
        }
        let mut boundary = false;
        if !self.enc.push(v) {
            self.boundary = TableProgress { entries: self.entries, last: self.prev.unwrap_or(0), tail: self.run };
            self.w.emit_block(&mut self.enc, &mut self.blocks)?;
            self.enc.push(v);
            boundary = true;
        }
        self.run = if self.prev == Some(v) { self.run + 1 } else { 1 };
        self.prev = Some(v);
        self.entries += 1;
        Ok(boundary)
    }

    /// The code the table is written with.
    pub(super) fn code(&self) -> &'c Code {
        self.code
    }

    /// Writes the last block, the block index and the trailer. Returns the entries written.
    pub(crate) fn end(mut self) -> Result<u64> {
        self.w.emit_block(&mut self.enc, &mut self.blocks)?;
        self.w.end_table(self.head_offset, self.entries, &self.blocks)
    }
}

/// A column being written: [`Self::push`] one value per entry of table 0, in its order,
/// then [`Self::end`] it. In layout 3 a group's pages are held until the group is whole
/// and written with its CRC page, so every boundary is a group's end.
pub(crate) struct ColumnWriter<'w, 's> {
    pub(super) w: &'w mut SegmentWriter<'s>,
    pub(super) head: ColumnHead,
    pub(super) head_offset: u64,
    page: Vec<u8>,
    values: u64,
    /// Layout 3: the group's whole pages not yet written, and their CRCs.
    group: Option<(Vec<u8>, Vec<u8>)>,
}

impl<'w, 's> ColumnWriter<'w, 's> {
    /// A column whose head is at `head_offset`, with its first `values` values on disk
    /// (whole pages; in layout 3, whole groups).
    pub(super) fn new(w: &'w mut SegmentWriter<'s>, head: ColumnHead, head_offset: u64, values: u64) -> Self {
        let group = (head.layout >= SKETCH_LAYOUT).then(|| (Vec::with_capacity((GROUP_PAGES * PAGE_BYTES) as usize), Vec::with_capacity(PAGE_BYTES as usize)));
        Self { w, head, head_offset, page: Vec::with_capacity(PAGE_BYTES as usize), values, group }
    }

    /// Values a boundary holds: a page's (layout 2) or a group's (layout 3).
    fn unit(&self) -> u64 {
        let per_page = u64::from(self.head.per_page.max(1));
        if self.group.is_some() {
            per_page * GROUP_PAGES
        } else {
            per_page
        }
    }

    /// Appends one value; true when it completed a page (layout 3: a group), now written
    /// (a boundary).
    pub(crate) fn push(&mut self, value: &[u8]) -> Result<bool> {
        if value.len() != usize::from(self.head.value_bytes) {
            return Err(Error::InvalidArgument(format!("{} value {} is {} bytes, the column holds {}", self.head.kind.name(), self.values, value.len(), self.head.value_bytes)));
        }
        self.page.extend_from_slice(value);
        self.values += 1;
        if self.values % u64::from(self.head.per_page.max(1)) == 0 {
            self.close_page()?;
            return Ok(self.values % self.unit() == 0);
        }
        Ok(false)
    }

    /// Writes the page being filled (layout 2), or adds it to its group and writes the
    /// group when it is whole (layout 3).
    fn close_page(&mut self) -> Result<()> {
        let Some((pages, crcs)) = self.group.as_mut() else {
            return self.w.put_page(&mut self.page, (PAGE_BYTES - PAGE_CRC_BYTES) as usize);
        };
        self.page.resize(PAGE_BYTES as usize, 0);
        crcs.extend_from_slice(&crc32fast::hash(&self.page).to_le_bytes());
        pages.extend_from_slice(&self.page);
        self.page.clear();
        if crcs.len() as u64 == GROUP_PAGES * 4 {
            self.write_group()?;
        }
        Ok(())
    }

    /// Layout 3: writes the group's pages, then its CRC page.
    fn write_group(&mut self) -> Result<()> {
        let Some((pages, crcs)) = self.group.as_mut() else { return Ok(()) };
        if crcs.is_empty() {
            return Ok(());
        }
        self.w.put(pages)?;
        self.w.put_page(crcs, (PAGE_BYTES - PAGE_CRC_BYTES) as usize)?;
        pages.clear();
        Ok(())
    }

    /// Values on disk: the whole pages (layout 3: groups) written.
    pub(crate) fn values_written(&self) -> u64 {
        let unit = self.unit();
        self.values / unit * unit
    }

    /// Writes the last page (and group) and records the column in the writer. Returns the
    /// head's offset.
    pub(crate) fn end(mut self) -> Result<u64> {
        if !self.page.is_empty() {
            self.close_page()?;
        }
        self.write_group()?;
        if self.values != self.head.entries {
            return Err(Error::InvalidArgument(format!("{} {} values for {} entries", self.values, self.head.kind.name(), self.head.entries)));
        }
        match self.head.kind {
            ColumnKind::Ids => self.w.ids_head = Some(self.head_offset),
            ColumnKind::Sketches => self.w.sketches_head = Some(self.head_offset),
        }
        Ok(self.head_offset)
    }
}

impl<'s> SegmentWriter<'s> {
    /// Writes the next table from its entries, already permuted and sorted ascending, coded
    /// with `code` (normally built by [`SymbolHistogram`] from the same sequence). Returns
    /// the number of entries written.
    pub fn write_table(&mut self, code: &Code, values: impl IntoIterator<Item = u64>) -> Result<u64> {
        let mut table = self.begin_table(code)?;
        for v in values {
            table.push(v)?;
        }
        table.end()
    }

    /// Starts the next table (its head is written): push its entries, then end it.
    pub(crate) fn begin_table<'w, 'c>(&'w mut self, code: &'c Code) -> Result<TableWriter<'w, 's, 'c>> {
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
        Ok(TableWriter::new(self, code, spec.codec, head_offset, TableProgress::default(), Vec::new()))
    }

    pub(super) fn emit_block(&mut self, enc: &mut BlockEncoder<'_>, blocks: &mut Vec<BlockEntry>) -> Result<()> {
        if let Some((block, count, key)) = enc.finish() {
            debug_assert_eq!(block.len(), BLOCK_BYTES);
            blocks.push(BlockEntry { key, count: count as u16, crc: crc32fast::hash(&block) });
            self.put(&block)?;
        }
        Ok(())
    }

    /// Ends table `index` (head at `head_offset`, `entries` entries in `blocks`): its block
    /// index, summary and trailer.
    pub(super) fn end_table(&mut self, head_offset: u64, entries: u64, blocks: &[BlockEntry]) -> Result<u64> {
        let index = self.tables.len();
        let index_offset = self.offset;
        let mut index_bytes = Vec::with_capacity(blocks.len() * INDEX_BYTES_PER_BLOCK as usize);
        for b in blocks {
            index_bytes.extend_from_slice(&b.key.to_le_bytes());
        }
        for b in blocks {
            index_bytes.extend_from_slice(&b.count.to_le_bytes());
        }
        for b in blocks {
            index_bytes.extend_from_slice(&b.crc.to_le_bytes());
        }
        self.put(&index_bytes)?;
        // The summary: per chunk of blocks, its first ordinal and the CRC of its slices of
        // the three columns; the table's index CRC covers the summary.
        let mut summary = Vec::new();
        let mut base = 0u64;
        let chunk = INDEX_CHUNK_BLOCKS as usize;
        let n_blocks = blocks.len();
        for (c, part) in blocks.chunks(chunk).enumerate() {
            let (at, len) = (c * chunk, part.len());
            let mut h = crc32fast::Hasher::new();
            h.update(index_bytes.get(at * 8..(at + len) * 8).unwrap_or_default());
            h.update(index_bytes.get(n_blocks * 8 + at * 2..n_blocks * 8 + (at + len) * 2).unwrap_or_default());
            h.update(index_bytes.get(n_blocks * 10 + at * 4..n_blocks * 10 + (at + len) * 4).unwrap_or_default());
            summary.extend_from_slice(&base.to_le_bytes());
            summary.extend_from_slice(&h.finalize().to_le_bytes());
            summary.extend_from_slice(&[0; 4]);
            base += part.iter().map(|b| u64::from(b.count)).sum::<u64>();
        }
        let index_crc = crc32fast::hash(&summary);
        self.put(&summary)?;
        let table = DirTable { head_offset, block_count: n_blocks as u64, entries, index_offset, index_crc };
        let trailer_at = table.trailer_offset();
        self.put(&vec![0u8; (trailer_at - self.offset) as usize])?;
        self.put(&TableTrailer { index: index as u16, table }.encode())?;
        self.tables.push(table);
        Ok(entries)
    }

    /// Writes the document ids, in the order of table 0's entries (one per entry).
    pub fn write_ids(&mut self, ids: impl IntoIterator<Item = u64>) -> Result<()> {
        let mut column = self.begin_ids()?;
        for id in ids {
            column.push(&id.to_le_bytes())?;
        }
        column.end().map(drop)
    }

    /// Starts the id column (after every table).
    pub(crate) fn begin_ids(&mut self) -> Result<ColumnWriter<'_, 's>> {
        if !self.header.has_ids {
            return Err(Error::InvalidArgument("the segment was created without ids".into()));
        }
        if self.ids_head.is_some() {
            return Err(Error::InvalidArgument("the ids are already written".into()));
        }
        self.begin_column(ColumnKind::Ids, 8, [0; 8])
    }

    /// Writes the sketches (each [`SketchColumn::bytes`] long), in the order of table 0's
    /// entries, after the ids.
    pub fn write_sketches<S: AsRef<[u8]>>(&mut self, sketches: impl IntoIterator<Item = S>) -> Result<()> {
        let mut column = self.begin_sketches()?;
        for s in sketches {
            column.push(s.as_ref())?;
        }
        column.end().map(drop)
    }

    /// Starts the sketch column (after the ids).
    pub(crate) fn begin_sketches(&mut self) -> Result<ColumnWriter<'_, 's>> {
        let Some(spec) = self.sketches else {
            return Err(Error::InvalidArgument("the segment was created without sketches".into()));
        };
        if self.header.has_ids && self.ids_head.is_none() {
            return Err(Error::InvalidArgument("write the ids before the sketches".into()));
        }
        if self.sketches_head.is_some() {
            return Err(Error::InvalidArgument("the sketches are already written".into()));
        }
        self.begin_column(ColumnKind::Sketches, spec.bytes, spec.scheme)
    }

    /// Starts a column section (`format-spec/segment.md`; its head is written): push its
    /// values (pages of values, each ending with its CRC), then end it.
    fn begin_column(&mut self, kind: ColumnKind, value_bytes: u16, scheme: [u8; 8]) -> Result<ColumnWriter<'_, 's>> {
        if self.tables.len() != self.header.tables.len() {
            return Err(Error::InvalidArgument(format!("write every table before the {} column", kind.name())));
        }
        let entries = self.tables.first().map_or(0, |t| t.entries);
        let head = ColumnHead::new(kind, value_bytes, entries, scheme);
        self.pad_to(ALIGN)?;
        let head_offset = self.offset;
        self.put(&head.encode())?;
        Ok(ColumnWriter::new(self, head, head_offset, 0))
    }

    /// Pads `page` to `data_bytes`, appends its CRC and writes it.
    pub(super) fn put_page(&mut self, page: &mut Vec<u8>, data_bytes: usize) -> Result<()> {
        page.resize(data_bytes, 0);
        let crc = crc32fast::hash(page);
        page.extend_from_slice(&crc.to_le_bytes());
        self.put(page)?;
        page.clear();
        Ok(())
    }
}
