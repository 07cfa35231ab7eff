//! Any bytes as a segment file: opening, querying, iterating and verifying never panic,
//! and a file that opens and verifies clean answers queries like a brute-force scan.
#![no_main]

use libfuzzer_sys::fuzz_target;
use simdex::segment::verify::verify_segment_bytes;
use simdex::storage::FileBytes;
use simdex::{QueryOptions, Segment};
use std::path::PathBuf;

fuzz_target!(|data: &[u8]| {
    let path = PathBuf::from("fuzz.sdx");
    let bytes = FileBytes::from_vec(data.to_vec());
    let report = verify_segment_bytes(&path, bytes.clone()).expect("in-memory bytes are readable");
    let Ok(seg) = Segment::from_bytes(path, bytes) else { return };
    let entries: Vec<_> = seg.entries().collect();
    let mut out = Vec::new();
    for q in [0u64, u64::MAX, 0x0123_4567_89ab_cdef] {
        let _ = seg.query_into(q, &QueryOptions::within(seg.design().k()), &mut out);
        if report.is_clean() {
            let all: Vec<(u64, Option<u64>)> = entries.iter().map(|e| *e.as_ref().expect("clean file decodes")).collect();
            let mut want: Vec<_> = all.iter().filter(|(f, _)| (f ^ q).count_ones() <= seg.design().k()).collect();
            want.dedup();
            assert_eq!(out.len(), want.len());
        }
    }
});
