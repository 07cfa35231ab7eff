//! Read-only opens racing a writer: a reader must never report a healthy index as corrupt.
//!
//! A read-only open reads the manifest, then lists the directory and reads what it names.
//! A flush or compaction in between installs a new manifest and deletes the files the old
//! one named (an obsolete log, merged segments). The storage below runs the writer's work at
//! exactly that moment, deterministically, instead of hoping a delay lands there.

use std::collections::BTreeSet;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};

use simdex::storage::{FileBytes, LockGuard, MemStorage, Storage, WriteFile};
use simdex::CompactionOptions;
use simdex::{Index, IndexOptions, QueryOptions};

use crate::engine::{mem_options, model_query};

type Hook = Box<dyn FnOnce() + Send>;

/// Delegates to a shared [`MemStorage`], and runs a hook the first time a directory is
/// listed: between a read-only open's manifest read and its listing.
#[derive(Clone)]
struct ListingHook {
    inner: MemStorage,
    hook: Arc<Mutex<Option<Hook>>>,
}

impl std::fmt::Debug for ListingHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ListingHook")
    }
}

impl Storage for ListingHook {
    fn create(&self, path: &Path) -> io::Result<Box<dyn WriteFile>> {
        self.inner.create(path)
    }
    fn append(&self, path: &Path) -> io::Result<Box<dyn WriteFile>> {
        self.inner.append(path)
    }
    fn read(&self, path: &Path) -> io::Result<FileBytes> {
        self.inner.read(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.inner.remove(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.inner.sync_dir(dir)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let hook = self.hook.lock().unwrap().take();
        if let Some(hook) = hook {
            hook();
        }
        self.inner.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        self.inner.truncate(path, len)
    }
    fn lock(&self, path: &Path) -> io::Result<LockGuard> {
        self.inner.lock(path)
    }
}

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
    let hook = ListingHook { inner: storage.clone(), hook: Arc::new(Mutex::new(Some(Box::new(move || work(&w))))) };
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
