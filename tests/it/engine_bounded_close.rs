//! A close never waits for a merge (`src/engine/maintenance.rs`): the maintenance thread
//! merges and settles in the background; a close that comes during a merge stops it at its
//! next look at the clock, keeping its checkpoint and files, and the next open goes on from
//! there. The property is asserted, not a time: the merge is slowed (every checkpoint it
//! saves waits) so that it is surely in progress when the close comes; after the close the
//! merge's checkpoint is still there, the live set is the one before the merge, every pair
//! is there (oracle: the model of what was inserted), and the next open's maintenance
//! resumes the merge (`compaction_resumed`) instead of starting it over.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use simdex::storage::{MemStorage, Storage};
use simdex::{CompactionOptions, Durability, Entry, Index, IndexOptions};

use crate::common::{Intercepted, Rng};

const DIR: &str = "bc";

fn options(storage: Arc<dyn Storage>, background: bool, automatic: bool) -> IndexOptions {
    let compaction = CompactionOptions::default().with_fanout(2).with_buffer_entries(2048).with_automatic(automatic).with_checkpoint_interval(Some(Duration::from_millis(1)));
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

/// A storage whose every save of a merge checkpoint past the first `free` waits 20 ms (so
/// the merge is slow), and that reports the first such save on `started`.
fn slowed(inner: &MemStorage, free: u64, started: mpsc::Sender<()>) -> Intercepted {
    let saves = AtomicU64::new(0);
    let started = Mutex::new(Some(started));
    Intercepted {
        inner: inner.clone(),
        before: Arc::new(move |op, path| {
            if op == "rename" && path.file_name().is_some_and(|n| n == "merge.checkpoint") && saves.fetch_add(1, Ordering::Relaxed) >= free {
                if let Some(tx) = started.lock().unwrap().take() {
                    let _ = tx.send(());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(())
        }),
    }
}

#[test]
fn a_close_during_a_background_merge_keeps_its_checkpoint_and_the_next_open_resumes_it() {
    let storage = MemStorage::default();
    let model = segments(&storage);
    let before = segment_names(&storage);
    assert_eq!(before.len(), 4);
    // A writer with the maintenance thread: the automatic policy merges the four segments
    // in the background, slowly; the close comes once the merge has saved a checkpoint.
    let (tx, rx) = mpsc::channel();
    let index = Index::open(DIR, options(Arc::new(slowed(&storage, 0, tx)), true, true)).unwrap();
    rx.recv_timeout(Duration::from_secs(120)).expect("the background merge saved a checkpoint");
    index.close().unwrap();
    // The merge stopped: its checkpoint stays, nothing was installed, nothing is lost.
    assert!(merge_files(&storage).contains(&"merge.checkpoint".to_string()), "{:?}", merge_files(&storage));
    assert_eq!(segment_names(&storage), before, "the stopped merge installed nothing");
    assert_eq!(live(&storage), model);
    // The next open keeps the merge's files and its maintenance goes on from the checkpoint.
    let index = Index::open(DIR, options(Arc::new(storage.clone()), false, true)).unwrap();
    assert!(merge_files(&storage).contains(&"merge.checkpoint".to_string()), "a writable open keeps a merge whose segments are live");
    index.compact_tiered().unwrap();
    let stats = index.stats();
    assert!(stats.compaction_resumed >= 1, "the merge went on from its checkpoint: {stats:?}");
    assert!(stats.segments.len() < 4);
    index.close().unwrap();
    assert_eq!(live(&storage), model);
    assert!(merge_files(&storage).is_empty(), "{:?}", merge_files(&storage));
}

#[test]
fn a_merge_stopped_after_its_output_was_written_is_not_redone() {
    let storage = MemStorage::default();
    let model = segments(&storage);
    // Stop the merge once its output is whole: at the first save of a "finished"
    // checkpoint, raise the stop flag through a close from another thread. The finished
    // checkpoint is the last save of a merge; detect it as the save that follows the output
    // taking its name `merge.out`.
    let out_written = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(Some(tx));
    let flag = out_written.clone();
    let hook = Intercepted {
        inner: storage.clone(),
        before: Arc::new(move |op, path| {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if op == "rename" && name == "merge.out" {
                flag.store(true, Ordering::Relaxed);
            }
            if op == "rename" && name == "merge.checkpoint" && flag.load(Ordering::Relaxed) {
                if let Some(tx) = tx.lock().unwrap().take() {
                    let _ = tx.send(());
                }
                // hold the merge here until the close has raised the stop flag
                std::thread::sleep(Duration::from_millis(200));
            }
            Ok(())
        }),
    };
    let index = Index::open(DIR, options(Arc::new(hook), true, true)).unwrap();
    rx.recv_timeout(Duration::from_secs(120)).expect("the merge finished its output");
    index.close().unwrap();
    let files = merge_files(&storage);
    assert!(files.contains(&"merge.out".to_string()) && files.contains(&"merge.checkpoint".to_string()), "{files:?}");
    assert_eq!(live(&storage), model);
    // The next open installs that output: no merge output is written again.
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
    // the first merge after the open was the stopped one, resumed from its finished output
    // (later merges of the policy write outputs of their own)
    assert!(parts.load(Ordering::Relaxed) < stats.compactions, "{} outputs written for {} merges", parts.load(Ordering::Relaxed), stats.compactions);
}
