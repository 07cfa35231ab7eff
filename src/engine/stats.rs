//! What an index reports about itself: [`Stats`] (segments, memtable, logs, tombstones,
//! counters), collected from the engine on demand. What opening found is `report`'s.

use std::path::PathBuf;
use std::sync::atomic::Ordering;

use super::files::{self, segment_name, FileKind};
use super::state::{lock, Engine};
use crate::codec::Codec;

/// One live segment, as [`super::Index::stats`] reports it.
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
    /// In an index with an expiry window, the first second (since the Unix epoch) of the
    /// time slice of its pairs.
    pub slice_start_secs: Option<u64>,
}

/// A summary of the index.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Stats {
    /// The directory.
    pub dir: PathBuf,
    /// Opened read-only.
    pub read_only: bool,
    /// Largest query distance the designs guarantee.
    pub k: u32,
    /// Gap codec of new segments.
    pub codec: Codec,
    /// The sketch stored per document (width and scheme), `None` when none is.
    pub sketches: Option<crate::segment::SketchColumn>,
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
    /// fsyncs of the log since open (group commit and the shared fsync of `Sync` make one serve many writes).
    pub log_syncs: u64,
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
    /// Merges since open that went on from the checkpoint of a merge cut short (a crash,
    /// a kill) instead of starting over.
    pub compaction_resumed: u64,
    /// The expiry window, `None` when nothing expires.
    pub expiry: Option<crate::engine::Expiry>,
    /// With a window: the first second (since the Unix epoch) of the oldest time slice that
    /// still holds live pairs (what matches is at most this old, within the granularity);
    /// `None` when nothing live is stored.
    pub oldest_live_secs: Option<u64>,
    /// Segments dropped whole since open because their time slice expired.
    pub expired_segments: u64,
    /// Id tables (`seg-N.sdi`) built again since open because a lookup found a damaged page
    /// (its answer came from the segment's id column; see [`super::OpenReport::rebuilt_id_tables`]
    /// for those an open built).
    pub rebuilt_id_tables: u64,
    /// Files that are not simdex's.
    pub unknown_files: Vec<String>,
    /// The last error of a background flush or compaction, if any.
    pub maintenance_error: Option<String>,
    /// What opening found lost and opened past ([`super::OpenReport::lost`]).
    pub lost: Vec<String>,
    /// Operations lost ([`super::OpenReport::lost_ops`]).
    pub lost_ops: u64,
    /// Checks since open whose band lookup in a segment failed (a band file page failing
    /// its checksum): that segment answered from its tables instead (right answers, slower),
    /// and its band file is built again (by the maintenance thread, or the next write of an
    /// index without one; a read-only open goes without).
    pub band_fallbacks: u64,
    /// Band files built again since open (missing, or set aside after a failed lookup).
    pub band_files_rebuilt: u64,
    /// Band files not in use now, each `seg-N.sdb: why` (missing, damaged, set aside): those
    /// segments' checks are answered from their tables until the file is built again.
    pub band_files_unusable: Vec<String>,
}

/// One value of [`Stats::summary`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum StatValue {
    /// A count or a number.
    Int(u64),
    /// A number, or nothing (the expiry window's figures of an index without one).
    OptionalInt(Option<u64>),
    /// A yes or no.
    Bool(bool),
    /// A text, or nothing.
    Text(Option<String>),
    /// A list of texts.
    List(Vec<String>),
}

impl Stats {
    /// The summary every front reports, under the same keys (the Python package's
    /// `Index.stats()`, `simdex serve`'s `/v1/stats`; `simdex_fingerprint::DocumentIndex`
    /// adds `recipe`): `path`, `read_only`, `k`, `segments`, `segment_fingerprints`,
    /// `memtable_inserts`, `memtable_deletes`, `frozen_ops`, `tombstones`, `log_bytes`,
    /// `last_seq`, `synced_seq`, `flushed_seq`, `flushes`, `compactions`,
    /// `maintenance_error`, `lost`, `lost_ops`, `band_fallbacks`, `band_files_unusable`, and the expiry window's `expire_after_secs`,
    /// `expire_granularity_secs` and `oldest_live_secs` (nothing without a window).
    pub fn summary(&self) -> Vec<(&'static str, StatValue)> {
        use StatValue::{Bool, Int, List, OptionalInt, Text};
        vec![
            ("path", Text(Some(self.dir.display().to_string()))),
            ("read_only", Bool(self.read_only)),
            ("k", Int(u64::from(self.k))),
            ("segments", Int(self.segments.len() as u64)),
            ("segment_fingerprints", Int(self.segments.iter().map(|g| g.entries).sum())),
            ("memtable_inserts", Int(self.memtable_inserts)),
            ("memtable_deletes", Int(self.memtable_deletes)),
            ("frozen_ops", Int(self.frozen_ops)),
            ("tombstones", Int(self.tombstones)),
            ("log_bytes", Int(self.logs.iter().map(|l| l.1).sum())),
            ("last_seq", Int(self.last_seq)),
            ("synced_seq", Int(self.synced_seq)),
            ("log_syncs", Int(self.log_syncs)),
            ("flushed_seq", Int(self.flushed_seq)),
            ("flushes", Int(self.flushes)),
            ("compactions", Int(self.compactions)),
            ("maintenance_error", Text(self.maintenance_error.clone())),
            ("lost", List(self.lost.clone())),
            ("lost_ops", Int(self.lost_ops)),
            ("band_fallbacks", Int(self.band_fallbacks)),
            ("band_files_unusable", List(self.band_files_unusable.clone())),
            ("expire_after_secs", OptionalInt(self.expiry.map(|x| x.window().as_secs()))),
            ("expire_granularity_secs", OptionalInt(self.expiry.map(|x| x.granularity().as_secs()))),
            ("oldest_live_secs", OptionalInt(self.oldest_live_secs)),
        ]
    }
}

impl Stats {
    /// The summary of `engine` now.
    pub(super) fn collect(engine: &Engine) -> Stats {
        let v = engine.current();
        let (last_seq, synced_seq, log) = {
            let w = lock(&engine.writer);
            (w.next_seq - 1, w.synced_seq, w.log.as_ref().map(|l| (l.number(), l.len())))
        };
        let flushed_seq = lock(&engine.manifest).last_seq;
        let mut logs = Vec::new();
        if let Ok(names) = engine.storage.list(&engine.dir) {
            for name in names {
                if let FileKind::Log(n) = files::parse(&name) {
                    let len = match log {
                        Some((number, len)) if number == n => len,
                        _ => engine.storage.read_copy(&engine.dir.join(&name)).map(|b| b.len() as u64).unwrap_or(0),
                    };
                    logs.push((name, len));
                }
            }
        }
        let (memtable_inserts, memtable_deletes) = v.active.counts();
        let oldest_live_secs = engine.expiry.and_then(|x| {
            let live = engine.visible();
            let memtables = live.frozen.iter().chain(std::iter::once(&live.active)).filter(|m| m.counts().0 > 0).filter_map(|m| m.epoch);
            live.segments.iter().map(|s| s.meta.epoch).chain(memtables).min().map(|e| x.epoch_start(e))
        });
        Stats {
            dir: engine.dir.clone(),
            read_only: engine.read_only,
            k: engine.k,
            codec: engine.codec,
            sketches: engine.sketches,
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
                    slice_start_secs: engine.expiry.map(|x| x.epoch_start(s.meta.epoch)),
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
            log_syncs: engine.log_syncs.load(Ordering::Relaxed),
            flushes: engine.flushes.load(Ordering::Relaxed),
            compactions: engine.compactions.load(Ordering::Relaxed),
            compaction_dropped_deleted: engine.dropped_deleted.load(Ordering::Relaxed),
            compaction_dropped_repeats: engine.dropped_repeats.load(Ordering::Relaxed),
            compaction_spilled_runs: engine.spilled_runs.load(Ordering::Relaxed),
            compaction_resumed: engine.resumed_merges.load(Ordering::Relaxed),
            expiry: engine.expiry,
            oldest_live_secs,
            expired_segments: engine.expired_segments.load(Ordering::Relaxed),
            rebuilt_id_tables: engine.rebuilt_id_tables.load(Ordering::Relaxed),
            unknown_files: engine.report.unknown.clone(),
            maintenance_error: lock(&engine.signals).last_error.clone(),
            lost: engine.report.lost.clone(),
            lost_ops: engine.report.lost_ops,
            band_fallbacks: engine.band_fallbacks.load(Ordering::Relaxed),
            band_files_rebuilt: engine.bands_rebuilt.load(Ordering::Relaxed),
            band_files_unusable: v.segments.iter().filter_map(|s| s.bands.unusable().map(|why| format!("{}: {why}", files::bands_name(s.meta.number)))).collect(),
        }
    }
}
