//! Any bytes as a segment file: opening, iterating, verifying and querying never panic,
//! and a file that opens and verifies clean answers queries like a brute-force scan.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| simdex::fuzzing::segment_open(data));
