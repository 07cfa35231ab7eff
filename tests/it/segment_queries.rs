//! Every query answer equals a brute-force Hamming scan, over random, clustered and
//! duplicate-heavy sets, edge values, all designs up to k = 4 and every k up to the design's,
//! and every k up to 8 above it (multi-probe).

use proptest::prelude::*;
use simdex::codec::Codec;
use simdex::plan::{Design, MAX_K};
use simdex::{BuildOptions, Error, QueryOptions};

use crate::common::{brute_force, build, Rng};

/// Designs worth covering, per k: the full scan, single-level and nested recipes.
fn designs(k: u32) -> Vec<Vec<u32>> {
    match k {
        0 => vec![vec![], vec![1]],
        1 => vec![vec![], vec![2], vec![4], vec![3, 2]],
        2 => vec![vec![], vec![3], vec![4], vec![3, 3]],
        3 => vec![vec![], vec![4], vec![5], vec![6], vec![4, 4]],
        _ => vec![vec![], vec![5], vec![6]],
    }
}

#[derive(Debug, Clone)]
enum Shape {
    Random,
    /// A few centers, each with many near copies sharing long prefixes.
    Clustered,
    /// Long runs of identical fingerprints, spanning blocks.
    Duplicates,
    /// 0, u64::MAX and their neighbours.
    Edges,
}

fn generate(shape: &Shape, n: usize, seed: u64) -> Vec<u64> {
    let mut rng = Rng(seed | 1);
    match shape {
        Shape::Random => (0..n).map(|_| rng.next()).collect(),
        Shape::Clustered => {
            let centers: Vec<u64> = (0..4).map(|_| rng.next()).collect();
            (0..n)
                .map(|i| {
                    let c = centers[i % centers.len()];
                    let flips = (rng.next() % 6) as u32;
                    rng.flip(c, flips)
                })
                .collect()
        }
        Shape::Duplicates => {
            let vals = [0u64, rng.next(), u64::MAX];
            (0..n).map(|i| if i % 10 == 9 { rng.next() } else { vals[i % 3] }).collect()
        }
        Shape::Edges => (0..n)
            .map(|i| match i % 4 {
                0 => 0,
                1 => u64::MAX,
                2 => {
                    let n = (rng.next() % 4) as u32;
                    rng.flip(0, n)
                }
                _ => {
                    let n = (rng.next() % 4) as u32;
                    rng.flip(u64::MAX, n)
                }
            })
            .collect(),
    }
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![Just(Shape::Random), Just(Shape::Clustered), Just(Shape::Duplicates), Just(Shape::Edges)]
}

fn size() -> impl Strategy<Value = usize> {
    prop_oneof![Just(0usize), Just(1), 2..50usize, 200..3000usize]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    #[test]
    fn queries_equal_brute_force(
        shape in shape(),
        n in size(),
        seed in any::<u64>(),
        design_k in 0u32..=4,
        design_pick in any::<usize>(),
        with_ids in any::<bool>(),
        delta in any::<bool>(),
    ) {
        let fps = generate(&shape, n, seed);
        let ids: Vec<u64> = (0..n as u64).map(|i| i.wrapping_mul(7) ^ seed).collect();
        let ids = with_ids.then_some(&ids[..]);
        let recipes = designs(design_k);
        let design = Design::new(design_k, &recipes[design_pick % recipes.len()]).unwrap();
        let options = BuildOptions::default().with_design(Some(design)).with_k(design_k).with_codec(if delta { Codec::Delta } else { Codec::Xor });
        let dir = tempfile::tempdir().unwrap();
        let (_, seg) = build(dir.path(), "s.sdx", &fps, ids, &options);
        prop_assert_eq!(seg.len(), n as u64);
        let mut rng = Rng(seed ^ 0x5555);
        let mut queries: Vec<u64> = vec![0, u64::MAX, rng.next()];
        for i in 0..12 {
            if let Some(&x) = fps.get((rng.next() as usize) % fps.len().max(1)) {
                queries.push(rng.flip(x, i % (design_k + 2)));
            }
        }
        for q in queries {
            for k in 0..=design_k {
                let got = seg.query(q, &QueryOptions::within(k)).unwrap();
                prop_assert_eq!(&got, &brute_force(&fps, ids, q, k), "q={:#x} k={}", q, k);
            }
            // Above the design's k, up to MAX_K: answered (multi-probe or scan, whichever
            // the plan expects cheaper). Above MAX_K: refused, unless a full scan is asked for.
            let over = design_k + 2;
            prop_assert_eq!(seg.query(q, &QueryOptions::within(over)).unwrap(), brute_force(&fps, ids, q, over));
            let refused = matches!(seg.query(q, &QueryOptions::within(MAX_K + 1)), Err(Error::KTooLarge { .. }));
            prop_assert!(refused);
            let mut got = Vec::new();
            seg.query_into(q, &QueryOptions::within(MAX_K + 1).with_full_scan(), &mut got).unwrap();
            prop_assert_eq!(got, brute_force(&fps, ids, q, MAX_K + 1));
        }
    }

    /// Multi-probe (forced, even where a scan would be cheaper) answers every k up to
    /// MAX_K exactly from designs built for a smaller k.
    #[test]
    fn multi_probe_equals_brute_force_for_every_k_up_to_8(
        shape in shape(),
        n in size(),
        seed in any::<u64>(),
        design_k in 0u32..=3,
        design_pick in any::<usize>(),
        with_ids in any::<bool>(),
    ) {
        let fps = generate(&shape, n, seed);
        let ids: Vec<u64> = (0..n as u64).map(|i| i.wrapping_mul(7) ^ seed).collect();
        let ids = with_ids.then_some(&ids[..]);
        let recipes = designs(design_k);
        let design = Design::new(design_k, &recipes[design_pick % recipes.len()]).unwrap();
        let options = BuildOptions::default().with_design(Some(design)).with_k(design_k).with_codec(Codec::Xor);
        let dir = tempfile::tempdir().unwrap();
        let (_, seg) = build(dir.path(), "s.sdx", &fps, ids, &options);
        let mut rng = Rng(seed ^ 0x7777);
        let mut queries: Vec<u64> = vec![0, rng.next()];
        for i in 0..8 {
            if let Some(&x) = fps.get((rng.next() as usize) % fps.len().max(1)) {
                queries.push(rng.flip(x, i + 2));
            }
        }
        for q in queries {
            for k in design_k + 1..=MAX_K {
                let got = seg.query(q, &QueryOptions::within(k).with_always_probe()).unwrap();
                prop_assert_eq!(&got, &brute_force(&fps, ids, q, k), "q={:#x} k={} design {}", q, k, seg.design().summary());
            }
        }
    }
}

#[test]
fn the_default_design_answers_k_up_to_8_by_multi_probe_on_a_larger_set() {
    let mut rng = Rng(11);
    let centers: Vec<u64> = (0..2000).map(|_| rng.next()).collect();
    // Near copies at every distance up to 10, so every k has matches to find.
    let fps: Vec<u64> = (0..60_000).map(|i| if i % 2 == 0 { rng.next() } else { rng.flip(centers[i % centers.len()], (i % 11) as u32) }).collect();
    let dir = tempfile::tempdir().unwrap();
    let (_, seg) = build(dir.path(), "s.sdx", &fps, None, &BuildOptions::default());
    assert_eq!(seg.design().k(), 3);
    for (i, &c) in centers.iter().enumerate().take(60) {
        let q = rng.flip(c, (i % 3) as u32);
        for k in 4..=MAX_K {
            let want = brute_force(&fps, None, q, k);
            assert_eq!(seg.query(q, &QueryOptions::within(k)).unwrap(), want, "k = {k}");
            assert_eq!(seg.query(q, &QueryOptions::within(k).with_always_probe()).unwrap(), want, "k = {k}");
        }
    }
}

#[test]
fn planner_designs_answer_exactly_on_a_larger_random_set() {
    let mut rng = Rng(7);
    let fps: Vec<u64> = (0..60_000).map(|_| rng.next()).collect();
    let dir = tempfile::tempdir().unwrap();
    let (_, seg) = build(dir.path(), "s.sdx", &fps, None, &BuildOptions::default());
    assert_eq!(seg.design().tables().len(), 4, "{}", seg.design().summary());
    for i in 0..300 {
        let q = rng.flip(fps[i * 97], (i % 5) as u32);
        assert_eq!(seg.query(q, &QueryOptions::within(3)).unwrap(), brute_force(&fps, None, q, 3));
    }
}

#[test]
fn entries_iterate_in_fingerprint_order_with_their_ids() {
    let fps = [5u64, 3, 5, u64::MAX, 0, 3];
    let ids = [10u64, 11, 9, 12, 13, 14];
    let dir = tempfile::tempdir().unwrap();
    let (_, seg) = build(dir.path(), "s.sdx", &fps, Some(&ids), &BuildOptions::default());
    let got: Vec<(u64, Option<u64>)> = seg.entries().map(|r| r.unwrap()).collect();
    assert_eq!(got, vec![(0, Some(13)), (3, Some(11)), (3, Some(14)), (5, Some(9)), (5, Some(10)), (u64::MAX, Some(12))]);
}

/// A query that passes over a block's entries below its prefix run keeps where the block's
/// prefixes change (seek hints, found on the block's first use) and later queries start
/// there: over blocks with many prefix changes, few, and runs of duplicates, and with the
/// longer-reaching variants of multi-probe, every answer of the first and the later
/// passes equals brute force.
#[test]
fn seek_hints_found_by_one_query_serve_the_later_ones() {
    let mut rng = Rng(31);
    let centers: Vec<u64> = (0..50).map(|_| rng.next()).collect();
    let fps: Vec<u64> = (0..40_000)
        .map(|i| match i % 5 {
            0 | 1 => rng.next(),
            2 => rng.flip(centers[i % centers.len()], (i % 7) as u32),
            3 => centers[i % 3],
            _ => rng.next() & 0xffff_0000_0000_0000 | (i as u64 % 97),
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    for (name, options) in [("default", BuildOptions::default()), ("long prefixes", BuildOptions::default().with_design(Some(Design::new(3, &[6]).unwrap())))] {
        let (_, seg) = build(dir.path(), &format!("{}.sdx", name.replace(' ', "-")), &fps, None, &options);
        let queries: Vec<u64> = (0..150).map(|i| if i % 3 == 0 { rng.next() } else { rng.flip(fps[(i * 263) % fps.len()], (i % 4) as u32) }).collect();
        for pass in 0..2 {
            for &q in queries.iter().rev() {
                for k in [3, 5] {
                    assert_eq!(seg.query(q, &QueryOptions::within(k).with_always_probe()).unwrap(), brute_force(&fps, None, q, k), "{name}: pass {pass}, q = {q:#x}, k = {k}");
                }
            }
        }
    }
}
