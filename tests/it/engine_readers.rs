//! Read-only opens racing a writer: a reader must never report a healthy index as corrupt.
//!
//! A read-only open reads the manifest, then lists the directory and reads what it names.
//! A flush or compaction in between installs a new manifest and deletes the files the old
//! one named (an obsolete log, merged segments). The storage below runs the writer's work at
//! exactly that moment, deterministically, instead of hoping a delay lands there.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

use simdex::storage::{MemStorage, Storage};
use simdex::CompactionOptions;
use simdex::{Index, QueryOptions};

use crate::common::Intercepted;
use crate::engine::{mem_options, model_query};

fn pairs(range: std::ops::Range<u64>) -> Vec<(u64, u64)> {
    range.map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15), i)).collect()
}

/// A writer on a new index in `/idx` after `setup`, and a storage over the same files that
/// runs `work` on the writer once, just before the first call `trigger` picks.
fn writer_and_hook(
    setup: impl FnOnce(&Index),
    work: impl FnOnce(&Index) + Send + 'static,
    trigger: fn(&str, &Path) -> bool,
) -> (MemStorage, &'static Path, Arc<Index>, Intercepted) {
    let storage = MemStorage::default();
    let dir = Path::new("/idx");
    let writer = Arc::new(Index::open(dir, (mem_options(&storage, 1 << 20)).with_compaction(CompactionOptions::default().with_automatic(false))).unwrap());
    setup(&writer);
    let w = writer.clone();
    let work: Mutex<Option<Box<dyn FnOnce() + Send>>> = Mutex::new(Some(Box::new(move || work(&w))));
    let hook = Intercepted {
        inner: storage.clone(),
        before: Arc::new(move |op, path| {
            if trigger(op, path) {
                let work = work.lock().unwrap().take();
                if let Some(work) = work {
                    work();
                }
            }
            Ok(())
        }),
    };
    (storage, dir, writer, hook)
}

/// After `setup` on a writer, opens a reader whose listing happens right after `work` ran on
/// the writer, and checks that it opens cleanly and sees exactly every pair written before
/// it opened.
fn reader_after(setup: impl FnOnce(&Index), work: impl FnOnce(&Index) + Send + 'static) {
    // The writer's work runs the first time the reader lists the directory: between its
    // manifest read and its listing.
    let (storage, dir, writer, hook) = writer_and_hook(setup, work, |op, _| op == "list");
    let reader = Index::open_read_only(dir, (mem_options(&storage, 1 << 20)).with_storage(Arc::new(hook))).expect("a reader racing a flush must not report corruption");
    let live: BTreeSet<(u64, u64)> = writer.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>().into_iter().collect();
    assert_eq!(
        reader.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>().into_iter().collect::<BTreeSet<_>>(),
        live,
        "the reader sees every write made before it opened"
    );
    for &(fp, _) in live.iter().take(50) {
        assert_eq!(reader.query(fp ^ 1, &QueryOptions::within(3)).unwrap(), model_query(&live, fp ^ 1, 3));
    }
}

#[test]
fn reader_open_racing_a_flush_that_removes_the_old_log() {
    // The reader read the manifest naming log 1; the writer then flushes (a new manifest
    // names log 2, log 1 is deleted) and goes on writing into log 2, whose records start
    // long after where the reader's manifest ends. This used to fail with "records are
    // missing".
    reader_after(
        |w| {
            w.insert_many(&pairs(0..1000).iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
        },
        |w| {
            w.flush().unwrap();
            w.insert_many(&pairs(1000..1500).iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
        },
    );
}

#[test]
fn reader_open_racing_a_compaction_that_removes_segments() {
    // The reader's manifest names two segments; a full compaction replaces them by one and
    // deletes them before the reader opens them.
    reader_after(
        |w| {
            for part in [0..1000, 1000..2000] {
                w.insert_many(&pairs(part).iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
                w.flush().unwrap();
            }
        },
        |w| {
            w.compact().unwrap();
            w.insert_many(&pairs(2000..2100).iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
        },
    );
}

/// Issue 23, item 2: `verify` beside a writer. After `setup` on a writer, verifies the index
/// while `work` runs on the writer at the first storage call `trigger` picks (the listing,
/// or the read of a file the pass is about to check): the verify must call the index clean
/// (a single pass would report the file the writer deleted as missing), and say it read
/// twice.
fn verify_after(setup: impl FnOnce(&Index), work: impl FnOnce(&Index) + Send + 'static, trigger: fn(&str, &Path) -> bool) -> simdex::recovery::IndexVerifyReport {
    let (storage, dir, _writer, hook) = writer_and_hook(setup, work, trigger);
    let report = simdex::recovery::verify_index(&hook, dir).unwrap();
    assert!(report.is_clean(), "verify beside a writer called a healthy index damaged: {:?}", report.problems);
    assert!(simdex::recovery::verify_index(&storage, dir).unwrap().is_clean(), "and it is healthy once quiet");
    report
}

fn file_named(path: &Path, prefix: &str) -> bool {
    path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(prefix))
}

#[test]
fn verify_racing_a_flush_and_a_compaction_reads_one_version() {
    let flush_then_write = |w: &Index| {
        w.flush().unwrap();
        w.insert_many(&pairs(1000..1500).iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
    };
    let compact = |w: &Index| {
        w.compact().unwrap();
        w.insert_many(&pairs(2000..2100).iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
    };
    let two_segments = |w: &Index| {
        for part in [0..1000, 1000..2000] {
            w.insert_many(&pairs(part).iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
            w.flush().unwrap();
        }
    };
    let one_log = |w: &Index| {
        w.insert_many(&pairs(0..1000).iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
    };
    // between the listing and the manifest: the listing names a log the manifest calls obsolete
    let report = verify_after(one_log, flush_then_write, |op, _| op == "list");
    assert_eq!((report.passes, report.unsettled), (2, false));
    // a flush deletes the log the pass is about to read: "No such file" in one pass
    let report = verify_after(one_log, flush_then_write, |op, p| op == "read" && file_named(p, "log-"));
    assert_eq!((report.passes, report.unsettled), (2, false));
    // a compaction deletes the segments the pass is about to read
    let report = verify_after(two_segments, compact, |op, p| op == "read" && file_named(p, "seg-"));
    assert_eq!((report.passes, report.unsettled), (2, false));
}

#[test]
fn verify_beside_a_writer_that_never_stops_is_inconclusive_never_damaged() {
    // The writer flushes and compacts at every listing: no pass is undisturbed.
    let storage = MemStorage::default();
    let dir = Path::new("/idx");
    let writer = Arc::new(Index::open(dir, mem_options(&storage, 1 << 20)).unwrap());
    writer.insert_many(&pairs(0..500).iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
    let w = writer.clone();
    let next = Mutex::new(500u64);
    let hook = Intercepted {
        inner: storage.clone(),
        before: Arc::new(move |op, _| {
            if op == "list" {
                let mut n = next.lock().unwrap();
                w.insert_many(&pairs(*n..*n + 100).iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
                w.flush().unwrap();
                *n += 100;
            }
            Ok(())
        }),
    };
    let report = simdex::recovery::verify_index(&hook, dir).unwrap();
    // verify makes at most 20 passes (its documented limit) before it calls the run unsettled
    assert_eq!((report.passes, report.unsettled), (20, true));
}

#[test]
fn verify_of_a_directory_a_writer_is_still_creating_is_not_damage() {
    // Between creating the directory (and its LOCK) and writing the first manifest, a
    // verify finds no index: an error saying so, never "DAMAGED".
    let storage = MemStorage::default();
    storage.put(Path::new("/new/LOCK"), b"");
    let e = simdex::recovery::verify_index(&storage, Path::new("/new")).unwrap_err();
    assert!(matches!(e, simdex::Error::NoIndex { .. }), "{e}");
    // With index files but no manifest, the manifest was lost: damage, named.
    let writer = Index::open("/old", mem_options(&storage, 1 << 20)).unwrap();
    writer.insert_many(&pairs(0..100).iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
    writer.flush().unwrap();
    writer.close().unwrap();
    storage.remove(Path::new("/old/MANIFEST")).unwrap();
    let report = simdex::recovery::verify_index(&storage, Path::new("/old")).unwrap();
    assert!(report.problems.iter().any(|p| p.file == "MANIFEST" && p.detail.contains("the manifest was lost")), "{:?}", report.problems);
}
