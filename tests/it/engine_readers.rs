//! Read-only opens racing a writer: a reader must never report a healthy index as corrupt.
//!
//! A read-only open reads the manifest, then lists the directory and reads what it names.
//! A flush or compaction in between installs a new manifest and deletes the files the old
//! one named (an obsolete log, merged segments). The storage below runs the writer's work at
//! exactly that moment, deterministically, instead of hoping a delay lands there.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

use simdex::storage::MemStorage;
use simdex::CompactionOptions;
use simdex::{Index, IndexOptions, QueryOptions};

use crate::common::Intercepted;
use crate::engine::{mem_options, model_query};

fn pairs(range: std::ops::Range<u64>) -> Vec<(u64, u64)> {
    range.map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15), i)).collect()
}

/// After `setup` on a writer, opens a reader whose listing happens right after `work` ran on
/// the writer, and checks that it opens cleanly and sees exactly every pair written before
/// it opened.
fn reader_after(setup: impl FnOnce(&Index), work: impl FnOnce(&Index) + Send + 'static) {
    let storage = MemStorage::default();
    let dir = Path::new("/idx");
    let writer =
        Arc::new(Index::open(dir, IndexOptions { compaction: CompactionOptions { automatic: false, ..CompactionOptions::default() }, ..mem_options(&storage, 1 << 20) }).unwrap());
    setup(&writer);
    let w = writer.clone();
    // Runs the writer's work the first time the reader lists the directory: between its
    // manifest read and its listing.
    let work: Mutex<Option<Box<dyn FnOnce() + Send>>> = Mutex::new(Some(Box::new(move || work(&w))));
    let hook = Intercepted {
        inner: storage.clone(),
        before: Arc::new(move |op, _| {
            if op == "list" {
                let work = work.lock().unwrap().take();
                if let Some(work) = work {
                    work();
                }
            }
            Ok(())
        }),
    };
    let reader =
        Index::open_read_only(dir, IndexOptions { storage: Arc::new(hook), ..mem_options(&storage, 1 << 20) }).expect("a reader racing a flush must not report corruption");
    let live: BTreeSet<(u64, u64)> = writer.live_entries().unwrap().into_iter().collect();
    assert_eq!(reader.live_entries().unwrap().into_iter().collect::<BTreeSet<_>>(), live, "the reader sees every write made before it opened");
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
            w.insert_batch(&pairs(0..1000)).unwrap();
        },
        |w| {
            w.flush().unwrap();
            w.insert_batch(&pairs(1000..1500)).unwrap();
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
                w.insert_batch(&pairs(part)).unwrap();
                w.flush().unwrap();
            }
        },
        |w| {
            w.compact().unwrap();
            w.insert_batch(&pairs(2000..2100)).unwrap();
        },
    );
}
