//! Reading a segment: [`Segment::open`] maps the file and checks its structure cheaply
//! (header, design, footer, directory, table heads and block indexes, but not the blocks);
//! queries then check the CRC of every block and id page they touch (a block once per open
//! segment: its mapped bytes do not change, so a block that matched is not checked again).

use std::path::{Path, PathBuf};

use byteorder::{ByteOrder, LittleEndian as LE};

use super::index::{BlockIndex, SEEK_HINTS};

mod sketches;
use super::layout::*;
use crate::codec::{decode_block, BlockError, Code, Codec, Cursor, DeltaGaps, Gaps, XorGaps, BLOCK_BYTES};
use crate::error::{Error, Location, Result};
use crate::integrity::{check_magic_and_version, verify_crc, Fault};
use crate::plan::{prefix_mask, Design, Permutation, ProbePlan, TableDesign, MAX_K};
use crate::query::{finish_matches, Match, QueryOptions};
use crate::storage::{FileBytes, FsStorage, Storage};

/// An open, immutable segment file.
#[derive(Debug)]
pub struct Segment {
    path: PathBuf,
    bytes: FileBytes,
    version: u32,
    design: Design,
    entries: u64,
    tables: Vec<Table>,
    ids: Option<ColumnAt>,
    sketches: Option<ColumnAt>,
    cold: ColdReads,
}

/// Whether queries on a mapped segment should ask for their blocks ahead: set when
/// touching a query's first blocks takes disk time (a major fault), for the next
/// [`ColdReads::QUERIES`] queries, then measured again. Warm queries pay one clock read.
#[derive(Debug, Default)]
struct ColdReads(std::sync::atomic::AtomicU32);

impl ColdReads {
    /// Queries that ask ahead after a cold one.
    const QUERIES: u32 = 256;
    /// Touching a query's first blocks slower than this means they came from the disk.
    const DISK: std::time::Duration = std::time::Duration::from_micros(50);

    fn is_cold(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed) > 0
    }

    fn observe(&self, was_cold: bool, touch: std::time::Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        if touch > Self::DISK {
            self.0.store(Self::QUERIES, Relaxed);
        } else if was_cold {
            let _ = self.0.fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1));
        }
    }
}

/// Where a column's pages are: version 1's id array (page CRCs in an array after it) or a
/// version-2 column (each page ends with its CRC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ColumnAt {
    /// Offset of the first page.
    pub pages_offset: u64,
    /// Distance between the starts of consecutive pages.
    pub page_stride: u64,
    /// Bytes per value.
    pub value_bytes: u64,
    /// Values per page.
    pub per_page: u64,
    /// Version 1: where the array of page CRCs starts; version 2: `None`, the CRC is in
    /// each page's last [`PAGE_CRC_BYTES`].
    pub crcs_offset: Option<u64>,
    /// The column head's scheme tag (zero for ids and in version 1).
    pub scheme: [u8; 8],
    /// Version 2: the column head's offset.
    pub head_offset: Option<u64>,
}

impl ColumnAt {
    /// Version 1's id column.
    pub(crate) fn v1_ids(ids: &DirIds) -> Self {
        Self {
            pages_offset: ids.ids_offset,
            page_stride: IDS_PER_PAGE_V1 * 8,
            value_bytes: 8,
            per_page: IDS_PER_PAGE_V1,
            crcs_offset: Some(ids.crcs_offset),
            scheme: [0; 8],
            head_offset: None,
        }
    }

    /// A version-2 column with `head` at `head_offset`.
    pub(crate) fn v2(head: &ColumnHead, head_offset: u64) -> Self {
        Self {
            pages_offset: head_offset + COLUMN_HEAD_BYTES,
            page_stride: PAGE_BYTES,
            value_bytes: u64::from(head.value_bytes),
            per_page: u64::from(head.per_page),
            crcs_offset: None,
            scheme: head.scheme,
            head_offset: Some(head_offset),
        }
    }

    /// Pages holding `entries` values.
    pub(crate) fn pages(&self, entries: u64) -> u64 {
        entries.div_ceil(self.per_page.max(1))
    }

    /// Where page `page` starts and how many value bytes it holds, of `entries` values.
    pub(crate) fn page_span(&self, page: u64, entries: u64) -> (u64, u64) {
        let values = entries.saturating_sub(page * self.per_page).min(self.per_page);
        (self.pages_offset + page * self.page_stride, values * self.value_bytes)
    }

    /// Where the column's last byte ends.
    pub(crate) fn end(&self, entries: u64) -> u64 {
        let pages = self.pages(entries);
        match self.crcs_offset {
            Some(crcs) => crcs + pages * 4,
            None => self.pages_offset + pages * self.page_stride,
        }
    }

    /// Where the CRC of page `page` is stored.
    pub(crate) fn crc_offset(&self, page: u64) -> u64 {
        match self.crcs_offset {
            Some(crcs) => crcs + page * 4,
            None => self.pages_offset + page * self.page_stride + PAGE_BYTES - PAGE_CRC_BYTES,
        }
    }
}

/// One permuted table of an open segment.
#[derive(Debug)]
pub struct Table {
    /// The table's number in the design (its position in the file).
    number: usize,
    design: TableDesign,
    codec: Codec,
    code: Code,
    dir: DirTable,
    /// The block index, read in place and checked as it is used.
    index: BlockIndex,
    /// The file, for errors found after opening.
    path: PathBuf,
}

impl Table {
    /// The table's number in the segment's design.
    pub fn number(&self) -> usize {
        self.number
    }

    /// The table's permutation and prefix length.
    pub fn design(&self) -> &TableDesign {
        &self.design
    }

    /// The gap codec.
    pub fn codec(&self) -> Codec {
        self.codec
    }

    /// The Huffman code.
    pub fn code(&self) -> &Code {
        &self.code
    }

    /// Number of blocks.
    pub fn block_count(&self) -> u64 {
        self.dir.block_count
    }

    /// Number of entries.
    pub fn entries(&self) -> u64 {
        self.dir.entries
    }

    /// Block keys (the last permuted fingerprint of each block), after checking the whole
    /// block index (once; a query checks only the parts it uses).
    pub fn keys(&self) -> Result<&[u64]> {
        self.index.checked_keys().map_err(|f| f.in_table(self.number).into_error(&self.path))
    }

    /// Position in the table of block `b`'s first entry (the table's entry count for a
    /// block past the end). As stored: checked once a block of its index chunk is read.
    pub fn first_ordinal(&self, b: u64) -> u64 {
        self.index.first_ordinal(b)
    }

    /// Entries in block `b` (0 for a block past the end). As stored: checked once a block
    /// of its index chunk is read.
    #[inline(always)]
    pub fn block_entries(&self, b: u64) -> u32 {
        self.index.count(b)
    }

    /// The keys as stored, unchecked: for hints that cannot change an answer (where to
    /// cut work between threads), never for finding entries.
    pub(crate) fn raw_keys(&self) -> &[u64] {
        self.index.raw_keys()
    }

    /// The first block whose key is `>= x`, confirmed by checked keys.
    #[inline]
    pub(crate) fn lower_bound(&self, x: u64) -> Result<u64> {
        self.index.lower_bound(x).map_err(|f| f.in_table(self.number).into_error(&self.path))
    }

    /// Checks the block-index chunk holding block `b` (once).
    pub(crate) fn check_index_chunk(&self, b: u64) -> Result<()> {
        self.index.check_block(b).map_err(|f| f.in_table(self.number).into_error(&self.path))
    }

    /// Key of block `b`, after checking its index chunk.
    #[inline]
    pub(crate) fn key(&self, b: u64) -> Result<u64> {
        self.index.key(b).map_err(|f| f.in_table(self.number).into_error(&self.path))
    }

    /// Byte offset of block `b` in the file.
    pub fn block_offset(&self, b: u64) -> u64 {
        self.dir.blocks_offset() + b * BLOCK_BYTES as u64
    }

    /// Byte offset of the table head.
    pub fn head_offset(&self) -> u64 {
        self.dir.head_offset
    }

    /// Byte offset of the block index.
    pub fn index_offset(&self) -> u64 {
        self.dir.index_offset
    }

    pub(crate) fn dir(&self) -> &DirTable {
        &self.dir
    }

    fn crc_offset(&self, b: u64) -> u64 {
        self.index.crc_offset(b)
    }

    /// Asks for the cache line of the block key where a search for `x` ([`Self::lower_bound`],
    /// an interpolation search) looks first, without waiting for it.
    #[inline(always)]
    fn prefetch_search(&self, x: u64) {
        let keys = self.raw_keys();
        if let (Some(&first), Some(&last)) = (keys.first(), keys.last()) {
            if first < x && x <= last {
                let guess = ((x - first) as f64 / (last - first) as f64 * (keys.len() - 1) as f64) as usize;
                if let Some(key) = keys.get(guess) {
                    prefetch_line(key);
                }
            }
        }
    }
}

impl Segment {
    /// Opens the segment at `path` on the real file system.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(&FsStorage, path.as_ref())
    }

    /// Opens the segment at `path` through `storage`.
    pub fn open_with(storage: &dyn Storage, path: &Path) -> Result<Self> {
        let bytes = storage.read(path).map_err(|e| Error::io(path, "open", e))?;
        Self::from_bytes(path.to_path_buf(), bytes)
    }

    /// Opens a segment held in memory; `path` is used in error messages.
    pub fn from_bytes(path: PathBuf, bytes: FileBytes) -> Result<Self> {
        let corrupt = |f: Fault| f.into_error(&path);
        let version = check_magic_and_version(&path, &bytes, &HEADER_MAGIC, "segment (magic SIMDXSEG)", OLDEST_VERSION..=FORMAT_VERSION)?;
        let (header, _) = Header::decode(&bytes).map_err(corrupt)?;
        let design = design_from_header(&header).map_err(corrupt)?;
        let dir = read_directory(&bytes, version).map_err(corrupt)?;
        if dir.tables.len() != header.tables.len() {
            return Err(corrupt(Fault::at(
                bytes.len() as u64 - FOOTER_BYTES as u64,
                format!("directory lists {} tables, header {}", dir.tables.len(), header.tables.len()),
            )));
        }
        let mut tables = Vec::with_capacity(dir.tables.len());
        for (i, (d, td)) in dir.tables.iter().zip(design.tables()).enumerate() {
            let table = open_table(&path, &bytes, version, i, d, td.clone(), dir.entries).map_err(|f| corrupt(f.in_table(i)))?;
            check_head_matches_header(&bytes, version, d.head_offset, i, &header).map_err(|f| corrupt(f.in_table(i)))?;
            tables.push(table);
        }
        // Version 2 opened only the block indexes' summaries: ask the kernel to read the
        // indexes now, in the background (1.4% of the file), so that the first queries'
        // key searches do not each wait for the disk.
        if version >= 2 {
            for d in &dir.tables {
                bytes.will_need(d.index_offset as usize, (d.block_count * INDEX_BYTES_PER_BLOCK) as usize);
            }
        }
        let (ids, sketches) = match dir.columns {
            DirColumns::V1(ids) => {
                let ids = if header.has_ids {
                    check_ids_v1(&bytes, dir.entries, &ids).map_err(corrupt)?;
                    Some(ColumnAt::v1_ids(&ids))
                } else {
                    None
                };
                (ids, None)
            }
            DirColumns::V2 { ids_head, sketches_head } => {
                let column = |present: bool, at: u64, kind: ColumnKind| -> Result<Option<ColumnAt>> {
                    match (present, at) {
                        (false, 0) => Ok(None),
                        (true, at) if at > 0 => open_column(&bytes, at, kind, dir.entries).map(Some).map_err(corrupt),
                        _ => Err(corrupt(Fault::at(bytes.len() as u64 - FOOTER_BYTES as u64, format!("the header and the directory disagree on whether a {} column exists", kind.name())))),
                    }
                };
                (column(header.has_ids, ids_head, ColumnKind::Ids)?, column(header.has_sketches, sketches_head, ColumnKind::Sketches)?)
            }
        };
        Ok(Segment { path, bytes, version, design, entries: dir.entries, tables, ids, sketches, cold: ColdReads::default() })
    }

    /// A segment assembled by salvage from the parts of a damaged file that open
    /// (`scan.rs`): `tables` may be a subset of the design's, in table order.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn from_salvaged_parts(
        path: PathBuf,
        bytes: FileBytes,
        version: u32,
        design: Design,
        entries: u64,
        tables: Vec<Table>,
        ids: Option<ColumnAt>,
        sketches: Option<ColumnAt>,
    ) -> Self {
        Segment { path, bytes, version, design, entries, tables, ids, sketches, cold: ColdReads::default() }
    }

    /// The file's format version.
    pub fn format_version(&self) -> u32 {
        self.version
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The design the segment was built with.
    pub fn design(&self) -> &Design {
        &self.design
    }

    /// Number of stored fingerprints (with repeats).
    pub fn len(&self) -> u64 {
        self.entries
    }

    /// True when the segment stores nothing.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Size of the file in bytes.
    pub fn file_len(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// The tables, in stored order.
    pub fn tables(&self) -> &[Table] {
        &self.tables
    }

    /// True when the segment stores document ids.
    pub fn has_ids(&self) -> bool {
        self.ids.is_some()
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub(crate) fn ids_column(&self) -> Option<&ColumnAt> {
        self.ids.as_ref()
    }

    pub(crate) fn sketches_column(&self) -> Option<&ColumnAt> {
        self.sketches.as_ref()
    }

    /// True when the segment stores a sketch beside each fingerprint.
    pub fn has_sketches(&self) -> bool {
        self.sketches.is_some()
    }

    /// The sketch column's bytes per sketch and scheme tag, when it has one.
    pub fn sketch_layout(&self) -> Option<(usize, [u8; 8])> {
        self.sketches.map(|c| (c.value_bytes as usize, c.scheme))
    }

    fn corrupt(&self, offset: u64, location: Location, detail: impl Into<String>) -> Error {
        Error::Corrupt { path: self.path.clone(), offset, location, detail: detail.into() }
    }

    /// Table `t`, or an error naming the tables there are.
    #[inline(always)]
    fn table(&self, t: usize) -> Result<&Table> {
        match self.tables.get(t) {
            Some(table) => Ok(table),
            None => Err(self.no_such_table(t)),
        }
    }

    #[cold]
    fn no_such_table(&self, t: usize) -> Error {
        Error::InvalidArgument(format!("table {t} out of range ({} tables)", self.tables.len()))
    }

    /// The `N` bytes at `at`. Open checked that every structure is inside the file, so a
    /// miss means the segment's own offsets are inconsistent: reported as damage.
    #[inline(always)]
    fn array<const N: usize>(&self, at: u64, location: Location, what: &str) -> Result<&[u8; N]> {
        array(&self.bytes, at, what).map_err(|f| Fault { location, ..f }.into_error(&self.path))
    }

    /// The bytes of block `b` of table `t`, after checking them against the block's CRC.
    pub fn block(&self, t: usize, b: u64) -> Result<&[u8]> {
        self.checked_block(t, b).map(|block| block.as_slice())
    }

    /// [`Self::block`] as an array.
    #[inline(always)]
    fn checked_block(&self, t: usize, b: u64) -> Result<&[u8; BLOCK_BYTES]> {
        let table = self.table(t)?;
        if b >= table.dir.block_count {
            return Err(Error::InvalidArgument(format!("block {b} out of range (table {t} has {} blocks)", table.dir.block_count)));
        }
        let at = table.block_offset(b);
        let loc = Location { table: Some(table.number), block: Some(b) };
        table.index.check_block(b).map_err(|f| Fault { location: loc, ..f }.into_error(&self.path))?;
        let block = self.array::<BLOCK_BYTES>(at, loc, "block")?;
        if !table.index.is_verified(b) {
            self.verify_block(table, b, block)?;
        }
        Ok(block)
    }

    /// Checks `block`, block `b` of `table`, against its stored CRC, and records that it
    /// matched: the first read of a block through this open segment pays the check, later
    /// reads of the same (immutable) mapped bytes do not.
    #[inline(never)]
    fn verify_block(&self, table: &Table, b: u64, block: &[u8; BLOCK_BYTES]) -> Result<()> {
        let loc = Location { table: Some(table.number), block: Some(b) };
        let stored = self.array::<4>(table.crc_offset(b), loc, "block checksum")?;
        verify_crc(block, u32::from_le_bytes(*stored)).map_err(|m| m.corrupt(&self.path, table.block_offset(b), loc, "block"))?;
        table.index.mark_verified(b);
        Ok(())
    }

    /// Decodes block `b` of table `t` (after its CRC check), calling `visit` with each
    /// permuted entry until it returns false.
    pub fn visit_block(&self, t: usize, b: u64, visit: impl FnMut(u64) -> bool) -> Result<()> {
        self.visit_block_inline(t, b, visit)
    }

    /// [`Self::visit_block`], inlined into the query loop so that it is compiled with the
    /// loop's instruction set.
    #[inline(always)]
    fn visit_block_inline(&self, t: usize, b: u64, visit: impl FnMut(u64) -> bool) -> Result<()> {
        let table = self.table(t)?;
        let block = self.checked_block(t, b)?;
        decode_block(table.codec, &table.code, block, table.block_entries(b), visit)
            .map_err(|e| self.block_error(t, b, e))?;
        Ok(())
    }

    /// Every entry of table `t` in stored (permuted, sorted) order.
    pub fn table_entries(&self, t: usize) -> TableEntries<'_> {
        // An unknown table has one "block": visiting it reports the error once.
        let blocks = self.tables.get(t).map_or(1, |table| table.dir.block_count);
        TableEntries { segment: self, table: t, block: 0, blocks, buf: Vec::new(), at: 0 }
    }

    /// All stored `(fingerprint, document id)` pairs in fingerprint order (ids are `None`
    /// without an id column).
    pub fn entries(&self) -> impl Iterator<Item = Result<(u64, Option<u64>)>> + '_ {
        let mut ids = self.ids.is_some().then(|| self.doc_ids());
        self.table_entries(0).map(move |r| {
            let fp = r?;
            let id = match ids.as_mut() {
                Some(ids) => Some(ids.next().unwrap_or_else(|| Err(self.corrupt(0, Location::default(), "fewer document ids than entries")))?),
                None => None,
            };
            Ok((fp, id))
        })
    }

    /// Every document id in table 0's order, checking each id page's CRC once (empty for
    /// a segment without ids).
    pub fn doc_ids(&self) -> impl Iterator<Item = Result<u64>> + '_ {
        let pages = self.ids.map_or(0, |c| c.pages(self.entries));
        (0..pages).flat_map(move |page| {
            if let Some(c) = &self.ids {
                self.scan_hint(c.pages_offset, c.page_stride, page, pages);
            }
            let (ok, err) = match self.ids.as_ref().map(|c| self.page(c, page, ColumnKind::Ids)) {
                Some(Ok(bytes)) => (Some(bytes.chunks_exact(8).map(|c| Ok(LE::read_u64(c)))), None),
                Some(Err(e)) => (None, Some(Err(e))),
                None => (None, None),
            };
            ok.into_iter().flatten().chain(err)
        })
    }

    /// Read-ahead and release for a sequential scan over `count` units of `unit` bytes
    /// starting at `start` (blocks of a table, pages of a column), called as the scan
    /// reaches unit `i`: the mapping is random-access (`FileBytes`), so a scan asks for the
    /// window after the one it enters and lets go of the one two behind it.
    fn scan_hint(&self, start: u64, unit: u64, i: u64, count: u64) {
        if i % SCAN_WINDOW != 0 || !self.bytes.is_mapped() {
            return;
        }
        let span = |from: u64| (start + from * unit, count.min(from + SCAN_WINDOW).saturating_sub(from) * unit);
        let ask = |(offset, len): (u64, u64)| {
            if len > 0 {
                self.bytes.will_need(offset as usize, len as usize);
            }
        };
        if i == 0 {
            ask(span(0));
        }
        ask(span(i + SCAN_WINDOW));
        if let Some(behind) = i.checked_sub(2 * SCAN_WINDOW) {
            let (offset, len) = span(behind);
            self.bytes.done_with(offset as usize, len as usize);
        }
    }

    /// The document id of table 0's entry number `ordinal` (after its page's CRC check).
    pub fn doc_id(&self, ordinal: u64) -> Result<u64> {
        let column = self.ids.as_ref().ok_or_else(|| Error::InvalidArgument("the segment has no document ids".into()))?;
        let id: &[u8; 8] = self.value(column, ordinal, ColumnKind::Ids)?.try_into().map_err(|_| self.corrupt(0, Location::default(), "document id of the wrong width"))?;
        Ok(u64::from_le_bytes(*id))
    }

    /// The sketch of table 0's entry number `ordinal` (after its page's CRC check).
    pub fn sketch(&self, ordinal: u64) -> Result<&[u8]> {
        let column = self.sketches.as_ref().ok_or_else(|| Error::InvalidArgument("the segment has no sketches".into()))?;
        self.value(column, ordinal, ColumnKind::Sketches)
    }

    /// Value `ordinal` of `column`.
    fn value(&self, column: &ColumnAt, ordinal: u64, kind: ColumnKind) -> Result<&[u8]> {
        if ordinal >= self.entries {
            return Err(Error::InvalidArgument(format!("entry {ordinal} out of range ({} entries)", self.entries)));
        }
        let bytes = self.page(column, ordinal / column.per_page, kind)?;
        let at = (ordinal % column.per_page) * column.value_bytes;
        slice(bytes, at, column.value_bytes, kind.name()).map_err(|f| f.into_error(&self.path))
    }

    /// The value bytes of page `page` of `column`, after checking its CRC.
    pub(crate) fn page(&self, column: &ColumnAt, page: u64, kind: ColumnKind) -> Result<&[u8]> {
        let (start, len) = column.page_span(page, self.entries);
        let what = format!("{} page {page}", kind.name());
        let bytes = slice(&self.bytes, start, len, &what).map_err(|f| f.into_error(&self.path))?;
        let stored = self.array::<4>(column.crc_offset(page), Location::default(), "page checksum")?;
        let checked = match column.crcs_offset {
            Some(_) => bytes,
            // Version 2: the CRC covers the whole page before it, padding included.
            None => slice(&self.bytes, start, PAGE_BYTES - PAGE_CRC_BYTES, &what).map_err(|f| f.into_error(&self.path))?,
        };
        verify_crc(checked, u32::from_le_bytes(*stored)).map_err(|m| m.corrupt(&self.path, start, Location::default(), what))?;
        Ok(bytes)
    }

    /// All stored fingerprints within `options.k` bits of `fingerprint`, each once, sorted
    /// by distance, fingerprint and id.
    pub fn query(&self, fingerprint: u64, options: &QueryOptions) -> Result<Vec<Match>> {
        let mut out = Vec::new();
        self.query_into(fingerprint, options, &mut out)?;
        Ok(out)
    }

    /// Appends the matches of one query to `out` (cleared first), each once, sorted by
    /// distance, fingerprint and id.
    pub fn query_into(&self, fingerprint: u64, options: &QueryOptions, out: &mut Vec<Match>) -> Result<()> {
        out.clear();
        options.check_against(self.design.k())?;
        let mut found: Vec<u64> = Vec::new();
        if options.k > self.design.k() {
            // Above the design's k: multi-probe (`plan::ProbePlan`), or a scan where the
            // plan says a scan is cheaper or k is above what a plan covers.
            let plan = if options.k <= MAX_K { Some(ProbePlan::cached(&self.design, options.k, self.entries)?) } else { None };
            match plan {
                Some(plan) if options.always_probe || !plan.prefers_scan() => self.multi_probe(fingerprint, &plan, &mut found)?,
                _ => return self.scan_into(fingerprint, options.k, out),
            }
        } else {
            self.probe_all(fingerprint, options.k, &mut found)?;
        }
        found.sort_unstable();
        found.dedup();
        for fp in found {
            let distance = (fp ^ fingerprint).count_ones();
            if self.ids.is_some() {
                self.ids_of(fp, |id| out.push(Match { distance, fingerprint: fp, doc_id: Some(id) }))?;
            } else {
                out.push(Match { distance, fingerprint: fp, doc_id: None });
            }
        }
        finish_matches(out);
        Ok(())
    }

    /// Probes every table, with the decoding loop compiled for the best instruction set the
    /// CPU has: on x86-64 with BMI2 and POPCNT, variable shifts and population counts are
    /// single instructions, which makes decoding about 20% faster than the portable build.
    fn probe_all(&self, fingerprint: u64, k: u32, found: &mut Vec<u64>) -> Result<()> {
        #[cfg(target_arch = "x86_64")]
        if crate::cpu::has_bmi2_popcnt() {
            // SAFETY: `probe_all_bmi2` needs only BMI1, BMI2 and POPCNT, which
            // `has_bmi2_popcnt` has just confirmed this CPU supports. Exercised by every
            // query test on such CPUs; `tests::dispatched_and_portable_probes_agree`
            // checks it against the portable loop.
            return unsafe { self.probe_all_bmi2(fingerprint, k, found) };
        }
        self.probe_all_portable(fingerprint, k, found)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "bmi1,bmi2,popcnt")]
    fn probe_all_bmi2(&self, fingerprint: u64, k: u32, found: &mut Vec<u64>) -> Result<()> {
        self.probe_all_portable(fingerprint, k, found)
    }

    /// When this segment's queries are reading from the disk (see [`ColdReads`]), asks the
    /// kernel now for the first block of every table a query of `fingerprint` probes, so
    /// that an index directory can start the reads of all its segments before it queries
    /// any. Costs one atomic load when warm.
    pub(crate) fn prefetch_if_cold(&self, fingerprint: u64) {
        if !self.cold.is_cold() {
            return;
        }
        for table in &self.tables {
            let q = table.design.permutation.apply(fingerprint);
            if let Ok(b) = table.lower_bound(q & table.design.prefix_mask()) {
                if b < table.dir.block_count {
                    self.bytes.will_need(table.block_offset(b) as usize, BLOCK_BYTES);
                }
            }
        }
    }

    #[inline(always)]
    fn probe_all_portable(&self, fingerprint: u64, k: u32, found: &mut Vec<u64>) -> Result<()> {
        // Find every table's first block and touch its cache lines before decoding any:
        // the blocks of a large segment are usually not in the CPU cache, and loads issued
        // together overlap their memory latency instead of paying it table after table.
        let mut starts = [0u64; PREFETCH_TABLES];
        let mut counts = [0u32; PREFETCH_TABLES];
        // Each key search's first probe is an interpolation between the table's first and
        // last keys, usually a cache miss: ask for every table's line first, so that the
        // searches' misses overlap instead of coming one table after the other.
        for table in self.tables.iter().take(PREFETCH_TABLES) {
            table.prefetch_search(table.design.permutation.apply(fingerprint) & table.design.prefix_mask());
        }
        for (start, table) in starts.iter_mut().zip(&self.tables) {
            let q = table.design.permutation.apply(fingerprint);
            *start = table.lower_bound(q & table.design.prefix_mask())?;
        }
        // On disk and cold (recent queries waited for the disk), ask for every table's
        // block at once, so that their reads overlap instead of faulting one by one.
        let cold = self.cold.is_cold();
        if cold {
            for (&start, table) in starts.iter().zip(&self.tables).filter(|(&s, t)| s < t.dir.block_count) {
                self.bytes.will_need(table.block_offset(start) as usize, BLOCK_BYTES);
            }
        }
        let clock = self.bytes.is_mapped().then(std::time::Instant::now);
        for ((&start, count), table) in starts.iter().zip(counts.iter_mut()).zip(&self.tables).filter(|((&s, _), t)| s < t.dir.block_count) {
            let at = table.block_offset(start) as usize;
            let block = self.bytes.get(at..).unwrap_or_default().iter().take(BLOCK_BYTES);
            for &byte in block.step_by(64) {
                std::hint::black_box(byte);
            }
            // The block's seek hints, when it has them, are away from it too.
            if let Some(word) = table.index.hints_word(start) {
                prefetch_line(word);
            }
            // The entry count lives in the block index, away from the block: loading it
            // here overlaps its cache miss with the blocks'. (Used only after the block's
            // index chunk is checked.)
            *count = table.block_entries(start);
        }
        if let Some(clock) = clock {
            self.cold.observe(cold, clock.elapsed());
        }
        // Decode the tables' blocks in turn, one entry of each per round: each table's
        // decoding is a serial chain (where an entry ends depends on the one before), and
        // advancing several chains in one loop lets the CPU overlap them.
        let n = self.tables.len().min(PREFETCH_TABLES);
        let codec = self.tables.first().map(|t| t.codec);
        if n > 1 && self.tables.iter().all(|t| Some(t.codec) == codec) {
            let mut lanes: [Option<Lane<'_>>; PREFETCH_TABLES] = [None; PREFETCH_TABLES];
            for (t, (lane, table)) in lanes.iter_mut().zip(&self.tables).enumerate() {
                let (Some(&start), Some(&count)) = (starts.get(t), counts.get(t)) else { continue };
                let q = table.design.permutation.apply(fingerprint);
                *lane = Some(Lane::new(t, table, q, q, table.design.prefix_bits, start));
                if start < table.dir.block_count {
                    if let Some(lane) = lane.as_mut() {
                        self.enter_block(lane, start, count, k, found)?;
                    }
                }
            }
            self.run_group(codec, lanes.get_mut(..n).unwrap_or_default(), k, found)?;
            for t in n..self.tables.len() {
                self.probe(t, fingerprint, k, None, found)?;
            }
            return Ok(());
        }
        for t in 0..self.tables.len() {
            let start = starts.get(t).copied().zip(counts.get(t).copied());
            self.probe(t, fingerprint, k, start, found)?;
        }
        Ok(())
    }

    /// [`Self::run_lanes`] for lanes whose tables all have `codec`; empties `lanes`.
    #[inline(always)]
    fn run_group<'s>(&'s self, codec: Option<Codec>, lanes: &mut [Option<Lane<'s>>], k: u32, found: &mut Vec<u64>) -> Result<()> {
        let r = match codec {
            Some(Codec::Delta) => self.run_lanes::<DeltaGaps>(lanes, k, found),
            _ => self.run_lanes::<XorGaps>(lanes, k, found),
        };
        lanes.fill(None);
        r
    }

    /// Advances every lane one entry per round until all are done.
    #[inline(always)]
    fn run_lanes<'s, G: Gaps>(&'s self, lanes: &mut [Option<Lane<'s>>], k: u32, found: &mut Vec<u64>) -> Result<()> {
        loop {
            let mut active = false;
            for lane in lanes.iter_mut().flatten() {
                if lane.done {
                    continue;
                }
                active = true;
                if lane.cursor.as_ref().is_none_or(|c| c.remaining() == 0) {
                    self.next_block(lane, k, found)?;
                    continue;
                }
                let Some(cursor) = lane.cursor.as_mut() else { continue };
                let v = if lane.seeking {
                    match cursor.seek_step::<G>(lane.lo, lane.low_bits, &mut lane.top) {
                        Ok(Some(v)) => {
                            lane.seeking = false;
                            v
                        }
                        Ok(None) => continue,
                        Err(e) => return Err(self.block_error(lane.t, lane.b, e)),
                    }
                } else {
                    cursor.next::<G>().map_err(|e| self.block_error(lane.t, lane.b, e))?
                };
                lane.check(v, k, found);
            }
            if !active {
                return Ok(());
            }
        }
    }

    /// A lane whose block is decoded: on to the next block if the run may go on there.
    #[inline(never)]
    fn next_block<'s>(&'s self, lane: &mut Lane<'s>, k: u32, found: &mut Vec<u64>) -> Result<()> {
        if lane.cursor.is_none() {
            // The probe's first block is past the table's end: nothing to read.
            lane.done = true;
            return Ok(());
        }
        if lane.table.key(lane.b)? > lane.hi || lane.b + 1 >= lane.table.dir.block_count {
            lane.done = true;
            return Ok(());
        }
        let b = lane.b + 1;
        self.enter_block(lane, b, lane.table.block_entries(b), k, found)
    }

    /// Starts `lane` on block `b` (holding `count` entries, as stored): checks its CRC,
    /// reads its first entry and either checks it (it is in the run) or starts the seek.
    #[inline(never)]
    fn enter_block<'s>(&'s self, lane: &mut Lane<'s>, b: u64, count: u32, k: u32, found: &mut Vec<u64>) -> Result<()> {
        let mut cursor = self.cursor(lane.t, b, count)?;
        let first = cursor.first();
        lane.b = b;
        if first >= lane.lo {
            lane.seeking = false;
            lane.check(first, k, found);
        } else {
            lane.seeking = true;
            lane.top = cursor.seek_start(lane.low_bits);
            if lane.table.codec == Codec::Xor {
                if let Some(top) = self.restart_seek(lane.table, b, &mut cursor, lane.lo, lane.low_bits) {
                    lane.top = top;
                }
            }
        }
        lane.cursor = Some(cursor);
        Ok(())
    }

    /// Moves `cursor` (on block `b` of `table`, an XOR table, after its first entry) ahead
    /// to the furthest seek hint that is still below `lo`, and returns the `top` for
    /// [`Cursor::seek_step`] with `low_bits` from there; `None` leaves the cursor where it
    /// is. The block's hints are found on its first use.
    ///
    /// A hint marks an entry where the table's prefix changes (the XOR code rebuilds that
    /// entry whole from the prefix before it): its bit offset, its index and the prefix
    /// before it. Every entry before a hint has at most that prefix, so when the prefix
    /// is below `lo`'s, the seek may start at the hint, knowing only the prefix. Layout of
    /// a word: bit 63 set once the block's hints are found; bits 0..14 the bit offset (0:
    /// no hint in this word); bits 14..28 the entry; bits 28..63 the prefix before it.
    #[inline(always)]
    fn restart_seek(&self, table: &Table, b: u64, cursor: &mut Cursor<'_>, lo: u64, low_bits: u32) -> Option<u64> {
        let table_low = 64 - table.design.prefix_bits;
        if table.design.prefix_bits > HINT_PREFIX_BITS || table.design.prefix_bits == 0 || low_bits < table_low || low_bits >= 64 {
            return None;
        }
        let mut hints = table.index.hints(b);
        if hints[0] & HINT_BUILT == 0 {
            hints = self.find_hints(table, cursor, table_low);
            table.index.set_hints(b, hints);
        }
        let lo_prefix = lo >> table_low;
        let mut best = None;
        for h in hints {
            let (bit, entry, before) = ((h & 0x3fff) as usize, ((h >> 14) & 0x3fff) as u32, (h >> 28) & HINT_PREFIX_MASK);
            if bit != 0 && before < lo_prefix {
                best = Some((bit, entry, before));
            }
        }
        let (bit, entry, before) = best?;
        cursor.restart(bit, entry).then(|| before >> (low_bits - table_low))
    }

    /// Decodes the block under `cursor` (a copy: the cursor does not move) and returns its
    /// seek hints: for each quarter of its entries, the first entry from there on where
    /// the prefix (the bits above `table_low`) changes. A block that does not decode gets
    /// no hints (the query's own decoding reports it).
    #[cold]
    #[inline(never)]
    fn find_hints(&self, table: &Table, cursor: &Cursor<'_>, table_low: u32) -> [u64; SEEK_HINTS] {
        let mut hints = [HINT_BUILT; SEEK_HINTS];
        let _ = table;
        let mut c = *cursor;
        let count = c.remaining() + 1;
        let mut prefix = c.prev() >> table_low;
        let mut slot = 0usize;
        let mut entry = 1u32;
        while c.remaining() > 0 && slot < SEEK_HINTS {
            let bit = c.bit();
            let Ok(v) = c.next::<XorGaps>() else { return [HINT_BUILT; SEEK_HINTS] };
            let p = v >> table_low;
            if p != prefix {
                // This entry fills every slot whose quarter starts at or before it.
                while slot < SEEK_HINTS && (slot as u64 * u64::from(count)).div_ceil(SEEK_HINTS as u64) <= u64::from(entry) {
                    if let Some(h) = hints.get_mut(slot) {
                        *h = HINT_BUILT | (prefix & HINT_PREFIX_MASK) << 28 | u64::from(entry) << 14 | bit as u64;
                    }
                    slot += 1;
                }
                prefix = p;
            }
            entry += 1;
        }
        hints
    }

    /// Finds the entries of table `t` sharing the query's prefix and within `k`; pushes the
    /// matches, un-permuted, to `found`.
    #[inline(always)]
    fn probe(&self, t: usize, fingerprint: u64, k: u32, start: Option<(u64, u32)>, found: &mut Vec<u64>) -> Result<()> {
        let table = self.table(t)?;
        let q = table.design.permutation.apply(fingerprint);
        self.probe_range(t, table, q, q, table.design.prefix_bits, k, start, found)
    }

    /// Answers a distance above the design's with the prefix variants of `plan`, with the
    /// decoding loop compiled as in [`Self::probe_all`].
    fn multi_probe(&self, fingerprint: u64, plan: &ProbePlan, found: &mut Vec<u64>) -> Result<()> {
        #[cfg(target_arch = "x86_64")]
        if crate::cpu::has_bmi2_popcnt() {
            // SAFETY: as in `probe_all`: `has_bmi2_popcnt` has just confirmed BMI1, BMI2
            // and POPCNT. Checked against brute force by the multi-probe proptests.
            return unsafe { self.multi_probe_bmi2(fingerprint, plan, found) };
        }
        self.multi_probe_portable(fingerprint, plan, found)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "bmi1,bmi2,popcnt")]
    fn multi_probe_bmi2(&self, fingerprint: u64, plan: &ProbePlan, found: &mut Vec<u64>) -> Result<()> {
        self.multi_probe_portable(fingerprint, plan, found)
    }

    #[inline(always)]
    fn multi_probe_portable(&self, fingerprint: u64, plan: &ProbePlan, found: &mut Vec<u64>) -> Result<()> {
        // Find every probe's first block and touch it before decoding any, as `probe_all`
        // does: the loads overlap instead of waiting one after the other.
        let mut starts: Vec<(u64, u32)> = Vec::with_capacity(plan.tables().iter().map(|p| p.flips.len()).sum());
        for (table, probes) in self.tables.iter().zip(plan.tables()) {
            let q = table.design.permutation.apply(fingerprint);
            let mask = prefix_mask(probes.probe_bits);
            for &flip in &probes.flips {
                table.prefetch_search((q ^ flip) & mask);
            }
        }
        for (table, probes) in self.tables.iter().zip(plan.tables()) {
            let q = table.design.permutation.apply(fingerprint);
            let mask = prefix_mask(probes.probe_bits);
            for &flip in &probes.flips {
                let b = table.lower_bound((q ^ flip) & mask)?;
                if b < table.dir.block_count {
                    prefetch_block(self.bytes.get(table.block_offset(b) as usize..).unwrap_or_default());
                }
                starts.push((b, table.block_entries(b)));
            }
        }
        // Decode the probes' blocks in turn, as `probe_all` does, a group at a time.
        let codec = self.tables.first().map(|t| t.codec);
        if self.tables.iter().all(|t| Some(t.codec) == codec) {
            let mut lanes: [Option<Lane<'_>>; PREFETCH_TABLES] = [None; PREFETCH_TABLES];
            let mut filled = 0;
            let mut starts = starts.iter();
            for (t, (table, probes)) in self.tables.iter().zip(plan.tables()).enumerate() {
                let q = table.design.permutation.apply(fingerprint);
                for &flip in &probes.flips {
                    let Some(&(start, count)) = starts.next() else { break };
                    let mut lane = Lane::new(t, table, q, q ^ flip, probes.probe_bits, start);
                    if start < table.dir.block_count {
                        self.enter_block(&mut lane, start, count, plan.k(), found)?;
                    }
                    if let Some(slot) = lanes.get_mut(filled) {
                        *slot = Some(lane);
                        filled += 1;
                    }
                    if filled == lanes.len() {
                        self.run_group(codec, &mut lanes, plan.k(), found)?;
                        filled = 0;
                    }
                }
            }
            let group = lanes.get_mut(..filled).unwrap_or_default();
            return self.run_group(codec, group, plan.k(), found);
        }
        let mut starts = starts.into_iter();
        for (t, (table, probes)) in self.tables.iter().zip(plan.tables()).enumerate() {
            let q = table.design.permutation.apply(fingerprint);
            for &flip in &probes.flips {
                self.probe_range(t, table, q, q ^ flip, probes.probe_bits, plan.k(), starts.next(), found)?;
            }
        }
        Ok(())
    }

    /// Pushes the entries of table `t` (`table`) whose top `bits` bits equal `variant`'s and
    /// that are within `k` of `q` (both permuted), un-permuted, to `found`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn probe_range(&self, t: usize, table: &Table, q: u64, variant: u64, bits: u32, k: u32, start: Option<(u64, u32)>, found: &mut Vec<u64>) -> Result<()> {
        match table.codec {
            Codec::Xor => self.probe_with::<XorGaps>(t, table, q, variant, bits, k, start, found),
            Codec::Delta => self.probe_with::<DeltaGaps>(t, table, q, variant, bits, k, start, found),
        }
    }

    /// [`Self::probe_range`] with the table's codec; `start`, when known, is the table's
    /// first block for this query and its entry count as stored.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn probe_with<G: Gaps>(&self, t: usize, table: &Table, q: u64, variant: u64, bits: u32, k: u32, start: Option<(u64, u32)>, found: &mut Vec<u64>) -> Result<()> {
        let permutation = &table.design.permutation;
        let low_bits = 64 - bits;
        let mask = prefix_mask(bits);
        let (lo, hi) = (variant & mask, variant | !mask);
        let (mut b, mut count) = match start {
            Some(start) => start,
            None => {
                let b = table.lower_bound(lo)?;
                (b, table.block_entries(b))
            }
        };
        while b < table.dir.block_count {
            let mut cursor = self.cursor(t, b, count)?;
            // Pass over the entries below the run, then check every entry in it.
            let first = cursor.first();
            let start = if first >= lo { Some(first) } else { cursor.seek::<G>(lo, low_bits).map_err(|e| self.block_error(t, b, e))? };
            if let Some(mut v) = start {
                loop {
                    if v > hi {
                        return Ok(());
                    }
                    if (v ^ q).count_ones() <= k {
                        found.push(permutation.invert(v));
                    }
                    if cursor.remaining() == 0 {
                        break;
                    }
                    v = cursor.next::<G>().map_err(|e| self.block_error(t, b, e))?;
                }
            }
            if table.key(b)? > hi {
                break;
            }
            b += 1;
            count = table.block_entries(b);
        }
        Ok(())
    }

    /// A cursor over block `b` of table `t`, after its CRC check; `count` is the block's
    /// entry count as stored in the index (read by the caller, checked here with the
    /// index chunk before it is used).
    #[inline(always)]
    fn cursor(&self, t: usize, b: u64, count: u32) -> Result<Cursor<'_>> {
        let table = self.table(t)?;
        let block = self.checked_block(t, b)?;
        Cursor::new(&table.code, block, count).map_err(|e| self.block_error(t, b, e))
    }

    #[cold]
    fn block_error(&self, t: usize, b: u64, e: BlockError) -> Error {
        let (offset, number) = self.tables.get(t).map_or((0, t), |table| (table.block_offset(b), table.number));
        self.corrupt(offset, Location { table: Some(number), block: Some(b) }, e.to_string())
    }

    /// Calls `each` with every document id stored under fingerprint `fp` (table 0 is the
    /// identity, and ids follow its order).
    fn ids_of(&self, fp: u64, mut each: impl FnMut(u64)) -> Result<()> {
        let ordinals = self.ordinals_of(fp)?;
        if ordinals.is_empty() {
            return Err(self.missing_from_table0(fp));
        }
        for ordinal in ordinals {
            each(self.doc_id(ordinal)?);
        }
        Ok(())
    }

    /// Exact answer for any `k` by scanning table 0.
    fn scan_into(&self, fingerprint: u64, k: u32, out: &mut Vec<Match>) -> Result<()> {
        let mut ordinal = 0u64;
        let mut hits: Vec<(u64, u64)> = Vec::new();
        for b in 0..self.tables.first().map_or(0, |t| t.dir.block_count) {
            self.visit_block(0, b, |v| {
                if (v ^ fingerprint).count_ones() <= k {
                    hits.push((v, ordinal));
                }
                ordinal += 1;
                true
            })?;
        }
        for (fp, ordinal) in hits {
            let doc_id = if self.ids.is_some() { Some(self.doc_id(ordinal)?) } else { None };
            out.push(Match { distance: (fp ^ fingerprint).count_ones(), fingerprint: fp, doc_id });
        }
        finish_matches(out);
        Ok(())
    }
}

/// Blocks (or pages) a sequential scan asks the kernel for at a time: 2 MiB (8 KiB in unit
/// tests, so that small segments cross many windows).
const SCAN_WINDOW: u64 = if cfg!(test) { 8 } else { 2048 };

/// Set in every seek hint word once the block's hints are found.
const HINT_BUILT: u64 = 1 << 63;
/// Longest table prefix seek hints hold.
const HINT_PREFIX_BITS: u32 = 35;
const HINT_PREFIX_MASK: u64 = (1 << HINT_PREFIX_BITS) - 1;

/// Tables whose first blocks a query prefetches together (the rest are probed one by one).
const PREFETCH_TABLES: usize = 32;

/// Asks the CPU to load the cache lines of the block starting at `bytes[0]` without waiting
/// for them (a hint: nothing happens where prefetching is not available).
#[inline(always)]
fn prefetch_block(bytes: &[u8]) {
    for line in bytes.iter().take(BLOCK_BYTES).step_by(64) {
        prefetch_line(line);
    }
}

/// Asks the CPU to load the cache line holding `value` without waiting for it.
#[inline(always)]
fn prefetch_line<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that never faults, whatever the address; SSE, which it
    // needs, is part of every x86-64 CPU. The pointer comes from a live reference.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>((value as *const T).cast::<i8>())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// One table's probe in the interleaved query loop ([`Segment::run_lanes`]): the entries
/// of `table` whose top `low_bits`-complement bits equal the variant's (`lo..=hi`) and that
/// are within `k` of `q`.
#[derive(Clone, Copy)]
struct Lane<'s> {
    /// The cursor over block `b`; `None` before the first block (or when there is none).
    cursor: Option<Cursor<'s>>,
    table: &'s Table,
    /// The table's position in the segment.
    t: usize,
    b: u64,
    q: u64,
    lo: u64,
    hi: u64,
    low_bits: u32,
    /// While seeking: the previous entry's prefix ([`Cursor::seek_step`]).
    top: u64,
    /// Passing over the entries below `lo`.
    seeking: bool,
    /// The run has ended.
    done: bool,
}

impl<'s> Lane<'s> {
    /// A lane for the entries of `table` (number `t`) sharing `variant`'s top `bits` bits,
    /// within `k` of `q` (both permuted), starting at block `start`.
    fn new(t: usize, table: &'s Table, q: u64, variant: u64, bits: u32, start: u64) -> Self {
        let mask = prefix_mask(bits);
        Lane { cursor: None, table, t, b: start, q, lo: variant & mask, hi: variant | !mask, low_bits: 64 - bits, top: 0, seeking: false, done: false }
    }

    /// Checks entry `v` of the run: ends the lane past the run, keeps `v` when within `k`.
    #[inline(always)]
    fn check(&mut self, v: u64, k: u32, found: &mut Vec<u64>) {
        if v > self.hi {
            self.done = true;
        } else if (v ^ self.q).count_ones() <= k {
            found.push(self.table.design.permutation.invert(v));
        }
    }
}

/// Iterator over one table's entries in stored order, decoding a block at a time.
pub struct TableEntries<'s> {
    segment: &'s Segment,
    table: usize,
    block: u64,
    blocks: u64,
    buf: Vec<u64>,
    at: usize,
}

impl Iterator for TableEntries<'_> {
    type Item = Result<u64>;

    fn next(&mut self) -> Option<Result<u64>> {
        while self.at == self.buf.len() {
            if self.block >= self.blocks {
                return None;
            }
            self.buf.clear();
            self.at = 0;
            if let Some(table) = self.segment.tables.get(self.table) {
                self.segment.scan_hint(table.dir.blocks_offset(), BLOCK_BYTES as u64, self.block, self.blocks);
            }
            let buf = &mut self.buf;
            let r = self.segment.visit_block(self.table, self.block, |v| {
                buf.push(v);
                true
            });
            self.block += 1;
            if let Err(e) = r {
                self.block = self.blocks;
                return Some(Err(e));
            }
        }
        let v = self.buf.get(self.at).copied();
        self.at += 1;
        v.map(Ok)
    }
}

pub(crate) fn design_from_header(header: &Header) -> Result<Design, Fault> {
    let tables = header
        .tables
        .iter()
        .enumerate()
        .map(|(i, t)| {
            Permutation::from_order(t.order)
                .map(|permutation| TableDesign { permutation, prefix_bits: u32::from(t.prefix_bits) })
                .ok_or_else(|| Fault::at(H_LEVELS as u64, format!("table {i}: stored permutation is not a permutation of 0..64")).in_table(i))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let levels: Vec<u32> = header.levels.iter().map(|&r| u32::from(r)).collect();
    Design::from_parts(u32::from(header.k), &levels, tables).map_err(|e| Fault::at(H_K as u64, format!("stored design is invalid: {e}")))
}

pub(crate) fn read_directory(bytes: &[u8], version: u32) -> Result<Directory, Fault> {
    let len = bytes.len() as u64;
    if len < FOOTER_BYTES as u64 + ALIGN {
        return Err(Fault::at(len, format!("file is only {len} bytes: too short to hold a header and a footer; it was cut short")));
    }
    let footer = Footer::decode(bytes)?;
    let footer_at = len - FOOTER_BYTES as u64;
    if footer.version != version {
        return Err(Fault::at(footer_at + F_VERSION as u64, format!("footer says format version {}, header says {version}", footer.version)));
    }
    let dir_bytes = slice(bytes, footer.dir_offset, u64::from(footer.dir_len), "directory")?;
    if footer.dir_offset + u64::from(footer.dir_len) != footer_at {
        return Err(Fault::at(footer.dir_offset, "directory does not end where the footer starts"));
    }
    verify_crc(dir_bytes, footer.dir_crc).map_err(|m| m.fault(footer.dir_offset, Location::default(), "directory"))?;
    Directory::decode(dir_bytes, footer.dir_offset, version)
}

/// Opens table `i` located by `d` (from the directory, or a trailer): its head, code and
/// block index (version 2: its summary only; version 1: whole); in version 2 also its
/// trailer, which must repeat `d`. `path` names the file in errors found later.
pub(crate) fn open_table(path: &Path, bytes: &FileBytes, version: u32, i: usize, d: &DirTable, design: TableDesign, entries: u64) -> Result<Table, Fault> {
    let head = TableHead::decode(bytes, d.head_offset, version)?;
    if head.index as usize != i || u32::from(head.prefix_bits) != design.prefix_bits {
        return Err(Fault::at(d.head_offset, format!(
            "table head (index {}, prefix {}) disagrees with the design (index {i}, prefix {})",
            head.index, head.prefix_bits, design.prefix_bits
        )));
    }
    if let Some(h) = &head.design {
        if h.order != *design.permutation.order() {
            return Err(Fault::at(d.head_offset + T_ORDER as u64, "table head's permutation disagrees with the design"));
        }
    }
    let mut code = Code::from_lengths(&head.lengths).map_err(|e| Fault::at(d.head_offset + T_LENGTHS as u64, e.to_string()))?;
    code.mark_prefix_changes(64 - design.prefix_bits);
    if d.entries != entries {
        return Err(Fault::at(d.head_offset, format!("table holds {} entries, the segment {entries}", d.entries)));
    }
    let blocks_len = d.block_count.checked_mul(BLOCK_BYTES as u64).ok_or_else(|| Fault::at(d.head_offset, "block count overflows"))?;
    slice(bytes, d.blocks_offset(), blocks_len, "blocks")?;
    if d.index_offset != d.blocks_offset() + blocks_len {
        return Err(Fault::at(d.index_offset, "block index does not follow the blocks"));
    }
    if version >= 2 {
        let trailer = TableTrailer::decode(bytes, d.trailer_offset())?;
        if trailer.table != *d || usize::from(trailer.index) != i {
            return Err(Fault::at(d.trailer_offset(), "table trailer disagrees with the directory"));
        }
    }
    let index = BlockIndex::open(bytes, version, d)?;
    Ok(Table { number: i, design, codec: head.codec, code, dir: *d, index, path: path.to_path_buf() })
}

/// Checks that table `i`'s head agrees with the header: codec, and in version 2 the
/// design and flags it repeats.
fn check_head_matches_header(bytes: &[u8], version: u32, at: u64, i: usize, header: &Header) -> Result<(), Fault> {
    let head = TableHead::decode(bytes, at, version)?;
    let Some(h) = header.tables.get(i) else { return Err(Fault::at(at, format!("the header has no table {i}"))) };
    if head.codec != h.codec {
        return Err(Fault::at(at + T_CODEC as u64, format!("table head says codec {}, the header {}", head.codec.name(), h.codec.name())));
    }
    if let Some(d) = head.design {
        if usize::from(d.table_count) != header.tables.len() || d.k != header.k || d.levels != header.levels || d.flags != header.flags() {
            return Err(Fault::at(at + T_VERSION as u64, "table head's copy of the design or flags disagrees with the header"));
        }
    }
    Ok(())
}

/// Version 1: checks that the id array and its page CRCs are where the directory says.
pub(crate) fn check_ids_v1(bytes: &[u8], entries: u64, ids: &DirIds) -> Result<(), Fault> {
    let pages = entries.div_ceil(IDS_PER_PAGE_V1);
    slice(bytes, ids.ids_offset, entries * 8, "document ids")?;
    if ids.crcs_offset != ids.ids_offset + entries * 8 {
        return Err(Fault::at(ids.crcs_offset, "id-page checksums do not follow the ids"));
    }
    let crcs = slice(bytes, ids.crcs_offset, pages * 4, "id-page checksums")?;
    verify_crc(crcs, ids.crcs_crc).map_err(|m| m.fault(ids.crcs_offset, Location::default(), "id-page checksums"))
}

/// Version 2: opens the column of `kind` whose head is at `at`, holding `entries` values.
pub(crate) fn open_column(bytes: &[u8], at: u64, kind: ColumnKind, entries: u64) -> Result<ColumnAt, Fault> {
    let head = ColumnHead::decode(bytes, at)?;
    if head.kind != kind {
        return Err(Fault::at(at + C_KIND as u64, format!("a {} column where the directory puts the {} column", head.kind.name(), kind.name())));
    }
    if head.entries != entries {
        return Err(Fault::at(at + C_ENTRIES as u64, format!("{} column holds {} values for {entries} entries", kind.name(), head.entries)));
    }
    let column = ColumnAt::v2(&head, at);
    slice(bytes, column.pages_offset, column.end(entries) - column.pages_offset, &format!("{} pages", kind.name()))?;
    Ok(column)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::segment::{build_segment, BuildOptions};

    #[test]
    fn dispatched_and_portable_probes_agree() {
        let mut x = 77u64;
        let fps: Vec<u64> = (0..20_000)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if i % 3 == 0 { x & 0xffff_0000_0000_ffff } else { x }
            })
            .collect();
        let dir = std::env::temp_dir().join(format!("simdex-dispatch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sdx");
        build_segment(&FsStorage, &path, &fps, None, &BuildOptions::default()).unwrap();
        let seg = Segment::open(&path).unwrap();
        for (i, &f) in fps.iter().enumerate().step_by(97) {
            let q = f ^ (1 << (i % 64)) ^ (1 << ((i * 7) % 64));
            let (mut a, mut b) = (Vec::new(), Vec::new());
            seg.probe_all(q, 3, &mut a).unwrap();
            seg.probe_all_portable(q, 3, &mut b).unwrap();
            a.sort_unstable();
            b.sort_unstable();
            assert!(!a.is_empty());
            assert_eq!(a, b);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn sequential_scans_advise_and_read_the_same_bytes() {
        // A mapped segment of many scan windows: every scan (which asks ahead and lets go
        // behind) and every cold-mode query (which asks for its blocks first) reads exactly
        // what was written, twice over.
        let mut x = 5u64;
        let mut fps: Vec<u64> = (0..30_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            })
            .collect();
        let ids: Vec<u64> = (0..fps.len() as u64).collect();
        let dir = std::env::temp_dir().join(format!("simdex-advise-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sdx");
        build_segment(&FsStorage, &path, &fps, Some(&ids), &BuildOptions::default()).unwrap();
        let seg = Segment::open(&path).unwrap();
        assert!(seg.bytes.is_mapped());
        assert!(seg.tables()[0].block_count() > 4 * SCAN_WINDOW);
        let mut pairs: Vec<(u64, u64)> = fps.iter().copied().zip(ids.iter().copied()).collect();
        pairs.sort_unstable();
        for _ in 0..2 {
            let got: Vec<(u64, u64)> = seg.entries().map(|e| e.map(|(f, i)| (f, i.unwrap()))).collect::<Result<_>>().unwrap();
            assert_eq!(got, pairs);
            for (t, table) in seg.tables().iter().enumerate() {
                let mut want: Vec<u64> = fps.iter().map(|&f| table.design().permutation.apply(f)).collect();
                want.sort_unstable();
                assert_eq!(seg.table_entries(t).collect::<Result<Vec<u64>>>().unwrap(), want);
            }
        }
        fps.sort_unstable();
        // Cold mode: queries ask for all their blocks first; the answers (with their ids)
        // are brute force's.
        seg.cold.0.store(ColdReads::QUERIES, std::sync::atomic::Ordering::Relaxed);
        for (i, &f) in fps.iter().enumerate().step_by(301) {
            let q = f ^ (1 << (i % 64));
            let want: std::collections::BTreeSet<(u64, u64)> = pairs.iter().copied().filter(|&(g, _)| (g ^ q).count_ones() <= 3).collect();
            assert!(!want.is_empty());
            let got: Vec<(u64, u64)> = seg.query(q, &QueryOptions::within(3)).unwrap().iter().map(|m| (m.fingerprint, m.doc_id.unwrap())).collect();
            assert_eq!(got.len(), want.len());
            assert_eq!(got.into_iter().collect::<std::collections::BTreeSet<_>>(), want);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_seek_starts_at_the_furthest_hint_below_its_prefix() {
        let mut x = 9u64;
        let fps: Vec<u64> = (0..20_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            })
            .collect();
        let storage = crate::storage::MemStorage::default();
        let path = Path::new("s.sdx");
        build_segment(&storage, path, &fps, None, &BuildOptions::default()).unwrap();
        let seg = Segment::open_with(&storage, path).unwrap();
        let table = &seg.tables()[0];
        let low = 64 - table.design().prefix_bits;
        let b = table.block_count() / 2;
        let mut entries = Vec::new();
        seg.visit_block(0, b, |v| {
            entries.push(v);
            true
        })
        .unwrap();
        assert_eq!(table.index.hints(b), [0; SEEK_HINTS], "no query has used the block yet");
        // Seek to the prefix of every entry of the block: the cursor lands on a prefix
        // change below it, and the seek from there finds the first entry of that prefix.
        let mut moved = 0;
        for &v in entries.iter().skip(1) {
            let lo = v >> low << low;
            let mut cursor = seg.cursor(0, b, table.block_entries(b)).unwrap();
            let first = cursor.first();
            if first >= lo {
                continue;
            }
            let mut top = cursor.seek_start(low);
            if let Some(t) = seg.restart_seek(table, b, &mut cursor, lo, low) {
                top = t;
                moved += 1;
            }
            assert!(table.index.hints(b)[0] & HINT_BUILT != 0);
            let mut found = None;
            while cursor.remaining() > 0 {
                if let Some(v) = cursor.seek_step::<XorGaps>(lo, low, &mut top).unwrap() {
                    found = Some(v);
                    break;
                }
            }
            assert_eq!(found, entries.iter().copied().find(|&e| e >= lo));
        }
        assert!(moved > entries.len() / 2, "{moved} of {} seeks started at a hint", entries.len());
    }

    #[test]
    fn tables_and_blocks_out_of_range_are_errors_not_panics() {
        let fps: Vec<u64> = (0..5000u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
        let storage = crate::storage::MemStorage::default();
        let path = Path::new("s.sdx");
        build_segment(&storage, path, &fps, Some(&fps), &BuildOptions::default()).unwrap();
        let seg = Segment::open_with(&storage, path).unwrap();
        let (t, blocks) = (seg.tables().len(), seg.tables()[0].block_count());
        assert!(matches!(seg.block(t, 0), Err(Error::InvalidArgument(_))));
        assert!(matches!(seg.block(0, blocks), Err(Error::InvalidArgument(_))));
        assert!(matches!(seg.visit_block(0, blocks, |_| true), Err(Error::InvalidArgument(_))));
        let past: Vec<_> = seg.table_entries(t).collect();
        assert!(matches!(past.as_slice(), [Err(Error::InvalidArgument(_))]), "{past:?}");
        assert_eq!(seg.table_entries(0).count(), fps.len());
        assert_eq!(seg.tables()[0].block_entries(blocks), 0);
        assert_eq!(seg.tables()[0].first_ordinal(blocks), fps.len() as u64);
        assert!(matches!(seg.doc_id(fps.len() as u64), Err(Error::InvalidArgument(_))));
    }
}
