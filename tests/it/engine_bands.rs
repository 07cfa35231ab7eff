//! Band files and the crawler's check (issues 39, 45): the check confirmed by sketch at the
//! default sketch (512 one-bit values) and threshold 0.9 finds its candidates through the
//! band files (`format-spec/bands.md`): in a segment whose every entry has a sketch, only
//! there (its tables are not asked); elsewhere (memtables) beyond the design's k; and (band
//! candidates, on by default) every pair whose sketch shares a band with the query's
//! whatever its distance. Oracles: a brute-force scan of the live pairs with the band rule
//! (resemblance >= t, and either within the tables' k where the tables are asked, or within
//! k and sharing one of the 16 bands, or sharing a band at any distance; band sharing
//! computed here from the sketches' bytes), the exhaustive check (resemblance >= t within k,
//! or sharing a band at any distance), the same without band candidates (within k only) and
//! the pigeonhole bound (sketches differing in at most 15 bits always share a band); band
//! files live and die with their segments, are rebuilt when missing, and are checked page by
//! page.

use std::collections::BTreeMap;

use proptest::prelude::*;
use simdex::storage::{MemStorage, Storage};
use simdex::{minhash_resemblance, minhash_scheme};
use simdex::{ConfirmOptions, Index, IndexOptions, Match, SketchColumn};

use crate::common::Rng;
use crate::engine::mem_options;

/// The default sketch: 512 one-bit MinHash values.
const WIDTH: usize = 64;
pub(crate) type Sketch = [u8; WIDTH];

pub(crate) fn column() -> SketchColumn {
    SketchColumn { bytes: WIDTH as u16, scheme: minhash_scheme(1, 512, 1) }
}

fn options(storage: &MemStorage, memtable: u64) -> IndexOptions {
    mem_options(storage, memtable).with_sketches(Some(column()))
}

/// `base` with `differ` distinct bits flipped.
pub(crate) fn near(base: &Sketch, differ: u32, rng: &mut Rng) -> Sketch {
    let mut s = *base;
    let mut flipped = std::collections::BTreeSet::new();
    while flipped.len() < differ as usize {
        flipped.insert((rng.next() % 512) as usize);
    }
    for bit in flipped {
        s[bit / 8] ^= 1 << (bit % 8);
    }
    s
}

pub(crate) fn random_sketch(rng: &mut Rng) -> Sketch {
    let mut s = [0u8; WIDTH];
    for chunk in s.chunks_mut(8) {
        chunk.copy_from_slice(&rng.next().to_le_bytes());
    }
    s[0] |= 1;
    s
}

fn shares_band(a: &Sketch, b: &Sketch) -> bool {
    a.chunks(4).zip(b.chunks(4)).any(|(x, y)| x == y)
}

/// Live pairs and the sketch of each one's newest insert.
pub(crate) type Model = BTreeMap<(u64, u64), Option<Sketch>>;

/// Where the check asks the tables for a sketched pair: within this many bits (`Some`), or
/// not at all (`None`: the pair's segment has a band file holding every entry, which alone
/// answers).
pub(crate) type Tables<'a> = &'a dyn Fn(&(u64, u64)) -> Option<u32>;

/// Every sketched pair is asked through its band file alone (every pair in a segment whose
/// every entry has a sketch).
pub(crate) fn band_files_alone(_: &(u64, u64)) -> Option<u32> {
    None
}

/// The brute-force answer. `tables`: `None`, the exhaustive rule (every sketched pair within
/// `o.k` at `o.min_similarity`); `Some`, the band rule (at `o.min_similarity >= 0.9`): a
/// sketched pair within `o.k` is found when it shares a band with the query's or lies within
/// the bits `tables` gives it. Band candidates (`o.band_candidates`, at `o.min_similarity
/// >= 0.9`) add every pair beyond `o.k` sharing a band whose resemblance reaches
/// `o.min_similarity + o.band_margin`.
pub(crate) fn oracle(model: &Model, q: u64, qs: &Sketch, o: &ConfirmOptions, tables: Option<Tables<'_>>) -> Vec<Match> {
    let beyond_k = o.band_candidates && o.min_similarity >= 0.9;
    let banded = tables.filter(|_| o.min_similarity >= 0.9);
    let mut want: Vec<Match> = model
        .iter()
        .filter_map(|(&(fp, id), s)| {
            let d = (fp ^ q).count_ones();
            let matched = Match { distance: d, fingerprint: fp, doc_id: Some(id), similarity: None };
            match s {
                Some(s) => {
                    let sim = minhash_resemblance(qs, s, 512, 1).unwrap();
                    let shares = shares_band(qs, s);
                    let found = banded.is_none_or(|t| shares || t(&(fp, id)).is_some_and(|table_k| d <= table_k));
                    let within_k = d <= o.k && found && sim >= o.min_similarity;
                    let band_candidate = beyond_k && d > o.k && shares && sim >= o.min_similarity + o.band_margin;
                    (within_k || band_candidate).then_some(Match { similarity: Some(sim), ..matched })
                }
                None => (d <= o.unsketched_k).then_some(matched),
            }
        })
        .collect();
    want.sort_by_key(key);
    want
}

/// The check against the band rule: exactly, with `where_asked` giving for each pair the
/// bits within which the check asks the tables for it (`Some`); or, where the test does
/// not know which segment holds a pair (`None`), at least the answers when no pair's tables
/// are asked and at most those when every pair's are (within the tables' k).
fn check(index: &Index, model: &Model, q: u64, qs: &Sketch, o: &ConfirmOptions, where_asked: Option<Tables<'_>>) -> Result<(), TestCaseError> {
    let table_k = o.unsketched_k.max(o.k.min(index.k()));
    let got = index.query_confirmed(q, qs, o).unwrap();
    let order: Vec<_> = got.iter().map(|c| (c.distance, c.fingerprint, c.doc_id)).collect();
    let mut sorted = order.clone();
    sorted.sort_unstable();
    prop_assert_eq!(&order, &sorted, "answers sorted by distance, fingerprint and id");
    let everywhere = move |_: &(u64, u64)| Some(table_k);
    let compare = |got: &[Match], o: &ConfirmOptions, what: &str| match where_asked {
        Some(t) => same(got, &oracle(model, q, qs, o, Some(t)), what),
        None => between(got, &oracle(model, q, qs, o, Some(&band_files_alone)), &oracle(model, q, qs, o, Some(&everywhere)), what),
    };
    let mut got = got;
    got.sort_by_key(key);
    compare(&got, o, &format!("banded check, {o:?}"))?;
    let mut all = index.query_confirmed(q, qs, &o.with_exhaustive(true)).unwrap();
    all.sort_by_key(key);
    same(&all, &oracle(model, q, qs, o, None), &format!("exhaustive check, {o:?}"))?;
    // without band candidates: only pairs within k (the band files still find those beyond the tables' k)
    let within = o.with_band_candidates(false);
    let mut only_k = index.query_confirmed(q, qs, &within).unwrap();
    only_k.sort_by_key(key);
    compare(&only_k, &within, &format!("check without band candidates, {o:?}"))?;
    prop_assert!(only_k.iter().all(|m| m.distance <= o.k));
    // at margin 0 every pair sharing a band at the threshold is an answer, at any distance
    let no_margin = o.with_band_margin(0.0);
    let mut wide = index.query_confirmed(q, qs, &no_margin).unwrap();
    wide.sort_by_key(key);
    compare(&wide, &no_margin, &format!("check at band margin 0, {o:?}"))?;
    prop_assert!(got.iter().all(|g| wide.contains(g)), "a margin only takes answers away");
    // the banded answers are the exhaustive ones whose sketches share a band, are near, or
    // have none
    for c in &all {
        let within_pigeonhole = c.similarity.is_none_or(|s| s >= 1.0 - 2.0 * 15.0 / 512.0 - 1e-9);
        if within_pigeonhole {
            prop_assert!(got.contains(c), "{c:?} differs in at most 15 bits or has no sketch, yet was missed");
        }
    }
    Ok(())
}

/// `got` holds every answer of `low` and none beyond `high`.
fn between(got: &[Match], low: &[Match], high: &[Match], what: &str) -> Result<(), TestCaseError> {
    let missed: Vec<_> = low.iter().filter(|w| !got.contains(w)).collect();
    let extra: Vec<_> = got.iter().filter(|g| !high.contains(g)).collect();
    prop_assert!(missed.is_empty() && extra.is_empty(), "{what}: missed {missed:?}; beyond the rule with every table asked {extra:?}");
    Ok(())
}

/// The order answers are compared in.
pub(crate) fn key(m: &Match) -> (u32, u64, Option<u64>) {
    (m.distance, m.fingerprint, m.doc_id)
}

/// Equal answers, or a failure listing only the differences.
fn same(got: &[Match], want: &[Match], what: &str) -> Result<(), TestCaseError> {
    let extra: Vec<_> = got.iter().filter(|g| !want.contains(g)).collect();
    let missed: Vec<_> = want.iter().filter(|w| !got.contains(w)).collect();
    prop_assert!(extra.is_empty() && missed.is_empty() && got.len() == want.len(), "{what}: {} answers, {} wanted; extra {extra:?}; missed {missed:?}", got.len(), want.len());
    Ok(())
}

#[derive(Clone, Debug)]
enum Step {
    Insert { center: usize, flips: u32, id: u64, differ: Option<u32> },
    Delete(usize),
    Flush,
    Compact,
    CompactTiered,
    Reopen,
    Check { center: usize, flips: u32, differ: u32, k: u32 },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        10 => (0..4usize, 0..11u32, 0..40u64, prop::option::weighted(0.85, 0..40u32)).prop_map(|(center, flips, id, differ)| Step::Insert { center, flips, id, differ }),
        2 => any::<usize>().prop_map(Step::Delete),
        1 => Just(Step::Flush),
        1 => Just(Step::Compact),
        1 => Just(Step::CompactTiered),
        1 => Just(Step::Reopen),
        4 => (0..4usize, 0..6u32, 0..30u32, 4..9u32).prop_map(|(center, flips, differ, k)| Step::Check { center, flips, differ, k }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Through inserts (re-inserts with new sketches), deletes, flushes, compactions and
    /// reopens (log replay), the check equals the brute-force band rule and the
    /// exhaustive check equals today's rule.
    #[test]
    fn the_banded_check_equals_brute_force_through_every_operation(steps in prop::collection::vec(step(), 1..80), memtable in 4..40u64, seed in any::<u64>()) {
        run_steps(&steps, memtable, seed)?;
    }
}

/// The proptest's body: `steps` on an index of `memtable`-operation memtables, fingerprints
/// and sketches drawn from `seed`.
fn run_steps(steps: &[Step], memtable: u64, seed: u64) -> Result<(), TestCaseError> {
    let storage = MemStorage::default();
    let mut options = options(&storage, memtable);
    options.compaction.fanout = 2;
    let mut rng = Rng(seed | 1);
    let centers: Vec<(u64, Sketch)> = (0..4).map(|_| (rng.next(), random_sketch(&mut rng))).collect();
    let mut index = Index::open("b", options.clone()).unwrap();
    let mut model = Model::new();
    for s in steps {
        match *s {
            Step::Insert { center, flips, id, differ } => {
                let (c, cs) = centers[center];
                let fp = rng.flip(c, flips);
                match differ {
                    Some(d) => {
                        let sk = near(&cs, d, &mut rng);
                        index.insert_sketched(fp, id, &sk).unwrap();
                        model.insert((fp, id), Some(sk));
                    }
                    None => {
                        index.insert(fp, id).unwrap();
                        model.insert((fp, id), None);
                    }
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
                index = Index::open("b", options.clone()).unwrap();
            }
            Step::Check { center, flips, differ, k } => {
                let (c, cs) = centers[center];
                let (q, qs) = (rng.flip(c, flips), near(&cs, differ, &mut rng));
                check(&index, &model, q, &qs, &ConfirmOptions::within(k), None)?;
            }
        }
    }
    // Every segment has its band file, and no other band file is left.
    let names = storage.list(std::path::Path::new("b")).unwrap();
    let segments: Vec<&String> = names.iter().filter(|n| n.ends_with(".sdx")).collect();
    let bands: Vec<String> = names.iter().filter(|n| n.ends_with(".sdb")).cloned().collect();
    prop_assert_eq!(bands, segments.iter().map(|n| n.replace(".sdx", ".sdb")).collect::<Vec<_>>());
    Ok(())
}

/// Options that keep the segments as they are (no automatic compaction).
fn fixed(storage: &MemStorage) -> IndexOptions {
    let mut o = options(storage, 10_000);
    o.compaction.automatic = false;
    o
}

/// An index of `n` pairs around a few centers (sketches 0..40 bits from the center's), in
/// two segments and the memtable.
fn clustered(storage: &MemStorage, n: u64) -> (Index, Model, Vec<(u64, Sketch)>) {
    clustered_in(std::path::Path::new("c"), fixed(storage), n)
}

/// [`clustered`] in `dir`, opened with `options` (without automatic compaction, so that
/// the two flushes stay two segments).
pub(crate) fn clustered_in(dir: &std::path::Path, options: IndexOptions, n: u64) -> (Index, Model, Vec<(u64, Sketch)>) {
    let index = Index::open(dir, options).unwrap();
    let mut rng = Rng(5);
    let centers: Vec<(u64, Sketch)> = (0..40).map(|_| (rng.next(), random_sketch(&mut rng))).collect();
    let mut model = Model::new();
    for i in 0..n {
        let (c, cs) = centers[(rng.next() % 40) as usize];
        let flips = (rng.next() % 11) as u32;
        let fp = rng.flip(c, flips);
        let differ = (rng.next() % 40) as u32;
        let sk = near(&cs, differ, &mut rng);
        index.insert_sketched(fp, i, &sk).unwrap();
        model.insert((fp, i), Some(sk));
        if i == n / 3 || i == 2 * n / 3 {
            index.flush().unwrap();
        }
    }
    (index, model, centers)
}

#[test]
fn the_check_equals_brute_force_on_segments_and_the_memtable() {
    let storage = MemStorage::default();
    let (index, model, centers) = clustered(&storage, 6000);
    assert_eq!(index.stats().segments.len(), 2);
    let mut rng = Rng(9);
    let mut beyond_k = 0;
    // ids 0..=4000 in the two segments (their band files alone answer), the rest in the
    // memtable (its tables asked within the tables' k)
    for (n, &(c, cs)) in centers.iter().enumerate() {
        let (q, qs) = (rng.flip(c, (n % 4) as u32), near(&cs, (n % 20) as u32, &mut rng));
        for o in [
            ConfirmOptions::within(8),
            ConfirmOptions::within(6),
            ConfirmOptions::within(3),
            ConfirmOptions::within(8).with_min_similarity(0.95),
            ConfirmOptions::within(8).with_min_similarity(0.8),
        ] {
            let table_k = o.unsketched_k.max(o.k.min(index.k()));
            check(&index, &model, q, &qs, &o, Some(&|&(_, id): &(u64, u64)| (id > 4000).then_some(table_k))).unwrap();
        }
        beyond_k += index.query_confirmed(q, &qs, &ConfirmOptions::within(8)).unwrap().iter().filter(|m| m.distance > 8).count();
    }
    // the fixture puts pairs up to 14 bits from a query: some near-duplicates lie beyond k = 8
    assert!(beyond_k > 0, "no answer beyond k: the band candidates were not exercised");
    // a bad margin is refused
    let (c, cs) = centers[0];
    for m in [-0.1, 1.5, f64::NAN] {
        let e = index.query_confirmed(c, &cs, &ConfirmOptions::within(8).with_band_margin(m)).unwrap_err();
        assert!(e.to_string().contains("band_margin"), "{e}");
    }
}

/// With the maintenance thread merging in the background while the writer inserts
/// (memtables of 200 operations: a merge of `max_frozen + 1` memtables' entries or more is
/// long, and the writer then flushes what is frozen at each freeze itself), every pair is
/// kept with its sketch, every segment has its band file, and the check, answered by the
/// band files alone, equals brute force.
#[test]
fn the_check_equals_brute_force_after_writes_flushed_beside_background_merges() {
    for max_frozen in [Some(0usize), None, Some(2)] {
        let storage = MemStorage::default();
        let mut options = options(&storage, 200).with_background(true).with_max_frozen(max_frozen).with_durability(simdex::Durability::NoSync);
        options.compaction.fanout = 2;
        let index = Index::open("g", options).unwrap();
        let mut rng = Rng(11 + max_frozen.map_or(1, |m| m as u64));
        let centers: Vec<(u64, Sketch)> = (0..40).map(|_| (rng.next(), random_sketch(&mut rng))).collect();
        let mut model = Model::new();
        for batch in 0..60u64 {
            let (mut entries, mut sketches) = (Vec::new(), Vec::new());
            for id in batch * 100..(batch + 1) * 100 {
                let (c, cs) = centers[(rng.next() % 40) as usize];
                let (flips, differ) = ((rng.next() % 11) as u32, (rng.next() % 40) as u32);
                let fp = rng.flip(c, flips);
                let sk = near(&cs, differ, &mut rng);
                entries.push(simdex::Entry::from((fp, id)));
                sketches.extend_from_slice(&sk);
                model.insert((fp, id), Some(sk));
            }
            index.insert_many_sketched(&entries, &sketches).unwrap();
        }
        index.flush().unwrap();
        index.compact_tiered().unwrap();
        let stats = index.stats();
        assert!(stats.maintenance_error.is_none(), "{stats:?}");
        assert!(stats.compactions > 0, "{stats:?}");
        let live: Vec<(u64, u64)> = index.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect();
        assert_eq!(live, model.keys().copied().collect::<Vec<_>>());
        let names = storage.list(std::path::Path::new("g")).unwrap();
        let segments: Vec<String> = names.iter().filter(|n| n.ends_with(".sdx")).map(|n| n.replace(".sdx", ".sdb")).collect();
        assert_eq!(names.iter().filter(|n| n.ends_with(".sdb")).cloned().collect::<Vec<_>>(), segments);
        for (n, &(c, cs)) in centers.iter().enumerate() {
            let (q, qs) = (rng.flip(c, (n % 4) as u32), near(&cs, (n % 20) as u32, &mut rng));
            for o in [ConfirmOptions::within(8), ConfirmOptions::within(3)] {
                check(&index, &model, q, &qs, &o, Some(&band_files_alone)).unwrap();
            }
        }
    }
}

#[test]
fn band_files_are_rebuilt_when_missing_and_refused_when_damaged() {
    let storage = MemStorage::default();
    let (index, model, centers) = clustered(&storage, 3000);
    index.close().unwrap();
    let dir = std::path::Path::new("c");
    let band_files: Vec<String> = storage.list(dir).unwrap().into_iter().filter(|n| n.ends_with(".sdb")).collect();
    assert_eq!(band_files.len(), storage.list(dir).unwrap().iter().filter(|n| n.ends_with(".sdx")).count());
    let (c, cs) = centers[0];
    let o = ConfirmOptions::within(8);
    let exhaustive = |index: &Index| {
        let mut v = index.query_confirmed(c, &cs, &o.with_exhaustive(true)).unwrap();
        v.sort_by_key(key);
        v
    };
    let want = oracle(&model, c, &cs, &o, Some(&band_files_alone));
    // A read-only open without a band file answers from that segment's tables.
    storage.remove(&dir.join(&band_files[0])).unwrap();
    let ro = Index::open_read_only(dir, fixed(&storage)).unwrap();
    let mut got = ro.query_confirmed(c, &cs, &o).unwrap();
    got.sort_by_key(key);
    let all = exhaustive(&ro);
    assert!(want.iter().all(|w| got.contains(w)) && got.iter().all(|g| all.contains(g)), "between the band rule's and the exhaustive answers");
    drop(ro);
    // A writable open builds it again, and says so.
    let index = Index::open(dir, fixed(&storage)).unwrap();
    assert_eq!(index.open_report().rebuilt_bands, vec![band_files[0].clone()]);
    let mut got = index.query_confirmed(c, &cs, &o).unwrap();
    got.sort_by_key(key);
    assert_eq!(got, want);
    drop(index);
    // A band file of another segment (here: the other one's) is refused at open and rebuilt.
    let other = storage.read_copy(&dir.join(&band_files[1])).unwrap();
    let mut f = storage.create(&dir.join(&band_files[0])).unwrap();
    std::io::Write::write_all(&mut f, &other).unwrap();
    f.sync().unwrap();
    drop(f);
    let index = Index::open(dir, fixed(&storage)).unwrap();
    assert_eq!(index.open_report().rebuilt_bands, vec![band_files[0].clone()]);
    index.close().unwrap();
    // A damaged page: the check answers from that segment's tables (right answers, counted
    // and named in the stats), never a silent miss; verify finds it. (Healing and every
    // other kind of damage: `engine_band_healing`.)
    let path = dir.join(&band_files[1]);
    crate::common::damage_band_pages(&storage, &path);
    let index = Index::open_read_only(dir, fixed(&storage)).unwrap();
    let mut got = index.query_confirmed(c, &cs, &o).unwrap();
    got.sort_by_key(key);
    let all = exhaustive(&index);
    assert!(want.iter().all(|w| got.contains(w)) && got.iter().all(|g| all.contains(g)), "between the band rule's and the exhaustive answers");
    let stats = index.stats();
    assert_eq!(stats.band_fallbacks, 1);
    assert!(
        stats.band_files_unusable.len() == 1 && stats.band_files_unusable[0].starts_with(&band_files[1]) && stats.band_files_unusable[0].contains("checksum"),
        "{:?}",
        stats.band_files_unusable
    );
    let report = simdex::recovery::verify_index(&storage, dir).unwrap();
    assert!(report.problems.iter().any(|p| p.file == band_files[1]), "{:?}", report.problems);
}

/// A stored sketch that shares a bucket and a tag with one of the query's bands, but no
/// whole band, passes the resemblance threshold within k: the band rule does not find it
/// (found by the proptest: the lookup's candidates were judged by resemblance alone).
#[test]
fn a_sketch_sharing_only_a_bucket_and_a_tag_is_not_a_band_match() {
    let steps = vec![
        Step::Insert { center: 0, flips: 6, id: 0, differ: Some(27) },
        Step::Insert { center: 0, flips: 8, id: 0, differ: Some(29) },
        Step::Check { center: 0, flips: 0, differ: 14, k: 4 },
        Step::Insert { center: 0, flips: 4, id: 0, differ: Some(1) },
        Step::Check { center: 0, flips: 4, differ: 21, k: 6 },
        Step::Insert { center: 1, flips: 10, id: 38, differ: Some(37) },
        Step::Check { center: 1, flips: 3, differ: 1, k: 4 },
        Step::Check { center: 1, flips: 3, differ: 22, k: 6 },
        Step::Check { center: 3, flips: 4, differ: 21, k: 6 },
        Step::Insert { center: 3, flips: 1, id: 14, differ: Some(8) },
        Step::Insert { center: 3, flips: 1, id: 24, differ: Some(36) },
        Step::Check { center: 2, flips: 5, differ: 15, k: 5 },
        Step::Check { center: 0, flips: 1, differ: 8, k: 8 },
        Step::Check { center: 2, flips: 0, differ: 18, k: 4 },
        Step::Insert { center: 3, flips: 6, id: 26, differ: Some(33) },
        Step::Insert { center: 1, flips: 7, id: 11, differ: Some(9) },
        Step::Insert { center: 0, flips: 6, id: 12, differ: Some(23) },
        Step::Insert { center: 2, flips: 3, id: 29, differ: Some(18) },
        Step::Insert { center: 3, flips: 3, id: 14, differ: None },
        Step::Insert { center: 2, flips: 1, id: 32, differ: Some(36) },
        Step::Insert { center: 0, flips: 5, id: 28, differ: Some(6) },
        Step::Check { center: 2, flips: 4, differ: 28, k: 5 },
        Step::Check { center: 3, flips: 0, differ: 15, k: 6 },
        Step::Insert { center: 2, flips: 9, id: 26, differ: Some(39) },
        Step::Insert { center: 3, flips: 4, id: 31, differ: None },
        Step::Insert { center: 2, flips: 3, id: 7, differ: Some(12) },
        Step::Check { center: 0, flips: 3, differ: 9, k: 5 },
        Step::Insert { center: 3, flips: 2, id: 38, differ: Some(10) },
        Step::Insert { center: 1, flips: 0, id: 24, differ: Some(31) },
        Step::Insert { center: 1, flips: 5, id: 30, differ: Some(28) },
        Step::Insert { center: 1, flips: 6, id: 5, differ: Some(27) },
        Step::Check { center: 2, flips: 5, differ: 11, k: 7 },
        Step::Insert { center: 1, flips: 1, id: 18, differ: None },
        Step::Check { center: 1, flips: 1, differ: 22, k: 6 },
        Step::Insert { center: 0, flips: 10, id: 11, differ: Some(4) },
        Step::Insert { center: 2, flips: 2, id: 27, differ: Some(15) },
        Step::Insert { center: 2, flips: 6, id: 8, differ: Some(34) },
        Step::Insert { center: 1, flips: 4, id: 0, differ: Some(21) },
        Step::Check { center: 2, flips: 2, differ: 8, k: 8 },
        Step::Insert { center: 1, flips: 1, id: 33, differ: Some(10) },
        Step::Insert { center: 1, flips: 4, id: 1, differ: None },
        Step::Insert { center: 3, flips: 3, id: 29, differ: Some(12) },
        Step::Check { center: 0, flips: 5, differ: 20, k: 4 },
        Step::Check { center: 3, flips: 4, differ: 19, k: 6 },
        Step::Insert { center: 0, flips: 10, id: 9, differ: Some(37) },
        Step::Check { center: 1, flips: 2, differ: 15, k: 6 },
        Step::Insert { center: 0, flips: 9, id: 33, differ: Some(17) },
        Step::Insert { center: 1, flips: 0, id: 20, differ: Some(30) },
        Step::Insert { center: 0, flips: 6, id: 7, differ: Some(18) },
        Step::Check { center: 1, flips: 3, differ: 26, k: 4 },
        Step::Check { center: 0, flips: 2, differ: 18, k: 7 },
    ];
    run_steps(&steps, 22, 6850915230483497677).unwrap();
}

/// `n` pairs around `centers` (sketches 0..40 bits from the center's), inserted and recorded.
fn insert_near(index: &Index, model: &mut Model, centers: &[(u64, Sketch)], ids: std::ops::Range<u64>, rng: &mut Rng) {
    for id in ids {
        let (c, cs) = centers[(rng.next() % centers.len() as u64) as usize];
        let flips = (rng.next() % 11) as u32;
        let fp = rng.flip(c, flips);
        let differ = (rng.next() % 40) as u32;
        let sk = near(&cs, differ, rng);
        index.insert_sketched(fp, id, &sk).unwrap();
        model.insert((fp, id), Some(sk));
    }
}

/// An index with an expiry window (issue 36): every segment has its band file and the
/// check is the band rule's; the settling merge merges within a time slice, never
/// two slices (the window drops whole segments: one holding both slices' pairs would drop
/// the newer slice's with the older's). Two segments of one slice (two flushes) settle into
/// one; the same writes without a window settle into one segment in all, so the rule is
/// what keeps the slices apart.
#[test]
fn an_expiring_index_has_band_files_and_settles_each_time_slice_alone() {
    use crate::engine_expiry::TestClock;
    use std::sync::Arc;
    const DAY: u64 = 86_400;
    const T0: u64 = 1_800_000_000;
    let segments = |storage: &MemStorage, dir: &str| {
        let names = storage.list(std::path::Path::new(dir)).unwrap();
        let sdx: Vec<String> = names.iter().filter(|n| n.ends_with(".sdx")).cloned().collect();
        let sdb: Vec<String> = names.iter().filter(|n| n.ends_with(".sdb")).cloned().collect();
        assert_eq!(sdb, sdx.iter().map(|n| n.replace(".sdx", ".sdb")).collect::<Vec<_>>(), "a band file per segment");
        sdx.len()
    };
    for window in [Some("8d"), None] {
        let storage = MemStorage::default();
        let clock = Arc::new(TestClock::default());
        clock.set(T0);
        let mut o = options(&storage, 100_000).with_expiry(window.map(|w| simdex::Expiry::parse(w).unwrap())).with_clock(clock.clone());
        o.compaction.automatic = false;
        let mut rng = Rng(39);
        let centers: Vec<(u64, Sketch)> = (0..20).map(|_| (rng.next(), random_sketch(&mut rng))).collect();
        let mut model = Model::new();
        let index = Index::open("x", o.clone()).unwrap();
        // the older slice: one segment; five days later the newer slice: two
        insert_near(&index, &mut model, &centers, 0..3000, &mut rng);
        index.flush().unwrap();
        let older: Vec<(u64, u64)> = model.keys().copied().collect();
        clock.set(T0 + 5 * DAY);
        insert_near(&index, &mut model, &centers, 3000..6000, &mut rng);
        index.flush().unwrap();
        insert_near(&index, &mut model, &centers, 6000..6300, &mut rng);
        index.flush().unwrap();
        assert_eq!(segments(&storage, "x"), 3);
        drop(index);
        // the settling merge runs in the maintenance of an index that compacts automatically
        o.compaction.automatic = true;
        let index = Index::open("x", o.clone()).unwrap();
        index.compact_tiered().unwrap();
        index.close().unwrap();
        let index = Index::open("x", o.clone()).unwrap();
        if window.is_none() {
            assert_eq!(segments(&storage, "x"), 1, "without a window the live set settles into one segment");
            continue;
        }
        assert_eq!(segments(&storage, "x"), 2, "one segment per time slice");
        let queries: Vec<(u64, Sketch)> = centers.iter().enumerate().map(|(n, &(c, cs))| (rng.flip(c, (n % 4) as u32), near(&cs, (n % 16) as u32, &mut rng))).collect();
        for (q, qs) in &queries {
            check(&index, &model, *q, qs, &ConfirmOptions::within(8), Some(&band_files_alone)).unwrap();
        }
        // the older slice expires (9.5 days: past the window and its granularity), the
        // newer one (4.5 days) is all there
        clock.set(T0 + 9 * DAY + DAY / 2);
        for pair in &older {
            model.remove(pair);
        }
        for (q, qs) in &queries {
            check(&index, &model, *q, qs, &ConfirmOptions::within(8), Some(&band_files_alone)).unwrap();
        }
        index.close().unwrap();
        assert_eq!(segments(&storage, "x"), 1, "the expired slice's segment and band file dropped whole");
    }
}
