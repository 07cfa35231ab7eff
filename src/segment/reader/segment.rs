//! The [`Segment`] type: an open, immutable segment file, and its accessors. What a segment
//! does is added by the sibling files (open, probe, query, entries, values, ...).

use std::path::{Path, PathBuf};

use super::cache_hints::ColdReads;
use super::column::ColumnAt;
use super::table::Table;
use crate::error::{Error, Location, Result};
use crate::integrity::Fault;
use crate::plan::Design;
use crate::segment::layout::array;
use crate::storage::FileBytes;

/// An open, immutable segment file.
#[derive(Debug)]
pub struct Segment {
    pub(super) path: PathBuf,
    pub(super) bytes: FileBytes,
    pub(super) version: u32,
    pub(super) design: Design,
    pub(super) entries: u64,
    pub(super) tables: Vec<Table>,
    pub(super) ids: Option<ColumnAt>,
    pub(super) sketches: Option<ColumnAt>,
    pub(super) cold: ColdReads,
    /// The sketch pages checked so far.
    pub(super) sketch_pages: super::cache_hints::VerifiedPages,
}

impl Segment {
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

    /// What names this segment file for the files derived from it (band files, id tables):
    /// its length and the CRC-32 of its footer (which covers the directory's CRC, so any
    /// other segment differs).
    pub(crate) fn identity(&self) -> (u64, u32) {
        let footer = self.bytes.get(self.bytes.len().saturating_sub(crate::segment::layout::FOOTER_BYTES)..).unwrap_or_default();
        (self.bytes.len() as u64, crc32fast::hash(footer))
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

    pub(super) fn corrupt(&self, offset: u64, location: Location, detail: impl Into<String>) -> Error {
        Error::Corrupt { path: self.path.clone(), offset, location, detail: detail.into() }
    }

    /// Table `t`, or an error naming the tables there are.
    #[inline(always)]
    pub(super) fn table(&self, t: usize) -> Result<&Table> {
        match self.tables.get(t) {
            Some(table) => Ok(table),
            None => Err(self.no_such_table(t)),
        }
    }

    #[cold]
    pub(super) fn no_such_table(&self, t: usize) -> Error {
        Error::InvalidArgument(format!("table {t} out of range ({} tables)", self.tables.len()))
    }

    /// The `N` bytes at `at`. Open checked that every structure is inside the file, so a
    /// miss means the segment's own offsets are inconsistent: reported as damage.
    #[inline(always)]
    pub(super) fn array<const N: usize>(&self, at: u64, location: Location, what: &str) -> Result<&[u8; N]> {
        array(&self.bytes, at, what).map_err(|f| Fault { location, ..f }.into_error(&self.path))
    }
}
