//! Full verification of a segment, in steps: the structure a cheap open checks, every
//! table's blocks (`verify_table`: checksums, decoded, sorted within and across blocks,
//! keys and counts), the same fingerprints in every table, the columns' pages, and zero
//! padding between the structures. Unlike [`Segment::open`] it reads every byte and keeps
//! going after a fault, so it can name all of them.

use std::path::Path;

use crate::codec::BLOCK_BYTES;
use crate::error::{Error, Location, Result};
use crate::segment::layout::*;
use crate::segment::{Segment, Table};
use crate::storage::{FileBytes, Storage};

/// One fault found by [`verify_segment`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Byte offset of the damaged structure.
    pub offset: u64,
    /// Table and block, where they apply.
    pub location: Location,
    /// What failed.
    pub detail: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "byte offset {}{}: {}", self.offset, self.location, self.detail)
    }
}

/// What [`verify_segment`] checked and found.
#[derive(Clone, Debug, Default)]
pub struct VerifyReport {
    /// Entries per table according to the directory (0 when unreadable).
    pub entries: u64,
    /// Tables whose blocks were checked.
    pub tables: usize,
    /// Blocks whose checksum and contents were checked.
    pub blocks: u64,
    /// Faults, in file order per table.
    pub problems: Vec<Problem>,
}

impl VerifyReport {
    /// True when nothing is wrong.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Verifies the segment at `path` (read through `storage`: [`FsStorage`](crate::storage::FsStorage)
/// for a file on disk). Returns `Err` only when the file cannot be read at all; damage is
/// reported in the [`VerifyReport`].
pub fn verify_segment(storage: &dyn Storage, path: &Path) -> Result<VerifyReport> {
    let bytes = storage.read(path).map_err(|e| Error::io(path, "open", e))?;
    verify_segment_bytes(path, bytes)
}

/// Verifies a segment held in memory; `path` is used in messages.
pub fn verify_segment_bytes(path: &Path, bytes: FileBytes) -> Result<VerifyReport> {
    let mut report = VerifyReport::default();
    // The cheap open checks the structure; when it fails, report its fault and stop, since
    // the offsets of everything else come from the structures it checks.
    let segment = match Segment::from_bytes(path.to_path_buf(), bytes) {
        Ok(s) => s,
        Err(Error::Corrupt { offset, location, detail, .. }) => {
            report.problems.push(Problem { offset, location, detail });
            return Ok(report);
        }
        Err(e @ (Error::NotSimdexFile { .. } | Error::UnsupportedVersion { .. })) => {
            report.problems.push(Problem { offset: 0, location: Location::default(), detail: e.to_string() });
            return Ok(report);
        }
        Err(e) => return Err(e),
    };
    report.entries = segment.len();
    let bytes = segment.bytes();
    let mut gaps = GapChecker::new(bytes);
    let (_, header_len) = Header::decode(bytes).map_err(|f| f.into_error(path))?;
    gaps.region(0, header_len, &mut report.problems);
    let digests: Vec<Option<MultisetDigest>> = (0..segment.tables().len()).map(|t| verify_table(&segment, t, &mut gaps, &mut report)).collect();
    same_fingerprints(&segment, &digests, &mut report.problems);
    verify_columns(&segment, &mut gaps, &mut report.problems);
    let footer = Footer::decode(bytes).map_err(|f| f.into_error(path))?;
    gaps.region(footer.dir_offset, bytes.len() as u64, &mut report.problems);
    report.problems.sort_by_key(|p| (p.location.table, p.offset));
    Ok(report)
}

/// Table `t`: its sections' places, every block checked and decoded, keys and order; the
/// digest of its fingerprints when every block is intact.
fn verify_table(segment: &Segment, t: usize, gaps: &mut GapChecker<'_>, report: &mut VerifyReport) -> Option<MultisetDigest> {
    let table = segment.tables().get(t)?;
    report.tables += 1;
    table_regions(segment, table, gaps, &mut report.problems);
    let mut digest = MultisetDigest::default();
    let mut intact = true;
    let mut prev_key: Option<u64> = None;
    let mut bad_chunk: Option<u64> = None;
    for b in 0..table.block_count() {
        report.blocks += 1;
        let loc = Location { table: Some(t), block: Some(b) };
        // A damaged chunk of the block index is one problem, not one per block.
        let chunk = b / INDEX_CHUNK_BLOCKS;
        if bad_chunk == Some(chunk) {
            continue;
        }
        if let Err(Error::Corrupt { offset, detail, .. }) = table.check_index_chunk(b) {
            intact = false;
            bad_chunk = Some(chunk);
            report.problems.push(Problem { offset, location: Location { table: Some(t), block: None }, detail });
            continue;
        }
        let (mut first, mut last, mut n) = (None, 0u64, 0u32);
        let result = segment.visit_block(t, b, |v| {
            first.get_or_insert(v);
            last = v;
            n += 1;
            digest.add(table.design().permutation.invert(v));
            true
        });
        if let Err(e) = result {
            intact = false;
            let (offset, detail) = match e {
                Error::Corrupt { offset, detail, .. } => (offset, detail),
                other => (table.block_offset(b), other.to_string()),
            };
            report.problems.push(Problem { offset, location: loc, detail });
            continue;
        }
        let key = table.key(b).unwrap_or_default();
        if last != key {
            intact = false;
            report.problems.push(Problem { offset: table.block_offset(b), location: loc, detail: format!("last entry {last:#018x} differs from the block key {key:#018x}") });
        }
        if let (Some(p), Some(f)) = (prev_key, first) {
            if f < p {
                report.problems.push(Problem { offset: table.block_offset(b), location: loc, detail: format!("first entry {f:#018x} is below the previous block's key {p:#018x}") });
            }
        }
        prev_key = Some(key);
        debug_assert_eq!(n, table.block_entries(b));
    }
    intact.then_some(digest)
}

/// The regions of a table's sections, for the padding check.
fn table_regions(segment: &Segment, table: &Table, gaps: &mut GapChecker<'_>, problems: &mut Vec<Problem>) {
    let dir = *table.dir();
    let head_end = if segment.format_version() >= 2 { T_END_V2 } else { T_END_V1 };
    gaps.region(dir.head_offset, dir.head_offset + head_end as u64, problems);
    gaps.region(dir.blocks_offset(), dir.index_columns_end(), problems);
    if segment.format_version() >= 2 {
        gaps.region(dir.summary_offset(), dir.summary_offset() + dir.summary_len(), problems);
        gaps.region(dir.trailer_offset(), dir.trailer_offset() + TRAILER_BYTES as u64, problems);
    }
}

/// Every intact table holds the same fingerprints as table 0 (by their digests).
fn same_fingerprints(segment: &Segment, digests: &[Option<MultisetDigest>], problems: &mut Vec<Problem>) {
    let Some(Some(reference)) = digests.first() else { return };
    for (t, (d, table)) in digests.iter().zip(segment.tables()).enumerate().skip(1) {
        if d.as_ref().is_some_and(|d| d != reference) {
            problems.push(Problem {
                offset: table.head_offset(),
                location: Location { table: Some(t), block: None },
                detail: "the table does not hold the same fingerprints as table 0".into(),
            });
        }
    }
}

/// The id and sketch columns: every page's checksum, and their places.
fn verify_columns(segment: &Segment, gaps: &mut GapChecker<'_>, problems: &mut Vec<Problem>) {
    for (kind, column) in [(ColumnKind::Ids, segment.ids_column()), (ColumnKind::Sketches, segment.sketches_column())] {
        let Some(column) = column else { continue };
        if let Some(head) = column.head_offset {
            gaps.region(head, head + C_END as u64, problems);
        }
        let pages = column.pages(segment.len());
        for page in 0..pages {
            let (start, len) = column.page_span(page, segment.len());
            gaps.region(start, start + len, problems);
            // Version 1: the pages are one array and the CRCs follow it; layout 2: each
            // page's CRC follows the page; layout 3: a CRC page follows each group.
            if column.crcs_offset.is_none() && column.grouped_pages.is_none() {
                let crc = column.crc_offset(page);
                gaps.region(crc, crc + PAGE_CRC_BYTES, problems);
            }
            if let Err(Error::Corrupt { offset, location, detail, .. }) = segment.page(column, page, kind) {
                problems.push(Problem { offset, location, detail });
            }
            // Layout 3: after a group's last page, its CRC page (the pages' CRCs, then its own).
            if let Some((at, covered)) = column.crc_page(page / GROUP_PAGES).filter(|_| page % GROUP_PAGES == GROUP_PAGES - 1 || page + 1 == pages) {
                gaps.region(at, at + covered * 4, problems);
                gaps.region(at + PAGE_BYTES - PAGE_CRC_BYTES, at + PAGE_BYTES, problems);
                if let Err(Error::Corrupt { offset, location, detail, .. }) = segment.crc_page_check(at, kind) {
                    problems.push(Problem { offset, location, detail });
                }
            }
        }
        if let Some(crcs) = column.crcs_offset {
            gaps.region(crcs, crcs + pages * 4, problems);
        }
    }
}

/// Checks that the bytes between the file's structures are zero and that structures do not
/// overlap.
struct GapChecker<'a> {
    bytes: &'a [u8],
    cursor: u64,
}

impl<'a> GapChecker<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, cursor: 0 }
    }

    fn region(&mut self, start: u64, end: u64, problems: &mut Vec<Problem>) {
        if start < self.cursor {
            problems.push(Problem { offset: start, location: Location::default(), detail: format!("structure at {start} overlaps the previous one (ending at {})", self.cursor) });
        } else if let Some(i) = self.bytes.get(self.cursor as usize..start as usize).unwrap_or_default().iter().position(|&b| b != 0) {
            problems.push(Problem { offset: self.cursor + i as u64, location: Location::default(), detail: "padding byte is not zero".into() });
        }
        self.cursor = self.cursor.max(end);
    }
}

/// An order-independent digest of a multiset of fingerprints: two sums of independent
/// 64-bit mixes. Tables holding the same fingerprints have equal digests; different ones
/// collide with probability about 2^-128.
#[derive(Default, PartialEq, Eq, Debug)]
struct MultisetDigest(u64, u64, u64);

impl MultisetDigest {
    fn add(&mut self, x: u64) {
        self.0 = self.0.wrapping_add(mix(x));
        self.1 = self.1.wrapping_add(mix(x ^ 0x9e37_79b9_7f4a_7c15));
        self.2 += 1;
    }
}

fn mix(mut z: u64) -> u64 {
    // splitmix64's finalizer.
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

const _: () = assert!(BLOCK_BYTES as u64 == ALIGN);
