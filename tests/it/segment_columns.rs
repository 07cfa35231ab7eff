//! Columns: the optional sketch column round-trips beside the ids in table 0's order; every
//! value page is checked by its own CRC (ids: at the page's end; sketches, layout 3: in the
//! CRC page after each group of 255 pages), so damage costs exactly its page and is named;
//! wrong widths are refused when writing.

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
        assert_eq!(seg.format_version(), 3, "a segment with sketches is version 3");
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
    // 1024 / 48 = 21 sketches a page; the sketch column is the last column.
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
    // twice: a page is checked on its first read only, and a damaged one never passes
    for _pass in 0..2 {
        for o in 0..pairs.len() as u64 {
            let r = seg.sketch(o);
            if o / per_page == page {
                let err = r.unwrap_err();
                assert!(matches!(err, Error::Corrupt { .. }) && err.to_string().contains(&format!("sketch page {page}")), "{err}");
            } else {
                assert_eq!(r.unwrap(), sketch_of(pairs[o as usize].1, 48).as_slice());
            }
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

/// Where the sketch column's head is: the second column head (the ids' is the first).
fn sketch_head_at(bytes: &[u8]) -> usize {
    let heads: Vec<usize> = bytes.windows(8).enumerate().filter(|(_, w)| *w == b"SIMDXCOL").map(|(i, _)| i).collect();
    assert_eq!(heads.len(), 2);
    heads[1]
}

#[test]
fn sketch_pages_are_whole_with_a_crc_page_after_each_group() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.sdx");
    // 16 sketches of 64 bytes a page: 625 pages, groups of 255, 255 and 115 pages
    let pairs = write(&path, 10_000, 64);
    let bytes = std::fs::read(&path).unwrap();
    let head = sketch_head_at(&bytes);
    let page = |p: usize| head + 1024 + (p + p / 255) * 1024;
    // the oracle: page p holds sketches 16 p .. 16 p + 16, whole, in table 0's order
    for p in [0usize, 1, 254, 255, 509, 510, 624] {
        let want: Vec<u8> = pairs[p * 16..(p * 16 + 16).min(pairs.len())].iter().flat_map(|x| sketch_of(x.1, 64)).collect();
        assert_eq!(&bytes[page(p)..page(p) + 1024], want.as_slice(), "page {p}");
    }
    // each group's CRC page: the CRC of each of its pages, zeros, then its own CRC
    for (group, first, covered) in [(0usize, 0usize, 255usize), (1, 255, 255), (2, 510, 115)] {
        let at = head + 1024 + (first + group + covered) * 1024;
        let crc_page = &bytes[at..at + 1024];
        for i in 0..covered {
            let p = first + i;
            assert_eq!(crc_page[i * 4..i * 4 + 4], crc32fast::hash(&bytes[page(p)..page(p) + 1024]).to_le_bytes(), "group {group} page {p}");
        }
        assert!(crc_page[covered * 4..1020].iter().all(|&b| b == 0));
        assert_eq!(crc_page[1020..], crc32fast::hash(&crc_page[..1020]).to_le_bytes());
    }
    // the column ends there: 64.25 bytes a sketch, where 15 a page with their CRC took 68.27
    let without = dir.path().join("n.sdx");
    write_without_sketches(&without, &pairs);
    assert_eq!(bytes.len() as u64 - std::fs::metadata(&without).unwrap().len(), 1024 * (1 + 625 + 3));
    let seg = Segment::open(&path).unwrap();
    for (ordinal, (_, id)) in (0u64..).zip(&pairs) {
        assert_eq!(seg.sketch(ordinal).unwrap(), sketch_of(*id, 64).as_slice());
    }
    assert!(verify_segment(&FsStorage, &path).unwrap().is_clean(), "{:?}", verify_segment(&FsStorage, &path).unwrap().problems);
}

/// The same segment as [`write`] without a sketch column (version 2).
fn write_without_sketches(path: &Path, pairs: &[(u64, u64)]) {
    let design = Design::new(3, &[]).unwrap();
    let mut w = SegmentWriter::create_with(&FsStorage, path, &design, &[Codec::Xor], IdColumn::Present, None).unwrap();
    let fps: Vec<u64> = pairs.iter().map(|p| p.0).collect();
    let code = SymbolHistogram::of_sorted(Codec::Xor, &fps).code();
    w.write_table(&code, fps.iter().copied()).unwrap();
    w.write_ids(pairs.iter().map(|p| p.1)).unwrap();
    w.finish().unwrap();
    assert_eq!(Segment::open(path).unwrap().format_version(), 2, "a segment without sketches is still version 2");
}

#[test]
fn a_damaged_crc_page_costs_the_pages_whose_crcs_it_lost_and_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.sdx");
    let pairs = write(&path, 10_000, 64);
    let clean = std::fs::read(&path).unwrap();
    let head = sketch_head_at(&clean);
    // group 1's CRC page; a flipped bit in the CRC of its 8th page (page 262)
    let crc_page = head + 1024 + (255 + 1 + 255) * 1024;
    let mut bytes = clean.clone();
    bytes[crc_page + 7 * 4 + 2] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();
    let seg = Segment::open(&path).unwrap();
    for o in 0..pairs.len() as u64 {
        match seg.sketch(o) {
            Ok(s) => {
                assert_ne!(o / 16, 262);
                assert_eq!(s, sketch_of(pairs[o as usize].1, 64).as_slice());
            }
            Err(e) => assert!(o / 16 == 262 && e.to_string().contains("sketch page 262"), "{o}: {e}"),
        }
    }
    let report = verify_segment(&FsStorage, &path).unwrap();
    let details: Vec<&str> = report.problems.iter().map(|p| p.detail.as_str()).collect();
    assert_eq!(details.len(), 2, "{details:?}");
    assert!(details.iter().any(|d| d.contains("sketch page 262")) && details.iter().any(|d| d.contains("sketch CRC page")), "{details:?}");
    // its own CRC damaged: every sketch still reads; verify names the CRC page
    let mut bytes = clean.clone();
    bytes[crc_page + 1021] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let seg = Segment::open(&path).unwrap();
    for o in 0..pairs.len() as u64 {
        assert_eq!(seg.sketch(o).unwrap(), sketch_of(pairs[o as usize].1, 64).as_slice());
    }
    let report = verify_segment(&FsStorage, &path).unwrap();
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    assert!(report.problems[0].detail.contains("sketch CRC page"), "{:?}", report.problems);
}
