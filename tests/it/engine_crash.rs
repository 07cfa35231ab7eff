//! Simulated crashes: the in-memory storage dies (or fails) after its n-th operation, for
//! every n over a workload that writes the log, flushes and compacts; the restarted
//! index must open and hold every acknowledged (synced) write and nothing never written.

use std::collections::BTreeSet;
use std::path::Path;

use std::time::Duration;

use simdex::storage::{CrashMode, MemStorage};
use simdex::{Durability, Index, IndexOptions};

use crate::common::Rng;
use crate::engine::mem_options;

const DIR: &str = "idx";

#[derive(Clone, Debug)]
enum Op {
    Insert(Vec<(u64, u64)>),
    Delete((u64, u64)),
    Flush,
    Compact,
}

/// Inserts (single and batched), deletes of earlier pairs, explicit flushes and a full
/// compaction; with 8-operation memtables and fan-out 2, automatic flushes and tiered
/// compactions happen along the way too.
fn workload() -> Vec<Op> {
    let mut rng = Rng(2024);
    let mut ops = Vec::new();
    let mut inserted = Vec::new();
    for i in 0..60u64 {
        if i % 9 == 4 && !inserted.is_empty() {
            ops.push(Op::Delete(inserted[(rng.next() % inserted.len() as u64) as usize]));
        } else if i % 5 == 2 {
            let batch: Vec<(u64, u64)> = (0..3).map(|j| (rng.next(), i * 10 + j)).collect();
            inserted.extend(&batch);
            ops.push(Op::Insert(batch));
        } else {
            let pair = (rng.next() & 0xffff_0000_ffff_ffff, i * 10);
            inserted.push(pair);
            ops.push(Op::Insert(vec![pair]));
        }
        if i == 20 {
            ops.push(Op::Flush);
        }
        if i == 45 {
            ops.push(Op::Compact);
        }
    }
    ops
}

fn options(storage: &MemStorage) -> IndexOptions {
    let mut o = mem_options(storage, 8);
    o.compaction.fanout = 2;
    o
}

fn apply(model: &mut BTreeSet<(u64, u64)>, op: &Op) {
    match op {
        Op::Insert(pairs) => model.extend(pairs.iter().copied()),
        Op::Delete(pair) => {
            model.remove(pair);
        }
        Op::Flush | Op::Compact => {}
    }
}

fn execute(index: &Index, op: &Op) -> simdex::Result<()> {
    match op {
        Op::Insert(pairs) => index.insert_many(&pairs.iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).map(drop),
        Op::Delete((fp, id)) => index.delete(*fp, *id).map(drop),
        Op::Flush => index.flush(),
        Op::Compact => index.compact(),
    }
}

/// Runs the workload until an operation fails; returns the model of the acknowledged
/// writes and the operation that was in flight, if any.
fn run(storage: &MemStorage, ops: &[Op]) -> (BTreeSet<(u64, u64)>, Option<Op>) {
    let mut model = BTreeSet::new();
    let Ok(index) = Index::open(DIR, options(storage)) else { return (model, None) };
    for op in ops {
        if execute(&index, op).is_err() {
            return (model, Some(op.clone()));
        }
        apply(&mut model, op);
    }
    (model, None)
}

/// Reopens and checks the content against the acknowledged model (plus, optionally, the
/// operation in flight); then checks the index still takes writes.
fn check(storage: &MemStorage, n: u64, model: &BTreeSet<(u64, u64)>, in_flight: &Option<Op>) {
    let index = Index::open(DIR, options(storage)).unwrap_or_else(|e| panic!("crash after operation {n}: reopen failed: {e}"));
    let got: BTreeSet<(u64, u64)> = index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>().into_iter().collect();
    let mut with = model.clone();
    if let Some(op) = in_flight {
        apply(&mut with, op);
    }
    assert!(got == *model || got == with, "crash after operation {n} (in flight: {in_flight:?}):\n got  {got:?}\n want {model:?}");
    index.insert(u64::MAX, u64::MAX).unwrap();
    drop(index);
    let index = Index::open(DIR, options(storage)).unwrap();
    assert_eq!(index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>().len(), got.len() + usize::from(!got.contains(&(u64::MAX, u64::MAX))));
}

fn total_operations() -> u64 {
    let storage = MemStorage::default();
    let (model, in_flight) = run(&storage, &workload());
    let total = storage.ops();
    assert!(in_flight.is_none());
    assert!(model.len() > 50);
    let index = Index::open(DIR, options(&storage)).unwrap();
    let stats = index.stats();
    assert!(!stats.segments.is_empty() && stats.flushes == 0);
    total
}

#[test]
fn a_crash_at_every_operation_loses_no_synced_write() {
    let total = total_operations();
    assert!(total > 300, "{total}");
    for mode in [CrashMode::DropUnsynced, CrashMode::TornTail { seed: 7 }] {
        for n in 0..=total {
            let storage = MemStorage::new(mode);
            storage.crash_after(n);
            let (model, in_flight) = run(&storage, &workload());
            assert!(storage.has_crashed() || n == total, "operation {n} did not crash");
            check(&storage.restart(), n, &model, &in_flight);
        }
    }
    eprintln!("{total} crash points x 2 crash modes checked");
}

#[test]
fn an_io_error_at_every_operation_loses_no_acknowledged_write() {
    let total = total_operations();
    for n in 0..total {
        let storage = MemStorage::default();
        storage.fail_after(n);
        let (model, in_flight) = run(&storage, &workload());
        storage.fail_after(u64::MAX);
        check(&storage, n, &model, &in_flight);
    }
    eprintln!("{total} I/O error points checked");
}

#[test]
fn a_manifest_replacement_cut_short_leaves_the_previous_manifest() {
    let storage = MemStorage::default();
    let index = Index::open(DIR, options(&storage)).unwrap();
    index.insert_many(&[(1, 1), (2, 2)].iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
    index.flush().unwrap();
    drop(index);
    let before = storage.file(&Path::new(DIR).join("MANIFEST")).unwrap();
    // A half-written MANIFEST.tmp is what a crash during the replacement leaves.
    storage.put(&Path::new(DIR).join("MANIFEST.tmp"), &before[..before.len() / 2]);
    let index = Index::open(DIR, options(&storage)).unwrap();
    assert_eq!(index.open_report().removed, vec!["MANIFEST.tmp".to_string()]);
    assert_eq!(index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>(), vec![(1, 1), (2, 2)]);
}

/// Group commit, without a background thread: writes return before they are synced; a sync
/// runs (without the writer's lock) every 4 operations, and `Index::sync` after every 7th
/// operation acknowledges everything before it. After a crash at any operation the index
/// must hold exactly the writes of some prefix of the workload (no hole, nothing reordered)
/// that includes every acknowledged write.
#[test]
fn group_commit_crash_leaves_a_prefix_that_holds_every_synced_write() {
    let group = |storage: &MemStorage| options(storage).with_durability(Durability::Group { max_delay: Duration::from_secs(3600), max_ops: 4 });
    // states[i]: the content after the first i operations
    let ops = workload();
    let mut states = vec![BTreeSet::new()];
    for op in &ops {
        let mut next = states.last().unwrap().clone();
        apply(&mut next, op);
        states.push(next);
    }
    // Runs until an operation fails: (operations done, operations acknowledged as durable).
    let run = |storage: &MemStorage| -> (usize, usize) {
        let Ok(index) = Index::open(DIR, group(storage)) else { return (0, 0) };
        let mut acked = 0;
        for (i, op) in ops.iter().enumerate() {
            if execute(&index, op).is_err() {
                return (i, acked);
            }
            if matches!(op, Op::Flush | Op::Compact) || i % 7 == 6 {
                if index.sync().is_err() {
                    return (i + 1, acked);
                }
                acked = i + 1;
            }
        }
        (ops.len(), acked)
    };
    let probe = MemStorage::default();
    assert_eq!(run(&probe), (ops.len(), ops.len() - ops.len() % 7));
    let total = probe.ops();
    let mut unsynced_losses = 0;
    for mode in [CrashMode::DropUnsynced, CrashMode::TornTail { seed: 11 }] {
        for n in 0..=total {
            let storage = MemStorage::new(mode);
            storage.crash_after(n);
            let (done, acked) = run(&storage);
            let storage = storage.restart();
            let index = Index::open(DIR, group(&storage)).unwrap_or_else(|e| panic!("crash after operation {n}: reopen failed: {e}"));
            let got: BTreeSet<(u64, u64)> = index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>().into_iter().collect();
            // `done` operations returned, one more may have been in flight
            let last = (done + 1).min(ops.len());
            let Some(j) = (acked..=last).find(|&j| states[j] == got) else {
                panic!("crash after operation {n}: {done} operations done, {acked} acknowledged; the index is no prefix from {acked} on:\n got {got:?}");
            };
            unsynced_losses += usize::from(j < done);
        }
    }
    // the test is only worth its name if unsynced writes were really lost somewhere
    assert!(unsynced_losses > 0);
    eprintln!("{total} crash points x 2 crash modes checked; {unsynced_losses} lost unsynced writes");
}
