//! The append-and-compact engine: [`Index`], a directory of immutable segments, a manifest
//! naming them, an append log and an in-memory memtable (design in `format-spec/engine.md`).
//!
//! A write is appended to the log (synced per [`Durability`]), then applied to the active
//! memtable, where queries see it at once. A full memtable is *frozen*: the log rotates and
//! a flush writes the memtable's inserts as a segment (design planned for its size) and its
//! deletes as a tombstone file, then installs a new manifest. Compaction merges adjacent
//! segments ([`compaction`]) and installs the result the same way. Obsolete files are
//! deleted only after the manifest that drops them is durable.
//!
//! Concurrency: one writer at a time (a mutex in-process, the `LOCK` file across
//! processes); any number of queries, each on an `Arc` snapshot of the live set (a
//! `version`), so flushes and compactions never block them. A background thread (when
//! enabled) flushes and compacts; under group commit a second one syncs the log, without
//! holding the writer's lock during the fsync, so writes go on meanwhile.
//!
//! This module owns the directory: which files are live, recovery on open, orphan removal.
//! File formats belong to `log`, `manifest`, `tombstone` and `segment`. This file is the
//! facade (the module list and the re-exported API); the rest is in the submodules, listed
//! in layers from the top down (a module uses those of its layer and below):
//!
//! - `open`: [`Index::open`], the lock, recovery on open (manifest, segments, tombstones,
//!   orphans), the background threads; `replay`: the logs replayed into memtable-sized
//!   pieces, each flushed on its own;
//!   (checking every file and salvaging a damaged directory are `crate::recovery`'s);
//! - `index`: the [`Index`] handle and its public calls; [`pinned_recipe`]: the `RECIPE`
//!   file, the fingerprint recipe pinned in the index, kept as opaque bytes for the text
//!   pipeline (the `simdex-fingerprint` crate, which makes the document calls);
//! - `confirmed`: the sketch-confirmed queries on a version (`band_batch`: a batch's band
//!   lookups at once); `stats`: what the index reports;
//!   [`snapshot`]: a read-only view for whole-index jobs;
//! - `commit`: the write path (log appends, group commit, the sync thread); `flush`:
//!   freezing a full memtable, writing it as a segment, installing new manifests;
//!   `maintenance`: the maintenance thread, the write stall, running compactions;
//! - `seal`: what the manifest records of each log, and the check of a log against it;
//! - `state`: the engine the handle and the threads share; `writer`: the writer's state;
//!   `version`: the live set a query reads;
//! - `expiry`: the expiry window ([`Expiry`]), the [`Clock`], the time slices that stamp
//!   logs, memtables and segments, and the live view that hides what expired;
//! - `options`: [`IndexOptions`], [`Durability`], [`FindOrInsert`]; `report`: what opening
//!   found ([`OpenReport`]); [`compaction`]: the tiered policy and the streaming merge;
//!   [`files`]: the directory's file names; `log`, `manifest`, `memtable`, `tombstone`:
//!   the append log, the live set's manifest, unflushed writes, a flush's deletes;
//!   `mem_bands`: the memtable's sketches by band.
//!
//! ```
//! use simdex::{FindOrInsert, Index, IndexOptions, QueryOptions};
//!
//! let dir = tempfile::tempdir()?;
//! let index = Index::open(dir.path(), IndexOptions::default())?;
//! index.insert(0x0123_4567_89ab_cdef, 1)?;
//! // One bit away: a near-duplicate of document 1.
//! let near = index.query(0x0123_4567_89ab_cdee, &QueryOptions::within(3))?;
//! assert_eq!(near[0].doc_id, Some(1));
//! // The crawler's check-then-add in one call.
//! assert!(matches!(index.find_or_insert(0x0123_4567_89ab_cdec, 2, &QueryOptions::within(3))?, FindOrInsert::Found(_)));
//! index.delete(0x0123_4567_89ab_cdef, 1)?;
//! assert!(index.query(0x0123_4567_89ab_cdee, &QueryOptions::within(3))?.is_empty());
//! index.close()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod band_batch;
mod band_slot;
pub(crate) mod banded;
mod commit;
pub mod compaction;
pub mod files;
mod flush;
pub(crate) mod id_tables;
// public to the tests (`simdex::log` with `test-support`), whose oracles use what the engine does not
mod confirmed;
mod expiry;
mod index;
#[cfg_attr(not(feature = "test-support"), allow(dead_code))]
pub mod log;
mod maintenance;
pub(crate) mod manifest;
mod mem_bands;
pub(crate) mod memtable;
mod open;
mod options;
pub mod pinned_recipe;
mod replay;
mod report;
pub(crate) mod seal;
pub mod snapshot;
mod state;
mod stats;
pub(crate) mod tombstone;
mod version;
mod writer;

pub use compaction::CompactionOptions;
pub use expiry::{Clock, Expiry, SystemClock};
pub use index::Index;
pub use options::{Durability, FindOrInsert, FindOrReplace, IndexOptions, LogRecovery, Replaced};
pub use report::{LogReport, OpenReport};
pub use stats::{SegmentStats, StatValue, Stats};
