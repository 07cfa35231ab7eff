//! Tests: `tune`'s confirmed figures against the index's own check (`Index::query_confirmed`
//! on an index holding the sample, asked for every document) and against a brute-force count
//! of the check's rule written out here.

use super::measure::{self, DedupRule, IndexCheck, Pair, Setting, Tally, K_MAX};
use simdex_fingerprint::sketch::{jaccard, Sketch, SketchOptions, Sketcher};
use simdex_fingerprint::{FingerprintOptions, Fingerprinter};
use std::collections::BTreeSet;

/// `bases` documents of 150 random words and, for each of the first `copies`, a copy with
/// 1 to 9 words replaced: resemblances from about 0.75 to 0.98, fingerprint distances from 0
/// to well beyond 8.
fn documents(bases: usize, copies: usize) -> Vec<String> {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut word = || (0..5).map(|_| char::from(b'a' + (next() % 26) as u8)).collect::<String>();
    let mut docs: Vec<Vec<String>> = (0..bases).map(|_| (0..150).map(|_| word()).collect()).collect();
    for i in 0..copies {
        let mut copy = docs[i % bases].clone();
        for j in 0..=(i % 9) {
            copy[(7 + 37 * j + 11 * i) % 150] = word();
        }
        docs.push(copy);
    }
    docs.into_iter().map(|w| w.join(" ")).collect()
}

/// Fingerprints (default recipe, no IDF), sketches (default) and shingle sets.
fn measured(docs: &[String]) -> (Vec<u64>, Vec<Sketch>, Vec<Vec<u64>>) {
    let mut fp = Fingerprinter::new(FingerprintOptions::default()).unwrap();
    let mut sketcher = Sketcher::new(SketchOptions::default()).unwrap();
    let fps = docs.iter().map(|d| fp.fingerprint(d).unwrap().value).collect();
    let sets: Vec<Vec<u64>> = docs.iter().map(|d| sketcher.shingles(d).to_vec()).collect();
    let sketches = sets.iter().map(|s| sketcher.sketch_of_set(s)).collect();
    (fps, sketches, sets)
}

/// tune's counts of the sample.
fn tally(fps: &[u64], sketches: &[Sketch], sets: &[Vec<u64>]) -> Tally {
    let set_refs: Vec<&[u64]> = sets.iter().map(Vec::as_slice).collect();
    let near = measure::near_pairs(&set_refs, measure::NOISE_BANDS[0]).unwrap();
    let truth = measure::ground_truth(&near, 0.9);
    let sketch_refs: Vec<&Sketch> = sketches.iter().collect();
    let rule = DedupRule::new(0.9, SketchOptions::default());
    let pairs = measure::pairs(fps, &sketch_refs, &set_refs, &truth, rule, &IndexCheck::new(SketchOptions::default())).unwrap();
    Tally::of(&pairs)
}

/// The pairs `Index::query_confirmed` answers at `k` and `t` on an index of design `k`
/// holding every document (doc id = its number), asked for every document.
fn index_answers(fps: &[u64], sketches: &[Sketch], k: u32, t: u32) -> BTreeSet<(u32, u32)> {
    let dir = tempfile::tempdir().unwrap();
    let options = simdex::IndexOptions::default().with_k(k).with_sketches(Some(SketchOptions::default().column()));
    let index = simdex::Index::open(dir.path(), options).unwrap();
    let entries: Vec<simdex::Entry> = fps.iter().enumerate().map(|(i, &f)| simdex::Entry::new(f, i as u64)).collect();
    let bytes: Vec<u8> = sketches.iter().flat_map(|s| s.as_bytes().to_vec()).collect();
    index.insert_many_sketched(&entries, &bytes).unwrap();
    // a segment whose every pair has a sketch: what a crawl's index holds (its band file
    // alone answers the check)
    index.flush().unwrap();
    let check = simdex::ConfirmOptions::within(k).with_min_similarity(f64::from(t) / 100.0);
    let mut out = BTreeSet::new();
    for (i, (&f, s)) in fps.iter().zip(sketches).enumerate() {
        for m in index.query_confirmed(f, s.as_bytes(), &check).unwrap() {
            let j = m.doc_id.unwrap() as u32;
            if j != i as u32 {
                out.insert((j.min(i as u32), j.max(i as u32)));
            }
        }
    }
    index.close().unwrap();
    out
}

/// Whether two sketches share a band: one of their 32-bit words, at the same place.
fn share_band(a: &Sketch, b: &Sketch) -> bool {
    a.as_bytes().chunks(4).zip(b.as_bytes().chunks(4)).any(|(x, y)| x == y)
}

/// For every k and several thresholds, tune's confirmed figures are those of the pairs the
/// index's check answers (an index created at that k, as Python's `simdex.Index(path, k=K)`
/// and Scrapy's `SIMDEX_K` make it), scored against brute-force exact Jaccard; the sample
/// holds true pairs beyond k that share a band (so band candidates are what is tested).
#[test]
fn confirmed_figures_are_those_of_the_index_check() {
    let docs = documents(60, 90);
    let (fps, sketches, sets) = measured(&docs);
    let tally = tally(&fps, &sketches, &sets);
    let n = docs.len();
    let truth: BTreeSet<(u32, u32)> =
        (0..n).flat_map(|i| (i + 1..n).map(move |j| (i, j))).filter(|&(i, j)| jaccard(&sets[i], &sets[j]) >= 0.9).map(|(i, j)| (i as u32, j as u32)).collect();
    assert_eq!(tally.true_pairs(), truth.len() as u64);
    let beyond_3_banded = truth.iter().filter(|&&(i, j)| (fps[i as usize] ^ fps[j as usize]).count_ones() > 3 && share_band(&sketches[i as usize], &sketches[j as usize])).count();
    assert!(beyond_3_banded >= 5, "the sample needs true pairs beyond k = 3 in a band: {beyond_3_banded}");
    let mut answered_beyond_k = 0;
    for k in [0, 1, 3, 5, K_MAX] {
        for t in [85, 90, 91, 93] {
            let answers = index_answers(&fps, &sketches, k, t);
            answered_beyond_k += answers.iter().filter(|&&(i, j)| (fps[i as usize] ^ fps[j as usize]).count_ones() > k).count();
            let tp = answers.intersection(&truth).count() as u64;
            let want = measure::Score::new(answers.len() as u64, tp, truth.len() as u64);
            assert_eq!(tally.score(Setting { k, confirm: Some(t) }), want, "k = {k}, t = 0.{t}");
        }
    }
    assert!(answered_beyond_k > 0, "the check answered pairs beyond k");
}

/// The same figures counted directly: each pair by the rule the library documents, when
/// t >= 0.90 and the sketch is the default (512 one-bit values) sharing a band: within k at
/// t, beyond k (whatever the distance) at t + band_margin; otherwise within k at t and none
/// beyond k.
#[test]
fn confirmed_figures_equal_a_direct_count_of_the_rule() {
    let margin = simdex::ConfirmOptions::default().band_margin;
    for options in [SketchOptions::default(), SketchOptions::new(256, 2)] {
        let check = IndexCheck::new(options);
        let serves = options.hashes == 512 && options.bits == 1;
        let mut x = 7u64;
        let mut next = move |n: u64| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (x >> 33) % n
        };
        // estimates on the grid of a 512-value one-bit sketch (multiples of 1/256)
        let raw: Vec<(u8, bool, bool, f64)> = (0..4000).map(|_| (next(u64::from(K_MAX) + 6) as u8, next(3) > 0, next(2) > 0, (200 + next(57)) as f64 / 256.0)).collect();
        let pairs: Vec<Pair> = raw.iter().map(|&(d, truth, band, est)| Pair::of(d, truth, est).with_band(band, est, &check)).collect();
        let tally = Tally::of(&pairs);
        let n_true = raw.iter().filter(|p| p.1).count() as u64;
        for k in 0..=K_MAX {
            for t in measure::THRESHOLDS {
                let at = f64::from(t) / 100.0;
                let answered = |&&(d, _, band, est): &&(u8, bool, bool, f64)| {
                    if u32::from(d) <= k {
                        est >= at && (band || !(serves && t >= 90))
                    } else {
                        serves && t >= 90 && band && est >= at + margin
                    }
                };
                let reported = raw.iter().filter(answered).count() as u64;
                let tp = raw.iter().filter(answered).filter(|p| p.1).count() as u64;
                assert_eq!(tally.score(Setting { k, confirm: Some(t) }), measure::Score::new(reported, tp, n_true), "{options:?} k = {k} t = {t}");
            }
        }
        assert_eq!(check.beyond_k(90).is_some(), serves);
        assert_eq!(check.beyond_k(89), None, "the band files serve 0.90 and up");
    }
}
