//! simdex integration tests, one module per area.

mod fingerprint;
