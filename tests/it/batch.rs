//! Batch queries, all-pairs and clusters agree with brute force over every design shape.

use proptest::prelude::*;
use simdex::batch::{batch_query, clusters, near_pairs, BatchMatch, BatchOptions};
use simdex::plan::Design;
use simdex::BuildOptions;
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
        let options = BuildOptions { design: Some(Design::new(k, &levels).unwrap()), k, ..BuildOptions::default() };
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
            let got = batch_query(&seg, &queries, &BatchOptions { k: kk, threads }).unwrap();
            prop_assert_eq!(got, brute_batch(&fps, &ids, &queries, kk));
            prop_assert_eq!(near_pairs(&seg, kk, threads).unwrap(), brute_pairs(&fps, kk));
        }
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
    let got = clusters(&seg, 3, 2).unwrap();
    let noise_pairs = brute_pairs(&noise, 3);
    assert!(noise_pairs.is_empty(), "random noise is far apart");
    assert_eq!(got.len(), 2);
    let mut chain = vec![(a, Some(0)), (a1, Some(1)), (a2, Some(2))];
    chain.sort_unstable();
    assert_eq!(got[0].members, chain);
    assert_eq!(got[1].members, vec![(b, Some(3)), (b, Some(4))]);
}

#[test]
fn batch_refuses_k_above_the_design() {
    let dir = tempfile::tempdir().unwrap();
    let (_, seg) = build(dir.path(), "s.sdx", &[1, 2, 3], None, &BuildOptions { k: 2, ..BuildOptions::default() });
    assert!(batch_query(&seg, &[1], &BatchOptions { k: 3, threads: 1 }).is_err());
}
