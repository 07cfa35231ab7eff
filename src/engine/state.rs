//! The state an open index shares between its handle ([`super::Index`]) and its
//! background threads: the current version, the writer, the durable manifest, counters and
//! the signals that wake the threads. The engine's work lives in `commit` (the write path),
//! `flush` and `maintenance`; this module holds the state and its small accessors.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};

use super::expiry::Expiry;
use super::manifest::{LogMeta, Manifest};
use super::report::OpenReport;
use super::version::Version;
use super::writer::WriterState;
use super::IndexOptions;
use crate::codec::Codec;
use crate::error::{Error, Result};
use crate::plan::Design;
use crate::query::QueryOptions;
use crate::segment::SketchColumn;
use crate::storage::{LockGuard, Storage};

/// What wakes the background threads, behind one mutex.
#[derive(Default)]
pub(super) struct MaintenanceSignals {
    /// The index is closing: threads return.
    pub(super) stop: bool,
    /// A flush or compaction may be due (the maintenance thread's wake-up).
    pub(super) wake: bool,
    /// Group commit: a sync is due (the sync thread's wake-up).
    pub(super) sync: bool,
    /// The last error of a background flush, compaction or sync, for [`super::Stats`].
    pub(super) last_error: Option<String>,
    /// A background failure no caller has been told of yet.
    pub(super) unreported: Option<Error>,
    /// The last flush failed (a full disk): frozen memtables wait, and the writer retries
    /// their flush before it starts another log (`flush`), so repeated failures do not
    /// pile up logs.
    pub(super) flush_failing: bool,
    /// After a failed flush: the active memtable's size at which a write retries it.
    pub(super) retry_at_ops: u64,
}

/// The engine behind an [`super::Index`] handle.
pub(super) struct Engine {
    pub(super) dir: PathBuf,
    pub(super) storage: Arc<dyn Storage>,
    pub(super) options: IndexOptions,
    pub(super) read_only: bool,
    pub(super) k: u32,
    pub(super) codec: Codec,
    /// The sketch every document carries (from the manifest), `None` when none is stored.
    pub(super) sketches: Option<SketchColumn>,
    /// The expiry window (from the manifest), `None` when nothing expires.
    pub(super) expiry: Option<Expiry>,
    pub(super) mem_design: Arc<Design>,
    pub(super) writer: Mutex<WriterState>,
    pub(super) current: RwLock<Arc<Version>>,
    /// The durable manifest; held while a flush or compaction installs a new one.
    pub(super) manifest: Mutex<Manifest>,
    /// Seals of logs a rotation synced whole, for the next manifest (`seal`).
    pub(super) seals: Mutex<Vec<LogMeta>>,
    pub(super) compacting: Mutex<()>,
    /// Input entries of the merge [`Engine::compact_range`] is running (0: none), read by a
    /// write that freezes a memtable (`maintenance`: a long merge keeps the maintenance
    /// thread from flushing).
    pub(super) merging_entries: AtomicU64,
    /// Set when the index starts to close: background merges and band file builds stop at
    /// their next look at the clock (`maintenance`).
    pub(super) closing: AtomicBool,
    pub(super) next_file: AtomicU64,
    pub(super) signals: Mutex<MaintenanceSignals>,
    pub(super) wake: Condvar,
    /// Wakes the group-commit sync thread.
    pub(super) sync_wake: Condvar,
    /// Wakes the writers waiting for the shared sync of [`super::Durability::Sync`].
    pub(super) synced: Condvar,
    /// fsyncs of the log since open.
    pub(super) log_syncs: AtomicU64,
    pub(super) flushes: AtomicU64,
    pub(super) compactions: AtomicU64,
    pub(super) dropped_deleted: AtomicU64,
    pub(super) dropped_repeats: AtomicU64,
    pub(super) spilled_runs: AtomicU64,
    pub(super) resumed_merges: AtomicU64,
    /// Segments dropped whole since open because their time slice expired.
    pub(super) expired_segments: AtomicU64,
    /// Band lookups since open that failed (a page failing its checksum) and were answered
    /// from the segment's tables instead (`banded`).
    pub(super) band_fallbacks: AtomicU64,
    /// Band files built again since open (missing, or set aside after a failed lookup).
    pub(super) bands_rebuilt: AtomicU64,
    /// Id tables built again since open after a lookup found a page damaged.
    pub(super) rebuilt_id_tables: AtomicU64,
    pub(super) report: OpenReport,
    pub(super) _lock: Option<LockGuard>,
}

/// Locks `m`, ignoring poisoning (a panicked holder leaves consistent state: every
/// protected structure is replaced whole, never edited in place half-way).
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Engine {
    pub(super) fn current(&self) -> Arc<Version> {
        self.current.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The current version as queries see it: without what expired (an index with an
    /// expiry window, at the clock's time now).
    pub(super) fn visible(&self) -> Arc<Version> {
        match &self.expiry {
            Some(x) => self.current().live_at(x, self.options.clock.now_secs()),
            None => self.current(),
        }
    }

    /// Replaces the current version with an edited copy.
    pub(super) fn edit_version(&self, edit: impl FnOnce(&mut Version)) {
        let mut cur = self.current.write().unwrap_or_else(|p| p.into_inner());
        let mut next = (**cur).clone();
        edit(&mut next);
        *cur = Arc::new(next);
    }

    /// What every writing call checks first: the index is writable, and no background
    /// failure is waiting to be reported ([`Self::report_maintenance_failure`]).
    pub(super) fn check_writable(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly { dir: self.dir.clone() });
        }
        self.report_maintenance_failure()
    }

    pub(super) fn check_k(&self, options: &QueryOptions) -> Result<()> {
        options.check_against(self.k)
    }

    /// Fails with [`Error::Maintenance`] when background work failed since the last call
    /// that reported such a failure (each failure is reported once).
    pub(super) fn report_maintenance_failure(&self) -> Result<()> {
        match lock(&self.signals).unreported.take() {
            Some(e) => Err(Error::Maintenance { dir: self.dir.clone(), source: Box::new(e) }),
            None => Ok(()),
        }
    }

    /// What the segments this engine writes are made with.
    pub(super) fn output_format(&self) -> super::compaction::OutputFormat {
        super::compaction::OutputFormat { k: self.k, codec: self.codec, sketches: self.sketches }
    }

    /// Bytes of sketch per document (0 when the index stores none).
    pub(super) fn sketch_width(&self) -> usize {
        self.sketches.map_or(0, |s| usize::from(s.bytes))
    }

    /// True once the index is closing: background work stops at its next check.
    pub(super) fn stopping(&self) -> bool {
        self.closing.load(Ordering::Relaxed)
    }

    /// A new file number (segments, tombstone files and logs share one sequence).
    pub(super) fn alloc_number(&self) -> u64 {
        self.next_file.fetch_add(1, Ordering::SeqCst)
    }
}
