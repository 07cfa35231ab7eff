//! The block-split self-join (`BlockSplit`, what `simdex.spark cluster` runs in its
//! partitions) against brute force: over all groups and partitions, every pair within k
//! comes out exactly once, and group 0 names every repeated fingerprint, whether one map task
//! or several held its copies.

use simdex::plan::Design;
use simdex::BlockSplit;
use std::collections::BTreeMap;

use crate::common::Rng;

/// Clustered fingerprints with repeats: centres with near copies (up to 5 bits), one
/// fingerprint stored `hot` times, the rest random.
fn planted(n: usize, seed: u64, hot: usize) -> Vec<u64> {
    let mut rng = Rng(seed | 1);
    let centres: Vec<u64> = (0..n / 16 + 1).map(|_| rng.next()).collect();
    let mut out: Vec<u64> = (0..n)
        .map(|i| match i % 3 {
            0 => rng.next(),
            _ => {
                let flips = (rng.next() % 6) as u32;
                rng.flip(centres[i % centres.len()], flips)
            }
        })
        .collect();
    out.extend(std::iter::repeat_n(centres[0], hot));
    out
}

/// Pairs within k, and the fingerprints held more than once.
type Found = (Vec<(u64, u64)>, Vec<u64>);

fn brute(fps: &[u64], k: u32) -> Found {
    let mut counts: BTreeMap<u64, u64> = BTreeMap::new();
    fps.iter().for_each(|&f| *counts.entry(f).or_default() += 1);
    let distinct: Vec<u64> = counts.keys().copied().collect();
    let mut pairs = Vec::new();
    for (i, &a) in distinct.iter().enumerate() {
        pairs.extend(distinct[i + 1..].iter().filter(|&&b| (a ^ b).count_ones() <= k).map(|&b| (a, b)));
    }
    (pairs, counts.into_iter().filter(|&(_, c)| c > 1).map(|(f, _)| f).collect())
}

/// The fingerprints cut into `tasks` map tasks, each scattered into `parts` partitions per
/// group, every partition joined: the pairs of all (not deduplicated) and the repeats.
fn run(split: &BlockSplit, fps: &[u64], parts: usize, tasks: usize) -> Found {
    let groups = split.groups();
    let counts = vec![parts; groups];
    let mut inbox: Vec<(Vec<u64>, Vec<u64>)> = vec![(Vec::new(), Vec::new()); parts * groups];
    for task in fps.chunks(fps.len().div_ceil(tasks)) {
        let s = split.scatter(task.to_vec(), &counts).unwrap();
        for (i, (f, r)) in s.fps.into_iter().zip(s.repeated).enumerate() {
            let g = i / parts;
            assert!(f.iter().all(|&x| split.partition(g, x, parts) == i % parts));
            let (shift, mask) = split.key_bits(g);
            assert!(f.iter().all(|&x| split.key(g, x) == (x >> shift) & mask));
            assert!(g == 0 || r.is_empty());
            inbox[i].0.extend(f);
            inbox[i].1.extend(r);
        }
    }
    let (mut pairs, mut repeated) = (Vec::new(), Vec::new());
    for (i, (f, r)) in inbox.into_iter().enumerate() {
        let found = split.join_partition(i / parts, f, &r).unwrap();
        pairs.extend(found.pairs);
        repeated.extend(found.repeated);
    }
    pairs.sort_unstable();
    repeated.sort_unstable();
    (pairs, repeated)
}

#[test]
fn block_split_finds_every_pair_once() {
    for (n, seed) in [(3000usize, 7u64), (12_000, 8)] {
        let fps = planted(n, seed, 500);
        for k in [0u32, 1, 3, 4, 6] {
            let (want_pairs, want_repeated) = brute(&fps, k);
            for log2 in [1.0, 4.0] {
                let split = BlockSplit::new(fps.len() as u64, k, log2).unwrap();
                assert!(split.groups() as u32 <= k + 1, "{} groups for k = {k}", split.groups());
                let tables: usize = (0..split.groups()).map(|g| split.tables_of(g).len()).sum();
                assert_eq!(tables, split.design().tables().len());
                for (parts, tasks) in [(1usize, 1usize), (7, 3)] {
                    let (pairs, repeated) = run(&split, &fps, parts, tasks);
                    assert_eq!(pairs, want_pairs, "n = {n}, k = {k}, {}, {parts} partitions", split.design().summary());
                    assert_eq!(repeated, want_repeated, "n = {n}, k = {k}");
                }
            }
        }
    }
}

#[test]
fn block_split_serves_nested_and_blockless_designs() {
    let fps = planted(4000, 11, 50);
    for (k, levels) in [(3u32, vec![4u32, 4]), (2, vec![3, 4]), (3, vec![]), (2, vec![6])] {
        let split = BlockSplit::for_design(Design::new(k, &levels).unwrap()).unwrap();
        let (want_pairs, want_repeated) = brute(&fps, k);
        let (pairs, repeated) = run(&split, &fps, 5, 4);
        assert_eq!(pairs, want_pairs, "k = {k}, levels {levels:?}");
        assert_eq!(repeated, want_repeated);
    }
}
