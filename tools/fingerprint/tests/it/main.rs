//! simdex-fingerprint's integration tests: one binary, a module per concern.

// Tests may unwrap and index, helpers included: a panic here is a failed test (the
// crate's lint policy is for the library).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod by_id;
mod documents;
mod features_once;
mod html_text;
mod idf_parts;
mod options;
mod recipe;
