//! Version 3's entry stream (`format-spec/bands.md`, "Entry stream"): a band's entries in
//! blocks of [`BLOCK_BUCKETS`] buckets, each block its entries' high ordinal bits in unary
//! (Elias-Fano: a 1 an entry, a 0 closing each of a bucket's `2^h` high values), then its
//! entries' low entries `tag << l | low` in `t + l` bits, as one bit string across the
//! band's entry pages. Where a block starts follows from the entries before it (the
//! directory's), so a lookup reads one directory page and the block's one or two pages.

use super::layout::{read_bits, seal_page, Geometry, PackedPage, BLOCK_BUCKETS, PAGE_BYTES, PAYLOAD_BITS};
use crate::error::{Error, Result};

/// Bits read from the stream at once (at most [`read_bits`]' 57).
const CHUNK: u64 = 56;

/// A band's entry pages as they fill with one bit string (values may cross a page's end).
pub(crate) struct StreamPages {
    page: PackedPage,
    bits: u64,
}

impl StreamPages {
    pub(crate) fn new() -> Self {
        StreamPages { page: PackedPage::new(), bits: 0 }
    }

    /// Appends `width` (at most 57) bits of `v`; `out` gets each page it fills.
    fn push(&mut self, v: u64, width: u64, out: &mut Vec<[u8; PAGE_BYTES as usize]>) {
        let room = PAYLOAD_BITS - self.bits;
        if width < room {
            self.page.push(v, width);
            self.bits += width;
            return;
        }
        self.page.push(v & ((1u64 << room) - 1), room);
        out.push(seal_page(&self.page.take()));
        let rest = width - room;
        self.page.push(v.checked_shr(room as u32).unwrap_or(0), rest);
        self.bits = rest;
    }

    /// Appends `n` zero bits.
    fn zeros(&mut self, mut n: u64, out: &mut Vec<[u8; PAGE_BYTES as usize]>) {
        while n > 0 {
            let w = n.min(CHUNK);
            self.push(0, w, out);
            n -= w;
        }
    }

    /// The last, partial page.
    pub(crate) fn finish(&mut self) -> Option<[u8; PAGE_BYTES as usize]> {
        (self.bits > 0).then(|| {
            self.bits = 0;
            seal_page(&self.page.take())
        })
    }
}

/// A version 3 band's entries as they come, in bucket then ordinal order: a block is
/// written once its last entry is in (or a later block's first).
pub(crate) struct BlockWriter {
    geometry: Geometry,
    stream: StreamPages,
    /// The block being gathered, and its entries `(bucket, ordinal, tag)`.
    block: u64,
    entries: Vec<(u64, u64, u64)>,
}

impl BlockWriter {
    pub(crate) fn new(geometry: Geometry) -> Self {
        BlockWriter { geometry, stream: StreamPages::new(), block: 0, entries: Vec::new() }
    }

    /// Adds an entry of `bucket`; `out` gets the pages it fills.
    pub(crate) fn push(&mut self, bucket: u64, ordinal: u64, tag: u64, out: &mut Vec<[u8; PAGE_BYTES as usize]>) {
        while self.block < bucket / BLOCK_BUCKETS {
            self.write_block(out);
        }
        self.entries.push((bucket, ordinal, tag));
    }

    /// Writes every block not written yet (the band's last), and its last, partial page.
    pub(crate) fn finish(&mut self, out: &mut Vec<[u8; PAGE_BYTES as usize]>) {
        while self.block < self.geometry.dir_slots() {
            self.write_block(out);
        }
        out.extend(self.stream.finish());
    }

    /// Writes the block being gathered: the unary high bits, then the low entries.
    fn write_block(&mut self, out: &mut Vec<[u8; PAGE_BYTES as usize]>) {
        let g = self.geometry;
        let (h, low) = (g.high_bits, g.ordinal_bits - g.high_bits);
        let first = self.block * BLOCK_BUCKETS;
        // (bucket, high) as one number counts the 0s before an entry's 1 in the block
        let mut closed = 0u64;
        for &(bucket, ordinal, _) in &self.entries {
            let key = ((bucket - first) << h) + (ordinal >> low);
            let gap = key - closed;
            // the 0s then the entry's 1, in one push when they fit one
            if gap < CHUNK {
                self.stream.push(1 << gap, gap + 1, out);
            } else {
                self.stream.zeros(gap, out);
                self.stream.push(1, 1, out);
            }
            closed = key;
        }
        self.stream.zeros((g.block_buckets(self.block) << h) - closed, out);
        for &(_, ordinal, tag) in &self.entries {
            self.stream.push(tag << low | (ordinal & ((1u64 << low) - 1)), g.entry_bits(), out);
        }
        self.entries.clear();
        self.block += 1;
    }
}

/// Finds bucket `j` of a version 3 block whose `n` entries begin at bit 0 of `bits` (the
/// band's stream from the block's start: `bits(at, width)` reads `width` bits at `at`) and
/// appends to `out` the ordinals of its entries whose tag is `want`. The block's unary
/// part is `block_buckets x 2^h + n` bits; fewer 0s, or more 1s, is damage (`corrupt`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn block_lookup<F, C>(g: &Geometry, bits: F, corrupt: C, n: u64, block_buckets: u64, j: u64, want: u32, out: &mut Vec<u32>) -> Result<()>
where
    F: Fn(u64, u64) -> Result<u64>,
    C: Fn(String) -> Error,
{
    let h = g.high_bits;
    let unary = (block_buckets << h) + n;
    // after the 0 that closes bucket j - 1 come bucket j's 1s, up to its 2^h-th 0
    let (start, before) = if j == 0 { (0, 0) } else { select_zero(&bits, &corrupt, (0, 0), unary, j << h)? };
    let (end, _) = select_zero(&bits, &corrupt, (start, before), unary, 1 << h)?;
    let (low, width) = (u64::from(g.ordinal_bits - h), g.entry_bits());
    let mut entry = before;
    let mut at = start;
    while at < end {
        let w = (end - at).min(CHUNK);
        let mut ones = bits(at, w)?;
        while ones != 0 {
            let i = u64::from(ones.trailing_zeros());
            ones &= ones - 1;
            if entry >= n {
                return Err(corrupt(format!("the block's unary bits hold more than its {n} entries")));
            }
            // the 0s before this 1 since the bucket's start are its high bits
            let high = at + i - start - (entry - before);
            let (tag, low_bits) = g.unpack(bits(unary + entry * width, width)?);
            if tag == want {
                out.push((high << low | low_bits) as u32);
            }
            entry += 1;
        }
        at += w;
    }
    Ok(())
}

/// From `(at, ones)` (a position in the first `unary` bits and the 1s before it), the
/// position just after the `k`-th 0 (`k` >= 1) and the 1s before that.
fn select_zero<F, C>(bits: &F, corrupt: &C, from: (u64, u64), unary: u64, k: u64) -> Result<(u64, u64)>
where
    F: Fn(u64, u64) -> Result<u64>,
    C: Fn(String) -> Error,
{
    let (mut at, mut zeros) = (from.0, 0u64);
    while at < unary {
        let w = (unary - at).min(CHUNK);
        let mut inverse = !bits(at, w)? & ((1u64 << w) - 1);
        let z = u64::from(inverse.count_ones());
        if zeros + z >= k {
            for _ in 1..k - zeros {
                inverse &= inverse - 1;
            }
            let end = at + u64::from(inverse.trailing_zeros()) + 1;
            // the bits from `from` to `end` are `k` 0s and the rest 1s
            return Ok((end, from.1 + (end - from.0) - k));
        }
        zeros += z;
        at += w;
    }
    Err(corrupt(format!("the block's {unary} unary bits hold too few 0s for its buckets")))
}

/// Bits `at .. at + width` (`width` at most 57) of a stream whose pages are `page(k)`'s
/// payloads of [`PAYLOAD_BITS`] bits each.
pub(crate) fn stream_bits<'a, P>(page: P, at: u64, width: u64) -> Result<u64>
where
    P: Fn(u64) -> Result<&'a [u8]>,
{
    let (k, bit) = (at / PAYLOAD_BITS, at % PAYLOAD_BITS);
    let first = read_bits(page(k)?, bit, width);
    let room = PAYLOAD_BITS - bit;
    if width <= room {
        return Ok(first);
    }
    Ok(first | read_bits(page(k + 1)?, 0, width - room) << room)
}
