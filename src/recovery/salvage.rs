//! Salvage: copies what is intact in a damaged index into a new one and accounts for what
//! was lost, in named steps ([`salvage`]). The engine itself never skips damage; only this
//! (the CLI's `recover`) does.
//!
//! 1. [`Salvage::open`]: the directory and its manifest (if readable; otherwise every
//!    segment, tombstone file and log in the directory is taken, and tombstones then apply
//!    to every segment, since without the manifest the age of a segment is unknown).
//! 2. [`Salvage::segments`]: each segment block by block through its first table that
//!    opens and its id pages, damaged blocks rebuilt from the sibling tables (a damaged
//!    segment header, directory, footer or lost tail is worked around by `segment_scan`,
//!    which finds the tables that are still whole; an entry is lost only when no table holds
//!    it intact, and an id only with its page): `salvage_segments`.
//! 3. [`Salvage::tombstones`]: each tombstone file (whole, or page by page).
//! 4. [`Salvage::logs`]: each log in salvage mode (damaged stretches are skipped; the
//!    operations lost in between are counted from the sequence numbers around them):
//!    `salvage_logs`.
//! 5. [`Salvage::live`]: the live pairs, by the engine's rule (a delete hides older copies),
//!    every pair read accounted for: live, deleted, a copy of another, or merged with
//!    another when both lost their ids.
//! 6. [`Salvage::write`]: the live pairs into the new index, flushed and compacted into one
//!    segment.

use std::collections::HashMap;
use std::path::Path;

use super::report::SalvageReport;
use super::report::UNKNOWN_DOC_ID;
use super::salvage_segments::{read_segment, read_sketches};
use super::segment_scan::salvage_open;
use crate::engine::files::{self, FileKind};
use crate::engine::manifest::{LogMeta, Manifest, SegmentMeta};
use crate::engine::{pinned_recipe, tombstone, Index, IndexOptions};
use crate::error::{Error, Result};
use crate::query::Entry;
use crate::segment::SketchColumn;
use crate::storage::Storage;

/// Copies what is intact of the index in `src` into a new index in `dst` (which must not
/// hold one), created with `options` (its `k` and codec are taken from the old manifest
/// when it is readable).
pub fn salvage(storage: &dyn Storage, src: &Path, dst: &Path, options: IndexOptions) -> Result<SalvageReport> {
    let mut s = Salvage::open(storage, src, options)?;
    s.segments();
    s.tombstones();
    s.logs();
    let live = s.live();
    s.write(dst, &live)?;
    Ok(s.report)
}

/// One salvage: what has been read so far.
pub(super) struct Salvage<'a> {
    pub(super) storage: &'a dyn Storage,
    pub(super) src: &'a Path,
    /// The directory's file names.
    names: Vec<String>,
    pub(super) manifest: Option<Manifest>,
    /// The new index's options.
    options: IndexOptions,
    pub(super) report: SalvageReport,
    /// Every pair read: `(fingerprint, id, bound)`, where a delete with a sequence number
    /// above `bound` hides it.
    pub(super) pairs: Vec<(u64, u64, u64)>,
    /// Sketches of the pairs read, by pair (the newest copy's: segments and logs are read
    /// oldest first), for an index that stores them.
    pub(super) sketches: HashMap<(u64, u64), Box<[u8]>>,
    /// Deletes: `(fingerprint, id)` -> the latest sequence number (0 when unknown, which
    /// hides every segment copy).
    pub(super) deletes: HashMap<(u64, u64), u64>,
    /// The sequence number the next log record should start at, when known.
    pub(super) next_seq: Option<u64>,
}

impl<'a> Salvage<'a> {
    /// Step 1: the directory (refused when it holds none of an index's files) and its
    /// manifest, whose `k`, codec, sketches and expiry window the new index takes.
    fn open(storage: &'a dyn Storage, src: &'a Path, mut options: IndexOptions) -> Result<Self> {
        let mut report = SalvageReport::default();
        let names = storage.list(src).map_err(|e| Error::io(src, "list", e))?;
        // A directory with none of an index's files is not a damaged index: refused, so that
        // no empty index is written for it.
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
            // The window stays; salvaged pairs are stamped with the time of the recovery
            // (they expire late, never early), and segments already expired are left behind.
            options.expiry = m.expiry;
        }
        let next_seq = manifest.as_ref().map(|m| m.last_seq + 1);
        Ok(Salvage { storage, src, names, manifest, options, report, pairs: Vec::new(), sketches: HashMap::new(), deletes: HashMap::new(), next_seq })
    }

    /// The numbers of the directory's files of one kind, ascending.
    pub(super) fn numbered(&self, want: fn(FileKind) -> Option<u64>) -> Vec<u64> {
        let mut v: Vec<u64> = self.names.iter().filter_map(|n| want(files::parse(n))).collect();
        v.sort_unstable();
        v
    }

    /// The manifest's record of the logs (empty without a manifest).
    pub(super) fn seals(&self) -> Vec<LogMeta> {
        self.manifest.as_ref().map(|m| m.logs.clone()).unwrap_or_default()
    }

    /// Step 2: every segment: `(number, bound, entries the manifest lists)`, the live ones
    /// of the manifest or, without it, every segment file (bound 0: every delete hides).
    fn segments(&mut self) {
        let segments: Vec<(u64, u64, Option<u64>)> = match &self.manifest {
            Some(m) => {
                let now = self.options.clock.now_secs();
                let live = |s: &&SegmentMeta| m.expiry.is_none_or(|x| x.is_live(s.epoch, now));
                m.segments.iter().filter(live).map(|s| (s.number, s.max_seq, Some(s.entries))).collect()
            }
            None => self.numbered(|k| if let FileKind::Segment(n) = k { Some(n) } else { None }).into_iter().map(|n| (n, 0, None)).collect(),
        };
        for (number, bound, expected) in segments {
            self.segment(number, bound, expected);
        }
    }

    /// One segment: what its tables and columns still hold, and exactly what they lost.
    fn segment(&mut self, number: u64, bound: u64, expected: Option<u64>) {
        let name = files::segment_name(number);
        let path = self.src.join(&name);
        let salvaged = self.storage.read(&path).map_err(|e| Error::io(&path, "open", e)).and_then(|bytes| salvage_open(&path, bytes));
        let report = &mut self.report;
        let salvaged = match salvaged {
            Ok(s) => s,
            Err(e) => {
                report.segment_entries_lost += expected.unwrap_or(0);
                let count = expected.map_or("all its entries (count unknown)".to_string(), |n| format!("all {n} entries"));
                return report.lost.push((name, format!("{count}: no table of it can be read: {}", e.chain_message())));
            }
        };
        report.bypassed.extend(salvaged.damage.into_iter().map(|d| (name.clone(), d)));
        let segment = salvaged.segment;
        if salvaged.ids_lost {
            report.lost.push((name.clone(), format!("the document ids of all {} entries (the id column is lost): fingerprints kept with id {UNKNOWN_DOC_ID}", segment.len())));
        }
        if self.manifest.is_none() && self.options.sketches.is_none() {
            // Without the manifest, a segment's sketch column says what the index stored.
            self.options.sketches = segment.sketch_layout().map(|(bytes, scheme)| SketchColumn { bytes: bytes as u16, scheme });
        }
        let start = self.pairs.len();
        let read = read_segment(&segment, bound, &mut self.pairs);
        if self.options.sketches.is_some() && segment.has_sketches() {
            let unreadable = read_sketches(&segment, self.pairs.get(start..).unwrap_or_default(), &mut self.sketches);
            if unreadable > 0 {
                report.lost.push((name.clone(), format!("the sketches of {unreadable} entries (kept without one: confirmed queries judge them by fingerprint alone)")));
            }
        }
        report.segment_entries += read.got;
        let mut lost_entries: u64 = read.lost.iter().map(|l| l.0).sum();
        // A lost tail can hide entries no table accounts for: the manifest's count says.
        if let Some(missing) = expected.map(|n| n.saturating_sub(segment.len())).filter(|&m| m > 0) {
            lost_entries += missing;
            report.lost.push((name.clone(), format!("{missing} entries: the manifest lists {} but the readable tables hold {}", segment.len() + missing, segment.len())));
        }
        report.segment_entries_lost += lost_entries;
        report.recovered.push((name.clone(), format!("{} of {} entries", read.got, segment.len())));
        report.lost.extend(read.lost.into_iter().map(|(n, what)| (name.clone(), if n == 0 { what } else { format!("{n} entries: {what}") })));
    }

    /// Step 3: every tombstone file, whole or page by page; a page or file lost is counted
    /// as deletes that may be undone.
    fn tombstones(&mut self) {
        let files: Vec<(u64, Option<u64>)> = match &self.manifest {
            Some(m) => m.tombstones.iter().map(|t| (t.number, Some(t.count))).collect(),
            None => self.numbered(|k| if let FileKind::Tombstones(n) = k { Some(n) } else { None }).into_iter().map(|n| (n, None)).collect(),
        };
        let report = &mut self.report;
        for (number, count) in files {
            let name = files::tombstones_name(number);
            let (ts, damaged) = match tombstone::read_pages(self.storage, &self.src.join(&name)) {
                Ok(read) => read,
                Err(e) => {
                    report.deletes_possibly_undone += count.unwrap_or(0);
                    let what = count.map_or("every tombstone in it (how many is unknown without the manifest)".to_string(), |n| format!("all {n} tombstones in it"));
                    report.lost.push((name, format!("{what}: up to that many deleted pairs may be in the new index again: {}", e.chain_message())));
                    continue;
                }
            };
            report.tombstones += ts.len() as u64;
            for page in damaged {
                report.deletes_possibly_undone += page.count;
                let what = format!("{} tombstones at byte offset {} ({}): up to that many deleted pairs may be in the new index again", page.count, page.offset, page.detail);
                report.lost.push((name.clone(), what));
            }
            report.recovered.push((name, format!("{} tombstones", ts.len())));
            for t in ts {
                let seq = if self.manifest.is_some() { t.seq } else { u64::MAX };
                let e = self.deletes.entry((t.fingerprint, t.doc_id)).or_insert(0);
                *e = (*e).max(seq);
            }
        }
    }

    /// Step 5: the live pairs by the engine's rule, sorted and distinct, with every pair read
    /// accounted for in the report (deleted, a copy, merged, or live).
    fn live(&mut self) -> Vec<(u64, u64)> {
        // A fingerprint kept without its id cannot be matched with its deletes: when a newer
        // delete of the same fingerprint exists, the pair may be one of the deleted, come back.
        let mut newest_delete: HashMap<u64, u64> = HashMap::new();
        for (&(fp, _), &seq) in &self.deletes {
            let e = newest_delete.entry(fp).or_insert(0);
            *e = (*e).max(seq);
        }
        let report = &mut self.report;
        let pairs = std::mem::take(&mut self.pairs);
        report.doc_ids_lost = pairs.iter().filter(|p| p.1 == UNKNOWN_DOC_ID).count() as u64;
        let undone = pairs.iter().filter(|&&(fp, id, bound)| id == UNKNOWN_DOC_ID && newest_delete.get(&fp).is_some_and(|&d| d > bound)).count() as u64;
        if undone > 0 {
            report.deletes_possibly_undone += undone;
            report.lost.push((
                "(deletes)".into(),
                format!("{undone} fingerprints kept with an unknown id (id {UNKNOWN_DOC_ID}) have a newer delete of the same fingerprint: each may be a deleted pair in the new index again"),
            ));
        }
        let read = pairs.len() as u64;
        let mut live: Vec<(u64, u64)> = pairs.into_iter().filter(|&(fp, id, bound)| self.deletes.get(&(fp, id)).is_none_or(|&d| d <= bound)).map(|(fp, id, _)| (fp, id)).collect();
        report.pairs_deleted = read - live.len() as u64;
        live.sort_unstable();
        let before = live.len() as u64;
        let unknown_before = live.iter().filter(|p| p.1 == UNKNOWN_DOC_ID).count() as u64;
        live.dedup();
        let unknown_after = live.iter().filter(|p| p.1 == UNKNOWN_DOC_ID).count() as u64;
        report.merged = unknown_before - unknown_after;
        report.copies = before - live.len() as u64 - report.merged;
        if report.merged > 0 {
            report.lost.push((
                "(ids)".into(),
                format!(
                    "{} entries merged into others: they lost their document ids and share a fingerprint with another entry that did, so each such fingerprint is kept once, with id {UNKNOWN_DOC_ID}",
                    report.merged
                ),
            ));
        }
        report.live_pairs = live.len() as u64;
        live
    }

    /// Step 6: the new index in `dst` (which must not hold one): the pinned recipe, the live
    /// pairs with their sketches, compacted into one segment, every sequence number the old
    /// index spent spent again (so `add` without ids never hands out an id it used).
    fn write(&mut self, dst: &Path, live: &[(u64, u64)]) -> Result<()> {
        let mut options = self.options.clone();
        if Manifest::load(&*options.storage, dst).ok().flatten().is_some() {
            return Err(Error::InvalidArgument(format!("{} already holds an index: recover into a new directory", dst.display())));
        }
        options.create = true;
        options.background = false;
        options.compaction.automatic = false;
        options.memtable_ops = u64::MAX;
        let recipe = match pinned_recipe::load_checked(self.storage, self.src, self.manifest.as_ref().and_then(|m| m.recipe_crc)) {
            Ok(r) => r,
            Err(e) => {
                self.report.lost.push((files::RECIPE_NAME.into(), format!("the pinned fingerprint recipe (pin it again before adding documents): {}", e.chain_message())));
                None
            }
        };
        let index = Index::open(dst, options)?;
        if let Some(recipe) = recipe {
            index.store_pinned_recipe(&recipe)?;
            self.report.recovered.push((files::RECIPE_NAME.into(), "the fingerprint recipe".into()));
        }
        let width = index.sketches().map_or(0, |s| usize::from(s.bytes));
        for chunk in live.chunks(1 << 16) {
            let (with, without): (Vec<_>, Vec<_>) = chunk.iter().partition(|p| width > 0 && self.sketches.contains_key(p));
            if !with.is_empty() {
                let bytes: Vec<u8> = with.iter().flat_map(|p| self.sketches.get(p).map(|s| s.to_vec()).unwrap_or_default()).collect();
                index.insert_many_sketched(&with.into_iter().map(Entry::from).collect::<Vec<_>>(), &bytes)?;
            }
            index.insert_many(&without.into_iter().map(Entry::from).collect::<Vec<_>>())?;
        }
        index.compact()?;
        let seals = self.seals();
        let high_water = seals.iter().map(|s| s.last_seq).chain(self.next_seq.map(|n| n - 1)).chain(self.manifest.as_ref().map(|m| m.last_seq)).max().unwrap_or(0);
        index.spend_sequence_numbers(high_water)?;
        index.close()
    }
}
