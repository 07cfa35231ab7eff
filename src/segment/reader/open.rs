//! Opening a segment: [`Segment::open`] and its variants check the magic and version, the
//! header's design, the footer and directory, every table's head, trailer and index
//! summary, and the columns' places; salvage (`crate::recovery::segment_scan`) assembles one from the parts that
//! open. Nothing here reads a block.

use std::path::{Path, PathBuf};

use crate::error::{Error, Location, Result};
use crate::integrity::{check_magic_and_version, verify_crc, Fault};
use crate::plan::{Design, Permutation, TableDesign};
use crate::segment::layout::{
    slice, ColumnKind, DirColumns, Directory, Footer, Header, TableHead, ALIGN, FOOTER_BYTES, FORMAT_VERSION, F_VERSION, HEADER_MAGIC, H_K, H_LEVELS, INDEX_BYTES_PER_BLOCK,
    OLDEST_VERSION, T_CODEC, T_VERSION,
};
use crate::storage::{FileBytes, FsStorage, Storage};

use super::column::{check_ids_v1, open_column, ColumnAt};
use super::cache_hints::ColdReads;
use super::table::{open_table, Table};
use super::Segment;
use super::cache_hints::VerifiedPages;

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
                        (true, at) if at > 0 => open_column(&bytes, at, kind, dir.entries, version).map(Some).map_err(corrupt),
                        _ => Err(corrupt(Fault::at(bytes.len() as u64 - FOOTER_BYTES as u64, format!("the header and the directory disagree on whether a {} column exists", kind.name())))),
                    }
                };
                (column(header.has_ids, ids_head, ColumnKind::Ids)?, column(header.has_sketches, sketches_head, ColumnKind::Sketches)?)
            }
        };
        let sketch_pages = VerifiedPages::new(sketches.map_or(0, |c| c.pages(dir.entries)));
        Ok(Segment { path, bytes, version, design, entries: dir.entries, tables, ids, sketches, cold: ColdReads::default(), sketch_pages })
    }

    /// A segment assembled by salvage from the parts of a damaged file that open
    /// (`crate::recovery::segment_scan`): `tables` may be a subset of the design's, in table order.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn from_salvaged_parts(
        path: PathBuf,
        bytes: FileBytes,
        version: u32,
        design: Design,
        entries: u64,
        tables: Vec<Table>,
        ids: Option<ColumnAt>,
        sketches: Option<ColumnAt>,
    ) -> Self {
        let sketch_pages = VerifiedPages::new(sketches.map_or(0, |c| c.pages(entries)));
        Segment { path, bytes, version, design, entries, tables, ids, sketches, cold: ColdReads::default(), sketch_pages }
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
