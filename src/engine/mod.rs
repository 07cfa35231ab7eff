//! The append-and-compact engine: [`Index`], a directory of immutable segments, a manifest
//! naming them, an append log and an in-memory memtable (design in `format-spec/engine.md`).
//!
//! A write is appended to the log (synced per [`Durability`]), then applied to the active
//! memtable, where queries see it at once. A full memtable is *frozen*: the log rotates and
//! a flush writes the memtable's inserts as a segment (design planned for its size) and its
//! deletes as a tombstone file, then installs a new manifest. Compaction merges adjacent
//! segments ([`compaction`]) and installs the result the same way. Obsolete files are
//! deleted only after the manifest that drops them is durable.
//!
//! Concurrency: one writer at a time (a mutex in-process, the `LOCK` file across
//! processes); any number of queries, each on an `Arc` snapshot of the live set (a
//! [`version`]), so flushes and compactions never block them. A background thread (when
//! enabled) flushes and compacts; under group commit a second one syncs the log, without
//! holding the writer's lock during the fsync, so writes go on meanwhile.
//!
//! This module owns the directory: which files are live, recovery on open, orphan removal.
//! File formats belong to `log`, `manifest`, `tombstone` and `segment`.
//!
//! ```
//! use simdex::{FindOrInsert, Index, IndexOptions, QueryOptions};
//!
//! let dir = tempfile::tempdir()?;
//! let index = Index::open(dir.path(), IndexOptions::default())?;
//! index.insert(0x0123_4567_89ab_cdef, 1)?;
//! // One bit away: a near-duplicate of document 1.
//! let near = index.query(0x0123_4567_89ab_cdee, &QueryOptions::within(3))?;
//! assert_eq!(near[0].doc_id, Some(1));
//! // The crawler's check-then-add in one call.
//! assert!(matches!(index.find_or_insert(0x0123_4567_89ab_cdec, 2, &QueryOptions::within(3))?, FindOrInsert::Found(_)));
//! index.delete(0x0123_4567_89ab_cdef, 1)?;
//! assert!(index.query(0x0123_4567_89ab_cdee, &QueryOptions::within(3))?.is_empty());
//! index.close()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod compaction;
pub mod files;
pub mod recover;
pub mod snapshot;
pub mod verify;
mod version;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use compaction::CompactionOptions;
use files::{log_name, segment_name, tombstones_name, FileKind, LOCK_NAME};
use version::{LiveSegment, TombstoneSet, Version};

use crate::codec::Codec;
use crate::error::{Error, Result};
use crate::log::{scan_log, LogEnd, LogWriter, OpKind, ScanMode, LOG_HEADER_BYTES};
use crate::manifest::{Manifest, SegmentMeta, TombstoneMeta};
use crate::memtable::Memtable;
use crate::plan::{planned_design, Design, PlanOptions};
use crate::query::{Match, QueryOptions};
use crate::codec::SymbolHistogram;
use crate::segment::{build_segment, BuildOptions, Segment, SegmentWriter};
use crate::storage::{FsStorage, LockGuard, Storage};
use crate::tombstone;

/// The memtable's query design is planned for its flush size, but never for more entries
/// than this (a memtable that is never flushed should not get hundreds of tables).
const MEMTABLE_DESIGN_CAP: u64 = 1 << 22;

/// When a write is made durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// fsync the log before every write returns: a returned write survives a power loss.
    Sync,
    /// Group commit: every write reaches the operating system before it returns (so it
    /// survives a crash of the process), and the log is fsynced once `max_delay` has passed
    /// since the oldest unsynced write or `max_ops` operations are unsynced, whichever comes
    /// first (the fsync starts then; with `background`, a sync thread runs it while the
    /// writer goes on). [`Index::sync`] forces it.
    Group {
        /// Longest time a write stays unsynced before its sync starts (checked on writes and
        /// by the sync thread, when there is one).
        max_delay: Duration,
        /// Unsynced operations that start a sync; a writer `2 * max_ops` ahead of a sync
        /// still running waits for one of its own.
        max_ops: u64,
    },
    /// Writes reach the operating system's buffers before they return and are fsynced only
    /// at log rotation, [`Index::sync`] and close: process crashes lose nothing, a power
    /// loss may lose everything since the last sync.
    NoSync,
}

impl Default for Durability {
    fn default() -> Self {
        Durability::Group { max_delay: Duration::from_millis(10), max_ops: 100_000 }
    }
}

/// How to open an index.
#[derive(Clone, Debug)]
pub struct IndexOptions {
    /// Create the index when the directory holds none.
    pub create: bool,
    /// Largest query distance the designs guarantee, for a new index (an existing index
    /// keeps the value in its manifest).
    pub k: u32,
    /// Gap codec of new segments, for a new index.
    pub codec: Codec,
    /// When writes are synced.
    pub durability: Durability,
    /// Operations (inserts and deletes) the active memtable holds before it is flushed.
    pub memtable_ops: u64,
    /// Frozen memtables allowed to wait for the background flush; beyond this the writer
    /// flushes itself.
    pub max_frozen: usize,
    /// Compaction policy and memory.
    pub compaction: CompactionOptions,
    /// Flush, compact and sync in a background thread; without it, the writer does them
    /// inline (deterministic, for tests and one-shot tools).
    pub background: bool,
    /// Where the files live.
    pub storage: Arc<dyn Storage>,
}

impl Default for IndexOptions {
    fn default() -> Self {
        Self {
            create: true,
            k: 3,
            codec: Codec::Xor,
            durability: Durability::default(),
            memtable_ops: 1 << 20,
            max_frozen: 2,
            compaction: CompactionOptions::default(),
            background: true,
            storage: Arc::new(FsStorage),
        }
    }
}

/// What [`Index::find_or_insert`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FindOrInsert {
    /// Near-duplicates were found (nothing was inserted).
    Found(Vec<Match>),
    /// None was found; the pair was inserted with this sequence number.
    Inserted {
        /// The insert's sequence number.
        seq: u64,
    },
}

/// How one log looked when the index was opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogReport {
    /// File name.
    pub name: String,
    /// Bytes in the file.
    pub len: u64,
    /// Bytes of intact records and header.
    pub valid_len: u64,
    /// How it ended.
    pub end: LogEnd,
    /// Operations replayed from it.
    pub ops: u64,
}

/// What opening the index found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpenReport {
    /// Orphans of interrupted flushes and compactions that were removed (writable opens).
    pub removed: Vec<String>,
    /// Files that are not simdex's: left alone.
    pub unknown: Vec<String>,
    /// The live logs and how each ended.
    pub logs: Vec<LogReport>,
    /// Operations replayed from the logs into the memtable.
    pub replayed_ops: u64,
    /// True when the index was created by this open.
    pub created: bool,
}

/// One live segment, as [`Index::stats`] reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct SegmentStats {
    /// File name.
    pub name: String,
    /// Fingerprints stored (including ones hidden by tombstones).
    pub entries: u64,
    /// File size in bytes.
    pub file_len: u64,
    /// Sequence numbers of its operations.
    pub min_seq: u64,
    /// See `min_seq`.
    pub max_seq: u64,
    /// Number of tables.
    pub tables: usize,
    /// The design, in words.
    pub design: String,
}

/// A summary of the index.
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    /// The directory.
    pub dir: PathBuf,
    /// Opened read-only.
    pub read_only: bool,
    /// Largest query distance the designs guarantee.
    pub k: u32,
    /// Gap codec of new segments.
    pub codec: Codec,
    /// Live segments, oldest data first.
    pub segments: Vec<SegmentStats>,
    /// Live tombstone files.
    pub tombstone_files: usize,
    /// Tombstones in them.
    pub tombstones: u64,
    /// Inserts in the active memtable.
    pub memtable_inserts: u64,
    /// Deletes in the active memtable.
    pub memtable_deletes: u64,
    /// Frozen memtables waiting for a flush, and their operations.
    pub frozen_memtables: usize,
    /// Operations in frozen memtables.
    pub frozen_ops: u64,
    /// Live logs: name and size in bytes.
    pub logs: Vec<(String, u64)>,
    /// Sequence number of the last write.
    pub last_seq: u64,
    /// Every write up to this sequence number is synced.
    pub synced_seq: u64,
    /// Every write up to this sequence number is in a segment or tombstone file.
    pub flushed_seq: u64,
    /// Flushes and compactions since open.
    pub flushes: u64,
    /// See `flushes`.
    pub compactions: u64,
    /// Pairs compactions since open dropped because a tombstone hid them.
    pub compaction_dropped_deleted: u64,
    /// Pairs compactions since open dropped because an equal pair was already kept.
    pub compaction_dropped_repeats: u64,
    /// Sorted runs compactions since open spilled to temporary files (0 when every
    /// table fitted the buffer).
    pub compaction_spilled_runs: u64,
    /// Files that are not simdex's.
    pub unknown_files: Vec<String>,
    /// The last error of a background flush or compaction, if any.
    pub maintenance_error: Option<String>,
}

/// An open index. Queries may run from many threads while one thread writes.
pub struct Index {
    shared: Arc<Shared>,
    /// The maintenance thread and, under group commit, the sync thread.
    threads: Mutex<Vec<JoinHandle<()>>>,
}

struct Writer {
    log: Option<LogWriter>,
    next_seq: u64,
    failed: Option<String>,
    pending_ops: u64,
    first_pending: Option<Instant>,
    synced_seq: u64,
    /// Counts completed syncs; an unlocked sync that finds it unchanged knows that only
    /// appends happened while it ran.
    sync_generation: u64,
    /// Group commit: the sync thread has been asked for a sync that has not started yet.
    sync_requested: bool,
}

#[derive(Default)]
struct Background {
    stop: bool,
    wake: bool,
    /// Group commit: a sync is due (the sync thread's wake-up).
    sync: bool,
    error: Option<String>,
}

struct Shared {
    dir: PathBuf,
    storage: Arc<dyn Storage>,
    options: IndexOptions,
    read_only: bool,
    k: u32,
    codec: Codec,
    mem_design: Arc<Design>,
    writer: Mutex<Writer>,
    current: RwLock<Arc<Version>>,
    /// The durable manifest; held while a flush or compaction installs a new one.
    manifest: Mutex<Manifest>,
    compacting: Mutex<()>,
    next_file: AtomicU64,
    background: Mutex<Background>,
    wake: Condvar,
    /// Wakes the group-commit sync thread.
    sync_wake: Condvar,
    flushes: AtomicU64,
    compactions: AtomicU64,
    dropped_deleted: AtomicU64,
    dropped_repeats: AtomicU64,
    spilled_runs: AtomicU64,
    report: OpenReport,
    _lock: Option<LockGuard>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Index {
    /// Opens the index in `dir` for reading and writing (creating it when
    /// `options.create`), after recovering from any crash: replays the logs, cuts a torn
    /// log tail, removes orphans. Fails with [`Error::Locked`] while another writer has it.
    pub fn open(dir: impl AsRef<Path>, options: IndexOptions) -> Result<Index> {
        Self::open_inner(dir.as_ref(), options, false)
    }

    /// Opens the index in `dir` read-only: takes no lock, changes no file, and works while a
    /// writer runs (it sees the writes made before it opened).
    pub fn open_read_only(dir: impl AsRef<Path>, options: IndexOptions) -> Result<Index> {
        Self::open_inner(dir.as_ref(), options, true)
    }

    fn open_inner(dir: &Path, options: IndexOptions, read_only: bool) -> Result<Index> {
        let storage = options.storage.clone();
        let lock = if read_only {
            None
        } else {
            storage.create_dir_all(dir).map_err(|e| Error::io(dir, "create directory", e))?;
            let path = dir.join(LOCK_NAME);
            Some(storage.lock(&path).map_err(|e| if e.kind() == std::io::ErrorKind::WouldBlock { Error::Locked { path: path.clone() } } else { Error::io(&path, "lock", e) })?)
        };
        // A read-only open races with a running writer: a flush or compaction may install a
        // new manifest and delete files the one it read names (or logs it did not see yet).
        // It reads again until the manifest did not change while it loaded.
        let mut attempts = 0;
        let loaded = loop {
            attempts += 1;
            match load(&*storage, dir, &options, read_only) {
                Err(Error::Io { source, .. }) if read_only && attempts < 20 && source.kind() == std::io::ErrorKind::NotFound => {}
                Ok(l) if read_only && attempts < 20 && Manifest::load(&*storage, dir).ok().flatten().map(|m| m.number) != Some(l.manifest.number) => {}
                other => break other?,
            }
        };
        let Loaded { manifest, version, writer, next_file, report, mem_design } = loaded;
        let shared = Arc::new(Shared {
            dir: dir.to_path_buf(),
            storage,
            read_only,
            k: manifest.k,
            codec: manifest.codec,
            mem_design,
            writer: Mutex::new(writer),
            current: RwLock::new(Arc::new(version)),
            manifest: Mutex::new(manifest),
            compacting: Mutex::new(()),
            next_file: AtomicU64::new(next_file),
            background: Mutex::new(Background::default()),
            wake: Condvar::new(),
            sync_wake: Condvar::new(),
            flushes: AtomicU64::new(0),
            compactions: AtomicU64::new(0),
            dropped_deleted: AtomicU64::new(0),
            dropped_repeats: AtomicU64::new(0),
            spilled_runs: AtomicU64::new(0),
            report,
            _lock: lock,
            options,
        });
        let mut threads = Vec::new();
        if !read_only && shared.options.background {
            let s = shared.clone();
            let t = std::thread::Builder::new().name("simdex-maintenance".into()).spawn(move || s.maintenance_loop());
            threads.push(t.map_err(|e| Error::io(dir, "spawn the maintenance thread", e))?);
            if let Durability::Group { max_delay, max_ops } = shared.options.durability {
                let s = shared.clone();
                let t = std::thread::Builder::new().name("simdex-sync".into()).spawn(move || s.sync_loop(max_delay, max_ops));
                let index = Index { shared: shared.clone(), threads: Mutex::new(threads) };
                let t = t.map_err(|e| Error::io(dir, "spawn the sync thread", e))?;
                index.threads.lock().unwrap_or_else(|p| p.into_inner()).push(t);
                return Ok(index);
            }
        }
        Ok(Index { shared, threads: Mutex::new(threads) })
    }

    /// The index directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// Largest query distance the designs guarantee.
    pub fn k(&self) -> u32 {
        self.shared.k
    }

    /// What the open found and did.
    pub fn open_report(&self) -> &OpenReport {
        &self.shared.report
    }

    /// Adds `(fingerprint, doc_id)`; returns its sequence number.
    pub fn insert(&self, fingerprint: u64, doc_id: u64) -> Result<u64> {
        self.shared.write(OpKind::Insert, &[(fingerprint, doc_id)])
    }

    /// Adds every pair as one log record (one sync); returns the last sequence number.
    pub fn insert_batch(&self, pairs: &[(u64, u64)]) -> Result<u64> {
        self.shared.write(OpKind::Insert, pairs)
    }

    /// Deletes `(fingerprint, doc_id)`: queries stop returning it, compaction drops it.
    pub fn delete(&self, fingerprint: u64, doc_id: u64) -> Result<u64> {
        self.shared.write(OpKind::Delete, &[(fingerprint, doc_id)])
    }

    /// Deletes every pair as one log record.
    pub fn delete_batch(&self, pairs: &[(u64, u64)]) -> Result<u64> {
        self.shared.write(OpKind::Delete, pairs)
    }

    /// Every live pair within `options.k` bits of `fingerprint`, each once, sorted by
    /// distance, fingerprint and id. Sees every write that returned before the call.
    pub fn query(&self, fingerprint: u64, options: &QueryOptions) -> Result<Vec<Match>> {
        let mut out = Vec::new();
        self.query_into(fingerprint, options, &mut out)?;
        Ok(out)
    }

    /// [`Self::query`] into a reused vector (cleared first).
    pub fn query_into(&self, fingerprint: u64, options: &QueryOptions, out: &mut Vec<Match>) -> Result<()> {
        self.shared.check_k(options)?;
        self.shared.current().query_into(fingerprint, options, out)
    }

    /// The crawler's check-then-add: when no live pair is within `options.k` of
    /// `fingerprint`, inserts `(fingerprint, doc_id)`. Atomic with respect to other writers
    /// of the index.
    pub fn find_or_insert(&self, fingerprint: u64, doc_id: u64, options: &QueryOptions) -> Result<FindOrInsert> {
        let s = &self.shared;
        s.check_writable()?;
        s.check_k(options)?;
        let mut w = lock(&s.writer);
        let mut found = Vec::new();
        s.current().query_into(fingerprint, options, &mut found)?;
        if !found.is_empty() {
            return Ok(FindOrInsert::Found(found));
        }
        let (seq, due) = s.append(&mut w, OpKind::Insert, &[(fingerprint, doc_id)])?;
        let w = if due { s.commit_group(w)? } else { w };
        s.after_write(w);
        Ok(FindOrInsert::Inserted { seq })
    }

    /// Makes every write so far durable (fsync of the log).
    pub fn sync(&self) -> Result<()> {
        self.shared.check_writable()?;
        self.shared.sync_unlocked(lock(&self.shared.writer)).map(drop)
    }

    /// Writes the memtable out as a segment (and tombstone file) and waits until it is
    /// installed.
    pub fn flush(&self) -> Result<()> {
        self.shared.check_writable()?;
        {
            let mut w = lock(&self.shared.writer);
            self.shared.freeze(&mut w)?;
        }
        self.shared.flush_frozen()?;
        if self.shared.options.background {
            self.shared.wake_background();
        }
        Ok(())
    }

    /// Flushes, then merges every segment into one (dropping deleted and repeated pairs)
    /// and drops the tombstone files that no longer hide anything.
    pub fn compact(&self) -> Result<()> {
        self.flush()?;
        self.shared.compact_all()
    }

    /// Runs the automatic compaction policy now (what the background thread does after
    /// flushes).
    pub fn compact_tiered(&self) -> Result<()> {
        self.shared.check_writable()?;
        self.shared.compact_tiered()
    }

    /// A consistent read-only view of everything the index holds now, for whole-index jobs
    /// (batch queries, clusters, splitting); later writes do not change it.
    pub fn snapshot(&self) -> snapshot::Snapshot {
        snapshot::Snapshot::new(self.shared.current(), self.shared.k)
    }

    /// Every live pair, sorted, each once. Reads every segment: meant for tools and tests.
    pub fn live_entries(&self) -> Result<Vec<(u64, u64)>> {
        self.shared.current().live_entries()
    }

    /// A summary of segments, memtable, logs and tombstones.
    pub fn stats(&self) -> Stats {
        self.shared.stats()
    }

    /// Syncs the log, stops the background thread and releases the lock. (Dropping the
    /// index does the same but cannot report errors.)
    pub fn close(self) -> Result<()> {
        self.stop_background();
        if self.shared.read_only {
            return Ok(());
        }
        let mut w = lock(&self.shared.writer);
        if w.failed.is_some() {
            return Ok(());
        }
        self.shared.sync_locked(&mut w)
    }

    fn stop_background(&self) {
        let threads = std::mem::take(&mut *lock(&self.threads));
        if !threads.is_empty() {
            lock(&self.shared.background).stop = true;
            self.shared.wake.notify_all();
            self.shared.sync_wake.notify_all();
        }
        for t in threads {
            let _ = t.join();
        }
    }
}

impl Drop for Index {
    fn drop(&mut self) {
        self.stop_background();
        if !self.shared.read_only {
            let mut w = lock(&self.shared.writer);
            if w.failed.is_none() {
                let _ = self.shared.sync_locked(&mut w);
            }
        }
    }
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index").field("dir", &self.shared.dir).field("read_only", &self.shared.read_only).finish()
    }
}

/// Writes a memtable run (no deletes, no repeated pairs) as a segment with `design`, the
/// run's own: its arrays are the sorted tables, so nothing is sorted again.
fn write_run(storage: &dyn Storage, path: &Path, design: &Design, codec: Codec, run: &crate::memtable::Run) -> Result<u64> {
    let codecs = vec![codec; design.tables().len()];
    let mut writer = SegmentWriter::create(storage, path, design, &codecs, true)?;
    let mut first = SymbolHistogram::new();
    for e in &run.entries {
        first.push(codec, e.fp);
    }
    writer.write_table(&first.code(), run.entries.iter().map(|e| e.fp))?;
    for values in &run.tables {
        writer.write_table(&SymbolHistogram::of_sorted(codec, values).code(), values.iter().copied())?;
    }
    writer.write_ids(run.entries.iter().map(|e| e.id))?;
    writer.finish()
}

/// Everything [`load`] reads from the directory.
struct Loaded {
    manifest: Manifest,
    version: Version,
    writer: Writer,
    next_file: u64,
    report: OpenReport,
    mem_design: Arc<Design>,
}

fn not_found(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::NotFound
}

/// Reads the index in `dir`: manifest, segments, tombstones, logs; on a writable open also
/// removes orphans, cuts torn log tails and opens the log for appending.
fn load(storage: &dyn Storage, dir: &Path, options: &IndexOptions, read_only: bool) -> Result<Loaded> {
    let mut report = OpenReport::default();
    let list = || storage.list(dir).map_err(|e| if read_only && not_found(&e) { Error::NoIndex { dir: dir.to_path_buf(), hint: String::new() } } else { Error::io(dir, "list", e) });
    // The manifest first, then the listing: a log a running writer starts in between is in
    // the listing (and a manifest replaced meanwhile makes a read-only open start over).
    let loaded = Manifest::load(storage, dir)?;
    let mut names = list()?;
    let manifest = match loaded {
        Some(m) => m,
        None => {
            let has_data = names.iter().any(|n| matches!(files::parse(n), FileKind::Segment(_) | FileKind::Tombstones(_) | FileKind::Log(_)));
            if read_only || !options.create || has_data {
                let hint = if has_data { "; it holds simdex data files, so the manifest was lost: run `simdex recover` on it".to_string() } else { String::new() };
                return Err(Error::NoIndex { dir: dir.to_path_buf(), hint });
            }
            planned_design(&PlanOptions::new(1, options.k))?;
            let m = Manifest::new(options.k, options.codec);
            m.store(storage, dir)?;
            report.created = true;
            names = list()?;
            m
        }
    };
    let mem_design = Arc::new(planned_design(&PlanOptions::new(options.memtable_ops.clamp(1, MEMTABLE_DESIGN_CAP), manifest.k))?);

    // Classify every file.
    let mut max_number = 0u64;
    let mut orphans = Vec::new();
    let mut logs: Vec<u64> = Vec::new();
    for name in &names {
        match files::parse(name) {
            FileKind::Manifest | FileKind::Lock => {}
            FileKind::Temporary => orphans.push(name.clone()),
            FileKind::Segment(n) => {
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
            FileKind::Unknown => report.unknown.push(name.clone()),
        }
    }
    logs.sort_unstable();
    if !read_only {
        for name in orphans {
            let path = dir.join(&name);
            storage.remove(&path).map_err(|e| Error::io(&path, "remove orphan", e))?;
            report.removed.push(name);
        }
    }
    let mut next_file = manifest.next_file.max(max_number + 1);

    // Segments and tombstones the manifest names.
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
        } else if segment.design().k() < manifest.k {
            Some(format!("the segment's design serves k = {}, the index k = {}", segment.design().k(), manifest.k))
        } else {
            None
        };
        if let Some(p) = problem {
            return Err(Error::corrupt(&path, 0, p));
        }
        segments.push(Arc::new(LiveSegment { meta: *meta, segment }));
    }
    let mut tombstone_files = Vec::with_capacity(manifest.tombstones.len());
    for meta in &manifest.tombstones {
        let path = dir.join(tombstones_name(meta.number));
        let t = tombstone::read(storage, &path)?;
        if t.len() as u64 != meta.count {
            return Err(Error::corrupt(&path, 0, format!("{} tombstones, the manifest says {}", t.len(), meta.count)));
        }
        tombstone_files.push((*meta, Arc::new(t)));
    }

    // Replay the live logs, oldest first, checking that sequence numbers continue.
    let mut next_seq = manifest.last_seq + 1;
    let mut append_to: Option<(u64, u64)> = None;
    let last_log = logs.last().copied();
    let memtable = Memtable::new(mem_design.clone(), last_log.unwrap_or(0));
    for &n in &logs {
        let path = dir.join(log_name(n));
        let bytes = storage.read_copy(&path).map_err(|e| Error::io(&path, "read", e))?;
        let mut ops = 0u64;
        let scan = scan_log(&path, &bytes, n, ScanMode::Strict, |r| {
            if r.last_seq() < next_seq {
                return Ok(());
            }
            if r.seq != next_seq {
                return Err(Error::corrupt(&path, r.offset, format!("record starts at sequence number {}, expected {next_seq}: records are missing", r.seq)));
            }
            let pairs: Vec<(u64, u64)> = r.ops().collect();
            match r.kind {
                OpKind::Insert => memtable.insert(r.seq, &pairs),
                OpKind::Delete => memtable.delete(r.seq, &pairs),
            }
            ops += pairs.len() as u64;
            next_seq = r.last_seq() + 1;
            Ok(())
        })?;
        report.replayed_ops += ops;
        report.logs.push(LogReport { name: log_name(n), len: bytes.len() as u64, valid_len: scan.valid_len, end: scan.end, ops });
        if !read_only {
            // A log whose header never got written whole holds nothing: start it afresh.
            if scan.valid_len < LOG_HEADER_BYTES as u64 {
                storage.remove(&path).map_err(|e| Error::io(&path, "remove", e))?;
                continue;
            }
            if scan.end != LogEnd::Clean {
                storage.truncate(&path, scan.valid_len).map_err(|e| Error::io(&path, "truncate", e))?;
            }
        }
        if Some(n) == last_log {
            append_to = Some((n, scan.valid_len));
        }
    }

    let mut writer = Writer { log: None, next_seq, failed: None, pending_ops: 0, first_pending: None, synced_seq: next_seq - 1, sync_generation: 0, sync_requested: false };
    let mut memtable = memtable;
    if !read_only {
        let log = match append_to {
            Some((n, len)) => {
                let mut log = LogWriter::reopen(storage, &dir.join(log_name(n)), n, len)?;
                // What was replayed may not have been synced before the crash; it is acked.
                log.sync_all()?;
                log
            }
            None => {
                let n = next_file;
                next_file += 1;
                memtable.log_number = n;
                LogWriter::create(storage, &dir.join(log_name(n)), n)?
            }
        };
        writer.log = Some(log);
    }
    let version = Version { active: Arc::new(memtable), frozen: Vec::new(), segments, tombstones: Arc::new(TombstoneSet::new(tombstone_files)) };
    Ok(Loaded { manifest, version, writer, next_file, report, mem_design })
}

impl Shared {
    fn current(&self) -> Arc<Version> {
        self.current.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replaces the current version with an edited copy.
    fn edit_version(&self, edit: impl FnOnce(&mut Version)) {
        let mut cur = self.current.write().unwrap_or_else(|p| p.into_inner());
        let mut next = (**cur).clone();
        edit(&mut next);
        *cur = Arc::new(next);
    }

    fn check_writable(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly { dir: self.dir.clone() });
        }
        Ok(())
    }

    fn check_k(&self, options: &QueryOptions) -> Result<()> {
        if options.k > self.k && !options.full_scan {
            return Err(Error::KTooLarge { requested: options.k, design_k: self.k });
        }
        Ok(())
    }

    fn alloc_number(&self) -> u64 {
        self.next_file.fetch_add(1, Ordering::SeqCst)
    }

    fn write(&self, kind: OpKind, ops: &[(u64, u64)]) -> Result<u64> {
        self.check_writable()?;
        let mut w = lock(&self.writer);
        if ops.is_empty() {
            return Ok(w.next_seq - 1);
        }
        let (seq, due) = self.append(&mut w, kind, ops)?;
        let w = if due { self.commit_group(w)? } else { w };
        self.after_write(w);
        Ok(seq + ops.len() as u64 - 1)
    }

    /// Logs the operations (synced before this returns under [`Durability::Sync`]), then
    /// applies them to the active memtable. Returns the first sequence number, and whether a
    /// group commit's sync is due ([`Shared::commit_group`]).
    fn append(&self, w: &mut Writer, kind: OpKind, ops: &[(u64, u64)]) -> Result<(u64, bool)> {
        if let Some(detail) = &w.failed {
            return Err(Error::WriterFailed { dir: self.dir.clone(), detail: detail.clone() });
        }
        let seq = w.next_seq;
        let log = w.log.as_mut().expect("a writable index has a log");
        if let Err(e) = log.append(seq, kind, ops) {
            w.failed = Some(e.to_string());
            return Err(e);
        }
        w.next_seq += ops.len() as u64;
        w.pending_ops += ops.len() as u64;
        let first = *w.first_pending.get_or_insert_with(Instant::now);
        let group_due = match self.options.durability {
            Durability::Sync => {
                self.sync_locked(w)?;
                false
            }
            Durability::Group { max_delay, max_ops } => w.pending_ops >= max_ops || first.elapsed() >= max_delay,
            Durability::NoSync => false,
        };
        let v = self.current();
        match kind {
            OpKind::Insert => v.active.insert(seq, ops),
            OpKind::Delete => v.active.delete(seq, ops),
        }
        Ok((seq, group_due))
    }

    /// Group commit, after a write that found a sync due: asks the sync thread for it (once
    /// per sync) and returns at once; syncs here, without holding the lock during the
    /// fsync, when there is no sync thread or when the writes have run `max_ops` further
    /// ahead of a sync still in flight (so the unsynced tail stays bounded).
    fn commit_group<'a>(&'a self, mut w: MutexGuard<'a, Writer>) -> Result<MutexGuard<'a, Writer>> {
        let Durability::Group { max_ops, .. } = self.options.durability else { return Ok(w) };
        if !self.options.background || w.pending_ops >= max_ops.saturating_mul(2) {
            return self.sync_unlocked(w);
        }
        if !w.sync_requested {
            w.sync_requested = true;
            lock(&self.background).sync = true;
            self.sync_wake.notify_one();
        }
        Ok(w)
    }

    /// Syncs the log without holding the writer's lock during the fsync (writes go on
    /// meanwhile, and are not covered by it): what to sync is taken under the lock, the
    /// fsync runs unlocked, the result is recorded under the lock again, which is returned.
    fn sync_unlocked<'a>(&'a self, mut w: MutexGuard<'a, Writer>) -> Result<MutexGuard<'a, Writer>> {
        if let Some(detail) = &w.failed {
            return Err(Error::WriterFailed { dir: self.dir.clone(), detail: detail.clone() });
        }
        w.sync_requested = false;
        let Some(log) = w.log.as_mut() else { return Ok(w) };
        let pending = match log.pending_sync() {
            Ok(Some(p)) => p,
            Ok(None) => {
                // everything written is synced (earlier logs were synced when they rotated)
                (w.synced_seq, w.pending_ops, w.first_pending) = (w.next_seq - 1, 0, None);
                return Ok(w);
            }
            Err(e) => {
                w.failed = Some(e.to_string());
                return Err(e);
            }
        };
        let (seq, ops, generation, started) = (w.next_seq - 1, w.pending_ops, w.sync_generation, Instant::now());
        drop(w);
        let result = pending.run();
        let mut w = lock(&self.writer);
        if let Err(e) = result {
            w.failed = Some(e.to_string());
            return Err(e);
        }
        if let Some(log) = w.log.as_mut() {
            log.synced(&pending);
        }
        w.synced_seq = w.synced_seq.max(seq);
        if w.sync_generation == generation {
            // only appends ran meanwhile: what is unsynced now is exactly what they wrote,
            // all of it after `started`
            w.pending_ops -= ops;
            w.first_pending = (w.pending_ops > 0).then_some(started);
        }
        w.sync_generation += 1;
        Ok(w)
    }

    fn sync_locked(&self, w: &mut Writer) -> Result<()> {
        if let Some(detail) = &w.failed {
            return Err(Error::WriterFailed { dir: self.dir.clone(), detail: detail.clone() });
        }
        let Some(log) = w.log.as_mut() else { return Ok(()) };
        if let Err(e) = log.sync() {
            w.failed = Some(e.to_string());
            return Err(e);
        }
        w.synced_seq = w.next_seq - 1;
        w.pending_ops = 0;
        w.first_pending = None;
        w.sync_generation += 1;
        w.sync_requested = false;
        Ok(())
    }

    /// After a write: freeze a full memtable and get it flushed (by the background thread,
    /// or here). Maintenance errors are recorded, not returned: the write itself is done.
    fn after_write(&self, mut w: MutexGuard<'_, Writer>) {
        if self.current().active.ops() < self.options.memtable_ops {
            return;
        }
        if let Err(e) = self.freeze(&mut w) {
            self.record_error(&e);
            return;
        }
        drop(w);
        if self.options.background {
            self.wake_background();
            let v = self.current();
            let behind = self.options.compaction.automatic && compaction::over_budget(&v.segment_metas(), self.options.memtable_ops, self.options.compaction.fanout);
            if v.frozen.len() <= self.options.max_frozen && !behind {
                return;
            }
            if behind {
                // A write stall: flushes outran the background merges (twice the segments
                // the policy keeps), so this writer merges until the policy is met.
                if let Err(e) = self.compact_tiered() {
                    self.record_error(&e);
                }
            }
        }
        let result = self.flush_frozen().and_then(|()| if self.options.compaction.automatic && !self.options.background { self.compact_tiered() } else { Ok(()) });
        if let Err(e) = result {
            self.record_error(&e);
        }
    }

    fn wake_background(&self) {
        lock(&self.background).wake = true;
        self.wake.notify_all();
    }

    fn record_error(&self, e: &Error) {
        lock(&self.background).error = Some(e.to_string());
    }

    /// Moves the active memtable to the frozen list and starts a new log for the next one.
    /// The old log is synced first, so a power loss cannot leave a gap between the logs.
    fn freeze(&self, w: &mut Writer) -> Result<()> {
        if self.current().active.ops() == 0 {
            return Ok(());
        }
        self.sync_locked(w)?;
        let number = self.alloc_number();
        let log = match LogWriter::create(&*self.storage, &self.dir.join(log_name(number)), number) {
            Ok(log) => log,
            Err(e) => {
                w.failed = Some(e.to_string());
                return Err(e);
            }
        };
        w.log = Some(log);
        let design = self.mem_design.clone();
        self.edit_version(|v| {
            let old = std::mem::replace(&mut v.active, Arc::new(Memtable::new(design, number)));
            v.frozen.push(old);
        });
        Ok(())
    }

    /// Flushes every frozen memtable, oldest first.
    fn flush_frozen(&self) -> Result<()> {
        let mut manifest = lock(&self.manifest);
        loop {
            let v = self.current();
            let Some(mem) = v.frozen.first().cloned() else { return Ok(()) };
            let (min_seq, max_seq) = mem.seq_range().expect("a frozen memtable holds operations");
            let mut m = manifest.clone();
            let mut new_segment = None;
            // Usually the memtable's runs already are the segment's sorted tables.
            let (inserts, _) = mem.counts();
            let sorted = (planned_design(&PlanOptions::new(inserts, self.k))? == *mem.design()).then(|| mem.sorted_tables()).flatten();
            let (entries, tombs, written) = match sorted {
                Some(run) => {
                    let number = self.alloc_number();
                    let path = self.dir.join(segment_name(number));
                    let file_len = write_run(&*self.storage, &path, mem.design(), self.codec, &run)?;
                    (run.entries.len() as u64, Vec::new(), Some((number, path, file_len)))
                }
                None => {
                    let (live, tombs) = mem.flush_output();
                    if live.is_empty() {
                        (0, tombs, None)
                    } else {
                        let number = self.alloc_number();
                        let path = self.dir.join(segment_name(number));
                        let (fps, ids): (Vec<u64>, Vec<u64>) = live.iter().copied().unzip();
                        let design = planned_design(&PlanOptions::new(fps.len() as u64, self.k))?;
                        let options = BuildOptions { design: Some(design), k: self.k, codec: self.codec };
                        let file_len = build_segment(&*self.storage, &path, &fps, Some(&ids), &options)?;
                        (fps.len() as u64, tombs, Some((number, path, file_len)))
                    }
                }
            };
            if let Some((number, path, file_len)) = written {
                let segment = Segment::open_with(&*self.storage, &path)?;
                let meta = SegmentMeta { number, entries, file_len, min_seq, max_seq };
                m.segments.push(meta);
                new_segment = Some(Arc::new(LiveSegment { meta, segment }));
            }
            let mut new_tombstones = None;
            if !tombs.is_empty() {
                let number = self.alloc_number();
                let path = self.dir.join(tombstones_name(number));
                let file_len = tombstone::write(&*self.storage, &path, &tombs)?;
                let meta = TombstoneMeta { number, count: tombs.len() as u64, max_seq: tombs.iter().map(|t| t.seq).max().unwrap_or(0), file_len };
                m.tombstones.push(meta);
                new_tombstones = Some((meta, Arc::new(tombs)));
            }
            m.number += 1;
            m.last_seq = max_seq;
            m.log_number = mem.log_number + 1;
            m.next_file = self.next_file.load(Ordering::SeqCst);
            m.store(&*self.storage, &self.dir)?;
            *manifest = m;
            self.edit_version(|v| {
                v.frozen.retain(|f| !Arc::ptr_eq(f, &mem));
                v.segments.extend(new_segment);
                if let Some(t) = new_tombstones {
                    let mut files = v.tombstones.files.clone();
                    files.push(t);
                    v.tombstones = Arc::new(TombstoneSet::new(files));
                }
            });
            self.flushes.fetch_add(1, Ordering::Relaxed);
            self.remove_files(|kind| matches!(kind, FileKind::Log(n) if n < manifest.log_number));
        }
    }

    /// Deletes the files `obsolete` picks (best effort: a file left behind is an orphan the
    /// next open removes).
    fn remove_files(&self, obsolete: impl Fn(FileKind) -> bool) {
        if let Ok(names) = self.storage.list(&self.dir) {
            for name in names.iter().filter(|n| obsolete(files::parse(n))) {
                let _ = self.storage.remove(&self.dir.join(name));
            }
        }
    }

    /// Runs the tiered policy until it picks nothing.
    fn compact_tiered(&self) -> Result<()> {
        let _guard = lock(&self.compacting);
        loop {
            let v = self.current();
            let metas = v.segment_metas();
            let Some(range) = compaction::pick(&metas, self.options.memtable_ops, self.options.compaction.fanout) else { return Ok(()) };
            self.compact_range(&v, range)?;
        }
    }

    /// Merges every segment into one, when that changes anything.
    fn compact_all(&self) -> Result<()> {
        self.check_writable()?;
        let _guard = lock(&self.compacting);
        let v = self.current();
        let n = v.segments.len();
        let worth = n >= 2 || (n == 1 && v.tombstones.hides_any_below(v.segments[0].meta.max_seq));
        if worth {
            self.compact_range(&v, 0..n)
        } else {
            self.install(&[], None)
        }
    }

    fn compact_range(&self, v: &Version, range: std::ops::Range<usize>) -> Result<()> {
        let inputs: Vec<Arc<LiveSegment>> = v.segments[range].to_vec();
        let number = self.alloc_number();
        let path = self.dir.join(segment_name(number));
        let merged = compaction::merge(&*self.storage, &inputs, &v.tombstones, &path, self.k, self.codec, self.options.compaction.buffer_entries)?;
        let output = match merged {
            Some(m) => {
                self.dropped_deleted.fetch_add(m.deleted, Ordering::Relaxed);
                self.dropped_repeats.fetch_add(m.repeated, Ordering::Relaxed);
                self.spilled_runs.fetch_add(m.spilled_runs as u64, Ordering::Relaxed);
                let segment = Segment::open_with(&*self.storage, &path)?;
                let meta = SegmentMeta { number, entries: m.entries, file_len: m.file_len, min_seq: inputs[0].meta.min_seq, max_seq: inputs[inputs.len() - 1].meta.max_seq };
                Some(Arc::new(LiveSegment { meta, segment }))
            }
            None => None,
        };
        let numbers: Vec<u64> = inputs.iter().map(|s| s.meta.number).collect();
        self.install(&numbers, output)?;
        self.compactions.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Installs a compaction: the segments `inputs` (adjacent) give way to `output`, and
    /// tombstone files every remaining segment is newer than are dropped. The new manifest
    /// is durable before any file is deleted.
    fn install(&self, inputs: &[u64], output: Option<Arc<LiveSegment>>) -> Result<()> {
        let mut manifest = lock(&self.manifest);
        let mut m = manifest.clone();
        if let Some(first) = inputs.first() {
            let at = m.segments.iter().position(|s| s.number == *first).expect("compaction inputs are live: only compaction removes segments");
            let removed: Vec<u64> = m.segments.splice(at..at + inputs.len(), output.iter().map(|s| s.meta)).map(|s| s.number).collect();
            assert_eq!(removed, inputs, "compaction inputs are adjacent and still live");
        }
        let floor = m.segments.iter().map(|s| s.max_seq).min();
        let dropped: Vec<u64> = m.tombstones.iter().filter(|t| floor.is_none_or(|f| t.max_seq <= f)).map(|t| t.number).collect();
        if inputs.is_empty() && dropped.is_empty() {
            return Ok(());
        }
        m.tombstones.retain(|t| !dropped.contains(&t.number));
        m.number += 1;
        m.next_file = self.next_file.load(Ordering::SeqCst);
        m.store(&*self.storage, &self.dir)?;
        *manifest = m;
        self.edit_version(|v| {
            if let Some(first) = inputs.first() {
                let at = v.segments.iter().position(|s| s.meta.number == *first).expect("installed above");
                v.segments.splice(at..at + inputs.len(), output);
            }
            if !dropped.is_empty() {
                let files = v.tombstones.files.iter().filter(|(t, _)| !dropped.contains(&t.number)).cloned().collect();
                v.tombstones = Arc::new(TombstoneSet::new(files));
            }
        });
        drop(manifest);
        self.remove_files(|kind| match kind {
            FileKind::Segment(n) => inputs.contains(&n),
            FileKind::Tombstones(n) => dropped.contains(&n),
            _ => false,
        });
        Ok(())
    }

    /// Group commit's sync thread: syncs when a writer asks (a sync is due by `max_ops`
    /// or `max_delay`) or when the oldest unsynced write is `max_delay` old.
    fn sync_loop(&self, max_delay: Duration, max_ops: u64) {
        loop {
            let timeout = lock(&self.writer).first_pending.map_or(max_delay, |t| max_delay.saturating_sub(t.elapsed()));
            {
                let mut bg = lock(&self.background);
                if !bg.stop && !bg.sync && !timeout.is_zero() {
                    bg = self.sync_wake.wait_timeout(bg, timeout).unwrap_or_else(|p| p.into_inner()).0;
                }
                if bg.stop {
                    return;
                }
                bg.sync = false;
            }
            let w = lock(&self.writer);
            let due = w.pending_ops >= max_ops || w.first_pending.is_some_and(|t| t.elapsed() >= max_delay);
            if due && w.failed.is_none() {
                if let Err(e) = self.sync_unlocked(w) {
                    self.record_error(&e);
                }
            }
        }
    }

    fn maintenance_loop(&self) {
        loop {
            {
                let mut bg = lock(&self.background);
                if !bg.stop && !bg.wake {
                    bg = self.wake.wait_timeout(bg, Duration::from_secs(1)).unwrap_or_else(|p| p.into_inner()).0;
                }
                if bg.stop {
                    return;
                }
                bg.wake = false;
            }
            let result = self.flush_frozen().and_then(|()| if self.options.compaction.automatic { self.compact_tiered() } else { Ok(()) });
            if let Err(e) = result {
                self.record_error(&e);
            }
        }
    }

    fn stats(&self) -> Stats {
        let v = self.current();
        let (last_seq, synced_seq, log) = {
            let w = lock(&self.writer);
            (w.next_seq - 1, w.synced_seq, w.log.as_ref().map(|l| (l.number(), l.len())))
        };
        let flushed_seq = lock(&self.manifest).last_seq;
        let mut logs = Vec::new();
        if let Ok(names) = self.storage.list(&self.dir) {
            for name in names {
                if let FileKind::Log(n) = files::parse(&name) {
                    let len = match log {
                        Some((number, len)) if number == n => len,
                        _ => self.storage.read_copy(&self.dir.join(&name)).map(|b| b.len() as u64).unwrap_or(0),
                    };
                    logs.push((name, len));
                }
            }
        }
        let (memtable_inserts, memtable_deletes) = v.active.counts();
        Stats {
            dir: self.dir.clone(),
            read_only: self.read_only,
            k: self.k,
            codec: self.codec,
            segments: v
                .segments
                .iter()
                .map(|s| SegmentStats {
                    name: segment_name(s.meta.number),
                    entries: s.meta.entries,
                    file_len: s.meta.file_len,
                    min_seq: s.meta.min_seq,
                    max_seq: s.meta.max_seq,
                    tables: s.segment.design().tables().len(),
                    design: s.segment.design().summary(),
                })
                .collect(),
            tombstone_files: v.tombstones.files.len(),
            tombstones: v.tombstones.len(),
            memtable_inserts,
            memtable_deletes,
            frozen_memtables: v.frozen.len(),
            frozen_ops: v.frozen.iter().map(|m| m.ops()).sum(),
            logs,
            last_seq,
            synced_seq,
            flushed_seq,
            flushes: self.flushes.load(Ordering::Relaxed),
            compactions: self.compactions.load(Ordering::Relaxed),
            compaction_dropped_deleted: self.dropped_deleted.load(Ordering::Relaxed),
            compaction_dropped_repeats: self.dropped_repeats.load(Ordering::Relaxed),
            compaction_spilled_runs: self.spilled_runs.load(Ordering::Relaxed),
            unknown_files: self.report.unknown.clone(),
            maintenance_error: lock(&self.background).error.clone(),
        }
    }
}
