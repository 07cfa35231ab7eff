//! simdex's integration tests: one binary, a module per concern.

// Tests may unwrap and index, helpers included: a panic here is a failed test (the
// crate's lint policy is for the library).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod batch;
mod block_split;
mod codec;
mod common;
mod corruption;
mod engine;
mod engine_band_batch;
mod engine_band_healing;
mod engine_band_only;
mod engine_bands;
mod engine_bounded_close;
mod engine_by_id;
mod engine_compaction_kills;
mod engine_crash;
mod engine_damage;
mod engine_enospc;
mod engine_expiry;
mod engine_faults;
mod engine_fixtures;
mod engine_kill;
mod engine_live;
mod engine_log_seals;
mod engine_model;
mod engine_readers;
mod engine_replay_pieces;
mod engine_salvage;
mod engine_sketches;
mod fixtures;
mod segment_columns;
mod segment_queries;
mod segment_ranges;
mod tmpfs;
mod verify_band_files;
