//! Weighting and the simhash bit rule: feature hashes (with weights) -> the 64-bit fingerprint.
//!
//! All arithmetic is on integers, so a fingerprint never depends on a platform's floating
//! point or `libm`: term-frequency weights are counts, log-TF is `1 + floor(log2 tf)`, and IDF
//! weights are the integers stored in the IDF table (`idf`).

// Indexing: the simhash accumulator's 64 counters are indexed by bit positions below 64, on the per-feature hot path.
#![allow(clippy::indexing_slicing)]

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
        [TfMode::Raw, TfMode::Log, TfMode::Binary].into_iter().find(|m| m.name() == s)
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
/// k-th byte lane, so eight adds count all 64 bits of a word.
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

/// Hashes counted together by [`UnitCounts`]'s adder tree.
const GROUP: usize = 16;

/// Per-bit counts of unit-weight hashes: how many of the added hashes have bit i set.
///
/// Hashes are counted sixteen at a time by a carry-save adder tree on whole words (the
/// Harley-Seal population count, done per bit position): bit i of the planes `ones`, `twos`,
/// `fours`, `eights` is a 4-bit counter for position i, and each group of sixteen hashes
/// carries one word `sixteens` out of it, whose bits are added to byte lanes (`lanes`) that
/// flush into `counts` before they can overflow. About seven word operations per hash
/// instead of 64 additions.
#[derive(Debug, Clone)]
struct UnitCounts {
    group: [u64; GROUP],
    grouped: usize,
    planes: [u64; 4],
    /// byte k of `lanes[j]`: sixteens carried out of position 8j+k since the last flush
    lanes: [u64; 8],
    pending: u32,
    /// sixteens carried out of each position, flushed from `lanes`
    counts: [u64; 64],
    total: u64,
}

impl Default for UnitCounts {
    fn default() -> Self {
        UnitCounts { group: [0; GROUP], grouped: 0, planes: [0; 4], lanes: [0; 8], pending: 0, counts: [0; 64], total: 0 }
    }
}

/// Carry-save adder: `(carry, sum)` of three words, bit by bit.
#[inline(always)]
fn csa(a: u64, b: u64, c: u64) -> (u64, u64) {
    let u = a ^ b;
    ((a & b) | (u & c), u ^ c)
}

impl UnitCounts {
    fn reset(&mut self) {
        *self = UnitCounts::default();
    }

    /// Counts the bits of `h`.
    #[inline]
    fn add(&mut self, h: u64) {
        self.group[self.grouped] = h;
        self.grouped += 1;
        if self.grouped == GROUP {
            self.add_group();
        }
    }

    fn add_group(&mut self) {
        let d = &self.group;
        let [mut ones, mut twos, mut fours, mut eights] = self.planes;
        let (twos_a, o) = csa(ones, d[0], d[1]);
        let (twos_b, o) = csa(o, d[2], d[3]);
        let (fours_a, t) = csa(twos, twos_a, twos_b);
        let (twos_a, o) = csa(o, d[4], d[5]);
        let (twos_b, o) = csa(o, d[6], d[7]);
        let (fours_b, t) = csa(t, twos_a, twos_b);
        let (eights_a, f) = csa(fours, fours_a, fours_b);
        let (twos_a, o) = csa(o, d[8], d[9]);
        let (twos_b, o) = csa(o, d[10], d[11]);
        let (fours_a, t) = csa(t, twos_a, twos_b);
        let (twos_a, o) = csa(o, d[12], d[13]);
        let (twos_b, o) = csa(o, d[14], d[15]);
        let (fours_b, t) = csa(t, twos_a, twos_b);
        let (eights_b, f) = csa(f, fours_a, fours_b);
        let (sixteens, e) = csa(eights, eights_a, eights_b);
        (ones, twos, fours, eights) = (o, t, f, e);
        self.planes = [ones, twos, fours, eights];
        self.grouped = 0;
        self.total += GROUP as u64;
        for (j, lane) in self.lanes.iter_mut().enumerate() {
            *lane += SPREAD[((sixteens >> (8 * j)) & 0xFF) as usize];
        }
        self.pending += 1;
        if self.pending == 255 {
            self.flush_lanes();
        }
    }

    fn flush_lanes(&mut self) {
        for (j, lane) in self.lanes.iter_mut().enumerate() {
            for k in 0..8 {
                self.counts[8 * j + k] += (*lane >> (8 * k)) & 0xFF;
            }
            *lane = 0;
        }
        self.pending = 0;
    }

    /// For each bit position, how many hashes have that bit set; and how many hashes there are.
    fn ones(&mut self) -> ([u64; 64], u64) {
        self.flush_lanes();
        let mut ones = [0; 64];
        for (i, n) in ones.iter_mut().enumerate() {
            let plane = |p: usize| (self.planes[p] >> i) & 1;
            let rest = self.group[..self.grouped].iter().map(|h| (h >> i) & 1);
            *n = 16 * self.counts[i] + plane(0) + 2 * plane(1) + 4 * plane(2) + 8 * plane(3) + rest.sum::<u64>();
        }
        (ones, self.total + self.grouped as u64)
    }

    /// The simhash bits: bit i is 1 where more than half of the hashes have bit i set.
    fn bits(&mut self) -> u64 {
        let (ones, total) = self.ones();
        // V[i] = ones - (total - ones) > 0
        (0..64).fold(0, |fp, i| fp | (u64::from(2 * ones[i] > total) << i))
    }
}

/// Per-bit sums for arbitrary integer weights: for each bit position, the weight of the
/// hashes with that bit set, and the weight of them all; the paper's `V[i]` (each hash adding
/// its weight where its bit is set and subtracting it where not) is `2 * ones[i] - total`.
#[derive(Debug, Clone)]
struct WeightedSums {
    ones: [i64; 64],
    total: i64,
}

impl Default for WeightedSums {
    fn default() -> Self {
        WeightedSums { ones: [0; 64], total: 0 }
    }
}

impl WeightedSums {
    fn reset(&mut self) {
        *self = WeightedSums::default();
    }

    #[inline]
    fn add(&mut self, h: u64, w: i64) {
        add_weighted(&mut self.ones, &mut self.total, std::slice::from_ref(&h), std::slice::from_ref(&w));
    }

    /// Adds `hashes[i]` with weight `weights[i]`, for each `i`: one loop the CPU's widest
    /// vectors run (the bits of a hash select which sums its weight goes to).
    fn add_many(&mut self, hashes: &[u64], weights: &[i64]) {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                // SAFETY: `add_weighted_avx512` needs AVX-512F, just detected; it runs the
                // portable loop (`weighted_sums_match_on_every_path` checks the answers).
                unsafe { add_weighted_avx512(&mut self.ones, &mut self.total, hashes, weights) };
                return;
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: as above, for AVX2.
                unsafe { add_weighted_avx2(&mut self.ones, &mut self.total, hashes, weights) };
                return;
            }
        }
        add_weighted(&mut self.ones, &mut self.total, hashes, weights);
    }

    fn bits(&self) -> u64 {
        (0..64).fold(0, |fp, i| fp | (u64::from(2 * self.ones[i] - self.total > 0) << i))
    }
}

/// [`WeightedSums::add_many`]'s loop, branch-free so that it vectorises.
#[inline(always)]
fn add_weighted(ones: &mut [i64; 64], total: &mut i64, hashes: &[u64], weights: &[i64]) {
    for (&h, &w) in hashes.iter().zip(weights) {
        *total += w;
        for (i, v) in ones.iter_mut().enumerate() {
            // all ones where bit i is set
            let mask = 0i64.wrapping_sub(((h >> i) & 1) as i64);
            *v += w & mask;
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn add_weighted_avx512(ones: &mut [i64; 64], total: &mut i64, hashes: &[u64], weights: &[i64]) {
    add_weighted(ones, total, hashes, weights);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn add_weighted_avx2(ones: &mut [i64; 64], total: &mut i64, hashes: &[u64], weights: &[i64]) {
    add_weighted(ones, total, hashes, weights);
}

/// Occurrence counts of the distinct features of one document: open addressing with linear
/// probing on the (uniform) feature hash, reused from document to document. At most a quarter
/// of the slots are taken, so a probe rarely meets another key (a branch the CPU predicts),
/// and keys are 8 bytes, so the table of a typical page stays in the L1 cache.
#[derive(Debug, Clone, Default)]
pub struct CountTable {
    /// feature hashes by slot; 0 marks an empty slot (the hash 0 is counted in `zero`)
    keys: Vec<u64>,
    /// occurrences by slot
    counts: Vec<u32>,
    /// the occupied slots, in insertion order (for iteration and clearing)
    used: Vec<u32>,
    /// occurrences of the hash 0
    zero: u32,
}

impl CountTable {
    /// Distinct hashes counted.
    fn len(&self) -> usize {
        self.used.len() + usize::from(self.zero > 0)
    }

    fn clear(&mut self) {
        for &i in &self.used {
            self.keys[i as usize] = 0;
        }
        self.used.clear();
        self.zero = 0;
    }

    /// Counts one occurrence of `h`; returns whether it is the first.
    #[inline]
    fn insert(&mut self, h: u64) -> bool {
        self.insert_n(h, 1)
    }

    /// Counts `n` (at least 1) occurrences of `h`; returns whether they are the first.
    #[inline]
    fn insert_n(&mut self, h: u64, n: u32) -> bool {
        if h == 0 {
            self.zero += n;
            return self.zero == n;
        }
        if 4 * (self.used.len() + 1) > self.keys.len() {
            self.grow();
        }
        let mask = self.keys.len() - 1;
        let mut i = (h as usize) & mask;
        loop {
            let key = self.keys[i];
            if key == 0 {
                self.keys[i] = h;
                self.counts[i] = n;
                self.used.push(i as u32);
                return true;
            }
            if key == h {
                self.counts[i] += n;
                return false;
            }
            i = (i + 1) & mask;
        }
    }

    #[cold]
    fn grow(&mut self) {
        let entries: Vec<(u64, u32)> = self.nonzero_entries().collect();
        let cap = (self.keys.len() * 2).max(1024);
        self.keys = vec![0; cap];
        self.counts = vec![0; cap];
        self.used.clear();
        for (h, c) in entries {
            self.insert(h);
            if let Some(&i) = self.used.last() {
                self.counts[i as usize] = c;
            }
        }
    }

    fn nonzero_entries(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.used.iter().map(|&i| (self.keys[i as usize], self.counts[i as usize]))
    }

    /// `(hash, occurrences)` of every distinct feature.
    fn entries(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        let zero = (self.zero > 0).then_some((0, self.zero));
        self.nonzero_entries().chain(zero)
    }
}

/// What the accumulators reuse from document to document (one per [`super::Fingerprinter`]).
#[derive(Debug, Clone, Default)]
pub struct Scratch {
    table: CountTable,
    unit: Box<UnitCounts>,
    sums: Box<WeightedSums>,
    /// first occurrences of a batch, whose IDF weights are looked up together
    distinct: Vec<u64>,
    /// the weights of a batch of hashes
    weights: Vec<i64>,
}

/// The simhash accumulator of one document (the vector V of the paper, section 1).
#[derive(Debug)]
pub struct Accumulator<'a> {
    mode: Mode,
    idf: Option<&'a IdfTable>,
    tf: TfMode,
    scratch: &'a mut Scratch,
    features: u64,
}

#[derive(Debug, Clone, Copy)]
enum Mode {
    /// raw TF without IDF: every occurrence counts 1
    Unit,
    /// raw TF with IDF: every occurrence adds its IDF weight
    Weighted,
    /// binary without IDF: the first occurrence of each feature counts 1
    DistinctUnit,
    /// binary with IDF: the first occurrence of each feature adds its IDF weight
    DistinctWeighted,
    /// log-TF: counted, weighted at the end
    Counted,
}

impl<'a> Accumulator<'a> {
    /// `scratch` is reused between documents.
    pub fn new(tf: TfMode, idf: Option<&'a IdfTable>, scratch: &'a mut Scratch) -> Self {
        let mode = match (tf, idf) {
            (TfMode::Raw, None) => Mode::Unit,
            (TfMode::Raw, Some(_)) => Mode::Weighted,
            (TfMode::Binary, None) => Mode::DistinctUnit,
            (TfMode::Binary, Some(_)) => Mode::DistinctWeighted,
            (TfMode::Log, _) => Mode::Counted,
        };
        match mode {
            Mode::Unit => scratch.unit.reset(),
            Mode::Weighted => scratch.sums.reset(),
            Mode::DistinctUnit => {
                scratch.table.clear();
                scratch.unit.reset();
            }
            Mode::DistinctWeighted => {
                scratch.table.clear();
                scratch.sums.reset();
            }
            Mode::Counted => scratch.table.clear(),
        }
        Accumulator { mode, idf, tf, scratch, features: 0 }
    }

    /// An accumulator that only counts each feature's occurrences, for
    /// [`Accumulator::into_counts`] (whatever the recipe's weights).
    pub fn counting(scratch: &'a mut Scratch) -> Self {
        scratch.table.clear();
        Accumulator { mode: Mode::Counted, idf: None, tf: TfMode::Raw, scratch, features: 0 }
    }

    /// The distinct features added and their occurrences (`counts` left empty when
    /// `with_counts` is false), in the order they were first added. Only for an accumulator
    /// made by [`Accumulator::counting`].
    pub fn into_counts(self, distinct: &mut Vec<u64>, counts: &mut Vec<u32>, with_counts: bool) {
        debug_assert!(matches!(self.mode, Mode::Counted));
        distinct.clear();
        counts.clear();
        let n = self.scratch.table.len();
        distinct.reserve_exact(n);
        if with_counts {
            counts.reserve_exact(n);
        }
        for (h, n) in self.scratch.table.entries() {
            distinct.push(h);
            if with_counts {
                counts.push(n);
            }
        }
    }

    /// Adds `counts[i]` occurrences (one each when `counts` is empty) of each of the distinct
    /// features `hashes`: the same as adding every occurrence by [`Accumulator::add`].
    pub fn add_distinct(&mut self, hashes: &[u64], counts: &[u32]) {
        self.add_distinct_weighing(hashes, counts, None);
    }

    /// [`Accumulator::add_distinct`], with the features' IDF weights in the accumulator's
    /// table given (`idf_weights[i]` that of `hashes[i]`, looked up once for many documents)
    /// where its mode weighs features as it adds them; ignored where it does not.
    pub fn add_distinct_weighing(&mut self, hashes: &[u64], counts: &[u32], idf_weights: Option<&[u32]>) {
        debug_assert!(counts.is_empty() || counts.len() == hashes.len());
        debug_assert!(idf_weights.is_none_or(|w| w.len() == hashes.len()));
        let count = |i: usize| counts.get(i).copied().unwrap_or(1);
        self.features += if counts.is_empty() { hashes.len() as u64 } else { counts.iter().map(|&c| u64::from(c)).sum() };
        let Scratch { table, unit, sums, weights, .. } = &mut *self.scratch;
        let idf = self.idf;
        let mut add_weighted = |times: &dyn Fn(usize) -> u32| {
            weights.clear();
            match (idf, idf_weights) {
                (Some(_), Some(known)) => weights.extend(known.iter().enumerate().map(|(i, &w)| i64::from(w) * i64::from(times(i)))),
                (Some(t), None) => t.weights_of(hashes, |i, w| weights.push(i64::from(w) * i64::from(times(i)))),
                (None, _) => weights.extend((0..hashes.len()).map(|i| i64::from(times(i)))),
            }
            sums.add_many(hashes, weights);
        };
        match self.mode {
            Mode::Unit => {
                for (i, &h) in hashes.iter().enumerate() {
                    (0..count(i)).for_each(|_| unit.add(h));
                }
            }
            Mode::DistinctUnit => hashes.iter().for_each(|&h| unit.add(h)),
            Mode::Weighted => add_weighted(&count),
            Mode::DistinctWeighted => add_weighted(&|_| 1),
            Mode::Counted => {
                for (i, &h) in hashes.iter().enumerate() {
                    table.insert_n(h, count(i));
                }
            }
        }
    }

    /// Feature occurrences seen so far.
    pub fn features(&self) -> u64 {
        self.features
    }

    #[inline]
    fn idf_weight(&self, h: u64) -> i64 {
        self.idf.map_or(1, |t| i64::from(t.weight(h)))
    }

    /// Adds one occurrence of the feature with hash `h`.
    #[inline]
    pub fn add(&mut self, h: u64) {
        self.features += 1;
        match self.mode {
            Mode::Unit => self.scratch.unit.add(h),
            Mode::Weighted => {
                let w = self.idf_weight(h);
                self.scratch.sums.add(h, w)
            }
            Mode::DistinctUnit => {
                if self.scratch.table.insert(h) {
                    self.scratch.unit.add(h)
                }
            }
            Mode::DistinctWeighted => {
                if self.scratch.table.insert(h) {
                    let w = self.idf_weight(h);
                    self.scratch.sums.add(h, w)
                }
            }
            Mode::Counted => {
                self.scratch.table.insert(h);
            }
        }
    }

    /// [`Accumulator::add`] for each of `hashes`.
    pub fn add_all(&mut self, hashes: &[u64]) {
        self.features += hashes.len() as u64;
        let Scratch { table, unit, sums, distinct, weights } = &mut *self.scratch;
        // the weights of a batch are looked up together (`IdfTable::weights_of`): in a large
        // table nearly every lookup is a cache miss, and these overlap
        let idf = self.idf;
        let mut add_weighted = |hashes: &[u64]| {
            weights.clear();
            match idf {
                Some(t) => t.weights_of(hashes, |_, w| weights.push(i64::from(w))),
                None => weights.resize(hashes.len(), 1),
            }
            sums.add_many(hashes, weights);
        };
        match self.mode {
            Mode::Unit => hashes.iter().for_each(|&h| unit.add(h)),
            Mode::Weighted => add_weighted(hashes),
            Mode::DistinctUnit => {
                for &h in hashes {
                    if table.insert(h) {
                        unit.add(h);
                    }
                }
            }
            Mode::DistinctWeighted => {
                distinct.clear();
                distinct.extend(hashes.iter().copied().filter(|&h| table.insert(h)));
                add_weighted(distinct);
            }
            Mode::Counted => {
                for &h in hashes {
                    table.insert(h);
                }
            }
        }
    }

    /// The fingerprint: bit i is 1 where the weighted sum for bit i is positive.
    pub fn finish(self) -> u64 {
        match self.mode {
            Mode::Unit | Mode::DistinctUnit => self.scratch.unit.bits(),
            Mode::Weighted | Mode::DistinctWeighted => self.scratch.sums.bits(),
            Mode::Counted => {
                let mut sums = WeightedSums::default();
                for (h, count) in self.scratch.table.entries() {
                    sums.add(h, self.tf.weight(count) * self.idf_weight(h));
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
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        super::super::hash::fmix64(*seed)
    }

    #[test]
    fn unit_counts_count_every_bit_across_groups_and_flushes() {
        let mut s = 3;
        for n in [0usize, 1, 15, 16, 17, 255 * 16 - 1, 255 * 16, 255 * 16 + 1, 10_000] {
            let hs: Vec<u64> = (0..n).map(|i| if i % 5 == 0 { u64::MAX } else { lcg(&mut s) }).collect();
            let mut c = UnitCounts::default();
            hs.iter().for_each(|&h| c.add(h));
            let mut expect = [0u64; 64];
            for h in &hs {
                for (i, e) in expect.iter_mut().enumerate() {
                    *e += (h >> i) & 1;
                }
            }
            assert_eq!(c.ones(), (expect, n as u64), "n = {n}");
        }
    }

    #[test]
    fn unit_counts_match_naive_rule_across_flushes() {
        let mut s = 7;
        for n in [0usize, 1, 2, 254, 255, 256, 1000, 4081, 9000] {
            let hs: Vec<u64> = (0..n).map(|i| if i % 3 == 0 { 42 } else { lcg(&mut s) }).collect();
            let mut scratch = Scratch::default();
            let mut acc = Accumulator::new(TfMode::Raw, None, &mut scratch);
            hs.iter().for_each(|&h| acc.add(h));
            let expect = naive(&hs.iter().map(|&h| (h, 1)).collect::<Vec<_>>());
            assert_eq!(acc.finish(), expect, "n = {n}");
        }
    }

    /// The vector paths (whichever this CPU takes) against the portable loop and the naive
    /// rule, with weights of every size.
    #[test]
    fn weighted_sums_match_on_every_path() {
        let mut s = 11;
        for n in [0usize, 1, 7, 64, 1000] {
            let hs: Vec<u64> = (0..n).map(|_| lcg(&mut s)).collect();
            let ws: Vec<i64> = (0..n).map(|i| [1, 7, 65535, 65535 * 40][i % 4]).collect();
            let mut fast = WeightedSums::default();
            fast.add_many(&hs, &ws);
            let mut portable = WeightedSums::default();
            add_weighted(&mut portable.ones, &mut portable.total, &hs, &ws);
            assert_eq!((fast.ones, fast.total), (portable.ones, portable.total), "n = {n}");
            let pairs: Vec<(u64, i64)> = hs.iter().copied().zip(ws.iter().copied()).collect();
            assert_eq!(fast.bits(), naive(&pairs), "n = {n}");
        }
    }

    #[test]
    fn log_and_binary_weights() {
        let hs = [1u64, 1, 1, 1, 2, u64::MAX];
        let mut scratch = Scratch::default();
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
            assert!(t.insert(0) && !t.insert(0), "hash 0 is a key like any other");
            let counts: std::collections::HashMap<u64, u32> = t.entries().collect();
            assert_eq!(counts.len(), 3001);
            for (i, k) in keys.iter().enumerate() {
                assert_eq!(counts[k], if i % 3 == 0 { 2 } else { 1 });
            }
        }
    }

    #[test]
    fn ties_give_zero_bits() {
        let mut scratch = Scratch::default();
        let acc = Accumulator::new(TfMode::Raw, None, &mut scratch);
        assert_eq!(acc.finish(), 0);
        let mut acc = Accumulator::new(TfMode::Raw, None, &mut scratch);
        acc.add(0xFFFF_FFFF_0000_0000);
        acc.add(0x0000_0000_FFFF_FFFF);
        assert_eq!(acc.finish(), 0);
    }
}
