//! simdex: an embeddable on-disk index of 64-bit simhash fingerprints.

#[cfg(feature = "fingerprint")]
pub mod fingerprint;
pub mod cluster;
