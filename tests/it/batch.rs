//! Batch queries, all-pairs, clusters and split agree with brute force over every design
//! shape, in memory, and over index snapshots with the same jobs over their live pairs.

use proptest::prelude::*;
use simdex::plan::{Design, MAX_K};
use simdex::SortedTables;
use simdex::{batch_query, batch_query_each, BatchMatch, BatchOptions};
use simdex::{clusters, clusters_and_pairs, near_pairs, ClusterOptions};
use simdex::{BuildOptions, Segment};
use std::collections::BTreeSet;

use crate::common::{build, Rng};

fn data(n: usize, seed: u64, clustered: bool) -> Vec<u64> {
    let mut rng = Rng(seed | 1);
    let centers: Vec<u64> = (0..5).map(|_| rng.next()).collect();
    (0..n)
        .map(|i| {
            if !clustered {
                return rng.next();
            }
            match i % 7 {
                0 => 0,
                1..=3 => {
                    let flips = (rng.next() % 5) as u32;
                    rng.flip(centers[i % 5], flips)
                }
                _ => rng.next(),
            }
        })
        .collect()
}

fn brute_batch(fps: &[u64], ids: &[u64], queries: &[u64], k: u32) -> Vec<BatchMatch> {
    let mut out = BTreeSet::new();
    for &q in queries {
        for (&f, &id) in fps.iter().zip(ids) {
            let d = (q ^ f).count_ones();
            if d <= k {
                out.insert(BatchMatch { query: q, distance: d, fingerprint: f, doc_id: Some(id) });
            }
        }
    }
    out.into_iter().collect()
}

fn brute_pairs(fps: &[u64], k: u32) -> Vec<(u64, u64)> {
    let mut distinct = fps.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    let mut out = Vec::new();
    for (i, &a) in distinct.iter().enumerate() {
        for &b in &distinct[i + 1..] {
            if (a ^ b).count_ones() <= k {
                out.push((a, b));
            }
        }
    }
    out
}

fn designs() -> Vec<(u32, Vec<u32>)> {
    vec![(3, vec![]), (3, vec![4]), (3, vec![5]), (3, vec![4, 4]), (2, vec![3]), (1, vec![2]), (0, vec![1])]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    #[test]
    fn batch_and_pairs_equal_brute_force(
        n in prop_oneof![Just(0usize), 1..40usize, 300..2500usize],
        seed in any::<u64>(),
        clustered in any::<bool>(),
        pick in any::<usize>(),
        threads in 1usize..4,
    ) {
        let (k, levels) = designs()[pick % designs().len()].clone();
        let fps = data(n, seed, clustered);
        let ids: Vec<u64> = (0..n as u64).map(|i| i * 3 + 1).collect();
        let dir = tempfile::tempdir().unwrap();
        let options = BuildOptions::default().with_design(Some(Design::new(k, &levels).unwrap())).with_k(k);
        let (_, seg) = build(dir.path(), "s.sdx", &fps, Some(&ids), &options);
        let mut rng = Rng(seed ^ 99);
        let mut queries: Vec<u64> = (0..60).map(|_| rng.next()).collect();
        for i in 0..60 {
            if let Some(&f) = fps.get(rng.next() as usize % fps.len().max(1)) {
                queries.push(rng.flip(f, i % (k + 2)));
            }
        }
        queries.push(queries.first().copied().unwrap_or(0));
        for kk in 0..=k {
            let got = batch_query(&seg, &queries, &BatchOptions::new(kk).with_threads(threads)).unwrap();
            prop_assert_eq!(got, brute_batch(&fps, &ids, &queries, kk));
            prop_assert_eq!(near_pairs(&seg, &ClusterOptions::new(kk).with_threads(threads)).unwrap(), brute_pairs(&fps, kk));
        }
        // Above the design's k: multi-probe joins.
        for kk in [k + 1, k + 3, MAX_K] {
            let got = batch_query(&seg, &queries, &BatchOptions::new(kk).with_threads(threads)).unwrap();
            prop_assert_eq!(got, brute_batch(&fps, &ids, &queries, kk), "k = {}", kk);
            prop_assert_eq!(near_pairs(&seg, &ClusterOptions::new(kk).with_threads(threads)).unwrap(), brute_pairs(&fps, kk), "k = {}", kk);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, .. ProptestConfig::default() })]

    /// The batch join seeks each wanted prefix group inside a block and skips the others
    /// (issue 48): batches from one query to one per few stored entries (so from one wanted
    /// group per block to every group), near and exact copies of stored fingerprints, a
    /// fingerprint stored over many blocks (0, every 7th entry), both codecs, against brute force.
    #[test]
    fn batches_of_every_density_equal_brute_force(
        n in 3000..12_000usize,
        seed in any::<u64>(),
        pick in any::<usize>(),
        queries_n in prop_oneof![1..8usize, 8..200usize, 200..1500usize],
        delta in any::<bool>(),
        threads in 1usize..4,
    ) {
        let (k, levels) = designs()[pick % 5].clone();
        let fps = data(n, seed, true);
        let ids: Vec<u64> = (0..n as u64).map(|i| i ^ seed).collect();
        let dir = tempfile::tempdir().unwrap();
        let codec = if delta { simdex::Codec::Delta } else { simdex::Codec::Xor };
        let options = BuildOptions::default().with_design(Some(Design::new(k, &levels).unwrap())).with_k(k).with_codec(codec);
        let (_, seg) = build(dir.path(), "s.sdx", &fps, Some(&ids), &options);
        let mut rng = Rng(seed ^ 31);
        let queries: Vec<u64> = (0..queries_n)
            .map(|i| match i % 5 {
                0 => rng.next(),
                1 => rng.flip(0, i as u32 % (k + 1)),
                _ => {
                    let f = fps[rng.next() as usize % n];
                    rng.flip(f, i as u32 % (k + 2))
                }
            })
            .collect();
        let got = batch_query(&seg, &queries, &BatchOptions::new(k).with_threads(threads)).unwrap();
        prop_assert_eq!(got, brute_batch(&fps, &ids, &queries, k), "design {}, {} queries", pick % 5, queries_n);
    }
}

#[test]
fn clusters_are_the_connected_components_plus_exact_duplicates() {
    let mut rng = Rng(5);
    let a = rng.next();
    let b = rng.next();
    // a chain a - a1 - a2 (a2 is 4 bits from a, but linked through a1), b twice, and noise.
    let a1 = a ^ 0b11;
    let a2 = a1 ^ 0b1100;
    let mut fps = vec![a, a1, a2, b, b];
    let noise: Vec<u64> = (0..500).map(|_| rng.next()).collect();
    fps.extend(&noise);
    let ids: Vec<u64> = (0..fps.len() as u64).collect();
    let dir = tempfile::tempdir().unwrap();
    let (_, seg) = build(dir.path(), "s.sdx", &fps, Some(&ids), &BuildOptions::default());
    let got = clusters(&seg, &ClusterOptions::new(3).with_threads(2)).unwrap();
    let noise_pairs = brute_pairs(&noise, 3);
    assert!(noise_pairs.is_empty(), "random noise is far apart");
    assert_eq!(got.len(), 2);
    let mut chain = vec![(a, Some(0)), (a1, Some(1)), (a2, Some(2))];
    chain.sort_unstable();
    assert_eq!(got[0].members, chain);
    assert_eq!(got[1].members, vec![(b, Some(3)), (b, Some(4))]);
}

#[test]
fn batch_refuses_k_above_8() {
    let dir = tempfile::tempdir().unwrap();
    let (_, seg) = build(dir.path(), "s.sdx", &[1, 2, 3], None, &BuildOptions::default().with_k(2));
    assert_eq!(batch_query(&seg, &[1], &BatchOptions::new(3).with_threads(1)).unwrap().len(), 3);
    assert!(batch_query(&seg, &[1], &(BatchOptions::new(MAX_K + 1)).with_threads(1)).is_err());
}

/// An index of three flushed segments (a pair stored twice, deletes in a tombstone file),
/// plus unflushed inserts and deletes: every whole-set job over its snapshot answers what it
/// answers over one segment of the live pairs.
#[test]
fn snapshot_jobs_equal_jobs_over_the_live_pairs() {
    use simdex::storage::MemStorage;
    use simdex::{split, SplitOptions};
    use simdex::{CompactionOptions, IndexOptions};
    use simdex::{Durability, Index};
    use std::sync::Arc;

    let storage = MemStorage::default();
    let options = IndexOptions::default()
        .with_storage(Arc::new(storage.clone()))
        .with_background(false)
        .with_durability(Durability::NoSync)
        .with_compaction(CompactionOptions::default().with_automatic(false));
    let index = Index::open("idx", options).unwrap();
    let fps = data(3000, 17, true);
    let pairs: Vec<(u64, u64)> = fps.iter().enumerate().map(|(i, &fp)| (fp, i as u64)).collect();
    let single = |index: &Index| index.snapshot().segments().len();
    index.insert_many(&pairs[..1000].iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
    index.flush().unwrap();
    index.insert_many(&pairs[900..2000].iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
    index.flush().unwrap();
    index.delete_many(&pairs[0..300].iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
    index.flush().unwrap();
    index.insert_many(&pairs[2000..].iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
    index.delete_many(&pairs[2990..].iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
    index.delete_many(&pairs[1500..1600].iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
    assert_eq!(single(&index), 2);

    let snapshot = index.snapshot();
    let live = index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>();
    assert_eq!(snapshot.live_len().unwrap(), live.len() as u64);
    let mut streamed = Vec::new();
    snapshot
        .for_each_live(|fp, id| {
            streamed.push((fp, id));
            Ok(())
        })
        .unwrap();
    assert_eq!(streamed, live);
    let (live_fps, live_ids): (Vec<u64>, Vec<u64>) = live.iter().copied().unzip();
    let dir = tempfile::tempdir().unwrap();
    let (_, seg) = build(dir.path(), "live.sdx", &live_fps, Some(&live_ids), &BuildOptions::default());

    let mut rng = Rng(23);
    let queries: Vec<u64> = fps
        .iter()
        .step_by(7)
        .map(|&f| {
            let flips = (rng.next() % 4) as u32;
            rng.flip(f, flips)
        })
        .collect();
    for k in [0, 1, 2, 3, 5, 8] {
        let options = BatchOptions::new(k).with_threads(2);
        assert_eq!(batch_query(&snapshot, &queries, &options).unwrap(), batch_query(&seg, &queries, &options).unwrap(), "k = {k}");
        assert_eq!(near_pairs(&snapshot, &ClusterOptions::new(k).with_threads(2)).unwrap(), near_pairs(&seg, &ClusterOptions::new(k).with_threads(2)).unwrap(), "k = {k}");
        assert_eq!(clusters(&snapshot, &ClusterOptions::new(k).with_threads(2)).unwrap(), clusters(&seg, &ClusterOptions::new(k).with_threads(2)).unwrap(), "k = {k}");
    }
    assert!(matches!(near_pairs(&snapshot, &ClusterOptions::new(9).with_threads(2)), Err(simdex::Error::KTooLarge { requested: 9, design_k: 3 })));
    for &q in queries.iter().take(40) {
        for k in [4, 6, 8] {
            let options = simdex::QueryOptions::within(k);
            assert_eq!(snapshot.query(q, &options).unwrap(), seg.query(q, &options).unwrap(), "k = {k}");
            assert_eq!(index.query(q, &options).unwrap(), seg.query(q, &options.with_always_probe()).unwrap(), "k = {k}");
        }
    }

    let options = SplitOptions::new(3).with_k(None).with_codec(simdex::codec::Codec::Xor);
    let written = split(&snapshot, &storage, "chunks".as_ref(), &options, &mut |_, _| {}).unwrap();
    assert_eq!(written.chunks.len(), 3);
    let mut chunked = Vec::new();
    for c in &written.chunks {
        let chunk = Segment::open_with(&storage, &c.path).unwrap();
        assert_eq!(chunk.len(), c.count);
        chunked.extend(chunk.entries().map(|e| e.map(|(fp, id)| (fp, id.unwrap()))).collect::<simdex::Result<Vec<_>>>().unwrap());
    }
    assert_eq!(chunked, live);
}

/// Fingerprints in memory (a corpus being deduplicated): the self-join equals brute force,
/// above the planner's largest k too.
#[test]
fn near_pairs_of_sorted_tables_equal_brute_force() {
    let mut rng = Rng(0x1234_5678);
    let mut fps = Vec::new();
    for i in 0..400u32 {
        let s = rng.next();
        // clustered values: a few bases with a few bits flipped
        let base = [0u64, u64::MAX, 0xF0F0_F0F0_F0F0_F0F0][i as usize % 3];
        let flips = (s & 0xFF) as u32 % 7;
        let mut x = base;
        for f in 0..flips {
            x ^= 1 << ((s >> (8 + 6 * f)) & 63);
        }
        fps.push(x);
    }
    for k in [0, 1, 3, 5, 9, 16] {
        let tables = SortedTables::new(fps.iter().enumerate().map(|(i, &fp)| (fp, i as u64)).collect(), k).unwrap();
        assert_eq!(near_pairs(&tables, &ClusterOptions::new(k).with_threads(2)).unwrap(), brute_pairs(&fps, k), "k = {k}");
        let ids: Vec<u64> = (0..fps.len() as u64).collect();
        let queries: Vec<u64> = fps.iter().step_by(5).map(|&f| f ^ 0b101).collect();
        assert_eq!(batch_query(&tables, &queries, &BatchOptions::new(k).with_threads(2)).unwrap(), brute_batch(&fps, &ids, &queries, k), "k = {k}");
    }
    assert!(SortedTables::new(vec![(1, 1)], 64).is_err());
}

/// Fingerprints in near-duplicate groups of about 20 (up to 3 bits from their center, so
/// pairs are many), a few stored twice.
fn grouped(n: usize, seed: u64) -> Vec<u64> {
    let mut rng = Rng(seed | 1);
    let centers: Vec<u64> = (0..n / 20 + 1).map(|_| rng.next()).collect();
    let mut fps: Vec<u64> = (0..n)
        .map(|i| {
            let flips = (rng.next() % 4) as u32;
            rng.flip(centers[i % centers.len()], flips)
        })
        .collect();
    for i in (0..n).step_by(17) {
        fps[i] = fps[i / 2];
    }
    fps
}

/// The clusters by brute force: connected components of the pairs within `k` (label
/// propagation), every stored entry of a component, plus fingerprints stored more than
/// once; largest first, ties by members.
fn brute_clusters(fps: &[u64], ids: Option<&[u64]>, k: u32) -> Vec<simdex::Cluster> {
    use std::collections::BTreeMap;
    let pairs = brute_pairs(fps, k);
    let mut label: BTreeMap<u64, u64> = fps.iter().map(|&f| (f, f)).collect();
    loop {
        let mut changed = false;
        for &(a, b) in &pairs {
            let m = label[&a].min(label[&b]);
            for x in [a, b] {
                if label[&x] != m {
                    label.insert(x, m);
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    let mut groups: BTreeMap<u64, Vec<(u64, Option<u64>)>> = BTreeMap::new();
    for (i, &f) in fps.iter().enumerate() {
        groups.entry(label[&f]).or_default().push((f, ids.map(|ids| ids[i])));
    }
    let mut out: Vec<simdex::Cluster> = groups
        .into_values()
        .filter(|m| m.len() > 1)
        .map(|mut members| {
            members.sort_unstable();
            simdex::Cluster { members }
        })
        .collect();
    out.sort_by(|a, b| b.members.len().cmp(&a.members.len()).then(a.members.cmp(&b.members)));
    out
}

/// Names in a directory (spill directories left behind show up here).
fn listing(dir: &std::path::Path) -> Vec<std::ffi::OsString> {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, .. ProptestConfig::default() })]

    /// A budget of a few matches or pairs forces many spilled runs (and merges of merges):
    /// the answers equal brute force, in the same order, and the spill directory is gone.
    #[test]
    fn spilled_batch_pairs_and_clusters_equal_brute_force(
        n in 200..1500usize,
        seed in any::<u64>(),
        memory in 100..2000usize,
        threads in 1usize..3,
        with_ids in any::<bool>(),
        k in 0u32..6,
    ) {
        let fps = grouped(n, seed);
        let ids: Vec<u64> = (0..n as u64).map(|i| i * 7 + 2).collect();
        let dir = tempfile::tempdir().unwrap();
        let (_, seg) = build(dir.path(), "s.sdx", &fps, with_ids.then_some(&ids[..]), &BuildOptions::default());
        let spill = tempfile::tempdir().unwrap();
        let mut rng = Rng(seed ^ 5);
        let queries: Vec<u64> = (0..300)
            .map(|i| {
                let f = fps[rng.next() as usize % n];
                rng.flip(f, i % 4)
            })
            .collect();

        let options = BatchOptions::new(k).with_threads(threads).with_match_memory(Some(memory)).with_spill_dir(Some(spill.path().to_path_buf()));
        let mut got = Vec::new();
        let mut spilled = false;
        batch_query_each(&seg, &queries, &options, |m| {
            spilled |= !listing(spill.path()).is_empty();
            got.push(m);
            Ok(())
        }).unwrap();
        let mut want = brute_batch(&fps, &ids, &queries, k);
        if !with_ids {
            want = want.into_iter().map(|m| BatchMatch { doc_id: None, ..m }).collect();
            want.dedup();
        }
        let distinct_pairs = want.iter().map(|m| (m.query, m.fingerprint)).collect::<BTreeSet<_>>().len();
        prop_assert_eq!(&got, &want);
        prop_assert!(spilled || distinct_pairs <= memory / 16 + 1, "{} pairs within {} bytes", distinct_pairs, memory);
        prop_assert!(listing(spill.path()).is_empty());

        let options = ClusterOptions::new(k).with_threads(threads).with_pair_memory(memory).with_spill_dir(Some(spill.path().to_path_buf()));
        prop_assert_eq!(near_pairs(&seg, &options).unwrap(), brute_pairs(&fps, k));
        prop_assert_eq!(clusters(&seg, &options).unwrap(), brute_clusters(&fps, with_ids.then_some(&ids[..]), k));
        prop_assert!(listing(spill.path()).is_empty());
    }
}

/// An index snapshot (segments, tombstones, unflushed pairs) with budgets of a few records:
/// the same batch, pairs and clusters as the in-memory jobs over one segment of its live pairs.
#[test]
fn spilled_snapshot_jobs_equal_jobs_over_the_live_pairs() {
    use simdex::storage::MemStorage;
    use simdex::{CompactionOptions, Durability, Index, IndexOptions};
    use std::sync::Arc;

    let options = IndexOptions::default()
        .with_storage(Arc::new(MemStorage::default()))
        .with_background(false)
        .with_durability(Durability::NoSync)
        .with_compaction(CompactionOptions::default().with_automatic(false));
    let index = Index::open("idx", options).unwrap();
    let fps = grouped(3000, 41);
    let pairs: Vec<(u64, u64)> = fps.iter().enumerate().map(|(i, &fp)| (fp, i as u64)).collect();
    index.insert_many(&pairs[..1200].iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
    index.flush().unwrap();
    index.insert_many(&pairs[1000..2200].iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
    index.delete_many(&pairs[0..200].iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
    index.flush().unwrap();
    index.insert_many(&pairs[2200..].iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
    index.delete_many(&pairs[2900..].iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
    let snapshot = index.snapshot();
    let (live_fps, live_ids): (Vec<u64>, Vec<u64>) = index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>().into_iter().unzip();
    let dir = tempfile::tempdir().unwrap();
    let (_, seg) = build(dir.path(), "live.sdx", &live_fps, Some(&live_ids), &BuildOptions::default());
    let spill = tempfile::tempdir().unwrap();
    let queries: Vec<u64> = fps.iter().step_by(3).map(|&f| f ^ 0b1001).collect();
    for k in [0, 2, 3, 5] {
        for memory in [300, 5000] {
            let spilling = BatchOptions::new(k).with_threads(2).with_match_memory(Some(memory)).with_spill_dir(Some(spill.path().to_path_buf()));
            let want = batch_query(&seg, &queries, &BatchOptions::new(k).with_threads(2)).unwrap();
            assert!(k < 2 || want.len() > 500, "{}", want.len());
            assert_eq!(batch_query(&snapshot, &queries, &spilling).unwrap(), want, "k = {k}, {memory} bytes");
            let spilling = ClusterOptions::new(k).with_threads(2).with_pair_memory(memory).with_spill_dir(Some(spill.path().to_path_buf()));
            let got = near_pairs(&snapshot, &spilling).unwrap();
            assert_eq!(got, near_pairs(&seg, &ClusterOptions::new(k).with_threads(2)).unwrap(), "k = {k}, {memory} bytes");
            assert_eq!(clusters(&snapshot, &spilling).unwrap(), clusters(&seg, &ClusterOptions::new(k).with_threads(2)).unwrap(), "k = {k}, {memory} bytes");
            assert!(listing(spill.path()).is_empty());
        }
    }
}

/// A spill directory that cannot be made is an I/O error naming it; a caller's error in the
/// middle of the output leaves no spill files behind.
#[test]
fn spill_errors_name_the_directory_and_leave_nothing_behind() {
    let fps = grouped(2000, 3);
    let ids: Vec<u64> = (0..fps.len() as u64).collect();
    let dir = tempfile::tempdir().unwrap();
    let (_, seg) = build(dir.path(), "s.sdx", &fps, Some(&ids), &BuildOptions::default());
    let queries: Vec<u64> = fps.iter().map(|&f| f ^ 1).collect();

    // A regular file where the spill directory's parent should be.
    let not_a_dir = dir.path().join("s.sdx");
    let batch = BatchOptions::new(3).with_threads(2).with_match_memory(Some(256)).with_spill_dir(Some(not_a_dir.clone()));
    let err = batch_query(&seg, &queries, &batch).unwrap_err();
    assert!(matches!(&err, simdex::Error::Io { path, .. } if path.starts_with(&not_a_dir)), "{err:?}");
    assert!(err.to_string().contains(&*not_a_dir.to_string_lossy()), "{err}");
    let cluster = ClusterOptions::new(3).with_threads(2).with_pair_memory(256).with_spill_dir(Some(not_a_dir.clone()));
    let err = clusters(&seg, &cluster).unwrap_err();
    assert!(err.to_string().contains(&*not_a_dir.to_string_lossy()), "{err}");
    // With room enough nothing is written, so the bad directory is never touched.
    let roomy = batch.clone().with_match_memory(Some(1 << 24));
    assert_eq!(batch_query(&seg, &queries, &roomy).unwrap(), batch_query(&seg, &queries, &BatchOptions::new(3)).unwrap());

    let spill = tempfile::tempdir().unwrap();
    let batch = batch.with_spill_dir(Some(spill.path().to_path_buf()));
    let mut seen = 0;
    let err = batch_query_each(&seg, &queries, &batch, |_| {
        seen += 1;
        assert!(!listing(spill.path()).is_empty(), "the matches spilled");
        if seen == 10 {
            return Err(simdex::Error::InvalidArgument("stop".into()));
        }
        Ok(())
    })
    .unwrap_err();
    assert!(matches!(err, simdex::Error::InvalidArgument(_)));
    assert!(listing(spill.path()).is_empty());
    let cluster = cluster.with_spill_dir(Some(spill.path().to_path_buf()));
    let err = clusters_and_pairs(&seg, &cluster, |_| Err(simdex::Error::InvalidArgument("stop".into()))).unwrap_err();
    assert!(matches!(err, simdex::Error::InvalidArgument(_)));
    assert!(listing(spill.path()).is_empty());
}

/// A few queries against a segment of many blocks: the join reads only the blocks the
/// queries' prefix groups lie in (groups spanning several blocks, and blocks holding parts
/// of two wanted groups, included), and answers what brute force answers.
#[test]
fn a_small_batch_against_a_large_segment_equals_brute_force() {
    let n = 40_000;
    for (pick, seed) in [(0usize, 3u64), (1, 4), (3, 5), (4, 6), (6, 7)] {
        let (k, levels) = designs()[pick].clone();
        let fps = data(n, seed, true);
        let ids: Vec<u64> = (0..n as u64).collect();
        let dir = tempfile::tempdir().unwrap();
        let options = BuildOptions::default().with_design(Some(Design::new(k, &levels).unwrap())).with_k(k);
        let (_, seg) = build(dir.path(), "s.sdx", &fps, Some(&ids), &options);
        let mut rng = Rng(seed ^ 7);
        for queries_n in [1usize, 3, 17, 200] {
            let mut queries: Vec<u64> = (0..queries_n / 2).map(|_| rng.next()).collect();
            // near copies of stored fingerprints, and some stored ones exactly
            for i in 0..queries_n - queries_n / 2 {
                let f = fps[rng.next() as usize % n];
                queries.push(rng.flip(f, i as u32 % (k + 1)));
            }
            for threads in [1, 3] {
                let got = batch_query(&seg, &queries, &BatchOptions::new(k).with_threads(threads)).unwrap();
                assert_eq!(got, brute_batch(&fps, &ids, &queries, k), "design {pick}, {queries_n} queries, {threads} threads");
            }
        }
    }
}
