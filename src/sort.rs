//! Sorting of fingerprint arrays: LSD radix sort, which beats comparison sorts by several
//! times on the large uniform arrays the segment builder sorts once per table.

/// Below this length a comparison sort is faster than setting up the radix passes.
const SMALL: usize = 1 << 12;

/// Sorts `values` ascending.
pub fn sort_u64(values: &mut Vec<u64>) {
    if values.len() < SMALL {
        values.sort_unstable();
        return;
    }
    lsd_by(values, |&v| v, 0);
}

/// Sorts `(fingerprint, id)` pairs ascending (by fingerprint, then id).
pub fn sort_pairs(pairs: &mut Vec<(u64, u64)>) {
    if pairs.len() < SMALL {
        pairs.sort_unstable();
        return;
    }
    // LSD: by id, then stably by fingerprint. Ids usually arrive in order: skip that pass.
    if !pairs.windows(2).all(|w| w[0].1 <= w[1].1) {
        lsd_by(pairs, |p| p.1, 0);
    }
    lsd_by(pairs, |p| p.0, 0);
}

/// Stably sorts `values` by their top `bits` bits only. Used to derive a permuted table's
/// order from table 0's in one or two passes (see `segment::writer::build_segment`).
pub fn sort_by_top_bits(values: &mut Vec<u64>, bits: u32) {
    if bits == 0 {
        return;
    }
    if values.len() < SMALL {
        values.sort_by_key(|&v| v >> (64 - bits));
        return;
    }
    lsd_by(values, |&v| v, 64 - bits);
}

/// Stable LSD radix sort by bits `low..64` of `key`, eight bits per pass from `low` up.
fn lsd_by<T: Copy + Default>(values: &mut Vec<T>, key: impl Fn(&T) -> u64, low: u32) {
    let digits: Vec<(u32, u64)> = (low..64).step_by(8).map(|shift| (shift, (1u64 << (64 - shift).min(8)) - 1)).collect();
    // One pass over the data counts every digit at once.
    let mut counts = vec![[0usize; 256]; digits.len()];
    for v in values.iter() {
        let k = key(v);
        for (c, &(shift, mask)) in counts.iter_mut().zip(&digits) {
            c[((k >> shift) & mask) as usize] += 1;
        }
    }
    let n = values.len();
    let mut src = std::mem::take(values);
    let mut dst = vec![T::default(); n];
    for (c, &(shift, mask)) in counts.iter().zip(&digits) {
        // A digit shared by every value does not reorder anything.
        if c.contains(&n) {
            continue;
        }
        let mut offsets = [0usize; 256];
        let mut sum = 0;
        for (o, &x) in offsets.iter_mut().zip(c.iter()) {
            *o = sum;
            sum += x;
        }
        for v in &src {
            let b = ((key(v) >> shift) & mask) as usize;
            dst[offsets[b]] = *v;
            offsets[b] += 1;
        }
        std::mem::swap(&mut src, &mut dst);
    }
    *values = src;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_like_the_standard_library() {
        let mut x: u64 = 0x1234_5678;
        let mut v: Vec<u64> = (0..100_000)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if i % 7 == 0 {
                    x & 0xffff
                } else {
                    x
                }
            })
            .collect();
        let mut want = v.clone();
        want.sort_unstable();
        sort_u64(&mut v);
        assert_eq!(v, want);
        let mut same = vec![42u64; 10_000];
        sort_u64(&mut same);
        assert!(same.iter().all(|&x| x == 42));
    }

    #[test]
    fn pairs_sort_by_fingerprint_then_id() {
        let mut x: u64 = 3;
        let mut pairs: Vec<(u64, u64)> = (0..20_000u64)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % 5000, if i % 3 == 0 { x >> 3 } else { i })
            })
            .collect();
        let mut want = pairs.clone();
        want.sort_unstable();
        sort_pairs(&mut pairs);
        assert_eq!(pairs, want);
    }

    #[test]
    fn sort_by_top_bits_is_stable_and_orders_the_key() {
        let mut x: u64 = 0xfeed;
        let base: Vec<u64> = (0..50_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            })
            .collect();
        for bits in [1u32, 7, 8, 12, 16, 25, 26, 33, 48, 63, 64] {
            for len in [100usize, 50_000] {
                let mut v = base[..len].to_vec();
                let mut want = v.clone();
                want.sort_by_key(|&y| y >> (64 - bits)); // std's sort_by_key is stable
                sort_by_top_bits(&mut v, bits);
                assert_eq!(v, want, "bits {bits} len {len}");
            }
        }
    }
}
