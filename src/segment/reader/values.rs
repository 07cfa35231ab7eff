//! Reading a column's values by ordinal: a document's id and sketch, each page checked
//! against its CRC before use (a sketch page on its first read in this process: the
//! crawler's check reads several a query).


use super::column::ColumnAt;
use super::Segment;
use crate::error::{Error, Location, Result};
use crate::integrity::verify_crc;
use crate::segment::layout::{slice, ColumnKind, PAGE_BYTES, PAGE_CRC_BYTES};

impl Segment {
    /// The document id of table 0's entry number `ordinal` (after its page's CRC check).
    pub fn doc_id(&self, ordinal: u64) -> Result<u64> {
        let column = self.ids.as_ref().ok_or_else(|| Error::InvalidArgument("the segment has no document ids".into()))?;
        let id: &[u8; 8] = self.value(column, ordinal, ColumnKind::Ids)?.try_into().map_err(|_| self.corrupt(0, Location::default(), "document id of the wrong width"))?;
        Ok(u64::from_le_bytes(*id))
    }

    /// The sketch of table 0's entry number `ordinal` (after its page's CRC check).
    pub fn sketch(&self, ordinal: u64) -> Result<&[u8]> {
        let column = self.sketches.as_ref().ok_or_else(|| Error::InvalidArgument("the segment has no sketches".into()))?;
        self.value(column, ordinal, ColumnKind::Sketches)
    }

    /// Value `ordinal` of `column`.
    fn value(&self, column: &ColumnAt, ordinal: u64, kind: ColumnKind) -> Result<&[u8]> {
        if ordinal >= self.entries {
            return Err(Error::InvalidArgument(format!("entry {ordinal} out of range ({} entries)", self.entries)));
        }
        let bytes = self.page(column, ordinal / column.per_page, kind)?;
        let at = (ordinal % column.per_page) * column.value_bytes;
        slice(bytes, at, column.value_bytes, kind.name()).map_err(|f| f.into_error(&self.path))
    }

    /// Layout 3: checks the CRC page at `at` against its own CRC (its last 4 bytes). A
    /// reader of values does not: a damaged CRC in it fails its page's check instead.
    pub(crate) fn crc_page_check(&self, at: u64, kind: ColumnKind) -> Result<()> {
        let what = format!("{} CRC page at byte offset {at}", kind.name());
        let bytes = slice(&self.bytes, at, PAGE_BYTES - PAGE_CRC_BYTES, &what).map_err(|f| f.into_error(&self.path))?;
        let stored = self.array::<4>(at + PAGE_BYTES - PAGE_CRC_BYTES, Location::default(), "CRC page checksum")?;
        verify_crc(bytes, u32::from_le_bytes(*stored)).map_err(|m| m.corrupt(&self.path, at, Location::default(), what))
    }

    /// The value bytes of page `page` of `column`, after checking its CRC.
    pub(crate) fn page(&self, column: &ColumnAt, page: u64, kind: ColumnKind) -> Result<&[u8]> {
        let (start, len) = column.page_span(page, self.entries);
        // the page's name is written only into an error (a read of a sketch or an id is
        // otherwise an allocation and a format each: the check reads several)
        let what = || format!("{} page {page}", kind.name());
        let span = |len: u64| match slice(&self.bytes, start, len, kind.name()) {
            Ok(bytes) => Ok(bytes),
            Err(_) => Err(slice(&self.bytes, start, len, &what()).map_or_else(|f| f.into_error(&self.path), |_| self.corrupt(start, Location::default(), what()))),
        };
        let bytes = span(len)?;
        let remember = kind == ColumnKind::Sketches;
        if remember && self.sketch_pages.is_verified(page) {
            return Ok(bytes);
        }
        let stored = self.array::<4>(column.crc_offset(page), Location::default(), "page checksum")?;
        let checked = match (column.crcs_offset, column.grouped_pages) {
            (Some(_), _) => bytes,
            // Layout 3: the CRC (in the group's CRC page) covers the whole page, padding included.
            (None, Some(_)) => span(PAGE_BYTES)?,
            // Layout 2: the CRC covers the whole page before it, padding included.
            (None, None) => span(PAGE_BYTES - PAGE_CRC_BYTES)?,
        };
        verify_crc(checked, u32::from_le_bytes(*stored)).map_err(|m| m.corrupt(&self.path, start, Location::default(), what()))?;
        if remember {
            self.sketch_pages.set_verified(page);
        }
        Ok(bytes)
    }
}
