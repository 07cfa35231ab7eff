//! Multi-probe: answering a distance `K` above a design's `k` from the same tables, exactly.
//!
//! This module owns the *enumeration* (which prefix variants each table is probed with for a
//! given `K`) and its cost; the segment reader and the merge join only walk the ranges it
//! names. It knows nothing about files.
//!
//! # Why it is exact
//! Let `q` be the query and `x` a stored fingerprint with `d(q, x) <= K`. Split the 64 bit
//! positions into *atoms*: maximal sets of positions that lie in exactly the same tables'
//! prefixes (for the block split `[4]` the atoms are the four blocks; nested block splits cut finer).
//! The differing bits of `q` and `x` give an error vector `a` (errors per atom,
//! `sum a <= K`), and table `t`'s prefixes differ in `e_t(a) = sum of a over t's atoms` bits.
//! Assign `a` to the *first* table with the smallest `e_t(a)`, and let `budget_t` be the
//! largest `e_t(a)` over the vectors assigned to `t` ([`budgets`] enumerates them all).
//! Then `x`'s permuted prefix in its table differs from `q`'s in at most `budget_t` bits,
//! so `x` lies in the range of one of the variants `pi_t(q) ^ f` (`f` ranging over the
//! masks of at most `budget_t` bits in the probed prefix). Probing fewer leading bits
//! (`probe_bits <= prefix_bits`, chosen by cost) keeps this true: the leading bits differ
//! in no more places than the whole prefix. Every candidate is then checked against `K`
//! with a popcount, so nothing outside `K` is reported. At `K <= k` every budget is 0: the
//! design's own guarantee.
//!
//! Assigning to the first minimum, rather than to any minimum, is what makes budgets
//! uneven and cheaper: with `[4]` (four tables led by one 16-bit block each) and `K = 6`,
//! the budgets are `1, 1, 1, 0` (52 probes, not 68); at `K = 8`, `2, 1, 1, 1` (188, not 548).
//! This is the generalised pigeonhole principle of GPH (Qin et al., ICDE 2018).
//!
//! # The closed-form budget, for block splits too large to enumerate
//! When the vectors are too many to enumerate, every table gets the uniform budget
//! `B(K, [r1, r2, ...])` of [`uniform_budget`]. Proof: at a level with `r` blocks, `k0`
//! blocks left over and `x` errors, the `r - k0` blocks with the fewest errors carry at most
//! `g(r, x) = (r - k0) * (x / r) + max(0, x % r - k0)` of them (spreading `x` as evenly as
//! possible maximises the sum of the smallest `r - k0` parts; integer division). Choose
//! them (some table of the block split does); the `k0` blocks left carry `x - E1 <= x` errors and
//! the next level splits exactly those bits, so by induction its chosen blocks carry at most
//! `B(x - E1, rest)`. Both `g` and `B` grow by 0 or 1 when `x` grows by 1, so
//! `E1 + B(K - E1, rest)` does not decrease in `E1` and is largest at `E1 = g(r1, K)`:
//! `B(K, [r1, rest]) = g(r1, K) + B(K - g(r1, K), rest)`, `B(K, []) = 0`. Some table's whole
//! prefix therefore differs in at most `B` bits.

// Indexing: probe plans index the design's tables and blocks by counts the design itself holds.
#![allow(clippy::indexing_slicing)]
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use super::prefix_mask as prefix_mask_bits;
use super::{binomial, Design, DesignError, TableDesign, MAX_K};

/// Probe cost in entries decoded besides the run itself: the search over block keys and
/// the entries passed over in the block before the run (about half a 1 KB block).
pub const PROBE_OVERHEAD_ENTRIES: f64 = 100.0;
/// Most prefix variants listed for one table; a table that would need more probes fewer
/// bits.
pub const MAX_PLAN_PROBES: u64 = 1 << 16;
/// Error vectors times tables above which [`budgets`] uses the closed form.
const MAX_ENUMERATION: u64 = 20_000_000;

/// How one table is probed for a distance above the design's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableProbe {
    /// Most prefix bits in which a match assigned to this table differs from the query.
    pub budget: u32,
    /// Leading permuted bits each probe fixes (at most the table's prefix).
    pub probe_bits: u32,
    /// The XOR masks (over the leading `probe_bits` permuted bits) of the variants, each
    /// with at most `budget` bits set, the zero mask first.
    pub flips: Vec<u64>,
}

/// The multi-probe plan of a design for one distance and set size.
#[derive(Clone, Debug)]
pub struct ProbePlan {
    k: u32,
    count: u64,
    tables: Vec<TableProbe>,
    closed_form: bool,
}

impl ProbePlan {
    /// The plan for answering distance `k` from `design`'s tables over `count` entries.
    /// `k` at most the design's own gives every table its prefix and one probe.
    pub fn new(design: &Design, k: u32, count: u64) -> Result<Self, DesignError> {
        Self::for_tables(design.tables(), design.k(), Some(design.levels()), k, count)
    }

    /// [`Self::new`] for tables that answer `design_k` (any tables covering every
    /// `design_k`-bit difference, such as [`Design::tables`]), built from `levels` when
    /// known (only the closed-form fallback needs them; without, it is `k` itself).
    pub fn for_tables(designs: &[TableDesign], design_k: u32, levels: Option<&[u32]>, k: u32, count: u64) -> Result<Self, DesignError> {
        if k > MAX_K {
            return Err(DesignError::KTooLarge { k });
        }
        let (budgets, closed_form) = budgets(designs, design_k, levels, k);
        let tables = designs
            .iter()
            .zip(budgets)
            .map(|(t, budget)| {
                let mut probe_bits = best_probe_bits(t.prefix_bits, budget, count);
                // Too many variants to list: probe fewer bits (one probe at 0 bits).
                while variants(probe_bits, budget) > MAX_PLAN_PROBES {
                    probe_bits -= 1;
                }
                TableProbe { budget, probe_bits, flips: flips(probe_bits, budget) }
            })
            .collect();
        Ok(Self { k, count, tables, closed_form })
    }

    /// [`Self::new`], remembering recent plans (a query asks for one every time).
    pub fn cached(design: &Design, k: u32, count: u64) -> Result<Arc<Self>, DesignError> {
        type Key = (u32, Vec<u32>, u32, u32);
        static RECENT: OnceLock<Mutex<HashMap<Key, Arc<ProbePlan>>>> = OnceLock::new();
        // Plans depend on the count only through the probe widths: one per power of two.
        let bucket = 64 - count.leading_zeros();
        let key = (design.k(), design.levels().to_vec(), k, bucket);
        let recent = RECENT.get_or_init(|| Mutex::new(HashMap::new()));
        if let Some(p) = recent.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Ok(p.clone());
        }
        let plan = Arc::new(Self::new(design, k, 1u64 << bucket.saturating_sub(1).min(63))?);
        let mut recent = recent.lock().unwrap_or_else(|p| p.into_inner());
        if recent.len() >= 256 {
            recent.clear();
        }
        recent.insert(key, plan.clone());
        Ok(plan)
    }

    /// The distance planned for.
    pub fn k(&self) -> u32 {
        self.k
    }

    /// Per table: budget, probed bits and variants.
    pub fn tables(&self) -> &[TableProbe] {
        &self.tables
    }

    /// True when the budgets came from the closed form (the block split was too large to
    /// enumerate), not from enumeration.
    pub fn closed_form(&self) -> bool {
        self.closed_form
    }

    /// Range probes of one query (all tables), saturating.
    pub fn probes(&self) -> u64 {
        self.tables.iter().map(|t| variants(t.probe_bits, t.budget)).fold(0u64, u64::saturating_add)
    }

    /// Expected entries decoded by one query (uniform fingerprints): per probe, the
    /// overhead plus the run `count / 2^probe_bits`.
    pub fn expected_entries(&self) -> f64 {
        self.tables.iter().map(|t| probe_cost(t.probe_bits, t.budget, self.count)).sum()
    }

    /// Entries a full scan decodes: all of table 0.
    pub fn scan_entries(&self) -> f64 {
        self.count as f64
    }

    /// True when a scan of table 0 is expected to be cheaper than the probes (or the
    /// probes are too many to enumerate): queries then scan.
    pub fn prefers_scan(&self) -> bool {
        self.expected_entries() >= self.scan_entries()
    }
}

/// Number of masks of at most `budget` bits among `bits`: `sum C(bits, j), j <= budget`.
pub fn variants(bits: u32, budget: u32) -> u64 {
    (0..=budget.min(bits)).map(|j| binomial(bits, j)).fold(0u64, u64::saturating_add)
}

fn probe_cost(bits: u32, budget: u32, count: u64) -> f64 {
    variants(bits, budget) as f64 * (PROBE_OVERHEAD_ENTRIES + count as f64 / 2f64.powi(bits as i32))
}

/// The probe width in `0..=prefix_bits` with the cheapest expected cost (the widest among
/// equals: fewer candidates to check).
fn best_probe_bits(prefix_bits: u32, budget: u32, count: u64) -> u32 {
    if budget == 0 {
        return prefix_bits;
    }
    let mut best = prefix_bits;
    let mut best_cost = probe_cost(prefix_bits, budget, count);
    for bits in (0..prefix_bits).rev() {
        let cost = probe_cost(bits, budget, count);
        if cost < best_cost {
            (best, best_cost) = (bits, cost);
        }
    }
    best
}

/// Every mask over the top `bits` bits of a word with at most `budget` bits set, by
/// number of bits set, then in increasing order of the chosen positions.
fn flips(bits: u32, budget: u32) -> Vec<u64> {
    fn rec(from: u32, bits: u32, left: u32, mask: u64, out: &mut Vec<u64>) {
        if left == 0 {
            out.push(mask);
            return;
        }
        for i in from..bits {
            rec(i + 1, bits, left - 1, mask | 1u64 << (63 - i), out);
        }
    }
    let mut out = Vec::new();
    for j in 0..=budget.min(bits) {
        rec(0, bits, j, 0, &mut out);
    }
    out
}

/// Per table, the most prefix bits a fingerprint within `k` of the query differs in when it
/// is assigned to the first table where it differs least (see the module docs), and whether
/// the closed form was used instead of enumeration.
pub fn budgets(tables: &[TableDesign], design_k: u32, levels: Option<&[u32]>, k: u32) -> (Vec<u32>, bool) {
    if k <= design_k {
        return (vec![0; tables.len()], false);
    }
    let masks: Vec<u64> = tables.iter().map(|t| t.permutation.invert(prefix_mask_bits(t.prefix_bits))).collect();
    // Atoms: positions grouped by the set of tables whose prefix holds them.
    let mut by_signature: HashMap<Vec<bool>, u32> = HashMap::new();
    for bit in 0..64 {
        let signature: Vec<bool> = masks.iter().map(|m| m >> bit & 1 == 1).collect();
        *by_signature.entry(signature).or_default() += 1;
    }
    let mut atoms: Vec<(Vec<bool>, u32)> = by_signature.into_iter().collect();
    atoms.sort();
    let widths: Vec<u32> = atoms.iter().map(|a| a.1.min(k)).collect();
    if vectors(&widths, k).saturating_mul(tables.len() as u64) > MAX_ENUMERATION {
        let budget = levels.map_or(k, |levels| uniform_budget(design_k, levels, k));
        return (vec![budget; tables.len()], true);
    }
    let members: Vec<Vec<usize>> = (0..tables.len()).map(|t| (0..atoms.len()).filter(|&a| atoms[a].0[t]).collect()).collect();
    let mut budget = vec![0u32; tables.len()];
    let mut errors = vec![0u32; atoms.len()];
    enumerate(&widths, 0, k, &mut errors, &mut |a| {
        let mut best = (u32::MAX, 0usize);
        for (t, atoms) in members.iter().enumerate() {
            let e: u32 = atoms.iter().map(|&i| a[i]).sum();
            if e < best.0 {
                best = (e, t);
            }
        }
        if let Some(b) = budget.get_mut(best.1) {
            *b = (*b).max(best.0);
        }
    });
    (budget, false)
}

/// Number of vectors `a` with `a_i <= widths_i` and `sum a <= k`.
fn vectors(widths: &[u32], k: u32) -> u64 {
    // ways[s] = vectors over the atoms so far summing to s.
    let mut ways = vec![0u64; k as usize + 1];
    ways[0] = 1;
    for &w in widths {
        let mut next = vec![0u64; k as usize + 1];
        for (s, &n) in ways.iter().enumerate() {
            for e in 0..=w as usize {
                if s + e <= k as usize {
                    next[s + e] = next[s + e].saturating_add(n);
                }
            }
        }
        ways = next;
    }
    ways.iter().fold(0u64, |a, &b| a.saturating_add(b))
}

fn enumerate(widths: &[u32], at: usize, left: u32, errors: &mut [u32], visit: &mut impl FnMut(&[u32])) {
    if at == widths.len() {
        visit(errors);
        return;
    }
    for e in 0..=widths[at].min(left) {
        errors[at] = e;
        enumerate(widths, at + 1, left - e, errors, visit);
    }
    errors[at] = 0;
}

/// The closed-form budget `B(k, levels)` for a design built for `design_k` (proof in the
/// module docs): some table's prefix differs from the query's in at most this many bits.
pub fn uniform_budget(design_k: u32, levels: &[u32], k: u32) -> u32 {
    let Some((&r, rest)) = levels.split_first() else { return 0 };
    if r <= design_k {
        return k;
    }
    let chosen = r - design_k;
    let g = chosen * (k / r) + (k % r).saturating_sub(design_k);
    g + uniform_budget(design_k, rest, k - g)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn budgets_of_four_blocks() {
        let d = Design::new(3, &[4]).unwrap();
        assert_eq!(budgets(d.tables(), 3, Some(d.levels()), 3).0, vec![0, 0, 0, 0]);
        assert_eq!(budgets(d.tables(), 3, Some(d.levels()), 4).0, vec![1, 0, 0, 0]);
        assert_eq!(budgets(d.tables(), 3, Some(d.levels()), 6).0, vec![1, 1, 1, 0]);
        assert_eq!(budgets(d.tables(), 3, Some(d.levels()), 8).0, vec![2, 1, 1, 1]);
        assert_eq!(uniform_budget(3, &[4], 6), 1);
        assert_eq!(uniform_budget(3, &[4], 8), 2);
        assert_eq!(uniform_budget(3, &[6], 6), 3);
        assert_eq!(uniform_budget(3, &[6], 3), 0);
    }

    #[test]
    fn enumerated_budgets_never_exceed_the_closed_form() {
        for levels in [vec![4u32], vec![5], vec![6], vec![4, 4], vec![5, 4]] {
            let d = Design::new(3, &levels).unwrap();
            for k in 3..=MAX_K {
                let (b, closed) = budgets(d.tables(), 3, Some(d.levels()), k);
                let u = uniform_budget(3, &levels, k);
                assert!(b.iter().all(|&x| x <= u), "{levels:?} k={k}: {b:?} vs {u} (closed form used: {closed})");
            }
        }
    }

    /// Every error set of up to `k` bits within the atoms of a design is covered by some
    /// table's variants: brute force over random error sets.
    #[test]
    fn every_error_set_is_covered() {
        let mut x = 0x1234_5678_9abc_def1u64;
        for levels in [vec![4u32], vec![6], vec![4, 4]] {
            let d = Design::new(3, &levels).unwrap();
            for k in 4..=MAX_K {
                let plan = ProbePlan::new(&d, k, 1 << 20).unwrap();
                for _ in 0..2000 {
                    let mut diff = 0u64;
                    for _ in 0..k {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        diff |= 1 << (x % 64);
                    }
                    let covered = d.tables().iter().zip(plan.tables()).any(|(t, p)| {
                        let top = prefix_mask_bits(p.probe_bits);
                        let e = t.permutation.apply(diff) & top;
                        p.flips.contains(&e)
                    });
                    assert!(covered, "{levels:?} k={k}: {diff:#x} not covered");
                }
            }
        }
    }

    #[test]
    fn flips_count_and_cost() {
        assert_eq!(flips(16, 1).len(), 17);
        assert_eq!(flips(16, 2).len() as u64, variants(16, 2));
        let plan = ProbePlan::new(&Design::new(3, &[4]).unwrap(), 6, 10_000_000).unwrap();
        assert_eq!(plan.probes(), 52);
        assert!(!plan.prefers_scan());
        let tiny = ProbePlan::new(&Design::new(3, &[4]).unwrap(), 8, 100).unwrap();
        assert!(tiny.prefers_scan());
    }
}
