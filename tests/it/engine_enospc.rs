//! A real full disk: the index on a small tmpfs (mounted by the test, so it needs root; it
//! is skipped with a message where mounting is not allowed) is written until the disk is
//! full. The error names the file, nothing acknowledged is lost, no temporary file stays,
//! and once space is freed the index opens and holds every acknowledged write.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use simdex::{CompactionOptions, Durability, Entry, Error, Index, IndexOptions};

use crate::common::Rng;
use crate::tmpfs::Tmpfs;

fn temporary_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "tmp")).collect()
}

#[test]
fn a_real_full_disk_loses_nothing_acknowledged_and_the_index_opens_once_space_is_freed() {
    let Some(disk) = Tmpfs::mount_or_skip(4 << 20) else { return };
    // A filler takes half of the disk; deleting it is how space comes back. (Half, not a
    // quarter: the close after the reopen flushes every write the logs still hold into one
    // segment with its id table, about a megabyte here, and must have room for it.)
    let filler = disk.path().join("filler");
    std::fs::write(&filler, vec![0u8; 2 << 20]).unwrap();
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
                match index.insert_many(&batch.iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).and_then(|_| index.sync()) {
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
        // (No background thread: on half of a small disk it would start a merge that
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
        std::fs::write(&filler, vec![0u8; 2 << 20]).unwrap();
    }
}

#[test]
fn a_write_the_full_disk_refuses_does_nothing_and_the_open_index_takes_writes_once_space_is_back() {
    let Some(disk) = Tmpfs::mount_or_skip(4 << 20) else { return };
    let idx = disk.path().join("idx");
    for durability in [Durability::default(), Durability::Sync] {
        // a memtable larger than the test writes: every failure is an append's, none a flush's
        let options = IndexOptions::default().with_durability(durability).with_memtable_ops(1 << 20);
        let index = Index::open(&idx, options.clone()).unwrap();
        let mut rng = Rng(0xf011);
        let mut acknowledged = BTreeSet::new();
        index.insert_many(&(0..1000).map(|i| Entry::new(rng.next(), i)).collect::<Vec<_>>()).unwrap();
        acknowledged.extend(index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from));
        let filler = disk.path().join("filler");
        let mut f = std::fs::File::create(&filler).unwrap();
        while std::io::Write::write_all(&mut f, &[0xa5; 4096]).is_ok() {}
        drop(f);
        let mut refused = 0;
        for b in 0..200u64 {
            let batch: Vec<(u64, u64)> = (0..50).map(|i| (rng.next(), 1_000_000 + b * 100 + i)).collect();
            match index.insert_many(&batch.iter().map(|&p| p.into()).collect::<Vec<Entry>>()) {
                Ok(_) => acknowledged.extend(batch),
                Err(e) => {
                    assert!(e.chain_message().contains("No space left on device"), "{durability:?}: {}", e.chain_message());
                    assert!(!matches!(e, Error::WriterFailed { .. }), "{durability:?}: a refused append leaves the writer writable: {e:?}");
                    refused += 1;
                }
            }
            // reads go on
            let (fp, id) = *acknowledged.iter().next().unwrap();
            assert!(index.query(fp, &simdex::QueryOptions::within(0)).unwrap().iter().any(|m| m.doc_id == Some(id)));
        }
        assert!(refused > 150, "{durability:?}: the disk refused {refused} of 200 batches");
        let live: BTreeSet<(u64, u64)> = index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect();
        assert_eq!(live, acknowledged, "{durability:?}: a refused batch left nothing behind");
        std::fs::remove_file(&filler).unwrap();
        let batch: Vec<(u64, u64)> = (0..50).map(|i| (rng.next(), 9_000_000 + i)).collect();
        index
            .insert_many(&batch.iter().map(|&p| p.into()).collect::<Vec<Entry>>())
            .unwrap_or_else(|e| panic!("{durability:?}: once space is back, the same open index writes: {e}"));
        acknowledged.extend(batch);
        index.close().unwrap();
        let reopened = Index::open(&idx, options).unwrap();
        let live: BTreeSet<(u64, u64)> = reopened.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect();
        assert_eq!(live, acknowledged, "{durability:?}: after a reopen, the acknowledged writes and nothing else");
        reopened.close().unwrap();
        std::fs::remove_dir_all(&idx).unwrap();
    }
}
