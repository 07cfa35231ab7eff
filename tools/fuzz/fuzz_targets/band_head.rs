//! Any bytes as a band file's head: decoding never panics, and a head that decodes encodes
//! back to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| simdex::fuzzing::band_head(data));
