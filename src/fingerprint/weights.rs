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
    Unit(Box<UnitCounts>),
    Weighted(Box<WeightedSums>),
    /// every occurrence, counted at the end (log-TF, binary)
    Collected(&'a mut Vec<u64>),
}

impl<'a> Accumulator<'a> {
    /// `scratch` is a reusable buffer for the modes that count occurrences.
    pub fn new(tf: TfMode, idf: Option<&'a IdfTable>, scratch: &'a mut Vec<u64>) -> Self {
        let state = match (tf, idf) {
            (TfMode::Raw, None) => State::Unit(Box::new(UnitCounts::new())),
            (TfMode::Raw, Some(_)) => State::Weighted(Box::new(WeightedSums([0; 64]))),
            _ => {
                scratch.clear();
                State::Collected(scratch)
            }
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
            State::Collected(v) => v.push(h),
        }
    }

    /// The fingerprint: bit i is 1 where the weighted sum for bit i is positive.
    pub fn finish(self) -> u64 {
        match self.state {
            State::Unit(mut c) => c.bits(),
            State::Weighted(s) => s.bits(),
            State::Collected(v) => {
                v.sort_unstable();
                let runs = v
                    .chunk_by(|a, b| a == b)
                    .map(|run| (run[0], run.len() as u32));
                match (self.tf, self.idf) {
                    (TfMode::Binary, None) => {
                        let mut counts = UnitCounts::new();
                        runs.for_each(|(h, _)| counts.add(h));
                        counts.bits()
                    }
                    _ => {
                        let mut sums = WeightedSums([0; 64]);
                        for (h, count) in runs {
                            let idf = self.idf.map_or(1, |t| i64::from(t.weight(h)));
                            sums.add(h, self.tf.weight(count) * idf);
                        }
                        sums.bits()
                    }
                }
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
            let mut scratch = Vec::new();
            let mut acc = Accumulator::new(TfMode::Raw, None, &mut scratch);
            hs.iter().for_each(|&h| acc.add(h));
            let expect = naive(&hs.iter().map(|&h| (h, 1)).collect::<Vec<_>>());
            assert_eq!(acc.finish(), expect, "n = {n}");
        }
    }

    #[test]
    fn log_and_binary_weights() {
        let hs = [1u64, 1, 1, 1, 2, u64::MAX];
        let mut scratch = Vec::new();
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
    fn ties_give_zero_bits() {
        let mut scratch = Vec::new();
        let acc = Accumulator::new(TfMode::Raw, None, &mut scratch);
        assert_eq!(acc.finish(), 0);
        let mut acc = Accumulator::new(TfMode::Raw, None, &mut scratch);
        acc.add(0xFFFF_FFFF_0000_0000);
        acc.add(0x0000_0000_FFFF_FFFF);
        assert_eq!(acc.finish(), 0);
    }
}
