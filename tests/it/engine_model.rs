//! The model test: random sequences of inserts, deletes, flushes, compactions, reopens and
//! queries agree with a brute-force in-memory set on every query.

use std::collections::BTreeSet;

use proptest::prelude::*;
use simdex::storage::MemStorage;
use simdex::{Index, QueryOptions};

use crate::engine::{mem_options, model_query};

#[derive(Clone, Debug)]
enum Step {
    Insert {
        fp: u64,
        id: u64,
    },
    InsertBatch(Vec<(u64, u64)>),
    /// Deletes the live pair at this position (mod the live count), or a pair never stored.
    Delete(usize),
    Flush,
    Compact,
    CompactTiered,
    Reopen,
    Query {
        q: u64,
        k: u32,
    },
}

/// Fingerprints from a few clusters, so that queries find several near-duplicates and
/// pairs repeat.
fn fingerprint() -> impl Strategy<Value = u64> {
    (0..4usize, any::<u64>(), 0..5u32).prop_map(|(c, r, flips)| {
        const CENTERS: [u64; 4] = [0, 0xdead_beef_0123_4567, 0xffff_ffff_0000_0000, 0x5555_5555_5555_5555];
        let mut x = CENTERS[c];
        for i in 0..flips {
            x ^= 1 << ((r >> (6 * i)) & 63);
        }
        x
    })
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        8 => (fingerprint(), 0..20u64).prop_map(|(fp, id)| Step::Insert { fp, id }),
        2 => prop::collection::vec((fingerprint(), 0..20u64), 1..12).prop_map(Step::InsertBatch),
        3 => any::<usize>().prop_map(Step::Delete),
        1 => Just(Step::Flush),
        1 => Just(Step::Compact),
        1 => Just(Step::CompactTiered),
        1 => Just(Step::Reopen),
        // up to k = 8: above the design's k = 3 by multi-probe (or a scan where cheaper)
        4 => (fingerprint(), 0..9u32).prop_map(|(q, k)| Step::Query { q, k }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn the_index_agrees_with_a_brute_force_model(steps in prop::collection::vec(step(), 1..120), memtable in 3..20u64) {
        let storage = MemStorage::default();
        let mut options = mem_options(&storage, memtable);
        options.compaction.fanout = 2;
        let mut index = Index::open("m", options.clone()).unwrap();
        let mut live: BTreeSet<(u64, u64)> = BTreeSet::new();
        for (i, s) in steps.iter().enumerate() {
            match s {
                Step::Insert { fp, id } => {
                    index.insert(*fp, *id).unwrap();
                    live.insert((*fp, *id));
                }
                Step::InsertBatch(pairs) => {
                    index.insert_many(&pairs.iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
                    live.extend(pairs.iter().copied());
                }
                Step::Delete(at) => {
                    let pair = if live.is_empty() { (1, 1) } else { *live.iter().nth(at % live.len()).unwrap() };
                    index.delete(pair.0, pair.1).unwrap();
                    live.remove(&pair);
                }
                Step::Flush => index.flush().unwrap(),
                Step::Compact => index.compact().unwrap(),
                Step::CompactTiered => index.compact_tiered().unwrap(),
                Step::Reopen => {
                    drop(index);
                    index = Index::open("m", options.clone()).unwrap();
                }
                Step::Query { q, k } => {
                    prop_assert_eq!(index.query(*q, &QueryOptions::within(*k)).unwrap(), model_query(&live, *q, *k), "step {}: {:?}", i, s);
                    let probed = index.query(*q, &QueryOptions::within(*k).with_always_probe()).unwrap();
                    prop_assert_eq!(probed, model_query(&live, *q, *k), "step {} (always probe): {:?}", i, s);
                }
            }
        }
        prop_assert_eq!(index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>(), live.iter().copied().collect::<Vec<_>>());
        let reader = Index::open_read_only("m", options.clone()).unwrap();
        prop_assert_eq!(reader.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>(), live.iter().copied().collect::<Vec<_>>());
    }
}
