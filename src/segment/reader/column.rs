//! Column access: where a column's pages are ([`ColumnAt`], version 1's id array, a
//! layout-2 column or a layout-3 one), the checks that open one, and reading a value or a
//! page through its CRC.

use crate::error::{Location, Result};
use crate::integrity::{verify_crc, Fault};
use crate::segment::layout::{
    slice, ColumnHead, ColumnKind, DirIds, COLUMN_HEAD_BYTES, C_ENTRIES, C_KIND, C_VERSION, GROUP_PAGES, IDS_PER_PAGE_V1, PAGE_BYTES, PAGE_CRC_BYTES, PAGE_CRC_LAYOUT, SKETCH_LAYOUT,
};


/// Where a column's pages are: version 1's id array (page CRCs in an array after it) or a
/// version-2 column (each page ends with its CRC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ColumnAt {
    /// Offset of the first page.
    pub pages_offset: u64,
    /// Distance between the starts of consecutive pages.
    pub page_stride: u64,
    /// Bytes per value.
    pub value_bytes: u64,
    /// Values per page.
    pub per_page: u64,
    /// Version 1: where the array of page CRCs starts; version 2: `None`, the CRC is in
    /// each page's last [`PAGE_CRC_BYTES`].
    pub crcs_offset: Option<u64>,
    /// The column head's scheme tag (zero for ids and in version 1).
    pub scheme: [u8; 8],
    /// Version 2: the column head's offset.
    pub head_offset: Option<u64>,
    /// Layout 3: the column's pages (`None` otherwise). After each group of
    /// [`GROUP_PAGES`] pages (the last group may be shorter) comes its CRC page.
    pub grouped_pages: Option<u64>,
}

impl ColumnAt {
    /// Version 1's id column.
    pub(crate) fn v1_ids(ids: &DirIds) -> Self {
        Self {
            pages_offset: ids.ids_offset,
            page_stride: IDS_PER_PAGE_V1 * 8,
            value_bytes: 8,
            per_page: IDS_PER_PAGE_V1,
            crcs_offset: Some(ids.crcs_offset),
            scheme: [0; 8],
            head_offset: None,
            grouped_pages: None,
        }
    }

    /// A version-2 column with `head` at `head_offset`.
    pub(crate) fn v2(head: &ColumnHead, head_offset: u64) -> Self {
        Self {
            pages_offset: head_offset + COLUMN_HEAD_BYTES,
            page_stride: PAGE_BYTES,
            value_bytes: u64::from(head.value_bytes),
            per_page: u64::from(head.per_page),
            crcs_offset: None,
            scheme: head.scheme,
            head_offset: Some(head_offset),
            grouped_pages: (head.layout >= SKETCH_LAYOUT).then(|| head.entries.div_ceil(u64::from(head.per_page.max(1)))),
        }
    }

    /// The place of page `page` counted in pages from the first, CRC pages included.
    fn slot(&self, page: u64) -> u64 {
        match self.grouped_pages {
            Some(_) => page + page / GROUP_PAGES,
            None => page,
        }
    }

    /// Layout 3: where the CRC page of group `group` starts, and the pages it covers.
    pub(crate) fn crc_page(&self, group: u64) -> Option<(u64, u64)> {
        let pages = self.grouped_pages?;
        let first = group * GROUP_PAGES;
        let covered = pages.saturating_sub(first).min(GROUP_PAGES);
        Some((self.pages_offset + (first + group + covered) * PAGE_BYTES, covered))
    }

    /// Pages holding `entries` values.
    pub(crate) fn pages(&self, entries: u64) -> u64 {
        entries.div_ceil(self.per_page.max(1))
    }

    /// Where page `page` starts and how many value bytes it holds, of `entries` values.
    pub(crate) fn page_span(&self, page: u64, entries: u64) -> (u64, u64) {
        let values = entries.saturating_sub(page * self.per_page).min(self.per_page);
        (self.pages_offset + self.slot(page) * self.page_stride, values * self.value_bytes)
    }

    /// Where the column's last byte ends.
    pub(crate) fn end(&self, entries: u64) -> u64 {
        let pages = self.pages(entries);
        match (self.crcs_offset, self.grouped_pages) {
            (Some(crcs), _) => crcs + pages * 4,
            (None, Some(_)) => self.pages_offset + (pages + pages.div_ceil(GROUP_PAGES)) * PAGE_BYTES,
            (None, None) => self.pages_offset + pages * self.page_stride,
        }
    }

    /// Where the CRC of page `page` is stored.
    pub(crate) fn crc_offset(&self, page: u64) -> u64 {
        match (self.crcs_offset, self.crc_page(page / GROUP_PAGES)) {
            (Some(crcs), _) => crcs + page * 4,
            (None, Some((at, _))) => at + page % GROUP_PAGES * 4,
            (None, None) => self.pages_offset + page * self.page_stride + PAGE_BYTES - PAGE_CRC_BYTES,
        }
    }
}


/// Version 1: checks that the id array and its page CRCs are where the directory says.
pub(crate) fn check_ids_v1(bytes: &[u8], entries: u64, ids: &DirIds) -> Result<(), Fault> {
    let pages = entries.div_ceil(IDS_PER_PAGE_V1);
    slice(bytes, ids.ids_offset, entries * 8, "document ids")?;
    if ids.crcs_offset != ids.ids_offset + entries * 8 {
        return Err(Fault::at(ids.crcs_offset, "id-page checksums do not follow the ids"));
    }
    let crcs = slice(bytes, ids.crcs_offset, pages * 4, "id-page checksums")?;
    verify_crc(crcs, ids.crcs_crc).map_err(|m| m.fault(ids.crcs_offset, Location::default(), "id-page checksums"))
}

/// Version 2 and later: opens the column of `kind` whose head is at `at`, holding `entries`
/// values, in a segment of format `version` (a version-3 segment's sketches are in layout 3,
/// a version-2 segment's in layout 2).
pub(crate) fn open_column(bytes: &[u8], at: u64, kind: ColumnKind, entries: u64, version: u32) -> Result<ColumnAt, Fault> {
    let head = ColumnHead::decode(bytes, at)?;
    let layout = if kind == ColumnKind::Sketches && version >= 3 { SKETCH_LAYOUT } else { PAGE_CRC_LAYOUT };
    if head.layout != layout {
        return Err(Fault::at(at + C_VERSION as u64, format!("a {} column of layout {} in a version-{version} segment (layout {layout} expected)", kind.name(), head.layout)));
    }
    if head.kind != kind {
        return Err(Fault::at(at + C_KIND as u64, format!("a {} column where the directory puts the {} column", head.kind.name(), kind.name())));
    }
    if head.entries != entries {
        return Err(Fault::at(at + C_ENTRIES as u64, format!("{} column holds {} values for {entries} entries", kind.name(), head.entries)));
    }
    let column = ColumnAt::v2(&head, at);
    slice(bytes, column.pages_offset, column.end(entries) - column.pages_offset, &format!("{} pages", kind.name()))?;
    Ok(column)
}
