//! The engine end to end: writes, queries, deletes, flushes, compaction, reopen, locking,
//! read-only opens, orphans. The model test (`engine_model`) and the crash tests
//! (`engine_crash`) live in their own modules.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use simdex::storage::{MemStorage, Storage};
use simdex::{CompactionOptions, FindOrInsert, IndexOptions};
use simdex::{Durability, Error, Index, Match, QueryOptions};

use crate::common::Rng;

/// Options for deterministic tests: in-memory storage, no background thread, small
/// memtables so flushes and compactions happen.
pub fn mem_options(storage: &MemStorage, memtable_ops: u64) -> IndexOptions {
    IndexOptions::default()
        .with_storage(Arc::new(storage.clone()))
        .with_background(false)
        .with_memtable_ops(memtable_ops)
        .with_durability(Durability::Sync)
        .with_compaction(CompactionOptions::default().with_fanout(3).with_buffer_entries(4096).with_automatic(true))
}

/// The oracle: every live pair within `k` of `q`.
pub fn model_query(live: &BTreeSet<(u64, u64)>, q: u64, k: u32) -> Vec<Match> {
    let mut v: Vec<Match> = live.iter().filter(|(fp, _)| (fp ^ q).count_ones() <= k).map(|&(fp, id)| Match::new(fp, (fp ^ q).count_ones(), Some(id))).collect();
    v.sort_unstable();
    v
}

#[test]
fn writes_are_visible_at_once_and_survive_flush_compaction_and_reopen() {
    let storage = MemStorage::default();
    let dir = std::path::Path::new("idx");
    let mut rng = Rng(1);
    let mut live = BTreeSet::new();
    let index = Index::open(dir, mem_options(&storage, 500)).unwrap();
    assert!(index.open_report().created);
    for i in 0..5000u64 {
        let fp = if i % 7 == 0 { rng.flip(0x1234_5678_9abc_def0, (i % 4) as u32) } else { rng.next() };
        index.insert(fp, i).unwrap();
        live.insert((fp, i));
        if i % 11 == 0 {
            let &(f, id) = live.iter().nth((rng.next() % live.len() as u64) as usize).unwrap();
            index.delete(f, id).unwrap();
            live.remove(&(f, id));
        }
        if i % 500 == 0 {
            let q = rng.flip(fp, 2);
            assert_eq!(index.query(q, &QueryOptions::within(3)).unwrap(), model_query(&live, q, 3), "after insert {i}");
        }
    }
    let stats = index.stats();
    assert!(stats.flushes >= 9 && stats.compactions >= 1, "{stats:?}");
    assert!(stats.segments.len() <= 6, "{stats:?}");
    let check = |index: &Index, live: &BTreeSet<(u64, u64)>| {
        assert_eq!(index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>(), live.iter().copied().collect::<Vec<_>>());
        for q in [0x1234_5678_9abc_def0u64, 0x1234_5678_9abc_def1, 42] {
            assert_eq!(index.query(q, &QueryOptions::within(3)).unwrap(), model_query(live, q, 3));
        }
    };
    check(&index, &live);
    index.compact().unwrap();
    assert_eq!(index.stats().segments.len(), 1);
    assert_eq!(index.stats().tombstone_files, 0);
    check(&index, &live);
    index.insert(7, 7).unwrap();
    live.insert((7, 7));
    index.close().unwrap();
    let index = Index::open(dir, mem_options(&storage, 500)).unwrap();
    // close flushed the last insert into a segment: nothing to replay
    assert_eq!(index.open_report().replayed_ops, 0);
    check(&index, &live);
}

#[test]
fn find_or_insert_checks_then_adds() {
    let storage = MemStorage::default();
    let index = Index::open("i", mem_options(&storage, 100)).unwrap();
    assert_eq!(index.find_or_insert(0xff, 1, &QueryOptions::within(3)).unwrap(), FindOrInsert::Inserted { seq: 1 });
    match index.find_or_insert(0xfe, 2, &QueryOptions::within(3)).unwrap() {
        FindOrInsert::Found(m) => assert_eq!(m, vec![Match::new(0xff, 1, Some(1))]),
        other => panic!("{other:?}"),
    }
    assert!(matches!(index.find_or_insert(0xfe, 2, &QueryOptions::within(0)).unwrap(), FindOrInsert::Inserted { .. }));
    assert_eq!(index.query(0xf0, &QueryOptions::within(4)).unwrap().len(), 2, "k above the design's: multi-probe");
    assert!(matches!(index.query(0, &QueryOptions::within(9)), Err(Error::KTooLarge { .. })));
}

#[test]
fn a_second_writer_is_refused_and_names_the_lock_file_while_readers_open() {
    let dir = tempfile::tempdir().unwrap();
    let writer = Index::open(dir.path(), IndexOptions::default()).unwrap();
    writer.insert(1, 1).unwrap();
    let err = Index::open(dir.path(), IndexOptions::default()).unwrap_err();
    assert!(matches!(&err, Error::Locked { path } if path.ends_with("LOCK")), "{err}");
    assert!(err.to_string().contains("LOCK"), "{err}");
    let reader = Index::open_read_only(dir.path(), IndexOptions::default()).unwrap();
    assert_eq!(reader.query(1, &QueryOptions::within(0)).unwrap().len(), 1);
    assert!(matches!(reader.insert(2, 2), Err(Error::ReadOnly { .. })));
    drop(writer);
    let again = Index::open(dir.path(), IndexOptions::default()).unwrap();
    assert_eq!(again.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>(), vec![(1, 1)]);
}

#[test]
fn orphans_are_removed_and_unknown_files_reported() {
    let storage = MemStorage::default();
    let dir = std::path::Path::new("idx");
    let index = Index::open(dir, mem_options(&storage, 100)).unwrap();
    index.insert(5, 5).unwrap();
    index.close().unwrap();
    storage.put(&dir.join("seg-000000000099.sdx"), b"left by a flush that never installed");
    storage.put(&dir.join("seg-000000000100.sdx.tmp"), b"half written");
    storage.put(&dir.join("notes.txt"), b"mine");
    let index = Index::open(dir, mem_options(&storage, 100)).unwrap();
    let report = index.open_report();
    assert_eq!(report.removed, vec!["seg-000000000099.sdx".to_string(), "seg-000000000100.sdx.tmp".to_string()]);
    assert_eq!(report.unknown, vec!["notes.txt".to_string()]);
    assert!(storage.file(&dir.join("notes.txt")).is_some());
    assert_eq!(index.stats().unknown_files, vec!["notes.txt".to_string()]);
    // MANIFEST, the segment close flushed and its id table, the log and notes.txt (the
    // in-memory lock is not a file).
    assert_eq!(storage.list(dir).unwrap().len(), 5, "{:?}", storage.list(dir));
}

#[test]
fn background_thread_flushes_and_compacts_while_queries_run() {
    let dir = tempfile::tempdir().unwrap();
    let options = IndexOptions::default().with_memtable_ops(2000);
    let index = Arc::new(Index::open(dir.path(), options).unwrap());
    let mut rng = Rng(9);
    let pairs: Vec<(u64, u64)> = (0..40_000u64).map(|i| (rng.next(), i)).collect();
    index.insert_many(&pairs[..100].iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
    let reader = {
        let index = index.clone();
        let probe = pairs[0];
        std::thread::spawn(move || {
            for _ in 0..2000 {
                assert!(index.query(probe.0, &QueryOptions::within(3)).unwrap().contains(&Match::new(probe.0, 0, Some(probe.1))));
            }
        })
    };
    for chunk in pairs[100..].chunks(100) {
        index.insert_many(&chunk.iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
    }
    reader.join().unwrap();
    index.flush().unwrap();
    index.compact_tiered().unwrap();
    let stats = index.stats();
    assert!(stats.maintenance_error.is_none(), "{stats:?}");
    assert!(stats.segments.len() <= 8, "{stats:?}");
    let mut want = pairs.clone();
    want.sort_unstable();
    assert_eq!(index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>(), want);
    // Compactions without deletes merge the permuted tables directly: check them all.
    assert!(stats.compactions > 0);
    let report = simdex::recovery::verify_index(&simdex::storage::FsStorage, dir.path()).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    let live: BTreeSet<(u64, u64)> = pairs.iter().copied().collect();
    for &(fp, _) in pairs.iter().step_by(997) {
        let q = rng.flip(fp, 3);
        assert_eq!(index.query(q, &QueryOptions::within(3)).unwrap(), model_query(&live, q, 3));
    }
}

#[test]
fn read_only_opens_see_every_write_made_before_them_while_a_writer_flushes_and_compacts() {
    let dir = tempfile::tempdir().unwrap();
    let options = IndexOptions::default().with_memtable_ops(300).with_durability(Durability::NoSync);
    let writer = Arc::new(Index::open(dir.path(), options).unwrap());
    let acked = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let thread = {
        let (writer, acked, stop) = (writer.clone(), acked.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let batch: Vec<(u64, u64)> = (i..i + 50).map(|j| (j.wrapping_mul(0x9e37_79b9_7f4a_7c15), j)).collect();
                writer.insert_many(&batch.iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
                i += 50;
                acked.store(i, std::sync::atomic::Ordering::SeqCst);
            }
        })
    };
    // at least 40 reader opens, and on until the writer has flushed more than 3 times (a slow
    // or loaded machine gets there later, never a fixed time), so reads race flushes and merges
    let mut reads = 0;
    while reads < 40 || (writer.stats().flushes <= 3 && reads < 100_000) {
        reads += 1;
        std::thread::sleep(std::time::Duration::from_millis(3));
        let before = acked.load(std::sync::atomic::Ordering::SeqCst);
        let reader = Index::open_read_only(dir.path(), IndexOptions::default()).unwrap();
        let got = reader.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>();
        assert!(got.len() as u64 >= before, "a reader opened after {before} writes sees {}", got.len());
        for j in (0..before).step_by(97) {
            assert!(got.binary_search(&(j.wrapping_mul(0x9e37_79b9_7f4a_7c15), j)).is_ok(), "write {j} of {before} missing");
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    thread.join().unwrap();
    assert!(writer.stats().flushes > 3, "{reads} reader opens while the writer flushed {} times", writer.stats().flushes);
}

#[test]
fn close_flushes_the_memtable_so_a_reopen_replays_nothing() {
    let storage = MemStorage::default();
    let options = || mem_options(&storage, 1 << 20).with_flush_on_close(true);
    let index = Index::open("/idx", options()).unwrap();
    let pairs: Vec<(u64, u64)> = (0..5000u64).map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15), i)).collect();
    index.insert_many(&pairs.iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
    index.delete(pairs[0].0, pairs[0].1).unwrap();
    index.close().unwrap();
    let reopened = Index::open("/idx", options()).unwrap();
    assert_eq!(reopened.open_report().replayed_ops, 0, "{:?}", reopened.open_report());
    assert_eq!(reopened.stats().segments.len(), 1);
    let live: BTreeSet<(u64, u64)> = reopened.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>().into_iter().collect();
    assert_eq!(live, pairs[1..].iter().copied().collect());
    // Closing an index with nothing new writes nothing.
    let files = storage.list(Path::new("/idx")).unwrap();
    reopened.close().unwrap();
    assert_eq!(storage.list(Path::new("/idx")).unwrap(), files);
}

/// Records without ids get their own sequence numbers, assigned under the writer's lock:
/// four threads adding at once (with flushes between) store every id once, and each
/// fingerprint under the sequence number its insert got (the oracle: the numbers each call
/// returned), mixed with records that bring their own ids.
#[test]
fn numbered_inserts_from_many_threads_never_share_an_id() {
    let storage = MemStorage::default();
    let index = Arc::new(Index::open("numbered", mem_options(&storage, 500)).unwrap());
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let index = index.clone();
            std::thread::spawn(move || {
                let mut expected = Vec::new();
                for round in 0..50u64 {
                    let fps: Vec<(u64, Option<u64>)> = (0..7u64).map(|i| (t << 48 | round << 8 | i, (i == 3).then_some(1 << 40 | t << 20 | round))).collect();
                    let last = index.insert_many_numbered(&fps).unwrap();
                    let first = last + 1 - fps.len() as u64;
                    expected.extend(fps.iter().zip(first..).map(|(&(fp, id), seq)| (fp, id.unwrap_or(seq))));
                }
                expected
            })
        })
        .collect();
    let mut expected: Vec<(u64, u64)> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
    expected.sort_unstable();
    assert_eq!(index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>(), expected);
    let ids: BTreeSet<u64> = expected.iter().map(|&(_, id)| id).collect();
    assert_eq!(ids.len(), expected.len(), "an id was given twice");
    let seq_ids: Vec<u64> = ids.iter().copied().filter(|&id| id < 1 << 40).collect();
    // six of every seven records were numbered, each with a sequence number of the 1,400 writes
    assert_eq!(seq_ids.len(), 4 * 50 * 6);
    assert!(seq_ids.iter().all(|&s| (1..=4 * 50 * 7).contains(&s)), "{seq_ids:?}");
}

#[test]
fn durability_sync_shares_fsyncs_among_concurrent_writers_and_every_returned_write_survives_a_crash() {
    let storage = MemStorage::default();
    let dir = Path::new("idx");
    let options = IndexOptions::default().with_storage(Arc::new(storage.clone())).with_durability(Durability::Sync);
    let index = Arc::new(Index::open(dir, options.clone()).unwrap());
    let (threads, each) = (8u64, 100u64);
    let writers: Vec<_> = (0..threads)
        .map(|t| {
            let index = Arc::clone(&index);
            std::thread::spawn(move || {
                let mut rng = Rng(100 + t);
                let mut returned = Vec::new();
                for i in 0..each {
                    let pair = (rng.next(), t << 32 | i);
                    match i % 3 {
                        0 => drop(index.insert(pair.0, pair.1).unwrap()),
                        1 => assert!(matches!(index.find_or_insert(pair.0, pair.1, &QueryOptions::within(0)).unwrap(), FindOrInsert::Inserted { .. })),
                        _ => drop(index.insert_many(&[pair.into()]).unwrap()),
                    }
                    returned.push(pair);
                }
                returned
            })
        })
        .collect();
    let returned: BTreeSet<(u64, u64)> = writers.into_iter().flat_map(|w| w.join().unwrap()).collect();
    let stats = index.stats();
    assert_eq!(stats.synced_seq, stats.last_seq, "every returned write is synced");
    assert!(stats.log_syncs <= threads * each, "at most one fsync per write: {}", stats.log_syncs);
    // a crash now: the storage keeps only what was synced
    let crashed = storage.restart();
    drop(index);
    let reopened = Index::open(dir, options.with_storage(Arc::new(crashed))).unwrap();
    let live: BTreeSet<(u64, u64)> = reopened.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect();
    assert_eq!(live, returned, "every write that returned under Durability::Sync survived the crash");
}
