//! The expiry window (issue 36) against an oracle that knows when every pair was stored:
//! younger than the window always matches, older than window + granularity never does,
//! through flushes, compactions, reopens, a crash and a clock set back; compaction drops
//! expired segments whole; bad windows and a directory of other files are refused.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use simdex::storage::{MemStorage, Storage};
use simdex::{Clock, Error, Expiry, Index, IndexOptions, QueryOptions};

use crate::common::Rng;
use crate::engine::mem_options;

/// A clock the test sets.
#[derive(Debug, Default)]
pub struct TestClock(AtomicU64);

impl TestClock {
    pub fn set(&self, secs: u64) {
        self.0.store(secs, Ordering::SeqCst);
    }
}

impl Clock for TestClock {
    fn now_secs(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

const DAY: u64 = 86_400;

/// The live pairs of `index`, sorted.
fn pairs(index: &Index) -> Vec<(u64, u64)> {
    index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect()
}

/// `pairs` as the batch writes take them.
fn entries(pairs: &[(u64, u64)]) -> Vec<simdex::Entry> {
    pairs.iter().map(|&p| simdex::Entry::from(p)).collect()
}
const T0: u64 = 1_800_000_000;

fn expiring(storage: &MemStorage, clock: &Arc<TestClock>, memtable_ops: u64, window: &str) -> IndexOptions {
    mem_options(storage, memtable_ops).with_expiry(Some(Expiry::parse(window).unwrap())).with_clock(clock.clone())
}

/// Every stored pair checked against its age: present when at most `window` old, absent
/// when older than `window + granularity` (either in between).
fn check(index: &Index, stored: &BTreeMap<(u64, u64), u64>, now: u64, x: &Expiry) -> (usize, usize) {
    let (w, g) = (x.window().as_secs(), x.granularity().as_secs());
    let live: std::collections::BTreeSet<(u64, u64)> = pairs(index).into_iter().collect();
    let (mut young, mut old) = (0, 0);
    for (&(fp, id), &at) in stored {
        let found = index.query(fp, &QueryOptions::within(0)).unwrap().iter().any(|m| m.doc_id == Some(id));
        let age = now.saturating_sub(at);
        if age <= w {
            assert!(found && live.contains(&(fp, id)), "stored at {at}, {age} s old at {now}: must match (window {w} s)");
            young += 1;
        } else if age > w + g {
            assert!(!found && !live.contains(&(fp, id)), "stored at {at}, {age} s old at {now}: must not match (window {w} s + {g} s)");
            old += 1;
        }
    }
    (young, old)
}

#[test]
fn younger_than_the_window_matches_older_than_window_plus_granularity_never_does() {
    let mut storage = MemStorage::default();
    let clock = Arc::new(TestClock::default());
    let dir = Path::new("idx");
    let x = Expiry::parse("8d").unwrap();
    assert_eq!(x.granularity(), Duration::from_secs(DAY));
    let mut rng = Rng(36);
    let mut stored = BTreeMap::new();
    let mut now = T0 + 3_600 * 7;
    clock.set(now);
    let mut index = Index::open(dir, expiring(&storage, &clock, 300, "8d")).unwrap();
    let (mut young, mut old, mut dropped) = (0, 0, 0);
    for step in 0..40u64 {
        for i in 0..120u64 {
            let (fp, id) = (rng.next(), step * 1_000 + i);
            index.insert(fp, id).unwrap();
            stored.insert((fp, id), now);
        }
        now += DAY / 3 + rng.next() % (DAY / 2);
        clock.set(now);
        match step % 10 {
            3 => index.compact().unwrap(),
            6 => {
                dropped += index.stats().expired_segments;
                index.close().unwrap();
                index = Index::open(dir, expiring(&storage, &clock, 300, "8d").with_expiry(None)).unwrap();
            }
            8 => {
                // a crash: the memtable comes back from the log, stamped with its slice
                dropped += index.stats().expired_segments;
                let after_crash = storage.restart();
                drop(index);
                storage = after_crash;
                index = Index::open(dir, expiring(&storage, &clock, 300, "8d")).unwrap();
            }
            _ => {}
        }
        let (y, o) = check(&index, &stored, now, &x);
        young += y;
        old += o;
    }
    assert!(young > 10_000 && old > 10_000, "both sides exercised: {young} young, {old} old checks");
    let stats = index.stats();
    assert_eq!(stats.expiry, Some(x));
    assert!(
        dropped + stats.expired_segments >= 5 && stats.segments.len() <= 10,
        "compaction dropped expired segments: {dropped} + {}, {} live",
        stats.expired_segments,
        stats.segments.len()
    );
    let oldest = stats.oldest_live_secs.unwrap();
    assert!(oldest + 9 * DAY > now && oldest <= now - 7 * DAY, "oldest live slice starts {} s before now", now - oldest);
    index.close().unwrap();
}

#[test]
fn compaction_drops_expired_segments_whole_and_keeps_the_others_as_they_are() {
    let storage = MemStorage::default();
    let clock = Arc::new(TestClock::default());
    let dir = Path::new("idx");
    clock.set(T0);
    let index = Index::open(dir, expiring(&storage, &clock, 1 << 20, "8d")).unwrap();
    let mut rng = Rng(7);
    // one flush per day for twelve days, the policy run after each
    for day in 0..12u64 {
        clock.set(T0 + day * DAY + 60);
        let pairs: Vec<(u64, u64)> = (0..1_000).map(|i| (rng.next(), day * 10_000 + i)).collect();
        index.insert_many(&entries(&pairs)).unwrap();
        index.flush().unwrap();
        index.compact_tiered().unwrap();
    }
    // days 0..=2 expired on the way (older than 8 slices before day 11's); one segment per
    // live slice: the small tiers would have merged them all, but merges never cross a slice
    let before: Vec<String> = index.stats().segments.iter().map(|s| s.name.clone()).collect();
    assert_eq!(before.len(), 9);
    assert_eq!(index.stats().expired_segments, 3);
    clock.set(T0 + 12 * DAY + 120);
    index.compact_tiered().unwrap();
    let after: Vec<String> = index.stats().segments.iter().map(|s| s.name.clone()).collect();
    assert_eq!(after, before[1..].to_vec(), "day 3's segment dropped, the rest not rewritten");
    let files = storage.list(dir).unwrap();
    assert!(!files.contains(&before[0]), "the expired file is deleted");
    assert_eq!(index.stats().expired_segments, 4);
    assert_eq!(pairs(&index).len(), 8_000);
    // a full compaction merges within each slice only
    index.compact().unwrap();
    assert_eq!(index.stats().segments.len(), 8);
    index.close().unwrap();
}

#[test]
fn a_clock_set_back_never_expires_anything_early() {
    let storage = MemStorage::default();
    let clock = Arc::new(TestClock::default());
    let dir = Path::new("idx");
    clock.set(T0);
    let index = Index::open(dir, expiring(&storage, &clock, 50, "8d")).unwrap();
    let mut rng = Rng(9);
    let first: Vec<u64> = (0..200).map(|_| rng.next()).collect();
    for (i, &fp) in first.iter().enumerate() {
        index.insert(fp, i as u64).unwrap();
    }
    // the clock jumps back thirty days: nothing stored expires, and what is stored now is
    // stamped no older than what came before it
    clock.set(T0 - 30 * DAY);
    let second: Vec<u64> = (0..200).map(|_| rng.next()).collect();
    for (i, &fp) in second.iter().enumerate() {
        index.insert(fp, 1_000 + i as u64).unwrap();
    }
    index.compact().unwrap();
    for now in [T0 - 30 * DAY, T0, T0 + 8 * DAY] {
        clock.set(now);
        index.compact_tiered().unwrap();
        assert_eq!(pairs(&index).len(), 400, "at {now}");
    }
    clock.set(T0 + 10 * DAY);
    assert!(pairs(&index).is_empty());
    index.close().unwrap();
}

#[test]
fn an_expired_active_memtable_stops_matching_and_its_slice_rolls_on_the_next_insert() {
    let storage = MemStorage::default();
    let clock = Arc::new(TestClock::default());
    clock.set(T0);
    let index = Index::open(Path::new("idx"), expiring(&storage, &clock, 1 << 20, "80s")).unwrap();
    index.insert(0xabcd, 1).unwrap();
    clock.set(T0 + 80);
    assert_eq!(index.query(0xabcd, &QueryOptions::within(3)).unwrap().len(), 1, "80 s old: within the window");
    clock.set(T0 + 100);
    assert!(index.query(0xabcd, &QueryOptions::within(3)).unwrap().is_empty(), "older than window + granularity");
    assert!(matches!(index.find_or_insert(0xabcd, 2, &QueryOptions::within(3)).unwrap(), simdex::FindOrInsert::Inserted { .. }));
    assert_eq!(index.query(0xabcd, &QueryOptions::within(3)).unwrap().iter().map(|m| m.doc_id).collect::<Vec<_>>(), vec![Some(2)]);
    index.close().unwrap();
}

#[test]
fn the_window_is_pinned_at_creation_and_older_indexes_open_without_one() {
    let storage = MemStorage::default();
    let clock = Arc::new(TestClock::default());
    clock.set(T0);
    let dir = Path::new("idx");
    Index::open(dir, expiring(&storage, &clock, 100, "30d")).unwrap().close().unwrap();
    let manifest = storage.read_copy(&dir.join("MANIFEST")).unwrap();
    assert_eq!(u32::from_le_bytes(manifest[8..12].try_into().unwrap()), 4, "manifest version 4");
    let e = Index::open(dir, expiring(&storage, &clock, 100, "7d")).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("30d"), "{e}");
    let index = Index::open(dir, mem_options(&storage, 100).with_clock(clock.clone())).unwrap();
    assert_eq!(index.stats().expiry, Some(Expiry::parse("30d").unwrap()));
    index.close().unwrap();
    // an index without a window writes manifest version 3, as before
    let plain = Path::new("plain");
    Index::open(plain, mem_options(&storage, 100)).unwrap().close().unwrap();
    assert_eq!(u32::from_le_bytes(storage.read_copy(&plain.join("MANIFEST")).unwrap()[8..12].try_into().unwrap()), 3);
    assert!(Index::open(plain, expiring(&storage, &clock, 100, "30d")).is_err(), "a window cannot be added later");
}

#[test]
fn a_directory_of_other_files_is_refused_unless_asked() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("photos");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("holiday.jpg"), b"not an index").unwrap();
    let e = Index::open(&dir, IndexOptions::default()).unwrap_err();
    assert!(matches!(e, Error::NotAnIndex { .. }) && e.to_string().contains("holiday.jpg"), "{e}");
    let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, vec![std::ffi::OsString::from("holiday.jpg")], "nothing written");
    let index = Index::open(&dir, IndexOptions::default().with_create_in_nonempty(true)).unwrap();
    assert!(index.open_report().created);
    index.close().unwrap();
    // an empty directory, or a missing one, is created as before; an index reopens
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    Index::open(&empty, IndexOptions::default()).unwrap().close().unwrap();
    Index::open(&dir, IndexOptions::default()).unwrap().close().unwrap();
}

/// (fingerprint, id) pairs.
type Pairs = Vec<(u64, u64)>;

/// `fixtures/v5/index-expiring/`: an index with an 8-day window (manifest version 4): a
/// segment of 60 pairs stored at `T0` (with its id table), then, two days later, 30 inserts
/// and a delete of one of the first pairs left in its log (version 4; `fixtures/v4/` holds
/// the same with a version-3 log and no id table, still read). Regenerate with
/// `SIMDEX_REGENERATE_FIXTURES=1`.
fn expiring_workload(storage: &MemStorage) -> (Pairs, Pairs) {
    let clock = Arc::new(TestClock::default());
    clock.set(T0);
    let mut options = expiring(storage, &clock, 10_000, "8d");
    options.compaction.automatic = false;
    options.flush_on_close = false;
    let index = Index::open(Path::new("idx"), options).unwrap();
    let mut rng = Rng(44);
    let early: Vec<(u64, u64)> = (0..60).map(|i| (rng.next(), i)).collect();
    index.insert_many(&entries(&early)).unwrap();
    index.flush().unwrap();
    clock.set(T0 + 2 * DAY);
    let late: Vec<(u64, u64)> = (0..30).map(|i| (rng.next(), 100 + i)).collect();
    for &(fp, id) in &late {
        index.insert(fp, id).unwrap();
    }
    index.delete(early[3].0, early[3].1).unwrap();
    index.close().unwrap();
    let mut kept = early;
    kept.remove(3);
    (kept, late)
}

#[test]
fn the_frozen_expiring_index_reads_back_and_is_what_the_engine_writes() {
    let fixture = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/v5/index-expiring");
    let storage = MemStorage::default();
    let (early, late) = expiring_workload(&storage);
    let dir = Path::new("idx");
    let mut names = storage.list(dir).unwrap();
    names.sort();
    if std::env::var_os("SIMDEX_REGENERATE_FIXTURES").is_some() {
        let _ = std::fs::remove_dir_all(&fixture);
        std::fs::create_dir_all(&fixture).unwrap();
        for n in &names {
            std::fs::write(fixture.join(n), storage.file(&dir.join(n)).unwrap()).unwrap();
        }
    }
    let frozen = MemStorage::default();
    let mut frozen_names = Vec::new();
    for entry in std::fs::read_dir(&fixture).expect("fixtures/v5/index-expiring") {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        let bytes = std::fs::read(entry.path()).unwrap();
        assert!(storage.file(&dir.join(&name)).is_some_and(|b| b == bytes), "{name}: the engine's bytes changed: see format-spec/README.md, versioning rules");
        let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
        match name.as_str() {
            "MANIFEST" => assert_eq!(version, 4),
            n if n.ends_with(".wal") => assert_eq!(version, 4),
            _ => {}
        }
        frozen.put(&dir.join(&name), &bytes);
        frozen_names.push(name);
    }
    frozen_names.sort();
    assert_eq!(frozen_names, names);
    let clock = Arc::new(TestClock::default());
    let open = || Index::open_read_only(dir, mem_options(&frozen, 10_000).with_clock(clock.clone())).unwrap();
    let sorted = |mut v: Vec<(u64, u64)>| {
        v.sort_unstable();
        v
    };
    clock.set(T0 + 3 * DAY);
    assert_eq!(pairs(&open()), sorted(early.iter().chain(&late).copied().collect()));
    // nine days on, the first slice is dead; the one two days later is not
    clock.set(T0 + 9 * DAY);
    let index = open();
    assert_eq!(pairs(&index), sorted(late.clone()));
    assert_eq!(index.stats().expiry, Some(Expiry::parse("8d").unwrap()));
    assert!(simdex::recovery::verify_index(&frozen, dir).unwrap().is_clean());
    // the previous generation (a version-3 log, no id table) reads the same
    let older = MemStorage::default();
    let v4 = fixture.parent().unwrap().parent().unwrap().join("v4/index-expiring");
    for entry in std::fs::read_dir(&v4).expect("fixtures/v4/index-expiring") {
        let entry = entry.unwrap();
        older.put(&dir.join(entry.file_name()), &std::fs::read(entry.path()).unwrap());
    }
    clock.set(T0 + 3 * DAY);
    let index = Index::open_read_only(dir, mem_options(&older, 10_000).with_clock(clock.clone())).unwrap();
    assert_eq!(pairs(&index), sorted(early.iter().chain(&late).copied().collect()));
}
