//! One permuted table of an open segment ([`Table`]): its design, codec and code, its block
//! index and the key search over it, and [`open_table`], which checks a table's head,
//! trailer and index summary against the directory. Reading the blocks is `block`'s.

use std::path::{Path, PathBuf};

use crate::codec::{Code, Codec, BLOCK_BYTES};
use crate::error::Result;
use crate::integrity::Fault;
use crate::plan::TableDesign;
use crate::segment::block_index::BlockIndex;
use crate::segment::layout::{slice, DirTable, TableHead, TableTrailer, T_LENGTHS, T_ORDER};
use crate::storage::FileBytes;

use super::cache_hints::prefetch_line;

/// One permuted table of an open segment.
#[derive(Debug)]
pub struct Table {
    /// The table's number in the design (its position in the file).
    pub(super) number: usize,
    pub(super) design: TableDesign,
    pub(super) codec: Codec,
    pub(super) code: Code,
    pub(super) dir: DirTable,
    /// The block index, read in place and checked as it is used.
    pub(super) index: BlockIndex,
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

    pub(super) fn crc_offset(&self, b: u64) -> u64 {
        self.index.crc_offset(b)
    }

    /// Asks for the cache line of the block key where a search for `x` ([`Self::lower_bound`],
    /// an interpolation search) looks first, without waiting for it.
    #[inline(always)]
    pub(super) fn prefetch_search(&self, x: u64) {
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
