//! simdex's integration tests: one binary, a module per concern.

mod codec;
mod common;
mod corruption;
mod engine;
mod engine_damage;
mod fingerprint;
mod fixtures;
mod segment_queries;
