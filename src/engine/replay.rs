//! Replaying the live logs on open: every record after the manifest's `last_seq`, in order,
//! into memtables of at most `memtable_ops` operations each (*pieces*: one or more per log,
//! never one holding two logs), so that a reopen after a close that left memtables in their
//! logs, or after a crash, flushes them one by one as the writer had them: each flush is one
//! memtable's, and a log is deleted once its last piece is in a segment. This module also
//! checks each log against its seal (`seal`) and settles a loss the replay met
//! ([`LogRecovery`]). The log's format is `log`'s; what the open does around the replay is
//! `open`'s.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::files::log_name;
use super::log::{header_epoch, scan_log, LogEnd, OpKind, ScanMode, LOG_HEADER_BYTES, LOG_VERSION_REPLACE};
use super::manifest::{LogMeta, Manifest};
use super::memtable::Memtable;
use super::options::{LogRecovery, OpenMode};
use super::report::{LogReport, OpenReport};
use super::seal::{seal_of, shortfall};
use crate::error::{Error, Result};
use crate::plan::Design;
use crate::storage::Storage;

/// The memtables a replay fills: full ones (oldest first) and the one being filled.
pub(super) struct Pieces {
    design: Arc<Design>,
    sketch_width: usize,
    /// Operations a piece holds before the next record starts a new one.
    piece_ops: u64,
    full: Vec<Memtable>,
    filling: Memtable,
}

impl Pieces {
    pub(super) fn new(design: Arc<Design>, sketch_width: usize, piece_ops: u64) -> Self {
        let filling = Memtable::new(design.clone(), 0, sketch_width).expecting(piece_ops);
        Self { design, sketch_width, piece_ops: piece_ops.max(1), full: Vec::new(), filling }
    }

    /// Before the records of log `number` (of time slice `epoch`): a new piece for them.
    fn start_log(&mut self, number: u64, epoch: Option<u64>) {
        self.start(number, epoch);
    }

    /// Before a record: the piece being filled, a new one of the same log when it is full.
    fn for_record(&mut self) -> &Memtable {
        if self.filling.ops() >= self.piece_ops {
            self.start(self.filling.log_number, self.filling.epoch);
        }
        &self.filling
    }

    fn start(&mut self, number: u64, epoch: Option<u64>) {
        let next = Memtable::new(self.design.clone(), number, self.sketch_width).with_epoch(epoch).expecting(self.piece_ops);
        let done = std::mem::replace(&mut self.filling, next);
        if done.ops() > 0 {
            self.full.push(done);
        }
    }

    /// The pieces, oldest first, and the last one: the active memtable (the writer appends
    /// to its log, or, when that log is not to be appended to, gives it its new log).
    pub(super) fn finish(self) -> (Vec<Memtable>, Memtable) {
        (self.full, self.filling)
    }
}

/// What replaying the logs left: the memtables ([`Pieces::finish`]), the next sequence
/// number, and the newest log with its valid length (a writable open appends to it); after a
/// loss opened past ([`LogRecovery::PointInTime`]), the last sequence number spent, for
/// `accept_log_loss`.
pub(super) struct Replayed {
    pub(super) pieces: Pieces,
    pub(super) next_seq: u64,
    pub(super) append_to: Option<(u64, u64)>,
    pub(super) accepted_loss: Option<u64>,
    /// Seals of the logs replayed whole: a writable open records them (`seal`).
    pub(super) seen: Vec<LogMeta>,
}

/// The first loss the replay met: where, and what.
struct Loss {
    path: PathBuf,
    offset: u64,
    detail: String,
}

/// Replays the live logs into `pieces`, oldest first, checking that sequence numbers
/// continue and that every log holds what the manifest's seal of it says
/// (`seal::shortfall`); a writable open also cuts torn log tails and removes logs without a
/// whole header. A log that falls short (or, with [`LogRecovery::PointInTime`], a damaged
/// record) is the point in time: what follows is not replayed but counted, and the open
/// fails (`Strict`) or reports it and goes on.
pub(super) fn replay_logs(
    storage: &dyn Storage,
    dir: &Path,
    logs: &[u64],
    manifest: &Manifest,
    mut pieces: Pieces,
    options: (OpenMode, LogRecovery),
    report: &mut OpenReport,
) -> Result<Replayed> {
    let (mode, recovery) = options;
    let read_only = mode == OpenMode::ReadOnly;
    let sketch_width = pieces.sketch_width;
    let mut next_seq = manifest.last_seq + 1;
    let mut append_to: Option<(u64, u64)> = None;
    // The logs the directory holds and those the manifest has a seal of (a missing one is loss).
    let mut numbers: Vec<u64> = logs.iter().copied().chain(manifest.logs.iter().map(|l| l.number)).collect();
    numbers.sort_unstable();
    numbers.dedup();
    let last_log = logs.last().copied();
    let mut high_water = manifest.last_seq;
    let mut loss: Option<Loss> = None;
    let mut seen = Vec::new();
    for n in numbers {
        let path = dir.join(log_name(n));
        let seal = seal_of(manifest, n);
        high_water = high_water.max(seal.map_or(0, |s| s.last_seq));
        if !logs.contains(&n) {
            if let Some(short) = seal.filter(|_| loss.is_none()).and_then(|s| shortfall(s, None, next_seq - 1)) {
                loss = Some(Loss { path, offset: 0, detail: short.detail });
            }
            continue;
        }
        let bytes = storage.read_copy(&path).map_err(|e| Error::io(&path, "read", e))?;
        if loss.is_some() {
            // Past the point in time: not replayed, only counted.
            let scan = scan_log(&path, &bytes, n, ScanMode::Salvage, |_| Ok(()));
            high_water = high_water.max(scan.ok().and_then(|s| s.seqs).map_or(0, |s| s.1));
            continue;
        }
        // Each log's records start a piece of their own, of the log's time slice.
        pieces.start_log(n, manifest.expiry.and_then(|_| header_epoch(&bytes)));
        let mut ops = 0u64;
        let scanned = scan_log(&path, &bytes, n, ScanMode::Strict, |r| {
            if r.last_seq() < next_seq {
                return Ok(());
            }
            if r.seq != next_seq {
                return Err(Error::corrupt(&path, r.offset, format!("record starts at sequence number {}, expected {next_seq}: records are missing", r.seq)));
            }
            let pairs: Vec<crate::query::Entry> = r.ops().map(crate::query::Entry::from).collect();
            if r.sketches().is_some() && r.sketch_bytes() != sketch_width {
                return Err(Error::corrupt(&path, r.offset, format!("record carries {}-byte sketches, the index's are {sketch_width} bytes", r.sketch_bytes())));
            }
            let memtable = pieces.for_record();
            match r.kind {
                OpKind::Insert => memtable.insert(r.seq, &pairs, r.sketches()),
                OpKind::Delete => memtable.delete(r.seq, &pairs),
                OpKind::Replace => {
                    let (insert, deletes) = pairs.split_last().ok_or_else(|| Error::corrupt(&path, r.offset, "an empty replace record"))?;
                    let sketch = r.sketches().and_then(|s| s.get(deletes.len() * sketch_width..));
                    memtable.replace(r.seq, deletes, *insert, sketch);
                }
            }
            ops += pairs.len() as u64;
            next_seq = r.last_seq() + 1;
            Ok(())
        });
        let scan = match scanned {
            Ok(scan) => scan,
            Err(Error::Corrupt { offset, detail, .. }) if recovery == LogRecovery::PointInTime => {
                // The records after the damage are lost with it: counted, not replayed.
                let rest = scan_log(&path, &bytes, n, ScanMode::Salvage, |_| Ok(()));
                high_water = high_water.max(rest.ok().and_then(|s| s.seqs).map_or(0, |s| s.1));
                report.replayed_ops += ops;
                loss = Some(Loss { path, offset, detail: format!("damaged at byte offset {offset}: {detail}") });
                continue;
            }
            Err(e) => return Err(e),
        };
        if manifest.expiry.is_some() && scan.valid_len >= LOG_HEADER_BYTES as u64 {
            // (each piece has its log's slice: `Pieces::start_log` above)
            if header_epoch(&bytes).is_none() {
                return Err(Error::corrupt(&path, 0, "a log without a time slice (version 1 or 2) in an index with an expiry window"));
            }
        }
        report.replayed_ops += ops;
        report.logs.push(LogReport { name: log_name(n), len: bytes.len() as u64, valid_len: scan.valid_len, end: scan.end, ops });
        if let Some(short) = seal.and_then(|s| shortfall(s, Some(scan.valid_len), next_seq - 1)) {
            loss = Some(Loss { path, offset: scan.valid_len, detail: short.detail });
            continue;
        }
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
        seen.push(LogMeta { number: n, len: scan.valid_len, last_seq: next_seq - 1 });
        // A log of an older version takes no replace record: the writer starts a new one.
        if Some(n) == last_log && scan.version >= LOG_VERSION_REPLACE {
            append_to = Some((n, scan.valid_len));
        }
    }
    let mut replayed = Replayed { pieces, next_seq, append_to, accepted_loss: None, seen };
    if let Some(loss) = loss {
        settle_loss(loss, high_water, recovery, read_only, &mut replayed, report)?;
    }
    Ok(replayed)
}

/// The replay met `loss`, and operations up to `high_water` were acknowledged: a `Strict`
/// open fails, saying what is lost; a point-in-time open reports it, opens before it and
/// never hands one of those sequence numbers out again (the writer starts a new log).
fn settle_loss(loss: Loss, high_water: u64, recovery: LogRecovery, read_only: bool, replayed: &mut Replayed, report: &mut OpenReport) -> Result<()> {
    let lost_ops = high_water.saturating_sub(replayed.next_seq - 1);
    let counted = format!("{lost_ops} acknowledged operations in all (sequence numbers {}..={high_water}) are lost", replayed.next_seq);
    match recovery {
        LogRecovery::Strict => {
            let advice = "the index does not open: `simdex recover DIR --out NEW` salvages every intact record, or open it with LogRecovery::PointInTime (the CLI's `--log-recovery point-in-time`) to keep everything before the loss";
            Err(Error::corrupt(&loss.path, loss.offset, format!("{}; {counted}; {advice}", loss.detail)))
        }
        LogRecovery::PointInTime => {
            let name = loss.path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
            report.lost.push(format!("{name}: {}; {counted}; opened at the point in time before it", loss.detail));
            report.lost_ops += lost_ops;
            replayed.next_seq = high_water + 1;
            replayed.append_to = None;
            replayed.accepted_loss = (!read_only).then_some(high_water);
            Ok(())
        }
    }
}
