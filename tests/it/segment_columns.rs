//! Version-2 columns: the optional sketch column round-trips beside the ids in table 0's
//! order; every value page is checked by its own CRC, so damage costs exactly its page and
//! is named; wrong widths are refused when writing.

use std::path::Path;

use simdex::codec::{Codec, SymbolHistogram};
use simdex::plan::Design;
use simdex::recovery::verify_segment;
use simdex::segment::{IdColumn, SegmentWriter, SketchColumn};
use simdex::storage::FsStorage;
use simdex::{Error, Segment};

use crate::common::Rng;

/// A sketch derived from the entry's id, so a reader can check each one independently.
fn sketch_of(id: u64, bytes: usize) -> Vec<u8> {
    (0..bytes).map(|i| (id.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (i % 8 * 8)) as u8 ^ i as u8).collect()
}

/// Writes a one-table segment (the identity, k = 0 design over an empty recipe) of `n`
/// random fingerprints with ids and `bytes`-byte sketches; returns (fingerprint, id) sorted.
fn write(path: &Path, n: u64, bytes: u16) -> Vec<(u64, u64)> {
    let mut rng = Rng(9);
    let mut pairs: Vec<(u64, u64)> = (0..n).map(|i| (rng.next(), 10_000 + i)).collect();
    pairs.sort_unstable();
    let design = Design::new(3, &[]).unwrap();
    let sketch = SketchColumn { bytes, scheme: *b"TEST0001" };
    let mut w = SegmentWriter::create_with(&FsStorage, path, &design, &[Codec::Xor], IdColumn::Present, Some(sketch)).unwrap();
    let fps: Vec<u64> = pairs.iter().map(|p| p.0).collect();
    let code = SymbolHistogram::of_sorted(Codec::Xor, &fps).code();
    w.write_table(&code, fps.iter().copied()).unwrap();
    w.write_ids(pairs.iter().map(|p| p.1)).unwrap();
    w.write_sketches(pairs.iter().map(|p| sketch_of(p.1, bytes as usize))).unwrap();
    w.finish().unwrap();
    pairs
}

#[test]
fn sketches_round_trip_in_table_0_order() {
    let dir = tempfile::tempdir().unwrap();
    for (n, bytes) in [(1u64, 1u16), (1_000, 32), (5_000, 64), (0, 16)] {
        let path = dir.path().join(format!("s{n}-{bytes}.sdx"));
        let pairs = write(&path, n, bytes);
        let seg = Segment::open(&path).unwrap();
        assert_eq!(seg.format_version(), 2);
        assert_eq!(seg.sketch_layout(), Some((bytes as usize, *b"TEST0001")));
        for (ordinal, (_, id)) in (0u64..).zip(&pairs) {
            assert_eq!(seg.doc_id(ordinal).unwrap(), *id);
            assert_eq!(seg.sketch(ordinal).unwrap(), sketch_of(*id, bytes as usize).as_slice(), "n {n} ordinal {ordinal}");
        }
        assert!(matches!(seg.sketch(n), Err(Error::InvalidArgument(_))));
        assert!(verify_segment(&FsStorage, &path).unwrap().is_clean(), "{:?}", verify_segment(&FsStorage, &path).unwrap().problems);
    }
}

#[test]
fn a_damaged_sketch_page_costs_exactly_its_page_and_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.sdx");
    let pairs = write(&path, 2_000, 48);
    let clean = std::fs::read(&path).unwrap();
    // 1020 / 48 = 21 sketches a page; the sketch column is the last column.
    let per_page = 21u64;
    let seg = Segment::open(&path).unwrap();
    let ordinal = 500u64;
    let page = ordinal / per_page;
    // Find the byte of this sketch: search the clean file for its bytes.
    let want = sketch_of(pairs[ordinal as usize].1, 48);
    let at = clean.windows(48).position(|w| w == want.as_slice()).unwrap();
    drop(seg);
    let mut bytes = clean.clone();
    bytes[at + 7] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let seg = Segment::open(&path).unwrap();
    for o in 0..pairs.len() as u64 {
        let r = seg.sketch(o);
        if o / per_page == page {
            let err = r.unwrap_err();
            assert!(matches!(err, Error::Corrupt { .. }) && err.to_string().contains(&format!("sketch page {page}")), "{err}");
        } else {
            assert_eq!(r.unwrap(), sketch_of(pairs[o as usize].1, 48).as_slice());
        }
    }
    let report = verify_segment(&FsStorage, &path).unwrap();
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    assert!(report.problems[0].detail.contains("sketch page"));
}

#[test]
fn wrong_sketch_widths_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.sdx");
    let design = Design::new(3, &[]).unwrap();
    for bytes in [0u16, 65, 1000] {
        let r = SegmentWriter::create_with(&FsStorage, &path, &design, &[Codec::Xor], IdColumn::Absent, Some(SketchColumn { bytes, scheme: [0; 8] }));
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{bytes}");
    }
    let mut w = SegmentWriter::create_with(&FsStorage, &path, &design, &[Codec::Xor], IdColumn::Absent, Some(SketchColumn { bytes: 8, scheme: [0; 8] })).unwrap();
    let code = SymbolHistogram::of_sorted(Codec::Xor, &[1, 2]).code();
    w.write_table(&code, [1u64, 2]).unwrap();
    let err = w.write_sketches([vec![0u8; 8], vec![0u8; 7]]).unwrap_err();
    assert!(err.to_string().contains("7 bytes"), "{err}");
    drop(w);
    assert!(!path.exists() && !dir.path().join("s.sdx.tmp").exists(), "an unfinished segment leaves nothing");
}
