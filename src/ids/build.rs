//! Writing a segment's id table from its id column, in bounded memory.
//!
//! The file is a pure function of the id column (ordinals in table 0's order), so its bytes
//! are the same however it is built, and `verify` checks a file by building it again and
//! comparing. A first pass over the id column counts each bucket's entries; then entries
//! are placed in passes over the id column, each pass a range of buckets holding about as
//! many entries as the budget, each entry at its bucket's next slot, and each bucket's
//! entries sorted: so within a bucket by tag, then by ordinal.

use std::path::Path;

use super::layout::{IdDesign, IdHead, PackedPage};
use crate::bands::layout::{directory_pages, seal_page};
use crate::bands::BuildBudget;
use crate::error::Result;
use crate::segment::Segment;
use crate::storage::{write_atomically_with, FillError, Storage};

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
pub(crate) fn write_id_table(storage: &dyn Storage, segment: &Segment, path: &Path, budget: BuildBudget) -> Result<Option<u64>> {
    let Some(head) = head_for(segment) else { return Ok(None) };
    write_atomically_with(storage, path, |out| {
        let mut written = 0u64;
        let mut io_error = None;
        emit(segment, &head, budget, |bytes| {
            written += bytes.len() as u64;
            out.write_all(bytes).map_err(|e| io_error = Some(e)).is_ok()
        })?;
        io_error.map_or(Ok(written), |e| Err(FillError::Write(e)))
    })
    .map(Some)
}

/// Hands the whole id table of `segment` with `head` to `put`, piece by piece in file order,
/// until `put` returns false. Fails only when the segment cannot be read.
///
/// A first pass over the id column counts each bucket's entries (the directory's counts);
/// then each slice of buckets (about `budget.entries` x 3/4 entries) is placed by one more pass,
/// each entry at its bucket's next slot (`tag << 32 | ordinal`, ordinals ascending), and
/// each bucket's few entries sorted: the slice is held once, exactly, with no sort scratch.
pub(crate) fn emit(segment: &Segment, head: &IdHead, budget: BuildBudget, mut put: impl FnMut(&[u8]) -> bool) -> Result<()> {
    let design = head.design;
    if !put(&head.encode()) {
        return Ok(());
    }
    let buckets = design.buckets();
    let mut counts = vec![0u32; buckets as usize];
    for id in segment.doc_ids() {
        if let Some(c) = counts.get_mut(design.key(id?).0 as usize) {
            *c += 1;
        }
    }
    // 8 bytes an entry held: the budget's bytes (6 an entry) are three quarters as many
    let slices = head.entries.div_ceil((budget.entries / 4 * 3).max(1)).clamp(1, buckets);
    let mut page = PackedPage::new();
    let mut on_page = 0u64;
    let mut held: Vec<u64> = Vec::new();
    for slice in 0..slices {
        let range = buckets * slice / slices..buckets * (slice + 1) / slices;
        let of_slice = counts.get(range.start as usize..range.end as usize).unwrap_or_default();
        place(segment, &design, &range, of_slice, &mut held)?;
        for v in held.drain(..) {
            page.push(design.pack((v >> 32) as u8, v & 0xffff_ffff), design.entry_bits());
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
    for page in directory_pages(&mut counts) {
        if !put(&page) {
            return Ok(());
        }
    }
    Ok(())
}

/// Fills `held` with the `tag << 32 | ordinal` of every entry whose bucket is in `buckets`
/// (`counts`: those buckets' entry counts), in bucket order, then by tag, then by ordinal.
fn place(segment: &Segment, design: &IdDesign, buckets: &std::ops::Range<u64>, counts: &[u32], held: &mut Vec<u64>) -> Result<()> {
    let mut next: Vec<u32> = Vec::with_capacity(counts.len());
    let mut total = 0u32;
    for &c in counts {
        next.push(total);
        total += c;
    }
    held.clear();
    held.resize(total as usize, 0);
    for (ordinal, id) in (0u64..).zip(segment.doc_ids()) {
        let (bucket, tag) = design.key(id?);
        if !buckets.contains(&bucket) {
            continue;
        }
        if let Some(at) = next.get_mut((bucket - buckets.start) as usize) {
            if let Some(slot) = held.get_mut(*at as usize) {
                *slot = u64::from(tag) << 32 | ordinal;
            }
            *at += 1;
        }
    }
    let mut rest = held.as_mut_slice();
    for &c in counts {
        let n = (c as usize).min(rest.len());
        let (bucket, tail) = std::mem::take(&mut rest).split_at_mut(n);
        bucket.sort_unstable();
        rest = tail;
    }
    Ok(())
}
