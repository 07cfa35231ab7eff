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
//! `version`), so flushes and compactions never block them. A background thread (when
//! enabled) flushes and compacts; under group commit a second one syncs the log, without
//! holding the writer's lock during the fsync, so writes go on meanwhile.
//!
//! This module owns the directory: which files are live, recovery on open, orphan removal.
//! File formats belong to `log`, `manifest`, `tombstone` and `segment`. This file holds the
//! public API ([`Index`] and its options); the work is in the submodules:
//!
//! - `open`: the lock, recovery on open (manifest, segments, tombstones, log replay,
//!   orphans), the background threads;
//! - `commit`: log appends, group commit and the sync thread;
//! - `flush`: freezing a full memtable, writing it as a segment, installing new manifests;
//! - `maintenance`: the maintenance thread, the write stall, running compactions;
//! - [`compaction`]: the tiered policy and the streaming merge;
//! - `state`: what the handle and the threads share; `version`: the live set a query reads;
//! - [`snapshot`]: a read-only view for whole-index jobs; `stats`: what the index reports;
//! - [`verify`] and [`salvage`]: checking every file, and salvaging a damaged directory;
//! - [`files`]: the directory's file names.
//! - [`pinned_recipe`]: the `RECIPE` file, the fingerprint recipe pinned in the index, kept
//!   as opaque bytes for the text pipeline (the `simdex-fingerprint` crate, which makes the
//!   document calls).
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

mod commit;
pub mod compaction;
pub mod files;
mod flush;
// public to the tests (`simdex::log` with `test-support`), whose oracles use what the engine does not
#[cfg_attr(not(feature = "test-support"), allow(dead_code))]
pub mod log;
mod maintenance;
pub(crate) mod manifest;
pub(crate) mod memtable;
mod open;
pub mod pinned_recipe;
pub mod salvage;
pub mod snapshot;
mod state;
mod stats;
pub(crate) mod tombstone;
mod verified;
pub mod verify;
mod version;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

pub use compaction::CompactionOptions;
pub use stats::{LogReport, OpenReport, SegmentStats, Stats};

use self::log::OpKind;
use crate::codec::Codec;
use crate::error::Result;
use crate::query::{Match, QueryOptions};
use crate::segment::SketchColumn;
use crate::storage::{FsStorage, Storage};
use state::{lock, Engine};

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
    /// The per-document sketch a new index stores beside each fingerprint (its width and
    /// scheme; `None`: no sketches, and the index is the same size as without the feature).
    /// Fixed when the index is created: an existing index keeps the one in its manifest
    /// ([`Index::sketches`]), as it keeps its `k`. With the `fingerprint` feature,
    /// `SketchOptions::default().column()` is the library's own sketch, which the document
    /// calls make and verify by. See [`Index::insert_sketched`] and [`Index::query_verified`].
    pub sketches: Option<SketchColumn>,
    /// When writes are synced.
    pub durability: Durability,
    /// Operations (inserts and deletes) the active memtable holds before it is frozen and
    /// flushed into a segment: the bound on the writer's memtable memory and on the log a
    /// reopen replays. Default 2^20. A memtable costs about `16 + 8 * t` bytes per insert
    /// (`t` the tables of its design: 4 up to about 1.7e7 operations, so 48 bytes, about
    /// 50 MiB at the default), plus the sketch width in an index with sketches (64 bytes:
    /// about 64 MiB more), more while its sorted runs merge or a flush writes it; an
    /// active memtable and at most `max_frozen + 1` frozen ones exist at once, and a reopen
    /// after a crash replays at most about `(max_frozen + 2) * memtable_ops` operations
    /// (none after a clean [`Index::close`], see `flush_on_close`).
    pub memtable_ops: u64,
    /// Frozen memtables allowed to wait for the background flush; beyond this the writer
    /// flushes itself. Default 2.
    pub max_frozen: usize,
    /// Compaction policy and memory.
    pub compaction: CompactionOptions,
    /// Flush the memtable into a segment on [`Index::close`], so the next open (read-write
    /// or read-only) replays no log and is cheap whatever the memtable held. On by default;
    /// off, close only syncs the log and the next open replays it (at most about
    /// `(max_frozen + 2) * memtable_ops` operations), which saves a small segment per
    /// short-lived writer at the cost of every later open.
    pub flush_on_close: bool,
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
            sketches: None,
            durability: Durability::default(),
            memtable_ops: 1 << 20,
            max_frozen: 2,
            compaction: CompactionOptions::default(),
            flush_on_close: true,
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

/// Whether an open may change the directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OpenMode {
    /// Takes the lock, recovers (cuts torn log tails, removes orphans) and writes.
    ReadWrite,
    /// Takes no lock and changes no file.
    ReadOnly,
}

/// An open index. Queries may run from many threads while one thread writes.
pub struct Index {
    engine: Arc<Engine>,
    /// The maintenance thread and, under group commit, the sync thread.
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Index {
    /// Opens the index in `dir` for reading and writing (creating it when
    /// `options.create`), after recovering from any crash: replays the logs, cuts a torn
    /// log tail, removes orphans. Fails with [`crate::Error::Locked`] while another writer has it.
    pub fn open(dir: impl AsRef<Path>, options: IndexOptions) -> Result<Index> {
        open::open(dir.as_ref(), options, OpenMode::ReadWrite)
    }

    /// Opens the index in `dir` read-only: takes no lock, changes no file, and works while a
    /// writer runs (it sees the writes made before it opened).
    pub fn open_read_only(dir: impl AsRef<Path>, options: IndexOptions) -> Result<Index> {
        open::open(dir.as_ref(), options, OpenMode::ReadOnly)
    }

    /// The index directory.
    pub fn dir(&self) -> &Path {
        &self.engine.dir
    }

    /// Largest query distance the designs guarantee.
    pub fn k(&self) -> u32 {
        self.engine.k
    }

    /// What the open found and did.
    pub fn open_report(&self) -> &OpenReport {
        &self.engine.report
    }

    /// Adds `(fingerprint, doc_id)`; returns its sequence number.
    pub fn insert(&self, fingerprint: u64, doc_id: u64) -> Result<u64> {
        self.engine.write(OpKind::Insert, &[(fingerprint, doc_id)], None)
    }

    /// Adds every pair as one log record (one sync); returns the last sequence number.
    pub fn insert_batch(&self, pairs: &[(u64, u64)]) -> Result<u64> {
        self.engine.write(OpKind::Insert, pairs, None)
    }

    /// Adds `(fingerprint, doc_id)` with the document's sketch (exactly the index's sketch
    /// width, [`Self::sketches`]); the sketch is logged with the pair, kept through flushes
    /// and compactions, and dropped with the pair by a delete. Fails with
    /// [`crate::Error::InvalidArgument`] when the index stores no sketches or the width is wrong.
    /// An all-zero sketch is stored as "no sketch".
    pub fn insert_sketched(&self, fingerprint: u64, doc_id: u64, sketch: &[u8]) -> Result<u64> {
        self.engine.write(OpKind::Insert, &[(fingerprint, doc_id)], Some(sketch))
    }

    /// [`Self::insert_batch`] with one sketch per pair, concatenated in `sketches`.
    pub fn insert_batch_sketched(&self, pairs: &[(u64, u64)], sketches: &[u8]) -> Result<u64> {
        self.engine.write(OpKind::Insert, pairs, Some(sketches))
    }

    /// The sketch every document of this index may carry (width and scheme), `None` when
    /// the index stores no sketches.
    pub fn sketches(&self) -> Option<SketchColumn> {
        self.engine.sketches
    }

    /// Deletes `(fingerprint, doc_id)`: queries stop returning it, compaction drops it.
    pub fn delete(&self, fingerprint: u64, doc_id: u64) -> Result<u64> {
        self.engine.write(OpKind::Delete, &[(fingerprint, doc_id)], None)
    }

    /// Deletes every pair as one log record.
    pub fn delete_batch(&self, pairs: &[(u64, u64)]) -> Result<u64> {
        self.engine.write(OpKind::Delete, pairs, None)
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
        self.engine.check_k(options)?;
        self.engine.current().query_into(fingerprint, options, out)
    }

    /// The crawler's check-then-add: when no live pair is within `options.k` of
    /// `fingerprint`, inserts `(fingerprint, doc_id)`. Atomic with respect to other writers
    /// of the index.
    pub fn find_or_insert(&self, fingerprint: u64, doc_id: u64, options: &QueryOptions) -> Result<FindOrInsert> {
        let s = &self.engine;
        s.check_writable()?;
        s.check_k(options)?;
        let mut w = lock(&s.writer);
        let mut found = Vec::new();
        s.current().query_into(fingerprint, options, &mut found)?;
        if !found.is_empty() {
            return Ok(FindOrInsert::Found(found));
        }
        let (seq, due) = s.append(&mut w, OpKind::Insert, &[(fingerprint, doc_id)], None)?;
        let w = if due { s.commit_group(w)? } else { w };
        s.after_write(w);
        Ok(FindOrInsert::Inserted { seq })
    }

    /// Makes every write so far durable (fsync of the log).
    pub fn sync(&self) -> Result<()> {
        self.engine.check_writable()?;
        self.engine.sync_unlocked(lock(&self.engine.writer)).map(drop)
    }

    /// Writes the memtable out as a segment (and tombstone file) and waits until it is
    /// installed.
    pub fn flush(&self) -> Result<()> {
        self.engine.check_writable()?;
        {
            let mut w = lock(&self.engine.writer);
            self.engine.freeze(&mut w)?;
        }
        self.engine.flush_frozen()?;
        if self.engine.options.background {
            self.engine.wake_background();
        }
        Ok(())
    }

    /// Flushes, then merges every segment into one (dropping deleted and repeated pairs)
    /// and drops the tombstone files that no longer hide anything. With
    /// [`CompactionOptions::max_merge_entries`] set, the merges are bounded: the index ends
    /// as the fewest segments whose adjacent pairs exceed the bound, each merge installed
    /// before the next starts.
    pub fn compact(&self) -> Result<()> {
        self.flush()?;
        self.engine.compact_all()
    }

    /// Runs the automatic compaction policy now (what the background thread does after
    /// flushes).
    pub fn compact_tiered(&self) -> Result<()> {
        self.engine.check_writable()?;
        self.engine.compact_tiered()
    }

    /// A consistent read-only view of everything the index holds now, for whole-index jobs
    /// (batch queries, clusters, splitting); later writes do not change it.
    pub fn snapshot(&self) -> snapshot::Snapshot {
        snapshot::Snapshot::new(self.engine.current(), self.engine.k)
    }

    /// Every live pair, sorted, each once. Reads every segment: meant for tools and tests.
    pub fn live_entries(&self) -> Result<Vec<(u64, u64)>> {
        self.engine.current().live_entries()
    }

    /// A summary of segments, memtable, logs and tombstones.
    pub fn stats(&self) -> Stats {
        self.engine.stats()
    }

    /// Stops the background threads, syncs the log and (with
    /// [`IndexOptions::flush_on_close`]) flushes the memtable into a segment and runs the
    /// automatic compaction policy once more, then releases the lock. Dropping the index only syncs, and cannot report errors.
    pub fn close(self) -> Result<()> {
        self.stop_background();
        if self.engine.read_only {
            return Ok(());
        }
        {
            let mut w = lock(&self.engine.writer);
            if w.failed.is_some() {
                return self.engine.report_maintenance_failure();
            }
            self.engine.sync_locked(&mut w)?;
            if self.engine.options.flush_on_close {
                self.engine.freeze(&mut w)?;
            }
        }
        if self.engine.options.flush_on_close {
            if let Err(e) = self.engine.flush_frozen() {
                // A background failure not reported yet came first: it is the one to report.
                self.engine.report_maintenance_failure()?;
                return Err(e);
            }
            // The policy once more, so that the last, partial flush joins the newest segment
            // while the index is small (the live set the next open queries: issue 13).
            if self.engine.options.compaction.automatic {
                self.engine.compact_tiered()?;
            }
        }
        // The writes are durable; a background failure not reported yet is reported now.
        self.engine.report_maintenance_failure()
    }

    fn stop_background(&self) {
        let threads = std::mem::take(&mut *lock(&self.threads));
        if !threads.is_empty() {
            lock(&self.engine.signals).stop = true;
            self.engine.wake.notify_all();
            self.engine.sync_wake.notify_all();
        }
        for t in threads {
            let _ = t.join();
        }
    }
}

impl Drop for Index {
    fn drop(&mut self) {
        self.stop_background();
        if !self.engine.read_only {
            let mut w = lock(&self.engine.writer);
            if w.failed.is_none() {
                let _ = self.engine.sync_locked(&mut w);
            }
        }
    }
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index").field("dir", &self.engine.dir).field("read_only", &self.engine.read_only).finish()
    }
}
