//! Designs from block splits (the blocks per level): [`Design::new`] cuts the bits into blocks level by level and emits one
//! [`TableDesign`] per choice of leading blocks; [`Design::from_parts`] checks stored tables
//! against their block split. Choosing a block split is the planner's job.

// Indexing: a design's tables and blocks indexed by counts it was built with (checked by Design::new).
#![allow(clippy::indexing_slicing)]
use super::{Permutation, MAX_K, MAX_LEVELS, MAX_TABLES};

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
/// Mask selecting the top `bits` bits of a word (0 for none).
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
    /// The design would have more than 512 tables or 3 levels.
    #[error("design too large: {tables} tables over {levels} levels (limits {MAX_TABLES} tables, {MAX_LEVELS} levels)")]
    TooLarge {
        /// Tables the block split would produce (saturated).
        tables: usize,
        /// Levels requested.
        levels: usize,
    },
    /// The bound on expected candidates per probe, `2^max_candidates_log2` (the CLI's
    /// `--tau`), is not a finite exponent in `0..=64`: no design can be chosen by it.
    #[error("the bound on candidates per probe, 2^tau with tau = {given}, needs a finite tau in 0..=64")]
    BadCandidateBound {
        /// The exponent given, as written.
        given: String,
    },
    /// The stored tables are not the ones the stored block split produces.
    #[error("table {table} does not match its block split: {detail}")]
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
    /// the ones its block split produces, in order.
    pub fn from_parts(k: u32, levels: &[u32], tables: Vec<TableDesign>) -> Result<Self, DesignError> {
        let expected = Self::new(k, levels)?;
        if expected.tables.len() != tables.len() {
            return Err(DesignError::Mismatch {
                table: tables.len().min(expected.tables.len()),
                detail: format!("block split gives {} tables, {} stored", expected.tables.len(), tables.len()),
            });
        }
        for (i, (want, got)) in expected.tables.iter().zip(&tables).enumerate() {
            if want.prefix_bits != got.prefix_bits {
                return Err(DesignError::Mismatch { table: i, detail: format!("prefix {} bits, block split says {}", got.prefix_bits, want.prefix_bits) });
            }
            if want.permutation != got.permutation {
                return Err(DesignError::Mismatch {
                    table: i,
                    detail: format!("permutation {} differs from the block split's {}", got.permutation.describe(), want.permutation.describe()),
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
        let levels =
            if self.levels.is_empty() { "no blocks: one full scan".to_string() } else { self.levels.iter().map(|r| format!("{r} blocks")).collect::<Vec<_>>().join(", then ") };
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

fn expand(bits: &[u8], levels: &[u32], level: usize, k: u32, prefix: &mut Vec<u8>, prefix_bits: u32, out: &mut Vec<TableDesign>) -> Result<(), DesignError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    // the permutations of real designs (permutation.rs tests the type alone)
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
    fn binomials() {
        assert_eq!(binomial(6, 3), 20);
        assert_eq!(binomial(5, 3), 10);
        assert_eq!(binomial(4, 3), 4);
        assert_eq!(binomial(3, 4), 0);
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
        for (k, levels) in
            [(0u32, vec![1u32]), (1, vec![2]), (1, vec![8, 3]), (2, vec![3]), (2, vec![4, 5]), (3, vec![4]), (3, vec![5]), (3, vec![6]), (3, vec![4, 4]), (3, vec![])]
        {
            assert_covers(&Design::new(k, &levels).unwrap());
        }
    }
}
