//! Compaction progress survives kills: a full compaction of many segments is killed (the
//! in-memory storage crashes) at a random operation, again and again. With merges bounded
//! by `max_merge_entries`, every attempt keeps the merges it finished; with one unbounded
//! merge, every attempt goes on from the merge's last checkpoint. Either way the segment
//! count never grows, the compaction ends where an uninterrupted one ends, and no
//! acknowledged write is lost on the way.

use std::collections::BTreeSet;
use std::time::Duration;

use simdex::storage::MemStorage;
use simdex::{CompactionOptions, Index, IndexOptions};

use crate::common::Rng;
use crate::engine::mem_options;

const DIR: &str = "idx";

fn options(storage: &MemStorage, max_merge_entries: u64) -> IndexOptions {
    checkpointing(storage, max_merge_entries, None)
}

/// [`options`] with merges that record a checkpoint every `interval`.
fn checkpointing(storage: &MemStorage, max_merge_entries: u64, checkpoint_interval: Option<Duration>) -> IndexOptions {
    mem_options(storage, 64).with_compaction(
        CompactionOptions::default()
            .with_fanout(4)
            .with_buffer_entries(512)
            .with_automatic(false)
            .with_max_merge_entries(max_merge_entries)
            .with_checkpoint_interval(checkpoint_interval)
            .with_settle(None),
    )
}

/// 48 segments of 64 operations (every 9th a delete of an earlier pair, some pairs
/// repeated), flushed without automatic compaction; the model of what they hold.
fn build(max_merge_entries: u64) -> (MemStorage, BTreeSet<(u64, u64)>) {
    let storage = MemStorage::default();
    let index = Index::open(DIR, options(&storage, max_merge_entries)).unwrap();
    let mut rng = Rng(0xc0_4ac7);
    let mut model = BTreeSet::new();
    let mut inserted: Vec<(u64, u64)> = Vec::new();
    for i in 0..48 * 64u64 {
        if i % 9 == 8 {
            let victim = inserted[(rng.next() % inserted.len() as u64) as usize];
            index.delete(victim.0, victim.1).unwrap();
            model.remove(&victim);
        } else {
            let pair = if i % 31 == 30 { inserted[(rng.next() % inserted.len() as u64) as usize] } else { (rng.next(), i) };
            index.insert(pair.0, pair.1).unwrap();
            inserted.push(pair);
            model.insert(pair);
        }
    }
    index.flush().unwrap();
    assert_eq!(index.stats().segments.len(), 48);
    drop(index);
    (storage, model)
}

/// Segment count and content after an uninterrupted full compaction, and the storage
/// operations it took.
fn uninterrupted(max_merge_entries: u64) -> (usize, u64) {
    let (storage, model) = build(max_merge_entries);
    let index = Index::open(DIR, options(&storage, max_merge_entries)).unwrap();
    let before = storage.ops();
    index.compact().unwrap();
    let ops = storage.ops() - before;
    let segments = index.stats().segments.len();
    assert_eq!(index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>().into_iter().collect::<BTreeSet<_>>(), model);
    (segments, ops)
}

#[test]
fn a_full_compaction_killed_at_random_points_keeps_its_finished_merges() {
    const BOUND: u64 = 400;
    let (final_segments, total_ops) = uninterrupted(BOUND);
    // 48 segments of about 60 entries, bounded merges of at most 400 entries: several merges
    assert!(final_segments > 1 && final_segments < 48, "{final_segments}");
    let (mut storage, model) = build(BOUND);
    let mut rng = Rng(0x6b11);
    let mut counts = vec![48];
    let mut attempts = 0;
    loop {
        attempts += 1;
        assert!(attempts <= 200, "no end after 200 kills: segment counts {counts:?}");
        let index = Index::open(DIR, options(&storage, BOUND)).unwrap_or_else(|e| panic!("attempt {attempts}: reopen after a kill failed: {e}"));
        // Killed at a random operation within the first quarter of what an uninterrupted
        // compaction does: no attempt could do the whole of it.
        storage.crash_after(rng.next() % (total_ops / 4));
        let finished = index.compact().is_ok();
        drop(index);
        storage = storage.restart();
        let index = Index::open(DIR, options(&storage, BOUND)).unwrap_or_else(|e| panic!("attempt {attempts}: open after the kill failed: {e}"));
        let live: BTreeSet<(u64, u64)> = index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>().into_iter().collect();
        assert!(live == model, "attempt {attempts}: the index differs from the acknowledged writes");
        let segments = index.stats().segments.len();
        assert!(segments <= *counts.last().unwrap(), "attempt {attempts}: the segment count grew: {counts:?} then {segments}");
        counts.push(segments);
        drop(index);
        if finished {
            assert_eq!(segments, final_segments, "a finished compaction ends where an uninterrupted one does");
            break;
        }
    }
    // Kills that landed after a merge was installed kept it.
    let progress = counts.windows(2).filter(|w| w[1] < w[0]).count();
    assert!(progress >= 2, "segment counts {counts:?}");
    eprintln!("bounded full compaction ({BOUND} entries per merge, {total_ops} operations uninterrupted): {attempts} attempts, segment counts {counts:?}");
}

/// One unbounded merge that records checkpoints (the default; here at every boundary),
/// killed within the first quarter of its operations again and again, goes on from its
/// last checkpoint each time and ends in one segment, losing nothing.
#[test]
fn an_unbounded_full_compaction_killed_again_and_again_resumes_and_finishes() {
    let every = Some(Duration::ZERO);
    let (storage, model) = build(u64::MAX);
    let index = Index::open(DIR, checkpointing(&storage, u64::MAX, every)).unwrap();
    let before = storage.ops();
    index.compact().unwrap();
    let total_ops = storage.ops() - before;
    assert_eq!(index.stats().segments.len(), 1);
    drop(index);
    let (mut storage, _) = build(u64::MAX);
    let mut rng = Rng(0x6b12);
    let mut attempts = 0;
    let mut resumed = 0;
    loop {
        attempts += 1;
        assert!(attempts <= 300, "no end after 300 kills");
        let index = Index::open(DIR, checkpointing(&storage, u64::MAX, every)).unwrap();
        storage.crash_after(rng.next() % (total_ops / 4));
        let finished = index.compact().is_ok();
        resumed += index.stats().compaction_resumed;
        drop(index);
        storage = storage.restart();
        let index = Index::open(DIR, checkpointing(&storage, u64::MAX, every)).unwrap_or_else(|e| panic!("attempt {attempts}: open after the kill failed: {e}"));
        assert!(
            index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>().into_iter().eq(model.iter().copied()),
            "attempt {attempts}: the index differs from the acknowledged writes"
        );
        let segments = index.stats().segments.len();
        assert!(segments == 48 || segments == 1, "attempt {attempts}: {segments} segments");
        drop(index);
        if finished {
            assert_eq!(segments, 1);
            break;
        }
    }
    assert!(attempts > 4, "the compaction was not cut short: {attempts} attempts");
    assert!(resumed > 0, "no attempt went on from a checkpoint");
    eprintln!("unbounded full compaction ({total_ops} operations uninterrupted) killed in its first quarter: {attempts} attempts, {resumed} resumed");
}

/// The contrast: one unbounded merge that records no checkpoint, killed in its first quarter,
/// never lands, however often it is tried (and leaves the index as it was).
#[test]
fn an_unbounded_full_compaction_without_checkpoints_killed_early_makes_no_progress() {
    let (_, total_ops) = uninterrupted(u64::MAX);
    let (mut storage, model) = build(u64::MAX);
    let mut rng = Rng(0x6b11);
    for attempt in 0..10 {
        let index = Index::open(DIR, options(&storage, u64::MAX)).unwrap();
        storage.crash_after(rng.next() % (total_ops / 4));
        assert!(index.compact().is_err(), "attempt {attempt}: the kill came first");
        drop(index);
        storage = storage.restart();
        let index = Index::open(DIR, options(&storage, u64::MAX)).unwrap();
        assert_eq!(index.stats().segments.len(), 48, "attempt {attempt}");
        assert!(index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>().into_iter().eq(model.iter().copied()), "attempt {attempt}");
    }
}

/// Not a test: builds an index for `tools/scripts/compact-kill-loop.sh` at
/// `SIMDEX_BUILD_DIR`, `SIMDEX_BUILD_SEGMENTS` segments of `SIMDEX_BUILD_PER_SEGMENT` random
/// fingerprints (ids 1, 2, ...), without compaction. Does nothing without the variables.
#[test]
#[ignore = "a helper of tools/scripts/compact-kill-loop.sh, not a test of its own"]
fn build_segments_for_the_kill_loop() {
    let var = |name: &str| std::env::var(name).ok();
    let (Some(dir), Some(segments), Some(per)) = (var("SIMDEX_BUILD_DIR"), var("SIMDEX_BUILD_SEGMENTS"), var("SIMDEX_BUILD_PER_SEGMENT")) else { return };
    let (segments, per): (u64, u64) = (segments.parse().unwrap(), per.parse().unwrap());
    let options = IndexOptions::default()
        .with_memtable_ops(per + 1)
        .with_background(false)
        .with_durability(simdex::Durability::NoSync)
        .with_compaction(CompactionOptions::default().with_automatic(false));
    let index = Index::open(&dir, options).unwrap();
    let mut rng = Rng(0x5ca1e);
    let mut id = 0u64;
    for _ in 0..segments {
        let mut left = per;
        while left > 0 {
            let n = left.min(100_000);
            let batch: Vec<(u64, u64)> = (0..n)
                .map(|_| {
                    id += 1;
                    (rng.next(), id)
                })
                .collect();
            index.insert_many(&batch.iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
            left -= n;
        }
        index.flush().unwrap();
    }
    index.close().unwrap();
}
