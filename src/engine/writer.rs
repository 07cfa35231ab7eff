//! The writer's state: what the writer's lock guards (the open log, the next sequence
//! number, the first failure, where syncing stands). The engine owns one behind a mutex
//! (`state`); the operations on it are `commit`'s (appends and syncs) and `flush`'s (log
//! rotation). Holds data only.

use std::time::Instant;

use super::log::LogWriter;
use crate::error::Error;

/// The writer's state, behind the writer's lock: the open log and where syncing stands.
pub(super) struct WriterState {
    pub(super) log: Option<LogWriter>,
    pub(super) next_seq: u64,
    pub(super) failed: Option<Error>,
    pub(super) pending_ops: u64,
    pub(super) first_pending: Option<Instant>,
    pub(super) synced_seq: u64,
    /// Counts completed syncs; an unlocked sync that finds it unchanged knows that only
    /// appends happened while it ran.
    pub(super) sync_generation: u64,
    /// Group commit: the sync thread has been asked for a sync that has not started yet.
    pub(super) sync_requested: bool,
    /// [`super::Durability::Sync`]: a writer is running the shared sync others wait for
    /// (`commit::sync_through`).
    pub(super) syncing: bool,
}
