//! The live index's shape under the default compaction policy (issues 13 and 14): every
//! live segment costs a query a probe of each of its tables, so the policy keeps few of them
//! (the small tiers absorb the newest segment), and queries over the live set (segments,
//! memtable, tombstones) equal brute force whatever the shape.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use simdex::storage::MemStorage;
use simdex::{CompactionOptions, Durability, Index, IndexOptions, QueryOptions};

use crate::common::Rng;
use crate::engine::model_query;

/// In-memory, inline maintenance (deterministic), the default compaction policy.
fn options(storage: &MemStorage, memtable_ops: u64) -> IndexOptions {
    IndexOptions::default()
        .with_storage(Arc::new(storage.clone()))
        .with_background(false)
        .with_memtable_ops(memtable_ops)
        .with_durability(Durability::NoSync)
        // the tiered policy's own shape (no settling merges): what these tests pin
        .with_compaction(CompactionOptions::default().with_buffer_entries(4096).with_settle(None))
}

fn segment_sizes(index: &Index) -> Vec<u64> {
    index.stats().segments.iter().map(|s| s.entries).collect()
}

#[test]
fn below_fanout_squared_flushes_the_live_set_is_at_most_three_segments_each_a_fanout_apart() {
    let storage = MemStorage::default();
    let flush = 200u64;
    let fanout = CompactionOptions::default().fanout as u64;
    let index = Index::open(Path::new("idx"), options(&storage, flush)).unwrap();
    let mut rng = Rng(13);
    let mut most = 0;
    for i in 0..fanout * fanout {
        let batch: Vec<(u64, u64)> = (0..flush).map(|j| (rng.next(), i * flush + j)).collect();
        index.insert_many(&batch.iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
        let sizes = segment_sizes(&index);
        assert_eq!(sizes.iter().sum::<u64>() + index.stats().memtable_inserts, (i + 1) * flush);
        assert!(sizes.len() <= 3, "after {} flushes: {sizes:?}", i + 1);
        assert!(sizes.windows(2).all(|w| w[0] > fanout * w[1]), "after {} flushes: {sizes:?}", i + 1);
        most = most.max(sizes.len());
    }
    // the tiered policy alone would have kept up to (fanout - 1) segments per tier
    assert!(most <= 3);
    // the last flush lands next to one segment holding everything before it
    let sizes = segment_sizes(&index);
    assert!(sizes.len() <= 2 && sizes[0] >= (fanout * fanout - 4) * flush, "{sizes:?}");
}

#[test]
fn many_flushes_stay_logarithmic_and_queries_equal_brute_force_across_the_live_set() {
    let storage = MemStorage::default();
    let dir = Path::new("idx");
    let flush = 128u64;
    let fanout = CompactionOptions::default().fanout as f64;
    let index = Index::open(dir, options(&storage, flush)).unwrap();
    let mut rng = Rng(14);
    let mut live: BTreeSet<(u64, u64)> = BTreeSet::new();
    let mut centers: Vec<u64> = Vec::new();
    let mut id = 0u64;
    let check = |index: &Index, live: &BTreeSet<(u64, u64)>, centers: &[u64], rng: &mut Rng, when: &str| {
        for &c in centers.iter().rev().take(12) {
            for flips in [0, 1, 3] {
                let q = rng.flip(c, flips);
                assert_eq!(index.query(q, &QueryOptions::within(3)).unwrap(), model_query(live, q, 3), "{when}: query {q:016x}");
            }
        }
        let q = rng.next();
        assert_eq!(index.query(q, &QueryOptions::within(3)).unwrap(), model_query(live, q, 3), "{when}: random query");
    };
    for round in 0..120u64 {
        // a flush's worth of inserts, some near-duplicates of earlier ones (so that answers
        // span segments of different ages), and a few deletes (tombstones across segments)
        let mut batch = Vec::new();
        for _ in 0..flush - 8 {
            let fp = if id % 5 == 0 && !centers.is_empty() {
                let c = centers[(rng.next() % centers.len() as u64) as usize];
                rng.flip(c, (id % 3) as u32)
            } else {
                rng.next()
            };
            if id % 17 == 0 {
                centers.push(fp);
            }
            batch.push((fp, id));
            id += 1;
        }
        index.insert_many(&batch.iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
        live.extend(batch.iter().copied());
        for _ in 0..8 {
            let &pair = live.iter().nth((rng.next() % live.len() as u64) as usize).unwrap();
            index.delete(pair.0, pair.1).unwrap();
            live.remove(&pair);
        }
        let sizes = segment_sizes(&index);
        let total: u64 = sizes.iter().sum();
        let bound = (fanout - 1.0) * (2.0 + (total as f64 / flush as f64).max(1.0).log(fanout)) + 3.0;
        assert!(sizes.len() as f64 <= bound, "round {round}: {} segments for {total} entries (bound {bound:.1}): {sizes:?}", sizes.len());
        if round % 10 == 9 {
            check(&index, &live, &centers, &mut rng, &format!("round {round}, segments {sizes:?}"));
        }
    }
    // and some writes still in the memtable
    let tail: Vec<(u64, u64)> = (0..40).map(|j| (rng.flip(centers[j % centers.len()], 2), id + j as u64)).collect();
    index.insert_many(&tail.iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
    live.extend(tail.iter().copied());
    let stats = index.stats();
    assert!(stats.segments.len() >= 2 && stats.memtable_inserts > 0, "the live set spans segments and the memtable: {stats:?}");
    check(&index, &live, &centers, &mut rng, "before close");
    assert_eq!(index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>(), live.iter().copied().collect::<Vec<_>>());
    index.close().unwrap();
    // as a reader sees it after the writer closed: the same answers, and one full
    // compaction gives them too
    let reader = Index::open_read_only(dir, options(&storage, flush)).unwrap();
    check(&reader, &live, &centers, &mut rng, "read-only after close");
    drop(reader);
    let index = Index::open(dir, options(&storage, flush)).unwrap();
    index.compact().unwrap();
    assert_eq!(index.stats().segments.len(), 1);
    check(&index, &live, &centers, &mut rng, "after a full compaction");
}
