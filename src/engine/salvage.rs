//! Salvage: copies what is intact in a damaged index into a new one and accounts for what
//! was lost. The engine itself never skips damage; only this (the CLI's `recover`) does.
//!
//! What is read, in order: the manifest (if readable; otherwise every segment, tombstone
//! file and log in the directory is taken, and tombstones then apply to every segment,
//! since without the manifest the age of a segment is unknown); each segment block by block
//! through its first table that opens and its id pages, damaged blocks rebuilt from the
//! sibling tables (a damaged segment header, directory, footer or lost tail is worked around
//! by `segment::scan`, which finds the tables that are still whole; an entry is lost only
//! when no table holds it intact, and an id only with its page); each tombstone file (whole or
//! lost); each log in salvage mode (damaged stretches are skipped; the operations lost in
//! between are counted from the sequence numbers around them). The live pairs are then
//! computed with the engine's rule (a delete hides older copies) and written to the new
//! index, which is flushed and compacted into one segment.

// Indexing: indexes arrays sized by the salvaged table count it just computed.
#![allow(clippy::indexing_slicing)]
use std::collections::HashMap;
use std::path::Path;

use super::files::{self, FileKind};
use super::log::{scan_log, LogEnd, OpKind, ScanMode};
use super::manifest::Manifest;
use super::seal::shortfall;
use super::tombstone;
use super::{Index, IndexOptions};
use crate::error::{Error, Result};
use crate::query::Entry;
use crate::segment::scan::salvage_open;
use crate::segment::{Segment, SketchColumn};
use crate::storage::{FsStorage, Storage};

/// What [`salvage`] recovered and lost, file by file.
#[derive(Clone, Debug, Default)]
pub struct SalvageReport {
    /// Why the manifest could not be used, if it could not.
    pub manifest_problem: Option<String>,
    /// Per file: name, what was recovered.
    pub recovered: Vec<(String, String)>,
    /// Per file: name, exactly what was lost.
    pub lost: Vec<(String, String)>,
    /// Per file: name, a damaged structure that was worked around (by itself it loses
    /// nothing; what it did cost is in [`Self::lost`]).
    pub bypassed: Vec<(String, String)>,
    /// Fingerprint entries read from segments.
    pub segment_entries: u64,
    /// Segment entries lost to damage (known exactly from block counts and id pages).
    pub segment_entries_lost: u64,
    /// Tombstones read.
    pub tombstones: u64,
    /// Operations read from logs.
    pub log_ops: u64,
    /// Log operations lost between intact records (from the sequence numbers).
    pub log_ops_lost: u64,
    /// Log bytes lost at the end of a log (damage, or a record cut short).
    pub log_tail_bytes_lost: u64,
    /// Operations in records cut short at the end of a log, where the record's header
    /// survived to count them: possibly acknowledged (a crash mid-write leaves such a
    /// record unacknowledged, a file cut short does not).
    pub log_ops_possibly_lost: u64,
    /// Live pairs written to the new index.
    pub live_pairs: u64,
    /// Deleted pairs that may be in the new index again: the tombstones of tombstone files
    /// that could not be read (the manifest's count), and fingerprints kept with an unknown
    /// id ([`UNKNOWN_DOC_ID`]) that a newer delete of the same fingerprint may have hidden.
    /// Each is also named in [`Self::lost`].
    pub deletes_possibly_undone: u64,
    /// Fingerprints read from segments whose document id could not be read: kept with
    /// [`UNKNOWN_DOC_ID`] (each also named in [`Self::lost`]).
    pub doc_ids_lost: u64,
}

/// [`salvage`] of `src` into a new index directory `dst` on the file system, published only
/// when whole: the index is built under a temporary name beside `dst`
/// (`.NAME.recovering`) and renamed to `dst` when it is complete (then the parent
/// directory is synced), so an interrupted recover never leaves a half-made `dst`.
/// `dst` must not exist or be an empty directory. A temporary directory an interrupted run
/// left is removed first; this run's is removed if it fails. What `simdex recover` runs.
pub fn recover_into(src: &Path, dst: &Path, options: IndexOptions) -> Result<SalvageReport> {
    let name = dst.file_name().ok_or_else(|| Error::InvalidArgument(format!("{}: not a directory name", dst.display())))?;
    let parent = crate::storage::parent_dir(dst);
    let tmp = parent.join(format!(".{}.recovering", name.to_string_lossy()));
    if dst.exists() && std::fs::read_dir(dst).map(|mut d| d.next().is_some()).unwrap_or(true) {
        return Err(Error::InvalidArgument(format!("{} already exists and is not an empty directory: recover into a new directory", dst.display())));
    }
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| Error::io(&tmp, "remove (left by an interrupted recover)", e))?;
    }
    let report = salvage(&FsStorage, src, &tmp, options).inspect_err(|_| {
        let _ = std::fs::remove_dir_all(&tmp);
    })?;
    std::fs::rename(&tmp, dst).map_err(|e| Error::io(dst, "rename the recovered index into place", e))?;
    FsStorage.sync_dir(&parent).map_err(|e| Error::io(&parent, "sync", e))?;
    Ok(report)
}

/// Copies what is intact of the index in `src` into a new index in `dst` (which must not
/// hold one), created with `options` (its `k` and codec are taken from the old manifest
/// when it is readable).
pub fn salvage(storage: &dyn Storage, src: &Path, dst: &Path, mut options: IndexOptions) -> Result<SalvageReport> {
    let mut report = SalvageReport::default();
    let names = storage.list(src).map_err(|e| Error::io(src, "list", e))?;
    // A directory with none of an index's files is not a damaged index: refused, so that no
    // empty index is written for it.
    let index_file = |name: &String| match files::parse(name) {
        FileKind::Manifest | FileKind::Recipe | FileKind::Segment(_) | FileKind::Tombstones(_) | FileKind::Log(_) => true,
        // band files are derived from segments: a recovered index builds its own
        FileKind::Bands(_) | FileKind::Ids(_) | FileKind::Lock | FileKind::Temporary | FileKind::Merge | FileKind::Unknown => false,
    };
    if !names.iter().any(index_file) {
        return Err(Error::InvalidArgument(format!("{} holds no index (no MANIFEST, segment, tombstone or log file): nothing to recover", src.display())));
    }
    let manifest = match Manifest::load(storage, src) {
        Ok(Some(m)) => Some(m),
        Ok(None) => {
            report.manifest_problem = Some("MANIFEST is missing".into());
            None
        }
        Err(e) => {
            report.manifest_problem = Some(e.chain_message());
            None
        }
    };
    if let Some(m) = &manifest {
        options.k = m.k;
        options.codec = m.codec;
        options.sketches = m.sketches;
        // The window stays; salvaged pairs are stamped with the time of the recovery (they
        // expire late, never early), and segments already expired are left behind.
        options.expiry = m.expiry;
    }
    // Sketches of the pairs read, by pair (the newest copy's: segments and logs are read
    // oldest first), for an index that stores them.
    let mut sketches: HashMap<(u64, u64), Box<[u8]>> = HashMap::new();
    let numbered = |want: fn(FileKind) -> Option<u64>| {
        let mut v: Vec<u64> = names.iter().filter_map(|n| want(files::parse(n))).collect();
        v.sort_unstable();
        v
    };

    // Segments: (fp, id, bound).
    let segments: Vec<(u64, u64, Option<u64>)> = match &manifest {
        Some(m) => {
            let now = options.clock.now_secs();
            let live = |s: &&super::manifest::SegmentMeta| m.expiry.is_none_or(|x| x.is_live(s.epoch, now));
            m.segments.iter().filter(live).map(|s| (s.number, s.max_seq, Some(s.entries))).collect()
        }
        None => numbered(|k| if let FileKind::Segment(n) = k { Some(n) } else { None }).into_iter().map(|n| (n, 0, None)).collect(),
    };
    let mut pairs: Vec<(u64, u64, u64)> = Vec::new();
    for (number, bound, expected) in segments {
        let name = files::segment_name(number);
        let path = src.join(&name);
        let salvaged = storage.read(&path).map_err(|e| Error::io(&path, "open", e)).and_then(|bytes| salvage_open(&path, bytes));
        let salvaged = match salvaged {
            Ok(s) => s,
            Err(e) => {
                report.segment_entries_lost += expected.unwrap_or(0);
                let count = expected.map_or("all its entries (count unknown)".to_string(), |n| format!("all {n} entries"));
                report.lost.push((name, format!("{count}: no table of it can be read: {}", e.chain_message())));
                continue;
            }
        };
        for d in salvaged.damage {
            report.bypassed.push((name.clone(), d));
        }
        let segment = salvaged.segment;
        if salvaged.ids_lost {
            report.lost.push((name.clone(), format!("the document ids of all {} entries (the id column is lost): fingerprints kept with id {UNKNOWN_DOC_ID}", segment.len())));
        }
        if manifest.is_none() && options.sketches.is_none() {
            // Without the manifest, a segment's sketch column says what the index stored.
            options.sketches = segment.sketch_layout().map(|(bytes, scheme)| SketchColumn { bytes: bytes as u16, scheme });
        }
        let start = pairs.len();
        let (got, lost) = read_segment(&segment, bound, &mut pairs);
        if options.sketches.is_some() && segment.has_sketches() {
            let unreadable = read_sketches(&segment, pairs.get(start..).unwrap_or_default(), &mut sketches);
            if unreadable > 0 {
                report.lost.push((name.clone(), format!("the sketches of {unreadable} entries (kept without one: confirmed queries judge them by fingerprint alone)")));
            }
        }
        report.segment_entries += got;
        let mut lost_entries: u64 = lost.iter().map(|l| l.0).sum();
        // A lost tail can hide entries no table accounts for: the manifest's count says.
        if let Some(missing) = expected.map(|n| n.saturating_sub(segment.len())).filter(|&m| m > 0) {
            lost_entries += missing;
            report.lost.push((name.clone(), format!("{missing} entries: the manifest lists {} but the readable tables hold {}", segment.len() + missing, segment.len())));
        }
        report.segment_entries_lost += lost_entries;
        report.recovered.push((name.clone(), format!("{got} of {} entries", segment.len())));
        for (n, what) in lost {
            report.lost.push((name.clone(), if n == 0 { what } else { format!("{n} entries: {what}") }));
        }
    }

    // Deletes: (fp, id) -> latest seq (0 when unknown, which hides every segment copy).
    let mut deletes: HashMap<(u64, u64), u64> = HashMap::new();
    let tomb_files: Vec<(u64, Option<u64>)> = match &manifest {
        Some(m) => m.tombstones.iter().map(|t| (t.number, Some(t.count))).collect(),
        None => numbered(|k| if let FileKind::Tombstones(n) = k { Some(n) } else { None }).into_iter().map(|n| (n, None)).collect(),
    };
    for (number, count) in tomb_files {
        let name = files::tombstones_name(number);
        match tombstone::read_pages(storage, &src.join(&name)) {
            Ok((ts, damaged)) => {
                report.tombstones += ts.len() as u64;
                for page in damaged {
                    report.deletes_possibly_undone += page.count;
                    report.lost.push((
                        name.clone(),
                        format!("{} tombstones at byte offset {} ({}): up to that many deleted pairs may be in the new index again", page.count, page.offset, page.detail),
                    ));
                }
                report.recovered.push((name, format!("{} tombstones", ts.len())));
                for t in ts {
                    let seq = if manifest.is_some() { t.seq } else { u64::MAX };
                    let e = deletes.entry((t.fingerprint, t.doc_id)).or_insert(0);
                    *e = (*e).max(seq);
                }
            }
            Err(e) => {
                report.deletes_possibly_undone += count.unwrap_or(0);
                let what = count.map_or("every tombstone in it (how many is unknown without the manifest)".to_string(), |n| format!("all {n} tombstones in it"));
                report.lost.push((name, format!("{what}: up to that many deleted pairs may be in the new index again: {}", e.chain_message())));
            }
        }
    }

    // Logs, in order, in salvage mode.
    let log_number = manifest.as_ref().map_or(0, |m| m.log_number);
    let mut next_seq = manifest.as_ref().map(|m| m.last_seq + 1);
    // The logs the directory holds and those the manifest has a seal of (`seal`): a log
    // that holds less than its seal lost exactly the operations the seal counts.
    let seals = manifest.as_ref().map(|m| m.logs.clone()).unwrap_or_default();
    let mut log_numbers: Vec<u64> =
        numbered(|k| if let FileKind::Log(n) = k { Some(n) } else { None }).into_iter().chain(seals.iter().map(|s| s.number)).filter(|&n| n >= log_number).collect();
    log_numbers.sort_unstable();
    log_numbers.dedup();
    for n in log_numbers {
        let name = files::log_name(n);
        let path = src.join(&name);
        let seal = seals.iter().find(|s| s.number == n);
        let bytes = match storage.read_copy(&path) {
            Ok(b) => b,
            Err(e) => {
                let short = seal.and_then(|s| shortfall(s, None, next_seq.map_or(0, |x| x - 1)));
                report.log_ops_lost += short.as_ref().map_or(0, |s| s.lost_ops);
                let what = short.map_or_else(|| format!("the whole log: {e}"), |s| s.detail);
                report.lost.push((name, what));
                if let Some(s) = seal {
                    next_seq = next_seq.map(|x| x.max(s.last_seq + 1));
                }
                continue;
            }
        };
        let mut ops = 0u64;
        let mut gaps = 0u64;
        let scanned = scan_log(&path, &bytes, n, ScanMode::Salvage, |r| {
            if r.last_seq() < next_seq.unwrap_or(0) {
                return Ok(());
            }
            if let Some(expected) = next_seq.filter(|&e| r.seq > e) {
                gaps += r.seq - expected;
            }
            let width = r.sketch_bytes();
            for (i, (fp, id)) in r.ops().enumerate() {
                let seq = r.seq + i as u64;
                // a replace deletes with every operation but its last, which inserts
                let inserts = match r.kind {
                    OpKind::Insert => true,
                    OpKind::Delete => false,
                    OpKind::Replace => i + 1 == r.len(),
                };
                match inserts {
                    true => {
                        pairs.push((fp, id, seq));
                        match r.sketches().and_then(|s| s.get(i * width..(i + 1) * width)).filter(|s| s.iter().any(|&b| b != 0)) {
                            Some(s) => sketches.insert((fp, id), s.into()),
                            None => sketches.remove(&(fp, id)),
                        };
                    }
                    false => {
                        let e = deletes.entry((fp, id)).or_insert(0);
                        *e = (*e).max(seq);
                    }
                }
            }
            ops += r.len() as u64;
            next_seq = Some(r.last_seq() + 1);
            Ok(())
        });
        match scanned {
            Err(e) => report.lost.push((name, format!("the whole log: {}", e.chain_message()))),
            Ok(scan) => {
                report.log_ops += ops;
                report.log_ops_lost += gaps;
                report.recovered.push((name.clone(), format!("{} records, {ops} operations", scan.records)));
                for d in &scan.damage {
                    let at_end = d.offset + d.len == bytes.len() as u64;
                    if at_end {
                        report.log_tail_bytes_lost += d.len;
                    }
                    report.lost.push((
                        name.clone(),
                        format!(
                            "bytes {}..{} ({}){}",
                            d.offset,
                            d.offset + d.len,
                            d.detail,
                            match (at_end, seal) {
                                (false, _) => "",
                                (true, Some(_)) => "; the operations in them are counted from the manifest's record of the log",
                                (true, None) => "; the operations in them cannot be counted",
                            }
                        ),
                    ));
                }
                if gaps > 0 {
                    report.lost.push((name.clone(), format!("{gaps} operations (sequence numbers missing between intact records)")));
                }
                let found_last = next_seq.map_or(0, |x| x - 1);
                // The seal counts what a damaged or cut end lost; a cut record beyond it was
                // never recorded as acknowledged.
                let short = seal.and_then(|s| shortfall(s, Some(scan.valid_len), found_last));
                if let (Some(short), Some(s)) = (&short, seal) {
                    report.log_ops_lost += short.lost_ops;
                    report.lost.push((name.clone(), short.detail.clone()));
                    next_seq = Some(s.last_seq + 1);
                }
                let sealed_through = seal.map_or(0, |s| s.last_seq);
                let tail = bytes.len() as u64 - scan.valid_len;
                if tail > 0 && scan.end != LogEnd::ZeroFilled && !scan.damage.iter().any(|d| d.offset + d.len == bytes.len() as u64) {
                    // A crash mid-write leaves such a tail (never acknowledged under Sync
                    // durability), but so does a file cut short: it may hold acknowledged
                    // writes, and the record's header, when intact, says how many.
                    report.log_tail_bytes_lost += tail;
                    let ops = match scan.cut_record {
                        // Operations the seal covers are counted above, as lost.
                        Some((seq, count)) if seq + u64::from(count) - 1 <= sealed_through => "counted above".to_string(),
                        Some((seq, count)) => {
                            let first = seq.max(sealed_through + 1);
                            let beyond = seq + u64::from(count) - first;
                            report.log_ops_possibly_lost += beyond;
                            format!("{beyond} operations (sequence numbers {first}..={}), possibly acknowledged (a crash mid-write, or a cut file)", seq + u64::from(count) - 1)
                        }
                        None if short.is_some() => "counted above".to_string(),
                        None => "operations that cannot be counted, possibly acknowledged (a crash mid-write, or a cut file)".to_string(),
                    };
                    report.lost.push((name.clone(), format!("{tail} bytes of a record cut short at the end: {ops}")));
                }
            }
        }
    }

    // A fingerprint kept without its id cannot be matched with its deletes: when a newer
    // delete of the same fingerprint exists, the pair may be one of the deleted, come back.
    let mut newest_delete: HashMap<u64, u64> = HashMap::new();
    for (&(fp, _), &seq) in &deletes {
        let e = newest_delete.entry(fp).or_insert(0);
        *e = (*e).max(seq);
    }
    report.doc_ids_lost = pairs.iter().filter(|p| p.1 == UNKNOWN_DOC_ID).count() as u64;
    let undone = pairs.iter().filter(|&&(fp, id, bound)| id == UNKNOWN_DOC_ID && newest_delete.get(&fp).is_some_and(|&d| d > bound)).count() as u64;
    if undone > 0 {
        report.deletes_possibly_undone += undone;
        report.lost.push((
            "(deletes)".into(),
            format!("{undone} fingerprints kept with an unknown id (id {UNKNOWN_DOC_ID}) have a newer delete of the same fingerprint: each may be a deleted pair in the new index again"),
        ));
    }
    // The live set, by the engine's rule, into the new index.
    let mut live: Vec<(u64, u64)> = pairs.into_iter().filter(|&(fp, id, bound)| deletes.get(&(fp, id)).is_none_or(|&d| d <= bound)).map(|(fp, id, _)| (fp, id)).collect();
    live.sort_unstable();
    live.dedup();
    report.live_pairs = live.len() as u64;
    if Manifest::load(&*options.storage, dst).ok().flatten().is_some() {
        return Err(Error::InvalidArgument(format!("{} already holds an index: recover into a new directory", dst.display())));
    }
    options.create = true;
    options.background = false;
    options.compaction.automatic = false;
    options.memtable_ops = u64::MAX;
    let recipe = match super::pinned_recipe::load_checked(storage, src, manifest.as_ref().and_then(|m| m.recipe_crc)) {
        Ok(r) => r,
        Err(e) => {
            report.lost.push((files::RECIPE_NAME.into(), format!("the pinned fingerprint recipe (pin it again before adding documents): {}", e.chain_message())));
            None
        }
    };
    let index = Index::open(dst, options)?;
    if let Some(recipe) = recipe {
        index.store_pinned_recipe(&recipe)?;
        report.recovered.push((files::RECIPE_NAME.into(), "the fingerprint recipe".into()));
    }
    let width = options_width(&index);
    for chunk in live.chunks(1 << 16) {
        let (with, without): (Vec<_>, Vec<_>) = chunk.iter().partition(|p| width > 0 && sketches.contains_key(p));
        if !with.is_empty() {
            let bytes: Vec<u8> = with.iter().flat_map(|p| sketches.get(p).map(|s| s.to_vec()).unwrap_or_default()).collect();
            index.insert_many_sketched(&with.into_iter().map(Entry::from).collect::<Vec<_>>(), &bytes)?;
        }
        index.insert_many(&without.into_iter().map(Entry::from).collect::<Vec<_>>())?;
    }
    index.compact()?;
    // The new index spends every sequence number the old one did: `add` without ids never
    // hands out a document id the old index used.
    let high_water = seals.iter().map(|s| s.last_seq).chain(next_seq.map(|n| n - 1)).chain(manifest.as_ref().map(|m| m.last_seq)).max().unwrap_or(0);
    index.spend_sequence_numbers(high_water)?;
    index.close()?;
    Ok(report)
}

/// Bytes of sketch per document in the new index (0: it stores none).
fn options_width(index: &Index) -> usize {
    index.sketches().map_or(0, |s| usize::from(s.bytes))
}

/// The sketches stored with `pairs` (read from `segment`) into `out`, replacing older
/// copies' (an all-zero sketch removes one: that copy carried none); returns how many could
/// not be read (a damaged table 0 or sketch page, or an unknown id).
fn read_sketches(segment: &Segment, pairs: &[(u64, u64, u64)], out: &mut HashMap<(u64, u64), Box<[u8]>>) -> u64 {
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
pub(crate) fn segment_outlook(storage: &dyn Storage, path: &Path, expected: Option<u64>) -> String {
    let salvaged = storage.read(path).map_err(|e| Error::io(path, "open", e)).and_then(|bytes| salvage_open(path, bytes));
    let salvaged = match salvaged {
        Ok(s) => s,
        Err(e) => return format!("nothing: no table of it can be read ({})", e.chain_message()),
    };
    let segment = &salvaged.segment;
    let mut pairs = Vec::new();
    let (got, lost) = read_segment(segment, 0, &mut pairs);
    let total = expected.unwrap_or(segment.len()).max(segment.len());
    let ids_unknown = if salvaged.ids_lost { got } else { lost.iter().filter(|(n, _)| *n == 0).count() as u64 };
    let tables = segment.tables().iter().map(|t| t.number().to_string()).collect::<Vec<_>>().join(", ");
    format!(
        "{got} of {total} fingerprints (from table{} {tables}){}",
        if segment.tables().len() == 1 { "" } else { "s" },
        match (ids_unknown, segment.has_ids() || salvaged.ids_lost) {
            (_, false) => String::new(),
            (0, true) => " with every document id".to_string(),
            (n, true) => format!("; {n} document ids are lost (their fingerprints are kept)"),
        }
    )
}

/// The document id salvage stores for a fingerprint whose id is unreadable (its id page is
/// damaged): the fingerprint is kept, and the report lists each such entry.
pub const UNKNOWN_DOC_ID: u64 = u64::MAX;

/// Reads every `(fingerprint, id)` of a segment into `out` with `bound`; returns the count
/// read and the losses (entries, where and why).
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
fn read_segment(segment: &Segment, bound: u64, out: &mut Vec<(u64, u64, u64)>) -> (u64, Vec<(u64, String)>) {
    let mut lost = Vec::new();
    // The primary is the first table whose block index is whole (its keys place the
    // entries of its damaged blocks).
    let Some(p) = segment.tables().iter().position(|t| t.keys().is_ok()).or((!segment.tables().is_empty()).then_some(0)) else { return (0, lost) };
    let primary = &segment.tables()[p];
    let decode = |t: usize, b: u64| -> Result<Vec<u64>> {
        let mut fps = Vec::new();
        segment
            .visit_block(t, b, |v| {
                fps.push(v);
                true
            })
            .map(|()| fps)
    };
    let blocks: Vec<Result<Vec<u64>>> = (0..primary.block_count()).map(|b| decode(p, b)).collect();
    // Siblings' intact entries in the primary's permutation, sorted; decoded when needed.
    let mut siblings: Vec<Option<Vec<u64>>> = vec![None; segment.tables().len()];
    let mut sibling_entries = |s: usize| -> Vec<u64> {
        siblings
            .get_mut(s)
            .map(|slot| {
                slot.get_or_insert_with(|| {
                    let Some(table) = segment.tables().get(s) else { return Vec::new() };
                    let (from, to) = (&table.design().permutation, &primary.design().permutation);
                    let mut v: Vec<u64> = (0..table.block_count()).filter_map(|b| decode(s, b).ok()).flatten().map(|x| to.apply(from.invert(x))).collect();
                    v.sort_unstable();
                    v
                })
                .clone()
            })
            .unwrap_or_default()
    };
    let mut got = 0u64;
    // (permuted fingerprint, ordinal in the primary) of every recovered entry.
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
    // Into table 0's order (fingerprint order), with each entry's ordinal there.
    let permutation = &primary.design().permutation;
    let complete = recovered.len() as u64 == segment.len();
    let mut entries: Vec<(u64, Option<u64>)> = if primary.number() == 0 {
        recovered.into_iter().map(|(fp, ordinal)| (fp, Some(ordinal))).collect()
    } else {
        let mut fps: Vec<u64> = recovered.into_iter().map(|(v, _)| permutation.invert(v)).collect();
        fps.sort_unstable();
        fps.into_iter().zip(0u64..).map(|(fp, ordinal)| (fp, complete.then_some(ordinal))).collect()
    };
    if primary.number() != 0 && !complete && segment.has_ids() {
        lost.push((
            0,
            format!(
                "the document ids of all {} entries read: table 0 is lost and so are some entries, so their places in the id column are unknown; kept with id {UNKNOWN_DOC_ID}",
                entries.len()
            ),
        ));
    }
    for (fp, ordinal) in entries.drain(..) {
        let id = match ordinal {
            None => UNKNOWN_DOC_ID,
            Some(_) if !segment.has_ids() => UNKNOWN_DOC_ID,
            Some(ordinal) => match segment.doc_id(ordinal) {
                Ok(id) => id,
                Err(e) => {
                    lost.push((0, format!("entry {ordinal} (fingerprint {fp:016x}): its document id is unreadable, kept with id {UNKNOWN_DOC_ID}: {}", e.chain_message())));
                    UNKNOWN_DOC_ID
                }
            },
        };
        out.push((fp, id, bound));
        got += 1;
    }
    (got, lost)
}

/// The entries of damaged block `b` of `table`, from `sibling` (every fingerprint another
/// table holds intact, in `table`'s permutation, sorted), when they add up to the block's
/// count.
fn rebuild_block(table: &crate::segment::Table, blocks: &[Result<Vec<u64>>], sibling: &[u64], b: u64) -> Option<Vec<u64>> {
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
