//! Damaged index files: the log cut at every byte, every single-bit flip of a log, of a
//! 64 KiB segment and of the manifest. Recovery yields exactly the intact prefix of a cut
//! log; every flip is reported as a typed error (or, for segment blocks no query reads,
//! by verify), never a wrong answer or a panic.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use simdex::log::{scan_log, ScanMode};
use simdex::recovery::verify_index;
use simdex::recovery::verify_segment::verify_segment_bytes;
use simdex::storage::{FileBytes, MemStorage, Storage};
use simdex::{Index, QueryOptions, Segment};

use crate::common::{brute_force, Rng};
use crate::engine::mem_options;

const DIR: &str = "idx";

fn file_named(storage: &MemStorage, prefix: &str) -> PathBuf {
    let name = storage.list(Path::new(DIR)).unwrap().into_iter().find(|n| n.starts_with(prefix)).unwrap();
    Path::new(DIR).join(name)
}

/// An index whose only data is a log of `records` records (single inserts, batches and
/// deletes); returns the storage after a clean close (the manifest records the log's
/// length: a seal), the storage as a crash just before that close left it (no seal of the
/// log), and the live set after each record.
pub(crate) fn logged_index(records: usize) -> (MemStorage, MemStorage, Vec<BTreeSet<(u64, u64)>>) {
    let storage = MemStorage::default();
    // close leaves the memtable in the log (the default would flush it into a segment)
    let index = Index::open(DIR, mem_options(&storage, u64::MAX).with_flush_on_close(false)).unwrap();
    let mut rng = Rng(77);
    let mut live = BTreeSet::new();
    let mut after = vec![live.clone()];
    for i in 0..records as u64 {
        match i % 10 {
            3 => {
                let pairs: Vec<(u64, u64)> = (0..3).map(|j| (rng.next(), 1000 * i + j)).collect();
                index.insert_many(&pairs.iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
                live.extend(pairs);
            }
            7 => {
                let victim = *live.iter().next().unwrap();
                index.delete(victim.0, victim.1).unwrap();
                live.remove(&victim);
            }
            _ => {
                let fp = rng.next();
                index.insert(fp, i).unwrap();
                live.insert((fp, i));
            }
        }
        after.push(live.clone());
    }
    // every record is written and synced: a copy now is what a kill -9 would leave
    let crashed = copy_of(&storage);
    index.close().unwrap();
    (storage, crashed, after)
}

/// A copy of every file of `storage`'s index as it stands.
pub(crate) fn copy_of(storage: &MemStorage) -> MemStorage {
    let copy = MemStorage::default();
    for name in storage.list(Path::new(DIR)).unwrap() {
        let p = Path::new(DIR).join(&name);
        copy.put(&p, &storage.file(&p).unwrap());
    }
    copy
}

/// A copy of `storage`'s index with `path` replaced by `bytes`.
fn with_file(storage: &MemStorage, path: &Path, bytes: &[u8]) -> MemStorage {
    let copy = copy_of(storage);
    copy.put(path, bytes);
    copy
}

/// Where a crash left the log (no seal of it in the manifest), a cut anywhere is what a
/// crash mid-append leaves: the open keeps exactly the whole records before it. (A cut of a
/// log the manifest has a seal of is loss: `engine_log_seals`.)
#[test]
fn a_crashed_log_cut_at_every_byte_recovers_exactly_the_whole_records_before_the_cut() {
    let (_, storage, after) = logged_index(1000);
    let log = file_named(&storage, "log-");
    let bytes = storage.file(&log).unwrap();
    // Where each record ends.
    let mut ends = Vec::new();
    scan_log(&log, &bytes, 2, ScanMode::Strict, |r| {
        ends.push(r.offset + r.encoded_len() as u64);
        Ok(())
    })
    .unwrap();
    assert_eq!(ends.len(), 1000);
    eprintln!("log of {} records, {} bytes: {} cut offsets", ends.len(), bytes.len(), bytes.len() + 1);
    for cut in 0..=bytes.len() {
        let damaged = with_file(&storage, &log, &bytes[..cut]);
        let index = Index::open_read_only(DIR, mem_options(&damaged, u64::MAX)).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        let whole = ends.iter().filter(|&&e| e <= cut as u64).count();
        let got: BTreeSet<(u64, u64)> = index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>().into_iter().collect();
        assert_eq!(got, after[whole], "cut at {cut}: expected the {whole} whole records");
    }
    // A writable open cuts the torn tail and goes on appending after it.
    let cut = (ends[500] + 5) as usize;
    let damaged = with_file(&storage, &log, &bytes[..cut]);
    let index = Index::open(DIR, mem_options(&damaged, u64::MAX)).unwrap();
    assert_eq!(index.open_report().logs[0].valid_len, ends[500]);
    index.insert(1, 1).unwrap();
    drop(index);
    let index = Index::open(DIR, mem_options(&damaged, u64::MAX)).unwrap();
    assert_eq!(index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>().len(), after[501].len() + 1);
}

#[test]
fn every_single_bit_flip_of_a_log_is_reported_on_open() {
    let (storage, _, _) = logged_index(150);
    let log = file_named(&storage, "log-");
    let bytes = storage.file(&log).unwrap();
    eprintln!("log of {} bytes: {} single-bit flips", bytes.len(), bytes.len() * 8);
    for bit in 0..bytes.len() * 8 {
        let mut flipped = bytes.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        let damaged = with_file(&storage, &log, &flipped);
        match Index::open_read_only(DIR, mem_options(&damaged, u64::MAX)) {
            Err(e) => assert!(e.is_corruption(), "bit {bit}: {e}"),
            Ok(_) => panic!("bit {bit} (byte {}) of the log went unnoticed", bit / 8),
        }
    }
}

#[test]
fn every_single_bit_flip_and_truncation_of_the_manifest_is_a_typed_error() {
    let storage = MemStorage::default();
    let index = Index::open(DIR, mem_options(&storage, 50)).unwrap();
    for i in 0..400u64 {
        index.insert(i.wrapping_mul(0x9e37_79b9_7f4a_7c15), i).unwrap();
        if i % 90 == 0 {
            index.delete(0, 0).unwrap();
        }
    }
    index.close().unwrap();
    let manifest = Path::new(DIR).join("MANIFEST");
    let bytes = storage.file(&manifest).unwrap();
    assert!(bytes.len() > 100);
    eprintln!("manifest of {} bytes: {} single-bit flips, {} truncations", bytes.len(), bytes.len() * 8, bytes.len());
    for bit in 0..bytes.len() * 8 {
        let mut flipped = bytes.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        let err = Index::open_read_only(DIR, mem_options(&with_file(&storage, &manifest, &flipped), 50)).unwrap_err();
        assert!(err.is_corruption(), "bit {bit}: {err}");
    }
    for len in 0..bytes.len() {
        let err = Index::open_read_only(DIR, mem_options(&with_file(&storage, &manifest, &bytes[..len]), 50)).unwrap_err();
        assert!(err.is_corruption(), "length {len}: {err}");
    }
}

#[test]
fn every_single_bit_flip_of_a_64_kib_segment_is_detected_never_a_wrong_answer() {
    let storage = MemStorage::default();
    let mut options = mem_options(&storage, 1700);
    options.compaction.automatic = false;
    let index = Index::open(DIR, options.clone()).unwrap();
    let mut rng = Rng(5);
    let pairs: Vec<(u64, u64)> = (0..1700u64).map(|i| (if i % 40 == 0 { 0 } else { rng.next() }, i)).collect();
    index.insert_many(&pairs.iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
    index.close().unwrap();
    let seg = file_named(&storage, "seg-").with_extension("sdx");
    let bytes = storage.file(&seg).unwrap();
    assert!(bytes.len() >= 64 << 10, "{} bytes", bytes.len());
    eprintln!("segment of {} bytes: {} single-bit flips", bytes.len(), bytes.len() * 8);
    let (fps, ids): (Vec<u64>, Vec<u64>) = pairs.iter().copied().unzip();
    let queries: Vec<u64> = (0..8).map(|i| rng.flip(fps[i * 200 + 1], (i % 4) as u32)).collect();
    let expected: Vec<_> = queries.iter().map(|&q| brute_force(&fps, Some(&ids), q, 3)).collect();
    let bits = bytes.len() * 8;
    let threads = 2;
    std::thread::scope(|s| {
        for part in 0..threads {
            let (bytes, queries, expected) = (&bytes, &queries, &expected);
            s.spawn(move || {
                for bit in (part..bits).step_by(threads) {
                    let mut flipped = bytes.clone();
                    flipped[bit / 8] ^= 1 << (bit % 8);
                    let flipped = FileBytes::from_vec(flipped);
                    let path = PathBuf::from("damaged.sdx");
                    let full_verify = || assert!(!verify_segment_bytes(&path, flipped.clone()).unwrap().is_clean(), "bit {bit} not detected by verify");
                    let segment = match Segment::from_bytes(path.clone(), flipped.clone()) {
                        Err(e) => {
                            assert!(e.is_corruption(), "bit {bit}: {e}");
                            continue;
                        }
                        Ok(segment) => segment,
                    };
                    for (q, want) in queries.iter().zip(expected).skip(bit % 4).step_by(4) {
                        match segment.query(*q, &QueryOptions::within(3)) {
                            Ok(got) => assert_eq!(&got, want, "bit {bit}: wrong answer"),
                            Err(e) => assert!(e.is_corruption(), "bit {bit}: {e}"),
                        }
                    }
                    // Verify reads every block and id page through the same CRC checks as
                    // queries; checking the one the flip is in is the same test, cheaper.
                    // Flips elsewhere (padding), and every 64th flip, get the full verify.
                    let byte = (bit / 8) as u64;
                    let in_block = segment.tables().iter().enumerate().find_map(|(t, table)| {
                        let start = table.block_offset(0);
                        (byte >= start && byte < start + table.block_count() * 1024).then(|| (t, (byte - start) / 1024))
                    });
                    match in_block {
                        Some((t, b)) => assert!(segment.block(t, b).is_err(), "bit {bit}: block {b} of table {t} passed its check"),
                        None => {
                            let id_pages_fail = (0..segment.len().div_ceil(128)).any(|p| segment.doc_id(p * 128).is_err());
                            if !id_pages_fail {
                                full_verify();
                            }
                        }
                    }
                    if bit % 64 == 0 {
                        full_verify();
                    }
                }
            });
        }
    });
    // Through the index: open refuses a damaged structure; verify names the file.
    let mut flipped = bytes.clone();
    flipped[bytes.len() / 2] ^= 0x10;
    let damaged = with_file(&storage, &seg, &flipped);
    let report = verify_index(&damaged, Path::new(DIR)).unwrap();
    assert!(!report.is_clean());
    assert!(report.problems.iter().any(|p| p.file.starts_with("seg-")), "{:?}", report.problems);
}

/// Compaction of segments whose design it keeps (the merge path, whose histogram pass runs
/// on a second thread) over a damaged block of a permuted table: a typed corruption error,
/// and the index keeps its segments and every entry.
#[test]
fn compaction_over_a_damaged_permuted_table_fails_cleanly_and_keeps_the_inputs() {
    let storage = MemStorage::default();
    let mut options = mem_options(&storage, 600);
    options.compaction.automatic = false;
    let index = Index::open(DIR, options.clone()).unwrap();
    let mut rng = Rng(17);
    let pairs: Vec<(u64, u64)> = (0..1200u64).map(|i| (rng.next(), i)).collect();
    index.insert_many(&pairs[..600].iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
    index.flush().unwrap();
    index.insert_many(&pairs[600..].iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
    index.flush().unwrap();
    index.close().unwrap();
    let mut segs: Vec<String> = storage.list(Path::new(DIR)).unwrap().into_iter().filter(|n| n.starts_with("seg-") && n.ends_with(".sdx")).collect();
    segs.sort();
    assert_eq!(segs.len(), 2);
    let seg = Path::new(DIR).join(&segs[1]);
    let bytes = storage.file(&seg).unwrap();
    let segment = Segment::from_bytes(seg.clone(), FileBytes::from_vec(bytes.to_vec())).unwrap();
    let last = segment.tables().len() - 1;
    assert!(last >= 1);
    // a bit in the middle of the first block of the last permuted table
    let at = segment.tables()[last].block_offset(0) as usize + 512;
    let mut flipped = bytes.to_vec();
    flipped[at] ^= 0x04;
    let damaged = with_file(&storage, &seg, &flipped);
    let index = Index::open(DIR, mem_options(&damaged, 600)).unwrap();
    let before = index.stats().segments.len();
    let err = index.compact().unwrap_err();
    assert!(err.is_corruption(), "{err}");
    assert!(err.to_string().contains(&segs[1]), "the error names the damaged file: {err}");
    assert_eq!(index.stats().segments.len(), before);
    drop(index);
    // the undamaged file back: nothing was lost, and compaction now succeeds
    let restored = with_file(&damaged, &seg, &bytes);
    let index = Index::open(DIR, mem_options(&restored, 600)).unwrap();
    index.compact().unwrap();
    assert_eq!(index.stats().segments.len(), 1);
    let mut got = index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>();
    got.sort();
    let mut want = pairs.clone();
    want.sort();
    assert_eq!(got, want);
}
