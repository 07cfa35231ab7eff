//! What `simdex tune` measures: the exact ground truth, every pair that matters with its
//! distance and estimated resemblance, the counts behind precision, recall and F1 of each
//! setting, and a bootstrap over those pairs for how uncertain the figures are.
//!
//! Ground truth, independent of fingerprints: a pair is a near-duplicate when the exact
//! Jaccard similarity of the two documents' word 3-shingle sets (the sketch's tokens and
//! shingles, `simdex_fingerprint::sketch`) is at least `--threshold`. Candidate pairs come
//! from MinHash LSH (20 bands of 5 rows: a pair at Jaccard 0.9 is missed with probability
//! below 1e-7, at 0.7 below 1e-3), and every candidate's Jaccard is computed exactly.

use simdex_fingerprint::sketch::{jaccard, Sketch, SketchOptions, Sketcher};
use std::collections::HashMap;

/// Largest k measured: the largest an index answers (`simdex::plan::MAX_K`), so that every
/// setting tune shows can be used.
pub const K_MAX: u32 = simdex::plan::MAX_K;
/// Distances tallied: `0..=K_MAX`, and one slot for "further than K_MAX".
const SLOTS: usize = K_MAX as usize + 2;
/// Confirmation thresholds tried, in hundredths: 0.70, 0.71, .., 0.99.
pub const THRESHOLDS: std::ops::Range<u32> = 70..100;
/// Bootstrap resamples behind every interval.
pub const RESAMPLES: usize = 1000;

/// A way to call pairs near-duplicates: within `k` bits, and, when `confirm` is set, with a
/// sketch-estimated resemblance of at least `confirm` hundredths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setting {
    pub k: u32,
    pub confirm: Option<u32>,
}

impl Setting {
    /// The confirmation threshold as a fraction.
    pub fn threshold(&self) -> Option<f64> {
        self.confirm.map(|t| f64::from(t) / 100.0)
    }
}

/// Precision, recall and F1 of one setting.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Score {
    pub reported: u64,
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
}

impl Score {
    fn new(reported: u64, tp: u64, true_pairs: u64) -> Self {
        let precision = if reported == 0 { 1.0 } else { tp as f64 / reported as f64 };
        let recall = if true_pairs == 0 { 0.0 } else { tp as f64 / true_pairs as f64 };
        let f1 = if precision + recall == 0.0 { 0.0 } else { 2.0 * precision * recall / (precision + recall) };
        Score { reported, precision, recall, f1 }
    }
}

/// A pair of sampled documents that is a true near-duplicate or within `K_MAX` bits (the
/// others count in no figure): its distance (`K_MAX + 1` for any further), whether it is
/// true, and how many of the `THRESHOLDS` its estimated resemblance reaches.
#[derive(Clone, Copy, Debug)]
pub struct Pair {
    distance: u8,
    truth: bool,
    passes: u8,
}

/// The true near-duplicate pairs `(i, j)`, `i < j`, sorted: MinHash-LSH candidates whose
/// exact Jaccard is at least `threshold`.
pub fn ground_truth(sets: &[&[u64]], threshold: f64) -> anyhow::Result<Vec<(u32, u32)>> {
    const BANDS: usize = 20;
    const ROWS: usize = 5;
    let lsh = Sketcher::new(SketchOptions::new((BANDS * ROWS) as u32, 4))?;
    let mut buckets: HashMap<(usize, u64), Vec<u32>> = HashMap::new();
    for (i, set) in sets.iter().enumerate() {
        let sig = lsh.min_shingles(set);
        for (band, rows) in sig.chunks(ROWS).enumerate() {
            let key = rows.iter().fold(band as u64, |acc, &v| simdex_fingerprint::hash::combine(acc, v));
            buckets.entry((band, key)).or_default().push(i as u32);
        }
    }
    let mut candidates: Vec<(u32, u32)> = Vec::new();
    for members in buckets.values() {
        for (x, &a) in members.iter().enumerate() {
            candidates.extend(members[x + 1..].iter().map(|&b| (a.min(b), a.max(b))));
        }
    }
    candidates.sort_unstable();
    candidates.dedup();
    candidates.retain(|&(a, b)| jaccard(sets[a as usize], sets[b as usize]) >= threshold);
    Ok(candidates)
}

/// Every pair that counts in a figure: all pairs of documents are compared (a popcount
/// each); those within `K_MAX` or in `truth` are kept.
pub fn pairs(fps: &[u64], sketches: &[&Sketch], truth: &[(u32, u32)]) -> anyhow::Result<Vec<Pair>> {
    let mut out = Vec::new();
    for i in 0..fps.len() {
        for j in i + 1..fps.len() {
            let d = (fps[i] ^ fps[j]).count_ones();
            let truth = truth.binary_search(&(i as u32, j as u32)).is_ok();
            if d > K_MAX && !truth {
                continue;
            }
            let est = sketches[i].similarity(sketches[j])?;
            let passes = THRESHOLDS.filter(|&t| est >= f64::from(t) / 100.0).count() as u8;
            out.push(Pair { distance: d.min(K_MAX + 1) as u8, truth, passes });
        }
    }
    Ok(out)
}

/// Counts by distance, overall and by how many thresholds the pair passes.
#[derive(Clone, Debug)]
pub struct Tally {
    true_pairs: u64,
    /// `reported[d]`, `tp[d]`: pairs at distance `d`, and the true ones.
    reported: [u64; SLOTS],
    tp: [u64; SLOTS],
    /// `confirmed_reported[x][d]`: pairs at distance `d` passing threshold `x` (an index
    /// into `THRESHOLDS`), and the true ones.
    confirmed_reported: Vec<[u64; SLOTS]>,
    confirmed_tp: Vec<[u64; SLOTS]>,
}

impl Tally {
    /// The counts of `pairs`.
    pub fn of<'a>(pairs: impl IntoIterator<Item = &'a Pair>) -> Self {
        let levels = THRESHOLDS.len() + 1;
        let mut by_passes_reported = vec![[0u64; SLOTS]; levels];
        let mut by_passes_tp = vec![[0u64; SLOTS]; levels];
        let mut tally = Tally { true_pairs: 0, reported: [0; SLOTS], tp: [0; SLOTS], confirmed_reported: Vec::new(), confirmed_tp: Vec::new() };
        for p in pairs {
            let (d, truth) = (usize::from(p.distance), u64::from(p.truth));
            tally.true_pairs += truth;
            tally.reported[d] += 1;
            tally.tp[d] += truth;
            by_passes_reported[usize::from(p.passes)][d] += 1;
            by_passes_tp[usize::from(p.passes)][d] += truth;
        }
        // A pair passing `passes` thresholds passes every threshold x < passes.
        let suffix = |by: &[[u64; SLOTS]]| {
            let mut acc = [0u64; SLOTS];
            let mut out = vec![[0u64; SLOTS]; levels - 1];
            for x in (0..levels - 1).rev() {
                for d in 0..SLOTS {
                    acc[d] += by[x + 1][d];
                }
                out[x] = acc;
            }
            out
        };
        tally.confirmed_reported = suffix(&by_passes_reported);
        tally.confirmed_tp = suffix(&by_passes_tp);
        tally
    }

    /// True near-duplicate pairs.
    pub fn true_pairs(&self) -> u64 {
        self.true_pairs
    }

    /// Precision, recall and F1 of `setting` (a threshold outside `THRESHOLDS` counts nothing).
    pub fn score(&self, setting: Setting) -> Score {
        let upto = (setting.k.min(K_MAX) as usize) + 1;
        let (reported, tp) = match setting.confirm {
            None => (&self.reported, &self.tp),
            Some(t) => {
                let x = t.checked_sub(THRESHOLDS.start).map(|x| x as usize);
                match x.and_then(|x| Some((self.confirmed_reported.get(x)?, self.confirmed_tp.get(x)?))) {
                    Some(counts) => counts,
                    None => return Score::new(0, 0, self.true_pairs),
                }
            }
        };
        Score::new(reported[..upto].iter().sum(), tp[..upto].iter().sum(), self.true_pairs)
    }
}

/// The 95% interval of a figure: the 2.5th and 97.5th percentiles over the resamples.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
}

/// Intervals of one setting's precision, recall and F1.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Intervals {
    pub precision: Interval,
    pub recall: Interval,
    pub f1: Interval,
}

/// The percentile bootstrap over `pairs`: `RESAMPLES` times, as many pairs as there are are
/// drawn with replacement (seeded: the same seed gives the same intervals), and each
/// setting's figures are recomputed. Pairs are resampled as independent, which they are not
/// quite (pairs share documents), so the intervals are a lower bound on the uncertainty.
pub fn bootstrap(pairs: &[Pair], settings: &[Setting], seed: u64) -> Vec<Intervals> {
    let mut figures: Vec<[Vec<f64>; 3]> = settings.iter().map(|_| Default::default()).collect();
    let mut state = seed;
    let mut draw = Vec::with_capacity(pairs.len());
    for _ in 0..RESAMPLES {
        draw.clear();
        draw.extend((0..pairs.len()).filter_map(|_| pairs.get(below(&mut state, pairs.len()))));
        let tally = Tally::of(draw.iter().copied());
        for (setting, figures) in settings.iter().zip(&mut figures) {
            let s = tally.score(*setting);
            figures[0].push(s.precision);
            figures[1].push(s.recall);
            figures[2].push(s.f1);
        }
    }
    figures.into_iter().map(|[mut p, mut r, mut f]| Intervals { precision: percentiles(&mut p), recall: percentiles(&mut r), f1: percentiles(&mut f) }).collect()
}

/// A number in `0..n` from a splitmix64 stream (Lemire's multiply-shift: bias below 2^-40
/// for any n a sample holds).
fn below(state: &mut u64, n: usize) -> usize {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    ((u128::from(z) * n as u128) >> 64) as usize
}

/// The 2.5th and 97.5th percentiles (nearest rank) of `values`.
fn percentiles(values: &mut [f64]) -> Interval {
    values.sort_by(f64::total_cmp);
    let at = |q: f64| values.get(((values.len().saturating_sub(1)) as f64 * q).round() as usize).copied().unwrap_or(0.0);
    Interval { low: at(0.025), high: at(0.975) }
}

#[cfg(test)]
impl Pair {
    /// A pair at `distance` (`K_MAX + 1` for further), true or not, of estimated resemblance `est`.
    pub fn of(distance: u8, truth: bool, est: f64) -> Pair {
        Pair { distance: distance.min(K_MAX as u8 + 1), truth, passes: THRESHOLDS.filter(|&t| est >= f64::from(t) / 100.0).count() as u8 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(distance: u8, truth: bool, est: f64) -> Pair {
        Pair::of(distance, truth, est)
    }

    /// Scores from the tally equal a direct count over the pairs.
    #[test]
    fn tally_scores_equal_a_direct_count() {
        let pairs: Vec<Pair> = (0..200u32).map(|i| pair((i % 11) as u8, i % 3 != 0, 0.6 + f64::from(i % 41) / 100.0)).collect();
        let tally = Tally::of(&pairs);
        for k in 0..=K_MAX {
            for confirm in [None, Some(70), Some(85), Some(99)] {
                let setting = Setting { k, confirm };
                let hit = |p: &&Pair| u32::from(p.distance) <= k && confirm.is_none_or(|t| u32::from(p.passes) > t - 70);
                let reported = pairs.iter().filter(hit).count() as u64;
                let tp = pairs.iter().filter(hit).filter(|p| p.truth).count() as u64;
                let n_true = pairs.iter().filter(|p| p.truth).count() as u64;
                assert_eq!(tally.score(setting), Score::new(reported, tp, n_true), "{setting:?}");
            }
        }
    }

    /// All pairs alike: every resample gives the same figures, so the interval is a point.
    #[test]
    fn bootstrap_of_identical_pairs_is_a_point_and_seeded() {
        let pairs = vec![pair(2, true, 0.95); 30];
        let s = [Setting { k: 3, confirm: None }];
        let i = bootstrap(&pairs, &s, 7);
        assert_eq!(i[0].f1, Interval { low: 1.0, high: 1.0 });
        let mixed: Vec<Pair> = (0..40).map(|i| pair(2, i % 4 != 0, 0.95)).collect();
        assert_eq!(bootstrap(&mixed, &s, 7), bootstrap(&mixed, &s, 7));
        let w = bootstrap(&mixed, &s, 7)[0].precision;
        assert!(w.low < 0.75 && w.high > 0.75 && w.high - w.low < 0.4, "{w:?}");
    }
}
