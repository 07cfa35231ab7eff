//! What a caller chooses and gets back at the index's surface: [`IndexOptions`] (how to
//! open), [`Durability`] (when a write is synced), [`FindOrInsert`] (what a check-then-add
//! did) and the crate's [`OpenMode`]. Plain data: the behaviour they select lives in `open`,
//! `commit`, `flush` and `maintenance`.

use std::sync::Arc;
use std::time::Duration;

use super::compaction::CompactionOptions;
use super::expiry::{Clock, Expiry, SystemClock};
use crate::codec::Codec;
use crate::query::Match;
use crate::segment::SketchColumn;
use crate::storage::{FsStorage, Storage};

/// When a write is made durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// fsync the log before every write returns: a returned write survives a power loss.
    /// Concurrent writers share fsyncs: a write is logged and applied under
    /// the writer's lock, then waits, without the lock, for an fsync that started after it
    /// was logged; one fsync returns every write logged before it started. A write is
    /// visible to queries once logged, before its fsync returns.
    Sync,
    /// Group commit: every write reaches the operating system before it returns (so it
    /// survives a crash of the process), and the log is fsynced once `max_delay` has passed
    /// since the oldest unsynced write or `max_ops` operations are unsynced, whichever comes
    /// first (the fsync starts then; with `background`, a sync thread runs it while the
    /// writer goes on). [`Index::sync`](super::Index::sync) forces it.
    Group {
        /// Longest time a write stays unsynced before its sync starts (checked on writes and
        /// by the sync thread, when there is one).
        max_delay: Duration,
        /// Unsynced operations that start a sync; a writer `2 * max_ops` ahead of a sync
        /// still running waits for one of its own.
        max_ops: u64,
    },
    /// Writes reach the operating system's buffers before they return and are fsynced only
    /// at log rotation, [`Index::sync`](super::Index::sync) and close: process crashes lose nothing, a power
    /// loss may lose everything since the last sync.
    NoSync,
}

impl Default for Durability {
    fn default() -> Self {
        Durability::Group { max_delay: Duration::from_millis(10), max_ops: 100_000 }
    }
}

/// What opening an index does when a log holds less than the manifest says was
/// acknowledged (a log cut short or missing), or a damaged record (RocksDB's WAL recovery
/// modes). A crash never causes either; disk damage, a bad copy or a restore can.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogRecovery {
    /// Refuse to open: the error names the log, the offset and the operations lost
    /// (`simdex recover` salvages every intact record; or open with `PointInTime`).
    #[default]
    Strict,
    /// Open with every operation up to the first loss or damage (a point in time), and
    /// report what was lost, counted from the manifest's record of each log, in
    /// [`OpenReport::lost`](super::OpenReport::lost) and
    /// [`OpenReport::lost_ops`](super::OpenReport::lost_ops). A writable open then makes
    /// the loss part of the index's history: it flushes what was replayed and skips the
    /// lost sequence numbers (no number is handed out twice), so later opens are clean.
    PointInTime,
}

/// How to open an index.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct IndexOptions {
    /// Create the index when the directory holds none.
    pub create: bool,
    /// Largest query distance the designs guarantee, for a new index (an existing index
    /// keeps the value in its manifest).
    pub k: u32,
    /// Gap codec of new segments, for a new index.
    pub codec: Codec,
    /// The per-document sketch a new index stores beside each fingerprint (its width and
    /// scheme; `None`: no sketches, and the index is the same size as without them).
    /// Fixed when the index is created: an existing index keeps the one in its manifest
    /// ([`Index::sketches`](super::Index::sketches)), as it keeps its `k`. The text
    /// pipeline's own sketch is `simdex_fingerprint::sketch::SketchOptions::default().column()`,
    /// which its document calls make and confirm by. See [`Index::insert_sketched`](super::Index::insert_sketched) and [`Index::query_confirmed`](super::Index::query_confirmed).
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
    /// replays at most about `(max_frozen + 2) * memtable_ops` operations (after a crash, or
    /// a close right after a burst of writes, see `flush_on_close`), into memtables of this
    /// size, each flushed on its own.
    pub memtable_ops: u64,
    /// Frozen memtables allowed to wait for the background flush; beyond this the writer
    /// flushes itself. While the maintenance thread runs a merge of at least `max_frozen +
    /// 1` memtables' entries (it flushes only between merges), none wait: the writer
    /// flushes what is frozen at each freeze, so a long merge runs beside one frozen
    /// memtable, not `max_frozen + 1`. `None` (the default): 2, or 1 in an index with
    /// sketches, whose memtables weigh about four times as much (about 224 bytes an insert
    /// with 64-byte sketches against 48), so that at most three of them exist at once.
    pub max_frozen: Option<usize>,
    /// Compaction policy and memory.
    pub compaction: CompactionOptions,
    /// Flush the memtables into segments on [`Index::close`](super::Index::close) when they
    /// hold at most `memtable_ops` operations in all (always, without a background thread),
    /// so the next open (read-write or read-only) replays no log. More than that (a close
    /// right after a burst of writes) stays in the logs, so a close stays short; the next
    /// open replays it and flushes it. On by default; off, close only syncs the log and the
    /// next open replays it (at most about `(max_frozen + 2) * memtable_ops` operations),
    /// which saves a small segment per short-lived writer at the cost of every later open.
    pub flush_on_close: bool,
    /// Flush, compact and sync in a background thread; without it, the writer does them
    /// inline (deterministic, for tests and one-shot tools).
    pub background: bool,
    /// What to do with a log that holds less than was acknowledged (default: refuse).
    pub log_recovery: LogRecovery,
    /// Where the files live.
    pub storage: Arc<dyn Storage>,
    /// The expiry window of a new index (`None`: nothing expires), pinned in its manifest:
    /// a pair stored longer ago than the window plus its granularity never matches, and
    /// compaction drops it (see [`Expiry`]). An existing index keeps its own window: `None`
    /// opens it with whatever it has, another window is refused.
    pub expiry: Option<Expiry>,
    /// The wall clock the expiry window reads ([`SystemClock`] by default; tests inject
    /// their own).
    pub clock: Arc<dyn Clock>,
    /// Create the index in a directory that already holds other files (not an index's).
    /// Off by default: such a directory is refused ([`crate::Error::NotAnIndex`]), so a
    /// mistyped path never turns a directory of other files into an index.
    pub create_in_nonempty: bool,
}

__with_fields!(IndexOptions { create: bool => with_create, k: u32 => with_k, codec: Codec => with_codec, sketches: Option<SketchColumn> => with_sketches, durability: Durability => with_durability, memtable_ops: u64 => with_memtable_ops, max_frozen: Option<usize> => with_max_frozen, compaction: CompactionOptions => with_compaction, flush_on_close: bool => with_flush_on_close, background: bool => with_background, log_recovery: LogRecovery => with_log_recovery, storage: Arc<dyn Storage> => with_storage, expiry: Option<Expiry> => with_expiry, clock: Arc<dyn Clock> => with_clock, create_in_nonempty: bool => with_create_in_nonempty });

impl Default for IndexOptions {
    fn default() -> Self {
        Self {
            create: true,
            k: 3,
            codec: Codec::Xor,
            sketches: None,
            durability: Durability::default(),
            memtable_ops: 1 << 20,
            max_frozen: None,
            compaction: CompactionOptions::default(),
            flush_on_close: true,
            background: true,
            log_recovery: LogRecovery::Strict,
            storage: Arc::new(FsStorage),
            expiry: None,
            clock: Arc::new(SystemClock),
            create_in_nonempty: false,
        }
    }
}

/// What [`Index::find_or_insert`](super::Index::find_or_insert) did.
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

/// What a check-then-replace of a document by its id did
/// ([`Index::find_or_replace`](super::Index::find_or_replace) and
/// [`Index::find_or_replace_confirmed`](super::Index::find_or_replace_confirmed)): the
/// crawler's question for a page it fetched under a URL, answered once by the library.
///
/// The rule, for a document `d` with fingerprint `f`: its near-duplicates are found as the
/// query's options say. When one of them is stored under `d` itself, the page is
/// [`Unchanged`](Self::Unchanged) (a revisit: what `d` holds is a near copy of it); else
/// when there are others, it is [`Found`](Self::Found) (a near-duplicate of other
/// documents). Neither writes anything. Otherwise `(f, d)` is stored: [`Inserted`](Self::Inserted)
/// when `d` held nothing, else [`Replaced`](Self::Replaced): every other pair `d` held is
/// deleted and `(f, d)` inserted in one log record, so `d` keeps one entry and a crash
/// keeps the old version or the new one, never both or neither.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum FindOrReplace {
    /// The document's own stored version is among its near-duplicates (listed, with any
    /// others): nothing was written.
    Unchanged(Vec<Match>),
    /// Near-duplicates stored under other ids: nothing was written (the id keeps what it
    /// held).
    Found(Vec<Match>),
    /// Nothing was stored under the id and no near-duplicate: the pair was inserted.
    Inserted {
        /// The insert's sequence number.
        seq: u64,
    },
    /// The id held other fingerprints, none a near copy: they were replaced by the pair,
    /// in one log record.
    Replaced {
        /// The sequence number of the new pair's insert (the record's last).
        seq: u64,
        /// The fingerprints the id held before, sorted (the new one among them when only
        /// its sketch changed).
        previous: Vec<u64>,
    },
}

impl FindOrReplace {
    /// True when the call stored the document (inserted or replaced).
    pub fn stored(&self) -> bool {
        matches!(self, FindOrReplace::Inserted { .. } | FindOrReplace::Replaced { .. })
    }

    /// The near-duplicates found (empty when the document was stored).
    pub fn matches(&self) -> &[Match] {
        match self {
            FindOrReplace::Unchanged(m) | FindOrReplace::Found(m) => m,
            FindOrReplace::Inserted { .. } | FindOrReplace::Replaced { .. } => &[],
        }
    }

    /// The outcome's name, as every front spells it: `unchanged`, `found`, `inserted`,
    /// `replaced`.
    pub fn name(&self) -> &'static str {
        match self {
            FindOrReplace::Unchanged(_) => "unchanged",
            FindOrReplace::Found(_) => "found",
            FindOrReplace::Inserted { .. } => "inserted",
            FindOrReplace::Replaced { .. } => "replaced",
        }
    }
}

/// What [`Index::replace`](super::Index::replace) did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Replaced {
    /// The sequence number of the new pair's insert.
    pub seq: u64,
    /// The fingerprints the id held before, sorted (empty: the id was new).
    pub previous: Vec<u64>,
}

/// Whether an open may change the directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OpenMode {
    /// Takes the lock, recovers (cuts torn log tails, removes orphans) and writes.
    ReadWrite,
    /// Takes no lock and changes no file.
    ReadOnly,
}
