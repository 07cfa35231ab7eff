//! Background work and its triggers: what a write does when the memtable fills (freeze,
//! flush, the write stall when merges fall behind), the maintenance thread, and running
//! compactions (the policy and the merge itself are `compaction`'s).
//!
//! The maintenance thread flushes, merges by the automatic policy, settles the live set
//! (`CompactionOptions::settle`) and builds missing band files, all while the index is
//! open; the write path never waits for a merge it did not start. A close stops it: a merge
//! in progress stops at its next look at the clock (every 1,024 entries, block or page),
//! keeping its files and last checkpoint, and the next open's maintenance goes on with it
//! before choosing anything else (`pending_merge`).

// Indexing: indexes the live version's segment list by a merge range the policy chose from that same list.
#![allow(clippy::indexing_slicing)]
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, MutexGuard};
use std::time::Duration;

use super::compaction::checkpoint::MergeFiles;
use super::compaction::{self, Choice, Strategy};
use super::manifest::SegmentMeta;
use super::state::{lock, Engine};
use super::version::{LiveSegment, Version};
use super::writer::WriterState;
use crate::error::{Error, Result};

impl Engine {
    /// After a write: freeze a full memtable and get it flushed (by the background thread,
    /// or here). Maintenance errors are recorded, not returned: the write itself is done
    /// (the next call reports them).
    pub(super) fn after_write(&self, mut w: MutexGuard<'_, WriterState>) {
        if self.current().active.ops() < self.freeze_threshold() {
            return;
        }
        if self.options.compaction.automatic && compaction::expiry::over_budget_within_slices(&self.current().segment_metas(), self.options.memtable_ops, &self.options.compaction)
        {
            // A write stall: flushes outran the merges (twice the segments the policy
            // keeps). This writer merges until the policy is met *before* it freezes,
            // holding the writer's lock, so no segment is added while over budget: the
            // count stays bounded even when every merge is cut short by a crash. A merge the
            // maintenance thread is running meanwhile is not waited for: the thread catches
            // up when it ends (the write path never waits on settling).
            if let Err(e) = self.merge_while_chosen(Strategy::Automatic { flush_size: self.options.memtable_ops }, false) {
                self.record_error(&e);
                return;
            }
        }
        if let Err(e) = self.freeze(&mut w) {
            self.record_error(&e);
            return;
        }
        drop(w);
        if self.options.background {
            self.wake_background();
            if self.current().frozen.len() <= self.max_frozen() && !self.long_merge_running() {
                return;
            }
        }
        let result = self.flush_frozen().and_then(|()| if self.options.compaction.automatic && !self.options.background { self.compact_tiered() } else { Ok(()) });
        if let Err(e) = result {
            self.record_error(&e);
        }
    }

    /// True while a merge runs that takes at least as many entries as `max_frozen + 1`
    /// memtables hold: the maintenance thread flushes only between merges, so the writer
    /// would fill more memtables during it than may wait (and then flush them all itself).
    /// The writer flushes what is frozen at each freeze instead: the same flushes, by the
    /// same thread, holding one frozen memtable's memory at a time rather than `max_frozen
    /// + 1` (each about 224 MiB with 64-byte sketches at the default size).
    fn long_merge_running(&self) -> bool {
        let memtables = (self.max_frozen() as u64).saturating_add(1);
        let entries = self.merging_entries.load(Ordering::Relaxed);
        entries > 0 && entries >= memtables.saturating_mul(self.options.memtable_ops)
    }

    /// [`IndexOptions::max_frozen`](super::IndexOptions::max_frozen), resolved: 2 by
    /// default, 1 in an index with sketches.
    pub(super) fn max_frozen(&self) -> usize {
        self.options.max_frozen.unwrap_or(if self.sketch_width() > 0 { 1 } else { 2 })
    }

    pub(super) fn wake_background(&self) {
        lock(&self.signals).wake = true;
        self.wake.notify_all();
    }

    pub(super) fn record_error(&self, e: &Error) {
        let mut signals = lock(&self.signals);
        signals.last_error = Some(e.chain_message());
        signals.unreported = Some(e.clone());
    }

    /// What the maintenance thread does after flushes: the automatic policy (tiered, then
    /// the small tiers absorbing the newest segment: [`compaction::Strategy::Automatic`])
    /// until it picks nothing, then the settling merges ([`Self::compact_settle`]), then the
    /// band files that are missing or were set aside (`banded`). A merge the disk has no
    /// room for is put off, not failed: the writes go on (each flush needs far less), the
    /// reason is in the stats (`last_error`), and the policy tries again after the next flush.
    pub(super) fn compact_tiered(&self) -> Result<()> {
        self.drop_expired()?;
        self.merge_while_chosen(Strategy::Automatic { flush_size: self.options.memtable_ops }, true)?;
        self.compact_settle()?;
        self.heal_band_files()
    }

    /// The settling merges ([`compaction::Strategy::Settle`]), run by the maintenance thread
    /// while the index is open: the newest segments merge until the live set's modeled query
    /// cost is within `CompactionOptions::settle` percent of one segment's. In an index with
    /// an expiry window each time slice settles on its own, newest first, and never merges
    /// with another (the window drops whole slices' segments: a segment holding two slices'
    /// pairs would keep the older one's past its expiry); without a window every segment is
    /// one slice. A merge the disk has no room for is left out, as the automatic policy's are.
    pub(super) fn compact_settle(&self) -> Result<()> {
        let Some(percent) = self.options.compaction.settle else { return Ok(()) };
        self.merge_while_chosen(Strategy::Settle { k: self.k, percent }, true)
    }

    /// Merges what `strategy` chooses (within each expiry slice) until it chooses nothing,
    /// after the merge a stopped maintenance left unfinished, when there is one
    /// ([`Self::pending_merge`]). A merge the disk has no room for ends the loop, its reason
    /// kept in the stats; a close ends it with [`Error::stopped`]. Without `wait`, returns at
    /// once when another merge is running.
    fn merge_while_chosen(&self, strategy: Strategy, wait: bool) -> Result<()> {
        let _guard = if wait {
            lock(&self.compacting)
        } else {
            match self.compacting.try_lock() {
                Ok(g) => g,
                Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => return Ok(()),
            }
        };
        loop {
            if self.closing.load(Ordering::Relaxed) {
                return Err(Error::stopped(&self.dir));
            }
            let v = self.current();
            let chosen = match self.pending_merge(&v) {
                Some(range) => Choice::Merge(range),
                None => compaction::expiry::choose_within_slices(strategy, &v.segment_metas(), &self.options.compaction),
            };
            let Choice::Merge(range) = chosen else {
                return Ok(());
            };
            match self.compact_range(&v, range) {
                Err(e @ Error::NoSpace { .. }) => {
                    lock(&self.signals).last_error = Some(e.chain_message());
                    return Ok(());
                }
                other => other?,
            }
        }
    }

    /// Refuses a merge of `inputs` when the directory's file system lacks room for its
    /// output (the inputs' bytes, scaled by the output design's table count) plus its
    /// spilled sorted runs (16 bytes per entry, one table at a time) and 1 MiB.
    fn check_space_for_merge(&self, inputs: &[Arc<LiveSegment>]) -> Result<()> {
        let Some(available) = self.storage.available_space(&self.dir).map_err(|e| Error::io(&self.dir, "check free space", e))? else { return Ok(()) };
        let needed = merge_space(inputs.iter().map(|s| (s.meta.file_len, s.meta.entries, s.segment.tables().len())), self.k, self.sketches.is_some());
        // and the output's band file (`crate::bands`, version 2: 59 to 70 bytes an entry with a
        // sketch from 2^22 to 2^28 entries, `format-spec/bands.md` "Size"; 90 reserved)
        let needed = needed.saturating_add(if self.sketches.is_some() { inputs.iter().map(|s| s.meta.entries).sum::<u64>().saturating_mul(90) } else { 0 });
        if needed > available {
            return Err(Error::NoSpace { dir: self.dir.clone(), what: format!("merging {} segments", inputs.len()), needed, available });
        }
        Ok(())
    }

    /// Merges every segment into one, when that changes anything: a sequence of merges of
    /// at most [`compaction::CompactionOptions::max_merge_entries`] input entries, each
    /// installed before the next starts (one merge when unbounded), so an interrupted full
    /// compaction keeps the merges it finished.
    pub(super) fn compact_all(&self) -> Result<()> {
        self.check_writable()?;
        self.drop_expired()?;
        let _guard = lock(&self.compacting);
        // One time slice at a time (every segment is one slice when nothing expires),
        // newest first; a slice whose segments ended as one is done.
        let mut done: Vec<u64> = Vec::new();
        loop {
            let v = self.current();
            let metas = v.segment_metas();
            let runs = compaction::expiry::slice_runs(&metas);
            let Some(run) = runs.into_iter().rev().find(|r| !done.contains(&metas[r.start].epoch)) else { break };
            let slice = &metas[run.clone()];
            let single = slice.len() == 1 && v.tombstones.hides_any_below(slice[0].max_seq);
            let Choice::Merge(range) = compaction::choose(Strategy::Full { rewrite_single: single }, slice, &self.options.compaction) else {
                done.push(slice[0].epoch);
                continue;
            };
            self.compact_range(&v, run.start + range.start..run.start + range.end)?;
            if single {
                // a lone segment is rewritten once (what tombstones hide dropped)
                done.push(slice[0].epoch);
            }
        }
        // tombstone files that no longer hide anything
        self.install(&[], None, &[])
    }

    /// Drops the segments whose time slice expired (an index with an expiry window): each
    /// run of them leaves the manifest in one replacement, and their files are deleted;
    /// nothing is rewritten (`compaction::expiry`).
    pub(super) fn drop_expired(&self) -> Result<()> {
        let Some(x) = self.expiry else { return Ok(()) };
        if self.read_only {
            return Ok(());
        }
        let _guard = lock(&self.compacting);
        let now = self.options.clock.now_secs();
        let metas = self.current().segment_metas();
        for run in compaction::expiry::expired_runs(&metas, |e| x.is_live(e, now)) {
            let numbers: Vec<u64> = metas[run].iter().map(|s| s.number).collect();
            self.install(&numbers, None, &[])?;
            self.expired_segments.fetch_add(numbers.len() as u64, Ordering::Relaxed);
        }
        Ok(())
    }

    /// The live segments a stopped merge had begun (its checkpoint in the directory names
    /// them, and they are still adjacent and live): the maintenance goes on with it first.
    fn pending_merge(&self, v: &Version) -> Option<std::ops::Range<usize>> {
        let inputs = MergeFiles::in_dir(&self.dir).load(&*self.storage)?.identity.inputs;
        let first = *inputs.first()?;
        let start = v.segments.iter().position(|s| s.meta.number == first)?;
        let live: Vec<u64> = v.segments.get(start..start + inputs.len())?.iter().map(|s| s.meta.number).collect();
        (live == inputs).then_some(start..start + inputs.len())
    }

    /// Merges the segments `range` of `v` and installs the output with its band file. The
    /// output is written as `merge.out` and its band file as `merge.bands`, under the merge's
    /// checkpoint, and take their segment names only when both are whole: a close while
    /// either is built leaves the merge to go on from its checkpoint.
    pub(super) fn compact_range(&self, v: &Version, range: std::ops::Range<usize>) -> Result<()> {
        let inputs: Vec<Arc<LiveSegment>> = v.segments[range].to_vec();
        self.check_space_for_merge(&inputs)?;
        // until the output is installed (its id table and band file built)
        let _merging = Merging::set(&self.merging_entries, inputs.iter().map(|s| s.meta.entries).sum());
        let files = MergeFiles::in_dir(&self.dir);
        let options = compaction::MergeOptions {
            buffer_entries: self.options.compaction.buffer_entries,
            checkpoint_interval: self.options.compaction.checkpoint_interval,
            stop: Some(&self.closing),
        };
        let merged = compaction::merge(&*self.storage, &inputs, &v.tombstones, &files.output(), &self.output_format(), &options)?;
        let output = match merged {
            Some(m) => {
                let meta = SegmentMeta {
                    number: 0,
                    entries: m.entries,
                    file_len: m.file_len,
                    min_seq: inputs[0].meta.min_seq,
                    max_seq: inputs[inputs.len() - 1].meta.max_seq,
                    epoch: inputs[0].meta.epoch,
                };
                let live = super::id_tables::attach_merged(self, &files, meta)?;
                self.dropped_deleted.fetch_add(m.deleted, Ordering::Relaxed);
                self.dropped_repeats.fetch_add(m.repeated, Ordering::Relaxed);
                self.spilled_runs.fetch_add(m.spilled_runs as u64, Ordering::Relaxed);
                self.resumed_merges.fetch_add(u64::from(m.resumed), Ordering::Relaxed);
                Some(Arc::new(live))
            }
            None => None,
        };
        let numbers: Vec<u64> = inputs.iter().map(|s| s.meta.number).collect();
        // A merge of every live segment applied every tombstone file of the version.
        let applied: Vec<u64> = if inputs.len() == v.segments.len() { v.tombstones.files.iter().map(|(t, _)| t.number).collect() } else { Vec::new() };
        self.install(&numbers, output, &applied)?;
        files.remove_all(&*self.storage)?;
        self.compactions.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    pub(super) fn maintenance_loop(&self) {
        loop {
            {
                let mut bg = lock(&self.signals);
                if !bg.stop && !bg.wake {
                    bg = self.wake.wait_timeout(bg, Duration::from_secs(1)).unwrap_or_else(|p| p.into_inner()).0;
                }
                if bg.stop {
                    break;
                }
                bg.wake = false;
            }
            let result = self.flush_frozen_until_closing().and_then(|()| {
                if self.options.compaction.automatic {
                    self.compact_tiered()
                } else {
                    self.drop_expired().and_then(|()| self.heal_band_files())
                }
            });
            match result {
                // the index is closing: what was stopped goes on at the next open
                Err(e) if e.is_stopped() => break,
                Err(e) => self.record_error(&e),
                Ok(()) => {}
            }
        }
        // Stopped (a close or a drop): what is still frozen stays in its logs (durable) unless
        // the close flushes it (`Index::close`); merges wait for the next open.
    }
}

/// [`Engine::merging_entries`] while a merge runs, back to 0 when it ends (or fails).
struct Merging<'a>(&'a AtomicU64);

impl<'a> Merging<'a> {
    fn set(at: &'a AtomicU64, entries: u64) -> Self {
        at.store(entries, Ordering::Relaxed);
        Merging(at)
    }
}

impl Drop for Merging<'_> {
    fn drop(&mut self) {
        self.0.store(0, Ordering::Relaxed);
    }
}

/// Peak bytes a merge of segments `(file bytes, entries, tables)` adds to the disk before
/// its inputs are removed: its output (each input's bytes, scaled by the output design's
/// table count over the input's own) plus the sorted runs it may spill (16 bytes per
/// entry, one table at a time) plus 1 MiB.
pub(crate) fn merge_space(inputs: impl Iterator<Item = (u64, u64, usize)> + Clone, k: u32, sketched: bool) -> u64 {
    let entries: u64 = inputs.clone().map(|(_, e, _)| e).sum();
    let out_tables = crate::plan::planned_design(&crate::plan::PlanOptions::for_segment(entries.max(1), k, sketched)).map_or(1, |d| d.tables().len()) as u64;
    // each input's bytes scaled by the output's tables over its own (a merge of 4-table
    // segments into a 10-table one writes 2.5x their bytes; a 10-table input, 1x)
    let output: u64 = inputs.map(|(b, _, t)| b.saturating_mul(out_tables.max(t as u64)) / (t.max(1) as u64)).fold(0, u64::saturating_add);
    output.saturating_add(entries.saturating_mul(16)).saturating_add(1 << 20)
}
