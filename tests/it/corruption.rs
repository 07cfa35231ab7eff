//! Flipping any single bit of a small segment is detected by verify, and by open or the
//! query path when a query touches the damaged part; never a panic or a wrong answer.

use simdex::inspect::verify_segment;
use simdex::segment::verify::verify_segment_bytes;
use simdex::storage::FileBytes;
use simdex::{BuildOptions, QueryOptions, Segment};
use std::path::PathBuf;

use crate::common::{brute_force, build, Rng};

#[test]
fn every_single_bit_flip_is_detected() {
    let mut rng = Rng(11);
    // Enough entries for several blocks per table and two id pages.
    let fps: Vec<u64> = (0..300).map(|i| if i % 50 == 0 { 0 } else { rng.next() }).collect();
    let ids: Vec<u64> = (0..300).collect();
    let dir = tempfile::tempdir().unwrap();
    let options = BuildOptions { design: Some(simdex::plan::Design::new(3, &[4]).unwrap()), ..BuildOptions::default() };
    let (path, _) = build(dir.path(), "s.sdx", &fps, Some(&ids), &options);
    let original = std::fs::read(&path).unwrap();
    let queries: Vec<u64> = (0..12).map(|i| rng.flip(fps[i * 17], (i % 4) as u32)).collect();
    let expected: Vec<_> = queries.iter().map(|&q| brute_force(&fps, Some(&ids), q, 3)).collect();
    let damaged = PathBuf::from("damaged.sdx");
    let mut undetected_by_queries = 0usize;
    for bit in 0..original.len() * 8 {
        let mut bytes = original.clone();
        bytes[bit / 8] ^= 1 << (bit % 8);
        let bytes = FileBytes::from_vec(bytes);
        let report = verify_segment_bytes(&damaged, bytes.clone()).unwrap();
        assert!(!report.is_clean(), "bit {bit} (byte {}) not detected by verify", bit / 8);
        match Segment::from_bytes(damaged.clone(), bytes) {
            Err(e) => assert!(e.is_corruption(), "bit {bit}: {e}"),
            Ok(seg) => {
                let mut all_ok = true;
                for (q, want) in queries.iter().zip(&expected) {
                    match seg.query(*q, &QueryOptions::within(3)) {
                        Ok(got) => assert_eq!(&got, want, "bit {bit}: wrong answer for {q:#x}"),
                        Err(e) => {
                            assert!(e.is_corruption(), "bit {bit}: {e}");
                            all_ok = false;
                        }
                    }
                }
                if all_ok {
                    undetected_by_queries += 1;
                }
            }
        }
    }
    // Most flips land in blocks no query touched; the point is that none gave a wrong answer.
    assert!(undetected_by_queries < original.len() * 8);
}

#[test]
fn truncation_at_any_length_is_an_error_not_a_panic() {
    let mut rng = Rng(5);
    let fps: Vec<u64> = (0..400).map(|_| rng.next()).collect();
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = build(dir.path(), "s.sdx", &fps, None, &BuildOptions::default());
    let original = std::fs::read(&path).unwrap();
    let cut = PathBuf::from("cut.sdx");
    for len in 0..original.len() {
        let bytes = FileBytes::from_vec(original[..len].to_vec());
        let err = Segment::from_bytes(cut.clone(), bytes.clone()).unwrap_err();
        assert!(err.is_corruption(), "len {len}: {err}");
        assert!(!verify_segment_bytes(&cut, bytes).unwrap().is_clean());
    }
    // The file on disk, through the real open path.
    std::fs::write(dir.path().join("cut.sdx"), &original[..original.len() / 2]).unwrap();
    let report = verify_segment(dir.path().join("cut.sdx")).unwrap();
    assert!(report.problems[0].detail.contains("SIMDXEND"), "{:?}", report.problems);
}
