//! Any bytes as a block, any code lengths and entry count: the fast decoder never panics
//! and agrees with the bitvec reference decoder on validity and on every value.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| simdex::fuzzing::block_decode(data));
