//! Any bytes as a log file: strict and salvage scans never panic, and every intact
//! record encodes back to its own bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| simdex::fuzzing::log(data));
