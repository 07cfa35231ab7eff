//! Reading a segment's sketch column by document: the sketches of a fingerprint's entries
//! (table 0 is the identity; ids and sketches follow its order), and every sketch in
//! order for a merge. The column's pages and their checks are the reader's.

use std::ops::Range;

use crate::error::{Error, Location, Result};
use crate::segment::layout::ColumnKind;

use super::entries::skip_ok;
use super::Segment;

impl Segment {
    /// The ordinals (positions in table 0) of the entries stored under fingerprint `fp`,
    /// empty when there is none.
    pub(super) fn ordinals_of(&self, fp: u64) -> Result<Range<u64>> {
        let table = self.table(0)?;
        let mut b = table.lower_bound(fp)?;
        let mut first: Option<u64> = None;
        let mut run = 0u64;
        while b < table.dir.block_count {
            let mut pos = 0u64;
            let mut past = false;
            self.visit_block(0, b, |v| {
                if v == fp {
                    first.get_or_insert(table.first_ordinal(b) + pos);
                    run += 1;
                } else if v > fp {
                    past = true;
                    return false;
                }
                pos += 1;
                true
            })?;
            if past || table.key(b)? > fp {
                break;
            }
            b += 1;
        }
        Ok(first.map_or(0..0, |first| first..first + run))
    }

    /// The fingerprint of table 0's entry number `ordinal` (table 0 is the identity):
    /// decodes the one block that holds it.
    pub(crate) fn fingerprint_at(&self, ordinal: u64) -> Result<u64> {
        let table = self.table(0)?;
        let found = table.index.block_of_ordinal(ordinal).map_err(|f| f.in_table(0).into_error(&self.path))?;
        let Some((b, first)) = found else {
            return Err(Error::InvalidArgument(format!("entry {ordinal} out of range ({} entries)", self.entries)));
        };
        let (mut pos, mut value) = (first, None);
        self.visit_block(0, b, |v| {
            if pos == ordinal {
                value = Some(v);
                return false;
            }
            pos += 1;
            true
        })?;
        value.ok_or_else(|| self.corrupt(table.block_offset(b), Location { table: Some(0), block: Some(b) }, format!("block {b} holds fewer entries than its index counts")))
    }

    /// The sketch bytes stored with `(fp, id)` (all zero: stored without a sketch);
    /// `Ok(None)` when the segment holds no such pair or has no sketch column.
    pub(crate) fn sketch_of(&self, fp: u64, id: u64) -> Result<Option<&[u8]>> {
        if self.sketches.is_none() || self.ids.is_none() {
            return Ok(None);
        }
        for ordinal in self.ordinals_of(fp)? {
            if self.doc_id(ordinal)? == id {
                return self.sketch(ordinal).map(Some);
            }
        }
        Ok(None)
    }

    /// Every sketch in table 0's order, each page's CRC checked once (empty for a segment
    /// without sketches).
    pub fn sketches_in_order(&self) -> impl Iterator<Item = Result<&[u8]>> + '_ {
        self.sketches_from(0)
    }

    /// The sketch column's pages in table 0's order, each its sketches' bytes (a whole
    /// number of sketches), its CRC checked (none for a segment without sketches).
    pub(crate) fn sketch_pages(&self) -> impl Iterator<Item = Result<&[u8]>> + '_ {
        let column = self.sketches;
        let pages = column.map_or(0, |c| c.pages(self.entries));
        (0..pages).filter_map(move |page| {
            let c = column.as_ref()?;
            let bytes = self.page(c, page, ColumnKind::Sketches);
            if bytes.is_ok() {
                self.scan_hint(c.pages_offset, c.page_stride, page, pages);
            }
            Some(bytes)
        })
    }

    /// The sketches from position `ordinal` in table 0's order.
    pub(crate) fn sketches_from(&self, ordinal: u64) -> impl Iterator<Item = Result<&[u8]>> + '_ {
        let column = self.sketches;
        let pages = column.map_or(0, |c| c.pages(self.entries));
        let per_page = column.map_or(1, |c| c.per_page.max(1));
        let skip = usize::try_from(ordinal % per_page).unwrap_or(0);
        (ordinal / per_page..pages).flat_map(move |page| {
            let (ok, err) = match column.as_ref().map(|c| (c, self.page(c, page, ColumnKind::Sketches))) {
                Some((c, Ok(bytes))) => {
                    self.scan_hint(c.pages_offset, c.page_stride, page, pages);
                    (Some(bytes.chunks_exact(c.value_bytes as usize).map(Ok)), None)
                }
                Some((_, Err(e))) => (None, Some(Err(e))),
                None => (None, None),
            };
            ok.into_iter().flatten().chain(err)
        })
        .filter(skip_ok(skip))
    }

    /// The error for a fingerprint a permuted table holds and table 0 does not.
    pub(super) fn missing_from_table0(&self, fp: u64) -> crate::error::Error {
        let offset = self.tables.first().map_or(0, |t| t.dir.blocks_offset());
        self.corrupt(offset, Location { table: Some(0), block: None }, format!("fingerprint {fp:#018x} found in a permuted table is missing from table 0"))
    }
}
