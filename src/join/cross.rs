//! The inner loop of every join: all pairs within `k` between two small sorted groups, on
//! the widest population count the CPU has.

/// Calls `hit(a, b)` for every `a` of `xs` and `b` of `ys` within distance `k`: the inner
/// loop of both joins, compiled for the widest population count the CPU has (AVX-512
/// VPOPCNTQ checks eight pairs per instruction, POPCNT one).
pub(crate) fn cross_pairs(xs: &[u64], ys: &[u64], k: u32, hit: &mut dyn FnMut(u64, u64)) {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::cpu::has_avx512_popcnt() {
            // SAFETY: `cross_pairs_avx512` needs AVX-512F/VL/BW and VPOPCNTDQ, all just
            // confirmed by `has_avx512_popcnt`. Exercised by every batch test on such CPUs
            // against the brute-force oracle in tests/it/batch.rs.
            unsafe { cross_pairs_avx512(xs, ys, k, hit) };
            return;
        }
        if crate::cpu::has_bmi2_popcnt() {
            // SAFETY: `cross_pairs_popcnt` needs only BMI1/2 and POPCNT, just confirmed by
            // `has_bmi2_popcnt`; tested as above.
            unsafe { cross_pairs_popcnt(xs, ys, k, hit) };
            return;
        }
    }
    cross_pairs_portable(xs, ys, k, hit);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512vpopcntdq,bmi1,bmi2,popcnt")]
fn cross_pairs_avx512(xs: &[u64], ys: &[u64], k: u32, hit: &mut dyn FnMut(u64, u64)) {
    cross_pairs_portable(xs, ys, k, hit);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "bmi1,bmi2,popcnt")]
fn cross_pairs_popcnt(xs: &[u64], ys: &[u64], k: u32, hit: &mut dyn FnMut(u64, u64)) {
    cross_pairs_portable(xs, ys, k, hit);
}

/// Most `x` have no `y` within `k` (a batch query meets a prefix group of a hundred or more
/// entries and matches about one of them in all the tables): the smallest distance from `x`
/// to the group is a plain minimum reduction, which compilers vectorize (XOR, population
/// count and minimum, lane by lane; one horizontal step per `x`), and only an `x` within
/// `k` of something is walked again to report its pairs.
#[inline(always)]
fn cross_pairs_portable(xs: &[u64], ys: &[u64], k: u32, hit: &mut dyn FnMut(u64, u64)) {
    for &x in xs {
        let nearest = ys.iter().fold(u64::MAX, |m, &y| m.min(u64::from((x ^ y).count_ones())));
        if nearest > u64::from(k) {
            continue;
        }
        // Near-duplicate queries pass in most tables: find their pairs eight entries at a
        // time the same way, looking at single entries only in a chunk within `k`.
        for chunk in ys.chunks(8) {
            let nearest = chunk.iter().fold(u64::MAX, |m, &y| m.min(u64::from((x ^ y).count_ones())));
            if nearest > u64::from(k) {
                continue;
            }
            for &y in chunk {
                if (x ^ y).count_ones() <= k {
                    hit(x, y);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kernel this CPU runs (AVX-512 or POPCNT, and the portable one) finds exactly
    /// the pairs a plain double loop finds, remainders of the 8-lane chunks included.
    #[test]
    fn cross_pairs_equals_a_double_loop() {
        let mut x = 0x5eed_u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let base = next();
        for (nx, ny) in [(0usize, 5usize), (1, 0), (3, 7), (5, 8), (15, 153), (40, 17)] {
            // near copies of one value, so that every k finds some pairs and misses others
            let xs: Vec<u64> = (0..nx).map(|i| base ^ (next() & next() & next()) ^ (i as u64)).collect();
            let ys: Vec<u64> = (0..ny).map(|_| base ^ (next() & next() & next())).collect();
            for k in [0, 3, 8, 20, 64] {
                let want: Vec<(u64, u64)> = xs.iter().flat_map(|&a| ys.iter().filter(move |&&b| (a ^ b).count_ones() <= k).map(move |&b| (a, b))).collect();
                let mut got = Vec::new();
                cross_pairs(&xs, &ys, k, &mut |a, b| got.push((a, b)));
                assert_eq!(got, want, "{nx} x {ny}, k = {k}");
                let mut portable = Vec::new();
                cross_pairs_portable(&xs, &ys, k, &mut |a, b| portable.push((a, b)));
                assert_eq!(portable, want, "{nx} x {ny}, k = {k}");
            }
        }
    }
}
