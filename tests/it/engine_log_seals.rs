//! Issue 23, item 1: a log that holds less than the manifest recorded (cut at a record
//! boundary or inside a record, its last record damaged, or missing) is loss, counted
//! exactly by open, `verify` and `recover`; the open refuses (`LogRecovery::Strict`) or,
//! by the user's choice, opens at the point in time before the loss
//! (`LogRecovery::PointInTime`) and never hands out a lost sequence number again.
//!
//! The oracle: the live set after each record, kept while writing (`logged_index`), and
//! the record boundaries a reference scan of the intact log finds.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use simdex::log::{scan_log, ScanMode};
use simdex::recovery::verify_index;
use simdex::storage::{MemStorage, Storage};
use simdex::{FindOrInsert, Index, IndexOptions, LogRecovery, QueryOptions};

use crate::engine::mem_options;
use crate::engine_damage::{copy_of, logged_index};

const DIR: &str = "idx";

fn the_log(storage: &MemStorage) -> PathBuf {
    let name = storage.list(Path::new(DIR)).unwrap().into_iter().find(|n| n.starts_with("log-")).unwrap();
    Path::new(DIR).join(name)
}

fn copy_with(storage: &MemStorage, path: &Path, bytes: Option<&[u8]>) -> MemStorage {
    let copy = copy_of(storage);
    match bytes {
        Some(b) => copy.put(path, b),
        None => copy.remove(path).unwrap(),
    }
    copy
}

fn options(storage: &MemStorage, recovery: LogRecovery) -> IndexOptions {
    mem_options(storage, u64::MAX).with_log_recovery(recovery).with_flush_on_close(false)
}

/// (end offset, last sequence number) of every record of the intact log.
fn records(storage: &MemStorage) -> Vec<(u64, u64)> {
    let log = the_log(storage);
    let bytes = storage.file(&log).unwrap();
    let mut ends = Vec::new();
    let number = log.file_name().unwrap().to_str().unwrap()[4..16].parse().unwrap();
    scan_log(&log, &bytes, number, ScanMode::Strict, |r| {
        ends.push((r.offset + r.encoded_len() as u64, r.last_seq()));
        Ok(())
    })
    .unwrap();
    ends
}

fn live(index: &Index) -> BTreeSet<(u64, u64)> {
    index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>().into_iter().collect()
}

#[test]
fn a_sealed_log_cut_at_every_record_boundary_is_loss_counted_exactly_everywhere() {
    let (storage, _, after) = logged_index(300);
    let ends = records(&storage);
    let (total_ops, log) = (ends.last().unwrap().1, the_log(&storage));
    let bytes = storage.file(&log).unwrap();
    assert!(verify_index(&storage, Path::new(DIR)).unwrap().is_clean());
    // Every record boundary but the last (a cut there is no cut), and inside some records.
    let cuts: Vec<(usize, usize)> =
        (0..ends.len() - 1).map(|i| (ends[i].0 as usize, i + 1)).chain((0..ends.len() - 1).step_by(29).map(|i| (ends[i].0 as usize + 7, i + 1))).collect();
    for (cut, whole) in cuts {
        let kept_last = ends[whole - 1].1;
        let lost = total_ops - kept_last;
        let damaged = copy_with(&storage, &log, Some(&bytes[..cut]));
        // Strict (the default): refused, naming the log, the offset and the count.
        let e = Index::open_read_only(DIR, options(&damaged, LogRecovery::Strict)).unwrap_err();
        let msg = e.to_string();
        assert!(e.is_corruption() && msg.contains(&format!("{lost} acknowledged operations in all")), "cut at {cut}: {msg}");
        assert!(msg.contains(log.file_name().unwrap().to_str().unwrap()) && msg.contains(&format!("byte offset {}", ends[whole - 1].0)), "{msg}");
        // verify says DAMAGED with the same count.
        let report = verify_index(&damaged, Path::new(DIR)).unwrap();
        assert!(!report.is_clean(), "cut at {cut}: verify calls it clean");
        assert!(report.problems.iter().any(|p| p.detail.contains(&format!("{lost} acknowledged operations"))), "cut at {cut}: {:?}", report.problems);
        // Point in time: exactly the whole records before the cut, the loss counted.
        let reader = Index::open_read_only(DIR, options(&damaged, LogRecovery::PointInTime)).unwrap();
        assert_eq!(live(&reader), after[whole], "cut at {cut}");
        assert_eq!(reader.open_report().lost_ops, lost, "cut at {cut}: {:?}", reader.open_report().lost);
    }
}

#[test]
fn opening_past_a_loss_never_hands_out_a_sequence_number_twice_and_later_opens_are_clean() {
    let (storage, _, after) = logged_index(200);
    let ends = records(&storage);
    let total_ops = ends.last().unwrap().1;
    let log = the_log(&storage);
    let bytes = storage.file(&log).unwrap();
    let damaged = copy_with(&storage, &log, Some(&bytes[..ends[99].0 as usize]));
    let index = Index::open(DIR, options(&damaged, LogRecovery::PointInTime)).unwrap();
    assert_eq!(index.open_report().lost_ops, total_ops - ends[99].1);
    assert_eq!(live(&index), after[100]);
    // The next insert takes the number after the last one ever acknowledged.
    match index.find_or_insert(0x5555_5555_5555_5555, 1, &QueryOptions::within(0)).unwrap() {
        FindOrInsert::Inserted { seq } => assert_eq!(seq, total_ops + 1),
        other => panic!("{other:?}"),
    }
    index.close().unwrap();
    // The loss is history now: a strict open and verify are clean, and nothing came back.
    assert!(verify_index(&damaged, Path::new(DIR)).unwrap().is_clean());
    let index = Index::open(DIR, options(&damaged, LogRecovery::Strict)).unwrap();
    assert!(index.open_report().lost.is_empty(), "{:?}", index.open_report());
    let mut want = after[100].clone();
    want.insert((0x5555_5555_5555_5555, 1));
    assert_eq!(live(&index), want);
    index.insert(7, 7).unwrap();
    index.close().unwrap();
}

#[test]
fn a_missing_sealed_log_and_a_damaged_last_record_are_counted_exactly_by_recover() {
    let (storage, _, _) = logged_index(120);
    let ends = records(&storage);
    let total_ops = ends.last().unwrap().1;
    let log = the_log(&storage);
    let bytes = storage.file(&log).unwrap();
    // The whole log gone: every operation of it.
    let gone = copy_with(&storage, &log, None);
    let e = Index::open_read_only(DIR, options(&gone, LogRecovery::Strict)).unwrap_err();
    assert!(e.to_string().contains("missing") && e.to_string().contains(&format!("{total_ops} acknowledged operations in all")), "{e}");
    let out = MemStorage::default();
    let report = simdex::recovery::salvage(&gone, Path::new(DIR), Path::new("out"), IndexOptions::default().with_storage(std::sync::Arc::new(out))).unwrap();
    assert_eq!((report.log_ops_lost, report.log_ops_possibly_lost), (total_ops, 0), "{:?}", report.lost);
    // A flipped byte in the last record's payload: that record's operations, exactly.
    let mut flipped = bytes.clone();
    let last_start = ends[ends.len() - 2].0 as usize;
    flipped[last_start + 30] ^= 0x10;
    let last_ops = total_ops - ends[ends.len() - 2].1;
    let damaged = copy_with(&storage, &log, Some(&flipped));
    let out = MemStorage::default();
    let report = simdex::recovery::salvage(&damaged, Path::new(DIR), Path::new("out"), IndexOptions::default().with_storage(std::sync::Arc::new(out))).unwrap();
    assert_eq!((report.log_ops_lost, report.log_ops_possibly_lost), (last_ops, 0), "{:?}", report.lost);
    let reader = Index::open_read_only(DIR, options(&damaged, LogRecovery::PointInTime)).unwrap();
    assert_eq!(reader.open_report().lost_ops, last_ops);
    // A cut inside the last record: its operations, exactly, not "possibly".
    let cut = copy_with(&storage, &log, Some(&bytes[..last_start + 20]));
    let out = MemStorage::default();
    let report = simdex::recovery::salvage(&cut, Path::new(DIR), Path::new("out"), IndexOptions::default().with_storage(std::sync::Arc::new(out))).unwrap();
    assert_eq!((report.log_ops_lost, report.log_ops_possibly_lost), (last_ops, 0), "{:?}", report.lost);
}

#[test]
fn a_log_a_crash_left_unsealed_still_opens_as_before() {
    // The crash image: no manifest records the log; its records are replayed as they are.
    let (_, crashed, after) = logged_index(50);
    let index = Index::open(DIR, options(&crashed, LogRecovery::Strict)).unwrap();
    assert_eq!(live(&index), after[50]);
    assert!(index.open_report().lost.is_empty());
    index.close().unwrap();
    // Closed cleanly now, the log is sealed: deleting it is counted.
    let log = the_log(&crashed);
    let gone = copy_with(&crashed, &log, None);
    assert!(Index::open_read_only(DIR, options(&gone, LogRecovery::Strict)).unwrap_err().is_corruption());
}
