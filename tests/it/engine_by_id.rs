//! Documents by id: `Index::fingerprints_of` (the segments' id tables, the memtables, the
//! tombstones) against a brute-force scan of the live pairs, `Index::replace` and
//! `find_or_replace` against a model map of id -> fingerprint, a crash at every storage
//! operation of a replacing workload (the old version or the new one, never both or
//! neither), old directories gaining their id tables, and damaged id tables found, named
//! and built again.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use proptest::prelude::*;
use simdex::recovery::verify_index;
use simdex::storage::{CrashMode, MemStorage, Storage};
use simdex::{ConfirmOptions, FindOrReplace, Index, QueryOptions};

use crate::common::Rng;
use crate::engine::mem_options;

const DIR: &str = "idx";

/// The oracle of `fingerprints_of`: the live pairs' fingerprints under `id`, from a scan.
fn brute_force(index: &Index, id: u64) -> Vec<u64> {
    index.live_entries().unwrap().into_iter().filter(|e| e.doc_id == id).map(|e| e.fingerprint).collect()
}

fn live(index: &Index) -> BTreeSet<(u64, u64)> {
    index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect()
}

#[test]
fn a_page_changed_100_times_leaves_one_entry() {
    let storage = MemStorage::default();
    // small memtables: the versions go through flushes and tiered merges
    let index = Index::open(DIR, mem_options(&storage, 16)).unwrap();
    let mut rng = Rng(44);
    let mut model: BTreeMap<u64, u64> = BTreeMap::new();
    // neighbours that stay put, and one page that changes 100 times
    for id in 0..40u64 {
        let fp = rng.next();
        index.insert(fp, id).unwrap();
        model.insert(id, fp);
    }
    let page = 1000u64;
    let within3 = QueryOptions::within(3);
    let mut changed = 0;
    for version in 0..=100u64 {
        let fp = rng.next();
        let before = model.get(&page).copied();
        match index.find_or_replace(fp, page, &within3).unwrap() {
            FindOrReplace::Inserted { .. } => assert_eq!((version, before), (0, None)),
            FindOrReplace::Replaced { previous, .. } => {
                assert_eq!(previous, vec![before.unwrap()], "version {version}");
                changed += 1;
            }
            other => panic!("version {version}: {other:?}"),
        }
        model.insert(page, fp);
        // a revisit of the same version (one bit off) is unchanged and writes nothing
        let seq = index.stats().last_seq;
        assert!(matches!(index.find_or_replace(fp ^ 1, page, &within3).unwrap(), FindOrReplace::Unchanged(m) if m.iter().any(|m| m.doc_id == Some(page))));
        assert_eq!(index.stats().last_seq, seq);
        assert_eq!(index.fingerprints_of(page).unwrap(), vec![fp]);
        if version % 17 == 0 {
            index.compact().unwrap();
        }
    }
    assert_eq!(changed, 100);
    let want: BTreeSet<(u64, u64)> = model.iter().map(|(&id, &fp)| (fp, id)).collect();
    assert_eq!(live(&index), want);
    assert_eq!(brute_force(&index, page).len(), 1);
    index.close().unwrap();
    let index = Index::open(DIR, mem_options(&storage, 16)).unwrap();
    assert_eq!(live(&index), want, "after a reopen");
    assert!(verify_index(&storage, Path::new(DIR)).unwrap().is_clean());
}

#[test]
fn confirmed_checks_replace_a_changed_sketched_page_and_keep_a_revisit() {
    let storage = MemStorage::default();
    let mut options = mem_options(&storage, 32);
    options.sketches = Some(simdex::SketchColumn { bytes: 64, scheme: simdex::minhash_scheme(1, 512, 1) });
    let index = Index::open(DIR, options).unwrap();
    let sketch = |seed: u64| {
        let mut s = [0u8; 64];
        let mut r = Rng(seed);
        for c in s.chunks_mut(8) {
            c.copy_from_slice(&r.next().to_le_bytes());
        }
        s
    };
    let confirm = ConfirmOptions::default().with_k(8).with_min_similarity(0.9).with_unsketched_k(3);
    let (fp, s) = (0x0123_4567_89ab_cdefu64, sketch(1));
    assert!(matches!(index.find_or_replace_confirmed(fp, 5, &s, &confirm).unwrap(), FindOrReplace::Inserted { .. }));
    // same sketch, fingerprint 5 bits away: a revisit (confirmed by the sketch)
    assert!(matches!(index.find_or_replace_confirmed(fp ^ 0x1f, 5, &s, &confirm).unwrap(), FindOrReplace::Unchanged(_)));
    // same fingerprint, another page's sketch: not a near copy, so the page changed
    let other = sketch(2);
    match index.find_or_replace_confirmed(fp, 5, &other, &confirm).unwrap() {
        FindOrReplace::Replaced { previous, .. } => assert_eq!(previous, vec![fp]),
        got => panic!("{got:?}"),
    }
    assert_eq!(index.fingerprints_of(5).unwrap(), vec![fp]);
    // the new sketch is the one stored
    let stored = index.query_sketched(fp, &QueryOptions::within(0)).unwrap();
    assert_eq!(stored.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(), vec![Some(other.to_vec())]);
    index.flush().unwrap();
    let stored = index.query_sketched(fp, &QueryOptions::within(0)).unwrap();
    assert_eq!(stored.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(), vec![Some(other.to_vec())], "after a flush");
    // a near-duplicate of another document: found, nothing written under the new id
    assert!(matches!(index.find_or_replace_confirmed(fp ^ 3, 6, &other, &confirm).unwrap(), FindOrReplace::Found(m) if m[0].doc_id == Some(5)));
    assert!(index.fingerprints_of(6).unwrap().is_empty());
    assert!(index.replace_sketched(fp, 6, &[0u8; 3]).is_err(), "a sketch of the wrong width is refused");
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u64, u64),
    Delete(usize),
    Replace(u64, u64),
    Flush,
    Compact,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    // few ids and fingerprints, so ids hold several pairs and replaces meet them
    let id = 0u64..12;
    let fp = prop_oneof![0u64..6, any::<u64>()];
    prop_oneof![
        6 => (fp.clone(), id.clone()).prop_map(|(f, i)| Op::Insert(f, i)),
        2 => any::<usize>().prop_map(Op::Delete),
        4 => (fp, id).prop_map(|(f, i)| Op::Replace(f, i)),
        1 => Just(Op::Flush),
        1 => Just(Op::Compact),
        1 => Just(Op::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, .. ProptestConfig::default() })]

    /// After any sequence of inserts, deletes, replaces, flushes, compactions and reopens,
    /// every id's lookup equals a brute-force scan of the live pairs and the model.
    #[test]
    fn the_id_lookup_equals_a_scan_of_the_live_pairs(ops in proptest::collection::vec(op(), 1..80)) {
        let storage = MemStorage::default();
        let options = || mem_options(&storage, 5);
        let mut index = Index::open(DIR, options()).unwrap();
        let mut model: BTreeSet<(u64, u64)> = BTreeSet::new();
        for op in &ops {
            match *op {
                Op::Insert(fp, id) => {
                    index.insert(fp, id).unwrap();
                    model.insert((fp, id));
                }
                Op::Delete(i) => {
                    if let Some(&(fp, id)) = model.iter().nth(i % model.len().max(1)) {
                        index.delete(fp, id).unwrap();
                        model.remove(&(fp, id));
                    }
                }
                Op::Replace(fp, id) => {
                    let previous: Vec<u64> = model.iter().filter(|p| p.1 == id).map(|p| p.0).collect();
                    let got = index.replace(fp, id).unwrap();
                    prop_assert_eq!(&got.previous, &previous);
                    model.retain(|p| p.1 != id);
                    model.insert((fp, id));
                }
                Op::Flush => index.flush().unwrap(),
                Op::Compact => index.compact().unwrap(),
                Op::Reopen => {
                    index.close().unwrap();
                    index = Index::open(DIR, options()).unwrap();
                }
            }
            for id in 0..12u64 {
                let want: Vec<u64> = model.iter().filter(|p| p.1 == id).map(|p| p.0).collect();
                prop_assert_eq!(index.fingerprints_of(id).unwrap(), want.clone(), "id {} after {:?}", id, op);
                prop_assert_eq!(brute_force(&index, id), want);
            }
        }
        prop_assert!(verify_index(&storage, Path::new(DIR)).unwrap().is_clean());
    }
}

/// A workload of inserts and replaces of a few pages (with flushes and tiered merges).
fn replacing_workload(index: &Index, model: &mut BTreeMap<u64, u64>, in_flight: &mut Option<(u64, u64)>) -> simdex::Result<()> {
    let mut rng = Rng(99);
    for i in 0..40u64 {
        let (fp, id) = (rng.next(), i % 6);
        *in_flight = Some((fp, id));
        if i < 6 {
            index.insert(fp, id)?;
        } else {
            index.replace(fp, id)?;
        }
        model.insert(id, fp);
        if i == 20 {
            index.flush()?;
        }
    }
    *in_flight = None;
    Ok(())
}

#[test]
fn a_crash_at_every_operation_keeps_the_old_version_or_the_new_one() {
    let options = |s: &MemStorage| {
        let mut o = mem_options(s, 8);
        o.compaction.fanout = 2;
        o
    };
    let total = {
        let storage = MemStorage::default();
        let index = Index::open(DIR, options(&storage)).unwrap();
        replacing_workload(&index, &mut BTreeMap::new(), &mut None).unwrap();
        storage.ops()
    };
    assert!(total > 100, "{total}");
    for mode in [CrashMode::DropUnsynced, CrashMode::TornTail { seed: 3 }] {
        for n in 0..=total {
            let storage = MemStorage::new(mode);
            storage.crash_after(n);
            let (mut model, mut in_flight) = (BTreeMap::new(), None);
            if let Ok(index) = Index::open(DIR, options(&storage)) {
                let _ = replacing_workload(&index, &mut model, &mut in_flight);
            }
            let storage = storage.restart();
            let index = Index::open(DIR, options(&storage)).unwrap_or_else(|e| panic!("crash after operation {n}: reopen failed: {e}"));
            let got = live(&index);
            let before: BTreeSet<(u64, u64)> = model.iter().map(|(&id, &fp)| (fp, id)).collect();
            let mut after = model.clone();
            if let Some((fp, id)) = in_flight {
                after.insert(id, fp);
            }
            let after: BTreeSet<(u64, u64)> = after.iter().map(|(&id, &fp)| (fp, id)).collect();
            assert!(got == before || got == after, "crash after operation {n} ({mode:?}, in flight {in_flight:?}):\n got  {got:?}\n want {before:?}");
            for id in 0..6 {
                assert!(index.fingerprints_of(id).unwrap().len() <= 1, "crash after operation {n}: id {id} holds two versions");
            }
        }
    }
}

#[test]
fn old_directories_gain_their_id_tables_on_a_writable_open() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let dirs = ["v1/index", "v2/index", "v2/index-sketched", "v3/index", "v3/index-sketched", "v4/index-sketched"];
    for name in dirs {
        let storage = MemStorage::default();
        for entry in std::fs::read_dir(fixtures.join(name)).unwrap() {
            let entry = entry.unwrap();
            storage.put(&Path::new(DIR).join(entry.file_name()), &std::fs::read(entry.path()).unwrap());
        }
        let mut options = mem_options(&storage, 10_000);
        options.compaction.automatic = false;
        options.flush_on_close = false;
        // read-only: no table, the id column is scanned
        let reader = Index::open_read_only(DIR, options.clone()).unwrap();
        assert!(reader.open_report().rebuilt_id_tables.is_empty());
        let pairs = live(&reader);
        let ids: BTreeSet<u64> = pairs.iter().map(|p| p.1).chain([u64::MAX]).collect();
        for &id in &ids {
            assert_eq!(reader.fingerprints_of(id).unwrap(), brute_force(&reader, id), "{name}: id {id}, read-only");
        }
        drop(reader);
        let index = Index::open(DIR, options.clone()).unwrap();
        assert_eq!(index.open_report().rebuilt_id_tables.len(), index.stats().segments.len(), "{name}: {:?}", index.open_report());
        for &id in &ids {
            assert_eq!(index.fingerprints_of(id).unwrap(), brute_force(&index, id), "{name}: id {id}");
        }
        // a replace in a directory whose log is of an older version goes to a new log
        let id = *ids.iter().next().unwrap();
        index.replace(0x5eed, id).unwrap();
        drop(index);
        let index = Index::open(DIR, options).unwrap();
        assert!(index.open_report().rebuilt_id_tables.is_empty(), "{name}: built once");
        assert_eq!(index.fingerprints_of(id).unwrap(), vec![0x5eed], "{name}");
        assert!(verify_index(&storage, Path::new(DIR)).unwrap().is_clean(), "{name}");
    }
}

#[test]
fn a_damaged_id_table_page_is_named_answered_around_and_built_again() {
    let storage = MemStorage::default();
    let options = || {
        let mut o = mem_options(&storage, 100_000);
        o.compaction.automatic = false;
        o
    };
    let index = Index::open(DIR, options()).unwrap();
    let mut rng = Rng(5);
    let pairs: Vec<(u64, u64)> = (0..3000u64).map(|i| (rng.next(), i / 2)).collect();
    index.insert_many(&pairs.iter().map(|&p| p.into()).collect::<Vec<_>>()).unwrap();
    index.close().unwrap();
    let name = storage.list(Path::new(DIR)).unwrap().into_iter().find(|n| n.ends_with(".sdi")).expect("an id table");
    let path = Path::new(DIR).join(&name);
    let clean = storage.file(&path).unwrap();
    let mut bytes = clean.clone();
    bytes[1024 + 2 * 1024 + 33] ^= 0x04;
    storage.put(&path, &bytes);
    let report = verify_index(&storage, Path::new(DIR)).unwrap();
    assert!(!report.is_clean());
    let named = report.problems.iter().find(|p| p.file == name).unwrap_or_else(|| panic!("{report:?}"));
    assert!(named.detail.contains("id table page checksum mismatch") && named.offset == Some(3 * 1024), "{named:?}");
    // every id answers right; a read-only open scans around the damage
    let reader = Index::open_read_only(DIR, options()).unwrap();
    let ids: BTreeSet<u64> = pairs.iter().map(|p| p.1).collect();
    for &id in ids.iter().step_by(7) {
        let mut want: Vec<u64> = pairs.iter().filter(|p| p.1 == id).map(|p| p.0).collect();
        want.sort_unstable();
        assert_eq!(reader.fingerprints_of(id).unwrap(), want, "id {id}");
    }
    drop(reader);
    // a writer answers right and builds the table again at the first lookup that meets it
    let index = Index::open(DIR, options()).unwrap();
    for &id in &ids {
        let mut want: Vec<u64> = pairs.iter().filter(|p| p.1 == id).map(|p| p.0).collect();
        want.sort_unstable();
        assert_eq!(index.fingerprints_of(id).unwrap(), want, "id {id}");
    }
    assert_eq!(index.stats().rebuilt_id_tables, 1);
    assert!(storage.file(&path).unwrap() == clean, "built again byte for byte");
    assert!(verify_index(&storage, Path::new(DIR)).unwrap().is_clean());
    // a missing table is built by the next writable open
    drop(index);
    storage.remove(&path).unwrap();
    let index = Index::open(DIR, options()).unwrap();
    assert_eq!(index.open_report().rebuilt_id_tables, vec![name]);
}

#[test]
fn recover_applies_replace_records_as_the_engine_does() {
    let storage = MemStorage::default();
    let mut options = mem_options(&storage, 1 << 20);
    options.flush_on_close = false;
    let index = Index::open("/idx", options).unwrap();
    let mut rng = Rng(12);
    for id in 0..50u64 {
        index.insert(rng.next(), id).unwrap();
    }
    index.flush().unwrap();
    for id in (0..50u64).step_by(3) {
        index.replace(rng.next(), id).unwrap();
    }
    let want = live(&index);
    drop(index);
    let report = simdex::recovery::salvage(&storage, Path::new("/idx"), Path::new("/out"), mem_options(&storage, 1 << 20)).unwrap();
    assert!(report.lost.is_empty(), "{:?}", report.lost);
    let out = Index::open("/out", mem_options(&storage, 1 << 20)).unwrap();
    assert_eq!(live(&out), want);
    for id in 0..50u64 {
        assert_eq!(out.fingerprints_of(id).unwrap().len(), 1, "id {id}");
    }
}
