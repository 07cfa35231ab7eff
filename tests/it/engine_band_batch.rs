//! The crawler's check of a batch of documents in batch mode (`query_confirmed_many`: the
//! band lookups of the whole batch in key order, then the candidates' sketches in ordinal
//! order; issue 48 item 4, `simdex.spark dedup --index`). Oracles: the check of one
//! document at a time (`Index::query_confirmed`, the same answers in the same order) and
//! the band rule by brute force (`engine_bands::oracle`), pair place by pair place (a
//! segment whose band file holds every entry, one with pairs stored without a sketch, the
//! memtable), on batches of planted near-duplicates, repeated documents, unrelated ones and
//! documents without a sketch, with every check's options; then with a band file whose
//! pages all fail their checksums (its segment's check goes to the tables, as one at a
//! time).

use simdex::storage::MemStorage;
use simdex::{query_confirmed_many, ConfirmOptions, Index, Match};

use crate::common::Rng;
use crate::engine_band_only::{fixture, options, queries, sorted, Place, CHECKS};
use crate::engine_bands::{oracle, random_sketch, Model, Sketch};

/// A batch of `n` documents: the planted queries near every center (each several times),
/// ones sharing a single band with a center, unrelated ones and some without a sketch (all
/// zero), shuffled.
fn batch(centers: &[(u64, Sketch)], n: usize, seed: u64) -> Vec<(u64, Sketch)> {
    let mut rng = Rng(seed);
    let planted = queries(centers);
    let mut items: Vec<(u64, Sketch)> = (0..n)
        .map(|i| match i % 4 {
            0 => planted[(rng.next() % planted.len() as u64) as usize],
            1 => {
                let (c, cs) = centers[i / 4 % centers.len()];
                (rng.flip(c, (i % 3) as u32), only_band(&cs, i / 4 % 16))
            }
            2 => (rng.next(), random_sketch(&mut rng)),
            _ if i % 8 == 3 => (planted[i % planted.len()].0, [0u8; 64]),
            _ => (rng.flip(planted[i % planted.len()].0, 2), random_sketch(&mut rng)),
        })
        .collect();
    for i in (1..items.len()).rev() {
        items.swap(i, (rng.next() % (i as u64 + 1)) as usize);
    }
    items
}

/// `base` with the top bit of every band but `band` flipped (estimated resemblance 0.94):
/// it shares only that band with `base` and its copies stored unchanged there, and its other
/// bands fall in other buckets than theirs (so only that band's lookup finds them).
fn only_band(base: &Sketch, band: usize) -> Sketch {
    let mut s = *base;
    for b in (0..16).filter(|&b| b != band) {
        s[b * 4 + 3] ^= 0x80;
    }
    s
}

/// Every item's batch answer equals its check alone (same matches, same order) and the
/// brute-force rule `want` gives.
fn check_batch(index: &Index, items: &[(u64, Sketch)], o: &ConfirmOptions, want: impl Fn(u64, &Sketch) -> Vec<Match>) {
    let fps: Vec<u64> = items.iter().map(|&(fp, _)| fp).collect();
    let sketches: Vec<u8> = items.iter().flat_map(|(_, s)| s.iter().copied()).collect();
    let got = query_confirmed_many(index, &fps, &sketches, o).unwrap();
    assert_eq!(got.len(), items.len());
    for ((q, qs), found) in items.iter().zip(got.items()) {
        let alone = index.query_confirmed(*q, qs, o).unwrap();
        assert_eq!(found, alone.as_slice(), "{o:?}, query {q:016x}: the batch's answer is the single check's");
        assert_eq!(sorted(found.to_vec()), want(*q, qs), "{o:?}, query {q:016x}: brute force");
    }
}

/// A document without a sketch (all zero) confirms nothing: every live pair within
/// `o.unsketched_k`, wherever it is stored, as a pair stored without a sketch.
fn no_sketch(model: &Model, q: u64, o: &ConfirmOptions) -> Vec<Match> {
    let mut want: Vec<Match> = model
        .keys()
        .map(|&(fp, id)| Match { distance: (fp ^ q).count_ones(), fingerprint: fp, doc_id: Some(id), similarity: None })
        .filter(|m| m.distance <= o.unsketched_k)
        .collect();
    want.sort_by_key(crate::engine_bands::key);
    want
}

#[test]
fn a_batch_checked_in_batch_mode_answers_as_one_check_at_a_time_and_brute_force() {
    let storage = MemStorage::default();
    let f = fixture(&storage);
    let mut planted = 0;
    for (n, seed) in [(300, 1), (700, 2)] {
        let items = batch(&f.centers, n, seed);
        for o in CHECKS.map(|o| o()) {
            let table_k = o.unsketched_k.max(o.k.min(f.index.k()));
            let asked = |p: &(u64, u64)| (f.places[p] != Place::Whole).then_some(table_k);
            check_batch(&f.index, &items, &o, |q, qs| if qs.iter().all(|&b| b == 0) { no_sketch(&f.model, q, &o) } else { oracle(&f.model, q, qs, &o, Some(&asked)) });
            check_batch(
                &f.index,
                &items,
                &o.with_exhaustive(true),
                |q, qs| if qs.iter().all(|&b| b == 0) { no_sketch(&f.model, q, &o) } else { oracle(&f.model, q, qs, &o, None) },
            );
        }
        let fps: Vec<u64> = items.iter().map(|&(fp, _)| fp).collect();
        let sketches: Vec<u8> = items.iter().flat_map(|(_, s)| s.iter().copied()).collect();
        planted += query_confirmed_many(&f.index, &fps, &sketches, &ConfirmOptions::within(8)).unwrap().matches();
    }
    assert!(planted > 1000, "the batches hold planted near-duplicates: {planted} matches");
    // every page of the first segment's band file damaged: its check goes to the tables
    let first = f.index.stats().segments[0].name.replace(".sdx", ".sdb");
    f.index.flush().unwrap();
    f.index.close().unwrap();
    let path = std::path::Path::new("p").join(first);
    crate::common::damage_band_pages(&storage, &path);
    let index = Index::open_read_only("p", options(&storage)).unwrap();
    let items = batch(&f.centers, 400, 3);
    for o in CHECKS.map(|o| o()) {
        let asked = |p: &(u64, u64)| f.places[p].asked_k(&o, index.k());
        check_batch(&index, &items, &o, |q, qs| if qs.iter().all(|&b| b == 0) { no_sketch(&f.model, q, &o) } else { oracle(&f.model, q, qs, &o, Some(&asked)) });
    }
    assert_eq!(index.stats().band_fallbacks, 1, "one fault, then the file is set aside");
}
