//! A table's block index as the reader uses it: the keys, entry counts and block CRCs read
//! in place from the mapped file (no copy on the heap), checked when first used.
//!
//! Version 2 splits the index into chunks of [`INDEX_CHUNK_BLOCKS`] blocks, each with its
//! own CRC and base ordinal in a small summary (`format-spec/segment.md`). Opening a table
//! reads only the summary, so opening costs the same whatever the segment's size; a
//! chunk is checked the first time one of its blocks is read. A search over the keys runs
//! on unchecked keys and then checks the two keys that bracket its answer: those are true
//! values, and the true keys are sorted, so the answer is right whatever an unchecked key
//! elsewhere says. Whole-table readers ([`BlockIndex::checked_keys`]) check every chunk.
//!
//! Version 1 has one CRC over the whole index, so it is checked whole at open, as before.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

use byteorder::{ByteOrder, LittleEndian as LE};

use super::layout::*;
use crate::error::Location;
use crate::integrity::{verify_crc, Fault};
use crate::interpolation::lower_bound;
use crate::storage::FileBytes;

/// One table's block index.
#[derive(Debug)]
pub(crate) struct BlockIndex {
    bytes: FileBytes,
    /// Where the keys start (then the counts, then the block CRCs).
    offset: u64,
    blocks: u64,
    entries: u64,
    /// The keys, when the mapping cannot be read in place as `u64`s (not 8-aligned, or a
    /// big-endian machine).
    owned_keys: Option<Vec<u64>>,
    /// First ordinal of each chunk's first block, then the table's entry count.
    bases: Vec<u64>,
    /// Version 2: each chunk's CRC (version 1 is checked whole at open).
    chunk_crcs: Vec<u32>,
    checked: Vec<AtomicBool>,
    all_checked: AtomicBool,
    /// One bit per block, set once the block's bytes have matched its stored CRC: the
    /// mapped bytes never change, so later reads through this index skip the check. A
    /// block that fails its check is never marked, so it fails every time it is read.
    verified: Box<[AtomicU64]>,
    /// Seek hints ([`SEEK_HINTS`] words per block, see `reader.rs`), found by the first query
    /// that decodes a block and kept for later ones: one array per index chunk, allocated
    /// when a query first needs it.
    hints: Box<[OnceLock<Box<[AtomicU64]>>]>,
}

/// Words of seek hints kept per block.
pub(crate) const SEEK_HINTS: usize = 4;

impl BlockIndex {
    /// Opens the index of the table `d` of a file of format `version`: version 2 reads and
    /// checks the summary only; version 1 checks the whole index against `d.index_crc`.
    pub(crate) fn open(bytes: &FileBytes, version: u32, d: &DirTable) -> Result<Self, Fault> {
        let n = d.block_count;
        let columns = slice(bytes, d.index_offset, n * INDEX_BYTES_PER_BLOCK, "block index")?;
        let chunks = n.div_ceil(INDEX_CHUNK_BLOCKS);
        let mut bases = Vec::with_capacity(chunks as usize + 1);
        let mut chunk_crcs = Vec::new();
        if version >= 2 {
            let summary = slice(bytes, d.summary_offset(), d.summary_len(), "block index summary")?;
            verify_crc(summary, d.index_crc).map_err(|m| m.fault(d.summary_offset(), Location::default(), "block index summary"))?;
            for (c, e) in (0u64..).zip(summary.chunks_exact(SUMMARY_BYTES_PER_CHUNK as usize).filter_map(|e| e.first_chunk::<12>())) {
                let (base, crc) = e.split_at(8);
                let base = LE::read_u64(base);
                if base > d.entries || bases.last().is_some_and(|&prev| base <= prev) || (c == 0 && base != 0) {
                    return Err(Fault::at(d.summary_offset() + c * SUMMARY_BYTES_PER_CHUNK, format!("block index chunk {c} starts at entry {base}, out of order")));
                }
                bases.push(base);
                chunk_crcs.push(LE::read_u32(crc));
            }
        } else {
            verify_crc(columns, d.index_crc).map_err(|m| m.fault(d.index_offset, Location::default(), "block index"))?;
            let counts = columns.get(n as usize * 8..n as usize * 10).unwrap_or_default();
            let mut total = 0u64;
            for (b, count) in (0u64..).zip(counts.chunks_exact(2).map(LE::read_u16)) {
                if b % INDEX_CHUNK_BLOCKS == 0 {
                    bases.push(total);
                }
                total += u64::from(count);
            }
        }
        bases.push(d.entries);
        let keys_bytes = columns.get(..n as usize * 8).unwrap_or_default();
        let owned_keys = in_place_u64s(keys_bytes).is_none().then(|| keys_bytes.chunks_exact(8).map(LE::read_u64).collect());
        let index = BlockIndex {
            bytes: bytes.clone(),
            offset: d.index_offset,
            blocks: n,
            entries: d.entries,
            owned_keys,
            bases,
            chunk_crcs,
            checked: (0..chunks).map(|_| AtomicBool::new(false)).collect(),
            all_checked: AtomicBool::new(false),
            verified: (0..n.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            hints: (0..chunks).map(|_| OnceLock::new()).collect(),
        };
        if version < 2 {
            // Version 1 has no chunk CRCs: its invariants are checked now, whole.
            index.check_all()?;
        }
        Ok(index)
    }

    fn columns(&self) -> &[u8] {
        self.bytes.get(self.offset as usize..).and_then(|b| b.get(..(self.blocks * INDEX_BYTES_PER_BLOCK) as usize)).unwrap_or_default()
    }

    /// The keys as stored, unchecked.
    pub(crate) fn raw_keys(&self) -> &[u64] {
        match &self.owned_keys {
            Some(keys) => keys,
            None => in_place_u64s(self.columns().get(..self.blocks as usize * 8).unwrap_or_default()).unwrap_or_default(),
        }
    }

    /// Entries in block `b` as stored (0 past the end); checked once its chunk is.
    pub(crate) fn count(&self, b: u64) -> u32 {
        if b >= self.blocks {
            return 0;
        }
        let at = (self.blocks * 8 + b * 2) as usize;
        self.columns().get(at..at + 2).map_or(0, |c| u32::from(LE::read_u16(c)))
    }

    /// Where block `b`'s CRC is stored (absolute offset).
    pub(crate) fn crc_offset(&self, b: u64) -> u64 {
        self.offset + self.blocks * 10 + b * 4
    }

    /// True once block `b`'s bytes have matched its CRC ([`Self::mark_verified`]).
    #[inline(always)]
    pub(crate) fn is_verified(&self, b: u64) -> bool {
        // Relaxed: the bit guards no other memory; the bytes it vouches for are the
        // immutable mapping, the same for every thread.
        self.verified.get((b / 64) as usize).is_some_and(|w| w.load(Ordering::Relaxed) & (1 << (b % 64)) != 0)
    }

    /// Records that block `b`'s bytes matched its CRC.
    #[inline]
    pub(crate) fn mark_verified(&self, b: u64) {
        if let Some(w) = self.verified.get((b / 64) as usize) {
            w.fetch_or(1 << (b % 64), Ordering::Relaxed);
        }
    }

    /// The seek hints of block `b`: all zero until [`Self::set_hints`] (a word may read as
    /// zero while another thread stores them, which means "no hint").
    #[inline(always)]
    pub(crate) fn hints(&self, b: u64) -> [u64; SEEK_HINTS] {
        let words = self.hints.get((b / INDEX_CHUNK_BLOCKS) as usize).and_then(|c| c.get());
        let at = (b % INDEX_CHUNK_BLOCKS) as usize * SEEK_HINTS;
        // Relaxed: each word is a value of its own, and the bytes it describes do not change.
        std::array::from_fn(|i| words.and_then(|w| w.get(at + i)).map_or(0, |w| w.load(Ordering::Relaxed)))
    }

    /// The first word of block `b`'s seek hints, when its chunk has any (to prefetch).
    #[inline(always)]
    pub(crate) fn hints_word(&self, b: u64) -> Option<&AtomicU64> {
        let words = self.hints.get((b / INDEX_CHUNK_BLOCKS) as usize)?.get()?;
        words.get((b % INDEX_CHUNK_BLOCKS) as usize * SEEK_HINTS)
    }

    /// Stores the seek hints of block `b`.
    #[cold]
    pub(crate) fn set_hints(&self, b: u64, hints: [u64; SEEK_HINTS]) {
        let Some(chunk) = self.hints.get((b / INDEX_CHUNK_BLOCKS) as usize) else { return };
        let words = chunk.get_or_init(|| (0..INDEX_CHUNK_BLOCKS as usize * SEEK_HINTS).map(|_| AtomicU64::new(0)).collect());
        let at = (b % INDEX_CHUNK_BLOCKS) as usize * SEEK_HINTS;
        for (i, h) in hints.into_iter().enumerate() {
            if let Some(w) = words.get(at + i) {
                w.store(h, Ordering::Relaxed);
            }
        }
    }

    /// Position in the table of block `b`'s first entry (the entry count past the end).
    pub(crate) fn first_ordinal(&self, b: u64) -> u64 {
        if b >= self.blocks {
            return self.entries;
        }
        let chunk = b / INDEX_CHUNK_BLOCKS;
        let base = self.bases.get(chunk as usize).copied().unwrap_or(self.entries);
        base + (chunk * INDEX_CHUNK_BLOCKS..b).map(|j| u64::from(self.count(j))).sum::<u64>()
    }

    /// The block holding the table's entry number `ordinal` and that block's first ordinal
    /// (`None` past the end). Checks the index chunk it reads the counts of.
    pub(crate) fn block_of_ordinal(&self, ordinal: u64) -> Result<Option<(u64, u64)>, Fault> {
        if ordinal >= self.entries {
            return Ok(None);
        }
        // the last chunk whose base is at most `ordinal`
        let chunk = self.bases.partition_point(|&base| base <= ordinal).saturating_sub(1) as u64;
        let first = chunk * INDEX_CHUNK_BLOCKS;
        self.check_block(first)?;
        let mut at = self.bases.get(chunk as usize).copied().unwrap_or(self.entries);
        for b in first..(first + INDEX_CHUNK_BLOCKS).min(self.blocks) {
            let next = at + u64::from(self.count(b));
            if ordinal < next {
                return Ok(Some((b, at)));
            }
            at = next;
        }
        Ok(None)
    }

    /// Asks the kernel for the index chunk [`Self::block_of_ordinal`] reads for `ordinal`
    /// (its keys, counts and CRCs) when it is not checked yet (a hint; nothing past the end).
    pub(crate) fn will_need_chunk_of(&self, ordinal: u64) {
        if ordinal >= self.entries {
            return;
        }
        let chunk = self.bases.partition_point(|&base| base <= ordinal).saturating_sub(1) as u64;
        if self.checked.get(chunk as usize).is_none_or(|c| c.load(Ordering::Acquire)) {
            return;
        }
        let first = chunk * INDEX_CHUNK_BLOCKS;
        let len = (first + INDEX_CHUNK_BLOCKS).min(self.blocks) - first;
        for (start, width) in [(0, 8), (self.blocks * 8, 2), (self.blocks * 10, 4)] {
            self.bytes.will_need((self.offset + start + first * width) as usize, (len * width) as usize);
        }
    }

    /// Checks the chunk holding block `b` (once).
    #[inline]
    pub(crate) fn check_block(&self, b: u64) -> Result<(), Fault> {
        let chunk = b / INDEX_CHUNK_BLOCKS;
        match self.checked.get(chunk as usize) {
            Some(flag) if flag.load(Ordering::Acquire) => Ok(()),
            Some(flag) => {
                self.check_chunk(chunk)?;
                flag.store(true, Ordering::Release);
                Ok(())
            }
            None => Err(Fault::at(self.offset, format!("block {b} is past the table's {} blocks", self.blocks))),
        }
    }

    #[cold]
    fn check_chunk(&self, chunk: u64) -> Result<(), Fault> {
        let first = chunk * INDEX_CHUNK_BLOCKS;
        let last = (first + INDEX_CHUNK_BLOCKS).min(self.blocks);
        let (n, len) = (self.blocks as usize, (last - first) as usize);
        let columns = self.columns();
        let part = |start: usize, width: usize| columns.get(start + first as usize * width..).and_then(|p| p.get(..len * width)).unwrap_or_default();
        let (keys, counts, crcs) = (part(0, 8), part(n * 8, 2), part(n * 10, 4));
        if let Some(&stored) = self.chunk_crcs.get(chunk as usize) {
            let mut h = crc32fast::Hasher::new();
            for p in [keys, counts, crcs] {
                h.update(p);
            }
            let computed = h.finalize();
            if computed != stored {
                return Err(Fault::at(self.offset + first * 8, format!("block index chunk {chunk} (blocks {first}..{last}) checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")));
            }
        }
        let mut total = 0u64;
        let mut prev = 0u64;
        for (j, (key, count)) in (first..).zip(keys.chunks_exact(8).map(LE::read_u64).zip(counts.chunks_exact(2).map(LE::read_u16))) {
            if count == 0 {
                return Err(Fault::at(self.offset + self.blocks * 8 + j * 2, "block holds no entries").in_block(j));
            }
            if j > first && key < prev {
                return Err(Fault::at(self.offset + j * 8, "block keys are not sorted").in_block(j));
            }
            prev = key;
            total += u64::from(count);
        }
        let (base, next) = (self.bases.get(chunk as usize).copied().unwrap_or(0), self.bases.get(chunk as usize + 1).copied().unwrap_or(0));
        if base + total != next {
            return Err(Fault::at(self.offset + self.blocks * 8 + first * 2, format!("block counts of chunk {chunk} add up to {total}, the summary says {}", next.saturating_sub(base))));
        }
        Ok(())
    }

    /// Checks every chunk and the order across them; then the keys can be trusted whole.
    pub(crate) fn check_all(&self) -> Result<(), Fault> {
        if self.all_checked.load(Ordering::Acquire) {
            return Ok(());
        }
        let keys = self.raw_keys();
        for c in 0..self.checked.len() as u64 {
            self.check_block(c * INDEX_CHUNK_BLOCKS)?;
            let first = c * INDEX_CHUNK_BLOCKS;
            if first > 0 && keys.get(first as usize) < keys.get(first as usize - 1) {
                return Err(Fault::at(self.offset + first * 8, "block keys are not sorted").in_block(first));
            }
        }
        self.all_checked.store(true, Ordering::Release);
        Ok(())
    }

    /// Every key, after [`Self::check_all`].
    pub(crate) fn checked_keys(&self) -> Result<&[u64], Fault> {
        self.check_all()?;
        Ok(self.raw_keys())
    }

    /// Key of block `b` (after checking its chunk).
    pub(crate) fn key(&self, b: u64) -> Result<u64, Fault> {
        self.check_block(b)?;
        self.raw_keys().get(b as usize).copied().ok_or_else(|| Fault::at(self.offset, format!("no block {b}")))
    }

    /// The first block whose key is `>= x` (`blocks()` when none is). The search runs on
    /// the stored keys; its answer is then confirmed by the checked keys around it, and
    /// when an unchecked key misled it, the whole index is checked and the search repeated.
    pub(crate) fn lower_bound(&self, x: u64) -> Result<u64, Fault> {
        let keys = self.raw_keys();
        let b = lower_bound(keys, x) as u64;
        let below_ok = b == 0 || self.key(b - 1)? < x;
        let above_ok = b == self.blocks || self.key(b)? >= x;
        if below_ok && above_ok {
            return Ok(b);
        }
        Ok(lower_bound(self.checked_keys()?, x) as u64)
    }
}

/// `bytes` read in place as little-endian `u64`s, when they are 8-aligned on a
/// little-endian machine.
fn in_place_u64s(bytes: &[u8]) -> Option<&[u64]> {
    if cfg!(target_endian = "big") {
        return None;
    }
    // SAFETY: every bit pattern is a valid u64, and `align_to` returns in `mid` only the
    // part of `bytes` that is aligned for u64; we use it only when nothing is left over at
    // either end, so `mid` covers exactly `bytes`. The bytes are immutable for the life of
    // the borrow (a `FileBytes` is never modified). Exercised by every query test on a
    // mapped segment (mappings are page-aligned and tables 1024-aligned).
    let (head, mid, tail) = unsafe { bytes.align_to::<u64>() };
    (head.is_empty() && tail.is_empty()).then_some(mid)
}
