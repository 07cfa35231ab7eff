//! Sketches in the engine: every insert's sketch follows its pair through the log, the
//! memtable, flushes, compactions, deletes and reopens (a proptest against a model that
//! keeps the newest insert's sketch), and confirmed queries agree with a brute-force
//! confirmation over the live pairs. Formats: an index without sketches writes the
//! version-1 log and manifest it always did; with sketches, version 2.

use std::collections::BTreeMap;

use proptest::prelude::*;
use simdex::storage::MemStorage;
use simdex::{minhash_resemblance, minhash_scheme};
use simdex::{ConfirmOptions, Error, FindOrInsert, Index, IndexOptions, Match, QueryOptions, SketchColumn};

use crate::common::Rng;
use crate::engine::mem_options;

/// 64 one-bit MinHash values: 8 bytes.
const WIDTH: usize = 8;

fn column() -> SketchColumn {
    SketchColumn { bytes: WIDTH as u16, scheme: minhash_scheme(1, 64, 1) }
}

fn sketched_options(storage: &MemStorage, memtable: u64) -> IndexOptions {
    mem_options(storage, memtable).with_sketches(Some(column()))
}

/// The model: each live pair and the sketch of its newest insert (`None`: inserted without).
type Model = BTreeMap<(u64, u64), Option<[u8; WIDTH]>>;

#[derive(Clone, Debug)]
enum Step {
    Insert { fp: u64, id: u64, sketch: Option<[u8; WIDTH]> },
    Batch(Vec<(u64, u64, [u8; WIDTH])>),
    Delete(usize),
    Flush,
    Compact,
    CompactTiered,
    Reopen,
    Check { q: u64, k: u32 },
}

fn fingerprint() -> impl Strategy<Value = u64> {
    (0..3usize, any::<u64>(), 0..4u32).prop_map(|(c, r, flips)| {
        const CENTERS: [u64; 3] = [0, 0xdead_beef_0123_4567, 0x5555_5555_5555_5555];
        let mut x = CENTERS[c];
        for i in 0..flips {
            x ^= 1 << ((r >> (6 * i)) & 63);
        }
        x
    })
}

/// Sketches that are never all zero (all zero means "none").
fn sketch() -> impl Strategy<Value = [u8; WIDTH]> {
    any::<[u8; WIDTH]>().prop_map(|mut s| {
        s[0] |= 1;
        s
    })
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        8 => (fingerprint(), 0..12u64, prop::option::weighted(0.8, sketch())).prop_map(|(fp, id, sketch)| Step::Insert { fp, id, sketch }),
        2 => prop::collection::vec((fingerprint(), 0..12u64, sketch()), 1..8).prop_map(Step::Batch),
        3 => any::<usize>().prop_map(Step::Delete),
        1 => Just(Step::Flush),
        1 => Just(Step::Compact),
        1 => Just(Step::CompactTiered),
        1 => Just(Step::Reopen),
        3 => (fingerprint(), 0..9u32).prop_map(|(q, k)| Step::Check { q, k }),
    ]
}

/// The model's answer to `query_sketched`.
fn model_sketched(model: &Model, q: u64, k: u32) -> Vec<(u64, u64, u32, Option<Vec<u8>>)> {
    model.iter().filter(|((fp, _), _)| (fp ^ q).count_ones() <= k).map(|(&(fp, id), s)| (fp, id, (fp ^ q).count_ones(), s.map(|s| s.to_vec()))).collect()
}

fn sketched(index: &Index, q: u64, k: u32) -> Vec<(u64, u64, u32, Option<Vec<u8>>)> {
    let mut got: Vec<_> = index.query_sketched(q, &QueryOptions::within(k)).unwrap().into_iter().map(|(m, s)| (m.fingerprint, m.doc_id.unwrap(), m.distance, s)).collect();
    got.sort();
    got
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

    #[test]
    fn sketches_follow_their_pairs_through_every_operation(steps in prop::collection::vec(step(), 1..100), memtable in 3..16u64) {
        let storage = MemStorage::default();
        let mut options = sketched_options(&storage, memtable);
        options.compaction.fanout = 2;
        let mut index = Index::open("s", options.clone()).unwrap();
        let mut model = Model::new();
        for (i, s) in steps.iter().enumerate() {
            match s {
                Step::Insert { fp, id, sketch: Some(sk) } => {
                    index.insert_sketched(*fp, *id, sk).unwrap();
                    model.insert((*fp, *id), Some(*sk));
                }
                Step::Insert { fp, id, sketch: None } => {
                    index.insert(*fp, *id).unwrap();
                    model.insert((*fp, *id), None);
                }
                Step::Batch(v) => {
                    let pairs: Vec<(u64, u64)> = v.iter().map(|e| (e.0, e.1)).collect();
                    let bytes: Vec<u8> = v.iter().flat_map(|e| e.2).collect();
                    index.insert_many_sketched(&pairs.iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>(), &bytes).unwrap();
                    for e in v {
                        model.insert((e.0, e.1), Some(e.2));
                    }
                }
                Step::Delete(at) => {
                    let pair = if model.is_empty() { (1, 1) } else { *model.keys().nth(at % model.len()).unwrap() };
                    index.delete(pair.0, pair.1).unwrap();
                    model.remove(&pair);
                }
                Step::Flush => index.flush().unwrap(),
                Step::Compact => index.compact().unwrap(),
                Step::CompactTiered => index.compact_tiered().unwrap(),
                Step::Reopen => {
                    drop(index);
                    index = Index::open("s", options.clone()).unwrap();
                }
                Step::Check { q, k } => {
                    prop_assert_eq!(sketched(&index, *q, *k), model_sketched(&model, *q, *k), "step {}: {:?}", i, s);
                }
            }
        }
        // Every live pair, with its sketch, after a reopen and after a full compaction.
        for _ in 0..2 {
            drop(index);
            index = Index::open("s", options.clone()).unwrap();
            for &(fp, id) in model.keys() {
                let got: Vec<_> = sketched(&index, fp, 0).into_iter().filter(|g| g.1 == id).collect();
                prop_assert_eq!(got, model_sketched(&model, fp, 0).into_iter().filter(|g| g.1 == id).collect::<Vec<_>>());
            }
            index.compact().unwrap();
        }
    }
}

/// A sketch that agrees with `base` on all but `differ` of its 64 one-bit values.
fn near_sketch(base: [u8; WIDTH], differ: u32, rng: &mut Rng) -> [u8; WIDTH] {
    let mut s = base;
    let mut flipped = 0;
    while flipped < differ {
        let bit = (rng.next() % 64) as usize;
        let before = s[bit / 8];
        s[bit / 8] ^= 1 << (bit % 8);
        if (s[bit / 8] ^ base[bit / 8]) & (1 << (bit % 8)) != 0 && before != s[bit / 8] {
            flipped += 1;
        }
    }
    s
}

#[test]
fn confirmed_queries_agree_with_brute_force_confirmation() {
    let storage = MemStorage::default();
    let index = Index::open("v", sketched_options(&storage, 400)).unwrap();
    let mut rng = Rng(11);
    let mut stored: Vec<(u64, u64, Option<[u8; WIDTH]>)> = Vec::new();
    let centers: Vec<(u64, [u8; WIDTH])> = (0..30).map(|_| (rng.next(), rng.next().to_le_bytes())).collect();
    for i in 0..3000u64 {
        let (c, cs) = centers[(rng.next() % 30) as usize];
        let flips = (rng.next() % 10) as u32;
        let fp = rng.flip(c, flips);
        let differ = (rng.next() % 12) as u32;
        let sketch = near_sketch(cs, differ, &mut rng);
        if i % 7 == 0 {
            index.insert(fp, i).unwrap();
            stored.push((fp, i, None));
        } else {
            index.insert_sketched(fp, i, &sketch).unwrap();
            stored.push((fp, i, Some(sketch)));
        }
        if i == 1500 {
            index.flush().unwrap();
        }
    }
    for (n, &(c, cs)) in centers.iter().enumerate() {
        for (k, t, unsketched_k) in [(3, 0.9, 3), (5, 0.8, 2), (8, 0.9, 3), (6, 0.5, 0)] {
            let q = rng.flip(c, (n % 3) as u32);
            let qs = near_sketch(cs, (n % 5) as u32, &mut rng);
            let options = ConfirmOptions::default().with_k(k).with_min_similarity(t).with_unsketched_k(unsketched_k);
            let got = index.query_confirmed(q, &qs, &options).unwrap();
            let mut want: Vec<Match> = stored
                .iter()
                .filter_map(|&(fp, id, s)| {
                    let d = (fp ^ q).count_ones();
                    let matched = simdex::Match::new(fp, d, Some(id));
                    match s {
                        Some(s) => {
                            let sim = minhash_resemblance(&qs, &s, 64, 1).unwrap();
                            (d <= k && sim >= t).then_some(Match { similarity: Some(sim), ..matched })
                        }
                        None => (d <= unsketched_k).then_some(matched),
                    }
                })
                .collect();
            want.sort_by_key(|v| Match::new(v.fingerprint, v.distance, v.doc_id));
            let mut got_sorted = got.clone();
            got_sorted.sort_by_key(|v| Match::new(v.fingerprint, v.distance, v.doc_id));
            assert_eq!(got_sorted, want, "center {n}, k {k}, t {t}");
            assert_eq!(
                got.iter().map(|v| Match::new(v.fingerprint, v.distance, v.doc_id)).collect::<Vec<_>>(),
                want.iter().map(|v| Match::new(v.fingerprint, v.distance, v.doc_id)).collect::<Vec<_>>(),
                "sorted by distance"
            );
        }
    }
    // find_or_insert_confirmed: a near sketch within k is found; a far sketch is inserted.
    let (c, cs) = centers[0];
    let found = index.find_or_insert_confirmed(c, 10_001, &cs, &ConfirmOptions::within(8)).unwrap();
    assert!(matches!(found, FindOrInsert::Found(ref m) if !m.is_empty()), "{found:?}");
    let far = [0x5a; WIDTH];
    let strict = ConfirmOptions::default().with_k(8).with_min_similarity(0.99).with_unsketched_k(0);
    // brute force: a center nothing stored matches with this far sketch
    let matches_far = |c: u64| {
        stored.iter().any(|&(fp, _, s)| match s {
            Some(s) => (fp ^ c).count_ones() <= 8 && minhash_resemblance(&far, &s, 64, 1).unwrap() >= 0.99,
            None => fp == c,
        })
    };
    let c = centers.iter().map(|x| x.0).find(|&c| !matches_far(c)).unwrap();
    let inserted = index.find_or_insert_confirmed(c, 10_002, &far, &strict).unwrap();
    assert!(matches!(inserted, FindOrInsert::Inserted { .. }), "{inserted:?}");
    let back = index.query_sketched(c, &QueryOptions::within(0)).unwrap();
    assert!(back.iter().any(|(m, s)| m.doc_id == Some(10_002) && s.as_deref() == Some(&far[..])));
}

#[test]
fn sketches_survive_a_crash_through_log_replay() {
    let storage = MemStorage::default();
    let options = sketched_options(&storage, 1000).with_flush_on_close(false);
    let index = Index::open("c", options.clone()).unwrap();
    index.insert_sketched(7, 1, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    index.insert(9, 2).unwrap();
    index.delete(7, 1).unwrap();
    index.insert_sketched(7, 1, &[8, 7, 6, 5, 4, 3, 2, 1]).unwrap();
    drop(index); // syncs only: the next open replays the log
    let crashed = storage.restart();
    let index = Index::open("c", options.with_storage(std::sync::Arc::new(crashed))).unwrap();
    assert_eq!(index.open_report().replayed_ops, 4);
    assert_eq!(index.sketches(), Some(column()));
    let got = index.query_sketched(7, &QueryOptions::within(1)).unwrap();
    assert_eq!(got, vec![(simdex::Match::new(7, 0, Some(1)), Some(vec![8, 7, 6, 5, 4, 3, 2, 1]))]);
}

#[test]
fn logs_are_version_4_with_and_without_sketches_in_a_version_3_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let version = |path: &std::path::Path| u32::from_le_bytes(std::fs::read(path).unwrap()[8..12].try_into().unwrap());
    let log_of = |d: &std::path::Path| std::fs::read_dir(d).unwrap().map(|e| e.unwrap().path()).find(|p| p.extension().is_some_and(|x| x == "wal")).unwrap();
    let plain = dir.path().join("plain");
    let index = Index::open(&plain, IndexOptions::default().with_background(false).with_flush_on_close(false)).unwrap();
    index.insert(1, 1).unwrap();
    index.close().unwrap();
    assert_eq!((version(&plain.join("MANIFEST")), version(&log_of(&plain))), (3, 4));
    let with = dir.path().join("with");
    let index = Index::open(&with, IndexOptions::default().with_background(false).with_sketches(Some(column()))).unwrap();
    index.insert_sketched(1, 1, &[9; WIDTH]).unwrap();
    assert_eq!((version(&with.join("MANIFEST")), version(&log_of(&with))), (3, 4));
    index.close().unwrap();
    // The segment the close flushed has a sketch column with the index's scheme.
    let seg = std::fs::read_dir(&with).unwrap().map(|e| e.unwrap().path()).find(|p| p.extension().is_some_and(|x| x == "sdx")).unwrap();
    let segment = simdex::Segment::open(&seg).unwrap();
    assert_eq!(segment.sketch_layout(), Some((WIDTH, column().scheme)));
    assert_eq!(segment.sketch(0).unwrap(), &[9; WIDTH]);
    // Reopened without asking for sketches, the index keeps them.
    let index = Index::open(&with, IndexOptions::default().with_background(false)).unwrap();
    assert_eq!(index.sketches(), Some(column()));
}

#[test]
fn sketch_misuse_is_a_clear_error() {
    let storage = MemStorage::default();
    let plain = Index::open("p", mem_options(&storage, 100)).unwrap();
    let e = plain.insert_sketched(1, 1, &[1; WIDTH]).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("stores no sketches"), "{e}");
    let e = plain.query_confirmed(1, &[1; WIDTH], &ConfirmOptions::default()).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("stores no sketches"), "{e}");
    let index = Index::open("s", sketched_options(&storage, 100)).unwrap();
    let e = index.insert_sketched(1, 1, &[1; 7]).unwrap_err();
    assert!(e.to_string().contains("7 bytes of sketches") && e.to_string().contains("8 bytes each"), "{e}");
    let e = index.insert_many_sketched(&[(1, 1), (2, 2)].iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>(), &[1; WIDTH]).unwrap_err();
    assert!(e.to_string().contains("for 2 operations"), "{e}");
    let e = index.query_confirmed(1, &[1; 3], &ConfirmOptions::default()).unwrap_err();
    assert!(e.to_string().contains("3-byte query sketch"), "{e}");
    let other = Index::open("o", mem_options(&storage, 100).with_sketches(Some(SketchColumn { bytes: WIDTH as u16, scheme: *b"CUSTOM01" }))).unwrap();
    other.insert_sketched(5, 5, &[3; WIDTH]).unwrap();
    let e = other.query_confirmed(5, &[3; WIDTH], &ConfirmOptions::default()).unwrap_err();
    assert!(e.to_string().contains("not a b-bit MinHash"), "{e}");
    // ... but its sketches are returned for the embedder to compare.
    assert_eq!(other.query_sketched(5, &QueryOptions::within(0)).unwrap()[0].1, Some(vec![3; WIDTH]));
    let e = Index::open("bad", mem_options(&storage, 100).with_sketches(Some(SketchColumn { bytes: 65, scheme: [0; 8] }))).unwrap_err();
    assert!(e.to_string().contains("65 bytes"), "{e}");
}

#[test]
fn a_batch_of_confirmed_checks_answers_as_the_single_check_and_as_brute_force() {
    let storage = MemStorage::default();
    let index = Index::open("v", sketched_options(&storage, 300)).unwrap();
    let mut rng = Rng(48);
    let centers: Vec<(u64, [u8; WIDTH])> = (0..20).map(|_| (rng.next(), rng.next().to_le_bytes())).collect();
    let mut stored: Vec<(u64, u64)> = Vec::new();
    for i in 0..2000u64 {
        let (c, cs) = centers[(rng.next() % 20) as usize];
        let flips = (rng.next() % 8) as u32;
        let fp = rng.flip(c, flips);
        let differ = (rng.next() % 10) as u32;
        let sketch = near_sketch(cs, differ, &mut rng);
        if i % 5 == 0 {
            index.insert(fp, i).unwrap();
        } else {
            index.insert_sketched(fp, i, &sketch).unwrap();
        }
        stored.push((fp, i));
        if i == 1000 {
            index.flush().unwrap();
        }
    }
    // 600 queries (more than one core's share), near the centres
    let (mut fps, mut sketches) = (Vec::new(), Vec::new());
    for n in 0..600usize {
        let (c, cs) = centers[n % 20];
        fps.push(rng.flip(c, (n % 4) as u32));
        sketches.extend_from_slice(&near_sketch(cs, (n % 6) as u32, &mut rng));
    }
    let options = ConfirmOptions::default().with_k(8).with_min_similarity(0.8).with_unsketched_k(2);
    let many = simdex::query_confirmed_many(&index, &fps, &sketches, &options).unwrap();
    assert_eq!(many.len(), fps.len());
    let mut found = 0;
    for (i, got) in many.items().enumerate() {
        let want = index.query_confirmed(fps[i], &sketches[i * WIDTH..(i + 1) * WIDTH], &options).unwrap();
        assert_eq!(got, want.as_slice(), "item {i}");
        found += got.len();
    }
    assert!(found > 600, "the queries found too little to test: {found}");
    // without sketches: fingerprints alone within unsketched_k, as brute force finds them
    let plain = simdex::query_confirmed_many(&index, &fps, &[], &options).unwrap();
    for (i, got) in plain.items().enumerate() {
        let mut want: Vec<Match> =
            stored.iter().filter(|&&(fp, _)| (fp ^ fps[i]).count_ones() <= 2).map(|&(fp, id)| Match::new(fp, (fp ^ fps[i]).count_ones(), Some(id))).collect();
        want.sort_by_key(|m| (m.distance, m.fingerprint, m.doc_id));
        assert_eq!(got, want.as_slice(), "item {i} without sketches");
    }
    // a sketch column of the wrong length is refused
    assert!(matches!(simdex::query_confirmed_many(&index, &fps, &sketches[1..], &options), Err(Error::InvalidArgument(_))));
}

#[test]
fn recovery_keeps_the_sketches_of_segments_and_logs_and_names_those_it_loses() {
    use simdex::recovery::salvage;
    use simdex::storage::Storage;
    use std::path::Path;
    let storage = MemStorage::default();
    let options = (sketched_options(&storage, 1 << 20)).with_flush_on_close(false);
    let index = Index::open("/idx", options.clone()).unwrap();
    let mut want = Model::new();
    for i in 0..300u64 {
        let sketch = [(i % 251) as u8 + 1; WIDTH];
        let fp = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        index.insert_sketched(fp, i, &sketch).unwrap();
        want.insert((fp, i), Some(sketch));
        if i == 199 {
            index.flush().unwrap(); // 200 in a segment, 100 in the log
        }
    }
    index.insert(42, 1000).unwrap();
    want.insert((42, 1000), None);
    drop(index);
    let report = salvage(&storage, Path::new("/idx"), Path::new("/out"), mem_options(&storage, 1 << 20)).unwrap();
    assert_eq!(report.live_pairs, 301);
    let out = Index::open("/out", mem_options(&storage, 1 << 20)).unwrap();
    assert_eq!(out.sketches(), Some(column()), "the manifest's sketch layout is carried over");
    for (&(fp, id), sketch) in &want {
        let got = out.query_sketched(fp, &QueryOptions::within(0)).unwrap();
        assert_eq!(got, vec![(simdex::Match::new(fp, 0, Some(id)), sketch.map(|s| s.to_vec()))]);
    }
    drop(out);
    // A damaged sketch page: those entries keep their pairs, lose their sketches, and the
    // report says so.
    let seg = storage.list(Path::new("/out")).unwrap().into_iter().find(|n| n.ends_with(".sdx")).unwrap();
    let path = Path::new("/out").join(&seg);
    let bytes = storage.file(&path).unwrap();
    let segment = simdex::Segment::open_with(&storage, &path).unwrap();
    assert!(segment.has_sketches());
    drop(segment);
    // Two stored sketches side by side in the column: 8 equal bytes, then 8 other equal bytes.
    let uniform = |w: &[u8]| w.iter().all(|&b| b == w[0]) && (1..=251).contains(&w[0]);
    let at = bytes.windows(2 * WIDTH).position(|w| uniform(&w[..WIDTH]) && uniform(&w[WIDTH..]) && w[0] != w[WIDTH]).unwrap();
    let mut damaged = bytes.clone();
    damaged[at] ^= 0xff;
    storage.put(&path, &damaged);
    let report = salvage(&storage, Path::new("/out"), Path::new("/again"), mem_options(&storage, 1 << 20)).unwrap();
    assert_eq!(report.live_pairs, 301);
    let lost: Vec<_> = report.lost.iter().filter(|(_, what)| what.contains("sketches of")).collect();
    assert_eq!(lost.len(), 1, "{:?}", report.lost);
    let again = Index::open("/again", mem_options(&storage, 1 << 20)).unwrap();
    let with: usize = want.keys().filter(|(fp, _)| again.query_sketched(*fp, &QueryOptions::within(0)).unwrap()[0].1.is_some()).count();
    assert!(with < 300 && with > 0, "{with} pairs kept their sketches");
}
