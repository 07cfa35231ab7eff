//! Opening an index: the lock, then recovery of what the directory holds (manifest,
//! segments, tombstone files, logs replayed into the memtable; on a writable open also torn
//! log tails cut and orphans of interrupted flushes and compactions removed), then the
//! background threads. Salvage of a damaged directory is `salvage`'s, not this module's.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Condvar, Mutex, RwLock};

use super::banded::OnOpen;
use super::compaction::checkpoint::MergeFiles;
use super::expiry;
use super::files::{self, log_name, segment_name, tombstones_name, FileKind, LOCK_NAME};
use super::log::LogWriter;
use super::manifest::{LogMeta, Manifest, TombstoneMeta};
use super::memtable::Memtable;
use super::options::OpenMode;
use super::replay::{replay_logs, Pieces, Replayed};
use super::report::OpenReport;
use super::state::{Engine, MaintenanceSignals};
use super::tombstone;
use super::version::{LiveSegment, TombstoneSet, Version};
use super::writer::WriterState;
use super::{Durability, Index, IndexOptions};
use crate::error::{Error, Result};
use crate::plan::{planned_design, Design, PlanOptions, MAX_K};
use crate::segment::{Segment, SketchColumn};
use crate::storage::Storage;

/// The memtable's query design is planned for its flush size, but never for more entries
/// than this (a memtable that is never flushed should not get hundreds of tables).
const MEMTABLE_DESIGN_CAP: u64 = 1 << 22;

/// Opens the index in `dir`: see [`Index::open`] and [`Index::open_read_only`].
pub(super) fn open(dir: &Path, options: IndexOptions, mode: OpenMode) -> Result<Index> {
    let storage = options.storage.clone();
    let read_only = mode == OpenMode::ReadOnly;
    // A call that fails on its arguments or on a missing index creates nothing.
    if options.k > MAX_K {
        return Err(Error::InvalidArgument(format!("k = {} is not supported (at most {MAX_K})", options.k)));
    }
    let lock = if read_only {
        None
    } else {
        match storage.list(dir) {
            Err(e) if !options.create && e.kind() == std::io::ErrorKind::NotFound => return Err(Error::NoIndex { dir: dir.to_path_buf(), hint: MISSING_DIR.into() }),
            // No manifest and nothing may be created (or not among other files): refused
            // before the LOCK file is made, so a failed open leaves the directory as it was.
            Ok(names) if !names.iter().any(|n| matches!(files::parse(n), FileKind::Manifest)) => {
                if !options.create || files::holds_index_data(&names) {
                    return Err(no_manifest(dir, &names));
                }
                if !options.create_in_nonempty {
                    not_an_index(dir, &names)?;
                }
            }
            _ => {}
        }
        storage.create_dir_all(dir).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                Error::InvalidArgument(format!("{}: exists but is not a directory (a file, or a symbolic link to a missing directory)", dir.display()))
            } else {
                Error::io(dir, "create directory", e)
            }
        })?;
        let path = dir.join(LOCK_NAME);
        Some(storage.lock(&path).map_err(|e| if e.kind() == std::io::ErrorKind::WouldBlock { Error::Locked { path: path.clone() } } else { Error::io(&path, "lock", e) })?)
    };
    // A read-only open races with a running writer: a flush or compaction may install a
    // new manifest and delete files the one it read names, or leave logs that continue from
    // a newer manifest than the one it read. Readers take an optimistic snapshot: the
    // manifest's number before, everything read, the number after. Writers replace the
    // manifest (numbers only grow) before deleting any file it drops, so an unchanged
    // number means the files read were one consistent state, and only then is the result,
    // success or error, trusted; otherwise the reader starts over.
    let mut attempts = 0;
    let loaded = loop {
        attempts += 1;
        let before = read_only.then(|| manifest_number(&*storage, dir));
        let result = recover(&*storage, dir, &options, mode);
        if attempts < MAX_READ_ATTEMPTS && before.is_some_and(|n| n != manifest_number(&*storage, dir)) {
            continue;
        }
        break result?;
    };
    let Recovered { manifest, version, writer, next_file, report, mem_design, accepted_loss, seen } = loaded;
    let engine = Arc::new(Engine {
        dir: dir.to_path_buf(),
        storage,
        read_only,
        k: manifest.k,
        codec: manifest.codec,
        sketches: manifest.sketches,
        expiry: manifest.expiry,
        mem_design,
        writer: Mutex::new(writer),
        current: RwLock::new(Arc::new(version)),
        manifest: Mutex::new(manifest),
        seals: Mutex::new(Vec::new()),
        compacting: Mutex::new(()),
        merging_entries: AtomicU64::new(0),
        closing: AtomicBool::new(false),
        next_file: AtomicU64::new(next_file),
        signals: Mutex::new(MaintenanceSignals::default()),
        wake: Condvar::new(),
        sync_wake: Condvar::new(),
        synced: Condvar::new(),
        log_syncs: AtomicU64::new(0),
        flushes: AtomicU64::new(0),
        compactions: AtomicU64::new(0),
        dropped_deleted: AtomicU64::new(0),
        dropped_repeats: AtomicU64::new(0),
        spilled_runs: AtomicU64::new(0),
        resumed_merges: AtomicU64::new(0),
        expired_segments: AtomicU64::new(0),
        rebuilt_id_tables: AtomicU64::new(0),
        band_fallbacks: AtomicU64::new(0),
        bands_rebuilt: AtomicU64::new(0),
        report,
        _lock: lock,
        options,
    });
    if let Some(high_water) = accepted_loss {
        engine.accept_log_loss(high_water)?;
    } else if !read_only {
        // What was replayed is acknowledged (the log is synced): a manifest records it
        // when it does not yet (after a crash, or a close that did not flush), so that
        // losing it later is counted, not silent.
        for seal in seen {
            engine.keep_seal(seal);
        }
        engine.seal_open_log(&super::state::lock(&engine.writer))?;
    }
    let mut threads = Vec::new();
    if !read_only && engine.options.background {
        // Memtables replayed from the logs a close left (or a crash) are flushed at once.
        if !engine.current().frozen.is_empty() {
            engine.wake_background();
        }
        let s = engine.clone();
        let t = std::thread::Builder::new().name("simdex-maintenance".into()).spawn(move || s.maintenance_loop());
        threads.push(t.map_err(|e| Error::io(dir, "spawn the maintenance thread", e))?);
        if let Durability::Group { max_delay, max_ops } = engine.options.durability {
            let s = engine.clone();
            let t = std::thread::Builder::new().name("simdex-sync".into()).spawn(move || s.sync_loop(max_delay, max_ops));
            let index = Index { engine: engine.clone(), threads: Mutex::new(threads) };
            let t = t.map_err(|e| Error::io(dir, "spawn the sync thread", e))?;
            index.threads.lock().unwrap_or_else(|p| p.into_inner()).push(t);
            return Ok(index);
        }
    }
    Ok(Index { engine, threads: Mutex::new(threads) })
}

impl Index {
    /// Opens the index in `dir` for reading and writing (creating it when
    /// `options.create`), after recovering from any crash: replays the logs, cuts a torn
    /// log tail, removes orphans. Fails with [`crate::Error::Locked`] while another writer has it.
    pub fn open(dir: impl AsRef<Path>, options: IndexOptions) -> Result<Index> {
        open(dir.as_ref(), options, OpenMode::ReadWrite)
    }

    /// Opens the index in `dir` read-only: takes no lock, changes no file, and works while a
    /// writer runs (it sees the writes made before it opened).
    pub fn open_read_only(dir: impl AsRef<Path>, options: IndexOptions) -> Result<Index> {
        open(dir.as_ref(), options, OpenMode::ReadOnly)
    }
}

/// A sketch layout a segment's sketch column can hold (1 to 64 bytes).
pub(crate) fn check_sketch_layout(s: SketchColumn) -> Result<()> {
    if s.bytes == 0 || usize::from(s.bytes) > crate::segment::layout::MAX_SKETCH_BYTES {
        return Err(Error::InvalidArgument(format!("a sketch of {} bytes: sketches take 1 to {} bytes", s.bytes, crate::segment::layout::MAX_SKETCH_BYTES)));
    }
    Ok(())
}

/// [`Error::NoIndex`] for a directory whose listing, `names`, has no manifest: with index
/// data in it, the manifest was lost.
fn no_manifest(dir: &Path, names: &[String]) -> Error {
    let hint = if files::holds_index_data(names) { "; it holds simdex data files, so the manifest was lost: run `simdex recover` on it".to_string() } else { String::new() };
    Error::NoIndex { dir: dir.to_path_buf(), hint }
}

/// Refuses to create an index in `dir`, whose listing `names` has no manifest, when it holds
/// files that are not the LOCK or temporary files of an index whose creation was cut short.
fn not_an_index(dir: &Path, names: &[String]) -> Result<()> {
    let others: Vec<&String> = names.iter().filter(|n| !matches!(files::parse(n), FileKind::Lock | FileKind::Temporary)).collect();
    if others.is_empty() {
        return Ok(());
    }
    let mut sample: Vec<&str> = others.iter().map(|n| n.as_str()).collect();
    sample.sort_unstable();
    let shown: Vec<&str> = sample.iter().take(3).copied().collect();
    let more = if others.len() > 3 { ", ..." } else { "" };
    Err(Error::NotAnIndex { dir: dir.to_path_buf(), found: format!("{} other files: {}{more}", others.len(), shown.join(", ")) })
}

/// The hint of [`Error::NoIndex`] for a path that does not exist.
const MISSING_DIR: &str = " (the directory does not exist, or is a symbolic link to a missing one)";

/// How often a read-only open starts over because a writer replaced the manifest while it
/// read (each attempt is one read of the directory; a writer flushes far less often).
const MAX_READ_ATTEMPTS: u32 = 20;

/// The number of the manifest in `dir`, or `None` when there is none or it is unreadable.
fn manifest_number(storage: &dyn Storage, dir: &Path) -> Option<u64> {
    Manifest::load(storage, dir).ok().flatten().map(|m| m.number)
}

/// Everything [`recover`] reads from the directory.
struct Recovered {
    manifest: Manifest,
    version: Version,
    writer: WriterState,
    next_file: u64,
    report: OpenReport,
    mem_design: Arc<Design>,
    /// A loss opened past: the last sequence number spent (`Engine::accept_log_loss`).
    accepted_loss: Option<u64>,
    /// Seals of the logs replayed whole.
    seen: Vec<LogMeta>,
}

fn not_found(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::NotFound
}

/// Reads the index in `dir`: manifest, segments, tombstones, logs; on a writable open also
/// removes orphans, cuts torn log tails and opens the log for appending.
fn recover(storage: &dyn Storage, dir: &Path, options: &IndexOptions, mode: OpenMode) -> Result<Recovered> {
    let read_only = mode == OpenMode::ReadOnly;
    let mut report = OpenReport::default();
    let (manifest, names) = read_manifest(storage, dir, options, read_only, &mut report)?;
    let mem_design = Arc::new(planned_design(&PlanOptions::for_segment(options.memtable_ops.clamp(1, MEMTABLE_DESIGN_CAP), manifest.k, manifest.sketches.is_some()))?);
    let listing = classify(&names, &manifest, &mut report);
    if !read_only {
        let mut orphans = listing.orphans;
        // A merge in progress stays for the next merge of its segments to go on from, as
        // long as they are all live; otherwise no merge will resume it.
        let resumable = MergeFiles::in_dir(dir).load(storage).is_some_and(|c| c.identity.inputs.iter().all(|n| manifest.segments.iter().any(|s| s.number == *n)));
        if !resumable {
            orphans.extend(listing.merge_files);
        }
        remove_orphans(storage, dir, orphans, &mut report)?;
    }
    let mut next_file = manifest.next_file.max(listing.max_number + 1);
    let on_open = match (read_only, options.background) {
        (true, _) => OnOpen::GoWithout,
        (false, true) => OnOpen::BuildLater,
        (false, false) => OnOpen::BuildNow,
    };
    let segments = open_segments(storage, dir, &manifest, on_open, &mut report)?;
    let tombstone_files = load_tombstones(storage, dir, &manifest)?;
    let sketch_width = manifest.sketches.map_or(0, |s| usize::from(s.bytes));
    let pieces = Pieces::new(mem_design.clone(), sketch_width, options.memtable_ops);
    let Replayed { pieces, next_seq, append_to, accepted_loss, seen } = replay_logs(storage, dir, &listing.logs, &manifest, pieces, (mode, options.log_recovery), &mut report)?;
    let (frozen, mut memtable) = pieces.finish();
    if let Some(x) = &manifest.expiry {
        // A new log's inserts are stamped no older than anything stored before (`expiry`).
        let floor = manifest.segments.iter().map(|s| s.epoch).chain(frozen.iter().map(|m| m.epoch).chain([memtable.epoch]).flatten()).max();
        let epoch = if append_to.is_some() { memtable.epoch } else { Some(expiry::stamp(x, options.clock.now_secs(), floor)?) };
        memtable.epoch = epoch.or(floor);
    }
    let mut writer =
        WriterState { log: None, next_seq, failed: None, pending_ops: 0, first_pending: None, synced_seq: next_seq - 1, sync_generation: 0, sync_requested: false, syncing: false };
    if !read_only {
        writer.log = Some(open_log(storage, dir, append_to, &mut next_file, &mut memtable)?);
    }
    // The replayed memtables that are not the active one wait for their flushes, oldest first.
    let frozen = frozen.into_iter().map(Arc::new).collect();
    let version = Version { active: Arc::new(memtable), frozen, segments, tombstones: Arc::new(TombstoneSet::new(tombstone_files)) };
    Ok(Recovered { manifest, version, writer, next_file, report, mem_design, accepted_loss, seen })
}

/// The manifest, and the names in `dir` listed after it was read. Without a manifest, a
/// writable open with `options.create` writes a new index's into a directory that holds no
/// simdex data.
fn read_manifest(storage: &dyn Storage, dir: &Path, options: &IndexOptions, read_only: bool, report: &mut OpenReport) -> Result<(Manifest, Vec<String>)> {
    let list =
        || storage.list(dir).map_err(|e| if read_only && not_found(&e) { Error::NoIndex { dir: dir.to_path_buf(), hint: MISSING_DIR.into() } } else { Error::io(dir, "list", e) });
    // The manifest first, then the listing: a log a running writer starts in between is in
    // the listing (and a manifest replaced meanwhile makes a read-only open start over).
    let loaded = Manifest::load(storage, dir)?;
    let mut names = list()?;
    let manifest = match loaded {
        Some(m) => m,
        None => {
            if read_only || !options.create || files::holds_index_data(&names) {
                return Err(no_manifest(dir, &names));
            }
            planned_design(&PlanOptions::new(1, options.k))?;
            if let Some(s) = options.sketches {
                check_sketch_layout(s)?;
            }
            let mut m = Manifest::new(options.k, options.codec, options.sketches);
            m.expiry = options.expiry;
            m.store(storage, dir)?;
            report.created = true;
            names = list()?;
            m
        }
    };
    if options.expiry.is_some_and(|x| manifest.expiry != Some(x)) {
        let has = manifest.expiry.map_or_else(|| "no expiry window".to_string(), |x| format!("the expiry window {x}"));
        return Err(Error::InvalidArgument(format!("{}: the index has {has}, fixed when it was created; open it without a window to use its own", dir.display())));
    }
    Ok((manifest, names))
}

/// The files of a directory, by what recovery does with them.
struct Listing {
    /// The largest file number in use.
    max_number: u64,
    /// Files the manifest does not name, and temporary files: a writable open removes them.
    orphans: Vec<String>,
    /// The live logs' numbers, oldest first.
    logs: Vec<u64>,
    /// The files of a merge in progress (`merge.*`).
    merge_files: Vec<String>,
}

/// Classifies every file of `names` by what `manifest` says of it; unknown files and a
/// missing log go in `report`.
fn classify(names: &[String], manifest: &Manifest, report: &mut OpenReport) -> Listing {
    let mut max_number = 0u64;
    let mut orphans = Vec::new();
    let mut logs: Vec<u64> = Vec::new();
    let mut merge_files = Vec::new();
    for name in names {
        match files::parse(name) {
            FileKind::Manifest | FileKind::Lock | FileKind::Recipe => {}
            FileKind::Temporary => orphans.push(name.clone()),
            // a merge's unfinished write (its band file's, a checkpoint's) is never gone on from
            FileKind::Merge if name.ends_with(".tmp") => orphans.push(name.clone()),
            FileKind::Merge => merge_files.push(name.clone()),
            FileKind::Segment(n) => {
                max_number = max_number.max(n);
                if !manifest.segments.iter().any(|s| s.number == n) {
                    orphans.push(name.clone());
                }
            }
            FileKind::Bands(n) | FileKind::Ids(n) => {
                max_number = max_number.max(n);
                if !manifest.segments.iter().any(|s| s.number == n) {
                    orphans.push(name.clone());
                }
            }
            FileKind::Tombstones(n) => {
                max_number = max_number.max(n);
                if !manifest.tombstones.iter().any(|t| t.number == n) {
                    orphans.push(name.clone());
                }
            }
            FileKind::Log(n) => {
                max_number = max_number.max(n);
                if n < manifest.log_number {
                    orphans.push(name.clone());
                } else {
                    logs.push(n);
                }
            }
            // the pinned fingerprint recipe (engine/pinned_recipe.rs): read by the text pipeline
            FileKind::Unknown => report.unknown.push(name.clone()),
        }
    }
    logs.sort_unstable();
    if let Some(loss) = super::seal::missing_log(manifest, logs.len()) {
        report.lost.push(format!("{}: {loss}", log_name(manifest.log_number)));
    }
    Listing { max_number, orphans, logs, merge_files }
}

/// Removes the orphans of interrupted flushes and compactions (a writable open).
fn remove_orphans(storage: &dyn Storage, dir: &Path, orphans: Vec<String>, report: &mut OpenReport) -> Result<()> {
    for name in orphans {
        let path = dir.join(&name);
        storage.remove(&path).map_err(|e| Error::io(&path, "remove orphan", e))?;
        report.removed.push(name);
    }
    Ok(())
}

/// Opens the segments the manifest names, checking each against its manifest entry.
fn open_segments(storage: &dyn Storage, dir: &Path, manifest: &Manifest, on_open: OnOpen, report: &mut OpenReport) -> Result<Vec<Arc<LiveSegment>>> {
    let mut segments = Vec::with_capacity(manifest.segments.len());
    for meta in &manifest.segments {
        let path = dir.join(segment_name(meta.number));
        let segment = Segment::open_with(storage, &path)?;
        let problem = if segment.file_len() != meta.file_len {
            Some(format!("the file is {} bytes, the manifest says {}", segment.file_len(), meta.file_len))
        } else if segment.len() != meta.entries {
            Some(format!("the segment holds {} entries, the manifest says {}", segment.len(), meta.entries))
        } else if !segment.has_ids() {
            Some("an index segment must store document ids".to_string())
        } else if let Some((bytes, scheme)) = segment.sketch_layout().filter(|&(b, s)| manifest.sketches.is_some_and(|m| (usize::from(m.bytes), m.scheme) != (b, s))) {
            Some(format!("the segment's sketches ({bytes} bytes, scheme {scheme:02x?}) are not the index's"))
        } else if segment.design().k() < manifest.k {
            Some(format!("the segment's design serves k = {}, the index k = {}", segment.design().k(), manifest.k))
        } else {
            None
        };
        if let Some(p) = problem {
            return Err(Error::corrupt(&path, 0, p));
        }
        segments.push(Arc::new(super::id_tables::attach_on_open(storage, dir, *meta, segment, on_open, report)?));
    }
    Ok(segments)
}

/// Reads the tombstone files the manifest names, checking each one's count.
fn load_tombstones(storage: &dyn Storage, dir: &Path, manifest: &Manifest) -> Result<Vec<(TombstoneMeta, Arc<Vec<tombstone::Tombstone>>)>> {
    let mut tombstone_files = Vec::with_capacity(manifest.tombstones.len());
    for meta in &manifest.tombstones {
        let path = dir.join(tombstones_name(meta.number));
        let t = tombstone::read(storage, &path)?;
        if t.len() as u64 != meta.count {
            return Err(Error::corrupt(&path, 0, format!("{} tombstones, the manifest says {}", t.len(), meta.count)));
        }
        tombstone_files.push((*meta, Arc::new(t)));
    }
    Ok(tombstone_files)
}

/// Opens the log a writable index appends to: the newest live log (`append_to`, synced, as
/// what was replayed from it may not have been), or a new one numbered `next_file`.
fn open_log(storage: &dyn Storage, dir: &Path, append_to: Option<(u64, u64)>, next_file: &mut u64, memtable: &mut Memtable) -> Result<LogWriter> {
    match append_to {
        Some((n, len)) => {
            let mut log = LogWriter::reopen(storage, &dir.join(log_name(n)), n, len)?;
            // What was replayed may not have been synced before the crash; it is acked.
            log.sync_all()?;
            Ok(log)
        }
        None => {
            let n = *next_file;
            *next_file += 1;
            memtable.log_number = n;
            LogWriter::create(storage, &dir.join(log_name(n)), n, memtable.epoch)
        }
    }
}
