//! simdex: an embeddable on-disk index of 64-bit simhash fingerprints.
//!
//! The persistent store is [`Index`] ([`engine`]): a directory of immutable [`segment`]s
//! named by a [`manifest`], an append [`log`] for durability, an in-memory memtable for
//! fresh writes, [`tombstone`] files for deletes, and compaction. File I/O goes through
//! [`storage::Storage`].

#![deny(missing_docs)]

pub mod batch;
pub mod cluster;
pub mod codec;
mod cpu;
pub mod engine;
pub mod inspect;
mod error;
#[cfg(feature = "fingerprint")]
pub mod fingerprint;
mod interpolation;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod integrity;
mod join;
pub mod log;
pub mod manifest;
#[cfg(any(test, feature = "test-support"))]
mod memstorage;
mod memtable;
pub mod plan;
pub mod query;
pub mod segment;
mod sort;
pub mod split;
pub mod storage;
pub mod stored;
pub mod tombstone;

pub use engine::{Durability, FindOrInsert, Index, IndexOptions};
pub use error::{Error, Location, Result};
pub use query::{Match, QueryOptions};
pub use segment::{build_segment, BuildOptions, Segment};
