//! The handle: [`Index`] and its public calls (writes, queries, sketch-confirmed queries,
//! sync, flush, compaction, snapshots, stats, close). Each call checks its arguments and
//! hands the work to the engine (`state` and the files that extend it) or to the current
//! version; this file holds no engine logic. Opening is `open`'s ([`Index::open`]); the
//! `RECIPE` file is `pinned_recipe`'s (the document calls are the `simdex-fingerprint`
//! crate's).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::confirmed;
use super::log::OpKind;
use super::report::OpenReport;
use super::snapshot;
use super::state::{lock, Engine};
use super::stats::Stats;
use super::{FindOrInsert, FindOrReplace, Replaced};
use crate::confirm::ConfirmOptions;
use crate::error::{Error, Result};
use crate::query::{Entry, Match, QueryOptions};
use crate::segment::SketchColumn;

/// An open index. Queries may run from many threads while one thread writes.
pub struct Index {
    pub(super) engine: Arc<Engine>,
    /// The maintenance thread and, under group commit, the sync thread.
    pub(super) threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Index {
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
        self.engine.write(OpKind::Insert, &[Entry::new(fingerprint, doc_id)], None)
    }

    /// Adds every `(fingerprint, doc_id)` as one log record, as [`Self::insert_many`] does,
    /// where a record without an id is stored under its own sequence number (the `n`-th
    /// record gets `last - records.len() + 1 + n`): ids that no other write can take,
    /// assigned atomically. Returns the last sequence number.
    pub fn insert_many_numbered(&self, records: &[(u64, Option<u64>)]) -> Result<u64> {
        self.engine.write_numbered(records)
    }

    /// Adds every entry as one log record (one sync); returns the last sequence number.
    pub fn insert_many(&self, entries: &[Entry]) -> Result<u64> {
        self.engine.write(OpKind::Insert, entries, None)
    }

    /// Adds `(fingerprint, doc_id)` with the document's sketch (exactly the index's sketch
    /// width, [`Self::sketches`]); the sketch is logged with the pair, kept through flushes
    /// and compactions, and dropped with the pair by a delete. Fails with
    /// [`crate::Error::InvalidArgument`] when the index stores no sketches or the width is wrong.
    /// An all-zero sketch is stored as "no sketch".
    pub fn insert_sketched(&self, fingerprint: u64, doc_id: u64, sketch: &[u8]) -> Result<u64> {
        self.engine.write(OpKind::Insert, &[Entry::new(fingerprint, doc_id)], Some(sketch))
    }

    /// [`Self::insert_many`] with one sketch per entry, concatenated in `sketches` (each
    /// exactly the index's sketch width, as [`Self::insert_sketched`]).
    pub fn insert_many_sketched(&self, entries: &[Entry], sketches: &[u8]) -> Result<u64> {
        self.engine.write(OpKind::Insert, entries, Some(sketches))
    }

    /// The sketch every document of this index may carry (width and scheme), `None` when
    /// the index stores no sketches.
    pub fn sketches(&self) -> Option<SketchColumn> {
        self.engine.sketches
    }

    /// Deletes `(fingerprint, doc_id)`: queries stop returning it, compaction drops it.
    pub fn delete(&self, fingerprint: u64, doc_id: u64) -> Result<u64> {
        self.engine.write(OpKind::Delete, &[Entry::new(fingerprint, doc_id)], None)
    }

    /// Deletes every entry as one log record.
    pub fn delete_many(&self, entries: &[Entry]) -> Result<u64> {
        self.engine.write(OpKind::Delete, entries, None)
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
        self.engine.visible().query_into(fingerprint, options, out)
    }

    /// The crawler's check-then-add: when no live pair is within `options.k` of
    /// `fingerprint`, inserts `(fingerprint, doc_id)`. Atomic with respect to other writers
    /// of the index.
    pub fn find_or_insert(&self, fingerprint: u64, doc_id: u64, options: &QueryOptions) -> Result<FindOrInsert> {
        self.engine.find_or_write(OpKind::Insert, &[Entry::new(fingerprint, doc_id)], None, |version| {
            self.engine.check_k(options)?;
            let mut found = Vec::new();
            version.query_into(fingerprint, options, &mut found)?;
            Ok(found)
        })
    }

    /// The fingerprints stored under document id `doc_id`: of every live pair `(fp, doc_id)`,
    /// sorted, each once (empty when the id holds nothing). Sees every write that returned
    /// before the call. Each segment answers from its id table (a few page reads), the
    /// memtables from memory.
    pub fn fingerprints_of(&self, doc_id: u64) -> Result<Vec<u64>> {
        let mut damaged = Vec::new();
        let found = super::id_tables::stored_under(&self.engine.visible(), doc_id, &mut damaged)?;
        if !damaged.is_empty() && !self.engine.read_only {
            let _w = lock(&self.engine.writer);
            self.engine.heal_id_tables(damaged)?;
        }
        Ok(found)
    }

    /// Stores `(fingerprint, doc_id)` as what document `doc_id` holds: every other pair
    /// stored under `doc_id` is deleted and the pair inserted, as one log record, so a crash
    /// keeps the old version or the new one, never both or neither, and the id keeps one
    /// entry. [`Replaced::previous`] lists what it held. The check-then-replace a crawler
    /// wants is [`Self::find_or_replace`].
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let index = simdex::Index::open(dir.path(), simdex::IndexOptions::default())?;
    /// index.insert(0x1111, 7)?;
    /// assert_eq!(index.replace(0x2222, 7)?.previous, vec![0x1111]);
    /// assert_eq!(index.fingerprints_of(7)?, vec![0x2222]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn replace(&self, fingerprint: u64, doc_id: u64) -> Result<Replaced> {
        self.replace_with(fingerprint, doc_id, None)
    }

    /// [`Self::replace`] with the document's sketch (exactly the index's width, as
    /// [`Self::insert_sketched`]).
    pub fn replace_sketched(&self, fingerprint: u64, doc_id: u64, sketch: &[u8]) -> Result<Replaced> {
        self.replace_with(fingerprint, doc_id, Some(sketch))
    }

    fn replace_with(&self, fingerprint: u64, doc_id: u64, sketch: Option<&[u8]>) -> Result<Replaced> {
        match self.engine.find_or_replace(Entry::new(fingerprint, doc_id), sketch, |_| Ok(Vec::new()))? {
            FindOrReplace::Inserted { seq } => Ok(Replaced { seq, previous: Vec::new() }),
            FindOrReplace::Replaced { seq, previous } => Ok(Replaced { seq, previous }),
            FindOrReplace::Unchanged(_) | FindOrReplace::Found(_) => unreachable!("an unconditional replace finds nothing"),
        }
    }

    /// The crawler's check for a document fetched under `doc_id` (its URL's id), by the rule
    /// of [`FindOrReplace`]: its near-duplicates within `options.k`; one stored under
    /// `doc_id` itself makes it `Unchanged`, others `Found`; with none, `(fingerprint,
    /// doc_id)` is inserted, or replaces in one log record what `doc_id` held (a changed
    /// page). Atomic with respect to other writers of the index.
    ///
    /// ```
    /// use simdex::{FindOrReplace, QueryOptions};
    /// # let dir = tempfile::tempdir()?;
    /// # let index = simdex::Index::open(dir.path(), simdex::IndexOptions::default())?;
    /// let within3 = QueryOptions::within(3);
    /// assert!(matches!(index.find_or_replace(0xffff_0000, 7, &within3)?, FindOrReplace::Inserted { .. }));
    /// // fetched again, a bit changed: a revisit
    /// assert!(matches!(index.find_or_replace(0xffff_0001, 7, &within3)?, FindOrReplace::Unchanged(_)));
    /// // rewritten: the new version replaces the old one
    /// assert!(matches!(index.find_or_replace(0x0000_ffff, 7, &within3)?, FindOrReplace::Replaced { .. }));
    /// assert_eq!(index.fingerprints_of(7)?, vec![0x0000_ffff]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn find_or_replace(&self, fingerprint: u64, doc_id: u64, options: &QueryOptions) -> Result<FindOrReplace> {
        self.engine.check_k(options)?;
        self.engine.find_or_replace(Entry::new(fingerprint, doc_id), None, |version| {
            let mut found = Vec::new();
            version.query_into(fingerprint, options, &mut found)?;
            Ok(found)
        })
    }

    /// [`Self::find_or_replace`] judged as [`Self::find_or_insert_confirmed`] judges: the
    /// near-duplicates are the confirmed ones, and the pair is stored with `sketch`.
    pub fn find_or_replace_confirmed(&self, fingerprint: u64, doc_id: u64, sketch: &[u8], options: &ConfirmOptions) -> Result<FindOrReplace> {
        self.engine.find_or_replace(Entry::new(fingerprint, doc_id), Some(sketch), |version| confirmed::confirmed(&self.engine, version, fingerprint, sketch, options))
    }

    /// Every live pair within `options.k` of `fingerprint` (as [`Index::query`]), each with
    /// the sketch stored with it (`None`: stored without one, or the index stores none).
    pub fn query_sketched(&self, fingerprint: u64, options: &QueryOptions) -> Result<Vec<(Match, Option<Vec<u8>>)>> {
        self.engine.check_k(options)?;
        if options.k > crate::plan::MAX_K {
            return Err(Error::InvalidArgument(format!("k = {} is above {}: sketched queries use the tables", options.k, crate::plan::MAX_K)));
        }
        confirmed::candidates(&self.engine, &self.engine.visible(), fingerprint, options.k, |_| true)
    }

    /// The confirmed near-duplicates of a document whose fingerprint is `fingerprint` and
    /// sketch `sketch` (the index's width): the live pairs within `options.k` whose stored
    /// sketch estimates a resemblance of at least `options.min_similarity`, and the pairs
    /// stored without a sketch within `options.unsketched_k`; sorted by distance,
    /// fingerprint and id. Fails with [`Error::InvalidArgument`] when the index stores no
    /// sketches (no silent fallback: [`Index::query`] is the unconfirmed call).
    ///
    /// For the default sketch at `min_similarity >= 0.9` (the crawler's check) and unless
    /// [`ConfirmOptions::exhaustive`], sketched pairs are found through the band files: a
    /// pair whose sketch shares one of the 16 bands with the query's is found whatever its
    /// distance (beyond `options.k` it is an answer at `min_similarity + band_margin`, with
    /// [`ConfirmOptions::band_candidates`]); a pair in a segment whose every entry has a
    /// sketch that shares no band is not found, even within the design's `k` (about 1.1%
    /// of the pairs at resemblance 0.90, none whose sketches differ in at most 15 of 512
    /// bits); `exhaustive` finds it. Pairs in the memtables and in segments holding pairs
    /// without a sketch (or without a band file in use) are also found through the tables
    /// within the design's `k`.
    pub fn query_confirmed(&self, fingerprint: u64, sketch: &[u8], options: &ConfirmOptions) -> Result<Vec<Match>> {
        confirmed::confirmed(&self.engine, &self.engine.visible(), fingerprint, sketch, options)
    }

    /// One version for the confirmed checks of many documents ([`crate::query_confirmed_many`]).
    pub(crate) fn confirmed_view(&self) -> confirmed::ConfirmedView<'_> {
        confirmed::ConfirmedView::new(&self.engine)
    }

    /// The crawler's check-then-add, confirmed: when no confirmed near-duplicate of the
    /// document is live, inserts `(fingerprint, doc_id)` with its sketch. `Found` lists the
    /// accepted matches, each with its similarity. Atomic with respect to other writers of the index.
    pub fn find_or_insert_confirmed(&self, fingerprint: u64, doc_id: u64, sketch: &[u8], options: &ConfirmOptions) -> Result<FindOrInsert> {
        self.engine
            .find_or_write(OpKind::Insert, &[Entry::new(fingerprint, doc_id)], Some(sketch), |version| confirmed::confirmed(&self.engine, version, fingerprint, sketch, options))
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
    /// [`CompactionOptions::max_merge_entries`](super::CompactionOptions::max_merge_entries) set, the merges are bounded: the index ends
    /// as the fewest segments whose adjacent pairs exceed the bound, each merge installed
    /// before the next starts.
    pub fn compact(&self) -> Result<()> {
        self.flush()?;
        self.engine.compact_all()
    }

    /// Runs the automatic compaction policy now, then the settling merges and the builds of
    /// missing band files (what the background thread does after flushes), in the caller's
    /// thread.
    pub fn compact_tiered(&self) -> Result<()> {
        self.engine.check_writable()?;
        self.engine.compact_tiered()
    }

    /// A consistent read-only view of everything the index holds now, for whole-index jobs
    /// (batch queries, clusters, splitting); later writes do not change it.
    pub fn snapshot(&self) -> snapshot::Snapshot {
        snapshot::Snapshot::new(self.engine.visible(), self.engine.k)
    }

    /// Every live pair, sorted, each once. Reads every segment: meant for tools and tests.
    pub fn live_entries(&self) -> Result<Vec<Entry>> {
        self.engine.visible().live_entries().map(|v| v.into_iter().map(Entry::from).collect())
    }

    /// Makes every sequence number up to `through` spent (salvage: the new index continues
    /// the old one's numbering), flushing first. Later writes are numbered after it.
    pub(crate) fn spend_sequence_numbers(&self, through: u64) -> Result<()> {
        self.engine.check_writable()?;
        self.engine.accept_log_loss(through)
    }

    /// A summary of segments, memtable, logs and tombstones.
    pub fn stats(&self) -> Stats {
        Stats::collect(&self.engine)
    }

    /// Stops the background threads, syncs the log and (with
    /// [`IndexOptions::flush_on_close`](super::IndexOptions::flush_on_close)) flushes what the
    /// memtables hold when that is at most one memtable's worth, then releases the lock.
    /// Dropping the index does the same but the flush, and cannot report errors.
    ///
    /// **A close is short whatever the index's size**: it runs no merge (it drops the
    /// segments of expired time slices, which rewrites nothing). The maintenance
    /// thread merges and settles the live set in the background while the index is open
    /// ([`CompactionOptions::settle`](super::CompactionOptions::settle)); a merge it is
    /// running when the close comes stops at its next checkpoint (within a few milliseconds:
    /// it looks every 1,024 entries, block or page), keeping what it wrote, and the next
    /// writable open goes on from there (nothing is redone from scratch, nothing
    /// acknowledged is lost). What a close waits for is the sync, a flush the maintenance
    /// thread is writing, and at most one memtable's flush: with a background thread, when
    /// the memtables hold more than
    /// [`IndexOptions::memtable_ops`](super::IndexOptions::memtable_ops) operations in all (a
    /// close right after a burst of writes), the close flushes none of them: they stay in
    /// their logs, synced and durable, and the next open replays them into memtables of
    /// `memtable_ops` operations each and its maintenance flushes them one by one, deleting
    /// each log once its writes are in segments. Without a background thread the close
    /// flushes every memtable (the writer does all the work inline in that mode). With
    /// `flush_on_close` off it flushes none: the next open replays them. So the live set a
    /// close leaves may hold its last flushes beside the rest, settled by the next open's
    /// maintenance; `benches/RESULTS.md`, "Scale IV", has the measured stops.
    pub fn close(self) -> Result<()> {
        // Decided before the maintenance thread stops (it may be flushing meanwhile).
        let flush = self.engine.options.flush_on_close && (!self.engine.options.background || self.engine.unflushed_ops() <= self.engine.options.memtable_ops);
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
            if flush {
                self.engine.freeze(&mut w)?;
            }
        }
        if flush {
            if let Err(e) = self.engine.flush_frozen() {
                // A background failure not reported yet came first: it is the one to report.
                self.engine.report_maintenance_failure()?;
                return Err(e);
            }
        }
        // Expired time slices leave the manifest whole (nothing is rewritten: cheap).
        self.engine.drop_expired()?;
        // The writes are durable; the manifest records how long the open log is, so that
        // a log found shorter later is counted as loss (`seal`).
        {
            let mut w = lock(&self.engine.writer);
            if w.failed.is_none() {
                self.engine.sync_locked(&mut w)?;
                self.engine.seal_open_log(&w)?;
            }
        }
        // A background failure not reported yet is reported now.
        self.engine.report_maintenance_failure()
    }

    fn stop_background(&self) {
        // background merges and band file builds stop at their next look at the clock
        self.engine.closing.store(true, std::sync::atomic::Ordering::Relaxed);
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
            if w.failed.is_none() && self.engine.sync_locked(&mut w).is_ok() {
                let _ = self.engine.seal_open_log(&w);
            }
        }
    }
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index").field("dir", &self.engine.dir).field("read_only", &self.engine.read_only).finish()
    }
}
