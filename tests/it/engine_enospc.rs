//! A real full disk: the index on a small tmpfs (mounted by the test, so it needs root; it
//! is skipped with a message where mounting is not allowed) is written until the disk is
//! full. The error names the file, nothing acknowledged is lost, no temporary file stays,
//! and once space is freed the index opens and holds every acknowledged write.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use simdex::{CompactionOptions, Durability, Error, Index, IndexOptions};

use crate::common::Rng;
use crate::tmpfs::Tmpfs;

fn temporary_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "tmp")).collect()
}

#[test]
fn a_real_full_disk_loses_nothing_acknowledged_and_the_index_opens_once_space_is_freed() {
    let disk = match Tmpfs::mount(4 << 20) {
        Ok(d) => d,
        Err(why) => {
            eprintln!("skipped: a real full disk needs a tmpfs mount ({why})");
            return;
        }
    };
    // A filler takes a quarter of the disk; deleting it is how space comes back.
    let filler = disk.path().join("filler");
    std::fs::write(&filler, vec![0u8; 1 << 20]).unwrap();
    let idx = disk.path().join("idx");
    for background in [true, false] {
        let options = || {
            IndexOptions::default()
                .with_durability(if background { Durability::Group { max_delay: Duration::from_millis(2), max_ops: 1000 } } else { Durability::Sync })
                .with_memtable_ops(8_000)
                .with_background(background)
                .with_compaction(CompactionOptions::default().with_fanout(3).with_buffer_entries(4096).with_automatic(true))
        };
        let mut rng = Rng(0xd15c ^ u64::from(background));
        let mut acknowledged = BTreeSet::new();
        let mut failed_batches: Vec<Vec<(u64, u64)>> = Vec::new();
        let mut errors = Vec::new();
        {
            let index = Index::open(&idx, options()).unwrap();
            // Batches of 500 until the disk is full and writes keep failing.
            for b in 0u64.. {
                let batch: Vec<(u64, u64)> = (0..500).map(|i| (rng.next(), (b << 20) + i + (u64::from(background) << 40))).collect();
                match index.insert_batch(&batch.iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).and_then(|_| index.sync()) {
                    Ok(()) => acknowledged.extend(batch),
                    Err(e) => {
                        errors.push(e);
                        failed_batches.push(batch);
                        if errors.len() >= 8 {
                            break;
                        }
                    }
                }
                assert!(b < 100_000, "the disk never filled");
            }
            // Closing on a full disk may fail (it syncs); it must not panic or hang.
            let _ = index.close();
        }
        eprintln!(
            "full tmpfs, background {background}: {} pairs acknowledged, {} batches refused; first error: {}",
            acknowledged.len(),
            failed_batches.len(),
            errors[0].chain_message()
        );
        assert!(!acknowledged.is_empty(), "background {background}: something was written before the disk filled");
        for e in &errors {
            let message = e.chain_message();
            assert!(message.contains("No space left on device"), "background {background}: the cause is named: {message}");
            assert!(message.contains(&idx.display().to_string()), "background {background}: the file is named: {message}");
            assert!(matches!(e, Error::Maintenance { .. } | Error::WriterFailed { .. } | Error::Io { .. }), "background {background}: {e:?}");
        }
        assert_eq!(temporary_files(&idx), Vec::<PathBuf>::new(), "background {background}: no temporary file is left on the full disk");

        // Space is back: the index opens and holds every acknowledged write, and at most
        // the failed batches (each is one log record: whole or not at all).
        std::fs::remove_file(&filler).unwrap();
        // (No background thread: on a quarter of a small disk it would start a merge that
        // needs more space than that, and report it.)
        let index = Index::open(&idx, options().with_background(false)).unwrap_or_else(|e| panic!("background {background}: the index opens once space is freed: {e}"));
        let live: BTreeSet<(u64, u64)> = index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>().into_iter().collect();
        let mut expected = acknowledged.clone();
        for batch in &failed_batches {
            let present = batch.iter().filter(|p| live.contains(p)).count();
            assert!(present == 0 || present == batch.len(), "background {background}: a failed batch is whole or absent ({present} of {})", batch.len());
            if present > 0 {
                expected.extend(batch.iter().copied());
            }
        }
        assert_eq!(live.len(), expected.len(), "background {background}: every acknowledged write, and nothing else");
        assert!(live == expected, "background {background}: every acknowledged write, and nothing else");
        index.close().unwrap();
        // On a bigger disk it takes writes, flushes and compacts again (a full compaction
        // writes a copy of everything).
        disk.resize(32 << 20);
        let index = Index::open(&idx, options()).unwrap();
        index.insert(1, 1).unwrap();
        index.flush().unwrap();
        index.compact().unwrap();
        index.close().unwrap();
        assert_eq!(temporary_files(&idx), Vec::<PathBuf>::new());
        let reopened = Index::open(&idx, options()).unwrap();
        expected.insert((1, 1));
        assert!(reopened.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>().into_iter().eq(expected), "background {background}: after compaction");
        reopened.close().unwrap();
        // The next round starts from a small disk with a filler again.
        std::fs::remove_dir_all(&idx).unwrap();
        disk.resize(4 << 20);
        std::fs::write(&filler, vec![0u8; 1 << 20]).unwrap();
    }
}
