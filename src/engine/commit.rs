//! The write path and the durability of writes: one sequence (`write_locked`) that every
//! write and every check-then-add (`find_or_write`) runs under the writer's lock, appending
//! operations to the log, group commit (the sync thread of [`Durability::Group`]), the
//! shared fsync of [`Durability::Sync`] (concurrent writers wait on it without holding the
//! writer's lock), and the undoing of an append the disk refused (contract in
//! `format-spec/log.md`). What a write does to the
//! memtable after it is logged is here too; what happens when the memtable fills is
//! `maintenance`'s and `flush`'s.

use crate::query::Entry;
use std::sync::MutexGuard;
use std::time::{Duration, Instant};

use super::log::{LogWriter, OpKind, SketchSlice};
use super::state::{lock, Engine};
use super::version::Version;
use super::writer::WriterState;
use super::{Durability, FindOrInsert, FindOrReplace};
use crate::error::{Error, Result};
use crate::query::Match;

impl Engine {
    /// Logs and applies `ops` (with one sketch each in `sketches`, inserts only); returns
    /// the last sequence number.
    pub(super) fn write(&self, kind: OpKind, ops: &[Entry], sketches: Option<&[u8]>) -> Result<u64> {
        self.check_writable()?;
        self.check_sketches(kind, ops.len(), sketches)?;
        let w = lock(&self.writer);
        self.write_locked(w, kind, ops, sketches)
    }

    /// Inserts `records` as one log record; a record without a document id gets its own
    /// sequence number as its id, assigned under the writer's lock (so no other write can
    /// take it). Returns the last sequence number.
    pub(super) fn write_numbered(&self, records: &[(u64, Option<u64>)]) -> Result<u64> {
        self.check_writable()?;
        let w = lock(&self.writer);
        let first = w.next_seq;
        let ops: Vec<Entry> = (first..).zip(records).map(|(seq, &(fp, id))| Entry::new(fp, id.unwrap_or(seq))).collect();
        self.write_locked(w, OpKind::Insert, &ops, None)
    }

    /// The check-then-add: `find` looks at the current version, then, when it found
    /// nothing, `ops` are written as [`Self::write`] writes them; what it found is returned
    /// instead, and nothing is written. Both happen under one hold of the writer's lock, so
    /// no other write comes between them.
    pub(super) fn find_or_write(&self, kind: OpKind, ops: &[Entry], sketches: Option<&[u8]>, find: impl FnOnce(&Version) -> Result<Vec<Match>>) -> Result<FindOrInsert> {
        self.check_writable()?;
        self.check_sketches(kind, ops.len(), sketches)?;
        let w = lock(&self.writer);
        let found = find(&self.visible())?;
        if !found.is_empty() {
            return Ok(FindOrInsert::Found(found));
        }
        self.write_locked(w, kind, ops, sketches).map(|seq| FindOrInsert::Inserted { seq })
    }

    /// The check-then-replace of document `doc_id`: under one hold of the writer's lock,
    /// reads what the id holds and what `find` finds in the current version, then decides
    /// (`FindOrReplace`): a match stored under the id is `Unchanged`, other matches are
    /// `Found` (both write nothing); else `(fingerprint, doc_id)` (with `sketch`) is
    /// written, as an insert when the id held nothing and else as one replace record that
    /// also deletes every other pair the id held. `find` returning nothing makes it an
    /// unconditional replace.
    pub(super) fn find_or_replace(&self, entry: Entry, sketch: Option<&[u8]>, find: impl FnOnce(&Version) -> Result<Vec<Match>>) -> Result<FindOrReplace> {
        self.check_writable()?;
        self.check_sketches(OpKind::Insert, 1, sketch)?;
        let w = lock(&self.writer);
        let version = self.visible();
        let mut damaged = Vec::new();
        let previous = super::id_tables::stored_under(&version, entry.doc_id, &mut damaged)?;
        self.heal_id_tables(damaged)?;
        let found = find(&version)?;
        if found.iter().any(|m| m.doc_id == Some(entry.doc_id)) {
            return Ok(FindOrReplace::Unchanged(found));
        }
        if !found.is_empty() {
            return Ok(FindOrReplace::Found(found));
        }
        if previous.is_empty() {
            return self.write_locked(w, OpKind::Insert, &[entry], sketch).map(|seq| FindOrReplace::Inserted { seq });
        }
        // the new pair's own fingerprint is not deleted: its new copy supersedes the old
        let mut ops: Vec<Entry> = previous.iter().filter(|&&fp| fp != entry.fingerprint).map(|&fp| Entry::new(fp, entry.doc_id)).collect();
        ops.push(entry);
        let sketches = sketch.map(|s| {
            let mut all = vec![0u8; (ops.len() - 1) * s.len()];
            all.extend_from_slice(s);
            all
        });
        let seq = self.write_locked(w, OpKind::Replace, &ops, sketches.as_deref())?;
        Ok(FindOrReplace::Replaced { seq, previous })
    }

    /// The write path, under the writer's lock `w`: logs and applies `ops`, starts the
    /// group commit's sync when one is due, and hands a full memtable to the flush (which
    /// releases the lock). Returns the last sequence number.
    fn write_locked(&self, mut w: MutexGuard<'_, WriterState>, kind: OpKind, ops: &[Entry], sketches: Option<&[u8]>) -> Result<u64> {
        if ops.is_empty() {
            return Ok(w.next_seq - 1);
        }
        let (seq, due) = self.append(&mut w, kind, ops, sketches)?;
        let w = if due { self.commit_group(w)? } else { w };
        self.after_write(w);
        let last = seq + ops.len() as u64 - 1;
        if self.options.durability == Durability::Sync {
            self.sync_through(last)?;
        }
        Ok(last)
    }

    /// Returns once every write up to sequence number `seq` is fsynced, sharing one fsync
    /// among every caller waiting ([`Durability::Sync`]'s shared fsync): a caller that finds
    /// no sync running starts one for everything logged so far and runs it without the
    /// writer's lock (`sync_unlocked`), so writers go on appending meanwhile; callers that
    /// find one running wait for it, then either find their write covered or start the next.
    pub(super) fn sync_through(&self, seq: u64) -> Result<()> {
        let mut w = lock(&self.writer);
        loop {
            if w.synced_seq >= seq {
                return Ok(());
            }
            if let Some(first) = &w.failed {
                return Err(Error::WriterFailed { dir: self.dir.clone(), source: Box::new(first.clone()) });
            }
            if !w.syncing {
                break;
            }
            w = self.synced.wait(w).unwrap_or_else(|p| p.into_inner());
        }
        w.syncing = true;
        let result = self.sync_unlocked(w);
        // this sync started after the write `seq` was logged: it covers it
        let mut w = match result {
            Ok(w) => w,
            Err(e) => {
                lock(&self.writer).syncing = false;
                self.synced.notify_all();
                return Err(e);
            }
        };
        w.syncing = false;
        drop(w);
        self.synced.notify_all();
        Ok(())
    }

    /// Logs the operations, then applies them to the active memtable (under
    /// [`Durability::Sync`] the caller then waits for them to be synced: `sync_through`).
    /// Returns the first sequence number, and whether a group commit's sync is due
    /// ([`Engine::commit_group`]). An append the disk refused part-way (a full disk) is cut
    /// back off the log: the write did nothing, and the writer goes on (later writes
    /// succeed once there is room); only when that cut fails too is the writer failed.
    fn append(&self, w: &mut WriterState, kind: OpKind, ops: &[Entry], sketches: Option<&[u8]>) -> Result<(u64, bool)> {
        if let Some(first) = &w.failed {
            return Err(Error::WriterFailed { dir: self.dir.clone(), source: Box::new(first.clone()) });
        }
        if kind.inserts() {
            self.roll_epoch(w)?;
        }
        let seq = w.next_seq;
        let log = w.log.as_mut().expect("a writable index has a log");
        let slice = sketches.map(|bytes| SketchSlice { width: self.sketch_width(), bytes });
        let before = log.len();
        if let Err(e) = log.append(seq, kind, ops, slice) {
            // cut what reached the file off again (truncate syncs it), and go on appending
            // at the cut through a new handle (the old one's offset is past it)
            let (path, number) = (log.path().to_path_buf(), log.number());
            let undone =
                self.storage.truncate(&path, before).map_err(|io| Error::io(&path, "truncate", io)).and_then(|()| LogWriter::reopen(&*self.storage, &path, number, before));
            match undone {
                Ok(log) => w.log = Some(log),
                Err(_) => w.failed = Some(e.clone()),
            }
            return Err(e);
        }
        w.next_seq += ops.len() as u64;
        w.pending_ops += ops.len() as u64;
        let first = *w.first_pending.get_or_insert_with(Instant::now);
        let group_due = match self.options.durability {
            Durability::Group { max_delay, max_ops } => w.pending_ops >= max_ops || first.elapsed() >= max_delay,
            Durability::Sync | Durability::NoSync => false,
        };
        let v = self.current();
        match (kind, ops.split_last()) {
            (OpKind::Insert, _) => v.active.insert(seq, ops, sketches),
            (OpKind::Delete, _) => v.active.delete(seq, ops),
            (OpKind::Replace, Some((insert, deletes))) => {
                let width = self.sketch_width();
                v.active.replace(seq, deletes, *insert, sketches.and_then(|s| s.get(deletes.len() * width..)))
            }
            (OpKind::Replace, None) => {}
        }
        Ok((seq, group_due))
    }

    /// Sketches go with inserts into an index that stores them, one of its width per
    /// operation.
    fn check_sketches(&self, kind: OpKind, ops: usize, sketches: Option<&[u8]>) -> Result<()> {
        let Some(bytes) = sketches else { return Ok(()) };
        let width = self.sketch_width();
        if width == 0 {
            return Err(Error::InvalidArgument(format!("{}: the index stores no sketches (it was created without `IndexOptions::sketches`)", self.dir.display())));
        }
        if !kind.inserts() {
            return Err(Error::InvalidArgument("only inserts carry sketches".into()));
        }
        if bytes.len() != ops * width {
            return Err(Error::InvalidArgument(format!("{} bytes of sketches for {ops} operations: the index's sketches are {width} bytes each", bytes.len())));
        }
        Ok(())
    }

    /// Group commit, after a write that found a sync due: asks the sync thread for it (once
    /// per sync) and returns at once; syncs here, without holding the lock during the
    /// fsync, when there is no sync thread or when the writes have run `max_ops` further
    /// ahead of a sync still in flight (so the unsynced tail stays bounded).
    fn commit_group<'a>(&'a self, mut w: MutexGuard<'a, WriterState>) -> Result<MutexGuard<'a, WriterState>> {
        let Durability::Group { max_ops, .. } = self.options.durability else { return Ok(w) };
        if !self.options.background || w.pending_ops >= max_ops.saturating_mul(2) {
            return self.sync_unlocked(w);
        }
        if !w.sync_requested {
            w.sync_requested = true;
            lock(&self.signals).sync = true;
            self.sync_wake.notify_one();
        }
        Ok(w)
    }

    /// Syncs the log without holding the writer's lock during the fsync (writes go on
    /// meanwhile, and are not covered by it): what to sync is taken under the lock, the
    /// fsync runs unlocked, the result is recorded under the lock again, which is returned.
    pub(super) fn sync_unlocked<'a>(&'a self, mut w: MutexGuard<'a, WriterState>) -> Result<MutexGuard<'a, WriterState>> {
        if let Some(first) = &w.failed {
            return Err(Error::WriterFailed { dir: self.dir.clone(), source: Box::new(first.clone()) });
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
                w.failed = Some(e.clone());
                return Err(e);
            }
        };
        let (seq, ops, generation, started) = (w.next_seq - 1, w.pending_ops, w.sync_generation, Instant::now());
        drop(w);
        let result = pending.run();
        self.log_syncs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut w = lock(&self.writer);
        if let Err(e) = result {
            w.failed = Some(e.clone());
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

    pub(super) fn sync_locked(&self, w: &mut WriterState) -> Result<()> {
        if let Some(first) = &w.failed {
            return Err(Error::WriterFailed { dir: self.dir.clone(), source: Box::new(first.clone()) });
        }
        let Some(log) = w.log.as_mut() else { return Ok(()) };
        if log.has_unsynced() {
            self.log_syncs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        if let Err(e) = log.sync() {
            w.failed = Some(e.clone());
            return Err(e);
        }
        w.synced_seq = w.next_seq - 1;
        w.pending_ops = 0;
        w.first_pending = None;
        w.sync_generation += 1;
        w.sync_requested = false;
        Ok(())
    }

    /// Group commit's sync thread: syncs when a writer asks (a sync is due by `max_ops`
    /// or `max_delay`) or when the oldest unsynced write is `max_delay` old.
    pub(super) fn sync_loop(&self, max_delay: Duration, max_ops: u64) {
        loop {
            let timeout = lock(&self.writer).first_pending.map_or(max_delay, |t| max_delay.saturating_sub(t.elapsed()));
            {
                let mut bg = lock(&self.signals);
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
}
