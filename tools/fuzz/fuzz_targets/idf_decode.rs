//! Any bytes as an IDF table file: decoding never panics, and a table that decodes
//! encodes back to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| simdex_fingerprint::fuzz_idf_decode(data));
