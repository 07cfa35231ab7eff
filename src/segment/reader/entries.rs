//! Iterating in stored order: a table's entries ([`TableEntries`], a block at a time), the
//! segment's `(fingerprint, id)` pairs and its document ids, each asking the kernel for the
//! next window ahead of the scan.

use byteorder::{ByteOrder, LittleEndian as LE};

use crate::codec::BLOCK_BYTES;
use crate::error::{Location, Result};
use crate::segment::layout::ColumnKind;

use super::Segment;

impl Segment {
    /// Every entry of table `t` in stored (permuted, sorted) order.
    pub fn table_entries(&self, t: usize) -> impl Iterator<Item = Result<u64>> + '_ {
        self.table_iter(t)
    }

    /// [`Self::table_entries`], its type named.
    fn table_iter(&self, t: usize) -> TableEntries<'_> {
        // An unknown table has one "block": visiting it reports the error once.
        let blocks = self.tables.get(t).map_or(1, |table| table.dir.block_count);
        TableEntries { segment: self, table: t, block: 0, blocks, buf: Vec::new(), at: 0 }
    }

    /// Table `t`'s entries from its first entry `>= v` (a merge resuming where it
    /// stopped: the block index finds the block, the block's smaller entries are skipped).
    pub(crate) fn table_entries_from(&self, t: usize, v: u64) -> Result<TableEntries<'_>> {
        let table = self.table(t)?;
        let mut it = TableEntries { segment: self, table: t, block: table.lower_bound(v)?, blocks: table.dir.block_count, buf: Vec::new(), at: 0 };
        if it.load()? {
            it.at = it.buf.partition_point(|&x| x < v);
        }
        Ok(it)
    }

    /// Table `t`'s entries from position `ordinal` on.
    pub(crate) fn table_entries_at(&self, t: usize, ordinal: u64) -> Result<TableEntries<'_>> {
        let table = self.table(t)?;
        let blocks = table.dir.block_count;
        // the last block whose first ordinal is <= ordinal
        let (mut lo, mut hi) = (0u64, blocks);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if table.first_ordinal(mid) <= ordinal {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let mut it = TableEntries { segment: self, table: t, block: lo, blocks, buf: Vec::new(), at: 0 };
        if it.load()? {
            it.at = usize::try_from(ordinal.saturating_sub(table.first_ordinal(lo))).unwrap_or(usize::MAX).min(it.buf.len());
        }
        Ok(it)
    }

    /// The `(fingerprint, document id)` pairs from the first whose fingerprint is `>= fp`,
    /// and that pair's position in table 0 (ids and sketches follow table 0's order).
    #[allow(clippy::type_complexity)] // an opaque iterator beside a number: no alias names it
    pub(crate) fn entries_from(&self, fp: u64) -> Result<(u64, impl Iterator<Item = Result<(u64, Option<u64>)>> + '_)> {
        let table = self.table_entries_from(0, fp)?;
        let ordinal = table.ordinal();
        Ok((ordinal, self.pair_up(table, ordinal)))
    }

    /// All stored `(fingerprint, document id)` pairs in fingerprint order (ids are `None`
    /// without an id column).
    pub fn entries(&self) -> impl Iterator<Item = Result<(u64, Option<u64>)>> + '_ {
        self.pair_up(self.table_iter(0), 0)
    }

    /// Table 0's entries from position `ordinal` (where `table` starts), each with its id.
    fn pair_up<'s>(&'s self, table: TableEntries<'s>, ordinal: u64) -> impl Iterator<Item = Result<(u64, Option<u64>)>> + 's {
        let mut ids = self.ids.is_some().then(|| self.doc_ids_from(ordinal));
        table.map(move |r| {
            let fp = r?;
            let id = match ids.as_mut() {
                Some(ids) => Some(ids.next().unwrap_or_else(|| Err(self.corrupt(0, Location::default(), "fewer document ids than entries")))?),
                None => None,
            };
            Ok((fp, id))
        })
    }

    /// Every document id in table 0's order, checking each id page's CRC once (empty for
    /// a segment without ids).
    pub fn doc_ids(&self) -> impl Iterator<Item = Result<u64>> + '_ {
        self.doc_ids_from(0)
    }

    /// The document ids from position `ordinal` in table 0's order.
    pub(crate) fn doc_ids_from(&self, ordinal: u64) -> impl Iterator<Item = Result<u64>> + '_ {
        let pages = self.ids.map_or(0, |c| c.pages(self.entries));
        let per_page = self.ids.map_or(1, |c| c.per_page.max(1));
        let skip = usize::try_from(ordinal % per_page).unwrap_or(0);
        (ordinal / per_page..pages).flat_map(move |page| {
            if let Some(c) = &self.ids {
                self.scan_hint(c.pages_offset, c.page_stride, page, pages);
            }
            let (ok, err) = match self.ids.as_ref().map(|c| self.page(c, page, ColumnKind::Ids)) {
                Some(Ok(bytes)) => (Some(bytes.chunks_exact(8).map(|c| Ok(LE::read_u64(c)))), None),
                Some(Err(e)) => (None, Some(Err(e))),
                None => (None, None),
            };
            ok.into_iter().flatten().chain(err)
        })
        .filter(skip_ok(skip))
    }
}

/// A filter that drops the first `n` values that are not errors (an error is never skipped:
/// a damaged page before the resume point is still reported).
pub(super) fn skip_ok<T>(mut n: usize) -> impl FnMut(&Result<T>) -> bool {
    move |r| {
        if n > 0 && r.is_ok() {
            n -= 1;
            return false;
        }
        true
    }
}

/// Iterator over one table's entries in stored order, decoding a block at a time.
pub(crate) struct TableEntries<'s> {
    segment: &'s Segment,
    table: usize,
    block: u64,
    blocks: u64,
    buf: Vec<u64>,
    at: usize,
}

impl TableEntries<'_> {
    /// Decodes the next block into the buffer (false at the end or on an error, kept in
    /// `failed` for `next` to return).
    fn load(&mut self) -> Result<bool> {
        if self.block >= self.blocks {
            return Ok(false);
        }
        self.buf.clear();
        self.at = 0;
        if let Some(table) = self.segment.tables.get(self.table) {
            self.segment.scan_hint(table.dir.blocks_offset(), BLOCK_BYTES as u64, self.block, self.blocks);
        }
        let buf = &mut self.buf;
        let r = self.segment.visit_block(self.table, self.block, |v| {
            buf.push(v);
            true
        });
        self.block += 1;
        if let Err(e) = r {
            self.block = self.blocks;
            return Err(e);
        }
        Ok(true)
    }

    /// The position in the table of the entry `next` returns (the table's entry count at
    /// the end).
    pub(crate) fn ordinal(&self) -> u64 {
        match self.segment.tables.get(self.table) {
            Some(table) if self.at < self.buf.len() => table.first_ordinal(self.block - 1) + self.at as u64,
            Some(table) => table.first_ordinal(self.block),
            None => 0,
        }
    }
}

impl Iterator for TableEntries<'_> {
    type Item = Result<u64>;

    fn next(&mut self) -> Option<Result<u64>> {
        while self.at == self.buf.len() {
            match self.load() {
                Ok(true) => {}
                Ok(false) => return None,
                Err(e) => return Some(Err(e)),
            }
        }
        let v = self.buf.get(self.at).copied();
        self.at += 1;
        v.map(Ok)
    }
}
