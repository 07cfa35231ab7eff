//! Compaction: which adjacent segments to merge, and the merge that rewrites them as one.
//!
//! Two halves that do not import each other:
//! - the *policy* chooses: [`choose`] takes the live segments' metadata (oldest first) and
//!   a [`Strategy`] and returns a [`Choice`], the adjacent range to merge next or nothing.
//!   One file per strategy: `tiered` (the size-tiered policy, its backlog rule, and the
//!   budget behind the write stall, [`over_budget`]), `absorb` (the small tiers absorbing
//!   the newest segment while the index is small), `full` (a full compaction in merges of
//!   bounded size), `settle` (in the background: the live set within a bound of one
//!   segment's query cost), `expiry` (an index with an expiry window: merges within one time slice, and
//!   which segments expired, dropped whole). The policy reads sizes only: it opens no file.
//! - the *mechanism* merges: [`merge()`] (in `merge`) writes the live pairs of the chosen
//!   segments as one new segment, from the merge streams of `stream` (live pairs in
//!   `(fingerprint, id)` order, sorted tables) and the bounded-memory sort of
//!   `external_sort`. It writes that segment and its temporary runs, nothing else.
//!
//! Compaction must not touch the manifest, the live set or the log: the engine
//! (`maintenance`) asks for a choice, checks the disk's room, runs the merge and installs
//! its output. Only adjacent segments merge, so sequence ranges stay disjoint and the
//! tombstone rule (a delete hides copies in segments whose `max_seq` is older) keeps
//! working. [`CompactionOptions::max_merge_entries`] bounds the input of every merge,
//! tiered and full alike (`full` says why).

mod absorb;
pub(crate) mod checkpoint;
pub(crate) mod expiry;
mod external_sort;
mod full;
mod merge;
#[cfg(test)]
mod resume_tests;
mod settle;
#[cfg(test)]
mod simulation;
mod stream;
#[cfg(test)]
mod test_segments;
mod tiered;

use std::ops::Range;

pub(crate) use merge::{merge, MergeOptions, OutputFormat};

use crate::engine::manifest::SegmentMeta;

/// How compaction chooses and merges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompactionOptions {
    /// Segments of one tier that trigger a merge, and the size ratio between tiers (>= 2);
    /// below `fanout^2` flushes the newest segments also absorb each other (the small
    /// tiers' absorbing merge; only while the index holds at most `fanout^3` flushes).
    pub fanout: usize,
    /// Fingerprints buffered in memory for sorting the permuted tables (8 bytes each),
    /// across all tables; beyond it the merge spills sorted runs to temporary files.
    pub buffer_entries: usize,
    /// Merge automatically after flushes (in the background thread when there is one).
    pub automatic: bool,
    /// Largest number of input entries one merge takes (tiered or full); segments whose
    /// merge would exceed it are left as they are. Unbounded by default (a full compaction
    /// is one merge). A merge cut short goes on from its checkpoint
    /// ([`Self::checkpoint_interval`]), so kills do not call for a bound; a bound keeps each
    /// merge's disk and time small, at the cost of more segments.
    pub max_merge_entries: u64,
    /// How often a merge records how far it has come (`merge.checkpoint`), so that a merge
    /// of the same segments after a crash or a kill goes on from there instead of starting
    /// over: a compaction killed every few seconds still finishes. `None`: never (a merge
    /// cut short starts over). Each checkpoint costs a few fsyncs; merges shorter than the
    /// interval record none.
    pub checkpoint_interval: Option<std::time::Duration>,
    /// With [`Self::automatic`], the maintenance thread merges the newest segments (or all),
    /// in the background while the index is open, until the live set's modeled query cost is
    /// within this percentage of one segment's (`settle`: a tiered live set costs a query up
    /// to 6x one segment at 2^28). A close does not wait for it: a settling merge stopped by
    /// a close goes on from its checkpoint at the next open. `None`: never. Default 150.
    pub settle: Option<u32>,
}

__with_fields!(CompactionOptions { fanout: usize => with_fanout, buffer_entries: usize => with_buffer_entries, automatic: bool => with_automatic, max_merge_entries: u64 => with_max_merge_entries, checkpoint_interval: Option<std::time::Duration> => with_checkpoint_interval, settle: Option<u32> => with_settle });

impl Default for CompactionOptions {
    fn default() -> Self {
        Self {
            fanout: 4,
            buffer_entries: 8 << 20,
            automatic: true,
            max_merge_entries: u64::MAX,
            checkpoint_interval: Some(std::time::Duration::from_millis(500)),
            settle: Some(150),
        }
    }
}

/// What the engine compacts for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Strategy {
    /// After flushes (memtables of `flush_size` operations): the tiered merge when one is
    /// due (it works through backlogs `fanout` at a time), else the small tiers' absorbing
    /// merge.
    Automatic { flush_size: u64 },
    /// A full compaction ([`crate::engine::Index::compact`]), one bounded merge at a time;
    /// `rewrite_single`: a lone segment is worth rewriting (tombstones hide some of its
    /// pairs).
    Full { rewrite_single: bool },
    /// When the index closes: merge the newest segments until the live set's modeled `k`
    /// query costs at most `percent` of one segment's (`settle`).
    Settle { k: u32, percent: u32 },
}

/// What a strategy chose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Choice {
    /// No merge is due (or none fits within `max_merge_entries`).
    DoNothing,
    /// Merge these adjacent segments (a range of indices into the live segments, oldest
    /// first) into one.
    Merge(Range<usize>),
}

/// The next merge `strategy` makes of `segments` (the live segments, oldest first). Every
/// merge it chooses of two or more segments removes at least one, so applying choices until
/// [`Choice::DoNothing`] ends (the one exception, a lone segment `Full` rewrites, the caller
/// makes once).
pub(crate) fn choose(strategy: Strategy, segments: &[SegmentMeta], options: &CompactionOptions) -> Choice {
    let (fanout, max_merge) = (options.fanout, options.max_merge_entries);
    let range = match strategy {
        Strategy::Automatic { flush_size } => tiered::pick(segments, flush_size, fanout, max_merge).or_else(|| absorb::pick(segments, flush_size, fanout, max_merge)),
        Strategy::Full { rewrite_single } => full::pick(segments, max_merge, rewrite_single),
        Strategy::Settle { k, percent } => settle::pick(segments, k, f64::from(percent) / 100.0, max_merge),
    };
    range.map_or(Choice::DoNothing, Choice::Merge)
}

/// True when merges have fallen behind flushes (of `flush_size` operations) so far that the
/// engine stalls writes until they catch up: more than twice the segments the tiered
/// policy keeps for their total size (see `tiered`).
pub(crate) fn over_budget(segments: &[SegmentMeta], flush_size: u64, options: &CompactionOptions) -> bool {
    tiered::over_budget(segments, flush_size, options.fanout, options.max_merge_entries)
}
