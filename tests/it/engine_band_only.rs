//! Sketched segments without the check's table probe (issue 45, item 3): an index with
//! sketches plans its segments with fewer tables (4 at k = 3 up to 2^29 entries; one
//! full-scan table below 2^13), and the crawler's check asks a segment whose band file
//! holds every entry only through that band file. Oracles: brute force over the live pairs
//! for plain queries (exact at every k, whatever the design), and the band rule written out
//! by pair place (`engine_bands::oracle`, band sharing computed from the sketches' bytes):
//! a sketched pair in such a segment is found only when it shares a band with the query's;
//! in the memtable, in a segment holding pairs without a sketch, or in one whose band file
//! failed a page's checksum, the tables find it as well.

use std::collections::BTreeMap;

use simdex::storage::{MemStorage, Storage};
use simdex::{ConfirmOptions, Index, IndexOptions, Match, QueryOptions};

use crate::common::Rng;
use crate::engine_bands::{column, key, near, oracle, random_sketch, Model, Sketch};

pub(crate) fn options(storage: &MemStorage) -> IndexOptions {
    let mut o = crate::engine::mem_options(storage, 1_000_000).with_sketches(Some(column()));
    o.compaction.automatic = false;
    o
}

/// `base` with one bit flipped in each of its 16 bands: estimated resemblance
/// 1 - 2 * 16 / 512 = 0.9375, yet no band in common with `base`.
fn one_bit_a_band(base: &Sketch, rng: &mut Rng) -> Sketch {
    let mut s = *base;
    for band in 0..16 {
        let bit = band * 32 + (rng.next() % 32) as usize;
        s[bit / 8] ^= 1 << (bit % 8);
    }
    s
}

/// Where a pair was stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// The first segment: every pair with a sketch (its band file holds every entry).
    Whole,
    /// The second segment: some pairs without a sketch.
    Mixed,
    /// The memtable (a third segment, every pair with a sketch, once flushed).
    Memtable,
}

impl Place {
    /// The Hamming distance within which the check asks a pair stored here (`None`: by
    /// its sketch alone, as a memtable's pairs are): a whole band file's segment is asked
    /// at `o.k`, a mixed one at the tables' k.
    pub(crate) fn asked_k(self, o: &ConfirmOptions, index_k: u32) -> Option<u32> {
        match self {
            Place::Whole => Some(o.k),
            Place::Mixed => Some(o.unsketched_k.max(o.k.min(index_k))),
            Place::Memtable => None,
        }
    }
}

pub(crate) struct Fixture {
    pub(crate) index: Index,
    pub(crate) model: Model,
    pub(crate) places: BTreeMap<(u64, u64), Place>,
    pub(crate) centers: Vec<(u64, Sketch)>,
}

/// Pairs near 24 centers (fingerprints 0..12 bits away; sketches 0..40 bits away, or one
/// bit in every band) and unrelated ones, in a segment of sketched pairs, a segment with
/// some pairs stored without a sketch and the memtable.
pub(crate) fn fixture(storage: &MemStorage) -> Fixture {
    let index = Index::open("p", options(storage)).unwrap();
    let mut rng = Rng(45);
    let centers: Vec<(u64, Sketch)> = (0..24).map(|_| (rng.next(), random_sketch(&mut rng))).collect();
    let (mut model, mut places) = (Model::new(), BTreeMap::new());
    let mut id = 0u64;
    for (place, per_center, unrelated) in [(Place::Whole, 40, 9000), (Place::Mixed, 20, 1000), (Place::Memtable, 10, 200)] {
        for n in 0..per_center {
            for &(c, cs) in &centers {
                let flips = (rng.next() % 13) as u32;
                let fp = rng.flip(c, flips);
                let differ = (rng.next() % 41) as u32;
                let sketch = if n % 5 == 0 { Some(one_bit_a_band(&cs, &mut rng)) } else { Some(near(&cs, differ, &mut rng)) };
                let sketch = sketch.filter(|_| !(place == Place::Mixed && n % 4 == 1));
                match sketch {
                    Some(s) => index.insert_sketched(fp, id, &s).unwrap(),
                    None => index.insert(fp, id).unwrap(),
                };
                model.insert((fp, id), sketch);
                places.insert((fp, id), place);
                id += 1;
            }
        }
        for _ in 0..unrelated {
            let (fp, s) = (rng.next(), random_sketch(&mut rng));
            index.insert_sketched(fp, id, &s).unwrap();
            model.insert((fp, id), Some(s));
            places.insert((fp, id), place);
            id += 1;
        }
        if place != Place::Memtable {
            index.flush().unwrap();
        }
    }
    Fixture { index, model, places, centers }
}

/// Queries near every center: its sketch itself, and one 10 bits from it.
pub(crate) fn queries(centers: &[(u64, Sketch)]) -> Vec<(u64, Sketch)> {
    let mut rng = Rng(7);
    centers.iter().enumerate().flat_map(|(n, &(c, cs))| [(rng.flip(c, (n % 3) as u32), cs), (rng.flip(c, (n % 4) as u32), near(&cs, 10, &mut rng))]).collect()
}

pub(crate) fn sorted(mut v: Vec<Match>) -> Vec<Match> {
    v.sort_by_key(key);
    v
}

pub(crate) const CHECKS: [fn() -> ConfirmOptions; 6] = [
    || ConfirmOptions::within(8),
    || ConfirmOptions::within(3),
    || ConfirmOptions::within(5).with_band_candidates(false),
    || ConfirmOptions::within(8).with_min_similarity(0.95),
    || ConfirmOptions::within(8).with_min_similarity(0.8),
    || ConfirmOptions::within(0),
];

/// Segments of sketched indexes are planned with the sketched bound; every plain query at
/// k <= 3 (the design's, exact by pigeonhole) and beyond (multi-probe) equals brute force.
#[test]
fn sketched_segments_are_planned_with_fewer_tables_and_plain_queries_stay_exact() {
    let storage = MemStorage::default();
    let f = fixture(&storage);
    let tables: Vec<(u64, usize)> = f.index.stats().segments.iter().map(|s| (s.entries, s.tables)).collect();
    // 9,960 pairs: 4 tables (16-bit prefixes) under either bound; 1,480: one full-scan
    // table under 2^13 candidates, 4 under the default 2^8
    assert_eq!(tables, vec![(9960, 4), (1480, 1)]);
    let plain = MemStorage::default();
    let unsketched = Index::open("u", crate::engine::mem_options(&plain, 1_000_000)).unwrap();
    for (n, (&(fp, id), _)) in f.model.iter().enumerate() {
        unsketched.insert(fp, id).unwrap();
        if n == 9959 || n == 9960 + 1479 {
            unsketched.flush().unwrap();
        }
    }
    let tables: Vec<usize> = unsketched.stats().segments.iter().map(|s| s.tables).collect();
    assert_eq!(tables, vec![4, 4], "without sketches, the default bound");
    let mut rng = Rng(3);
    for (q, _) in queries(&f.centers) {
        for k in [0, 1, 2, 3, 5, 8] {
            let got = f.index.query(q, &QueryOptions::within(k)).unwrap();
            let mut want: Vec<(u32, u64, Option<u64>)> =
                f.model.keys().filter(|&&(fp, _)| (fp ^ q).count_ones() <= k).map(|&(fp, id)| ((fp ^ q).count_ones(), fp, Some(id))).collect();
            want.sort_unstable();
            let got: Vec<(u32, u64, Option<u64>)> = sorted(got).iter().map(key).collect();
            assert_eq!(got, want, "k = {k}, query {q:016x}");
        }
        // and a random query far from everything
        let r = rng.next();
        assert!(f.index.query(r, &QueryOptions::within(3)).unwrap().iter().all(|m| (m.fingerprint ^ r).count_ones() <= 3));
    }
}

/// The check equals the band rule by brute force, pair place by pair place; a sketched pair
/// within k = 3 sharing no band is missed in the first segment only (and `exhaustive` finds
/// it); a damaged band file sends its segment's check to the tables (every pair within k).
#[test]
fn the_check_asks_a_whole_segment_only_its_band_file() {
    let storage = MemStorage::default();
    let f = fixture(&storage);
    let mut missed_by_rule = 0;
    for (q, qs) in queries(&f.centers) {
        for o in CHECKS.map(|o| o()) {
            let table_k = o.unsketched_k.max(o.k.min(f.index.k()));
            let asked = |p: &(u64, u64)| (f.places[p] != Place::Whole).then_some(table_k);
            let got = sorted(f.index.query_confirmed(q, &qs, &o).unwrap());
            assert_eq!(got, oracle(&f.model, q, &qs, &o, Some(&asked)), "{o:?}, query {q:016x}");
            let all = sorted(f.index.query_confirmed(q, &qs, &o.with_exhaustive(true)).unwrap());
            assert_eq!(all, oracle(&f.model, q, &qs, &o, None), "exhaustive, {o:?}, query {q:016x}");
            missed_by_rule += all.iter().filter(|m| m.distance <= 3 && !got.contains(m)).count();
            for m in all.iter().filter(|m| m.distance <= 3 && !got.contains(m)) {
                let pair = (m.fingerprint, m.doc_id.unwrap());
                assert_eq!(f.places[&pair], Place::Whole, "{m:?}: only the whole segment's pairs are left to the band file");
            }
        }
    }
    assert!(missed_by_rule > 10, "the fixture plants pairs within 3 bits sharing no band: {missed_by_rule}");
    // the memtable flushed: a third segment of sketched pairs, its band file alone answers
    let first = f.index.stats().segments[0].name.replace(".sdx", ".sdb");
    f.index.flush().unwrap();
    f.index.close().unwrap();
    let names = storage.list(std::path::Path::new("p")).unwrap();
    assert_eq!(names.iter().filter(|n| n.ends_with(".sdb")).count(), 3);
    // every page of the first segment's band file damaged (the head kept)
    let path = std::path::Path::new("p").join(first);
    crate::common::damage_band_pages(&storage, &path);
    let index = Index::open_read_only("p", options(&storage)).unwrap();
    for (q, qs) in queries(&f.centers) {
        for o in CHECKS.map(|o| o()) {
            let asked = |p: &(u64, u64)| f.places[p].asked_k(&o, index.k());
            let got = sorted(index.query_confirmed(q, &qs, &o).unwrap());
            assert_eq!(got, oracle(&f.model, q, &qs, &o, Some(&asked)), "damaged band file, {o:?}, query {q:016x}");
        }
    }
    assert_eq!(index.stats().band_fallbacks, 1, "one fault, then the file is set aside");
}
