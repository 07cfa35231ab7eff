//! Reading a segment: [`Segment::open`] maps the file and checks its structure cheaply
//! (header, design, footer, directory, table heads and block indexes, but not the blocks);
//! queries then check the CRC of every block and id page they touch (a block once per open
//! segment: its mapped bytes do not change, so a block that matched is not checked again).
//!
//! `segment` defines [`Segment`] and its accessors; each file below adds one concern, and
//! uses only the files listed before it:
//! - `cache_hints`: prefetching cache lines and blocks for the CPU, detecting cold reads.
//! - `column`: where a column's pages are ([`ColumnAt`]).
//! - `values`: reading a column's values (ids, sketches) by ordinal.
//! - `prefetch`: asking the kernel ahead (blocks of cold queries, windows of scans).
//! - `table`: one permuted table ([`Table`]), its block index and key search.
//! - `open`: opening a segment and checking its structure.
//! - `block`: reading one block, checked against its CRC once, and decoding it.
//! - `entries`: iterating over a table's entries (`TableEntries`) and the document ids.
//! - `sketches`: the sketch column by document.
//! - `probe`: one table's probe, decoded on its own.
//! - `seek_hints`: where a seek inside an XOR block may start.
//! - `lanes`: the interleaved probe of many tables, one entry of each per round.
//! - `wanted`: the prefix groups a batch join wants from a table, sought block by block by
//!   several walks in turn.
//! - `query`: a query's answer, dispatched on the CPU's instruction set.
//!
//! It does not write segments (`writer`); verifying every byte and salvaging damaged ones
//! is `crate::recovery`'s (`verify_segment`, `segment_scan`).

mod block;
mod cache_hints;
mod column;
mod entries;
mod lanes;
mod open;
mod prefetch;
mod probe;
mod query;
mod seek_hints;
mod segment;
mod sketches;
mod values;
mod wanted;
mod table;

pub(crate) use cache_hints::{prefetch_line, ColdReads};
pub(crate) use column::{open_column, ColumnAt};
pub use segment::Segment;
pub(crate) use open::{design_from_header, read_directory};
pub(crate) use table::open_table;
pub use table::Table;
