//! Reading a segment: [`Segment::open`] maps the file and checks its structure cheaply
//! (header, design, footer, directory, table heads and block indexes, but not the blocks);
//! queries then check the CRC of every block and id page they touch.

use std::path::{Path, PathBuf};

use byteorder::{ByteOrder, LittleEndian as LE};

use super::layout::*;
use crate::codec::{decode_block, BlockError, Code, Codec, Cursor, DeltaGaps, Gaps, XorGaps, BLOCK_BYTES};
use crate::error::{Error, Location, Result};
use crate::interpolation::lower_bound;
use crate::integrity::{check_magic_and_version, verify_crc, Fault};
use crate::plan::{prefix_mask, Design, Permutation, ProbePlan, TableDesign, MAX_K};
use crate::query::{finish_matches, Match, QueryOptions};
use crate::storage::{FileBytes, FsStorage, Storage};

/// An open, immutable segment file.
#[derive(Debug)]
pub struct Segment {
    path: PathBuf,
    bytes: FileBytes,
    design: Design,
    entries: u64,
    tables: Vec<Table>,
    ids: Option<DirIds>,
}

/// One permuted table of an open segment.
#[derive(Debug)]
pub struct Table {
    design: TableDesign,
    codec: Codec,
    code: Code,
    dir: DirTable,
    keys: Vec<u64>,
    /// `ordinals[b]` is the position in the table of block `b`'s first entry; one extra
    /// element holds the total.
    ordinals: Vec<u64>,
}

impl Table {
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

    /// Block keys (the last permuted fingerprint of each block).
    pub fn keys(&self) -> &[u64] {
        &self.keys
    }

    /// Position in the table of block `b`'s first entry (the table's entry count for a
    /// block past the end).
    pub fn first_ordinal(&self, b: u64) -> u64 {
        self.ordinals.get(b as usize).copied().unwrap_or(self.dir.entries)
    }

    /// Entries in block `b` (0 for a block past the end).
    #[inline(always)]
    pub fn block_entries(&self, b: u64) -> u32 {
        match self.ordinals.get(b as usize..).and_then(|o| o.first_chunk::<2>()) {
            Some(&[first, next]) => (next - first) as u32,
            None => 0,
        }
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
        self.dir.index_offset + self.dir.block_count * 10 + b * 4
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
        check_magic_and_version(&path, &bytes, &HEADER_MAGIC, "segment (magic SIMDXSEG)", FORMAT_VERSION)?;
        let (header, _) = Header::decode(&bytes).map_err(corrupt)?;
        let design = design_from_header(&header).map_err(corrupt)?;
        let dir = read_directory(&bytes).map_err(corrupt)?;
        if dir.tables.len() != header.tables.len() {
            return Err(corrupt(Fault::at(
                bytes.len() as u64 - FOOTER_BYTES as u64,
                format!("directory lists {} tables, header {}", dir.tables.len(), header.tables.len()),
            )));
        }
        let mut tables = Vec::with_capacity(dir.tables.len());
        for (i, ((d, h), td)) in dir.tables.iter().zip(&header.tables).zip(design.tables()).enumerate() {
            let table = open_table(&bytes, i, d, h, td.clone(), dir.entries).map_err(|f| corrupt(f.in_table(i)))?;
            tables.push(table);
        }
        let ids = if header.has_ids {
            check_ids(&bytes, &dir).map_err(corrupt)?;
            Some(dir.ids)
        } else {
            None
        };
        Ok(Segment { path, bytes, design, entries: dir.entries, tables, ids })
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

    pub(crate) fn ids_dir(&self) -> Option<&DirIds> {
        self.ids.as_ref()
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
        let loc = Location { table: Some(t), block: Some(b) };
        let block = self.array::<BLOCK_BYTES>(at, loc, "block")?;
        let stored = self.array::<4>(table.crc_offset(b), loc, "block checksum")?;
        verify_crc(block, u32::from_le_bytes(*stored)).map_err(|m| m.corrupt(&self.path, at, loc, "block"))?;
        Ok(block)
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
        let pages = if self.ids.is_some() { self.entries.div_ceil(IDS_PER_PAGE) } else { 0 };
        (0..pages).flat_map(move |page| {
            let (ok, err) = match self.id_page(page) {
                Ok(bytes) => (Some(bytes.chunks_exact(8).map(|c| Ok(LE::read_u64(c)))), None),
                Err(e) => (None, Some(Err(e))),
            };
            ok.into_iter().flatten().chain(err)
        })
    }

    /// The document id of table 0's entry number `ordinal` (after its page's CRC check).
    pub fn doc_id(&self, ordinal: u64) -> Result<u64> {
        if ordinal >= self.entries {
            return Err(Error::InvalidArgument(format!("entry {ordinal} out of range ({} entries)", self.entries)));
        }
        let bytes = self.id_page(ordinal / IDS_PER_PAGE)?;
        let at = (ordinal % IDS_PER_PAGE) * 8;
        let id: &[u8; 8] = array(bytes, at, "document id").map_err(|f| f.into_error(&self.path))?;
        Ok(u64::from_le_bytes(*id))
    }

    /// The bytes of id page `page`, after checking its CRC.
    fn id_page(&self, page: u64) -> Result<&[u8]> {
        let ids = self.ids.as_ref().ok_or_else(|| Error::InvalidArgument("the segment has no document ids".into()))?;
        let page_start = ids.ids_offset + page * IDS_PER_PAGE * 8;
        let page_len = self.entries.saturating_sub(page * IDS_PER_PAGE).min(IDS_PER_PAGE) * 8;
        let bytes = slice(&self.bytes, page_start, page_len, "document-id page").map_err(|f| f.into_error(&self.path))?;
        let stored = self.array::<4>(ids.crcs_offset + page * 4, Location::default(), "document-id page checksum")?;
        verify_crc(bytes, u32::from_le_bytes(*stored)).map_err(|m| m.corrupt(&self.path, page_start, Location::default(), format_args!("document-id page {page}")))?;
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

    #[inline(always)]
    fn probe_all_portable(&self, fingerprint: u64, k: u32, found: &mut Vec<u64>) -> Result<()> {
        // Find every table's first block and touch its cache lines before decoding any:
        // the blocks of a large segment are usually not in the CPU cache, and loads issued
        // together overlap their memory latency instead of paying it table after table.
        let mut starts = [0u64; PREFETCH_TABLES];
        for (start, table) in starts.iter_mut().zip(&self.tables) {
            let q = table.design.permutation.apply(fingerprint);
            *start = lower_bound(&table.keys, q & table.design.prefix_mask()) as u64;
            if *start < table.dir.block_count {
                let at = table.block_offset(*start) as usize;
                let block = self.bytes.get(at..).unwrap_or_default().iter().take(BLOCK_BYTES);
                for &byte in block.step_by(64) {
                    std::hint::black_box(byte);
                }
            }
        }
        for t in 0..self.tables.len() {
            let start = starts.get(t).copied();
            self.probe(t, fingerprint, k, start, found)?;
        }
        Ok(())
    }

    /// Finds the entries of table `t` sharing the query's prefix and within `k`; pushes the
    /// matches, un-permuted, to `found`.
    #[inline(always)]
    fn probe(&self, t: usize, fingerprint: u64, k: u32, start: Option<u64>, found: &mut Vec<u64>) -> Result<()> {
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
        let mut starts: Vec<u64> = Vec::with_capacity(plan.tables().iter().map(|p| p.flips.len()).sum());
        for (table, probes) in self.tables.iter().zip(plan.tables()) {
            let q = table.design.permutation.apply(fingerprint);
            let mask = prefix_mask(probes.probe_bits);
            for &flip in &probes.flips {
                let b = lower_bound(&table.keys, (q ^ flip) & mask) as u64;
                if b < table.dir.block_count {
                    prefetch_block(self.bytes.get(table.block_offset(b) as usize..).unwrap_or_default());
                }
                starts.push(b);
            }
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
    fn probe_range(&self, t: usize, table: &Table, q: u64, variant: u64, bits: u32, k: u32, start: Option<u64>, found: &mut Vec<u64>) -> Result<()> {
        match table.codec {
            Codec::Xor => self.probe_with::<XorGaps>(t, table, q, variant, bits, k, start, found),
            Codec::Delta => self.probe_with::<DeltaGaps>(t, table, q, variant, bits, k, start, found),
        }
    }

    /// [`Self::probe_range`] with the table's codec; `start`, when known, is the table's
    /// first block for this query.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn probe_with<G: Gaps>(&self, t: usize, table: &Table, q: u64, variant: u64, bits: u32, k: u32, start: Option<u64>, found: &mut Vec<u64>) -> Result<()> {
        let permutation = &table.design.permutation;
        let low_bits = 64 - bits;
        let mask = prefix_mask(bits);
        let (lo, hi) = (variant & mask, variant | !mask);
        let mut b = start.unwrap_or_else(|| lower_bound(&table.keys, lo) as u64);
        while b < table.dir.block_count {
            let mut cursor = self.cursor(t, b)?;
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
            if table.keys.get(b as usize).is_none_or(|&key| key > hi) {
                break;
            }
            b += 1;
        }
        Ok(())
    }

    /// A cursor over block `b` of table `t`, after its CRC check.
    #[inline(always)]
    fn cursor(&self, t: usize, b: u64) -> Result<Cursor<'_>> {
        let table = self.table(t)?;
        let block = self.checked_block(t, b)?;
        Cursor::new(&table.code, block, table.block_entries(b)).map_err(|e| self.block_error(t, b, e))
    }

    #[cold]
    fn block_error(&self, t: usize, b: u64, e: BlockError) -> Error {
        let offset = self.tables.get(t).map_or(0, |table| table.block_offset(b));
        self.corrupt(offset, Location { table: Some(t), block: Some(b) }, e.to_string())
    }

    /// Calls `each` with every document id stored under fingerprint `fp` (table 0 is the
    /// identity, and ids follow its order).
    fn ids_of(&self, fp: u64, mut each: impl FnMut(u64)) -> Result<()> {
        let table = self.table(0)?;
        let mut b = lower_bound(&table.keys, fp) as u64;
        let mut first: Option<u64> = None;
        let mut run = 0u64;
        while b < table.dir.block_count {
            let mut pos = 0u64;
            let mut past = false;
            self.visit_block(0, b, |v| {
                if v == fp {
                    first.get_or_insert(table.first_ordinal(b) + pos);
                    run += 1;
                } else if v > fp {
                    past = true;
                    return false;
                }
                pos += 1;
                true
            })?;
            if past || table.keys.get(b as usize).is_none_or(|&key| key > fp) {
                break;
            }
            b += 1;
        }
        let Some(first) = first else {
            return Err(self.corrupt(table.dir.blocks_offset(), Location { table: Some(0), block: None }, format!("fingerprint {fp:#018x} found in a permuted table is missing from table 0")));
        };
        for ordinal in first..first + run {
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

/// Tables whose first blocks a query prefetches together (the rest are probed one by one).
const PREFETCH_TABLES: usize = 32;

/// Asks the CPU to load the cache lines of the block starting at `bytes[0]` without waiting
/// for them (a hint: nothing happens where prefetching is not available).
#[inline(always)]
fn prefetch_block(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for line in bytes.iter().take(BLOCK_BYTES).step_by(64) {
        // SAFETY: a prefetch is a hint that never faults, whatever the address; SSE, which
        // it needs, is part of every x86-64 CPU. The pointer comes from a live reference.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>((line as *const u8).cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
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

pub(crate) fn read_directory(bytes: &[u8]) -> Result<Directory, Fault> {
    let len = bytes.len() as u64;
    if len < FOOTER_BYTES as u64 + ALIGN {
        return Err(Fault::at(len, format!("file is only {len} bytes: too short to hold a header and a footer; it was cut short")));
    }
    let footer = Footer::decode(bytes)?;
    let footer_at = len - FOOTER_BYTES as u64;
    if footer.version != FORMAT_VERSION {
        return Err(Fault::at(footer_at + F_VERSION as u64, format!("footer says format version {}, header says {FORMAT_VERSION}", footer.version)));
    }
    let dir_bytes = slice(bytes, footer.dir_offset, u64::from(footer.dir_len), "directory")?;
    if footer.dir_offset + u64::from(footer.dir_len) != footer_at {
        return Err(Fault::at(footer.dir_offset, "directory does not end where the footer starts"));
    }
    verify_crc(dir_bytes, footer.dir_crc).map_err(|m| m.fault(footer.dir_offset, Location::default(), "directory"))?;
    Directory::decode(dir_bytes, footer.dir_offset)
}

fn open_table(bytes: &[u8], i: usize, d: &DirTable, h: &HeaderTable, design: TableDesign, entries: u64) -> Result<Table, Fault> {
    let head = TableHead::decode(bytes, d.head_offset)?;
    if head.index as usize != i || head.codec != h.codec || head.prefix_bits != h.prefix_bits {
        return Err(Fault::at(d.head_offset, format!(
            "table head (index {}, codec {}, prefix {}) disagrees with the header (index {i}, codec {}, prefix {})",
            head.index, head.codec.name(), head.prefix_bits, h.codec.name(), h.prefix_bits
        )));
    }
    let mut code = Code::from_lengths(&head.lengths).map_err(|e| Fault::at(d.head_offset + T_LENGTHS as u64, e.to_string()))?;
    code.mark_prefix_changes(64 - u32::from(h.prefix_bits));
    if d.entries != entries {
        return Err(Fault::at(d.head_offset, format!("table holds {} entries, the segment {entries}", d.entries)));
    }
    let blocks_len = d.block_count.checked_mul(BLOCK_BYTES as u64).ok_or_else(|| Fault::at(d.head_offset, "block count overflows"))?;
    slice(bytes, d.blocks_offset(), blocks_len, "blocks")?;
    if d.index_offset != d.blocks_offset() + blocks_len {
        return Err(Fault::at(d.index_offset, "block index does not follow the blocks"));
    }
    let index = slice(bytes, d.index_offset, d.block_count * INDEX_BYTES_PER_BLOCK, "block index")?;
    verify_crc(index, d.index_crc).map_err(|m| m.fault(d.index_offset, Location::default(), "block index"))?;
    let n = d.block_count as usize;
    // Columns: n keys (u64), n counts (u16), n block CRCs (u32).
    let (keys, rest) = index.split_at(n * 8);
    let (counts, _) = rest.split_at(n * 2);
    let keys: Vec<u64> = keys.chunks_exact(8).map(LE::read_u64).collect();
    let mut ordinals = Vec::with_capacity(n + 1);
    let mut total = 0u64;
    ordinals.push(0);
    let mut prev = keys.first().copied().unwrap_or(0);
    for (b, (count, &key)) in counts.chunks_exact(2).map(LE::read_u16).zip(&keys).enumerate() {
        if count == 0 {
            return Err(Fault::at(d.index_offset + (n * 8 + b * 2) as u64, "block holds no entries").in_block(b as u64));
        }
        if key < prev {
            return Err(Fault::at(d.index_offset + (b * 8) as u64, "block keys are not sorted").in_block(b as u64));
        }
        prev = key;
        total += u64::from(count);
        ordinals.push(total);
    }
    if total != d.entries {
        return Err(Fault::at(d.index_offset, format!("block counts add up to {total}, the table holds {}", d.entries)));
    }
    Ok(Table { design, codec: head.codec, code, dir: *d, keys, ordinals })
}

fn check_ids(bytes: &[u8], dir: &Directory) -> Result<(), Fault> {
    let pages = dir.entries.div_ceil(IDS_PER_PAGE);
    let ids = dir.ids;
    slice(bytes, ids.ids_offset, dir.entries * 8, "document ids")?;
    if ids.crcs_offset != ids.ids_offset + dir.entries * 8 {
        return Err(Fault::at(ids.crcs_offset, "id-page checksums do not follow the ids"));
    }
    let crcs = slice(bytes, ids.crcs_offset, pages * 4, "id-page checksums")?;
    verify_crc(crcs, ids.crcs_crc).map_err(|m| m.fault(ids.crcs_offset, Location::default(), "id-page checksums"))
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
    fn tables_and_blocks_out_of_range_are_errors_not_panics() {
        let fps: Vec<u64> = (0..5000u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
        let storage = crate::memstorage::MemStorage::default();
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
