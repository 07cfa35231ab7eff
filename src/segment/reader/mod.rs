//! Reading a segment: [`Segment::open`] maps the file and checks its structure cheaply
//! (header, design, footer, directory, table heads and block indexes, but not the blocks);
//! queries then check the CRC of every block and id page they touch (a block once per open
//! segment: its mapped bytes do not change, so a block that matched is not checked again).
//!
//! This file defines [`Segment`] and its accessors; each file below adds one concern, and
//! uses only the files listed before it:
//! - `prefetch`: asking ahead (cache lines for the CPU; blocks of cold queries and windows
//!   of sequential scans for the kernel).
//! - `column`: where a column's pages are ([`ColumnAt`]), and reading its values.
//! - `table`: one permuted table ([`Table`]), its block index and key search.
//! - `open`: opening a segment and checking its structure.
//! - `block`: reading one block, checked against its CRC once, and decoding it.
//! - `entries`: iterating over a table's entries ([`TableEntries`]) and the document ids.
//! - `sketches`: the sketch column by document.
//! - `probe`: one table's probe, decoded on its own.
//! - `seek_hints`: where a seek inside an XOR block may start.
//! - `lanes`: the interleaved probe of many tables, one entry of each per round.
//! - `query`: a query's answer, dispatched on the CPU's instruction set.
//!
//! It does not write segments (`writer`), verify every byte (`verify`) or salvage damaged
//! ones (`scan`).

use std::path::{Path, PathBuf};

mod block;
mod column;
mod entries;
mod lanes;
mod open;
mod prefetch;
mod probe;
mod query;
mod seek_hints;
mod sketches;
mod table;

use self::prefetch::ColdReads;
pub(crate) use column::{open_column, ColumnAt};
pub use entries::TableEntries;
pub(crate) use open::{design_from_header, read_directory};
pub(crate) use table::open_table;
pub use table::Table;

use crate::error::{Error, Location, Result};
use crate::integrity::Fault;
use crate::plan::Design;
use crate::segment::layout::array;
use crate::storage::FileBytes;

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
}
