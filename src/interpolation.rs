//! Interpolation search over sorted block keys, with a bounded fallback to binary search.
//!
//! Block keys of a table of uniformly distributed fingerprints are themselves close to
//! uniform, so interpolating the target's position takes O(log log n) probes. Clustered
//! data (many equal or close keys) can make interpolation crawl; after a fixed budget of
//! interpolation probes the search halves the range instead, so the worst case stays
//! O(log n).

// Indexing: the search's probes are clamped to the range it narrows; the hot path of every block-key search.
#![allow(clippy::indexing_slicing)]
/// Ranges this short are finished with a linear scan.
const LINEAR: usize = 8;

/// Index of the first key `>= target` in ascending `keys`, or `keys.len()` if none is.
#[inline]
pub fn lower_bound(keys: &[u64], target: u64) -> usize {
    lower_bound_by(keys, target, |&k| k)
}

/// [`lower_bound`] over items ordered by `key` (the memtable searches its entries by
/// fingerprint this way).
#[inline]
pub fn lower_bound_by<T>(items: &[T], target: u64, key: impl Fn(&T) -> u64) -> usize {
    let (mut lo, mut hi) = (0usize, items.len());
    // Invariant: keys of items[..lo] < target <= keys of items[hi..].
    let mut budget = interpolation_budget(items.len());
    while hi - lo > LINEAR {
        let m = if budget > 0 {
            budget -= 1;
            interpolate(key(&items[lo]), key(&items[hi - 1]), lo, hi, target)
        } else {
            lo + (hi - lo) / 2
        };
        if key(&items[m]) < target {
            lo = m + 1;
        } else {
            hi = m;
        }
    }
    while lo < hi && key(&items[lo]) < target {
        lo += 1;
    }
    lo
}

/// Twice `log2 log2 n` plus a margin: plenty for uniform keys, small enough that a skewed
/// table falls back to binary search early.
fn interpolation_budget(n: usize) -> u32 {
    let log_n = usize::BITS - n.leading_zeros();
    2 * (u32::BITS - log_n.leading_zeros()) + 2
}

/// The interpolated probe position in `lo..hi` (`hi - lo > 1`), whose first and last keys
/// are `first` and `last`.
#[inline]
fn interpolate(first: u64, last: u64, lo: usize, hi: usize, target: u64) -> usize {
    if target <= first {
        return lo;
    }
    if target > last {
        return hi - 1;
    }
    let span = u128::from(last - first);
    let pos = u128::from(target - first) * (hi - 1 - lo) as u128 / span;
    lo + pos as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oracle(keys: &[u64], t: u64) -> usize {
        keys.partition_point(|&k| k < t)
    }

    #[test]
    fn matches_partition_point_on_uniform_and_skewed_keys() {
        let mut x: u64 = 99;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut uniform: Vec<u64> = (0..10_000).map(|_| next()).collect();
        uniform.sort_unstable();
        let mut skewed: Vec<u64> = (0..10_000u64).map(|i| if i < 9_000 { i / 100 } else { u64::MAX - i }).collect();
        skewed.sort_unstable();
        let dupes = vec![5u64; 1000];
        for keys in [&uniform[..], &skewed[..], &dupes[..], &[], &[0], &[u64::MAX]] {
            let mut targets = vec![0, 1, 4, 5, 6, u64::MAX, u64::MAX - 1];
            targets.extend(keys.iter().step_by(37).copied());
            targets.extend(keys.iter().step_by(41).map(|k| k.wrapping_add(1)));
            targets.extend((0..200).map(|_| next()));
            for t in targets {
                assert_eq!(lower_bound(keys, t), oracle(keys, t), "target {t}");
            }
        }
    }
}
