//! The engine's band files (`crate::bands`, `format-spec/bands.md`): every segment that
//! stores sketches gets one when it is written (flush, merge) and before it is installed;
//! an open finds it beside its segment. Band files are derived data and heal themselves: one
//! missing, not its segment's, or set aside (a page failed its checksum during a check) is
//! built again by the maintenance thread, or by a writable open without one; until then
//! that segment's check is answered from its tables (right answers, slower), and a read-only
//! open goes without. A directory or an unreadable file in a band file's place is set aside
//! (renamed `seg-N.sdb.set-aside`) by a writable open. And the band half of the crawler's
//! check: the stored pairs whose sketch shares a band with the query's, judged by the
//! check's rule (`confirmed`).

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::band_batch::Candidate;
use super::band_slot::BandSlot;
use super::compaction::checkpoint::MergeFiles;
use super::files::{bands_name, segment_name};
use super::manifest::SegmentMeta;
use super::state::{lock, Engine};
use super::version::{LiveSegment, MemViews, Version};
use crate::bands::{band_key, is_empty_sketch, shares_band, write_band_file, BandDesign, BandFile, BuildBudget};
use crate::confirm::minhash_resemblance;
use crate::error::{Error, Result};
use crate::query::Match;
use crate::segment::Segment;
use crate::storage::Storage;

/// A newly written segment, live with its band file (written now, in `budget`, when the
/// segment stores sketches).
pub(super) fn attach_new(storage: &dyn Storage, dir: &Path, meta: SegmentMeta, segment: Segment, budget: BuildBudget) -> Result<LiveSegment> {
    let path = dir.join(bands_name(meta.number));
    let bands = match write_band_file(storage, &segment, &path, budget, None)? {
        Some(_) => open_slot(storage, &path, &segment)?,
        None => BandSlot::default(),
    };
    Ok(LiveSegment { meta, segment, bands, ids: Default::default() })
}

/// A merge's output (`files.output()`, described by `meta` but for its number), live with
/// its band file: the band file is built as `files.bands()` (stopped when the index
/// closes: the merge's checkpoint stays, and the next merge of its segments finds the
/// output there), then both take the names of a new segment number.
pub(super) fn attach_merged(engine: &Engine, files: &MergeFiles, meta: SegmentMeta) -> Result<LiveSegment> {
    let storage = &*engine.storage;
    let (out, bands_part) = (files.output(), files.bands());
    if engine.stopping() {
        return Err(Error::stopped(&out));
    }
    let segment = Segment::open_with(storage, &out)?;
    let banded = write_band_file(storage, &segment, &bands_part, BuildBudget::default(), Some(&engine.closing))?.is_some();
    drop(segment);
    let meta = SegmentMeta { number: engine.alloc_number(), ..meta };
    let (path, bands_path) = (engine.dir.join(segment_name(meta.number)), engine.dir.join(bands_name(meta.number)));
    if banded {
        storage.rename(&bands_part, &bands_path).map_err(|e| Error::io(&bands_path, "rename", e))?;
    }
    storage.rename(&out, &path).map_err(|e| Error::io(&path, "rename", e))?;
    storage.sync_dir(&engine.dir).map_err(|e| Error::io(&engine.dir, "fsync directory", e))?;
    let segment = Segment::open_with(storage, &path)?;
    let bands = if banded { open_slot(storage, &bands_path, &segment)? } else { BandSlot::default() };
    Ok(LiveSegment { meta, segment, bands, ids: Default::default() })
}

/// Band file `path` of `segment`, opened, in a slot.
fn open_slot(storage: &dyn Storage, path: &Path, segment: &Segment) -> Result<BandSlot> {
    let (file, whole) = open_whole(storage, path, segment)?;
    Ok(BandSlot::with(file, whole))
}

/// Opens band file `path` of `segment` ([`BandFile::open`]), and says whether it holds
/// every entry of the segment (its head's `banded` equals `entries`: every entry has a
/// sketch), so that the crawler's check asks its lookups only (`confirmed`).
fn open_whole(storage: &dyn Storage, path: &Path, segment: &Segment) -> Result<(BandFile, bool)> {
    let file = BandFile::open(storage, path, segment)?;
    // the check reads a chunk of it for every pair it confirms
    segment.will_need_fingerprint_index();
    let whole = file.holds_every_entry();
    Ok((file, whole))
}

/// What an open does about a band file it cannot use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum OnOpen {
    /// Read-only: goes without (the segment's tables answer its check).
    GoWithout,
    /// Writable with a maintenance thread: sets aside what is in the way, and leaves the
    /// build to the thread.
    BuildLater,
    /// Writable without one: sets aside what is in the way and builds it now.
    BuildNow,
}

/// A segment the manifest lists, live with its band file: opened, or (`on_open`) built
/// again when missing or not this segment's (its name added to `rebuilt`); a directory or
/// an unreadable file in its place is set aside first (its new name added to `set_aside`).
pub(super) fn attach_on_open(
    storage: &dyn Storage,
    dir: &Path,
    meta: SegmentMeta,
    segment: Segment,
    on_open: OnOpen,
    rebuilt: &mut Vec<String>,
    set_aside: &mut Vec<String>,
) -> Result<LiveSegment> {
    if !segment.has_sketches() {
        return Ok(LiveSegment { meta, segment, bands: BandSlot::default(), ids: Default::default() });
    }
    let path = dir.join(bands_name(meta.number));
    let fault = match open_slot(storage, &path, &segment) {
        Ok(bands) => return Ok(LiveSegment { meta, segment, bands, ids: Default::default() }),
        Err(e) => e,
    };
    if on_open != OnOpen::GoWithout {
        if let Some(name) = set_aside_unreadable(storage, &path)? {
            set_aside.push(name);
        }
    }
    if on_open != OnOpen::BuildNow {
        return Ok(LiveSegment { meta, segment, bands: BandSlot::without(describe(&fault)), ids: Default::default() });
    }
    let live = attach_new(storage, dir, meta, segment, BuildBudget::default())?;
    if live.bands.file().is_some() {
        rebuilt.push(bands_name(meta.number));
    }
    Ok(live)
}

/// Why a band file could not be opened, in words.
fn describe(fault: &Error) -> String {
    match fault {
        Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => "missing; its segment's check is answered from the tables until it is built".to_string(),
        other => format!("{other}; its segment's check is answered from the tables until it is rebuilt"),
    }
}

/// When what is at `path` exists but cannot be read as a file (a directory, a file without
/// read permission, a symbolic link that leads nowhere readable), renames it to
/// `NAME.set-aside` (`NAME.set-aside.2`, ... when taken), so that a band file can be
/// written there; returns the new name. A readable file is left (a rebuild replaces it).
pub(super) fn set_aside_unreadable(storage: &dyn Storage, path: &Path) -> Result<Option<String>> {
    match storage.read(path) {
        Ok(_) => return Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(_) => {}
    }
    let dir = crate::storage::parent_dir(path);
    let names = storage.list(&dir).map_err(|e| Error::io(path, "list the directory of", e))?;
    let base = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    // (the listing names files only: a name a directory took fails the rename, and the next is tried)
    let mut last = None;
    for n in 1..=MAX_SET_ASIDE {
        let aside = if n == 1 { format!("{base}.set-aside") } else { format!("{base}.set-aside.{n}") };
        if names.contains(&aside) {
            continue;
        }
        match storage.rename(path, &path.with_file_name(&aside)) {
            Ok(()) => {
                storage.sync_dir(&dir).map_err(|e| Error::io(&dir, "fsync directory", e))?;
                return Ok(Some(aside));
            }
            Err(e) => last = Some(e),
        }
    }
    Err(Error::io(path, "set aside (rename)", last.unwrap_or_else(|| std::io::Error::other(format!("{MAX_SET_ASIDE} set-aside names are taken")))))
}

/// Names tried for what is set aside in one place.
const MAX_SET_ASIDE: u32 = 100;

impl Engine {
    /// Builds the band file of every live segment that stores sketches and has none in use
    /// (missing at open, or set aside after a lookup failed), one at a time, each under the
    /// compaction lock (so its segment cannot be merged away meanwhile). Stops early when
    /// the index is closing.
    pub(super) fn heal_band_files(&self) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        for s in self.current().segments.iter().filter(|s| s.segment.has_sketches() && s.bands.file().is_none()) {
            if self.stopping() {
                return Ok(());
            }
            let _guard = lock(&self.compacting);
            if !self.current().segments.iter().any(|live| Arc::ptr_eq(live, s)) {
                continue;
            }
            let path = self.dir.join(bands_name(s.meta.number));
            set_aside_unreadable(&*self.storage, &path)?;
            if write_band_file(&*self.storage, &s.segment, &path, BuildBudget::default(), Some(&self.closing))?.is_some() {
                let (file, whole) = open_whole(&*self.storage, &path, &s.segment)?;
                s.bands.install(file, whole);
                self.bands_rebuilt.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    /// Counts a band lookup answered from the tables instead, and gets the file rebuilt.
    pub(super) fn band_fault(&self) {
        self.band_fallbacks.fetch_add(1, Ordering::Relaxed);
        if self.options.background && !self.read_only {
            self.wake_background();
        }
    }
}

/// `simdex verify` of band file `n`: every page, and that it is the file its segment's
/// sketches make. Returns a summary for the report.
pub(crate) fn verify_band_file(storage: &dyn Storage, dir: &Path, n: u64) -> Result<String> {
    let segment = Segment::open_with(storage, &dir.join(super::files::segment_name(n)))?;
    let bands = BandFile::open(storage, &dir.join(bands_name(n)), &segment)?;
    bands.verify(&segment)?;
    let d = bands.design();
    Ok(format!(
        "{} bands of segment {n}'s sketches, {} buckets each, {} bytes (version {}; a reader keeps {} bytes of directory in memory)",
        d.bands,
        d.buckets(),
        bands.file_len(),
        bands.version(),
        bands.resident_bytes()
    ))
}

/// What the band half of a check compares with: the query and the rule.
pub(super) struct BandQuery<'a> {
    pub fingerprint: u64,
    pub sketch: &'a [u8],
    /// The b-bit MinHash scheme of the index's sketches.
    pub hashes: u32,
    pub bits: u32,
    pub k: u32,
    pub min_similarity: f64,
    /// Band candidates: a pair sharing a band beyond `k` is an answer at this resemblance
    /// (`None`: only pairs within `k` are).
    pub beyond_k: Option<f64>,
    /// The caller's tables found every pair within `k` (in the segments they were asked
    /// for): a segment without a band file needs no table query of its own.
    pub tables_found_k: bool,
    /// By segment position: the caller did not ask the segment's tables (its band file
    /// holds every entry and answers alone); should its lookup fail, its tables are asked
    /// here within `k`.
    pub alone: &'a [bool],
    /// By segment position: this query's band lookups and sketch tests already done by a
    /// batch (`band_batch`), the kept candidates in ordinal order, with their fingerprints
    /// and ids (empty, or `None` at a position: looked up here).
    pub batched: &'a [Option<&'a [Candidate]>],
}

impl BandQuery<'_> {
    /// The resemblance of a stored sketch when it passes the threshold.
    fn accepts(&self, stored: &[u8]) -> Option<f64> {
        minhash_resemblance(self.sketch, stored, self.hashes, self.bits).filter(|&s| s >= self.min_similarity)
    }

    /// True when a pair at `distance` bits whose sketch shares a band with the query's and
    /// estimates `similarity` is an answer.
    fn passes(&self, distance: u32, similarity: f64) -> bool {
        match self.beyond_k {
            _ if distance <= self.k => similarity >= self.min_similarity,
            Some(beyond) => similarity >= beyond,
            None => false,
        }
    }
}

/// Appends every live pair of `version` whose stored sketch shares a band with the query's
/// and that the rule accepts (`BandQuery::passes`: within `q.k` at `q.min_similarity`, beyond
/// it at `q.beyond_k`), judged by the sketch of the pair's newest copy.
///
/// A segment without a band file in use (missing or damaged until it is built again; a
/// read-only open goes without) answers the same: every pair within `q.k` from its tables
/// (`fallback`, unless the caller's tables did), and with `q.beyond_k` the pairs sharing
/// a band found by reading all its sketches (slower, never fewer answers); so does a
/// segment the caller left to its band file alone (`q.alone`) when that file is not in use
/// after all or fails its lookup. A segment whose
/// band file fails a lookup (a page failing its checksum) is set aside the same way, and the
/// count of such faults is returned (the caller counts them and gets the file rebuilt).
pub(super) fn band_matches(version: &Version, views: &MemViews<'_>, q: &BandQuery<'_>, out: &mut Vec<Match>) -> Result<u32> {
    let mut ordinals = Vec::new();
    let mut faults = 0;
    let newest = version.segments.len().saturating_sub(1);
    // where a newer copy of a pair may be: a later segment or a memtable
    let memtables_hold_inserts = views.0.iter().any(|v| v.entries().next().is_some());
    let all_bands = BandDesign::for_segment(1, q.sketch.len()).map_or(0, |d| d.bands);
    let mut kept = Vec::new();
    // the entry pages of every cold band file, asked for before any segment's are read
    let batched = |i: usize| q.batched.get(i).copied().flatten();
    let asked: Vec<bool> = version.segments.iter().enumerate().map(|(i, s)| batched(i).is_none() && s.bands.file().is_some_and(|b| b.ask_ahead(q.sketch))).collect();
    // and the cache lines of every warm one's directory entries, then of its entries, so
    // that a check's memory reads overlap across bands and segments
    let warm = || version.segments.iter().enumerate().filter(|&(i, _)| batched(i).is_none() && !asked.get(i).copied().unwrap_or(false)).filter_map(|(_, s)| s.bands.file());
    warm().for_each(|b| b.prefetch_directories(q.sketch));
    warm().for_each(|b| b.prefetch_entries(q.sketch));
    for (i, s) in version.segments.iter().enumerate() {
        if let Some(done) = batched(i) {
            kept.clear();
            kept.extend_from_slice(done);
        } else {
            let scratch = Scratch { all_bands, ordinals: &mut ordinals, kept: &mut kept };
            faults += look_up(version, views, (i, s), q, asked.get(i).copied().unwrap_or(false), scratch, out)?;
        }
        for &(ordinal, similarity, entry) in &kept {
            let fp = match entry {
                Some((fp, _)) => fp,
                None => s.segment.fingerprint_at(ordinal)?,
            };
            let distance = (fp ^ q.fingerprint).count_ones();
            if !q.passes(distance, similarity) {
                continue;
            }
            let id = match entry {
                Some((_, id)) => id,
                None => s.segment.doc_id(ordinal)?,
            };
            if version.hidden(views, fp, id, s.meta.max_seq) {
                continue;
            }
            // A newer copy of the pair (re-inserted with another sketch) is the one judged.
            let newer_copy = i < newest || memtables_hold_inserts;
            let similarity = if newer_copy {
                match version.sketch_of(views, fp, id)? {
                    Some(stored) => match q.accepts(&stored) {
                        Some(s) if q.passes(distance, s) => s,
                        _ => continue,
                    },
                    None => continue,
                }
            } else {
                similarity
            };
            out.push(Match { distance, fingerprint: fp, doc_id: Some(id), similarity: Some(similarity) });
        }
    }
    for v in &views.0 {
        for e in v.band_candidates(q.sketch) {
            let distance = (e.fp ^ q.fingerprint).count_ones();
            if (distance > q.k && q.beyond_k.is_none()) || version.hidden(views, e.fp, e.id, e.seq) {
                continue;
            }
            let Some(similarity) = version.sketch_of(views, e.fp, e.id)?.as_deref().and_then(|s| q.accepts(s)).filter(|&s| q.passes(distance, s)) else { continue };
            out.push(Match { distance, fingerprint: e.fp, doc_id: Some(e.id), similarity: Some(similarity) });
        }
    }
    Ok(faults)
}

/// What [`look_up`] works in: the scheme's bands, and its lists (cleared and filled).
struct Scratch<'a> {
    all_bands: u32,
    ordinals: &'a mut Vec<u32>,
    kept: &'a mut Vec<Candidate>,
}

/// Segment `i`'s (`s`'s) candidates for `q`, looked up in its band file (`asked`: its
/// entry pages were asked for), else (no band file in use, or its lookup fails: set aside,
/// a fault returned) from its tables (into `out`) and its sketches: `scratch.kept` gets
/// those whose sketch shares a band and passes the threshold, `(ordinal, resemblance)` in
/// ordinal order.
fn look_up(version: &Version, views: &MemViews<'_>, (i, s): (usize, &LiveSegment), q: &BandQuery<'_>, asked: bool, scratch: Scratch<'_>, out: &mut Vec<Match>) -> Result<u32> {
    let Scratch { all_bands, ordinals, kept } = scratch;
    let mut faults = 0;
    ordinals.clear();
    // `cold`: the band file's lookups have been waiting for the disk, so the candidates'
    // reads are asked for together (their sketches, then the survivors' ids and
    // fingerprints) before any is read
    let (looked_up, cold) = match s.bands.file() {
        Some(bands) => match bands.lookup_all(q.sketch, asked, ordinals) {
            Ok(()) => (true, bands.is_cold()),
            Err(fault) => {
                s.bands.set_aside(&bands, &fault);
                faults += 1;
                ordinals.clear();
                (false, false)
            }
        },
        None => (false, false),
    };
    if !looked_up {
        if !q.tables_found_k || q.alone.get(i).copied().unwrap_or(false) {
            fallback(version, views, s, q, out)?;
        }
        if q.beyond_k.is_some() && s.segment.has_sketches() {
            scan_sketches(&s.segment, q.sketch, all_bands, ordinals)?;
        }
    }
    let bands = s.bands.file().map_or(all_bands, |b| b.design().bands);
    ordinals.sort_unstable();
    ordinals.dedup();
    if cold {
        s.segment.will_need_sketches(ordinals);
    } else {
        s.segment.prefetch_sketches(ordinals);
    }
    kept.clear();
    for &ordinal in ordinals.iter() {
        let ordinal = u64::from(ordinal);
        // a candidate that shares only a bucket and a tag with the query's band is not one
        let stored = s.segment.sketch(ordinal)?;
        if !shares_band(q.sketch, stored, bands) {
            continue;
        }
        if let Some(similarity) = q.accepts(stored) {
            kept.push((ordinal, similarity, None));
        }
    }
    if cold {
        s.segment.will_need_entries(kept.iter().map(|&(ordinal, _, _)| ordinal));
    }
    Ok(faults)
}

/// The ordinals of `segment` whose stored sketch shares one of the first `bands` bands with
/// `sketch`, by reading every sketch: what its band file would find, for a segment without one.
fn scan_sketches(segment: &Segment, sketch: &[u8], bands: u32, ordinals: &mut Vec<u32>) -> Result<()> {
    // the query's bands as bytes, compared with each stored sketch's words in place
    let keys: Vec<[u8; 4]> = (0..bands).filter_map(|b| band_key(sketch, b)).map(u32::to_le_bytes).collect();
    for (ordinal, stored) in (0u32..).zip(segment.sketches_in_order()) {
        let stored = stored?;
        if keys.iter().zip(stored.chunks_exact(4)).any(|(key, word)| word == key) && !is_empty_sketch(stored) {
            ordinals.push(ordinal);
        }
    }
    Ok(())
}

/// A segment without a band file in use (missing or damaged, until it is built again; a
/// read-only open goes without): every pair within `q.k` from its tables, judged by the newest copy's sketch.
fn fallback(version: &Version, views: &MemViews<'_>, s: &LiveSegment, q: &BandQuery<'_>, out: &mut Vec<Match>) -> Result<()> {
    let mut found = Vec::new();
    s.segment.query_into(q.fingerprint, &crate::query::QueryOptions::within(q.k), &mut found)?;
    for m in found {
        let id = m.doc_id.unwrap_or(0);
        if version.hidden(views, m.fingerprint, id, s.meta.max_seq) {
            continue;
        }
        if let Some(similarity) = version.sketch_of(views, m.fingerprint, id)?.as_deref().and_then(|st| q.accepts(st)) {
            out.push(Match { similarity: Some(similarity), ..m });
        }
    }
    Ok(())
}
