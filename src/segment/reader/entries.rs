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
    pub fn table_entries(&self, t: usize) -> TableEntries<'_> {
        // An unknown table has one "block": visiting it reports the error once.
        let blocks = self.tables.get(t).map_or(1, |table| table.dir.block_count);
        TableEntries { segment: self, table: t, block: 0, blocks, buf: Vec::new(), at: 0 }
    }

    /// All stored `(fingerprint, document id)` pairs in fingerprint order (ids are `None`
    /// without an id column).
    pub fn entries(&self) -> impl Iterator<Item = Result<(u64, Option<u64>)>> + '_ {
        let mut ids = self.ids.is_some().then(|| self.doc_ids());
        self.table_entries(0).map(move |r| {
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
        let pages = self.ids.map_or(0, |c| c.pages(self.entries));
        (0..pages).flat_map(move |page| {
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
    }
}

/// Iterator over one table's entries in stored order, decoding a block at a time.
pub struct TableEntries<'s> {
    segment: &'s Segment,
    table: usize,
    block: u64,
    blocks: u64,
    buf: Vec<u64>,
    at: usize,
}

impl Iterator for TableEntries<'_> {
    type Item = Result<u64>;

    fn next(&mut self) -> Option<Result<u64>> {
        while self.at == self.buf.len() {
            if self.block >= self.blocks {
                return None;
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
                return Some(Err(e));
            }
        }
        let v = self.buf.get(self.at).copied();
        self.at += 1;
        v.map(Ok)
    }
}
