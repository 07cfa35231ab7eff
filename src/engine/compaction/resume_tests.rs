//! Merges cut short and resumed: at every few storage operations the merge "dies" (the
//! in-memory storage fails every later call and keeps only what was synced), a new merge of
//! the same inputs goes on from the checkpoint, and its output must be byte for byte the
//! output of a merge that never stopped (the oracle), with no `merge.*` file left. Covers
//! both ways a merge writes its permuted tables (from the inputs' own tables, and sorted
//! from the live stream when tombstones and repeats drop pairs), spilled runs, the count,
//! the feed, every table, the ids and the sketches.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::checkpoint::is_merge_file;
use super::merge::{merge, MergeOptions, OutputFormat};
use super::test_segments::random_pairs;
use crate::codec::{Codec, SymbolHistogram};
use crate::engine::manifest::{SegmentMeta, TombstoneMeta};
use crate::engine::tombstone::Tombstone;
use crate::engine::version::{LiveSegment, TombstoneSet};
use crate::plan::{planned_design, PlanOptions};
use crate::segment::{IdColumn, Segment, SegmentWriter, SketchColumn};
use crate::storage::{CrashMode, MemStorage, Storage};

/// 64-byte sketches: 16 a page, 4,080 a group of pages, so a merge's output of 9,000 entries
/// has three groups, and a merge stops, checkpoints and resumes between them.
const SKETCH: SketchColumn = SketchColumn { bytes: 64, scheme: *b"testsk01" };

fn dir() -> PathBuf {
    PathBuf::from("/idx")
}

/// A segment of `pairs` with `tables` tables (`None`: the planner's), ids and 4-byte
/// sketches (`None` for `sketches == false`) derived from each pair.
fn write_segment(storage: &dyn Storage, path: &Path, mut pairs: Vec<(u64, u64)>, tables: Option<usize>, sketches: bool) {
    pairs.sort_unstable();
    let n = pairs.len() as u64;
    let design = planned_design(&PlanOptions { tables, ..PlanOptions::new(n, 3) }).unwrap();
    let codecs = vec![Codec::Xor; design.tables().len()];
    let mut w = SegmentWriter::create_with(storage, path, &design, &codecs, IdColumn::Present, sketches.then_some(SKETCH)).unwrap();
    for table in design.tables() {
        let mut values: Vec<u64> = pairs.iter().map(|p| table.permutation.apply(p.0)).collect();
        values.sort_unstable();
        w.write_table(&SymbolHistogram::of_sorted(Codec::Xor, &values).code(), values.iter().copied()).unwrap();
    }
    w.write_ids(pairs.iter().map(|p| p.1)).unwrap();
    if sketches {
        w.write_sketches(pairs.iter().map(|p| (0..16u32).flat_map(|i| ((p.0 ^ p.1) as u32 ^ i).to_le_bytes()).collect::<Vec<u8>>())).unwrap();
    }
    w.finish().unwrap();
}

fn pairs(seed: u64, count: usize, base: u64) -> Vec<(u64, u64)> {
    // a long run of one fingerprint under many ids spans blocks and pages, so that merges
    // stop inside it
    random_pairs(seed, count, base).into_iter().enumerate().map(|(i, (x, id))| (if (100..1_600).contains(&i) { seed.rotate_left(17) } else { x }, id)).collect()
}

/// The inputs of one case: `(tables, sketches)` per segment, and whether tombstones and
/// a repeated pair make the merge drop pairs.
struct Case {
    segments: Vec<(Option<usize>, bool)>,
    drops: bool,
}

/// The case's files on a new storage.
fn storage_of(case: &Case) -> MemStorage {
    let storage = MemStorage::new(CrashMode::DropUnsynced);
    storage.create_dir_all(&dir()).unwrap();
    for (i, &(tables, sketches)) in case.segments.iter().enumerate() {
        let mut p = pairs(0x9e37_79b9 + i as u64, 3_000, 1_000_000 * i as u64);
        if case.drops && i == 1 {
            // a pair stored in segment 0 too: a repeat
            p.push(pairs(0x9e37_79b9, 1, 0)[0]);
        }
        write_segment(&storage, &dir().join(format!("in{i}.sdx")), p, tables, sketches);
    }
    storage.sync_dir(&dir()).unwrap();
    storage
}

/// The live segments and tombstones of the case on `storage`.
fn open(case: &Case, storage: &dyn Storage) -> (Vec<Arc<LiveSegment>>, TombstoneSet) {
    let inputs = (0..case.segments.len())
        .map(|i| {
            let segment = Segment::open_with(storage, &dir().join(format!("in{i}.sdx"))).unwrap();
            let seq = 1 + 10_000 * i as u64;
            let meta = SegmentMeta { number: i as u64 + 1, entries: segment.len(), file_len: segment.file_len(), min_seq: seq, max_seq: seq + 5_000, epoch: 0 };
            Arc::new(LiveSegment { meta, segment, bands: Default::default(), ids: Default::default() })
        })
        .collect();
    let tombstones = if case.drops {
        let dead: Vec<Tombstone> =
            pairs(0x9e37_79b9 + 2, 3_000, 2_000_000).into_iter().step_by(7).map(|(fingerprint, doc_id)| Tombstone { fingerprint, doc_id, seq: 1_000_000 }).collect();
        let meta = TombstoneMeta { number: 50, count: dead.len() as u64, max_seq: 1_000_000, file_len: 0 };
        TombstoneSet::new(vec![(meta, Arc::new(dead))])
    } else {
        TombstoneSet::default()
    };
    (inputs, tombstones)
}

fn out() -> PathBuf {
    dir().join("seg-000000000100.sdx")
}

fn run(case: &Case, storage: &MemStorage, every: Option<Duration>) -> crate::Result<Option<super::merge::Merged>> {
    let (inputs, tombstones) = open(case, storage);
    let format = OutputFormat { k: 3, codec: Codec::Xor, sketches: Some(SKETCH) };
    merge(storage, &inputs, &tombstones, &out(), &format, &MergeOptions { buffer_entries: 1_500, checkpoint_interval: every, stop: None })
}

fn merge_files(storage: &MemStorage) -> Vec<String> {
    storage.list(&dir()).unwrap().into_iter().filter(|n| is_merge_file(n)).collect()
}

/// Crashes the merge after about `trials` evenly spread numbers of operations (offset by
/// `salt`), each in a new storage holding what the crash left, and resumes it; every
/// output equals the oracle's.
fn check_resumes(case: &Case, trials: u64, salt: u64) {
    let reference = storage_of(case);
    run(case, &reference, None).unwrap().unwrap();
    let want = reference.file(&out()).unwrap();
    let every = Some(Duration::ZERO);
    let clean = storage_of(case);
    let before = clean.ops();
    run(case, &clean, every).unwrap().unwrap();
    let total = clean.ops() - before;
    let stride = (total / trials).max(1) + salt;
    eprintln!("{total} operations, a crash every {stride}");
    assert_eq!(clean.file(&out()).unwrap(), want, "a merge that checkpoints writes what one that does not writes");
    let mut crash_at = stride;
    let mut resumed = 0;
    while crash_at < total {
        let storage = storage_of(case);
        storage.crash_after(crash_at);
        assert!(run(case, &storage, every).is_err(), "the merge survived its crash at {crash_at}");
        let storage = storage.restart();
        let merged = run(case, &storage, every).unwrap().unwrap();
        assert!(!merged.restarted, "crashed after {crash_at}: the checkpoint did not resume");
        resumed += usize::from(merged.resumed);
        assert_eq!(storage.file(&out()).unwrap(), want, "crashed after {crash_at} of {total} operations");
        assert_eq!(merge_files(&storage), Vec::<String>::new(), "crashed after {crash_at}");
        crash_at += stride;
    }
    // crashes before the first checkpoint, and after the output is installed, resume nothing
    assert!(resumed as u64 >= trials / 2, "only {resumed} crashes left a checkpoint to resume");
}

/// A merge killed again and again after `life` operations each time finishes, with the
/// output a merge that never stopped writes.
fn check_finishes_under_repeated_kills(case: &Case, life: u64) {
    let reference = storage_of(case);
    run(case, &reference, None).unwrap().unwrap();
    let want = reference.file(&out()).unwrap();
    let mut storage = storage_of(case);
    let mut lives = 0;
    loop {
        lives += 1;
        assert!(lives < 10_000, "no progress");
        storage.crash_after(life);
        match run(case, &storage, Some(Duration::ZERO)) {
            Ok(merged) if !storage.has_crashed() => {
                assert!(!merged.unwrap().restarted, "the last checkpoint did not resume");
                break;
            }
            _ => storage = storage.restart(),
        }
    }
    assert!(lives > 10, "the merge was not cut short ({lives} lives)");
    assert_eq!(storage.file(&out()).unwrap(), want);
    assert_eq!(merge_files(&storage), Vec::<String>::new());
}

#[test]
fn a_merge_from_the_inputs_own_tables_resumes_byte_for_byte() {
    // a 10-table input lacks permutations of the 4-table output: those are fed and sorted
    let case = Case { segments: vec![(None, true), (Some(10), false), (None, true)], drops: false };
    check_resumes(&case, 40, 3);
}

#[test]
fn a_merge_that_drops_pairs_resumes_byte_for_byte() {
    let case = Case { segments: vec![(None, true), (None, true), (None, false)], drops: true };
    check_resumes(&case, 40, 7);
}

#[test]
fn a_merge_killed_again_and_again_finishes() {
    let case = Case { segments: vec![(None, true), (Some(10), true), (None, true)], drops: false };
    check_finishes_under_repeated_kills(&case, 150);
    let case = Case { segments: vec![(None, true), (None, true), (None, true)], drops: true };
    check_finishes_under_repeated_kills(&case, 150);
}
