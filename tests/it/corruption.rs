//! Flipping any single bit of a small segment is detected by verify, and by open or the
//! query path when a query touches the damaged part; never a panic or a wrong answer.

use simdex::recovery::verify_segment;
use simdex::recovery::verify_segment::verify_segment_bytes;
use simdex::storage::{FileBytes, FsStorage};
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
    let options = BuildOptions::default().with_design(Some(simdex::plan::Design::new(3, &[4]).unwrap()));
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
    let report = verify_segment(&FsStorage, &dir.path().join("cut.sdx")).unwrap();
    assert!(report.problems[0].detail.contains("SIMDXEND"), "{:?}", report.problems);
}

/// Queries check a block's CRC the first time an open segment reads it and remember that it
/// matched: a damaged block must still fail every query that reads it, however many clean
/// blocks (and repeated reads of them) came before or after.
#[test]
fn a_damaged_block_fails_every_read_while_verified_blocks_keep_answering() {
    let mut rng = Rng(23);
    let fps: Vec<u64> = (0..20_000).map(|_| rng.next()).collect();
    let dir = tempfile::tempdir().unwrap();
    let (path, clean) = build(dir.path(), "s.sdx", &fps, None, &BuildOptions::default());
    let table = &clean.tables()[0];
    assert!(table.block_count() > 8);
    let mask = !0u64 << (64 - table.design().prefix_bits);
    let keys = table.keys().unwrap().to_vec();
    // Table 0 is the identity: a query of `f` starts in the first block whose key reaches
    // f's prefix. Damage that block of the first stored fingerprint's query.
    let damaged_fp = fps[0];
    let bad = keys.partition_point(|&k| k < damaged_fp & mask) as u64;
    let mut bytes = std::fs::read(&path).unwrap();
    // The lowest bit of the block's first entry (stored whole): the block still decodes.
    bytes[table.block_offset(bad) as usize + 7] ^= 1;
    let seg = Segment::from_bytes(PathBuf::from("damaged.sdx"), FileBytes::from_vec(bytes)).unwrap();
    // Queries whose table-0 blocks are all clean (their prefix run is away from `bad`).
    let far = |f: u64| {
        let first = keys.partition_point(|&k| k < f & mask) as u64;
        let last = keys.partition_point(|&k| k <= (f | !mask)) as u64;
        last + 1 < bad || first > bad + 1
    };
    let good: Vec<u64> = fps.iter().copied().filter(|&f| far(f)).take(200).map(|f| rng.flip(f, 2)).collect();
    assert_eq!(good.len(), 200);
    for round in 0..3 {
        for &q in &good {
            assert_eq!(seg.query(q, &QueryOptions::within(3)).unwrap(), brute_force(&fps, None, q, 3), "round {round}, query {q:#x}");
        }
        // (Variants in the low bits: the same prefix, so the same first block.)
        for q in [damaged_fp, damaged_fp ^ 1, damaged_fp ^ 0b1011_0000] {
            let e = seg.query(q, &QueryOptions::within(3)).unwrap_err();
            assert!(e.is_corruption() && e.to_string().contains("checksum"), "round {round}: {e}");
        }
        let e = seg.block(0, bad).unwrap_err();
        assert!(e.is_corruption(), "round {round}: {e}");
        assert!(seg.block(0, if bad > 0 { bad - 1 } else { bad + 1 }).is_ok());
        // So does every other reader of blocks.
        assert!(seg.visit_block(0, bad, |_| true).is_err());
    }
    // The damage does not leak into the undamaged segment's reads, nor theirs into it.
    assert_eq!(clean.query(damaged_fp, &QueryOptions::within(3)).unwrap(), brute_force(&fps, None, damaged_fp, 3));
}
