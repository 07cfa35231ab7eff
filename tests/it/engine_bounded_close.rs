//! A close never waits for a merge (`src/engine/maintenance.rs`): the maintenance thread
//! merges and settles in the background; a close that comes during a merge stops it at its
//! next look at the stop flag, keeping its checkpoint and files, and the next open goes on
//! from there. What the close did is asserted, never how long it took (that is
//! `benches/close_time.py`'s): the storage holds the background merge at a checkpoint until
//! the test is about to close, and from then on makes every storage operation slow (20 ms),
//! so that the merge cannot end before the close raises its stop flag, however slow or
//! loaded the machine. After the close the merge's files are still there, the live set is
//! the one before the merge, every pair is there (oracle: the model of what was inserted),
//! and the next open's maintenance goes on with the merge (`compaction_resumed`) instead of
//! starting it over.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use simdex::storage::{MemStorage, Storage};
use simdex::{CompactionOptions, Durability, Entry, Index, IndexOptions};

use crate::common::{hold_then_slow, Intercepted, Rng};

const DIR: &str = "bc";

fn options(storage: Arc<dyn Storage>, background: bool, automatic: bool) -> IndexOptions {
    let compaction = CompactionOptions::default().with_fanout(2).with_buffer_entries(2048).with_automatic(automatic).with_checkpoint_interval(Some(Duration::ZERO));
    IndexOptions::default().with_storage(storage).with_background(background).with_memtable_ops(5_000).with_durability(Durability::NoSync).with_compaction(compaction)
}

/// Four segments of 5,000 pairs (no merge yet), closed; the pairs.
fn segments(storage: &MemStorage) -> BTreeSet<(u64, u64)> {
    let index = Index::open(DIR, options(Arc::new(storage.clone()), false, false)).unwrap();
    let mut rng = Rng(45);
    let mut model = BTreeSet::new();
    for batch in 0..4u64 {
        let entries: Vec<Entry> = (0..5_000).map(|i| Entry::new(rng.next(), batch * 10_000 + i)).collect();
        model.extend(entries.iter().map(|e| (e.fingerprint, e.doc_id)));
        index.insert_many(&entries).unwrap();
        index.flush().unwrap();
    }
    index.close().unwrap();
    model
}

fn live(storage: &MemStorage) -> BTreeSet<(u64, u64)> {
    let index = Index::open_read_only(DIR, options(Arc::new(storage.clone()), false, false)).unwrap();
    index.live_entries().unwrap().into_iter().map(|e| (e.fingerprint, e.doc_id)).collect()
}

fn segment_names(storage: &MemStorage) -> Vec<String> {
    storage.list(Path::new(DIR)).unwrap().into_iter().filter(|n| n.ends_with(".sdx")).collect()
}

fn merge_files(storage: &MemStorage) -> Vec<String> {
    storage.list(Path::new(DIR)).unwrap().into_iter().filter(|n| n.starts_with("merge.")).collect()
}

/// When the storage holds a merge, and what it does then.
#[derive(Clone, Copy)]
enum HoldAt {
    /// The first save of a merge checkpoint (the merge is under way: with a checkpoint
    /// interval of zero it saves every 1,024 entries, block or page).
    Checkpoint,
    /// The save of the checkpoint that follows the output's rename to `merge.out`: the
    /// merge's "finished" checkpoint (its output whole, not installed yet).
    Finished,
}

/// A storage over `inner` that holds the first background merge at `at`: it reports the
/// moment on `held`, waits there until `go` is raised (the test is about to close), and
/// makes every operation after that take 20 ms.
fn holding(inner: &MemStorage, at: HoldAt, held: mpsc::Sender<()>, go: Arc<AtomicBool>) -> Intercepted {
    let out_written = AtomicBool::new(false);
    let held = Mutex::new(Some(held));
    Intercepted {
        inner: inner.clone(),
        before: Arc::new(move |op, path| {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if op == "rename" && name == "merge.out" {
                out_written.store(true, Ordering::SeqCst);
            }
            let hold_here = op == "rename"
                && name == "merge.checkpoint"
                && match at {
                    HoldAt::Checkpoint => !out_written.load(Ordering::SeqCst),
                    HoldAt::Finished => out_written.load(Ordering::SeqCst),
                };
            hold_then_slow(hold_here, &held, &go);
            Ok(())
        }),
    }
}

/// Opens a background writer over `storage` whose first merge is held at `at`, closes it
/// while the merge is held; returns nothing, the storage holds what the close left.
fn close_during_merge(storage: &MemStorage, at: HoldAt) {
    let (tx, rx) = mpsc::channel();
    let go = Arc::new(AtomicBool::new(false));
    let index = Index::open(DIR, options(Arc::new(holding(storage, at, tx, go.clone())), true, true)).unwrap();
    // waits for a condition (the merge reached the hold), not a duration: the bound is only
    // there so that a broken merge fails the test instead of hanging it
    rx.recv_timeout(Duration::from_secs(600)).expect("the background merge reached the hold");
    go.store(true, Ordering::SeqCst);
    index.close().unwrap();
}

#[test]
fn a_close_during_a_background_merge_keeps_its_checkpoint_and_the_next_open_resumes_it() {
    let storage = MemStorage::default();
    let model = segments(&storage);
    let before = segment_names(&storage);
    assert_eq!(before.len(), 4);
    // A writer with the maintenance thread: the automatic policy merges in the background;
    // the close comes while the first merge is under way.
    close_during_merge(&storage, HoldAt::Checkpoint);
    // The merge stopped: its checkpoint stays, nothing was installed, nothing is lost.
    let files = merge_files(&storage);
    assert!(files.contains(&"merge.checkpoint".to_string()), "{files:?}");
    assert!(!files.contains(&"merge.out".to_string()), "the merge was stopped before its output was whole: {files:?}");
    assert_eq!(segment_names(&storage), before, "the stopped merge installed nothing");
    assert_eq!(live(&storage), model);
    // The next open keeps the merge's files and its maintenance goes on from the checkpoint.
    let index = Index::open(DIR, options(Arc::new(storage.clone()), false, true)).unwrap();
    assert!(merge_files(&storage).contains(&"merge.checkpoint".to_string()), "a writable open keeps a merge whose segments are live");
    index.compact_tiered().unwrap();
    let stats = index.stats();
    assert!(stats.compaction_resumed >= 1, "the merge went on from its checkpoint: {stats:?}");
    assert!(stats.segments.len() < 4, "{stats:?}");
    index.close().unwrap();
    assert_eq!(live(&storage), model);
    assert!(merge_files(&storage).is_empty(), "{:?}", merge_files(&storage));
}

#[test]
fn a_merge_stopped_after_its_output_was_written_is_not_redone() {
    let storage = MemStorage::default();
    let model = segments(&storage);
    let before = segment_names(&storage);
    // The close comes once the merge's output is whole (its "finished" checkpoint saved),
    // before the engine installs it.
    close_during_merge(&storage, HoldAt::Finished);
    let files = merge_files(&storage);
    assert!(files.contains(&"merge.out".to_string()) && files.contains(&"merge.checkpoint".to_string()), "{files:?}");
    assert_eq!(segment_names(&storage), before, "the stopped merge installed nothing");
    assert_eq!(live(&storage), model);
    // The next open installs that output: the merge it goes on with writes no output again.
    let parts = Arc::new(AtomicU64::new(0));
    let counted = parts.clone();
    let hook = Intercepted {
        inner: storage.clone(),
        before: Arc::new(move |op, path| {
            if op == "create" && path.file_name().is_some_and(|n| n == "merge.part") {
                counted.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        }),
    };
    let index = Index::open(DIR, options(Arc::new(hook), false, true)).unwrap();
    index.compact_tiered().unwrap();
    let stats = index.stats();
    assert!(stats.compaction_resumed >= 1, "{stats:?}");
    index.close().unwrap();
    assert_eq!(live(&storage), model);
    assert!(merge_files(&storage).is_empty(), "{:?}", merge_files(&storage));
    // the first merge after the open was the stopped one, installed from its finished
    // output (later merges of the policy write outputs of their own)
    assert!(parts.load(Ordering::Relaxed) < stats.compactions, "{} outputs written for {} merges", parts.load(Ordering::Relaxed), stats.compactions);
}
