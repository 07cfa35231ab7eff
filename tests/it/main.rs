//! simdex's integration tests: one binary, a module per concern.

mod batch;
mod codec;
mod common;
mod corruption;
mod fingerprint;
mod fixtures;
mod segment_queries;
