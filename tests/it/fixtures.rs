//! Golden files: the worked example of `format-spec/block.md` and frozen segments (clean
//! and damaged) of every format version, `fixtures/v1/` and `fixtures/v2/`, read by every
//! future version. The writer's output must equal the newest version's `small.sdx`.
//!
//! To regenerate the newest version's files after a deliberate writer change (see
//! `format-spec/README.md`), run `SIMDEX_REGENERATE_FIXTURES=1 cargo test --test it
//! fixtures` and commit the diff. Older versions' files are never regenerated.

use std::path::PathBuf;

use simdex::codec::{encode_all, Codec, SymbolHistogram};
use simdex::recovery::verify_segment;
use simdex::storage::FsStorage;
use simdex::{build_segment, BuildOptions, Error, QueryOptions, Segment};

use crate::common::{brute_force, Rng};

/// The newest format version of a segment without sketches, whose files the writer reproduces.
const NEWEST: u32 = 2;

fn fixture_of(version: u32, name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("fixtures/v{version}")).join(name)
}

fn fixture(name: &str) -> PathBuf {
    fixture_of(NEWEST, name)
}

/// The input of `small.sdx`: 1000 fingerprints with ids, random plus zeros, all-ones and a
/// cluster of near copies.
fn small_input() -> (Vec<u64>, Vec<u64>) {
    // The same input for every version.
    let text = std::fs::read_to_string(fixture_of(1, "small.txt")).expect("fixtures/v1/small.txt");
    text.lines()
        .map(|l| {
            let (fp, id) = l.split_once('\t').unwrap();
            (u64::from_str_radix(fp, 16).unwrap(), id.parse::<u64>().unwrap())
        })
        .unzip()
}

fn regenerate() -> bool {
    std::env::var_os("SIMDEX_REGENERATE_FIXTURES").is_some()
}

#[test]
fn worked_example_from_the_spec() {
    let xs = [0x1234_5678_9abc_def0u64, 0x1234_5678_9abc_def0, 0x1234_5678_9abd_0001];
    let code = SymbolHistogram::of_sorted(Codec::Xor, &xs).code();
    let mut lengths = [0u8; 65];
    lengths[16] = 1;
    lengths[64] = 1;
    assert_eq!(code.lengths(), &lengths);
    let blocks = encode_all(Codec::Xor, &code, &xs);
    assert_eq!(blocks.len(), 1);
    let (block, count, key) = &blocks[0];
    assert_eq!((*count, *key), (3, 0x1234_5678_9abd_0001));
    assert_eq!(&block[..11], &[0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x80, 0x00, 0x40]);
    assert!(block[11..].iter().all(|&b| b == 0));

    let code = SymbolHistogram::of_sorted(Codec::Delta, &xs).code();
    assert_eq!(code.word(13), (0, 1));
    let (block, _, _) = encode_all(Codec::Delta, &code, &xs)[0];
    assert_eq!(&block[8..11], &[0x82, 0x22, 0x00]);
}

#[test]
fn frozen_segment_reads_back_exactly() {
    if regenerate() {
        regenerate_fixtures();
    }
    for version in 1..=NEWEST {
        frozen_segment_reads_back(version);
    }
}

fn frozen_segment_reads_back(version: u32) {
    let (fps, ids) = small_input();
    let path = fixture_of(version, "small.sdx");
    let seg = Segment::open(&path).unwrap();
    assert_eq!(seg.format_version(), version);
    assert_eq!(seg.len(), 1000);
    assert_eq!(seg.design().summary(), "4 tables (4 blocks), p = 16, k = 3");
    let mut want: Vec<(u64, Option<u64>)> = fps.iter().zip(&ids).map(|(&f, &i)| (f, Some(i))).collect();
    want.sort_unstable();
    let got: Vec<(u64, Option<u64>)> = seg.entries().map(|e| e.unwrap()).collect();
    assert_eq!(got, want);
    let mut rng = Rng(3);
    for i in 0..200 {
        let q = rng.flip(fps[i * 5], (i % 5) as u32);
        for k in 0..=3 {
            assert_eq!(seg.query(q, &QueryOptions::within(k)).unwrap(), brute_force(&fps, Some(&ids), q, k));
        }
    }
    assert!(verify_segment(&FsStorage, &path).unwrap().is_clean());
}

#[test]
fn writer_output_is_frozen() {
    let (fps, ids) = small_input();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("small.sdx");
    build_segment(&FsStorage, &path, &fps, Some(&ids), &BuildOptions::default()).unwrap();
    assert!(std::fs::read(&path).unwrap() == std::fs::read(fixture("small.sdx")).unwrap(), "the writer's bytes changed: see format-spec/README.md, versioning rules");
}

#[test]
fn frozen_damaged_segments_are_refused_by_name() {
    for version in 1..=NEWEST {
        frozen_damaged_segments_are_refused(version);
    }
}

fn frozen_damaged_segments_are_refused(version: u32) {
    let fixture = |name: &str| fixture_of(version, name);
    // One bit flipped in block 2 of table 3.
    let path = fixture("damaged-block.sdx");
    let seg = Segment::open(&path).unwrap();
    let report = verify_segment(&FsStorage, &path).unwrap();
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    let p = &report.problems[0];
    assert_eq!((p.location.table, p.location.block), (Some(3), Some(2)));
    assert!(p.detail.contains("checksum"));
    // A full scan reads table 0 only and is not affected; reading table 3 is refused.
    let mut n = 0;
    for e in seg.table_entries(3) {
        match e {
            Ok(_) => n += 1,
            Err(Error::Corrupt { offset, location, .. }) => {
                assert_eq!(offset, p.offset);
                assert_eq!(location.block, Some(2));
                break;
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(n > 0);

    // Cut in the middle of table 1.
    let err = Segment::open(fixture("truncated.sdx")).unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("truncated.sdx") && err.to_string().contains("SIMDXEND"), "{err}");

    // A future version is refused clearly, not guessed at.
    let err = Segment::open(fixture("version-99.sdx")).unwrap_err();
    // (the newest version read is 3, a segment with a sketch column: generation 7 of the
    // index fixtures; these segments have none, so they are version 2)
    assert!(matches!(err, Error::UnsupportedVersion { found: 99, supported: 3, oldest: 1, .. }), "{err}");
    assert!(err.to_string().contains("versions 1 to 3"), "{err}");
}

fn regenerate_fixtures() {
    let mut rng = Rng(2026);
    let mut lines = String::new();
    let center = rng.next();
    for i in 0..1000u64 {
        let fp = match i % 10 {
            0 => 0,
            1 if i < 100 => u64::MAX,
            2 | 3 => {
                let n = (rng.next() % 4) as u32;
                rng.flip(center, n)
            }
            _ => rng.next(),
        };
        lines.push_str(&format!("{fp:016x}\t{}\n", 1_000_000 + i));
    }
    // The input is frozen with version 1's files; check it is still what this makes.
    assert_eq!(std::fs::read_to_string(fixture_of(1, "small.txt")).unwrap(), lines);
    std::fs::create_dir_all(fixture("")).unwrap();
    let (fps, ids) = small_input();
    build_segment(&FsStorage, &fixture("small.sdx"), &fps, Some(&ids), &BuildOptions::default()).unwrap();
    let seg = Segment::open(fixture("small.sdx")).unwrap();
    let bytes = std::fs::read(fixture("small.sdx")).unwrap();
    let mut damaged = bytes.clone();
    let at = seg.tables()[3].block_offset(2) as usize + 300;
    damaged[at] ^= 0x04;
    std::fs::write(fixture("damaged-block.sdx"), damaged).unwrap();
    let cut = seg.tables()[1].block_offset(1) as usize + 17;
    std::fs::write(fixture("truncated.sdx"), &bytes[..cut]).unwrap();
    let mut v99 = bytes.clone();
    v99[8..12].copy_from_slice(&99u32.to_le_bytes());
    std::fs::write(fixture("version-99.sdx"), v99).unwrap();
}
