//! simdex: an embeddable on-disk index of 64-bit simhash fingerprints.

#![warn(missing_docs)]

pub mod batch;
pub mod cluster;
pub mod codec;
mod cpu;
mod error;
#[cfg(feature = "fingerprint")]
pub mod fingerprint;
pub mod plan;
pub mod query;
mod search;
pub mod segment;
mod sort;
pub mod storage;

pub use error::{Error, Location, Result};
pub use query::{Match, QueryOptions};
pub use segment::{build_segment, BuildOptions, Segment};
