//! simdex: an embeddable on-disk index of 64-bit simhash fingerprints.

pub mod cluster;
#[cfg(feature = "fingerprint")]
pub mod fingerprint;
