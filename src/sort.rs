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
    // One pass over the data counts all eight byte positions at once.
    let mut counts = vec![[0usize; 256]; 8];
    for &v in values.iter() {
        for (d, c) in counts.iter_mut().enumerate() {
            c[((v >> (8 * d)) & 0xff) as usize] += 1;
        }
    }
    let mut src = std::mem::take(values);
    let mut dst = vec![0u64; src.len()];
    let n = src.len();
    for (d, c) in counts.iter().enumerate() {
        // A digit shared by every value does not reorder anything.
        if c.iter().any(|&x| x == n) {
            continue;
        }
        let mut offsets = [0usize; 256];
        let mut sum = 0;
        for (o, &x) in offsets.iter_mut().zip(c.iter()) {
            *o = sum;
            sum += x;
        }
        let shift = 8 * d;
        for &v in &src {
            let b = ((v >> shift) & 0xff) as usize;
            dst[offsets[b]] = v;
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
                if i % 7 == 0 { x & 0xffff } else { x }
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
}
