//! Any bytes as a tombstone file: decoding never panics, and a file that decodes encodes
//! back to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| simdex::fuzzing::tombstone(data));
