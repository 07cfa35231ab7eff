//! Background failures are not silent: a flush that hits a full disk reaches the caller,
//! leaves no temporary file, loses nothing acknowledged, and the index goes on once space
//! is back.

use std::collections::BTreeSet;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use simdex::storage::{MemStorage, Storage};
use simdex::{CompactionOptions, Error, Index};

use crate::common::Intercepted;
use crate::engine::mem_options;

/// Which operation the disk refuses while it is "full".
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// Creating a segment's temporary file.
    CreateSegment,
    /// Renaming a written segment into place (its temporary file exists then).
    RenameSegment,
    /// Creating the new manifest's temporary file.
    CreateManifest,
    /// Renaming the new manifest into place.
    RenameManifest,
}

impl Fault {
    fn hits(self, op: &str, path: &Path) -> bool {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        match self {
            Fault::CreateSegment => op == "create" && name.starts_with("seg-"),
            Fault::RenameSegment => op == "rename" && name.starts_with("seg-"),
            Fault::CreateManifest => op == "create" && name.starts_with("MANIFEST"),
            Fault::RenameManifest => op == "rename" && name.starts_with("MANIFEST"),
        }
    }
}

/// A [`MemStorage`] whose disk is full for one kind of operation while `full` is set.
fn full_disk(inner: &MemStorage, fault: Fault, full: &Arc<AtomicBool>) -> Intercepted {
    let full = full.clone();
    Intercepted {
        inner: inner.clone(),
        before: Arc::new(move |op, path| {
            if full.load(Ordering::SeqCst) && fault.hits(op, path) {
                return Err(io::Error::new(io::ErrorKind::StorageFull, "No space left on device"));
            }
            Ok(())
        }),
    }
}

fn pair(i: u64) -> (u64, u64) {
    (i.wrapping_mul(0x9e37_79b9_7f4a_7c15), i)
}

#[test]
fn a_flush_on_a_full_disk_reaches_the_next_call_and_loses_nothing_acknowledged() {
    for fault in [Fault::CreateSegment, Fault::RenameSegment, Fault::CreateManifest, Fault::RenameManifest] {
        let inner = MemStorage::default();
        let full = Arc::new(AtomicBool::new(false));
        let storage = full_disk(&inner, fault, &full);
        let dir = Path::new("/idx");
        let options = || mem_options(&inner, 100).with_storage(Arc::new(storage.clone())).with_compaction(CompactionOptions::default().with_automatic(false));
        let index = Index::open(dir, options()).unwrap();
        full.store(true, Ordering::SeqCst);
        let mut acknowledged = BTreeSet::new();
        let mut refused = None;
        for i in 0..150 {
            match index.insert(pair(i).0, pair(i).1) {
                Ok(_) => {
                    acknowledged.insert(pair(i));
                }
                Err(e) => {
                    assert!(refused.is_none(), "{fault:?}: one failure, reported once, then writes go on; second error: {e}");
                    let Error::Maintenance { .. } = &e else { panic!("{fault:?}: expected a maintenance error, got {e}") };
                    let message = e.chain_message();
                    assert!(message.contains("No space left on device"), "{fault:?}: the cause is named: {message}");
                    assert!(message.contains("/idx/"), "{fault:?}: the file is named: {message}");
                    refused = Some(i);
                }
            }
        }
        assert_eq!(refused, Some(100), "{fault:?}: the write after the failed flush is refused, and only it");
        let tmp: Vec<String> = inner.list(dir).unwrap().into_iter().filter(|n| n.ends_with(".tmp")).collect();
        assert!(tmp.is_empty(), "{fault:?}: no temporary file is left behind: {tmp:?}");
        assert!(index.stats().maintenance_error.is_some(), "{fault:?}: stats keep the last failure");
        // A flush while the disk is still full fails itself, naming the cause.
        let err = index.flush().unwrap_err();
        assert!(err.chain_message().contains("No space left on device"), "{fault:?}: {}", err.chain_message());
        // Space is back: the index goes on and reopens with every acknowledged write.
        full.store(false, Ordering::SeqCst);
        index.flush().unwrap_or_else(|e| panic!("{fault:?}: the first call after a failure reports it: {e}"));
        index.insert(pair(1000).0, pair(1000).1).unwrap();
        acknowledged.insert(pair(1000));
        index.flush().unwrap();
        index.close().unwrap();
        let reopened = Index::open(dir, options()).unwrap();
        let live: BTreeSet<(u64, u64)> = reopened.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>().into_iter().collect();
        assert_eq!(live, acknowledged, "{fault:?}: every acknowledged write and nothing else");
        assert!(reopened.stats().segments.len() >= 2, "{fault:?}: the flushes went through once space was back");
    }
}

#[test]
fn close_reports_a_background_failure_no_call_saw() {
    let inner = MemStorage::default();
    let full = Arc::new(AtomicBool::new(false));
    let storage = full_disk(&inner, Fault::CreateSegment, &full);
    // without a flush of its own, close can fail only by reporting the earlier failure
    let options = mem_options(&inner, 10).with_storage(Arc::new(storage)).with_flush_on_close(false);
    let index = Index::open("/idx", options).unwrap();
    full.store(true, Ordering::SeqCst);
    for i in 0..10 {
        index.insert(pair(i).0, pair(i).1).unwrap();
    }
    let err = index.close().unwrap_err();
    assert!(matches!(err, Error::Maintenance { .. }), "{err}");
}

/// The live logs in `dir`.
fn logs(storage: &MemStorage, dir: &Path) -> Vec<String> {
    storage.list(dir).unwrap().into_iter().filter(|n| n.starts_with("log-")).collect()
}

#[test]
fn repeated_flush_failures_on_a_full_disk_do_not_pile_up_logs() {
    for background in [false, true] {
        let inner = MemStorage::default();
        let full = Arc::new(AtomicBool::new(false));
        let storage = full_disk(&inner, Fault::CreateSegment, &full);
        let dir = Path::new("/idx");
        let options = || mem_options(&inner, 10).with_storage(Arc::new(storage.clone())).with_background(background);
        let mut acknowledged = BTreeSet::new();
        let mut next = 0u64;
        // Writes `n` pairs; returns how many were refused.
        let mut write = |index: &Index, n: u64| {
            let mut refused = 0;
            for _ in 0..n {
                match index.insert(pair(next).0, pair(next).1) {
                    Ok(_) => {
                        acknowledged.insert(pair(next));
                    }
                    Err(e) => {
                        assert!(e.chain_message().contains("No space left on device"), "background {background}: {}", e.chain_message());
                        refused += 1;
                    }
                }
                next += 1;
            }
            refused
        };
        let index = Index::open(dir, options()).unwrap();
        assert_eq!(write(&index, 25), 0);
        index.flush().unwrap();
        full.store(true, Ordering::SeqCst);
        // Every memtable's worth of writes on the full disk would freeze, start a log and
        // fail to flush: 50 memtables in one process, then 10 processes (each `simdex insert`
        // replays the logs and fills a memtable at once).
        let refused_in_process = write(&index, 500);
        // A full disk is retried once per memtable's worth of writes, not on every write
        // (each failed attempt refuses the write after it).
        assert!(refused_in_process > 0, "background {background}: the full disk was reported");
        assert!(refused_in_process <= 500 / 10 + 1, "background {background}: {refused_in_process} of 500 writes refused");
        let in_process = logs(&inner, dir);
        drop(index);
        let mut across = Vec::new();
        for _ in 0..10 {
            let index = Index::open(dir, options()).unwrap();
            let _ = write(&index, 30);
            let _ = index.flush();
            drop(index);
            across = logs(&inner, dir);
        }
        // The active log and the failed memtable's; with a background flush, also the
        // memtables frozen before the first failure was known (at most `max_frozen`).
        let bound = 2 + if background { options().max_frozen.unwrap_or(2) } else { 0 };
        assert!(in_process.len() <= bound, "background {background}: {} logs after 50 failed flushes in one process: {in_process:?}", in_process.len());
        assert!(across.len() <= bound, "background {background}: {} logs after 10 processes on a full disk: {across:?}", across.len());
        // Space is back: the retried flush takes the whole backlog, and every acknowledged
        // write is there.
        full.store(false, Ordering::SeqCst);
        let index = Index::open(dir, options()).unwrap();
        assert_eq!(write(&index, 5), 0);
        index.flush().unwrap();
        index.close().unwrap();
        assert_eq!(logs(&inner, dir).len(), 1, "background {background}: one log once the backlog is flushed");
        let reopened = Index::open(dir, options()).unwrap();
        let live: BTreeSet<(u64, u64)> = reopened.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>().into_iter().collect();
        assert_eq!(live, acknowledged, "background {background}: every acknowledged write and nothing else");
        let tmp: Vec<String> = inner.list(dir).unwrap().into_iter().filter(|n| n.ends_with(".tmp")).collect();
        assert!(tmp.is_empty(), "background {background}: {tmp:?}");
    }
}

/// Compaction and ingest share the disk: a merge the file system has no room for is refused
/// with `Error::NoSpace` by `compact` (nothing changed) and put off by the tiered policy
/// (the writes go on; the reason is in the stats), and goes ahead once space is back.
#[test]
fn merges_check_the_free_space_first() {
    let storage = MemStorage::default();
    let index = Index::open("/idx", crate::engine::mem_options(&storage, 500)).unwrap();
    let mut live = std::collections::BTreeSet::new();
    for i in 0..1_600u64 {
        let fp = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        index.insert(fp, i).unwrap();
        live.insert((fp, i));
        if i == 700 {
            // From here the disk "has" 1 MiB: the tiered merges are put off.
            storage.set_available_space(Some(1 << 20));
        }
    }
    index.flush().unwrap();
    let before = index.stats();
    assert!(before.segments.len() >= 3, "{} segments", before.segments.len());
    assert!(before.maintenance_error.as_deref().is_some_and(|e| e.contains("needs about")), "{:?}", before.maintenance_error);
    let err = index.compact().unwrap_err();
    assert!(matches!(&err, simdex::Error::NoSpace { needed, available, .. } if needed > available), "{err}");
    assert!(err.to_string().contains("/idx") && err.to_string().contains("free space first"), "{err}");
    assert_eq!(index.stats().segments.len(), before.segments.len(), "nothing changed");
    assert_eq!(index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>().into_iter().collect::<std::collections::BTreeSet<_>>(), live);
    storage.set_available_space(Some(1 << 30));
    index.compact().unwrap();
    assert_eq!(index.stats().segments.len(), 1);
    assert_eq!(index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>().into_iter().collect::<std::collections::BTreeSet<_>>(), live);
}
