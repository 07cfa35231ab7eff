//! The planner: the paper's `X(f, k, d)` rule (`min_tables`, the tests' oracle), the cost model (expected
//! candidates per probe, bits per entry against the information bound) and [`plan`], which
//! weighs every candidate block split for a count and says why it chose one.

// Indexing: the planner's small candidate tables indexed by counts it enumerates.
#![allow(clippy::indexing_slicing)]
use super::{binomial, block_widths, Design, DesignError, DEFAULT_MAX_CANDIDATES_LOG2, FINGERPRINT_BITS, MAX_K, MAX_LEVELS, MAX_TABLES, SKETCHED_MAX_CANDIDATES_LOG2};

/// The paper's `X(f, k, d)` over integer block widths: the fewest tables such that no probe
/// expects more than `2^tau` candidates among `2^d` uniformly random fingerprints, where a
/// level splits `f` bits into `r` blocks (widths as in [`block_widths`]) and every table
/// chooses `r - k` of them; the worst table (the narrowest choice) decides.
///
/// Returns `None` when no design within [`MAX_LEVELS`] levels reaches the bound.
#[cfg(test)]
pub(crate) fn min_tables(f: u32, k: u32, d: f64, tau: f64) -> Option<u64> {
    min_tables_at(f, k, d, tau, 0)
}

#[cfg(test)]
fn min_tables_at(f: u32, k: u32, d: f64, tau: f64, depth: usize) -> Option<u64> {
    if d <= tau {
        return Some(1);
    }
    if depth == MAX_LEVELS || k == 0 && depth > 0 {
        return None;
    }
    let mut best: Option<u64> = None;
    for r in (k + 1).max(1)..=f {
        let tables = binomial(r, k);
        if tables > MAX_TABLES as u64 {
            break;
        }
        let widths = block_widths(f, r);
        // The narrowest choice of r - k blocks takes the narrowest blocks (at the end);
        // the bits left over are then the widest k blocks.
        let chosen_min: u32 = widths[k as usize..].iter().sum();
        let rest_max: u32 = widths[..k as usize].iter().sum();
        let rest_min: u32 = widths[widths.len() - k as usize..].iter().sum();
        let d_after = d - f64::from(chosen_min);
        let sub = if d_after <= tau {
            Some(1)
        } else if rest_min != rest_max {
            // Uneven splits leave different widths to the next level; the design needs the
            // same block split for all of them, so take the worse of the two.
            match (min_tables_at(rest_max, k, d_after, tau, depth + 1), min_tables_at(rest_min, k, d_after, tau, depth + 1)) {
                (Some(a), Some(b)) => Some(a.max(b)),
                _ => None,
            }
        } else {
            min_tables_at(rest_max, k, d_after, tau, depth + 1)
        };
        if let Some(sub) = sub {
            let total = tables.saturating_mul(sub);
            if total <= MAX_TABLES as u64 && best.is_none_or(|b| total < b) {
                best = Some(total);
            }
        }
    }
    best
}

/// What the planner is asked for.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct PlanOptions {
    /// Largest Hamming distance queries must be answered for (`0..=8`).
    pub k: u32,
    /// Expected number of fingerprints.
    pub count: u64,
    /// No probe should expect more than `2^max_candidates_log2` candidates.
    pub max_candidates_log2: f64,
    /// Exactly this many tables (overrides the candidate bound).
    pub tables: Option<usize>,
}

__with_fields!(PlanOptions { k: u32 => with_k, count: u64 => with_count, max_candidates_log2: f64 => with_max_candidates_log2, tables: Option<usize> => with_tables });

impl PlanOptions {
    /// Defaults for `count` fingerprints and distance `k`.
    pub fn new(count: u64, k: u32) -> Self {
        Self { k, count, max_candidates_log2: DEFAULT_MAX_CANDIDATES_LOG2, tables: None }
    }

    /// What the engine plans a segment (or memtable) of `count` entries with, in an index
    /// with `sketched` entries or not: the default bound without sketches,
    /// [`SKETCHED_MAX_CANDIDATES_LOG2`] with (fewer tables: the check finds sketched pairs
    /// through the band files).
    pub(crate) fn for_segment(count: u64, k: u32, sketched: bool) -> Self {
        let max_candidates_log2 = if sketched { SKETCHED_MAX_CANDIDATES_LOG2 } else { DEFAULT_MAX_CANDIDATES_LOG2 };
        Self { max_candidates_log2, ..Self::new(count, k) }
    }
}

/// A design with its expected costs for a given count.
#[derive(Clone, Debug)]
pub struct PlannedDesign {
    /// The design.
    pub design: Design,
    /// `log2(count)`.
    pub d: f64,
    /// Expected candidates per probe, per table.
    pub candidates: Vec<f64>,
    /// Expected bits per fingerprint in one table (information bound plus the XOR code's
    /// measured overhead), used for the size estimate.
    pub bits_per_entry: f64,
    /// Expected bytes of all tables (document ids not counted).
    pub expected_bytes: f64,
}

impl PlannedDesign {
    fn new(design: Design, count: u64) -> Self {
        let candidates = design.expected_candidates(count);
        let bits_per_entry = estimated_bits_per_entry(count);
        let expected_bytes = bits_per_entry * count as f64 * design.tables().len() as f64 / 8.0;
        Self { d: log2_count(count), design, candidates, bits_per_entry, expected_bytes }
    }

    /// The largest expected candidate count over the tables.
    pub fn max_candidates(&self) -> f64 {
        self.candidates.iter().copied().fold(0.0, f64::max)
    }

    /// Expected candidates of one query over all tables.
    pub fn total_candidates(&self) -> f64 {
        self.candidates.iter().sum()
    }
}

/// The planner's answer: the chosen design, the alternatives it weighed and why.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The chosen design.
    pub chosen: PlannedDesign,
    /// The cheapest design for each table count the planner considered, fewest tables first.
    pub alternatives: Vec<PlannedDesign>,
    /// Why this design, in a sentence or two.
    pub reason: String,
}

fn log2_count(count: u64) -> f64 {
    (count.max(1) as f64).log2()
}

/// Information bound in bits per fingerprint for a set of `n` distinct 64-bit values:
/// `log2(C(2^64, n)) / n`, computed with `ln Γ` to stay exact for large `n`.
pub fn information_bound_bits(n: u64) -> f64 {
    if n == 0 {
        return 0.0;
    }
    let n_f = n as f64;
    let m = 2f64.powi(64);
    // log C(m, n) = sum_{i<n} log(m - i) - log n!  ; for n << m, log(m - i) ~ log m - i/m.
    let log_m = 64.0 * std::f64::consts::LN_2;
    let sum_log = n_f * log_m - n_f * (n_f - 1.0) / (2.0 * m);
    let log_fact = ln_factorial(n_f);
    (sum_log - log_fact) / std::f64::consts::LN_2 / n_f
}

fn ln_factorial(n: f64) -> f64 {
    if n < 20.0 {
        let mut acc = 0.0;
        let mut i = 2.0;
        while i <= n {
            acc += f64::ln(i);
            i += 1.0;
        }
        return acc;
    }
    // Stirling with two correction terms: exact to ~1e-12 relative for n >= 20.
    n * n.ln() - n + 0.5 * (2.0 * std::f64::consts::PI * n).ln() + 1.0 / (12.0 * n) - 1.0 / (360.0 * n * n * n)
}

fn estimated_bits_per_entry(count: u64) -> f64 {
    // The XOR code sits about 4.6% above the bound; blocks and their index add about 2%.
    (information_bound_bits(count.max(2)) * 1.066).max(1.0)
}

/// Picks a design for `options` (see [`DEFAULT_MAX_CANDIDATES_LOG2`] for the default rule).
pub fn plan(options: &PlanOptions) -> Result<Plan, DesignError> {
    Ok((*cached_plan(options)?).clone())
}

/// The design [`plan`] chooses, without the alternatives: what the engine asks for every
/// flush and compaction.
pub fn planned_design(options: &PlanOptions) -> Result<Design, DesignError> {
    Ok(cached_plan(options)?.chosen.design.clone())
}

/// [`plan_uncached`], remembering recent answers (the engine plans for every flush, mostly
/// for the same count).
fn cached_plan(options: &PlanOptions) -> Result<std::sync::Arc<Plan>, DesignError> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    type Key = (u32, u64, u64, Option<usize>);
    static RECENT: OnceLock<Mutex<HashMap<Key, Arc<Plan>>>> = OnceLock::new();
    let key = (options.k, options.count, options.max_candidates_log2.to_bits(), options.tables);
    let recent = RECENT.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(p) = recent.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return Ok(p.clone());
    }
    let planned = Arc::new(plan_uncached(options)?);
    let mut recent = recent.lock().unwrap_or_else(|p| p.into_inner());
    if recent.len() >= 64 {
        recent.clear();
    }
    recent.insert(key, planned.clone());
    Ok(planned)
}

fn plan_uncached(options: &PlanOptions) -> Result<Plan, DesignError> {
    let k = options.k;
    if k > MAX_K {
        return Err(DesignError::KTooLarge { k });
    }
    let tau = options.max_candidates_log2;
    if !(0.0..=64.0).contains(&tau) {
        return Err(DesignError::BadCandidateBound { given: tau.to_string() });
    }
    let candidates = cached_candidate_designs(k)?;
    let count = options.count;
    // The best candidate per table count, by `better`'s key; only the winners are cloned.
    let mut best: Vec<(usize, (f64, f64, usize))> = Vec::new();
    for (i, c) in candidates.iter().enumerate() {
        let key = (count as f64 * c.max_weight, count as f64 * c.sum_weight, c.design.levels().len());
        let tables = c.design.tables().len();
        match best.iter_mut().find(|(j, _)| candidates[*j].design.tables().len() == tables) {
            Some(slot) => {
                if key.partial_cmp(&slot.1) == Some(std::cmp::Ordering::Less) {
                    *slot = (i, key);
                }
            }
            None => best.push((i, key)),
        }
    }
    let mut best_per_count: Vec<PlannedDesign> = best.into_iter().map(|(i, _)| PlannedDesign::new(candidates[i].design.clone(), count)).collect();
    best_per_count.sort_by_key(|p| p.design.tables().len());
    let bound = 2f64.powf(options.max_candidates_log2);
    let (chosen, reason) = if let Some(t) = options.tables {
        match best_per_count.iter().find(|p| p.design.tables().len() == t) {
            Some(p) => (p.clone(), format!("{t} tables were requested; of the designs with {t} tables this one expects the fewest candidates per probe")),
            None => {
                let mut near: Vec<usize> = best_per_count.iter().map(|p| p.design.tables().len()).collect();
                near.sort_by_key(|&n| (n as i64 - t as i64).unsigned_abs());
                near.truncate(6);
                return Err(DesignError::NoSuchTableCount { k, tables: t, near });
            }
        }
    } else {
        match best_per_count.iter().find(|p| p.max_candidates() <= bound) {
            Some(p) => (
                p.clone(),
                format!(
                    "fewest tables such that no probe expects more than 2^{} = {} candidates among {} fingerprints (about one 1 KB block of entries); more tables would cost space without saving a block decode",
                    options.max_candidates_log2, bound, count
                ),
            ),
            None => {
                let p = best_per_count.last().expect("at least one design").clone();
                (
                    p,
                    format!(
                        "no design within {MAX_TABLES} tables keeps probes under 2^{} candidates for {count} fingerprints; this is the design with the most tables",
                        options.max_candidates_log2
                    ),
                )
            }
        }
    };
    Ok(Plan { chosen, alternatives: best_per_count, reason })
}

/// A candidate design with its count-independent costs: `2^-p` of its longest-running
/// table and the sum of `2^-p` over its tables (times the count, the expected candidates).
struct Candidate {
    design: Design,
    max_weight: f64,
    sum_weight: f64,
}

/// [`candidate_designs`] with their weights, computed once per `k` per process: the engine
/// plans a design for every flush and compaction, and building and weighing the candidates
/// dominates the planner's cost.
fn cached_candidate_designs(k: u32) -> Result<std::sync::Arc<Vec<Candidate>>, DesignError> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    static CACHE: OnceLock<Mutex<HashMap<u32, Arc<Vec<Candidate>>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(c) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(&k) {
        return Ok(c.clone());
    }
    let candidates: Vec<Candidate> = candidate_designs(k)?
        .into_iter()
        .map(|design| {
            let w = design.expected_candidates(1);
            Candidate { max_weight: w.iter().copied().fold(0.0, f64::max), sum_weight: w.iter().sum(), design }
        })
        .collect();
    let candidates = Arc::new(candidates);
    cache.lock().unwrap_or_else(|p| p.into_inner()).insert(k, candidates.clone());
    Ok(candidates)
}

/// Every block split of up to [`MAX_LEVELS`] levels with at most [`MAX_TABLES`] tables, plus the
/// single-table full scan.
fn candidate_designs(k: u32) -> Result<Vec<Design>, DesignError> {
    let mut splits: Vec<Vec<u32>> = vec![Vec::new()];
    let mut frontier: Vec<(Vec<u32>, u64)> = vec![(Vec::new(), 1)];
    for depth in 0..MAX_LEVELS {
        if k == 0 && depth > 0 {
            break;
        }
        let mut next = Vec::new();
        for (split, tables) in &frontier {
            // The narrowest width any table has left at this depth bounds r.
            let width = narrowest_rest(split, k);
            for r in (k + 1)..=width.min(64) {
                let t = tables.saturating_mul(binomial(r, k));
                if t > MAX_TABLES as u64 {
                    break;
                }
                let mut rr = split.clone();
                rr.push(r);
                splits.push(rr.clone());
                next.push((rr, t));
            }
        }
        frontier = next;
    }
    splits.into_iter().map(|r| Design::new(k, &r)).collect()
}

fn narrowest_rest(split: &[u32], k: u32) -> u32 {
    let mut width = FINGERPRINT_BITS;
    for &r in split {
        let widths = block_widths(width, r);
        width = widths[widths.len() - k as usize..].iter().sum();
    }
    width
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bound_that_is_not_a_finite_exponent_in_range_is_refused() {
        for tau in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -1.0, 64.5] {
            let options = PlanOptions { max_candidates_log2: tau, ..PlanOptions::new(1000, 3) };
            assert!(matches!(plan(&options), Err(DesignError::BadCandidateBound { .. })), "{tau}");
        }
        assert!(plan(&PlanOptions { max_candidates_log2: 0.0, ..PlanOptions::new(1000, 3) }).is_ok());
    }

    #[test]
    fn first_table_is_identity() {
        for k in 0..=MAX_K {
            for design in candidate_designs(k).unwrap() {
                assert!(design.tables()[0].permutation.is_identity(), "{}", design.summary());
            }
        }
    }

    #[test]
    fn information_bound_matches_issue_figures() {
        assert!((information_bound_bits(1_000_000) - 45.5).abs() < 0.05);
        assert!((information_bound_bits(10_000_000) - 42.2).abs() < 0.05);
        assert!((information_bound_bits(1 << 26) - 39.4).abs() < 0.05);
    }

    #[test]
    fn reproduces_example_3_1() {
        // f = 64, k = 3, 2^34 fingerprints: the paper's four designs.
        let cases = [(20usize, 31u32, 33u32, 8.0f64), (16, 28, 28, 64.0), (10, 25, 26, 512.0), (4, 16, 16, 262_144.0)];
        for (tables, p_lo, p_hi, max_cand) in cases {
            let mut opts = PlanOptions::new(1u64 << 34, 3);
            opts.tables = Some(tables);
            let plan = plan(&opts).unwrap();
            let d = &plan.chosen.design;
            assert_eq!(d.tables().len(), tables);
            assert_eq!(d.prefix_range(), (p_lo, p_hi), "{}", d.summary());
            assert_eq!(plan.chosen.max_candidates(), max_cand);
        }
    }

    #[test]
    fn planner_agrees_with_x() {
        for k in 1..=5u32 {
            for d in [4.0, 10.0, 16.0, 20.0, 23.25, 26.0, 30.0, 34.0, 38.0] {
                let count = 2f64.powf(d) as u64;
                let plan = plan(&PlanOptions::new(count, k)).unwrap();
                let want = min_tables(64, k, log2_count(count), DEFAULT_MAX_CANDIDATES_LOG2);
                if let Some(want) = want {
                    assert_eq!(plan.chosen.design.tables().len() as u64, want, "k={k} d={d}: {}", plan.chosen.design.summary());
                    assert!(plan.chosen.max_candidates() <= 256.0);
                }
            }
        }
    }

    #[test]
    fn default_plans_for_common_sizes() {
        let p = plan(&PlanOptions::new(10_000_000, 3)).unwrap();
        assert_eq!(p.chosen.design.tables().len(), 4);
        let p = plan(&PlanOptions::new(100, 3)).unwrap();
        assert_eq!(p.chosen.design.tables().len(), 1);
        let p = plan(&PlanOptions::new(1 << 34, 3)).unwrap();
        assert_eq!(p.chosen.design.tables().len(), 16);
        let p = plan(&PlanOptions::new(1 << 20, 0)).unwrap();
        assert_eq!(p.chosen.design.tables().len(), 1);
        assert_eq!(p.chosen.design.tables()[0].prefix_bits, 64);
    }

    /// Segments of an index with sketches keep the 4-table design (16-bit prefixes) at
    /// k = 3 up to 2^29 entries (one full-scan table below 2^13); without sketches, 10
    /// tables from 2^25 (the default bound); the sketched bound is the X rule's at 2^13.
    #[test]
    fn sketched_segments_keep_four_tables_up_to_2_29() {
        let tables = |count: u64, sketched: bool| planned_design(&PlanOptions::for_segment(count, 3, sketched)).unwrap().tables().iter().map(|t| t.prefix_bits).collect::<Vec<_>>();
        for count in [1 << 14, 1 << 22, 1 << 26, 1 << 28, 1 << 29] {
            assert_eq!(tables(count, true), vec![16; 4], "2^{}", count.ilog2());
        }
        assert_eq!(tables(1 << 12, true), vec![0]);
        assert!(tables(1 << 30, true).len() > 4);
        assert_eq!(tables(1 << 26, false).len(), 10);
        assert_eq!(tables(1 << 28, false).len(), 10);
        assert_eq!(tables(1 << 22, false), vec![16; 4]);
        for k in 1..=5u32 {
            for d in [10.0, 16.0, 20.0, 26.0, 30.0] {
                let count = 2f64.powf(d) as u64;
                let got = planned_design(&PlanOptions::for_segment(count, k, true)).unwrap().tables().len() as u64;
                if let Some(want) = min_tables(64, k, log2_count(count), SKETCHED_MAX_CANDIDATES_LOG2) {
                    assert_eq!(got, want, "k={k} d={d}");
                }
            }
        }
    }
}
