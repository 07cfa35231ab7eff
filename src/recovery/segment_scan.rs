//! Opening a damaged segment for salvage: finds every table and column that is still
//! whole, without trusting the structures that are damaged.
//!
//! [`Segment::open`] refuses a file whose header, directory or
//! footer fails its checks, because every offset comes from them. Salvage cannot stop
//! there: each table holds every fingerprint, so one whole table is enough. This module
//! rebuilds the map of the file from what survives:
//!
//! - **Version 2** (`format-spec/segment.md`, "Finding tables without the footer"): every
//!   table head repeats the design, and every table section ends with a trailer at a
//!   multiple of 1024 that repeats its directory entry; columns start with a
//!   self-describing head. Scanning the file's 1024-byte boundaries for heads, then each
//!   head's section for its trailer, finds every whole table and column, whatever else is
//!   lost (header, directory, footer, later tables, the file's tail).
//! - **Version 1**: table heads are found the same way; a table's block count, when the
//!   directory is lost, is the one whose block-CRC array matches the blocks. Without the
//!   header the design is unknown, so only table 0 (always the identity) is usable.
//!
//! The [`Segment`] returned holds only the tables that open; its checks on blocks and
//! pages stay in force, so nothing damaged is read as data.

use std::collections::BTreeMap;
use std::path::Path;

use byteorder::{ByteOrder, LittleEndian as LE};

use crate::codec::BLOCK_BYTES;
use crate::error::Result;
use crate::integrity::check_magic_and_version;
use crate::plan::{Design, Permutation, TableDesign};
use crate::segment::layout::*;
use crate::segment::{design_from_header, open_column, open_table, read_directory, ColumnAt, Segment, Table};
use crate::storage::FileBytes;

/// A segment opened for salvage, with what had to be worked around.
#[derive(Debug)]
pub struct Salvaged {
    /// The tables (and columns) that open. Table positions in it need not be table
    /// numbers: use [`Table::number`].
    pub segment: Segment,
    /// Each structure that failed its checks and how it was bypassed, in file order.
    pub damage: Vec<String>,
    /// Tables of the design that could not be opened, by number.
    pub tables_lost: Vec<usize>,
    /// True when the segment has an id column that could not be found or opened.
    pub ids_lost: bool,
}

/// Opens `bytes` (the segment at `path`) as well as its damage allows. `Ok` with no damage
/// when the file opens normally; `Err` only when no table at all can be found.
pub fn salvage_open(path: &Path, bytes: FileBytes) -> Result<Salvaged> {
    let first_error = match Segment::from_bytes(path.to_path_buf(), bytes.clone()) {
        Ok(segment) => {
            // Opening reads only the block indexes' summaries; check them whole now.
            let damage = segment.tables().iter().filter_map(|t| t.keys().err()).map(|e| format!("{} (the other tables hold its entries)", e.chain_message())).collect();
            return Ok(Salvaged { segment, damage, tables_lost: Vec::new(), ids_lost: false });
        }
        Err(e) => e,
    };
    let mut damage = vec![format!("the segment does not open: {}", first_error.chain_message())];
    let map = FileMap::find(path, &bytes, &mut damage);
    let Some(entries) = map.entries() else { return Err(first_error) };
    let (tables, tables_lost) = map.open_tables(path, &bytes, entries, &mut damage);
    if map.design.is_none() {
        damage.push(format!("the design is unknown (the header is damaged and version-{} table heads do not repeat it): only table 0 is read", map.version));
    }
    if tables.is_empty() {
        return Err(first_error);
    }
    let mut ids_lost = false;
    let (ids, sketches) = if map.version >= 2 { map.columns_v2(path, &bytes, entries, &mut damage, &mut ids_lost) } else { (map.ids_v1(entries, &mut damage, &mut ids_lost), None) };
    // Pages are checked one by one as they are read, so a column whose end runs past the
    // file loses only the pages past it.
    let FileMap { version, design, .. } = map;
    let segment = Segment::from_salvaged_parts(path.to_path_buf(), bytes, version, design.unwrap_or_else(stand_in_design), entries, tables, ids, sketches);
    Ok(Salvaged { segment, damage, tables_lost, ids_lost })
}

/// The map of a segment file that does not open, rebuilt from what survives.
struct FileMap {
    /// Format version (the header's, or guessed from the table heads).
    version: u32,
    header: Option<Header>,
    directory: Option<Directory>,
    /// Every table head found, by offset.
    heads: BTreeMap<u64, TableHead>,
    /// Where each table is, by table number: the directory's word first, then the heads'.
    located: BTreeMap<usize, DirTable>,
    /// The design: from the header, else from any version-2 table head.
    design: Option<Design>,
}

impl FileMap {
    /// The version, header, directory, table heads and design of `bytes`, each fault on the
    /// way in `damage`.
    fn find(path: &Path, bytes: &[u8], damage: &mut Vec<String>) -> FileMap {
        let version = match check_magic_and_version(path, bytes, &HEADER_MAGIC, "segment (magic SIMDXSEG)", OLDEST_VERSION..=FORMAT_VERSION) {
            Ok(v) => v,
            Err(e) => {
                let guessed = guess_version(bytes);
                damage.push(format!("{}; reading it as format version {guessed}, which its table heads have", e.chain_message()));
                guessed
            }
        };
        let header = match Header::decode(bytes) {
            Ok((h, _)) if h.version == version => Some(h),
            Ok(_) => None,
            Err(f) => {
                damage.push(format!("header: {}", f.into_error(path).chain_message()));
                None
            }
        };
        let directory = match read_directory(bytes, version) {
            Ok(d) => Some(d),
            Err(f) => {
                damage.push(format!("footer or directory: {}; finding the tables by their heads{}", f.into_error(path).chain_message(), if version >= 2 { " and trailers" } else { "" }));
                None
            }
        };
        let heads = scan_heads(bytes, version);
        let mut located: BTreeMap<usize, DirTable> = BTreeMap::new();
        if let Some(dir) = &directory {
            located.extend(dir.tables.iter().copied().enumerate());
        }
        for (&at, head) in &heads {
            let i = usize::from(head.index);
            if located.get(&i).is_some_and(|d| d.head_offset == at) {
                continue;
            }
            let found = if version >= 2 { find_trailer(bytes, at, head.index) } else { infer_v1_table(bytes, at) };
            if let Some(d) = found {
                located.entry(i).or_insert(d);
            }
        }
        let design = match header.as_ref().map(design_from_header) {
            Some(Ok(d)) => Some(d),
            Some(Err(f)) => {
                damage.push(format!("header design: {}", f.into_error(path).chain_message()));
                None
            }
            None => None,
        }
        .or_else(|| heads.values().find_map(|h| h.design.as_ref()).and_then(|d| Design::new(u32::from(d.k), &d.levels.iter().map(|&r| u32::from(r)).collect::<Vec<_>>()).ok()));
        FileMap { version, header, directory, heads, located, design }
    }

    /// Entries per table: the directory's, else what most found tables say.
    fn entries(&self) -> Option<u64> {
        self.directory.as_ref().map(|d| d.entries).or_else(|| majority(self.located.values().map(|d| d.entries)))
    }

    /// Every table of the design that opens, and the numbers of those that do not (each
    /// with its reason in `damage`).
    fn open_tables(&self, path: &Path, bytes: &FileBytes, entries: u64, damage: &mut Vec<String>) -> (Vec<Table>, Vec<usize>) {
        let table_count = self.design.as_ref().map_or(1, |d| d.tables().len());
        let (mut tables, mut lost) = (Vec::new(), Vec::new());
        for i in 0..table_count {
            let table_design = match &self.design {
                Some(d) => d.tables().get(i).cloned(),
                // Without a design only table 0, the identity, can be read.
                None => self.heads.values().find(|h| h.index == 0).map(|h| TableDesign { permutation: Permutation::identity(), prefix_bits: u32::from(h.prefix_bits) }),
            };
            let opened = match (self.located.get(&i), table_design) {
                (Some(d), Some(td)) => open_table(path, bytes, self.version, i, d, td, entries).map_err(|f| f.in_table(i).into_error(path).chain_message()),
                (None, _) => Err(format!("table {i}: not found (its head or trailer is damaged or lost)")),
                (Some(_), None) => Err(format!("table {i}: its permutation is unknown (the header is damaged)")),
            };
            match opened {
                Ok(t) => tables.push(t),
                Err(why) => {
                    damage.push(why);
                    lost.push(i);
                }
            }
        }
        (tables, lost)
    }

    /// A flag of the header, else of a version-2 table head that repeats the design.
    fn flag(&self, header: fn(&Header) -> bool, flag: u8) -> Option<bool> {
        self.header.as_ref().map(header).or_else(|| self.heads.values().find_map(|h| h.design.as_ref()).map(|d| d.flags & flag != 0))
    }

    /// Version 2: the id and sketch columns, from the directory or by their heads.
    fn columns_v2(&self, path: &Path, bytes: &[u8], entries: u64, damage: &mut Vec<String>, ids_lost: &mut bool) -> (Option<ColumnAt>, Option<ColumnAt>) {
        let columns = scan_columns(bytes);
        let dir_heads = match self.directory.as_ref().map(|d| d.columns) {
            Some(DirColumns::V2 { ids_head, sketches_head }) => (ids_head, sketches_head),
            // No version-2 directory to place the heads: only the heads found by scanning.
            Some(DirColumns::V1(_)) | None => (0, 0),
        };
        // The id column, when present, starts right after the last table's section.
        let after_tables = self.design.as_ref().and_then(|d| self.located.get(&(d.tables().len() - 1))).map(|t| t.trailer_offset() + TRAILER_BYTES as u64);
        let mut column = |kind: ColumnKind, dir_at: u64, expected: Option<bool>| -> Option<ColumnAt> {
            let candidates = std::iter::once(dir_at).filter(|&at| at > 0).chain(columns.iter().filter(|(_, k)| *k == kind).map(|&(at, _)| at));
            let mut last_error = None;
            for at in candidates {
                match open_column(bytes, at, kind, entries, self.version) {
                    Ok(c) => return Some(c),
                    Err(f) => last_error = Some(f.into_error(path).chain_message()),
                }
            }
            // A damaged id-column head: the ids' layout is fixed (8 bytes, 127 a page), so
            // the pages are read where they must be, each still checked by its own CRC.
            let known_at = if dir_at > 0 { Some(dir_at) } else { after_tables };
            if let (ColumnKind::Ids, Some(true), Some(at)) = (kind, expected, known_at) {
                let column = ColumnAt::v2(&ColumnHead::new(ColumnKind::Ids, 8, entries, [0; 8]), at);
                if column.pages_offset < bytes.len() as u64 {
                    damage.push(format!("document-id column head at byte offset {at}: {}; reading its pages where they must be, each checked by its CRC", last_error.unwrap_or_else(|| "not found".into())));
                    return Some(column);
                }
            }
            if expected != Some(false) && (expected == Some(true) || last_error.is_some()) {
                damage.push(format!("{} column: {}", kind.name(), last_error.unwrap_or_else(|| "not found (its head is damaged or lost)".into())));
                if kind == ColumnKind::Ids {
                    *ids_lost = true;
                }
            }
            None
        };
        let ids = column(ColumnKind::Ids, dir_heads.0, self.flag(|h| h.has_ids, FLAG_HAS_IDS));
        (ids, column(ColumnKind::Sketches, dir_heads.1, self.flag(|h| h.has_sketches, FLAG_HAS_SKETCHES)))
    }

    /// Version 1: the id column, from the directory or where it must follow the last table.
    fn ids_v1(&self, entries: u64, damage: &mut Vec<String>, ids_lost: &mut bool) -> Option<ColumnAt> {
        let has_ids = self.flag(|h| h.has_ids, FLAG_HAS_IDS);
        match (has_ids, self.directory.as_ref().map(|d| d.columns)) {
            (Some(false), _) => None,
            (_, Some(DirColumns::V1(ids))) if has_ids == Some(true) => Some(ColumnAt::v1_ids(&ids)),
            (_, Some(DirColumns::V1(_) | DirColumns::V2 { .. }) | None) => {
                // The ids follow the last table, 8-aligned, and their page CRCs follow them.
                let last = self.design.as_ref().and_then(|d| self.located.get(&(d.tables().len() - 1)));
                match last {
                    Some(t) if has_ids == Some(true) => {
                        let ids_offset = align_up(t.index_columns_end(), 8);
                        Some(ColumnAt::v1_ids(&DirIds { ids_offset, crcs_offset: ids_offset + entries * 8, crcs_crc: 0 }))
                    }
                    _ => {
                        damage.push("document ids: their place is unknown (the header or the last table is lost)".into());
                        *ids_lost = true;
                        None
                    }
                }
            }
        }
    }
}

/// The design a segment read without its design carries: one identity table (the only
/// one salvage reads then).
fn stand_in_design() -> Design {
    Design::new(0, &[]).unwrap_or_else(|_| unreachable!("the empty block split is always valid"))
}

/// The format version a file with a damaged header is read as: 2 when a version-2 table
/// head is found, else 1.
fn guess_version(bytes: &[u8]) -> u32 {
    if scan_heads(bytes, 2).is_empty() {
        1
    } else {
        2
    }
}

/// Every table head of format `version` at a multiple of [`ALIGN`], by offset.
fn scan_heads(bytes: &[u8], version: u32) -> BTreeMap<u64, TableHead> {
    aligned_offsets(bytes).filter(|&at| bytes.get(at as usize..at as usize + 8) == Some(TABLE_MAGIC.as_slice())).filter_map(|at| Some((at, TableHead::decode(bytes, at, version).ok()?))).collect()
}

/// Every version-2 column head, by offset.
fn scan_columns(bytes: &[u8]) -> Vec<(u64, ColumnKind)> {
    aligned_offsets(bytes).filter(|&at| bytes.get(at as usize..at as usize + 8) == Some(COLUMN_MAGIC.as_slice())).filter_map(|at| Some((at, ColumnHead::decode(bytes, at).ok()?.kind))).collect()
}

fn aligned_offsets(bytes: &[u8]) -> impl Iterator<Item = u64> {
    (0..bytes.len() as u64).step_by(ALIGN as usize)
}

/// Version 2: the table whose head is at `at`, from the first trailer after it that names
/// it (trailers end at multiples of [`ALIGN`]).
fn find_trailer(bytes: &[u8], at: u64, index: u16) -> Option<DirTable> {
    let len = bytes.len() as u64;
    let mut end = at + 2 * ALIGN;
    while end <= len {
        let trailer_at = end - TRAILER_BYTES as u64;
        if bytes.get(trailer_at as usize..trailer_at as usize + 8) == Some(TRAILER_MAGIC.as_slice()) {
            if let Ok(t) = TableTrailer::decode(bytes, trailer_at) {
                if t.table.head_offset == at && t.index == index {
                    return Some(t.table);
                }
            }
        }
        end += ALIGN;
    }
    None
}

/// Version 1 without the directory: the table whose head is at `at`, taking as its block
/// count the first `n` whose block index (right after `n` blocks) has every block's CRC
/// matching, sorted keys and non-zero counts.
fn infer_v1_table(bytes: &[u8], at: u64) -> Option<DirTable> {
    let blocks_offset = at + TABLE_HEAD_BYTES;
    let block = |b: u64| slice(bytes, blocks_offset + b * ALIGN, ALIGN, "block").ok();
    let crc0 = crc32fast::hash(block(0)?);
    let len = bytes.len() as u64;
    let mut n = 1u64;
    while blocks_offset + n * (ALIGN + INDEX_BYTES_PER_BLOCK) <= len {
        let index_offset = blocks_offset + n * ALIGN;
        let crc_at = |b: u64| array::<4>(bytes, index_offset + n * 10 + b * 4, "crc").ok().map(|c| u32::from_le_bytes(*c));
        if crc_at(0) == Some(crc0) && block(n - 1).map(crc32fast::hash) == crc_at(n - 1) {
            if let Some(table) = check_v1_index(bytes, at, index_offset, n, &crc_at, &block) {
                return Some(table);
            }
        }
        n += 1;
    }
    None
}

/// The table described by a version-1 block index of `n` blocks at `index_offset`, if it
/// is consistent with the blocks.
fn check_v1_index<'a>(bytes: &'a [u8], head_offset: u64, index_offset: u64, n: u64, crc_at: &dyn Fn(u64) -> Option<u32>, block: &dyn Fn(u64) -> Option<&'a [u8]>) -> Option<DirTable> {
    let index = slice(bytes, index_offset, n * INDEX_BYTES_PER_BLOCK, "block index").ok()?;
    let (keys, rest) = index.split_at_checked(n as usize * 8)?;
    let counts = rest.get(..n as usize * 2)?;
    if !keys.chunks_exact(8).map(LE::read_u64).is_sorted() || counts.chunks_exact(2).any(|c| LE::read_u16(c) == 0) {
        return None;
    }
    if (0..n).any(|b| block(b).map(crc32fast::hash) != crc_at(b)) {
        return None;
    }
    let entries = counts.chunks_exact(2).map(|c| u64::from(LE::read_u16(c))).sum();
    Some(DirTable { head_offset, block_count: n, entries, index_offset, index_crc: crc32fast::hash(index) })
}

/// The value most of `values` agree on (the first on a tie), or `None` when empty.
fn majority(values: impl Iterator<Item = u64>) -> Option<u64> {
    let mut counts: Vec<(u64, usize)> = Vec::new();
    for v in values {
        match counts.iter_mut().find(|(x, _)| *x == v) {
            Some((_, n)) => *n += 1,
            None => counts.push((v, 1)),
        }
    }
    counts.iter().rev().max_by_key(|(_, n)| *n).map(|(v, _)| *v)
}

const _: () = assert!(BLOCK_BYTES as u64 == ALIGN);
