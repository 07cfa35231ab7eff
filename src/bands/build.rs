//! Writing a segment's band file from its sketch column, in bounded memory.
//!
//! The file is a pure function of the sketch column (ordinals in table 0's order), so the
//! bytes are the same however it is built, and `verify` checks a file by building it again
//! and comparing. A first pass over the sketch column counts every band's entries in each
//! directory group (of 512 buckets in version 4); the build's passes are planned by these
//! counts, as many groups a pass (of one band or several) as fit the budget. A pass places
//! each of its entries, packed as `bucket << 40 | ordinal << 8 | tag`, at its group's place
//! in ordinal order; then a group at a time is put in bucket order by a counting sort, so
//! that within a bucket entries stay in ordinal order.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use super::layout::{bit_len, dir_group_buckets, directory_pages, group_pages, ordinal_bits_for, seal_page, tag_bits_of, BandHead, Geometry, PackedPage, BANDS_VERSION, BLOCK_BUCKETS, PAGE_BYTES};
use super::stream::BlockWriter;
use super::{band_key, is_empty_sketch, tag, BandDesign};
use crate::error::{Error, Result};
use crate::segment::Segment;
use crate::storage::{write_atomically_with, FillError, Storage};

/// How much memory the build of a segment's band file or id table may hold: gathered
/// entries (8 bytes each; an id table's sort takes as much again for its scratch, a band
/// file's one directory group's), besides a directory (a band's 4 bytes a block of buckets,
/// or the id table's 4 bytes a bucket).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuildBudget {
    pub entries: u64,
}

impl Default for BuildBudget {
    /// 2^24 entries (128 MiB): a 2^22-entry segment's 16 bands in 4 passes over its
    /// sketches (a 2^26-entry one's in 64), its id table in one pass over its ids (in 4).
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
    Ok(survey(segment, version)?.map(|(head, _)| head))
}

/// [`head_for`], and the entries of every band's directory groups (what the build's
/// passes are planned by: [`GroupCounts`]).
fn survey(segment: &Segment, version: u32) -> Result<Option<(BandHead, GroupCounts)>> {
    let (Some((width, scheme)), Some(design)) = (segment.sketch_layout(), design_for(segment)) else { return Ok(None) };
    let counts = GroupCounts::of(segment, design, version)?;
    let largest = counts.per_band.iter().flatten().copied().max().unwrap_or(0);
    let (segment_len, segment_footer_crc) = segment_identity(segment);
    let head = BandHead {
        version,
        design,
        ordinal_bits: ordinal_bits_for(segment.len()),
        tag_bits: tag_bits_of(version),
        dir_bits: bit_len(u64::from(largest)).max(1),
        entries: segment.len(),
        banded: counts.banded,
        segment_len,
        segment_footer_crc,
        sketch_bytes: width as u16,
        scheme,
    };
    Ok(Some((head, counts)))
}

/// How many entries each band has in each directory group (of `dir_group_buckets` buckets,
/// a power of two), and how many entries have a sketch: from one pass over the sketch column.
struct GroupCounts {
    /// log2 of the buckets a group.
    shift: u32,
    banded: u64,
    per_band: Vec<Vec<u32>>,
}

impl GroupCounts {
    fn of(segment: &Segment, design: BandDesign, version: u32) -> Result<Self> {
        let per_group = dir_group_buckets(version);
        let groups = design.buckets().div_ceil(per_group) as usize;
        let mut per_band: Vec<Vec<u32>> = (0..design.bands).map(|_| vec![0u32; groups]).collect();
        let mut banded = 0u64;
        let width = segment.sketch_layout().map_or(1, |(w, _)| w.max(1));
        for page in segment.sketch_pages() {
            for sketch in page?.chunks_exact(width) {
                if is_empty_sketch(sketch) {
                    continue;
                }
                banded += 1;
                for (b, counts) in (0u32..).zip(per_band.iter_mut()) {
                    if let Some(c) = band_key(sketch, b).and_then(|key| counts.get_mut((u64::from(design.bucket(key)) / per_group) as usize)) {
                        *c += 1;
                    }
                }
            }
        }
        Ok(GroupCounts { shift: per_group.trailing_zeros(), banded, per_band })
    }

    /// The build's passes, in file order, each at most `budget` entries (or one group, when
    /// a group holds more): the groups of one or more bands, or a range of one band's.
    fn passes(&self, budget: u64) -> Vec<Vec<Span>> {
        let mut passes = Vec::new();
        let (mut pass, mut held) = (Vec::<Span>::new(), 0u64);
        for (band, counts) in (0u32..).zip(&self.per_band) {
            for (group, &n) in counts.iter().enumerate() {
                let n = u64::from(n);
                if held + n > budget && held > 0 {
                    passes.push(std::mem::take(&mut pass));
                    held = 0;
                }
                match pass.last_mut() {
                    Some(span) if span.band == band => span.groups.end = group + 1,
                    _ => pass.push(Span { band, groups: group..group + 1, last: false }),
                }
                if let Some(span) = pass.last_mut() {
                    span.last = group + 1 == counts.len();
                }
                held += n;
            }
        }
        if !pass.is_empty() {
            passes.push(pass);
        }
        passes
    }
}

/// A band's groups gathered in one pass; `last` when they end the band.
struct Span {
    band: u32,
    groups: std::ops::Range<usize>,
    last: bool,
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
    let Some((head, counts)) = survey(segment, BANDS_VERSION)? else { return Ok(None) };
    write_atomically_with(storage, path, |mut out| emit_counted(segment, &head, &counts, budget, stop, &mut out)).map(Some)
}

/// Writes the whole band file of `segment` with `head` to `out`; returns its length.
pub(crate) fn emit(segment: &Segment, head: &BandHead, budget: BuildBudget, stop: Option<&AtomicBool>, out: &mut impl Write) -> std::result::Result<u64, FillError> {
    let counts = GroupCounts::of(segment, head.design, head.version).map_err(FillError::Source)?;
    emit_counted(segment, head, &counts, budget, stop, out)
}

/// [`emit`] with the segment's group counts at hand. Each pass over the sketch column places
/// every entry of its groups at its group's place (the counts say where each group starts),
/// in ordinal order; a group's entries are then put in bucket order by a counting sort
/// (stable, a group at a time: its counters and its copy stay in cache).
fn emit_counted(segment: &Segment, head: &BandHead, counts: &GroupCounts, budget: BuildBudget, stop: Option<&AtomicBool>, out: &mut impl Write) -> std::result::Result<u64, FillError> {
    let design = head.design;
    let geometry = head.geometry();
    let mut written = 0u64;
    let mut put = |out: &mut dyn Write, bytes: &[u8]| -> std::result::Result<(), FillError> {
        written += bytes.len() as u64;
        out.write_all(bytes).map_err(FillError::Write)
    };
    put(out, &head.encode())?;
    // Versions 3 and up count a block's entries in their directory, 1 and 2 a bucket's.
    let slot_shift = if head.version >= 3 { BLOCK_BUCKETS.trailing_zeros() } else { 0 };
    let slots = (design.buckets() >> slot_shift).max(1) as usize;
    let in_group = (1u64 << counts.shift) - 1;
    let (mut filled, mut sorted, mut at) = (Vec::new(), Vec::new(), Vec::new());
    let mut band: Option<(EntryPages, Vec<u32>)> = None;
    for pass in counts.passes(budget.entries.max(1)) {
        let (values, starts) = gather(segment, head, counts, &pass, stop)?;
        for (span, starts) in pass.iter().zip(&starts) {
            let (pages, ends) = band.get_or_insert_with(|| (EntryPages::new(geometry), vec![0u32; slots]));
            for (&from, &to) in starts.iter().zip(starts.iter().skip(1)) {
                let group = values.get(from..to).unwrap_or_default();
                sort_by_bucket(group, in_group, &mut at, &mut sorted);
                for &v in &sorted {
                    if let Some(end) = ends.get_mut((v >> 40 >> slot_shift) as usize) {
                        *end += 1;
                    }
                    pages.push(v, &mut filled);
                    for page in filled.drain(..) {
                        put(out, &page)?;
                    }
                }
            }
            if span.last {
                let Some((mut pages, mut ends)) = band.take() else { continue };
                pages.finish(&mut filled);
                for page in filled.drain(..) {
                    put(out, &page)?;
                }
                if head.version == 1 {
                    for page in directory_pages(&mut ends) {
                        put(out, &page)?;
                    }
                } else {
                    for page in group_pages(&ends, head.dir_bits, geometry.groups_per_page()) {
                        put(out, &page)?;
                    }
                }
            }
        }
    }
    Ok(written)
}

/// `group`'s packed entries (`bucket << 40 | ordinal << 8 | tag`, in ordinal order) into
/// `sorted` in bucket then ordinal order, by the bucket's bits within the group (`mask`).
fn sort_by_bucket(group: &[u64], mask: u64, at: &mut Vec<usize>, sorted: &mut Vec<u64>) {
    at.clear();
    at.resize(mask as usize + 2, 0);
    for &v in group {
        if let Some(c) = at.get_mut(((v >> 40) & mask) as usize + 1) {
            *c += 1;
        }
    }
    let mut sum = 0;
    for c in at.iter_mut() {
        sum += *c;
        *c = sum;
    }
    sorted.clear();
    sorted.resize(group.len(), 0);
    for &v in group {
        if let Some(c) = at.get_mut(((v >> 40) & mask) as usize) {
            if let Some(slot) = sorted.get_mut(*c) {
                *slot = v;
            }
            *c += 1;
        }
    }
}

/// The packed entries of `pass`'s groups, each group's in ordinal order at its place, and
/// for each span the offsets where its groups start (and the last one's end).
fn gather(segment: &Segment, head: &BandHead, counts: &GroupCounts, pass: &[Span], stop: Option<&AtomicBool>) -> Result<(Vec<u64>, Vec<Vec<usize>>)> {
    let design = head.design;
    let mut starts: Vec<Vec<usize>> = Vec::with_capacity(pass.len());
    let mut total = 0usize;
    for span in pass {
        let band = counts.per_band.get(span.band as usize).and_then(|c| c.get(span.groups.clone())).unwrap_or_default();
        let mut offsets = Vec::with_capacity(band.len() + 1);
        offsets.push(total);
        for &n in band {
            total += n as usize;
            offsets.push(total);
        }
        starts.push(offsets);
    }
    let mut values = vec![0u64; total];
    // where each group's next entry goes
    let mut next = starts.clone();
    let width = segment.sketch_layout().map_or(1, |(w, _)| w.max(1));
    let mut ordinal = 0u64;
    // a page at a time (its sketches in a tight loop), the stop looked at between pages
    for page in segment.sketch_pages() {
        if stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            return Err(Error::stopped(segment.path()));
        }
        for sketch in page?.chunks_exact(width) {
            if !is_empty_sketch(sketch) {
                for (span, next) in pass.iter().zip(next.iter_mut()) {
                    let Some(key) = band_key(sketch, span.band) else { continue };
                    let bucket = design.bucket(key);
                    let Some(group) = ((u64::from(bucket) >> counts.shift) as usize).checked_sub(span.groups.start) else { continue };
                    let Some(at) = next.get_mut(group) else { continue };
                    if group < span.groups.len() {
                        if let Some(slot) = values.get_mut(*at) {
                            *slot = u64::from(bucket) << 40 | ordinal << 8 | u64::from(tag(key, head.tag_bits));
                        }
                        *at += 1;
                    }
                }
            }
            ordinal += 1;
        }
    }
    Ok((values, starts))
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
