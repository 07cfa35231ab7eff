//! Log seals: what the manifest records of each live log ([`LogMeta`]: its synced length
//! and last sequence number), so that a log found shorter than that, or missing, is loss
//! counted exactly, never a log whose writer simply stopped there (the anchor is
//! RocksDB's `track_and_verify_wals_in_manifest`).
//!
//! A seal is taken where it costs nothing extra: at a rotation (the old log is synced
//! whole anyway) it waits here until the next manifest a flush writes, and at a clean close
//! one more manifest records the open log. A seal is a lower bound: a writer that reopens a
//! sealed log appends after it. What a seal cannot cover is the tail a crashed writer
//! appended after the last manifest was written (`format-spec/log.md`).
//!
//! This module owns taking seals, the check of a scanned log against its seal (used by
//! `open`, `verify` and `salvage`) and accepting a loss the user chose to open past
//! ([`super::LogRecovery::PointInTime`]).

use std::sync::atomic::Ordering;

use super::files::FileKind;
use super::manifest::{LogMeta, Manifest};
use super::state::{lock, Engine};
use super::writer::WriterState;
use crate::error::Result;

/// How far a log falls short of its seal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Shortfall {
    /// Acknowledged operations lost (at least one): sequence numbers
    /// `found_last + 1 ..= seal.last_seq`.
    pub(crate) lost_ops: u64,
    /// What was found, for a report (starts with what happened to the file).
    pub(crate) detail: String,
}

/// Checks a log against its seal: `found` is `None` when the file is missing, else the
/// bytes of header and intact records; `found_last` is the last sequence number replayed
/// through this log (the one it continues from when it holds no record).
pub(crate) fn shortfall(seal: &LogMeta, found: Option<u64>, found_last: u64) -> Option<Shortfall> {
    // A log that lost no operation (only its header, or an empty log gone) lost nothing:
    // the open starts it afresh, as after a crash during its creation.
    let lost_ops = seal.last_seq.checked_sub(found_last).filter(|&n| n > 0)?;
    let what = match found {
        None => "missing".to_string(),
        Some(len) => format!("cut short: its intact records end at byte {len}, sequence number {found_last}"),
    };
    let ops = format!("{lost_ops} acknowledged operations (sequence numbers {}..={}) are lost", found_last + 1, seal.last_seq);
    Some(Shortfall { lost_ops, detail: format!("{what}, though the manifest recorded it holding {} bytes through sequence number {}: {ops}", seal.len, seal.last_seq) })
}

/// The seal `manifest` records for log `number`, if any.
pub(crate) fn seal_of(manifest: &Manifest, number: u64) -> Option<&LogMeta> {
    manifest.logs.iter().find(|l| l.number == number)
}

/// The seals `manifest` should record: its own and `more`, newest per log, only for logs
/// numbered `manifest.log_number` or above, oldest first.
pub(crate) fn merged_seals(manifest: &Manifest, more: &[LogMeta]) -> Vec<LogMeta> {
    let mut seals: Vec<LogMeta> = Vec::with_capacity(manifest.logs.len() + more.len());
    for s in manifest.logs.iter().chain(more).filter(|s| s.number >= manifest.log_number) {
        match seals.iter_mut().find(|x| x.number == s.number) {
            Some(x) if (x.len, x.last_seq) < (s.len, s.last_seq) => *x = *s,
            Some(_) => {}
            None => seals.push(*s),
        }
    }
    seals.sort_unstable_by_key(|s| s.number);
    seals
}

impl Engine {
    /// The seal of the writer's log as it stands (call after a complete sync: every byte is
    /// synced), or `None` when there is no log.
    pub(super) fn seal_of_writer(&self, w: &WriterState) -> Option<LogMeta> {
        w.log.as_ref().map(|log| LogMeta { number: log.number(), len: log.len(), last_seq: w.next_seq - 1 })
    }

    /// Keeps the seal of a log a rotation just synced whole, for the next manifest.
    pub(super) fn keep_seal(&self, seal: LogMeta) {
        lock(&self.seals).push(seal);
    }

    /// The seals the next manifest records: `manifest`'s and the kept ones (kept seals of
    /// logs it no longer names are dropped).
    pub(super) fn seals_for(&self, manifest: &Manifest) -> Vec<LogMeta> {
        let mut kept = lock(&self.seals);
        kept.retain(|s| s.number >= manifest.log_number);
        merged_seals(manifest, &kept)
    }

    /// At a clean close: records the open log's seal (and kept ones) in a new manifest,
    /// unless it records them already. The log must be synced whole.
    pub(super) fn seal_open_log(&self, w: &WriterState) -> Result<()> {
        let Some(seal) = self.seal_of_writer(w) else { return Ok(()) };
        let mut manifest = lock(&self.manifest);
        let mut m = manifest.clone();
        m.logs = merged_seals(&m, &[seal]);
        m.logs = self.seals_for(&m);
        if m.logs == manifest.logs {
            return Ok(());
        }
        m.number += 1;
        m.next_file = m.next_file.max(self.next_file.load(Ordering::SeqCst));
        m.store(&*self.storage, &self.dir)?;
        *manifest = m;
        Ok(())
    }

    /// Makes a loss the open found and the user accepted ([`super::LogRecovery::PointInTime`])
    /// part of the index's history: what was replayed is flushed, and a manifest records
    /// every sequence number up to `high_water` as spent (none is handed out twice) and the
    /// writer's new log as the only live one, so later opens neither replay the damaged
    /// logs nor report the loss again.
    pub(super) fn accept_log_loss(&self, high_water: u64) -> Result<()> {
        {
            let mut w = lock(&self.writer);
            self.freeze(&mut w)?;
        }
        self.flush_frozen()?;
        let mut w = lock(&self.writer);
        // Everything is in segments and the writer's log holds no record: the next one
        // starts after `high_water`, where the manifest's `last_seq` will say replay starts.
        w.next_seq = w.next_seq.max(high_water + 1);
        w.synced_seq = w.synced_seq.max(high_water);
        let Some(seal) = self.seal_of_writer(&w) else { return Ok(()) };
        let mut manifest = lock(&self.manifest);
        let mut m = manifest.clone();
        m.number += 1;
        m.last_seq = m.last_seq.max(high_water);
        m.log_number = seal.number;
        m.logs = vec![seal];
        m.next_file = m.next_file.max(self.next_file.load(Ordering::SeqCst));
        m.store(&*self.storage, &self.dir)?;
        *manifest = m;
        drop(manifest);
        drop(w);
        lock(&self.seals).clear();
        self.remove_files(|kind| matches!(kind, FileKind::Log(n) if n < seal.number));
        Ok(())
    }
}

/// What is lost when the directory holds `live_logs` logs numbered at or above the
/// manifest's `log_number`, if that is a loss. A manifest that a flush or compaction
/// installed (number above 1) was written while such a log existed (the log a freeze starts
/// is created before the flush that names its predecessor obsolete), so none left means the
/// newest log was deleted or lost; how many writes it held cannot be known. A new index's
/// first manifest (number 1) may lose its log to a crash before the log was created, with
/// nothing in it. (Reported by an open and by `crate::recovery`'s verify.)
pub(crate) fn missing_log(manifest: &Manifest, live_logs: usize) -> Option<String> {
    (live_logs == 0 && manifest.number > 1 && seal_of(manifest, manifest.log_number).is_none()).then(|| {
        format!(
            "missing: no log numbered {} or above, though the manifest was written while one existed; writes after sequence number {} may be lost (how many cannot be known)",
            manifest.log_number, manifest.last_seq
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shortfall_counts_exactly_what_a_seal_says_is_gone() {
        let seal = LogMeta { number: 7, len: 32 + 10 * 44, last_seq: 110 };
        // intact through the seal, or longer (a writer appended after reopening it)
        assert_eq!(shortfall(&seal, Some(seal.len), 110), None);
        assert_eq!(shortfall(&seal, Some(seal.len + 44), 111), None);
        // cut at a record boundary: 4 records of one operation each are gone
        let cut = shortfall(&seal, Some(32 + 6 * 44), 106).expect("a cut log is short");
        assert_eq!(cut.lost_ops, 4);
        assert!(cut.detail.contains("cut short") && cut.detail.contains("107..=110"), "{}", cut.detail);
        // missing whole: everything after what the previous log held
        let gone = shortfall(&seal, None, 100).expect("a missing log is short");
        assert_eq!(gone.lost_ops, 10);
        assert!(gone.detail.starts_with("missing"));
        // a sealed empty log that is missing, or a log that lost only its header, lost nothing
        let empty = LogMeta { number: 8, len: 32, last_seq: 110 };
        assert_eq!(shortfall(&empty, None, 110), None);
        assert_eq!(shortfall(&empty, Some(20), 110), None);
    }

    #[test]
    fn merged_seals_keep_the_longest_of_live_logs_in_order() {
        let mut m = Manifest::new(3, crate::codec::Codec::Xor, None);
        m.log_number = 5;
        m.next_file = 10;
        m.logs = vec![LogMeta { number: 6, len: 100, last_seq: 9 }];
        let more = [LogMeta { number: 4, len: 50, last_seq: 3 }, LogMeta { number: 6, len: 144, last_seq: 10 }, LogMeta { number: 5, len: 32, last_seq: 2 }];
        assert_eq!(merged_seals(&m, &more), vec![LogMeta { number: 5, len: 32, last_seq: 2 }, LogMeta { number: 6, len: 144, last_seq: 10 }]);
    }
}
