//! Writing a segment's id table from its id column, in bounded memory.
//!
//! The file is a pure function of the id column (ordinals in table 0's order), so its bytes
//! are the same however it is built, and `verify` checks a file by building it again and
//! comparing. Entries are gathered in passes over the id column, each pass a range of
//! buckets holding about as many entries as the budget, as `key << 32 | ordinal` values
//! (`key`: bucket and tag) and sorted: so within a bucket by tag, then by ordinal.

use std::io::{BufWriter, Write};
use std::path::Path;

use super::layout::{IdDesign, IdHead, PackedPage, ENDS_PER_PAGE, TAG_BITS};
use crate::bands::layout::seal_page;
use crate::error::{Error, Result};
use crate::segment::Segment;
use crate::storage::{parent_dir, temporary_path, Storage, TempFile};

/// How much memory an id table's build may hold: gathered entries (8 bytes each, and as
/// much again for the sort's scratch), besides the directory (4 bytes a bucket).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdBuildBudget {
    pub entries: u64,
}

impl Default for IdBuildBudget {
    /// 2^24 entries (128 MiB): a 2^22-entry segment in one pass over its ids, a 2^26-entry
    /// one in 4.
    fn default() -> Self {
        Self { entries: 1 << 24 }
    }
}

/// The head an id table of `segment` has, `None` when the segment has no ids or more
/// entries than an id table holds.
pub(crate) fn head_for(segment: &Segment) -> Option<IdHead> {
    if !segment.has_ids() {
        return None;
    }
    let design = IdDesign::for_entries(segment.len())?;
    let (segment_len, segment_footer_crc) = segment.identity();
    Some(IdHead { design, entries: segment.len(), segment_len, segment_footer_crc })
}

/// Writes the id table of `segment` at `path` (under `NAME.tmp`, synced, renamed into
/// place); returns its length, or `None` (nothing written) when the segment has none.
pub(crate) fn write_id_table(storage: &dyn Storage, segment: &Segment, path: &Path, budget: IdBuildBudget) -> Result<Option<u64>> {
    let Some(head) = head_for(segment) else { return Ok(None) };
    let tmp = TempFile::new(storage, temporary_path(path));
    let file = storage.create(tmp.path()).map_err(|e| Error::io(tmp.path(), "create", e))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let mut written = 0u64;
    let mut io_error = None;
    emit(segment, &head, budget, |bytes| {
        written += bytes.len() as u64;
        out.write_all(bytes).map_err(|e| io_error = Some(e)).is_ok()
    })?;
    if let Some(e) = io_error {
        return Err(Error::io(tmp.path(), "write", e));
    }
    let mut file = out.into_inner().map_err(|e| Error::io(tmp.path(), "write", e.into_error()))?;
    file.sync().map_err(|e| Error::io(tmp.path(), "fsync", e))?;
    drop(file);
    storage.rename(tmp.path(), path).map_err(|e| Error::io(path, "rename", e))?;
    tmp.keep();
    let dir = parent_dir(path);
    storage.sync_dir(&dir).map_err(|e| Error::io(&dir, "fsync directory", e))?;
    Ok(Some(written))
}

/// Hands the whole id table of `segment` with `head` to `put`, piece by piece in file order,
/// until `put` returns false. Fails only when the segment cannot be read.
pub(crate) fn emit(segment: &Segment, head: &IdHead, budget: IdBuildBudget, mut put: impl FnMut(&[u8]) -> bool) -> Result<()> {
    let design = head.design;
    if !put(&head.encode()) {
        return Ok(());
    }
    let buckets = design.buckets();
    let slices = head.entries.div_ceil(budget.entries.max(1)).clamp(1, buckets);
    let mut ends = vec![0u32; buckets as usize];
    let mut page = PackedPage::new();
    let mut on_page = 0u64;
    for slice in 0..slices {
        let range = buckets * slice / slices..buckets * (slice + 1) / slices;
        let mut values = gather(segment, &design, range)?;
        crate::sort::sort_u64(&mut values);
        for v in values {
            let key = v >> 32;
            if let Some(end) = ends.get_mut((key >> TAG_BITS) as usize) {
                *end += 1;
            }
            page.push(design.pack(key as u8, v & 0xffff_ffff), design.entry_bits());
            on_page += 1;
            if on_page == design.per_page() {
                on_page = 0;
                if !put(&seal_page(&page.take())) {
                    return Ok(());
                }
            }
        }
    }
    if !page.is_empty() && !put(&seal_page(&page.take())) {
        return Ok(());
    }
    let mut total = 0u32;
    for end in ends.iter_mut() {
        total += *end;
        *end = total;
    }
    for chunk in ends.chunks(ENDS_PER_PAGE as usize) {
        let payload: Vec<u8> = chunk.iter().flat_map(|e| e.to_le_bytes()).collect();
        if !put(&seal_page(&payload)) {
            return Ok(());
        }
    }
    Ok(())
}

/// The `(bucket << 8 | tag) << 32 | ordinal` of every entry whose bucket is in `buckets`,
/// in ordinal order.
fn gather(segment: &Segment, design: &IdDesign, buckets: std::ops::Range<u64>) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    for (ordinal, id) in (0u64..).zip(segment.doc_ids()) {
        let (bucket, tag) = design.key(id?);
        if buckets.contains(&bucket) {
            out.push((bucket << TAG_BITS | u64::from(tag)) << 32 | ordinal);
        }
    }
    Ok(out)
}
