//! What `simdex tune` measures: the exact ground truth, every pair that matters with its
//! distance and estimated resemblance, the counts behind precision, recall and F1 of each
//! setting, and a bootstrap over those pairs for how uncertain the figures are.
//!
//! The confirmed settings are the index's check as the library makes it on an index of
//! segments ([`simdex::ConfirmOptions`], asked through [`IndexCheck`]): a pair within `k`
//! bits is an answer at an estimate of at least `t`; where the band files serve `t` only
//! when its sketches share one of the 16 bands (the check asks a segment whose every pair
//! has a sketch only through its band file), and then beyond `k` too (band candidates) at
//! `t + band_margin`.
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
    pub fn new(reported: u64, tp: u64, true_pairs: u64) -> Self {
        let precision = if reported == 0 { 1.0 } else { tp as f64 / reported as f64 };
        let recall = if true_pairs == 0 { 0.0 } else { tp as f64 / true_pairs as f64 };
        let f1 = if precision + recall == 0.0 { 0.0 } else { 2.0 * precision * recall / (precision + recall) };
        Score { reported, precision, recall, f1 }
    }
}

/// A pair of sampled documents that is a true near-duplicate, within `K_MAX` bits or
/// sharing a sketch band (the others count in no figure): its distance (`K_MAX + 1` for any
/// further), whether it is true, and how many of the `THRESHOLDS` its estimated resemblance
/// reaches.
#[derive(Clone, Copy, Debug)]
pub struct Pair {
    distance: u8,
    truth: bool,
    /// The `THRESHOLDS` (bit `x` for `THRESHOLDS.start + x`) at which the index's check
    /// answers the pair when it lies within `k` ([`IndexCheck`]).
    within: u32,
    /// The `THRESHOLDS` (bit `x` for `THRESHOLDS.start + x`) at which the index's check
    /// answers the pair when it lies beyond `k` (a band candidate, [`IndexCheck`]).
    beyond: u32,
    /// Whether the two sketches share a band (a candidate of `dedup`'s whatever the distance).
    band: bool,
    /// Whether `dedup`'s rule keeps it: estimate at least the threshold, or, within the
    /// sketch's noise of it, exact Jaccard at least the threshold (the second look).
    dedup: bool,
}

/// How `dedup` decides a candidate by default: the threshold and the noise window around it
/// where the exact Jaccard decides (`simdex_fingerprint::corpus::noise_window`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DedupRule {
    pub threshold: f64,
    pub low: f64,
    pub high: f64,
}

impl DedupRule {
    /// `dedup`'s rule at `threshold` for sketches of `options`.
    pub fn new(threshold: f64, options: SketchOptions) -> Self {
        let (low, high) = simdex_fingerprint::corpus::noise_window(threshold, options);
        DedupRule { threshold, low, high }
    }

    fn keeps(&self, estimate: f64, exact: impl FnOnce() -> f64) -> bool {
        if estimate >= self.low && estimate < self.high {
            exact() >= self.threshold
        } else {
            estimate >= self.threshold
        }
    }
}

/// The index's confirmed check at each of the `THRESHOLDS`, as the library decides it
/// (`simdex::ConfirmOptions`, the defaults the document calls use, at resemblance `t`):
/// beyond `k`, the resemblance a band candidate needs, or none.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IndexCheck {
    beyond_k: [Option<f64>; THRESHOLDS.end as usize - THRESHOLDS.start as usize],
}

impl IndexCheck {
    /// The check of sketches of `options`.
    pub fn new(options: SketchOptions) -> Self {
        let mut beyond_k = [None; THRESHOLDS.end as usize - THRESHOLDS.start as usize];
        for (slot, t) in beyond_k.iter_mut().zip(THRESHOLDS) {
            *slot = simdex::ConfirmOptions::default().with_min_similarity(f64::from(t) / 100.0).beyond_k_similarity(options.hashes, options.bits);
        }
        IndexCheck { beyond_k }
    }

    /// The thresholds at which a pair estimated at `estimate` whose sketches share a band
    /// (`band`) or not is an answer within `k`, as a bit set over `THRESHOLDS`: at least the
    /// threshold, and, where the band files serve it, sharing a band.
    fn within(&self, band: bool, estimate: f64) -> u32 {
        THRESHOLDS.zip(&self.beyond_k).enumerate().filter(|(_, (t, at))| estimate >= f64::from(*t) / 100.0 && (band || at.is_none())).fold(0, |set, (x, _)| set | 1 << x)
    }

    /// The thresholds at which a pair estimated at `estimate` whose sketches share a band
    /// (`band`) is an answer beyond `k`, as a bit set over `THRESHOLDS`.
    fn beyond(&self, band: bool, estimate: f64) -> u32 {
        if !band {
            return 0;
        }
        self.beyond_k.iter().enumerate().filter(|(_, at)| at.is_some_and(|at| estimate >= at)).fold(0, |set, (x, _)| set | 1 << x)
    }

    /// The resemblance a band candidate beyond `k` needs at threshold `t` (hundredths).
    pub fn beyond_k(&self, t: u32) -> Option<f64> {
        self.beyond_k.get(t.checked_sub(THRESHOLDS.start)? as usize).copied().flatten()
    }
}

/// Candidate pairs `(i, j, Jaccard)`, `i < j`, sorted, whose exact Jaccard is at least
/// `floor`: MinHash-LSH candidates (the ground truth is those at the threshold or above;
/// those a little below it are where the sketch's noise shows).
pub fn near_pairs(sets: &[&[u64]], floor: f64) -> anyhow::Result<Vec<(u32, u32, f64)>> {
    const BANDS: usize = 20;
    const ROWS: usize = 5;
    // independent hash functions (recipe 1): bands of them miss a pair with the probability
    // above, which one-permutation hashing's correlated slots would not guarantee
    let lsh = Sketcher::new(SketchOptions::new((BANDS * ROWS) as u32, 4).with_version(1))?;
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
    Ok(candidates.into_iter().map(|(a, b)| (a, b, jaccard(sets[a as usize], sets[b as usize]))).filter(|p| p.2 >= floor).collect())
}

/// The true near-duplicate pairs among `near` (Jaccard at least `threshold`), sorted.
pub fn ground_truth(near: &[(u32, u32, f64)], threshold: f64) -> Vec<(u32, u32)> {
    near.iter().filter(|p| p.2 >= threshold).map(|p| (p.0, p.1)).collect()
}

/// Bands of exact Jaccard the noise is reported by (lower bounds; the last is "identical").
pub const NOISE_BANDS: [f64; 9] = [0.80, 0.85, 0.88, 0.90, 0.92, 0.94, 0.97, 1.0, f64::INFINITY];

/// How the sketch's estimate strays from the exact Jaccard in one band of Jaccard: pairs,
/// bias (mean of estimate minus exact), standard deviation of that difference, and how many
/// pairs the estimate puts on the other side of the threshold.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Noise {
    pub low: f64,
    pub high: f64,
    pub pairs: u64,
    pub bias: f64,
    pub sd: f64,
    /// Pairs at or above the threshold estimated below it, and pairs below it estimated at
    /// or above it.
    pub wrong_side: u64,
}

/// The noise of `estimate` against the exact Jaccard of every pair of `near`, by band of
/// Jaccard ([`NOISE_BANDS`]), with `threshold` for the wrong-side count.
pub fn noise(near: &[(u32, u32, f64)], threshold: f64, mut estimate: impl FnMut(u32, u32) -> anyhow::Result<f64>) -> anyhow::Result<Vec<Noise>> {
    let mut sums = vec![(0u64, 0.0f64, 0.0f64, 0u64); NOISE_BANDS.len() - 1];
    for &(a, b, exact) in near {
        let Some(band) = NOISE_BANDS.windows(2).position(|w| exact >= w[0] && exact < w[1]) else { continue };
        let est = estimate(a, b)?;
        let d = est - exact;
        let s = &mut sums[band];
        s.0 += 1;
        s.1 += d;
        s.2 += d * d;
        s.3 += u64::from((exact >= threshold) != (est >= threshold));
    }
    Ok(sums
        .iter()
        .zip(NOISE_BANDS.windows(2))
        .map(|(&(n, sum, sq, wrong_side), w)| {
            let mean = if n == 0 { 0.0 } else { sum / n as f64 };
            let sd = if n < 2 { 0.0 } else { ((sq - n as f64 * mean * mean) / (n - 1) as f64).max(0.0).sqrt() };
            Noise { low: w[0], high: w[1], pairs: n, bias: mean, sd, wrong_side }
        })
        .collect())
}

/// Whether two sketches agree on a whole 32-bit word (a band of `dedup` and the index's
/// band files).
fn share_band(a: &Sketch, b: &Sketch) -> bool {
    a.as_bytes().chunks_exact(4).zip(b.as_bytes().chunks_exact(4)).any(|(x, y)| x == y)
}

/// Every pair that counts in a figure: all pairs of documents are compared (a popcount
/// each); those within `K_MAX`, sharing a sketch band or in `truth` are kept.
pub fn pairs(fps: &[u64], sketches: &[&Sketch], sets: &[&[u64]], truth: &[(u32, u32)], rule: DedupRule, check: &IndexCheck) -> anyhow::Result<Vec<Pair>> {
    let mut out = Vec::new();
    for i in 0..fps.len() {
        for j in i + 1..fps.len() {
            let d = (fps[i] ^ fps[j]).count_ones();
            let truth = truth.binary_search(&(i as u32, j as u32)).is_ok();
            let band = share_band(sketches[i], sketches[j]);
            if d > K_MAX && !truth && !band {
                continue;
            }
            let est = sketches[i].similarity(sketches[j])?;
            let dedup = rule.keeps(est, || jaccard(sets[i], sets[j]));
            out.push(Pair { distance: d.min(K_MAX + 1) as u8, truth, within: check.within(band, est), beyond: check.beyond(band, est), band, dedup });
        }
    }
    Ok(out)
}

/// Counts by distance, overall and by the thresholds at which the check answers the pair.
#[derive(Clone, Debug)]
pub struct Tally {
    true_pairs: u64,
    /// `reported[d]`, `tp[d]`: pairs at distance `d`, and the true ones.
    reported: [u64; SLOTS],
    tp: [u64; SLOTS],
    /// `confirmed_reported[x][d]`: pairs at distance `d` the check answers within `k` at
    /// threshold `x` (an index into `THRESHOLDS`), and the true ones.
    confirmed_reported: Vec<[u64; SLOTS]>,
    confirmed_tp: Vec<[u64; SLOTS]>,
    /// `beyond_reported[x][d]`: pairs at distance `d` the check answers beyond `k` at
    /// threshold `x` (band candidates), and the true ones.
    beyond_reported: Vec<[u64; SLOTS]>,
    beyond_tp: Vec<[u64; SLOTS]>,
    /// `dedup`'s rule: kept pairs at distance `d` (`kept`), the true ones (`kept_tp`), and
    /// the same of those sharing a sketch band (candidates beyond k).
    kept: [u64; SLOTS],
    kept_tp: [u64; SLOTS],
    kept_band: [u64; SLOTS],
    kept_band_tp: [u64; SLOTS],
    /// True pairs at distance `d`, and those of them sharing a band.
    true_at: [u64; SLOTS],
    true_band_at: [u64; SLOTS],
}

impl Tally {
    /// The counts of `pairs`.
    pub fn of<'a>(pairs: impl IntoIterator<Item = &'a Pair>) -> Self {
        let z = [0u64; SLOTS];
        let mut tally = Tally {
            true_pairs: 0,
            reported: z,
            tp: z,
            confirmed_reported: vec![z; THRESHOLDS.len()],
            confirmed_tp: vec![z; THRESHOLDS.len()],
            beyond_reported: vec![z; THRESHOLDS.len()],
            beyond_tp: vec![z; THRESHOLDS.len()],
            kept: z,
            kept_tp: z,
            kept_band: z,
            kept_band_tp: z,
            true_at: z,
            true_band_at: z,
        };
        for p in pairs {
            let (d, truth) = (usize::from(p.distance), u64::from(p.truth));
            tally.true_pairs += truth;
            tally.true_at[d] += truth;
            tally.true_band_at[d] += truth * u64::from(p.band);
            let (kept, band) = (u64::from(p.dedup), u64::from(p.dedup && p.band));
            tally.kept[d] += kept;
            tally.kept_tp[d] += kept * truth;
            tally.kept_band[d] += band;
            tally.kept_band_tp[d] += band * truth;
            add_at(p.beyond, d, truth, &mut tally.beyond_reported, &mut tally.beyond_tp);
            if p.distance > K_MAX as u8 && !p.truth {
                // only a band made it a candidate: it counts in dedup's figures alone
                continue;
            }
            tally.reported[d] += 1;
            tally.tp[d] += truth;
            add_at(p.within, d, truth, &mut tally.confirmed_reported, &mut tally.confirmed_tp);
        }
        tally
    }

    /// True near-duplicate pairs.
    pub fn true_pairs(&self) -> u64 {
        self.true_pairs
    }

    /// True pairs further apart than `k`, and how many of them share a sketch band.
    pub fn beyond(&self, k: u32) -> (u64, u64) {
        let from = (k.min(K_MAX) as usize) + 1;
        (self.true_at[from..].iter().sum(), self.true_band_at[from..].iter().sum())
    }

    /// `dedup`'s figures at `k`: candidates within `k` or sharing a sketch band, decided by
    /// its rule (`DedupRule`, the second look included).
    pub fn dedup_score(&self, k: u32) -> Score {
        let upto = (k.min(K_MAX) as usize) + 1;
        let reported = self.kept[..upto].iter().sum::<u64>() + self.kept_band[upto..].iter().sum::<u64>();
        let tp = self.kept_tp[..upto].iter().sum::<u64>() + self.kept_band_tp[upto..].iter().sum::<u64>();
        Score::new(reported, tp, self.true_pairs)
    }

    /// Precision, recall and F1 of `setting` (a threshold outside `THRESHOLDS` counts
    /// nothing): fingerprints within `k`, or the index's confirmed check (within `k` at the
    /// threshold, and the band candidates beyond `k` it answers).
    pub fn score(&self, setting: Setting) -> Score {
        let upto = (setting.k.min(K_MAX) as usize) + 1;
        let Some(t) = setting.confirm else {
            return Score::new(self.reported[..upto].iter().sum(), self.tp[..upto].iter().sum(), self.true_pairs);
        };
        let x = t.checked_sub(THRESHOLDS.start).map(|x| x as usize);
        let counts = x.and_then(|x| Some((self.confirmed_reported.get(x)?, self.confirmed_tp.get(x)?, self.beyond_reported.get(x)?, self.beyond_tp.get(x)?)));
        let Some((reported, tp, beyond_reported, beyond_tp)) = counts else {
            return Score::new(0, 0, self.true_pairs);
        };
        let within = |c: &[u64; SLOTS]| c[..upto].iter().sum::<u64>();
        let beyond = |c: &[u64; SLOTS]| c[upto..].iter().sum::<u64>();
        Score::new(within(reported) + beyond(beyond_reported), within(tp) + beyond(beyond_tp), self.true_pairs)
    }
}

/// Counts a pair at distance `d` (`truth`: 1 when true) at each threshold of bit set `at`.
fn add_at(mut at: u32, d: usize, truth: u64, reported: &mut [[u64; SLOTS]], tp: &mut [[u64; SLOTS]]) {
    while at != 0 {
        let x = at.trailing_zeros() as usize;
        at &= at - 1;
        if let (Some(r), Some(t)) = (reported.get_mut(x), tp.get_mut(x)) {
            r[d] += 1;
            t[d] += truth;
        }
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
    /// A pair at `distance` (`K_MAX + 1` for further), true or not, of estimated resemblance
    /// `est`, answered within `k` at every threshold it reaches (as by a check the band files
    /// do not serve).
    pub fn of(distance: u8, truth: bool, est: f64) -> Pair {
        Pair {
            distance: distance.min(K_MAX as u8 + 1),
            truth,
            within: THRESHOLDS.enumerate().filter(|&(_, t)| est >= f64::from(t) / 100.0).fold(0, |set, (x, _)| set | 1 << x),
            beyond: 0,
            band: false,
            dedup: est >= 0.9,
        }
    }

    /// The same pair, its sketches sharing a band (`band`) or not, under `check`.
    pub fn with_band(self, band: bool, est: f64, check: &IndexCheck) -> Pair {
        Pair { band, within: check.within(band, est), beyond: check.beyond(band, est), ..self }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bias and standard deviation per band equal a direct computation over the pairs.
    #[test]
    fn noise_by_band_is_the_mean_and_spread_of_the_error() {
        let near = vec![(0, 1, 0.91), (0, 2, 0.915), (1, 2, 0.93), (2, 3, 0.86), (3, 4, 1.0)];
        let est = |a: u32, b: u32| {
            Ok(match (a, b) {
                (0, 1) => 0.89,
                (0, 2) => 0.935,
                (1, 2) => 0.93,
                (2, 3) => 0.91,
                _ => 1.0,
            })
        };
        let n = noise(&near, 0.9, est).unwrap();
        let band = |lo: f64| *n.iter().find(|x| x.low == lo).unwrap();
        let b = band(0.90);
        assert_eq!(b.pairs, 2);
        assert!((b.bias - 0.0).abs() < 1e-12, "errors -0.02 and +0.02: {b:?}");
        assert!((b.sd - (0.0008f64).sqrt()).abs() < 1e-12, "{b:?}");
        assert_eq!(b.wrong_side, 1, "0.91 estimated 0.89");
        assert_eq!((band(0.92).pairs, band(0.92).sd, band(0.92).wrong_side), (1, 0.0, 0));
        assert_eq!((band(0.85).pairs, band(0.85).wrong_side), (1, 1));
        assert!((band(0.85).bias - 0.05).abs() < 1e-12);
        assert_eq!(band(1.0).pairs, 1);
        assert_eq!(band(0.80).pairs, 0);
    }

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
                let hit = |p: &&Pair| u32::from(p.distance) <= k && confirm.is_none_or(|t| p.within & (1 << (t - 70)) != 0);
                let reported = pairs.iter().filter(hit).count() as u64;
                let tp = pairs.iter().filter(hit).filter(|p| p.truth).count() as u64;
                let n_true = pairs.iter().filter(|p| p.truth).count() as u64;
                assert_eq!(tally.score(setting), Score::new(reported, tp, n_true), "{setting:?}");
            }
        }
    }

    /// dedup's figures: within k by its rule, plus the band pairs beyond k.
    #[test]
    fn dedup_scores_count_band_pairs_beyond_k() {
        let mut far = Pair::of(K_MAX as u8 + 1, true, 0.95);
        far.band = true;
        let mut far_false = Pair::of(K_MAX as u8 + 1, false, 0.95);
        far_false.band = true;
        let pairs = vec![Pair::of(1, true, 0.95), Pair::of(2, false, 0.85), Pair::of(5, true, 0.95), far, far_false];
        let tally = Tally::of(&pairs);
        assert_eq!(tally.dedup_score(3), Score::new(3, 2, 3), "k = 3: the pair at 1 and the two band pairs beyond");
        assert_eq!(tally.dedup_score(8), Score::new(4, 3, 3));
        assert_eq!(tally.beyond(3), (2, 1));
        // the false band pair beyond K_MAX counts in no fingerprint figure
        assert_eq!(tally.score(Setting { k: 8, confirm: None }), Score::new(3, 2, 3));
        let rule = DedupRule { threshold: 0.9, low: 0.85, high: 0.95 };
        assert!(rule.keeps(0.86, || 0.91) && !rule.keeps(0.93, || 0.89) && rule.keeps(0.96, || 0.0) && !rule.keeps(0.84, || 1.0));
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
