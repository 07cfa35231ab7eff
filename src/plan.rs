//! Table designs: how the 64 bit positions are split into blocks, which blocks lead each
//! permuted table, and the planner that picks a design from the number of fingerprints.
//!
//! This module owns the *recipe* of a design (the number of blocks at each level), the
//! permutations derived from it and the cost model that explains a choice. It knows nothing
//! about files; the segment stores a design and asks [`Design::from_parts`] to validate it.
//!
//! # The construction (paper section 3.1)
//! Two fingerprints within Hamming distance `k` differ in at most `k` bits, so if the 64 bits
//! are split into `r > k` blocks, at least `r - k` blocks agree exactly. For every choice of
//! `r - k` blocks there is one table whose permutation moves those blocks to the top; its
//! prefix length `p` is their total width. A level may be *nested*: the `k` blocks left over
//! are split again into `r'` blocks, giving `C(r, k) * C(r', k)` tables (the paper's
//! 16-table design is `4 blocks, then 4 blocks`). A design is the list of `r` per level.
//!
//! Blocks are cut from the most significant bit down, as evenly as possible with the wider
//! blocks first (64 bits in 6 blocks: 11, 11, 11, 11, 10, 10). Within a table the chosen
//! blocks keep their relative order, then the remaining bits follow in their original order,
//! so the first table of every design is the identity permutation. The segment relies on that:
//! it keeps document ids in the order of table 0.

use std::fmt;

/// Width of a fingerprint in bits. The format stores it; only 64 is supported.
pub const FINGERPRINT_BITS: u32 = 64;
/// Largest Hamming distance a design can be built for.
pub const MAX_K: u32 = 8;
/// Largest number of tables the planner will consider.
pub const MAX_TABLES: usize = 512;
/// Largest nesting depth the planner will consider.
pub const MAX_LEVELS: usize = 3;
/// Default bound on the expected candidates of one probe, as a power of two.
///
/// 2^8 = 256 entries is about what one 1 KB block holds at the sizes simdex targets
/// (40 to 48 bits per entry): while a probe's expected run fits in one or two blocks, an
/// extra table costs more (another interpolation search and block decode) than it saves.
pub const DEFAULT_MAX_CANDIDATES_LOG2: f64 = 8.0;

/// A bit permutation made of contiguous runs of bits, applied with shifts and masks.
///
/// Bits are numbered from the most significant (position 0) to the least (63), as in the
/// paper's figures. `order[i]` is the source position of destination position `i`.
#[derive(Clone, PartialEq, Eq)]
pub struct Permutation {
    order: [u8; 64],
    moves: Vec<Move>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Move {
    /// Shift of the run's least significant bit in the source word.
    src_shift: u8,
    /// Shift of the run's least significant bit in the destination word.
    dst_shift: u8,
    mask: u64,
}

impl Permutation {
    /// The identity permutation.
    pub fn identity() -> Self {
        let mut order = [0u8; 64];
        for (i, o) in order.iter_mut().enumerate() {
            *o = i as u8;
        }
        Self::from_order(order).expect("identity is a permutation")
    }

    /// Builds a permutation from `order[dst] = src` (positions counted from the MSB).
    /// Returns `None` unless `order` is a bijection of `0..64`.
    pub fn from_order(order: [u8; 64]) -> Option<Self> {
        let mut seen = 0u64;
        for &s in &order {
            if s >= 64 || seen & (1u64 << s) != 0 {
                return None;
            }
            seen |= 1u64 << s;
        }
        let mut moves = Vec::new();
        let mut i = 0usize;
        while i < 64 {
            let mut j = i + 1;
            while j < 64 && order[j] == order[j - 1] + 1 {
                j += 1;
            }
            let width = (j - i) as u32;
            // The run covers destination positions i..j and source positions order[i]..;
            // position q (from the MSB) is bit 63 - q.
            let dst_shift = (64 - j) as u8;
            let src_shift = (64 - (order[i] as usize + (j - i))) as u8;
            let mask = if width == 64 { u64::MAX } else { (1u64 << width) - 1 };
            moves.push(Move { src_shift, dst_shift, mask });
            i = j;
        }
        Some(Self { order, moves })
    }

    /// `order[dst] = src`, positions counted from the most significant bit.
    pub fn order(&self) -> &[u8; 64] {
        &self.order
    }

    /// True when the permutation moves no bit.
    pub fn is_identity(&self) -> bool {
        self.moves.len() == 1 && self.moves[0].src_shift == 0 && self.moves[0].dst_shift == 0
    }

    /// Applies the permutation: bit at source position `order[i]` goes to position `i`.
    #[inline]
    pub fn apply(&self, x: u64) -> u64 {
        let mut y = 0u64;
        for m in &self.moves {
            y |= ((x >> m.src_shift) & m.mask) << m.dst_shift;
        }
        y
    }

    /// The inverse of [`Permutation::apply`].
    #[inline]
    pub fn invert(&self, y: u64) -> u64 {
        let mut x = 0u64;
        for m in &self.moves {
            x |= ((y >> m.dst_shift) & m.mask) << m.src_shift;
        }
        x
    }
}

impl fmt::Debug for Permutation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Permutation({})", self.describe())
    }
}

impl Permutation {
    /// Human-readable runs of source positions in destination order, e.g. `16-31,0-15,32-63`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        let mut i = 0usize;
        while i < 64 {
            let mut j = i + 1;
            while j < 64 && self.order[j] == self.order[j - 1] + 1 {
                j += 1;
            }
            parts.push(format!("{}-{}", self.order[i], self.order[j - 1]));
            i = j;
        }
        parts.join(",")
    }
}

/// One permuted table of a design.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableDesign {
    /// The permutation applied to every fingerprint stored in the table.
    pub permutation: Permutation,
    /// Number of leading permuted bits a match must share with the query in this table.
    pub prefix_bits: u32,
}

impl TableDesign {
    /// Mask selecting the top `prefix_bits` bits.
    #[inline]
    pub fn prefix_mask(&self) -> u64 {
        prefix_mask(self.prefix_bits)
    }
}

#[inline]
pub(crate) fn prefix_mask(bits: u32) -> u64 {
    if bits == 0 {
        0
    } else {
        u64::MAX << (64 - bits)
    }
}

/// A complete design: the distance it guarantees and its tables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Design {
    k: u32,
    levels: Vec<u32>,
    tables: Vec<TableDesign>,
}

/// Why a design cannot be built or accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DesignError {
    /// `k` is above [`MAX_K`].
    #[error("k = {k} is not supported (at most {MAX_K})")]
    KTooLarge {
        /// The requested distance.
        k: u32,
    },
    /// A level does not have more blocks than `k`, or more blocks than bits.
    #[error("level {level}: {blocks} blocks cannot serve k = {k} over {width} bits (need k < blocks <= bits)")]
    BadLevel {
        /// Level index, from 0.
        level: usize,
        /// Blocks requested at that level.
        blocks: u32,
        /// The design's distance.
        k: u32,
        /// Bits left to split at that level.
        width: u32,
    },
    /// The design would have more than [`MAX_TABLES`] tables or [`MAX_LEVELS`] levels.
    #[error("design too large: {tables} tables over {levels} levels (limits {MAX_TABLES} tables, {MAX_LEVELS} levels)")]
    TooLarge {
        /// Tables the recipe would produce (saturated).
        tables: usize,
        /// Levels requested.
        levels: usize,
    },
    /// The stored tables are not the ones the stored recipe produces.
    #[error("table {table} does not match its recipe: {detail}")]
    Mismatch {
        /// Table index.
        table: usize,
        /// What differs.
        detail: String,
    },
    /// No design has the requested number of tables.
    #[error("no design for k = {k} has exactly {tables} tables; possible counts near it: {near:?}")]
    NoSuchTableCount {
        /// The distance.
        k: u32,
        /// The requested table count.
        tables: usize,
        /// Table counts that exist, closest first.
        near: Vec<usize>,
    },
}

impl Design {
    /// Builds the design with the given blocks per level (see the module docs).
    ///
    /// An empty `levels` gives a single identity table with no prefix: every query scans it
    /// all, which is the right design for small sets. For `k = 0`, `levels = [1]` gives one
    /// table whose prefix is the whole fingerprint.
    pub fn new(k: u32, levels: &[u32]) -> Result<Self, DesignError> {
        if k > MAX_K {
            return Err(DesignError::KTooLarge { k });
        }
        if levels.len() > MAX_LEVELS {
            return Err(DesignError::TooLarge { tables: 0, levels: levels.len() });
        }
        if k == 0 && levels.len() > 1 {
            // After a k = 0 level nothing is left to split.
            return Err(DesignError::BadLevel { level: 1, blocks: levels[1], k, width: 0 });
        }
        let mut count: usize = 1;
        for &r in levels {
            count = count.saturating_mul(binomial(r, k) as usize);
        }
        if count > MAX_TABLES {
            return Err(DesignError::TooLarge { tables: count, levels: levels.len() });
        }
        let all: Vec<u8> = (0..64).collect();
        let mut tables = Vec::with_capacity(count);
        expand(&all, levels, 0, k, &mut Vec::new(), 0, &mut tables)?;
        Ok(Self { k, levels: levels.to_vec(), tables })
    }

    /// Rebuilds a design from stored parts and checks that the stored tables are exactly
    /// the ones its recipe produces, in order.
    pub fn from_parts(k: u32, levels: &[u32], tables: Vec<TableDesign>) -> Result<Self, DesignError> {
        let expected = Self::new(k, levels)?;
        if expected.tables.len() != tables.len() {
            return Err(DesignError::Mismatch {
                table: tables.len().min(expected.tables.len()),
                detail: format!("recipe gives {} tables, {} stored", expected.tables.len(), tables.len()),
            });
        }
        for (i, (want, got)) in expected.tables.iter().zip(&tables).enumerate() {
            if want.prefix_bits != got.prefix_bits {
                return Err(DesignError::Mismatch {
                    table: i,
                    detail: format!("prefix {} bits, recipe says {}", got.prefix_bits, want.prefix_bits),
                });
            }
            if want.permutation != got.permutation {
                return Err(DesignError::Mismatch {
                    table: i,
                    detail: format!(
                        "permutation {} differs from the recipe's {}",
                        got.permutation.describe(),
                        want.permutation.describe()
                    ),
                });
            }
        }
        Ok(expected)
    }

    /// The largest Hamming distance every query is guaranteed to be answered for.
    pub fn k(&self) -> u32 {
        self.k
    }

    /// Blocks per level.
    pub fn levels(&self) -> &[u32] {
        &self.levels
    }

    /// The tables, table 0 first (always the identity permutation).
    pub fn tables(&self) -> &[TableDesign] {
        &self.tables
    }

    /// Expected candidates of one probe in each table for `count` uniformly random
    /// fingerprints: `count / 2^p`.
    pub fn expected_candidates(&self, count: u64) -> Vec<f64> {
        self.tables.iter().map(|t| count as f64 / 2f64.powi(t.prefix_bits as i32)).collect()
    }

    /// One-line summary such as `4 tables (4 blocks), p = 16, k = 3`.
    pub fn summary(&self) -> String {
        let (lo, hi) = self.prefix_range();
        let p = if lo == hi { format!("{lo}") } else { format!("{lo}..{hi}") };
        let levels = if self.levels.is_empty() {
            "no blocks: one full scan".to_string()
        } else {
            self.levels.iter().map(|r| format!("{r} blocks")).collect::<Vec<_>>().join(", then ")
        };
        format!("{} tables ({levels}), p = {p}, k = {}", self.tables.len(), self.k)
    }

    /// Smallest and largest prefix length over the tables.
    pub fn prefix_range(&self) -> (u32, u32) {
        let lo = self.tables.iter().map(|t| t.prefix_bits).min().unwrap_or(0);
        let hi = self.tables.iter().map(|t| t.prefix_bits).max().unwrap_or(0);
        (lo, hi)
    }
}

/// Splits `width` bits into `r` blocks as evenly as possible, wider blocks first.
pub fn block_widths(width: u32, r: u32) -> Vec<u32> {
    let base = width / r;
    let extra = width % r;
    (0..r).map(|i| base + u32::from(i < extra)).collect()
}

fn expand(
    bits: &[u8],
    levels: &[u32],
    level: usize,
    k: u32,
    prefix: &mut Vec<u8>,
    prefix_bits: u32,
    out: &mut Vec<TableDesign>,
) -> Result<(), DesignError> {
    let Some(&r) = levels.get(level) else {
        let mut order = [0u8; 64];
        let full: Vec<u8> = prefix.iter().chain(bits.iter()).copied().collect();
        order.copy_from_slice(&full);
        let permutation = Permutation::from_order(order).expect("blocks partition the bits");
        out.push(TableDesign { permutation, prefix_bits });
        return Ok(());
    };
    let width = bits.len() as u32;
    if r <= k || r > width || r == 0 {
        return Err(DesignError::BadLevel { level, blocks: r, k, width });
    }
    let widths = block_widths(width, r);
    let mut blocks = Vec::with_capacity(r as usize);
    let mut at = 0usize;
    for w in widths {
        blocks.push(&bits[at..at + w as usize]);
        at += w as usize;
    }
    for chosen in combinations(r as usize, (r - k) as usize) {
        let mut rest = Vec::with_capacity(bits.len());
        let before = prefix.len();
        let mut added = 0u32;
        for (i, b) in blocks.iter().enumerate() {
            if chosen.contains(&i) {
                prefix.extend_from_slice(b);
                added += b.len() as u32;
            } else {
                rest.extend_from_slice(b);
            }
        }
        expand(&rest, levels, level + 1, k, prefix, prefix_bits + added, out)?;
        prefix.truncate(before);
    }
    Ok(())
}

/// All `m`-subsets of `0..n` in lexicographic order.
fn combinations(n: usize, m: usize) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut cur: Vec<usize> = (0..m).collect();
    if m > n {
        return out;
    }
    loop {
        out.push(cur.clone());
        // Find the rightmost index that can still move right.
        let mut i = m;
        loop {
            if i == 0 {
                return out;
            }
            i -= 1;
            if cur[i] < n - m + i {
                break;
            }
            if i == 0 {
                return out;
            }
        }
        cur[i] += 1;
        for j in i + 1..m {
            cur[j] = cur[j - 1] + 1;
        }
    }
}

/// `C(n, k)`, saturating.
pub fn binomial(n: u32, k: u32) -> u64 {
    if k > n {
        return 0;
    }
    let k = k.min(n - k);
    let mut acc: u64 = 1;
    for i in 0..k {
        acc = acc.saturating_mul(u64::from(n - i)) / u64::from(i + 1);
    }
    acc
}

/// The paper's `X(f, k, d)` over integer block widths: the fewest tables such that no probe
/// expects more than `2^tau` candidates among `2^d` uniformly random fingerprints, where a
/// level splits `f` bits into `r` blocks (widths as in [`block_widths`]) and every table
/// chooses `r - k` of them; the worst table (the narrowest choice) decides.
///
/// Returns `None` when no design within [`MAX_LEVELS`] levels reaches the bound.
pub fn min_tables(f: u32, k: u32, d: f64, tau: f64) -> Option<u64> {
    min_tables_at(f, k, d, tau, 0)
}

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
            // same recipe for all of them, so take the worse of the two.
            match (
                min_tables_at(rest_max, k, d_after, tau, depth + 1),
                min_tables_at(rest_min, k, d_after, tau, depth + 1),
            ) {
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

impl PlanOptions {
    /// Defaults for `count` fingerprints and distance `k`.
    pub fn new(count: u64, k: u32) -> Self {
        Self { k, count, max_candidates_log2: DEFAULT_MAX_CANDIDATES_LOG2, tables: None }
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

/// Every recipe of up to [`MAX_LEVELS`] levels with at most [`MAX_TABLES`] tables, plus the
/// single-table full scan.
fn candidate_designs(k: u32) -> Result<Vec<Design>, DesignError> {
    let mut recipes: Vec<Vec<u32>> = vec![Vec::new()];
    let mut frontier: Vec<(Vec<u32>, u64)> = vec![(Vec::new(), 1)];
    for depth in 0..MAX_LEVELS {
        if k == 0 && depth > 0 {
            break;
        }
        let mut next = Vec::new();
        for (recipe, tables) in &frontier {
            // The narrowest width any table has left at this depth bounds r.
            let width = narrowest_rest(recipe, k);
            for r in (k + 1)..=width.min(64) {
                let t = tables.saturating_mul(binomial(r, k));
                if t > MAX_TABLES as u64 {
                    break;
                }
                let mut rr = recipe.clone();
                rr.push(r);
                recipes.push(rr.clone());
                next.push((rr, t));
            }
        }
        frontier = next;
    }
    recipes.into_iter().map(|r| Design::new(k, &r)).collect()
}

fn narrowest_rest(recipe: &[u32], k: u32) -> u32 {
    let mut width = FINGERPRINT_BITS;
    for &r in recipe {
        let widths = block_widths(width, r);
        width = widths[widths.len() - k as usize..].iter().sum();
    }
    width
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutation_apply_invert_roundtrip() {
        let d = Design::new(3, &[4, 4]).unwrap();
        let xs = [0u64, u64::MAX, 0x0123_4567_89ab_cdef, 1, 1 << 63, 0xdead_beef_0000_ffff];
        for t in d.tables() {
            for &x in &xs {
                let y = t.permutation.apply(x);
                assert_eq!(y.count_ones(), x.count_ones());
                assert_eq!(t.permutation.invert(y), x);
            }
        }
    }

    #[test]
    fn permutation_moves_bits_like_order_says() {
        let d = Design::new(3, &[6]).unwrap();
        for t in d.tables() {
            for dst in 0..64u32 {
                let src = u32::from(t.permutation.order()[dst as usize]);
                assert_eq!(t.permutation.apply(1u64 << (63 - src)), 1u64 << (63 - dst));
            }
        }
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
    fn from_order_rejects_non_bijections() {
        let mut order = *Permutation::identity().order();
        order[5] = 4;
        assert!(Permutation::from_order(order).is_none());
        order[5] = 64;
        assert!(Permutation::from_order(order).is_none());
    }

    #[test]
    fn binomials() {
        assert_eq!(binomial(6, 3), 20);
        assert_eq!(binomial(5, 3), 10);
        assert_eq!(binomial(4, 3), 4);
        assert_eq!(binomial(3, 4), 0);
    }

    #[test]
    fn information_bound_matches_issue_figures() {
        assert!((information_bound_bits(1_000_000) - 45.5).abs() < 0.05);
        assert!((information_bound_bits(10_000_000) - 42.2).abs() < 0.05);
        assert!((information_bound_bits(1 << 26) - 39.4).abs() < 0.05);
    }

    #[test]
    fn from_parts_rejects_tampered_tables() {
        let d = Design::new(3, &[5]).unwrap();
        let mut tables = d.tables().to_vec();
        tables[2].prefix_bits += 1;
        assert!(matches!(Design::from_parts(3, &[5], tables), Err(DesignError::Mismatch { table: 2, .. })));
        let mut tables = d.tables().to_vec();
        tables.swap(1, 2);
        assert!(Design::from_parts(3, &[5], tables).is_err());
        assert_eq!(Design::from_parts(3, &[5], d.tables().to_vec()).unwrap(), d);
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

    /// Every set of at most k differing bit positions leaves some table's prefix intact.
    fn assert_covers(design: &Design) {
        let k = design.k() as usize;
        let prefixes: Vec<u64> = design
            .tables()
            .iter()
            .map(|t| {
                let mut m = 0u64;
                for &src in &t.permutation.order()[..t.prefix_bits as usize] {
                    m |= 1 << src;
                }
                m
            })
            .collect();
        fn rec(start: u32, left: usize, set: u64, prefixes: &[u64], design: &Design) {
            assert!(prefixes.iter().any(|&p| p & set == 0), "{}: bits {set:#x} hit every prefix", design.summary());
            if left == 0 {
                return;
            }
            for b in start..64 {
                rec(b + 1, left - 1, set | 1 << b, prefixes, design);
            }
        }
        rec(0, k, 0, &prefixes, design);
    }

    #[test]
    fn designs_cover_every_k_bit_difference() {
        for (k, levels) in [(0u32, vec![1u32]), (1, vec![2]), (1, vec![8, 3]), (2, vec![3]), (2, vec![4, 5]), (3, vec![4]), (3, vec![5]), (3, vec![6]), (3, vec![4, 4]), (3, vec![])] {
            assert_covers(&Design::new(k, &levels).unwrap());
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
}
