//! Weighting and the simhash bit rule: feature hashes (with weights) -> the 64-bit fingerprint.
//!
//! All arithmetic is on integers, so a fingerprint never depends on a platform's floating
//! point or `libm`: term-frequency weights are counts, log-TF is `1 + floor(log2 tf)`, and IDF
//! weights are the integers stored in the IDF table (`idf`).

use super::idf::IdfTable;

/// How the number of occurrences of a feature in a document becomes its weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum TfMode {
    /// Weight = number of occurrences (term frequency).
    #[default]
    Raw,
    /// Weight = 1 + floor(log2(occurrences)).
    Log,
    /// Weight = 1 for every distinct feature.
    Binary,
}

impl TfMode {
    /// The name used in recipe descriptors.
    pub fn name(self) -> &'static str {
        match self {
            TfMode::Raw => "tf",
            TfMode::Log => "logtf",
            TfMode::Binary => "binary",
        }
    }

    /// Parses [`TfMode::name`]'s output.
    pub fn parse(s: &str) -> Option<TfMode> {
        [TfMode::Raw, TfMode::Log, TfMode::Binary]
            .into_iter()
            .find(|m| m.name() == s)
    }

    #[inline]
    fn weight(self, count: u32) -> i64 {
        match self {
            TfMode::Raw => i64::from(count),
            TfMode::Log => 1 + i64::from(count.ilog2()),
            TfMode::Binary => 1,
        }
    }
}

/// `SPREAD[b]` has byte k equal to bit k of `b`: adding it to a u64 adds bit k of `b` to the
/// k-th byte lane, so eight adds count all 64 bits of a hash.
const SPREAD: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut b = 0;
    while b < 256 {
        let mut k = 0;
        while k < 8 {
            if b & (1 << k) != 0 {
                t[b] |= 1 << (8 * k);
            }
            k += 1;
        }
        b += 1;
    }
    t
};

/// Per-bit counters for unit weights: byte lanes that flush into u64 counters before they
/// can overflow.
#[derive(Debug, Clone)]
struct UnitCounts {
    lanes: [u64; 8],
    pending: u32,
    ones: [u64; 64],
    total: u64,
}

impl UnitCounts {
    fn new() -> Self {
        UnitCounts {
            lanes: [0; 8],
            pending: 0,
            ones: [0; 64],
            total: 0,
        }
    }

    #[inline]
    fn add(&mut self, h: u64) {
        for (j, lane) in self.lanes.iter_mut().enumerate() {
            *lane += SPREAD[((h >> (8 * j)) & 0xFF) as usize];
        }
        self.pending += 1;
        if self.pending == 255 {
            self.flush();
        }
    }

    fn flush(&mut self) {
        for (j, lane) in self.lanes.iter_mut().enumerate() {
            for k in 0..8 {
                self.ones[8 * j + k] += (*lane >> (8 * k)) & 0xFF;
            }
            *lane = 0;
        }
        self.total += u64::from(self.pending);
        self.pending = 0;
    }

    fn bits(&mut self) -> u64 {
        self.flush();
        // V[i] = ones - (total - ones) > 0
        (0..64).fold(0, |fp, i| {
            fp | (u64::from(2 * self.ones[i] > self.total) << i)
        })
    }
}

/// Signed per-bit sums for arbitrary integer weights.
#[derive(Debug, Clone)]
struct WeightedSums([i64; 64]);

impl WeightedSums {
    #[inline]
    fn add(&mut self, h: u64, w: i64) {
        for (i, v) in self.0.iter_mut().enumerate() {
            let bit = ((h >> i) & 1) as i64; // 0 or 1
            *v += (2 * bit - 1) * w;
        }
    }

    fn bits(&self) -> u64 {
        (0..64).fold(0, |fp, i| fp | (u64::from(self.0[i] > 0) << i))
    }
}

/// Occurrence counts of the distinct features of one document: an open-addressing table
/// keyed by the (uniform) feature hash, reused from document to document.
#[derive(Debug, Clone, Default)]
pub struct CountTable {
    /// `(hash, count)`; count 0 marks an empty slot
    slots: Vec<(u64, u32)>,
    /// indexes of the occupied slots, in insertion order (for iteration and clearing)
    used: Vec<u32>,
}

impl CountTable {
    fn clear(&mut self) {
        for &i in &self.used {
            self.slots[i as usize] = (0, 0);
        }
        self.used.clear();
    }

    /// Counts one occurrence of `h`; returns whether it is the first.
    #[inline]
    fn insert(&mut self, h: u64) -> bool {
        if 2 * (self.used.len() + 1) > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut i = (h as usize) & mask;
        loop {
            let slot = &mut self.slots[i];
            if slot.1 == 0 {
                *slot = (h, 1);
                self.used.push(i as u32);
                return true;
            }
            if slot.0 == h {
                slot.1 += 1;
                return false;
            }
            i = (i + 1) & mask;
        }
    }

    fn grow(&mut self) {
        let entries: Vec<(u64, u32)> = self.used.iter().map(|&i| self.slots[i as usize]).collect();
        let cap = (self.slots.len() * 2).max(1024);
        self.slots = vec![(0, 0); cap];
        self.used.clear();
        for (h, c) in entries {
            self.insert(h);
            if let Some(&i) = self.used.last() {
                self.slots[i as usize].1 = c;
            }
        }
    }

    fn entries(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.used.iter().map(|&i| self.slots[i as usize])
    }
}

/// The simhash accumulator of one document (the vector V of the paper, section 1).
#[derive(Debug)]
pub struct Accumulator<'a> {
    state: State<'a>,
    tf: TfMode,
    idf: Option<&'a IdfTable>,
    features: u64,
}

#[derive(Debug)]
enum State<'a> {
    /// raw TF without IDF: every occurrence counts 1
    Unit(Box<UnitCounts>),
    /// raw TF with IDF: every occurrence adds its IDF weight
    Weighted(Box<WeightedSums>),
    /// binary: the first occurrence of each feature adds its weight
    Distinct(&'a mut CountTable, Box<UnitCounts>, Box<WeightedSums>),
    /// log-TF: counted, weighted at the end
    Counted(&'a mut CountTable),
}

impl<'a> Accumulator<'a> {
    /// `table` is reused between documents by the modes that count occurrences.
    pub fn new(tf: TfMode, idf: Option<&'a IdfTable>, table: &'a mut CountTable) -> Self {
        table.clear();
        let state = match (tf, idf) {
            (TfMode::Raw, None) => State::Unit(Box::new(UnitCounts::new())),
            (TfMode::Raw, Some(_)) => State::Weighted(Box::new(WeightedSums([0; 64]))),
            (TfMode::Binary, _) => State::Distinct(
                table,
                Box::new(UnitCounts::new()),
                Box::new(WeightedSums([0; 64])),
            ),
            (TfMode::Log, _) => State::Counted(table),
        };
        Accumulator {
            state,
            tf,
            idf,
            features: 0,
        }
    }

    /// Feature occurrences seen so far.
    pub fn features(&self) -> u64 {
        self.features
    }

    /// Adds one occurrence of the feature with hash `h`.
    #[inline]
    pub fn add(&mut self, h: u64) {
        self.features += 1;
        match &mut self.state {
            State::Unit(c) => c.add(h),
            State::Weighted(s) => s.add(h, self.idf.map_or(1, |t| i64::from(t.weight(h)))),
            State::Distinct(t, unit, sums) => {
                if t.insert(h) {
                    match self.idf {
                        None => unit.add(h),
                        Some(idf) => sums.add(h, i64::from(idf.weight(h))),
                    }
                }
            }
            State::Counted(t) => {
                t.insert(h);
            }
        }
    }

    /// The fingerprint: bit i is 1 where the weighted sum for bit i is positive.
    pub fn finish(self) -> u64 {
        match self.state {
            State::Unit(mut c) => c.bits(),
            State::Weighted(s) => s.bits(),
            State::Distinct(_, mut unit, sums) => match self.idf {
                None => unit.bits(),
                Some(_) => sums.bits(),
            },
            State::Counted(t) => {
                let mut sums = WeightedSums([0; 64]);
                for (h, count) in t.entries() {
                    let idf = self.idf.map_or(1, |t| i64::from(t.weight(h)));
                    sums.add(h, self.tf.weight(count) * idf);
                }
                sums.bits()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paper's rule computed naively: the oracle for the accumulators.
    fn naive(features: &[(u64, i64)]) -> u64 {
        let mut v = [0i64; 64];
        for &(h, w) in features {
            for (i, x) in v.iter_mut().enumerate() {
                *x += if h >> i & 1 == 1 { w } else { -w };
            }
        }
        (0..64).fold(0, |fp, i| fp | (u64::from(v[i] > 0) << i))
    }

    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        super::super::hash::fmix64(*seed)
    }

    #[test]
    fn unit_counts_match_naive_rule_across_flushes() {
        let mut s = 7;
        for n in [0usize, 1, 2, 254, 255, 256, 1000] {
            let hs: Vec<u64> = (0..n)
                .map(|i| if i % 3 == 0 { 42 } else { lcg(&mut s) })
                .collect();
            let mut scratch = CountTable::default();
            let mut acc = Accumulator::new(TfMode::Raw, None, &mut scratch);
            hs.iter().for_each(|&h| acc.add(h));
            let expect = naive(&hs.iter().map(|&h| (h, 1)).collect::<Vec<_>>());
            assert_eq!(acc.finish(), expect, "n = {n}");
        }
    }

    #[test]
    fn log_and_binary_weights() {
        let hs = [1u64, 1, 1, 1, 2, u64::MAX];
        let mut scratch = CountTable::default();
        let mut acc = Accumulator::new(TfMode::Log, None, &mut scratch);
        hs.iter().for_each(|&h| acc.add(h));
        assert_eq!(acc.finish(), naive(&[(1, 3), (2, 1), (u64::MAX, 1)]));
        let mut acc = Accumulator::new(TfMode::Binary, None, &mut scratch);
        hs.iter().for_each(|&h| acc.add(h));
        assert_eq!(acc.finish(), naive(&[(1, 1), (2, 1), (u64::MAX, 1)]));
        assert_eq!(TfMode::Log.weight(1), 1);
        assert_eq!(TfMode::Log.weight(8), 4);
    }

    #[test]
    fn count_table_counts_across_growth_and_reuse() {
        let mut t = CountTable::default();
        for round in 0..2u64 {
            t.clear();
            let mut s = round;
            let keys: Vec<u64> = (0..3000).map(|_| lcg(&mut s)).collect();
            for (i, &k) in keys.iter().enumerate() {
                assert!(t.insert(k));
                if i % 3 == 0 {
                    assert!(!t.insert(k));
                }
            }
            assert!(
                t.insert(0) && !t.insert(0),
                "hash 0 is a key like any other"
            );
            let counts: std::collections::HashMap<u64, u32> = t.entries().collect();
            assert_eq!(counts.len(), 3001);
            for (i, k) in keys.iter().enumerate() {
                assert_eq!(counts[k], if i % 3 == 0 { 2 } else { 1 });
            }
        }
    }

    #[test]
    fn ties_give_zero_bits() {
        let mut scratch = CountTable::default();
        let acc = Accumulator::new(TfMode::Raw, None, &mut scratch);
        assert_eq!(acc.finish(), 0);
        let mut acc = Accumulator::new(TfMode::Raw, None, &mut scratch);
        acc.add(0xFFFF_FFFF_0000_0000);
        acc.add(0x0000_0000_FFFF_FFFF);
        assert_eq!(acc.finish(), 0);
    }
}
