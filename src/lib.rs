//! simdex: an embeddable on-disk index of 64-bit simhash fingerprints.

#![deny(missing_docs)]

pub mod codec;
pub mod plan;
