//! Flushing: freezing a full memtable (the log rotates), writing it as a segment and a
//! tombstone file, and installing the result (and compactions' results) in a new manifest
//! before obsolete files are deleted. While flushes fail (a full disk), the writer retries
//! them before it rotates again, so failures do not pile up logs.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::expiry;
use super::files::{self, log_name, segment_name, tombstones_name, FileKind};
use super::log::LogWriter;
use super::manifest::{SegmentMeta, TombstoneMeta};
use super::memtable::{Memtable, Run};
use super::state::{lock, Engine};
use super::tombstone;
use super::version::{LiveSegment, TombstoneSet};
use super::writer::WriterState;
use crate::codec::{Codec, SymbolHistogram};
use crate::error::Result;
use crate::plan::{planned_design, Design, PlanOptions};
use crate::segment::{IdColumn, Segment, SegmentWriter, SketchColumn};
use crate::storage::Storage;

/// A rotation of the log ([`Engine::freeze`]), kept so that it can be undone.
struct Rotation {
    /// The writer's log before the rotation (synced).
    previous_log: Option<LogWriter>,
    /// The memtable the rotation froze.
    frozen: Arc<Memtable>,
    /// The new log's number.
    log_number: u64,
}

/// Writes a memtable run (no deletes, no repeated pairs) as a segment with `design`, the
/// run's own: its arrays are the sorted tables, so nothing is sorted again. With
/// `sketches`, the memtable's sketches of the run's entries go in the sketch column.
fn write_sorted_run(storage: &dyn Storage, path: &Path, design: &Design, codec: Codec, run: &Run, sketches: Option<(SketchColumn, &Memtable)>) -> Result<u64> {
    let codecs = vec![codec; design.tables().len()];
    let mut writer = SegmentWriter::create_with(storage, path, design, &codecs, IdColumn::Present, sketches.map(|s| s.0))?;
    let mut first = SymbolHistogram::new();
    for e in &run.entries {
        first.push(codec, e.fp);
    }
    writer.write_table(&first.code(), run.entries.iter().map(|e| e.fp))?;
    for values in &run.tables {
        writer.write_table(&SymbolHistogram::of_sorted(codec, values).code(), values.iter().copied())?;
    }
    writer.write_ids(run.entries.iter().map(|e| e.id))?;
    if let Some((_, mem)) = sketches {
        // the memtable's width is the column's (`Engine::sketch_width`)
        mem.with_sketches_of(&run.entries, |sketches| writer.write_sketches(sketches))?;
    }
    writer.finish()
}

impl Engine {
    /// Moves the active memtable to the frozen list and starts a new log for the next one.
    /// The old log is synced first, so a power loss cannot leave a gap between the logs.
    ///
    /// While flushes fail (a full disk: [`Self::flush_failing`]) it first retries the
    /// flush of what is frozen, and flushes the memtable it freezes at once, holding the
    /// writer's lock; when that fails too, the rotation is undone (the memtable becomes the
    /// active one again and the new, empty log is removed). So repeated failures leave no
    /// new logs behind: the writer keeps appending to the log it has.
    pub(super) fn freeze(&self, w: &mut WriterState) -> Result<()> {
        if self.current().active.ops() == 0 {
            return Ok(());
        }
        if !self.flush_failing() {
            return self.rotate(w).map(drop);
        }
        let result = self.flush_frozen().and_then(|()| {
            let rotation = self.rotate(w)?;
            self.flush_frozen().inspect_err(|_| self.undo_rotation(w, rotation))
        });
        if result.is_err() {
            lock(&self.signals).retry_at_ops = self.current().active.ops().saturating_add(self.options.memtable_ops);
        }
        result
    }

    /// Operations the memtables hold, the active one and the frozen ones.
    pub(super) fn unflushed_ops(&self) -> u64 {
        let v = self.current();
        v.frozen.iter().chain([&v.active]).map(|m| m.ops()).sum()
    }

    /// True while flushes fail: the last flush failed, or this process has flushed nothing
    /// yet and its open replayed more than one log (a flush that never completed before).
    pub(super) fn flush_failing(&self) -> bool {
        lock(&self.signals).flush_failing || (self.flushes.load(Ordering::Relaxed) == 0 && self.report.logs.len() > 1)
    }

    /// Operations the active memtable holds before a write freezes it: the configured size,
    /// and after a failed flush one more memtable's worth (a full disk is not retried on
    /// every write).
    pub(super) fn freeze_threshold(&self) -> u64 {
        self.options.memtable_ops.max(lock(&self.signals).retry_at_ops)
    }

    /// Before an insert into an index with an expiry window: when the clock has reached a
    /// later time slice than the active memtable's, the memtable is frozen (or, empty,
    /// replaced) and a log of the new slice started, so every memtable, and every segment a
    /// flush writes, holds the inserts of one slice (`expiry`).
    pub(super) fn roll_epoch(&self, w: &mut WriterState) -> Result<()> {
        let Some(x) = &self.expiry else { return Ok(()) };
        let active = self.current().active.clone();
        if active.epoch.is_some_and(|e| x.epoch_of(self.options.clock.now_secs()) <= e) {
            return Ok(());
        }
        if active.ops() == 0 {
            return self.rotate(w).map(drop);
        }
        self.freeze(w)?;
        if self.options.background {
            self.wake_background();
        } else if let Err(e) = self.flush_frozen() {
            // the insert goes on; the next call reports the failure
            self.record_error(&e);
        }
        Ok(())
    }

    /// The rotation itself: sync the log, start the next, freeze the active memtable.
    fn rotate(&self, w: &mut WriterState) -> Result<Rotation> {
        self.sync_locked(w)?;
        // Synced whole: the next manifest records how long it is (`seal`).
        if let Some(seal) = self.seal_of_writer(w) {
            self.keep_seal(seal);
        }
        let number = self.alloc_number();
        let active_epoch = self.current().active.epoch;
        let epoch = match &self.expiry {
            Some(x) => Some(expiry::stamp(x, self.options.clock.now_secs(), active_epoch)?),
            None => None,
        };
        let log = match LogWriter::create(&*self.storage, &self.dir.join(log_name(number)), number, epoch) {
            Ok(log) => log,
            Err(e) => {
                w.failed = Some(e.clone());
                return Err(e);
            }
        };
        let previous_log = w.log.replace(log);
        let design = self.mem_design.clone();
        let frozen = self.current().active.clone();
        let expected = self.freeze_threshold();
        self.edit_version(|v| {
            let old = std::mem::replace(&mut v.active, Arc::new(Memtable::new(design, number, self.sketch_width()).with_epoch(epoch).expecting(expected)));
            // An empty memtable is rotated only to start a later time slice: nothing to flush.
            if old.ops() > 0 {
                v.frozen.push(old);
            }
        });
        Ok(Rotation { previous_log, frozen, log_number: number })
    }

    /// Undoes a rotation whose memtable could not be flushed, while the writer's lock has
    /// been held since (nothing was appended to the new log): the memtable is active again,
    /// its log is the writer's again, and the new log is removed.
    fn undo_rotation(&self, w: &mut WriterState, rotation: Rotation) {
        let mut undone = false;
        self.edit_version(|v| {
            if v.active.ops() == 0 && v.frozen.last().is_some_and(|f| Arc::ptr_eq(f, &rotation.frozen)) {
                v.frozen.pop();
                v.active = rotation.frozen.clone();
                undone = true;
            }
        });
        if undone {
            w.log = rotation.previous_log;
            // Best effort: a log left behind holds only its header, and replays as nothing.
            let _ = self.storage.remove(&self.dir.join(log_name(rotation.log_number)));
        }
    }

    /// Flushes every frozen memtable, oldest first, and records whether that worked
    /// ([`Self::flush_failing`]).
    pub(super) fn flush_frozen(&self) -> Result<()> {
        self.flush_frozen_while(|| true)
    }

    /// The maintenance thread's [`Self::flush_frozen`]: a close stops it between two
    /// memtables (`Error::stopped`); what is left stays in its logs for the next open
    /// (`Index::close`).
    pub(super) fn flush_frozen_until_closing(&self) -> Result<()> {
        self.flush_frozen_while(|| !self.closing.load(Ordering::Relaxed))
    }

    fn flush_frozen_while(&self, go_on: impl Fn() -> bool) -> Result<()> {
        let result = self.flush_frozen_inner(go_on);
        let mut signals = lock(&self.signals);
        signals.flush_failing = result.as_ref().is_err_and(|e| !e.is_stopped());
        if result.is_ok() {
            signals.retry_at_ops = 0;
        }
        result
    }

    fn flush_frozen_inner(&self, go_on: impl Fn() -> bool) -> Result<()> {
        let mut manifest = lock(&self.manifest);
        loop {
            let v = self.current();
            let Some(mem) = v.frozen.first().cloned() else { return Ok(()) };
            if !go_on() {
                return Err(crate::error::Error::stopped(&self.dir));
            }
            let (min_seq, max_seq) = mem.seq_range().expect("a frozen memtable holds operations");
            let mut m = manifest.clone();
            let mut new_segment = None;
            // Usually the memtable's runs already are the segment's sorted tables.
            let (inserts, _) = mem.counts();
            let sorted = (planned_design(&PlanOptions::for_segment(inserts, self.k, self.sketches.is_some()))? == *mem.design()).then(|| mem.sorted_tables()).flatten();
            let sketches = self.sketches.map(|s| (s, &*mem));
            let (entries, tombs, written) = match sorted {
                Some(run) => {
                    let number = self.alloc_number();
                    let path = self.dir.join(segment_name(number));
                    let file_len = write_sorted_run(&*self.storage, &path, mem.design(), self.codec, &run, sketches)?;
                    (run.entries.len() as u64, Vec::new(), Some((number, path, file_len)))
                }
                None => {
                    let (live, tombs) = mem.flush_output();
                    if live.is_empty() {
                        (0, tombs, None)
                    } else {
                        let number = self.alloc_number();
                        let path = self.dir.join(segment_name(number));
                        let design = planned_design(&PlanOptions::for_segment(live.len() as u64, self.k, self.sketches.is_some()))?;
                        let run = Run::build(live, &design);
                        let file_len = write_sorted_run(&*self.storage, &path, &design, self.codec, &run, sketches)?;
                        (run.entries.len() as u64, tombs, Some((number, path, file_len)))
                    }
                }
            };
            if let Some((number, path, file_len)) = written {
                let segment = Segment::open_with(&*self.storage, &path)?;
                let meta = SegmentMeta { number, entries, file_len, min_seq, max_seq, epoch: mem.epoch.unwrap_or(0) };
                m.segments.push(meta);
                new_segment = Some(Arc::new(super::id_tables::attach_new(&*self.storage, &self.dir, meta, segment)?));
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
            // The logs before the next memtable's are obsolete: a piece of a log (`replay`)
            // leaves its log live for the pieces after it, which the replay skips to by
            // `last_seq`; in between, only logs of no operation (a rotation to an empty
            // memtable, for a later time slice).
            let next_log = v.frozen.get(1).map_or(v.active.log_number, |f| f.log_number);
            m.log_number = m.log_number.max(next_log);
            m.logs = self.seals_for(&m);
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
    pub(super) fn remove_files(&self, obsolete: impl Fn(FileKind) -> bool) {
        if let Ok(names) = self.storage.list(&self.dir) {
            for name in names.iter().filter(|n| obsolete(files::parse(n))) {
                let _ = self.storage.remove(&self.dir.join(name));
            }
        }
    }

    /// Installs a compaction: the segments `inputs` (adjacent) give way to `output`, and
    /// tombstone files every remaining segment is newer than are dropped, as are the files
    /// `applied` (a merge of every live segment has applied every tombstone file there was:
    /// each pair older than a delete is in some segment, since a flush installs its segment
    /// and its tombstone file together). The new manifest is durable before any file is
    /// deleted.
    pub(super) fn install(&self, inputs: &[u64], output: Option<Arc<LiveSegment>>, applied: &[u64]) -> Result<()> {
        let mut manifest = lock(&self.manifest);
        let mut m = manifest.clone();
        if let Some(first) = inputs.first() {
            let at = m.segments.iter().position(|s| s.number == *first).expect("compaction inputs are live: only compaction removes segments");
            let removed: Vec<u64> = m.segments.splice(at..at + inputs.len(), output.iter().map(|s| s.meta)).map(|s| s.number).collect();
            assert_eq!(removed, inputs, "compaction inputs are adjacent and still live");
        }
        let floor = m.segments.iter().map(|s| s.max_seq).min();
        let dropped: Vec<u64> = m.tombstones.iter().filter(|t| floor.is_none_or(|f| t.max_seq <= f) || applied.contains(&t.number)).map(|t| t.number).collect();
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
            FileKind::Segment(n) | FileKind::Bands(n) | FileKind::Ids(n) => inputs.contains(&n),
            FileKind::Tombstones(n) => dropped.contains(&n),
            FileKind::Manifest | FileKind::Lock | FileKind::Recipe | FileKind::Log(_) | FileKind::Temporary | FileKind::Merge | FileKind::Unknown => false,
        });
        Ok(())
    }
}
