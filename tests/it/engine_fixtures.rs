//! Frozen index directories (`fixtures/v1/index/`, `fixtures/v2/index/`, `fixtures/v3/index/`:
//! manifest, segment, tombstone file and a log with unflushed records;
//! `fixtures/v2/index-sketched/`, `fixtures/v3/index-sketched/`: the same with a sketch per
//! document, so log version 2 and a sketch column), read by every future version; and a
//! check that the engine still writes exactly the newest version's bytes. A directory's
//! number is its generation: v1 segments and manifests version 1; v2 segments version 2
//! (manifest 1, or 2 with sketches); v3 manifests version 3, which record each live log's
//! synced length, and paged tombstone files version 2 (issue 23), with version-2 segments;
//! `fixtures/v4/index-sketched/` adds the band file of its segment (`seg-N.sdb`, band file
//! version 1, issue 39), which v2 and v3 sketched directories lack (a read-only open answers
//! without it; a writable open builds it); `fixtures/v5/` adds the id table of each segment
//! (`seg-N.sdi`, id table version 1) and writes logs of version 4 (replace records), which
//! older generations lack (a read-only open scans the id column; a writable open builds the
//! table and starts a version-4 log); `fixtures/v5/index-replaced/` pins replace records
//! in a log and their effect in a segment; `fixtures/v6/index-sketched/` writes band files of
//! version 2 (bit-packed entries, grouped bucket ends), and generation 5's version-1 band
//! file is still read as it is; `fixtures/v7/index-sketched/` writes its segment in version 3
//! (the sketch column's pages whole, a CRC page after each group of 255), and generation 6's
//! version-2 segment is still read as it is; `fixtures/v8/index-sketched/` writes band files
//! of version 3 (Elias-Fano coded ordinals in blocks of 8 buckets), and generation 7's
//! version-2 band file is still read as it is; `fixtures/v9/index-sketched/` writes band
//! files of version 4 (version 3 with 5-bit tags), and generation 8's version-3 band file
//! is still read as it is.
//!
//! To regenerate after a deliberate change (see `format-spec/README.md`), run
//! `SIMDEX_REGENERATE_FIXTURES=1 cargo test --test it engine_fixtures` and commit the diff.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use simdex::recovery::verify_index;
use simdex::storage::{MemStorage, Storage};
use simdex::Index;

use crate::common::Rng;
use crate::engine::mem_options;

const DIR: &str = "idx";

/// The index directory generation the engine writes today (see the module docs).
const NEWEST: u32 = 5;
/// The same for an index with sketches (its segments have band files since generation 4,
/// of version 2 since generation 6, of version 3 since generation 8, of version 4 since
/// generation 9; its segments are version 3 since generation 7).
const NEWEST_SKETCHED: u32 = 9;
/// The first generation whose segments have id tables and whose logs are version 4.
const ID_TABLES: u32 = 5;
/// The generations of the plain index (generation 4 changed only sketched indexes).
const PLAIN: [u32; 4] = [1, 2, 3, 5];

fn fixture_dir_of(version: u32) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("fixtures/v{version}/index"))
}

fn fixture_dir() -> PathBuf {
    fixture_dir_of(NEWEST)
}

fn sketched_fixture_dir() -> PathBuf {
    sketched_fixture_dir_of(NEWEST_SKETCHED)
}

fn sketched_fixture_dir_of(version: u32) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("fixtures/v{version}/index-sketched"))
}

/// The sketch layout of the sketched fixture: 16 bytes, 128 one-bit MinHash values.
fn sketch_column() -> simdex::SketchColumn {
    simdex::SketchColumn { bytes: 16, scheme: simdex::minhash_scheme(1, 128, 1) }
}

/// The sketch the sketched workload stores with `(fp, id)`: none for every fifth id.
fn sketch_of(fp: u64, id: u64) -> Option<[u8; 16]> {
    let mut s = [0u8; 16];
    s[..8].copy_from_slice(&fp.to_le_bytes());
    s[8..].copy_from_slice(&(id | 1).to_le_bytes());
    (id % 5 != 0).then_some(s)
}

/// 120 inserts (some near copies, one repeated pair) and 4 deletes, flushed; then 30
/// inserts and a delete left in the log. Returns the live pairs.
fn workload(storage: &MemStorage) -> BTreeSet<(u64, u64)> {
    workload_with(storage, false)
}

/// The workload, with `sketched` in an index that stores [`sketch_of`] with each insert.
fn workload_with(storage: &MemStorage, sketched: bool) -> BTreeSet<(u64, u64)> {
    let mut options = mem_options(storage, 10_000);
    options.sketches = sketched.then(sketch_column);
    options.compaction.automatic = false;
    // the frozen directory has records in its log: close must not flush them
    options.flush_on_close = false;
    let index = Index::open(DIR, options).unwrap();
    let mut rng = Rng(33);
    let mut live = BTreeSet::new();
    let center = rng.next();
    for i in 0..150u64 {
        let fp = if i % 4 == 0 { rng.flip(center, (i % 3) as u32) } else { rng.next() };
        let insert = |fp: u64, id: u64| match sketch_of(fp, id).filter(|_| sketched) {
            Some(s) => index.insert_sketched(fp, id, &s).unwrap(),
            None => index.insert(fp, id).unwrap(),
        };
        insert(fp, 500 + i);
        live.insert((fp, 500 + i));
        if i == 60 {
            insert(fp, 500 + i);
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
    for version in PLAIN {
        frozen_index_reads_back(version, &want);
    }
}

#[test]
fn frozen_sketched_index_reads_back_exactly_and_is_what_the_engine_writes() {
    let storage = MemStorage::default();
    let want = workload_with(&storage, true);
    if std::env::var_os("SIMDEX_REGENERATE_FIXTURES").is_some() {
        let _ = std::fs::remove_dir_all(sketched_fixture_dir());
        std::fs::create_dir_all(sketched_fixture_dir()).unwrap();
        for (name, bytes) in files(&storage) {
            std::fs::write(sketched_fixture_dir().join(name), bytes).unwrap();
        }
    }
    let load = |dir: PathBuf| {
        let fixture = MemStorage::default();
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let entry = entry.unwrap();
            fixture.put(&Path::new(DIR).join(entry.file_name()), &std::fs::read(entry.path()).unwrap());
        }
        fixture
    };
    let fixture = load(sketched_fixture_dir());
    let (got, frozen) = (files(&storage), files(&fixture));
    assert_eq!(got.iter().map(|f| &f.0).collect::<Vec<_>>(), frozen.iter().map(|f| &f.0).collect::<Vec<_>>());
    for ((name, g), (_, w)) in got.iter().zip(&frozen) {
        assert!(g == w, "{name}: the engine's bytes changed: see format-spec/README.md, versioning rules");
    }
    for (name, bytes) in &frozen {
        let want = if name == "MANIFEST" { 3 } else { 4 };
        if name == "MANIFEST" || name.ends_with(".wal") {
            assert_eq!(u32::from_le_bytes(bytes[8..12].try_into().unwrap()), want, "{name} is version {want}");
        }
    }
    assert!(frozen.iter().any(|(name, bytes)| name.ends_with(".sdb") && bytes.starts_with(b"SIMDXBND\x04\0\0\0")), "generation 9 has a band file, version 4");
    assert!(frozen.iter().any(|(name, bytes)| name.ends_with(".sdx") && bytes.starts_with(b"SIMDXSEG\x03\0\0\0")), "generation 9's segment is version 3");
    let generation_8 = files(&load(sketched_fixture_dir_of(8)));
    assert!(generation_8.iter().any(|(name, bytes)| name.ends_with(".sdb") && bytes.starts_with(b"SIMDXBND\x03\0\0\0")), "generation 8's band file is version 3");
    let same_but_bands = |a: &[(String, Vec<u8>)]| a.iter().filter(|(n, _)| !n.ends_with(".sdb")).cloned().collect::<Vec<_>>();
    assert_eq!(same_but_bands(&generation_8), same_but_bands(&frozen), "generation 9 changed only the band file");
    let generation_7 = files(&load(sketched_fixture_dir_of(7)));
    assert!(generation_7.iter().any(|(name, bytes)| name.ends_with(".sdb") && bytes.starts_with(b"SIMDXBND\x02\0\0\0")), "generation 7's band file is version 2");
    let generation_6 = files(&load(sketched_fixture_dir_of(6)));
    assert!(generation_6.iter().any(|(name, bytes)| name.ends_with(".sdx") && bytes.starts_with(b"SIMDXSEG\x02\0\0\0")), "generation 6's segment is version 2");
    let generation_5 = files(&load(sketched_fixture_dir_of(5)));
    assert!(generation_5.iter().any(|(name, bytes)| name.ends_with(".sdb") && bytes.starts_with(b"SIMDXBND\x01\0\0\0")), "generation 5's band file is version 1");
    assert!(frozen.iter().any(|(name, bytes)| name.ends_with(".sdi") && bytes.starts_with(b"SIMDXIDT\x01\0\0\0")), "generation 5 has an id table, version 1");
    // The previous generations (manifest version 2, no band files, no id tables) still
    // open, with the same contents; a writer builds the band file and id table they lack.
    for fixture in [
        load(sketched_fixture_dir_of(2)),
        load(sketched_fixture_dir_of(3)),
        load(sketched_fixture_dir_of(4)),
        load(sketched_fixture_dir_of(5)),
        load(sketched_fixture_dir_of(6)),
        load(sketched_fixture_dir_of(7)),
        load(sketched_fixture_dir_of(8)),
        fixture,
    ] {
        sketched_fixture_reads_back(&fixture, &want);
    }
    let older = load(sketched_fixture_dir_of(3));
    let mut options = mem_options(&older, 10_000);
    options.compaction.automatic = false;
    options.flush_on_close = false;
    let index = Index::open(DIR, options).unwrap();
    assert_eq!(index.open_report().rebuilt_bands.len(), 1, "{:?}", index.open_report());
    assert_eq!(index.open_report().rebuilt_id_tables.len(), 1, "{:?}", index.open_report());
    drop(index);
    let derived = |s: &MemStorage, suffix: &str| files(s).into_iter().find(|(n, _)| n.ends_with(suffix)).unwrap();
    // (for the same version-2 segment: generation 6's; a band file and an id table name
    // their segment's length and footer CRC, which version 3 changed; the band file is
    // version 4 now: generation 9's but for the segment's length and footer CRC, bytes
    // 32 .. 44 of its head, and the head's CRC)
    let (built, newest) = (derived(&older, ".sdb").1, derived(&load(sketched_fixture_dir()), ".sdb").1);
    let unnamed = |b: &[u8]| [&b[..32], &b[44..56], &b[60..]].concat();
    assert!(built.starts_with(b"SIMDXBND\x04\0\0\0") && unnamed(&built) == unnamed(&newest), "the band file a writer builds is generation 9's");
    assert_eq!(derived(&older, ".sdi"), derived(&load(sketched_fixture_dir_of(6)), ".sdi"), "the id table a writer builds is generation 6's");
    assert!(verify_index(&older, Path::new(DIR)).unwrap().is_clean());
}

fn sketched_fixture_reads_back(fixture: &MemStorage, want: &BTreeSet<(u64, u64)>) {
    let index = Index::open_read_only(DIR, mem_options(fixture, 10_000)).unwrap();
    assert_eq!(index.sketches(), Some(sketch_column()));
    assert_eq!(index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>(), want.iter().copied().collect::<Vec<_>>());
    let stats = index.stats();
    assert_eq!((stats.segments.len(), stats.memtable_inserts), (1, 30), "sketches in the segment and in the log");
    for &(fp, id) in want {
        let got = index.query_sketched(fp, &simdex::QueryOptions::within(0)).unwrap();
        let mine: Vec<_> = got.iter().filter(|(m, _)| m.doc_id == Some(id)).map(|(_, s)| s.clone()).collect();
        assert_eq!(mine, vec![sketch_of(fp, id).map(|s| s.to_vec())], "({fp:#x}, {id})");
    }
    assert!(verify_index(fixture, Path::new(DIR)).unwrap().is_clean());
}

fn frozen_index_reads_back(version: u32, want: &BTreeSet<(u64, u64)>) {
    let storage = load_fixture_of(version);
    let kinds: Vec<String> = files(&storage).into_iter().map(|(n, _)| n.split('-').next().unwrap().to_string()).collect();
    if version < ID_TABLES {
        assert_eq!(kinds, ["MANIFEST", "log", "seg", "tomb"]);
    } else {
        assert_eq!(kinds, ["MANIFEST", "log", "seg", "seg", "tomb"], "a segment and its id table");
    }
    let index = Index::open_read_only(DIR, mem_options(&storage, 10_000)).unwrap();
    assert_eq!(index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>(), want.iter().copied().collect::<Vec<_>>());
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

#[test]
fn older_generations_open_for_writing_and_upgrade_their_manifest() {
    // A writer on a version-1 or version-2 directory records its logs (manifest version 3)
    // and keeps every pair; the directory then verifies clean and reads back.
    let want = workload(&MemStorage::default());
    for version in PLAIN.into_iter().filter(|&v| v < NEWEST) {
        let storage = load_fixture_of(version);
        let index = Index::open(DIR, mem_options(&storage, 10_000)).unwrap();
        assert!(index.open_report().lost.is_empty(), "v{version}: {:?}", index.open_report());
        index.insert(0x0bad_cafe_0bad_cafe, 9999).unwrap();
        index.close().unwrap();
        let manifest = storage.file(&Path::new(DIR).join("MANIFEST")).unwrap();
        assert_eq!(u32::from_le_bytes(manifest[8..12].try_into().unwrap()), 3, "v{version}");
        assert!(verify_index(&storage, Path::new(DIR)).unwrap().is_clean(), "v{version}");
        let index = Index::open_read_only(DIR, mem_options(&storage, 10_000)).unwrap();
        let mut expected: Vec<(u64, u64)> = want.iter().copied().collect();
        expected.push((0x0bad_cafe_0bad_cafe, 9999));
        expected.sort_unstable();
        assert_eq!(index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>(), expected, "v{version}");
    }
}

fn replaced_fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/v5/index-replaced")
}

/// 20 pages stored, 6 replaced and one deleted, flushed (a segment, its id table, a
/// tombstone file); then 6 more replaced and one replaced again, left in the log as replace
/// records. Returns what each id holds.
fn replaced_workload(storage: &MemStorage) -> BTreeMap<u64, u64> {
    let mut options = mem_options(storage, 10_000);
    options.compaction.automatic = false;
    options.flush_on_close = false;
    let index = Index::open(DIR, options).unwrap();
    let mut rng = Rng(51);
    let mut model = BTreeMap::new();
    for id in 0..20u64 {
        let fp = rng.next();
        index.insert(fp, id).unwrap();
        model.insert(id, fp);
    }
    for id in (0..6u64).chain(6..12).chain([0]) {
        let fp = rng.next();
        assert_eq!(index.replace(fp, id).unwrap().previous, vec![model[&id]]);
        model.insert(id, fp);
        if id == 5 {
            index.delete(model[&19], 19).unwrap();
            model.remove(&19);
            index.flush().unwrap();
        }
    }
    index.close().unwrap();
    model
}

#[test]
fn frozen_replaced_index_reads_back_and_is_what_the_engine_writes() {
    let storage = MemStorage::default();
    let model = replaced_workload(&storage);
    if std::env::var_os("SIMDEX_REGENERATE_FIXTURES").is_some() {
        let _ = std::fs::remove_dir_all(replaced_fixture_dir());
        std::fs::create_dir_all(replaced_fixture_dir()).unwrap();
        for (name, bytes) in files(&storage) {
            std::fs::write(replaced_fixture_dir().join(name), bytes).unwrap();
        }
    }
    let fixture = MemStorage::default();
    for entry in std::fs::read_dir(replaced_fixture_dir()).expect("fixtures/v5/index-replaced") {
        let entry = entry.unwrap();
        fixture.put(&Path::new(DIR).join(entry.file_name()), &std::fs::read(entry.path()).unwrap());
    }
    let (got, frozen) = (files(&storage), files(&fixture));
    assert_eq!(got.iter().map(|f| &f.0).collect::<Vec<_>>(), frozen.iter().map(|f| &f.0).collect::<Vec<_>>());
    for ((name, g), (_, w)) in got.iter().zip(&frozen) {
        assert!(g == w, "{name}: the engine's bytes changed: see format-spec/README.md, versioning rules");
    }
    // the log holds the replace records (version 4), each one record of a delete and an insert
    let (name, log) = frozen.iter().find(|(n, _)| n.ends_with(".wal")).unwrap();
    let number: u64 = name.trim_start_matches("log-").trim_end_matches(".wal").parse().unwrap();
    let mut kinds = Vec::new();
    simdex::log::scan_log(Path::new(name), log, number, simdex::log::ScanMode::Strict, |r| {
        kinds.push((r.kind, r.len()));
        Ok(())
    })
    .unwrap();
    assert_eq!(kinds, vec![(simdex::log::OpKind::Replace, 2); 7]);
    assert_eq!(u32::from_le_bytes(log[8..12].try_into().unwrap()), 4);
    let index = Index::open_read_only(DIR, mem_options(&fixture, 10_000)).unwrap();
    let want: BTreeSet<(u64, u64)> = model.iter().map(|(&id, &fp)| (fp, id)).collect();
    assert_eq!(index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<BTreeSet<_>>(), want);
    for id in 0..20u64 {
        assert_eq!(index.fingerprints_of(id).unwrap(), model.get(&id).map_or_else(Vec::new, |&fp| vec![fp]), "id {id}");
    }
    assert!(verify_index(&fixture, Path::new(DIR)).unwrap().is_clean());
}
