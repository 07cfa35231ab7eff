//! Immutable segment files: one set of fingerprints stored as compressed permuted tables,
//! with an optional document-id column (byte layout in `format-spec/segment.md`).
//!
//! This module owns the file format: [`SegmentWriter`] streams a segment out,
//! [`build_segment`] builds one from memory, [`Segment`] opens one through mmap and answers
//! queries (`crate::recovery` verifies every byte of one, and opens a damaged one for
//! salvage). It does not decide which segments exist; the engine's manifest does.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::undocumented_unsafe_blocks)]

mod block_index;
mod bytes;
pub(crate) mod layout;
mod reader;
mod resumable;
mod sections;
mod writer;

pub use layout::{FORMAT_VERSION, OLDEST_VERSION};
pub use reader::{Segment, Table};
// what recovery needs to open a damaged segment (crate::recovery::segment_scan)
pub(crate) use reader::{design_from_header, open_column, open_table, prefetch_line, read_directory, ColdReads, ColumnAt};
pub(crate) use resumable::{take_u32, take_u64, Section, WriterState};
pub(crate) use sections::TableProgress;
pub use writer::{build_segment, BuildOptions, IdColumn, SegmentWriter, SketchColumn};
