//! Salvage's segment step: every `(fingerprint, id)` a damaged segment still holds, read
//! block by block through its first table that opens, damaged blocks rebuilt from the
//! sibling tables, ids from the id column (an unreadable id page costs the ids, never the
//! fingerprints); and `segment_outlook`, verify's one-line forecast of the same.

// Indexing: indexes arrays sized by the salvaged table count it just computed.
#![allow(clippy::indexing_slicing)]

use std::collections::HashMap;
use std::path::Path;

use super::report::UNKNOWN_DOC_ID;
use super::segment_scan::salvage_open;
use crate::error::{Error, Result};
use crate::segment::{Segment, Table};
use crate::storage::Storage;

/// What [`read_segment`] read of one segment.
pub(super) struct SegmentRead {
    /// Entries read (each with its id or [`UNKNOWN_DOC_ID`]).
    pub got: u64,
    /// Losses: entries lost (0 when only ids are) and where and why, one line per damaged
    /// block or id page.
    pub lost: Vec<(u64, String)>,
    /// Entries read whose document id is unknown.
    pub ids_lost: u64,
}

/// Reads every `(fingerprint, id)` of a segment into `out` with `bound`.
///
/// The first table that opened (table 0 unless it is lost) is the primary, read block by
/// block. Every table holds every fingerprint, so the entries of a damaged primary block are
/// rebuilt from a sibling table: the block index (intact, or the table would not open)
/// bounds the block's entries by the keys around it and counts them; the sibling's intact
/// entries in that range (mapped into the primary's permutation), less the ones intact
/// neighbouring blocks hold, are the block's entries when the count agrees (they are a
/// subset of the true ones, so an equal count means equal sets). Ids come from the id
/// column by ordinal in table 0's order: the primary's ordinals when it is table 0, else the
/// positions in the sorted fingerprints when every entry was recovered. An entry whose id
/// is unreadable keeps its fingerprint, with [`UNKNOWN_DOC_ID`].
pub(super) fn read_segment(segment: &Segment, bound: u64, out: &mut Vec<(u64, u64, u64)>) -> SegmentRead {
    let mut read = SegmentRead { got: 0, lost: Vec::new(), ids_lost: 0 };
    // The primary is the first table whose block index is whole (its keys place the
    // entries of its damaged blocks).
    let Some(p) = segment.tables().iter().position(|t| t.keys().is_ok()).or((!segment.tables().is_empty()).then_some(0)) else { return read };
    let primary = &segment.tables()[p];
    let recovered = primary_entries(segment, p, &mut read.lost);
    // Into table 0's order (fingerprint order), with each entry's ordinal there.
    let permutation = &primary.design().permutation;
    let complete = recovered.len() as u64 == segment.len();
    let entries: Vec<(u64, Option<u64>)> = if primary.number() == 0 {
        recovered.into_iter().map(|(fp, ordinal)| (fp, Some(ordinal))).collect()
    } else {
        let mut fps: Vec<u64> = recovered.into_iter().map(|(v, _)| permutation.invert(v)).collect();
        fps.sort_unstable();
        fps.into_iter().zip(0u64..).map(|(fp, ordinal)| (fp, complete.then_some(ordinal))).collect()
    };
    if primary.number() != 0 && !complete && segment.has_ids() {
        read.lost.push((
            0,
            format!(
                "the document ids of all {} entries read: table 0 is lost and so are some entries, so their places in the id column are unknown; kept with id {UNKNOWN_DOC_ID}",
                entries.len()
            ),
        ));
    }
    let mut unreadable = UnreadableIds::default();
    for (fp, ordinal) in entries {
        let id = match ordinal {
            _ if !segment.has_ids() => Some(UNKNOWN_DOC_ID),
            None => None,
            Some(ordinal) => segment.doc_id(ordinal).map_err(|e| unreadable.add(ordinal, &e, &mut read.lost)).ok(),
        };
        read.ids_lost += u64::from(id.is_none());
        out.push((fp, id.unwrap_or(UNKNOWN_DOC_ID), bound));
        read.got += 1;
    }
    unreadable.finish(&mut read.lost);
    read
}

/// The entries of the primary table `p`, `(permuted fingerprint, ordinal in it)`, each
/// damaged block rebuilt from a sibling table or counted in `lost`.
fn primary_entries(segment: &Segment, p: usize, lost: &mut Vec<(u64, String)>) -> Vec<(u64, u64)> {
    let primary = &segment.tables()[p];
    let blocks: Vec<Result<Vec<u64>>> = (0..primary.block_count()).map(|b| decode(segment, p, b)).collect();
    // Siblings' intact entries in the primary's permutation, sorted; decoded when needed.
    let mut siblings: Vec<Option<Vec<u64>>> = vec![None; segment.tables().len()];
    let mut sibling_entries = |s: usize| -> Vec<u64> {
        siblings
            .get_mut(s)
            .map(|slot| {
                slot.get_or_insert_with(|| {
                    let Some(table) = segment.tables().get(s) else { return Vec::new() };
                    let (from, to) = (&table.design().permutation, &primary.design().permutation);
                    let mut v: Vec<u64> = (0..table.block_count()).filter_map(|b| decode(segment, s, b).ok()).flatten().map(|x| to.apply(from.invert(x))).collect();
                    v.sort_unstable();
                    v
                })
                .clone()
            })
            .unwrap_or_default()
    };
    let mut recovered: Vec<(u64, u64)> = Vec::with_capacity(segment.len() as usize);
    for (b, block) in (0u64..).zip(&blocks) {
        let n = u64::from(primary.block_entries(b));
        let first = primary.first_ordinal(b);
        let fps = match block {
            Ok(fps) => fps.clone(),
            Err(e) => {
                let rebuilt = (0..segment.tables().len()).filter(|&s| s != p).find_map(|s| rebuild_block(primary, &blocks, &sibling_entries(s), b));
                match rebuilt {
                    Some(fps) => fps,
                    None => {
                        let why = if segment.tables().len() > 1 { "no sibling table accounts for it" } else { "no sibling table could be read" };
                        lost.push((n, format!("table {} block {b} at byte offset {}: {} ({why})", primary.number(), primary.block_offset(b), e.chain_message())));
                        continue;
                    }
                }
            }
        };
        recovered.extend((first..).zip(fps).map(|(ordinal, fp)| (fp, ordinal)));
    }
    recovered
}

/// The entries of block `b` of table `t`, decoded (and checked).
fn decode(segment: &Segment, t: usize, b: u64) -> Result<Vec<u64>> {
    let mut fps = Vec::new();
    segment
        .visit_block(t, b, |v| {
            fps.push(v);
            true
        })
        .map(|()| fps)
}

/// Unreadable document ids, gathered into one line per damaged id page (a run of
/// ordinals that fail with the same fault), not one per entry.
#[derive(Default)]
struct UnreadableIds {
    /// The page being gathered: its fault's offset and message, its first and last ordinal.
    run: Option<(Option<u64>, String, u64, u64)>,
}

impl UnreadableIds {
    fn add(&mut self, ordinal: u64, e: &Error, lost: &mut Vec<(u64, String)>) {
        // (the line names the file and the offset: a checksum fault says only what failed)
        let (offset, message) = match e {
            Error::Corrupt { offset, detail, .. } => (Some(*offset), detail.clone()),
            _ => (None, e.chain_message()),
        };
        match &mut self.run {
            Some((o, m, _, last)) if *o == offset && *m == message && *last + 1 == ordinal => *last = ordinal,
            _ => {
                self.finish(lost);
                self.run = Some((offset, message, ordinal, ordinal));
            }
        }
    }

    fn finish(&mut self, lost: &mut Vec<(u64, String)>) {
        if let Some((offset, message, first, last)) = self.run.take() {
            let at = offset.map_or_else(String::new, |o| format!(" at byte offset {o}"));
            let n = last - first + 1;
            lost.push((
                0,
                format!("the document ids of {n} entries ({first}..={last}): their id page{at} is unreadable ({message}); their fingerprints are kept with id {UNKNOWN_DOC_ID}"),
            ));
        }
    }
}

/// The entries of damaged block `b` of `table`, from `sibling` (every fingerprint another
/// table holds intact, in `table`'s permutation, sorted), when they add up to the block's
/// count.
fn rebuild_block(table: &Table, blocks: &[Result<Vec<u64>>], sibling: &[u64], b: u64) -> Option<Vec<u64>> {
    let keys = table.keys().ok()?;
    let hi = *keys.get(b as usize)?;
    let lo = if b == 0 { 0 } else { *keys.get(b as usize - 1)? };
    let range = &sibling[sibling.partition_point(|&v| v < lo)..sibling.partition_point(|&v| v <= hi)];
    // Intact blocks whose entries fall in [lo, hi] (only at the shared boundary values).
    let mut taken: Vec<u64> = blocks
        .iter()
        .enumerate()
        .filter(|&(j, _)| j as u64 != b && keys.get(j).is_some_and(|&k| k >= lo) && (j == 0 || keys.get(j - 1).is_some_and(|&k| k <= hi)))
        .filter_map(|(_, r)| r.as_ref().ok())
        .flat_map(|fps| fps.iter().copied().filter(|&v| v >= lo && v <= hi))
        .collect();
    taken.sort_unstable();
    let mut rebuilt = Vec::with_capacity(range.len());
    let mut t = taken.iter().peekable();
    for &v in range {
        while t.next_if(|&&x| x < v).is_some() {}
        if t.next_if(|&&x| x == v).is_none() {
            rebuilt.push(v);
        }
    }
    (rebuilt.len() as u64 == u64::from(table.block_entries(b)) && rebuilt.last() == Some(&hi)).then_some(rebuilt)
}

/// The sketches stored with `pairs` (read from `segment`) into `out`, replacing older
/// copies' (an all-zero sketch removes one: that copy carried none); returns how many could
/// not be read (a damaged table 0 or sketch page, or an unknown id).
pub(super) fn read_sketches(segment: &Segment, pairs: &[(u64, u64, u64)], out: &mut HashMap<(u64, u64), Box<[u8]>>) -> u64 {
    let mut unreadable = 0;
    for &(fp, id, _) in pairs {
        match segment.sketch_of(fp, id) {
            Ok(Some(s)) if id != UNKNOWN_DOC_ID && s.iter().any(|&b| b != 0) => {
                out.insert((fp, id), s.into());
            }
            Ok(Some(_)) if id != UNKNOWN_DOC_ID => {
                out.remove(&(fp, id));
            }
            _ => unreadable += 1,
        }
    }
    unreadable
}

/// What `simdex recover` would rebuild of the (damaged) segment at `path`, in one line,
/// without writing anything: `expected` is the manifest's entry count, when known.
pub(super) fn segment_outlook(storage: &dyn Storage, path: &Path, expected: Option<u64>) -> String {
    let salvaged = storage.read(path).map_err(|e| Error::io(path, "open", e)).and_then(|bytes| salvage_open(path, bytes));
    let salvaged = match salvaged {
        Ok(s) => s,
        Err(e) => return format!("nothing: no table of it can be read ({})", e.chain_message()),
    };
    let segment = &salvaged.segment;
    let mut pairs = Vec::new();
    let read = read_segment(segment, 0, &mut pairs);
    let total = expected.unwrap_or(segment.len()).max(segment.len());
    let ids_unknown = if salvaged.ids_lost { read.got } else { read.ids_lost };
    let tables = segment.tables().iter().map(|t| t.number().to_string()).collect::<Vec<_>>().join(", ");
    format!(
        "{} of {total} fingerprints (from table{} {tables}){}",
        read.got,
        if segment.tables().len() == 1 { "" } else { "s" },
        match (ids_unknown, segment.has_ids() || salvaged.ids_lost) {
            (_, false) => String::new(),
            (0, true) => " with every document id".to_string(),
            (n, true) => format!("; {n} document ids are lost (their fingerprints are kept)"),
        }
    )
}
