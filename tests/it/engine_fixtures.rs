//! Frozen index directories (`fixtures/v1/index/`, `fixtures/v2/index/`: manifest, segment,
//! tombstone file and a log with unflushed records), read by every future version; and a
//! check that the engine still writes exactly the newest version's bytes.
//!
//! To regenerate after a deliberate change (see `format-spec/README.md`), run
//! `SIMDEX_REGENERATE_FIXTURES=1 cargo test --test it engine_fixtures` and commit the diff.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use simdex::inspect::verify_index;
use simdex::storage::{MemStorage, Storage};
use simdex::Index;

use crate::common::Rng;
use crate::engine::mem_options;

const DIR: &str = "idx";

/// The segment format version the engine writes today.
const NEWEST: u32 = 2;

fn fixture_dir_of(version: u32) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("fixtures/v{version}/index"))
}

fn fixture_dir() -> PathBuf {
    fixture_dir_of(NEWEST)
}

/// 120 inserts (some near copies, one repeated pair) and 4 deletes, flushed; then 30
/// inserts and a delete left in the log. Returns the live pairs.
fn workload(storage: &MemStorage) -> BTreeSet<(u64, u64)> {
    let mut options = mem_options(storage, 10_000);
    options.compaction.automatic = false;
    // the frozen directory has records in its log: close must not flush them
    options.flush_on_close = false;
    let index = Index::open(DIR, options).unwrap();
    let mut rng = Rng(33);
    let mut live = BTreeSet::new();
    let center = rng.next();
    for i in 0..150u64 {
        let fp = if i % 4 == 0 { rng.flip(center, (i % 3) as u32) } else { rng.next() };
        index.insert(fp, 500 + i).unwrap();
        live.insert((fp, 500 + i));
        if i == 60 {
            index.insert(fp, 500 + i).unwrap();
        }
        if i % 37 == 5 || i == 130 {
            let victim = *live.iter().nth((rng.next() % live.len() as u64) as usize).unwrap();
            index.delete(victim.0, victim.1).unwrap();
            live.remove(&victim);
        }
        if i == 119 {
            index.flush().unwrap();
        }
    }
    index.close().unwrap();
    live
}

fn files(storage: &MemStorage) -> Vec<(String, Vec<u8>)> {
    let mut names = storage.list(Path::new(DIR)).unwrap();
    names.sort();
    names.into_iter().map(|n| (n.clone(), storage.file(&Path::new(DIR).join(&n)).unwrap())).collect()
}

fn load_fixture() -> MemStorage {
    load_fixture_of(NEWEST)
}

fn load_fixture_of(version: u32) -> MemStorage {
    let storage = MemStorage::default();
    for entry in std::fs::read_dir(fixture_dir_of(version)).expect("fixtures/vN/index") {
        let entry = entry.unwrap();
        storage.put(&Path::new(DIR).join(entry.file_name()), &std::fs::read(entry.path()).unwrap());
    }
    storage
}

#[test]
fn frozen_index_reads_back_exactly() {
    if std::env::var_os("SIMDEX_REGENERATE_FIXTURES").is_some() {
        let storage = MemStorage::default();
        workload(&storage);
        let _ = std::fs::remove_dir_all(fixture_dir());
        std::fs::create_dir_all(fixture_dir()).unwrap();
        for (name, bytes) in files(&storage) {
            std::fs::write(fixture_dir().join(name), bytes).unwrap();
        }
    }
    let want = workload(&MemStorage::default());
    for version in 1..=NEWEST {
        frozen_index_reads_back(version, &want);
    }
}

fn frozen_index_reads_back(version: u32, want: &BTreeSet<(u64, u64)>) {
    let storage = load_fixture_of(version);
    let kinds: Vec<String> = files(&storage).into_iter().map(|(n, _)| n.split('-').next().unwrap().to_string()).collect();
    assert_eq!(kinds, ["MANIFEST", "log", "seg", "tomb"]);
    let index = Index::open_read_only(DIR, mem_options(&storage, 10_000)).unwrap();
    assert_eq!(index.live_entries().unwrap(), want.iter().copied().collect::<Vec<_>>());
    let stats = index.stats();
    assert_eq!((stats.segments.len(), stats.tombstone_files, stats.memtable_inserts, stats.memtable_deletes), (1, 1, 30, 1));
    assert!(verify_index(&storage, Path::new(DIR)).unwrap().is_clean());
}

#[test]
fn engine_output_is_frozen() {
    let storage = MemStorage::default();
    workload(&storage);
    let fixture = load_fixture();
    let (got, want) = (files(&storage), files(&fixture));
    assert_eq!(got.len(), want.len());
    for ((gn, gb), (wn, wb)) in got.iter().zip(&want) {
        assert_eq!(gn, wn);
        assert!(gb == wb, "{gn}: the engine's bytes changed: see format-spec/README.md, versioning rules");
    }
}
