//! Memtables left in their logs: a close after a burst of writes (more than one memtable's
//! worth unflushed, a background thread) flushes none of them, and the next open replays the
//! logs into memtables of `memtable_ops` operations each (a long log in several pieces), which
//! are flushed one by one, each log deleted once its last piece is in a segment
//! (`src/engine/replay.rs`, `Index::close`). Oracles: the model of every acknowledged write,
//! and the directory's files; a simulated crash at every storage operation of the piecewise
//! flush must lose nothing.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use simdex::storage::{CrashMode, MemStorage, Storage};
use simdex::{CompactionOptions, Durability, Entry, Index, IndexOptions};

use crate::common::{hold_then_slow, Intercepted, Rng};
use crate::engine::mem_options;

const DIR: &str = "pieces";

type Pairs = BTreeSet<(u64, u64)>;

fn live(index: &Index) -> BTreeSet<(u64, u64)> {
    index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect()
}

fn names(storage: &dyn Storage, suffix: &str) -> Vec<String> {
    storage.list(Path::new(DIR)).unwrap().into_iter().filter(|n| n.ends_with(suffix)).collect()
}

/// A segment, then one log of 32 operations (no memtable limit, no flush on close): inserts
/// single and batched, deletes of pairs in the segment and in the log, and a pair deleted
/// then inserted again. Returns the model.
fn one_long_log(storage: &MemStorage) -> BTreeSet<(u64, u64)> {
    let index = Index::open(DIR, mem_options(storage, u64::MAX).with_flush_on_close(false)).unwrap();
    let mut rng = Rng(45);
    let mut model = BTreeSet::new();
    let mut inserted: Vec<(u64, u64)> = Vec::new();
    let mut deleted = Vec::new();
    for i in 0..44u64 {
        if i == 12 {
            index.flush().unwrap();
        }
        let ops: Vec<(u64, u64)> = if i % 7 == 3 && !inserted.is_empty() {
            let pair = inserted[(rng.next() % inserted.len() as u64) as usize];
            index.delete(pair.0, pair.1).unwrap();
            model.remove(&pair);
            deleted.push(pair);
            continue;
        } else if i == 40 {
            vec![deleted[0]]
        } else if i % 5 == 1 {
            (0..3).map(|j| (rng.next(), i * 10 + j)).collect()
        } else {
            vec![(rng.next(), i * 10)]
        };
        index.insert_many(&ops.iter().map(|&p| Entry::from(p)).collect::<Vec<_>>()).unwrap();
        model.extend(ops.iter().copied());
        inserted.extend(ops);
    }
    index.close().unwrap();
    assert_eq!(names(storage, ".wal").len(), 1, "one log holds everything after the flush");
    model
}

/// The second writer, with memtables of 8 operations: its open replays the long log in
/// pieces; its writes freeze the active memtable, which flushes every piece, oldest first,
/// then the close flushes the rest. Returns the model of what it acknowledged (on top of
/// `model`) and the operation in flight when the storage failed, if any.
fn piecewise(storage: &MemStorage, mut model: Pairs) -> (Pairs, Option<(u64, u64)>) {
    let Ok(index) = Index::open(DIR, mem_options(storage, 8)) else { return (model, None) };
    for i in 0..12u64 {
        let pair = (0x5eed_0000_0000_0000 ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15), 1_000_000 + i);
        if index.insert(pair.0, pair.1).is_err() {
            return (model, Some(pair));
        }
        model.insert(pair);
    }
    if index.close().is_err() {
        return (model, None);
    }
    (model, None)
}

#[test]
fn a_long_log_is_replayed_in_memtable_sized_pieces_and_flushed_one_by_one() {
    let storage = MemStorage::default();
    let model = one_long_log(&storage);
    let log = names(&storage, ".wal");
    let index = Index::open(DIR, mem_options(&storage, 8)).unwrap();
    let stats = index.stats();
    let replayed = index.open_report().replayed_ops;
    assert!(replayed > 24, "{replayed}");
    // pieces of 8 (a batch record may end one past it), the last one the active memtable
    assert!(stats.frozen_memtables >= 3 && stats.frozen_memtables as u64 <= replayed / 8, "{stats:?}");
    assert_eq!(live(&index), model);
    assert_eq!(names(&storage, ".wal"), log, "the writer appends to the replayed log");
    drop(index);
    let (model, in_flight) = piecewise(&storage, model);
    assert!(in_flight.is_none());
    let index = Index::open(DIR, mem_options(&storage, 8)).unwrap();
    assert_eq!(live(&index), model);
    assert_eq!(index.open_report().replayed_ops, 0, "everything is in segments after the close");
    assert!(!names(&storage, ".wal").contains(&log[0]), "the long log is deleted once its last piece is in a segment");
}

#[test]
fn a_crash_at_every_operation_of_a_piecewise_flush_loses_no_synced_write() {
    let probe = MemStorage::default();
    let model = one_long_log(&probe);
    let before = probe.ops();
    let (full, _) = piecewise(&probe, model.clone());
    let total = probe.ops() - before;
    assert!(total > 50, "{total}");
    for mode in [CrashMode::DropUnsynced, CrashMode::TornTail { seed: 45 }] {
        for n in 0..=total {
            let storage = MemStorage::new(mode);
            one_long_log(&storage);
            storage.crash_after(n);
            let (acknowledged, in_flight) = piecewise(&storage, model.clone());
            assert!(storage.has_crashed() || n == total, "operation {n} did not crash");
            let storage = storage.restart();
            let index = Index::open(DIR, mem_options(&storage, 8)).unwrap_or_else(|e| panic!("crash after operation {n}: reopen failed: {e}"));
            let got = live(&index);
            let mut with = acknowledged.clone();
            with.extend(in_flight);
            assert!(got == acknowledged || got == with, "crash after operation {n} (in flight: {in_flight:?}):\n got  {got:?}\n want {acknowledged:?}");
            assert!(got.is_subset(&full));
            // the reopened index flushes what is left and takes writes
            index.insert(u64::MAX, u64::MAX).unwrap();
            index.flush().unwrap();
            index.close().unwrap();
            let index = Index::open(DIR, mem_options(&storage, 8)).unwrap();
            assert_eq!(live(&index).len(), got.len() + 1, "crash after operation {n}");
        }
    }
    eprintln!("{total} crash points x 2 crash modes checked");
}

/// A background writer of 1,000-operation memtables whose first flush the storage holds
/// (at its segment's creation) until the test is about to close; from then on every storage
/// operation takes 20 ms, so the close raises its stop flag before that flush ends, however
/// slow the machine.
fn held_first_flush(inner: &MemStorage, held: mpsc::Sender<()>, go: Arc<AtomicBool>) -> Intercepted {
    let held = Mutex::new(Some(held));
    Intercepted {
        inner: inner.clone(),
        before: Arc::new(move |op, path| {
            let segment = path.file_name().is_some_and(|n| n.to_string_lossy().contains(".sdx"));
            hold_then_slow(op == "create" && segment, &held, &go);
            Ok(())
        }),
    }
}

fn burst_options(storage: Arc<dyn Storage>, background: bool) -> IndexOptions {
    IndexOptions::default()
        .with_storage(storage)
        .with_background(background)
        .with_memtable_ops(1_000)
        .with_max_frozen(Some(10))
        .with_durability(Durability::NoSync)
        .with_compaction(CompactionOptions::default().with_automatic(false))
}

#[test]
fn a_close_after_a_burst_leaves_the_memtables_in_their_logs_for_the_next_open() {
    let storage = MemStorage::default();
    let (tx, rx) = mpsc::channel();
    let go = Arc::new(AtomicBool::new(false));
    let index = Index::open(DIR, burst_options(Arc::new(held_first_flush(&storage, tx, go.clone())), true)).unwrap();
    let mut rng = Rng(4545);
    let mut model = BTreeSet::new();
    // 4,500 inserts: four memtables frozen (the first one's flush held), 500 in the active one
    for b in 0..45u64 {
        let batch: Vec<Entry> = (0..100).map(|i| Entry::new(rng.next(), b * 100 + i)).collect();
        model.extend(batch.iter().map(|e| (e.fingerprint, e.doc_id)));
        index.insert_many(&batch).unwrap();
    }
    // waits for a condition (the flush reached the hold), not a duration: the bound only
    // turns a broken flush into a failure instead of a hang
    rx.recv_timeout(Duration::from_secs(600)).expect("the background flush reached the hold");
    // (no `stats()` here: it reads the manifest, which the held flush has locked)
    go.store(true, Ordering::SeqCst);
    index.close().unwrap();
    // The held flush ended (a flush is not cut); the close flushed nothing itself.
    assert_eq!(names(&storage, ".sdx").len(), 1, "{:?}", storage.list(Path::new(DIR)));
    assert_eq!(names(&storage, ".wal").len(), 4, "the logs of three frozen memtables and the active one stay");
    // The next open replays them as four memtables, every acknowledged pair there; its
    // flushes write one segment each and delete the logs.
    let index = Index::open(DIR, burst_options(Arc::new(storage.clone()), false)).unwrap();
    assert_eq!(index.open_report().replayed_ops, 3_500);
    let stats = index.stats();
    assert_eq!((stats.frozen_memtables, stats.memtable_inserts), (3, 500), "{stats:?}");
    assert_eq!(live(&index), model);
    index.flush().unwrap();
    assert_eq!(index.stats().flushes, 4);
    index.close().unwrap();
    assert_eq!(names(&storage, ".sdx").len(), 5);
    assert_eq!(names(&storage, ".wal").len(), 1, "only the writer's new log is left");
    let index = Index::open(DIR, burst_options(Arc::new(storage.clone()), true)).unwrap();
    assert_eq!(index.open_report().replayed_ops, 0);
    assert_eq!(live(&index), model);
    index.close().unwrap();
}
