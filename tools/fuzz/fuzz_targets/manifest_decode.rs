//! Any bytes as a MANIFEST: decoding never panics, and a manifest that decodes encodes
//! back to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| simdex::fuzzing::manifest(data));
