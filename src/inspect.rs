//! Looking inside index files: the small, stable API behind the `simdex` tool's `inspect`
//! and `dump-log` subcommands. The file-format modules themselves (log, manifest,
//! tombstones, codec internals, the engine's files) are private; this module exposes what
//! an operator needs to see of them, and nothing that would let a caller write a file the
//! engine did not. Everything here only reads; judging files (verify) and copying what is
//! intact of a damaged index (salvage, recover) is [`crate::recovery`]'s.
//!
//! ```
//! use simdex::inspect::{gap_histogram, segment_anatomy};
//! use simdex::{build_segment, storage::FsStorage, BuildOptions, Segment};
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("pages.sdx");
//! let fingerprints: Vec<u64> = (0..1000u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
//! build_segment(&FsStorage, &path, &fingerprints, None, &BuildOptions::default())?;
//! let segment = Segment::open(&path)?;
//! let anatomy = segment_anatomy(&segment);
//! assert_eq!(anatomy.entries, 1000);
//! // Every entry but a table's first has one gap symbol.
//! let gaps: u64 = gap_histogram(&segment, 0, |_| {})?.iter().map(|&(_, n)| n).sum();
//! assert_eq!(gaps + 1, 1000);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::path::{Path, PathBuf};

use crate::codec::{Codec, SymbolHistogram, BLOCK_BYTES, EQUAL};
use crate::engine::files::{self, FileKind};
use crate::engine::manifest::Manifest;
use crate::error::{Error, Result};
use crate::plan::information_bound_bits;
use crate::segment::layout::INDEX_BYTES_PER_BLOCK;
use crate::segment::Segment;
use crate::storage::Storage;

pub use crate::engine::log::{Damage as LogDamage, LogEnd, LogScan, OpKind, Record as LogRecord};

/// A symbol of a table's gap code: the position `h` of the most significant bit in which an
/// entry differs from the previous one (paper section 3.2), or a repeat of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GapSymbol {
    /// The entry differs from the previous one first at bit `h` (0 = least significant).
    Top(u32),
    /// The entry equals the previous one.
    Equal,
}

impl GapSymbol {
    fn from_index(s: usize) -> Self {
        if s == EQUAL {
            GapSymbol::Equal
        } else {
            GapSymbol::Top(s as u32)
        }
    }
}

impl fmt::Display for GapSymbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GapSymbol::Top(h) => write!(f, "{h}"),
            GapSymbol::Equal => f.write_str("equal"),
        }
    }
}

/// How one table of a segment is laid out and compressed.
#[derive(Clone, Debug, PartialEq)]
pub struct TableAnatomy {
    /// Table index (0 is the identity permutation).
    pub table: usize,
    /// Entries stored.
    pub entries: u64,
    /// Compressed blocks.
    pub blocks: u64,
    /// Bytes of the blocks (1 KiB each).
    pub block_bytes: u64,
    /// Bytes of the block index (key, entry count and checksum per block).
    pub index_bytes: u64,
    /// Prefix length `p_i` of the table's design.
    pub prefix_bits: u32,
    /// The gap codec.
    pub codec: Codec,
    /// The permutation, in words.
    pub permutation: String,
    /// Code length in bits of every symbol the code uses.
    pub code_lengths: Vec<(GapSymbol, u8)>,
}

/// What a segment holds and how it is laid out: the figures `simdex inspect` prints.
#[derive(Clone, Debug, PartialEq)]
pub struct SegmentAnatomy {
    /// Segment format version.
    pub format_version: u32,
    /// Largest distance the design answers.
    pub k: u32,
    /// The design's block counts per level.
    pub levels: Vec<u32>,
    /// The design, in words.
    pub design: String,
    /// Whether the segment stores document ids.
    pub has_ids: bool,
    /// Bytes per sketch, when the segment stores sketches.
    pub sketch_bytes: Option<usize>,
    /// Fingerprints stored.
    pub entries: u64,
    /// File size in bytes.
    pub file_bytes: u64,
    /// Bits per fingerprint a sorted set of this size needs at least, per table.
    pub information_bound_bits: f64,
    /// Every table.
    pub tables: Vec<TableAnatomy>,
}

/// The layout of `segment` (reads only what opening read: no block is decoded).
pub fn segment_anatomy(segment: &Segment) -> SegmentAnatomy {
    let tables = segment
        .tables()
        .iter()
        .enumerate()
        .map(|(i, t)| TableAnatomy {
            table: i,
            entries: t.entries(),
            blocks: t.block_count(),
            block_bytes: t.block_count() * BLOCK_BYTES as u64,
            index_bytes: t.block_count() * INDEX_BYTES_PER_BLOCK,
            prefix_bits: t.design().prefix_bits,
            codec: t.codec(),
            permutation: t.design().permutation.describe(),
            code_lengths: used_symbols(t.code().lengths().iter().map(|&l| u64::from(l))).map(|(s, l)| (s, l as u8)).collect(),
        })
        .collect();
    SegmentAnatomy {
        format_version: segment.format_version(),
        k: segment.design().k(),
        levels: segment.design().levels().to_vec(),
        design: segment.design().summary(),
        has_ids: segment.has_ids(),
        sketch_bytes: segment.sketch_layout().map(|(bytes, _)| bytes),
        entries: segment.len(),
        file_bytes: segment.file_len(),
        information_bound_bits: information_bound_bits(segment.len()),
        tables,
    }
}

/// The histogram of gap symbols of table `table` (the paper's Figure 2a): how often each
/// symbol occurs between successive entries. Decodes (and checks) every block of the table;
/// `progress` is called with the number of entries decoded so far, every 65,536 entries.
pub fn gap_histogram(segment: &Segment, table: usize, mut progress: impl FnMut(u64)) -> Result<Vec<(GapSymbol, u64)>> {
    let Some(t) = segment.tables().get(table) else {
        return Err(Error::InvalidArgument(format!("table {table}: the segment has tables 0..{}", segment.tables().len())));
    };
    let mut histogram = SymbolHistogram::new();
    for (j, v) in segment.table_entries(table).enumerate() {
        histogram.push(t.codec(), v?);
        if j % (1 << 16) == 0 {
            progress(j as u64);
        }
    }
    Ok(used_symbols(histogram.counts().iter().copied()).collect())
}

fn used_symbols(values: impl IntoIterator<Item = u64>) -> impl Iterator<Item = (GapSymbol, u64)> {
    values.into_iter().enumerate().filter(|&(_, v)| v > 0).map(|(s, v)| (GapSymbol::from_index(s), v))
}

/// One log file of an index directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogFile {
    /// File name.
    pub name: String,
    /// Full path.
    pub path: PathBuf,
    /// The log's number (from its name).
    pub number: u64,
    /// True when the manifest says every record in it is already flushed (the file is
    /// left over and the next writable open removes it).
    pub obsolete: bool,
}

/// The log files of the index in `dir`, oldest first.
pub fn log_files(storage: &dyn Storage, dir: &Path) -> Result<Vec<LogFile>> {
    let mut names = storage.list(dir).map_err(|e| Error::io(dir, "list", e))?;
    names.sort();
    let flushed_below = Manifest::load(storage, dir).ok().flatten().map(|m| m.log_number);
    Ok(names
        .into_iter()
        .filter_map(|name| match files::parse(&name) {
            FileKind::Log(number) => Some(LogFile { path: dir.join(&name), name, number, obsolete: flushed_below.is_some_and(|l| number < l) }),
            FileKind::Manifest
            | FileKind::Lock
            | FileKind::Recipe
            | FileKind::Segment(_)
            | FileKind::Bands(_)
            | FileKind::Ids(_)
            | FileKind::Tombstones(_)
            | FileKind::Temporary
            | FileKind::Merge
            | FileKind::Unknown => None,
        })
        .collect())
}

impl LogFile {
    /// Reads the log (once: a live log may grow meanwhile) and hands every intact record to
    /// `visit`, in order, skipping damage (reported in the scan's `damage`) the way
    /// `simdex recover` does. Returns the scan and the length in bytes of what was read.
    /// Fails when the file cannot be read or is not a log.
    pub fn scan(&self, storage: &dyn Storage, visit: impl FnMut(&LogRecord<'_>) -> Result<()>) -> Result<(LogScan, u64)> {
        let bytes = storage.read_copy(&self.path).map_err(|e| Error::io(&self.path, "read", e))?;
        let scan = crate::engine::log::scan_log(&self.path, &bytes, self.number, crate::engine::log::ScanMode::Salvage, visit)?;
        Ok((scan, bytes.len() as u64))
    }
}
