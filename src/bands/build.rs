//! Writing a segment's band file from its sketch column, in bounded memory.
//!
//! The file is a pure function of the sketch column (ordinals in table 0's order), so the
//! bytes are the same however it is built, and `verify` checks a file by building it again
//! and comparing. Each band's entries are gathered in passes over the sketch column, as
//! packed `bucket << 40 | ordinal << 8 | tag` values, binned by their bucket's high bits as
//! they are gathered and each bin sorted by a radix sort of its low bits: as many bands a
//! pass as fit the budget, or, for a band larger than the budget, a range of its buckets a
//! pass. Within a bucket, entries are in ordinal order (gathered in that order, then sorted
//! stably by bucket).

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use super::layout::{bit_len, dir_group_buckets, directory_pages, group_pages, ordinal_bits_for, seal_page, tag_bits_of, BandHead, Geometry, PackedPage, BANDS_VERSION, BLOCK_BUCKETS, PAGE_BYTES};
use super::bins::Bins;
use super::stream::BlockWriter;
use super::{band_key, is_empty_sketch, tag, BandDesign};
use crate::error::{Error, Result};
use crate::segment::Segment;
use crate::storage::{write_atomically_with, FillError, Storage};

/// How much memory the build of a segment's band file or id table may hold: `entries`
/// gathered entries of a band file (6 bytes each, held once, in bins of buckets: `bins.rs`)
/// or as many bytes of an id table's (8 bytes each: three quarters as many), besides a
/// directory (a band's 4 bytes a block of 8 buckets; the id table's 4 bytes a bucket).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuildBudget {
    pub entries: u64,
}

impl BuildBudget {
    /// A flush's band file (a segment of one memtable, written beside a merge's build while
    /// the maintenance thread merges): 2^22 entries (24 MiB), a 2^20-entry segment's 16
    /// bands in 4 passes over its sketch column (64 MiB, just written) instead of 1 holding
    /// 96 MiB. The bytes are the same at any budget.
    pub(crate) const FLUSH: BuildBudget = BuildBudget { entries: 1 << 22 };
}

impl Default for BuildBudget {
    /// 2^24 entries (96 MiB): a 2^22-entry segment's 16 bands in 4 passes over its
    /// sketches (a 2^26-entry one's in 64), its id table in one pass over its ids (in 6).
    fn default() -> Self {
        Self { entries: 1 << 24 }
    }
}

/// The head a band file of `segment` has in `version` (2 to 4; [`BANDS_VERSION`] is
/// written; version 1's is [`BandHead::as_version_1`] of version 2's), `None` when the
/// segment stores no sketches or is not banded ([`BandDesign::for_segment`]). Reads the
/// sketch column once: to count the entries that have a sketch and each directory group's
/// entries (the largest sets the bits of a relative end).
pub(crate) fn head_for(segment: &Segment, version: u32) -> Result<Option<BandHead>> {
    let (Some((width, scheme)), Some(design)) = (segment.sketch_layout(), design_for(segment)) else { return Ok(None) };
    let mut banded = 0u64;
    let per_group = dir_group_buckets(version);
    let groups = design.buckets().div_ceil(per_group) as usize;
    let mut group_counts: Vec<Vec<u32>> = (0..design.bands).map(|_| vec![0u32; groups]).collect();
    for page in segment.sketch_pages() {
        for sketch in page?.chunks_exact(width.max(1)) {
            if is_empty_sketch(sketch) {
                continue;
            }
            banded += 1;
            for (b, counts) in (0u32..).zip(group_counts.iter_mut()) {
                if let Some(c) = band_key(sketch, b).and_then(|key| counts.get_mut((u64::from(design.bucket(key)) / per_group) as usize)) {
                    *c += 1;
                }
            }
        }
    }
    let largest = group_counts.iter().flatten().copied().max().unwrap_or(0);
    let (segment_len, segment_footer_crc) = segment_identity(segment);
    Ok(Some(BandHead {
        version,
        design,
        ordinal_bits: ordinal_bits_for(segment.len()),
        tag_bits: tag_bits_of(version),
        dir_bits: bit_len(u64::from(largest)).max(1),
        entries: segment.len(),
        banded,
        segment_len,
        segment_footer_crc,
        sketch_bytes: width as u16,
        scheme,
    }))
}

/// The band design of `segment`'s band file; `None` when it gets none (no sketches, or too
/// few entries for bands to pay).
pub(crate) fn design_for(segment: &Segment) -> Option<BandDesign> {
    let (width, _) = segment.sketch_layout()?;
    BandDesign::for_segment(segment.len(), width)
}

/// The segment a band file belongs to: its length and the CRC-32 of its footer (which
/// covers the directory's CRC, so any other segment differs).
pub(crate) fn segment_identity(segment: &Segment) -> (u64, u32) {
    let bytes = segment.bytes();
    let footer = bytes.get(bytes.len().saturating_sub(crate::segment::layout::FOOTER_BYTES)..).unwrap_or_default();
    (bytes.len() as u64, crc32fast::hash(footer))
}

/// Writes the band file of `segment` at `path` (under `NAME.tmp`, synced, renamed into
/// place); returns its length, or `None` (nothing written) when the segment is not banded.
/// When `stop` is set it fails with [`Error::stopped`] (nothing is left behind).
pub(crate) fn write_band_file(storage: &dyn Storage, segment: &Segment, path: &Path, budget: BuildBudget, stop: Option<&AtomicBool>) -> Result<Option<u64>> {
    let Some(head) = head_for(segment, BANDS_VERSION)? else { return Ok(None) };
    write_atomically_with(storage, path, |mut out| emit(segment, &head, budget, stop, &mut out)).map(Some)
}

/// Writes the whole band file of `segment` with `head` to `out`; returns its length.
pub(crate) fn emit(segment: &Segment, head: &BandHead, budget: BuildBudget, stop: Option<&AtomicBool>, out: &mut impl Write) -> std::result::Result<u64, FillError> {
    let design = head.design;
    let geometry = head.geometry();
    let mut written = 0u64;
    let mut put = |out: &mut dyn Write, bytes: &[u8]| -> std::result::Result<(), FillError> {
        written += bytes.len() as u64;
        out.write_all(bytes).map_err(FillError::Write)
    };
    put(out, &head.encode())?;
    let budget = budget.entries.max(1);
    // Bands a pass, and passes a band (each over an equal range of its buckets).
    let per_pass = (budget / head.banded.max(1)).clamp(1, u64::from(design.bands)) as u32;
    let slices = if per_pass == 1 { head.banded.div_ceil(budget).clamp(1, design.buckets()) } else { 1 };
    // the bins of a pass, drained, hold the next pass's entries
    let mut spent: Vec<Bins> = Vec::new();
    let mut b = 0u32;
    while b < design.bands {
        let group = b..(b + per_pass).min(design.bands);
        let mut pages: Vec<EntryPages> = group.clone().map(|_| EntryPages::new(geometry)).collect();
        let mut filled = Vec::new();
        // each bucket's entries, or (version 3 on) each block's: what the directory counts
        let per_end = if head.version >= 3 { BLOCK_BUCKETS } else { 1 };
        let mut ends: Vec<Vec<u32>> = group.clone().map(|_| vec![0u32; design.buckets().div_ceil(per_end) as usize]).collect();
        for slice in 0..slices {
            let lo = (design.buckets() * slice / slices) as u32;
            let hi = (design.buckets() * (slice + 1) / slices) as u32;
            let gathered = gather(segment, head, group.clone(), lo..hi, stop, &mut spent)?;
            // Band by band: a band's entries, after its last slice its last page and its
            // directory, then the next band (several bands a pass only with one slice).
            for ((mut bins, pages), ends) in gathered.into_iter().zip(&mut pages).zip(&mut ends) {
                bins.drain_sorted(|v| {
                    if let Some(end) = ends.get_mut(((v >> 40) / per_end) as usize) {
                        *end += 1;
                    }
                    pages.push(v, &mut filled);
                    filled.drain(..).try_for_each(|page| put(out, &page))
                })?;
                spent.push(bins);
                if slice + 1 == slices {
                    pages.finish(&mut filled);
                    for page in filled.drain(..) {
                        put(out, &page)?;
                    }
                    if head.version == 1 {
                        for page in directory_pages(ends) {
                            put(out, &page)?;
                        }
                    } else {
                        for page in group_pages(ends, head.dir_bits, geometry.groups_per_page()) {
                            put(out, &page)?;
                        }
                    }
                    *ends = Vec::new();
                }
            }
        }
        b = group.end;
    }
    Ok(written)
}

/// The packed entries of bands `bands` whose bucket is in `buckets`, binned ([`Bins`]) a
/// band, in the memory of `spent` bins while there are some.
fn gather(segment: &Segment, head: &BandHead, bands: std::ops::Range<u32>, buckets: std::ops::Range<u32>, stop: Option<&AtomicBool>, spent: &mut Vec<Bins>) -> Result<Vec<Bins>> {
    let design = head.design;
    let mut out: Vec<Bins> = bands.clone().map(|_| Bins::new(&buckets, design.bucket_bits, head.tag_bits, head.banded, spent.pop())).collect();
    let width = segment.sketch_layout().map_or(1, |(w, _)| w.max(1));
    let mut ordinal = 0u64;
    // a page at a time (its sketches in a tight loop), the stop looked at between pages
    for page in segment.sketch_pages() {
        if stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            return Err(Error::stopped(segment.path()));
        }
        for sketch in page?.chunks_exact(width) {
            if !is_empty_sketch(sketch) {
                for (bins, b) in out.iter_mut().zip(bands.clone()) {
                    let Some(key) = band_key(sketch, b) else { continue };
                    bins.push(u64::from(design.bucket(key)) << 40 | ordinal << 8 | u64::from(tag(key, head.tag_bits)));
                }
            }
            ordinal += 1;
        }
    }
    Ok(out)
}

/// A band's entry pages as they fill: `tag << w | ordinal`, bit-packed (versions 1 and 2),
/// or version 3's blocks (`stream.rs`).
enum EntryPages {
    Packed { geometry: Geometry, current: PackedPage, count: u64 },
    Blocks(BlockWriter),
}

impl EntryPages {
    fn new(geometry: Geometry) -> Self {
        if geometry.version >= 3 {
            EntryPages::Blocks(BlockWriter::new(geometry))
        } else {
            EntryPages::Packed { geometry, current: PackedPage::new(), count: 0 }
        }
    }

    /// Adds gathered entry `v` (`bucket << 40 | ordinal << 8 | tag`); `out` gets the pages it fills.
    fn push(&mut self, v: u64, out: &mut Vec<[u8; PAGE_BYTES as usize]>) {
        let ordinal = (v >> 8) & 0xffff_ffff;
        match self {
            EntryPages::Blocks(w) => w.push(v >> 40, ordinal, v & 0xff, out),
            EntryPages::Packed { geometry, current, count } => {
                current.push(((v & 0xff) << geometry.ordinal_bits) | ordinal, geometry.entry_bits());
                *count += 1;
                if *count == geometry.per_page() {
                    *count = 0;
                    out.push(seal_page(&current.take()));
                }
            }
        }
    }

    /// The band's last pages.
    fn finish(&mut self, out: &mut Vec<[u8; PAGE_BYTES as usize]>) {
        match self {
            EntryPages::Blocks(w) => w.finish(out),
            EntryPages::Packed { current, count, .. } => {
                if !current.is_empty() {
                    *count = 0;
                    out.push(seal_page(&current.take()));
                }
            }
        }
    }
}
