//! Band files heal themselves (`src/engine/banded.rs`): for every kind of damage (a flipped
//! bit in a page, a truncated file, a directory in its place, an unreadable file, a missing
//! file) the crawler's check answers right (oracle: the band rule's answers at least, the
//! exhaustive check's at most: a segment without its band file answers from its tables),
//! the stats count and name it, and the file is built again without a person: by a writable
//! open, or by the maintenance work when a check meets the damage; what cannot be read as a
//! file is set aside, never deleted. Every index here is on the real file system (a
//! directory and an unreadable file in a band file's place need one).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use simdex::storage::FsStorage;
use simdex::{ConfirmOptions, Index, IndexOptions, Match};

use crate::engine_bands::{band_files_alone, clustered_in, column, key, oracle, Model, Sketch};

/// What is done to a band file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Damage {
    /// One bit flipped in a page some check reads.
    FlippedBit,
    /// Cut to half its length.
    Truncated,
    /// A directory where the file was.
    Directory,
    /// A name that cannot be opened for reading (a symbolic link to itself: root reads
    /// files without read permission).
    Unreadable,
    /// Removed.
    Missing,
}

const KINDS: [Damage; 5] = [Damage::FlippedBit, Damage::Truncated, Damage::Directory, Damage::Unreadable, Damage::Missing];

fn options(background: bool) -> IndexOptions {
    let mut o = IndexOptions::default().with_storage(std::sync::Arc::new(FsStorage)).with_sketches(Some(column())).with_memtable_ops(10_000).with_background(background);
    o.compaction.automatic = false;
    // no merge: the damaged band file's segment stays (`compact_tiered` only heals)
    o.compaction.max_merge_entries = 1;
    o
}

/// An index of three segments (two flushes and the close's, each with its band file), closed; its model,
/// the queries (near each center) and the band files' names.
struct Fixture {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    model: Model,
    queries: Vec<(u64, Sketch)>,
    band_files: Vec<String>,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("idx");
    let (index, model, centers) = clustered_in(&dir, options(false), 3000);
    index.close().unwrap();
    let mut band_files: Vec<String> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).filter(|n| n.ends_with(".sdb")).collect();
    band_files.sort();
    assert_eq!(band_files.len(), 3, "two flushes and the close's");
    let mut rng = crate::common::Rng(17);
    let queries = centers.iter().enumerate().map(|(n, &(c, cs))| (rng.flip(c, (n % 4) as u32), crate::engine_bands::near(&cs, (n % 20) as u32, &mut rng))).collect();
    Fixture { _tmp: tmp, dir, model, queries, band_files }
}

/// Every query's answer is at least the band rule's and at most the exhaustive check's;
/// `exact`: exactly the band rule's (every band file in use).
fn answers_right(index: &Index, f: &Fixture, exact: bool) {
    let o = ConfirmOptions::within(8);
    for &(q, qs) in &f.queries {
        let mut got = index.query_confirmed(q, &qs, &o).unwrap();
        got.sort_by_key(key);
        let want = oracle(&f.model, q, &qs, &o, Some(&band_files_alone));
        let all = oracle(&f.model, q, &qs, &o, None);
        let missed: Vec<&Match> = want.iter().filter(|w| !got.contains(w)).collect();
        let extra: Vec<&Match> = got.iter().filter(|g| !all.contains(g)).collect();
        assert!(missed.is_empty() && extra.is_empty(), "query {q:016x}: missed {missed:?}, beyond the exhaustive check {extra:?}");
        if exact {
            assert_eq!(got, want, "query {q:016x}: with every band file in use, the band rule's answers");
        }
    }
}

/// The byte offset of one bit whose flip some query's band lookup meets: tried page by page
/// (read-only opens of a copy of the index never change it) until the checks count a
/// fallback.
fn bit_a_check_reads(f: &Fixture, file: &str) -> u64 {
    let path = f.dir.join(file);
    let original = std::fs::read(&path).unwrap();
    for page in 1..(original.len() as u64 / 1024) {
        let at = page * 1024 + 17;
        let mut bytes = original.clone();
        bytes[at as usize] ^= 0x04;
        std::fs::write(&path, &bytes).unwrap();
        let index = Index::open_read_only(&f.dir, options(false)).unwrap();
        answers_right(&index, f, false);
        let hit = index.stats().band_fallbacks > 0;
        drop(index);
        std::fs::write(&path, &original).unwrap();
        if hit {
            return at;
        }
    }
    panic!("no page of {file} is read by the fixture's checks");
}

/// Applies `damage` to band file `file` of `f`.
fn damage(f: &Fixture, file: &str, damage: Damage) {
    let path = f.dir.join(file);
    match damage {
        Damage::FlippedBit => {
            let at = bit_a_check_reads(f, file);
            let mut bytes = std::fs::read(&path).unwrap();
            bytes[at as usize] ^= 0x04;
            std::fs::write(&path, &bytes).unwrap();
        }
        Damage::Truncated => {
            let len = std::fs::metadata(&path).unwrap().len();
            std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(len / 2).unwrap();
        }
        Damage::Directory => {
            std::fs::remove_file(&path).unwrap();
            std::fs::create_dir(&path).unwrap();
            std::fs::write(path.join("inside.txt"), b"not a band file").unwrap();
        }
        Damage::Unreadable => {
            std::fs::remove_file(&path).unwrap();
            std::os::unix::fs::symlink(file, &path).unwrap();
            assert!(std::fs::read(&path).is_err(), "a symbolic link to itself cannot be read");
        }
        Damage::Missing => std::fs::remove_file(&path).unwrap(),
    }
}

/// `band_files_unusable` names `file` (and nothing else).
fn names_only(index: &Index, file: &str) {
    let unusable = index.stats().band_files_unusable;
    assert!(unusable.len() == 1 && unusable[0].starts_with(file), "{unusable:?}");
}

/// Verify finds nothing wrong, and every segment has its band file.
fn clean(f: &Fixture) {
    let report = simdex::recovery::verify_index(&FsStorage, &f.dir).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    for file in &f.band_files {
        assert!(std::fs::metadata(f.dir.join(file)).unwrap().is_file(), "{file} is a band file again");
    }
}

#[test]
fn every_kind_of_band_file_damage_answers_right_and_is_rebuilt_by_a_writer() {
    for kind in KINDS {
        let f = fixture();
        let file = f.band_files[0].clone();
        damage(&f, &file, kind);
        // A reader answers right, from that segment's tables, and says which file.
        let ro = Index::open_read_only(&f.dir, options(false)).unwrap();
        answers_right(&ro, &f, false);
        names_only(&ro, &file);
        assert_eq!(ro.stats().band_fallbacks > 0, kind == Damage::FlippedBit, "{kind:?}: the fallbacks counted are the failed lookups");
        drop(ro);
        // A writer without a maintenance thread: the open builds what it cannot open (a
        // directory or an unreadable file set aside first); a page found damaged by a check
        // is built again by the writer's next maintenance (here: compact_tiered).
        let index = Index::open(&f.dir, options(false)).unwrap();
        let report = index.open_report().clone();
        let set_aside = matches!(kind, Damage::Directory | Damage::Unreadable);
        assert_eq!(report.set_aside, if set_aside { vec![format!("{file}.set-aside")] } else { Vec::new() }, "{kind:?}");
        if kind == Damage::FlippedBit {
            assert!(report.rebuilt_bands.is_empty(), "the open reads no page");
            answers_right(&index, &f, false);
            names_only(&index, &file);
            assert_eq!(index.stats().band_fallbacks, 1, "set aside at the first failed lookup: later checks go straight to the tables");
            index.compact_tiered().unwrap();
            assert_eq!(index.stats().band_files_rebuilt, 1);
        } else {
            assert_eq!(report.rebuilt_bands, vec![file.clone()], "{kind:?}");
        }
        assert!(index.stats().band_files_unusable.is_empty());
        answers_right(&index, &f, true);
        index.close().unwrap();
        clean(&f);
        if set_aside {
            let aside = f.dir.join(format!("{file}.set-aside"));
            assert!(std::fs::symlink_metadata(&aside).is_ok(), "{kind:?}: what was in the way is kept for a person to look at");
        }
    }
}

/// Polls until the index's band files are all in use (the maintenance thread's work).
fn wait_until_healed(index: &Index) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !index.stats().band_files_unusable.is_empty() {
        assert!(Instant::now() < deadline, "band files not rebuilt: {:?}", index.stats().band_files_unusable);
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_maintenance_thread_rebuilds_band_files_while_checks_go_on() {
    for kind in KINDS {
        let f = fixture();
        let file = f.band_files[1].clone();
        damage(&f, &file, kind);
        let index = Index::open(&f.dir, options(true)).unwrap();
        assert!(index.open_report().rebuilt_bands.is_empty(), "{kind:?}: a writer with a maintenance thread opens without building");
        // checks answer right whether or not the rebuild has finished
        answers_right(&index, &f, false);
        wait_until_healed(&index);
        answers_right(&index, &f, true);
        let stats = index.stats();
        assert_eq!(stats.band_files_rebuilt, 1, "{kind:?}");
        index.close().unwrap();
        clean(&f);
    }
}

/// (The index lists files only: a directory is never an orphan it removes.)
#[test]
fn a_directory_named_like_a_band_file_of_no_segment_does_not_stop_a_writer() {
    let f = fixture();
    let orphan = f.dir.join("seg-000000099999.sdb");
    std::fs::create_dir(&orphan).unwrap();
    let index = Index::open(&f.dir, options(false)).unwrap();
    answers_right(&index, &f, true);
    index.close().unwrap();
    assert!(orphan.is_dir(), "not a file the index wrote: left alone");
}

#[test]
fn a_second_set_aside_of_one_band_file_takes_the_next_name() {
    let f = fixture();
    let file = f.band_files[2].clone();
    for round in 1..=2 {
        damage(&f, &file, Damage::Directory);
        let index = Index::open(&f.dir, options(false)).unwrap();
        let want = if round == 1 { format!("{file}.set-aside") } else { format!("{file}.set-aside.2") };
        assert_eq!(index.open_report().set_aside, vec![want]);
        answers_right(&index, &f, true);
        index.close().unwrap();
    }
    clean(&f);
}
