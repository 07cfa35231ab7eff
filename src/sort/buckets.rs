//! Sorting a batch's queries: a radix pass on the top byte, then each of the 256 buckets
//! with the standard sort (a few thousand values each for a million, sorted within the
//! cache), the buckets shared out between threads. In place (American flag sort, serial) or
//! through a second buffer (counted and scattered by every thread).

// Indexing: 256-entry count arrays indexed by a byte, buffers by positions they counted.
#![allow(clippy::indexing_slicing)]

use super::SMALL;

/// Values below which the parallel partition does not pay for its threads.
const PARALLEL_FROM: usize = 1 << 16;

/// Sorts `values` ascending in place (no second buffer, unlike [`super::sort_u64`]): one in-place
/// radix pass on the top 8 bits (American flag sort), then each of the 256 buckets with the
/// standard sort (a few thousand values each for a million, sorted within the cache), the
/// buckets shared out between `threads` threads.
pub(crate) fn sort_u64_in_place(values: &mut [u64], threads: usize) {
    if values.len() < SMALL {
        values.sort_unstable();
        return;
    }
    let digit = |v: u64| (v >> 56) as usize;
    let mut ends = [0usize; 256];
    for &v in values.iter() {
        if let Some(c) = ends.get_mut(digit(v)) {
            *c += 1;
        }
    }
    let mut heads = [0usize; 256];
    let mut sum = 0;
    for (h, e) in heads.iter_mut().zip(ends.iter_mut()) {
        *h = sum;
        sum += *e;
        *e = sum;
    }
    let starts = heads;
    for b in 0..256 {
        while heads[b] < ends[b] {
            let d = digit(values[heads[b]]);
            if d == b {
                heads[b] += 1;
            } else {
                values.swap(heads[b], heads[d]);
                heads[d] += 1;
            }
        }
    }
    sort_buckets(values, &starts, &ends, threads);
}

/// Sorts each of the 256 buckets of `values` (bucket `b` is `starts[b]..ends[b]`, in order,
/// covering `values`), the buckets shared out between `threads` threads in contiguous runs
/// of about equal size.
fn sort_buckets(values: &mut [u64], starts: &[usize; 256], ends: &[usize; 256], threads: usize) {
    let sum = values.len();
    let parts = threads.clamp(1, 256);
    let mut rest: &mut [u64] = values;
    let mut taken = 0usize;
    let mut pieces: Vec<(&mut [u64], usize, usize)> = Vec::with_capacity(parts);
    let mut first = 0usize;
    for i in 1..=parts {
        let target = sum * i / parts;
        let mut last = first;
        while last < 256 && (ends[last] <= target || i == parts) {
            last += 1;
        }
        let end = if last == 0 { 0 } else { ends[last - 1] };
        let (piece, tail) = std::mem::take(&mut rest).split_at_mut(end - taken);
        pieces.push((piece, first, last));
        rest = tail;
        taken = end;
        first = last;
    }
    let sort_buckets = |(piece, first, last): (&mut [u64], usize, usize)| {
        let base = starts.get(first).copied().unwrap_or(0);
        for b in first..last {
            piece[starts[b] - base..ends[b] - base].sort_unstable();
        }
    };
    if parts == 1 {
        pieces.into_iter().for_each(sort_buckets);
        return;
    }
    std::thread::scope(|s| {
        for piece in pieces {
            s.spawn(move || sort_buckets(piece));
        }
    });
}

/// Sorts `values` ascending as [`sort_u64_in_place`] does, but partitions them by their top
/// byte through `scratch` (resized to `values`' length, kept for the next call) with every
/// thread counting and scattering its share: the in-place pass is serial, and with a
/// million queries it was a fifth of a batch's time on its main thread. `values` ends up
/// holding the sorted values (the two buffers are swapped).
pub(crate) fn sort_u64_parallel(values: &mut Vec<u64>, scratch: &mut Vec<u64>, threads: usize) {
    let n = values.len();
    if threads <= 1 || n < PARALLEL_FROM {
        sort_u64_in_place(values, threads);
        return;
    }
    let digit = |v: u64| (v >> 56) as usize;
    let chunk = n.div_ceil(threads);
    // Each thread counts its share.
    let counts: Vec<[usize; 256]> = std::thread::scope(|s| {
        let handles: Vec<_> = values
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    let mut c = [0usize; 256];
                    for &v in part {
                        c[digit(v)] += 1;
                    }
                    c
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or([0; 256])).collect()
    });
    let mut starts = [0usize; 256];
    let mut ends = [0usize; 256];
    let mut sum = 0usize;
    for b in 0..256 {
        starts[b] = sum;
        sum += counts.iter().map(|c| c[b]).sum::<usize>();
        ends[b] = sum;
    }
    scratch.clear();
    scratch.resize(n, 0);
    // Bucket b of the output holds share 0's values of b, then share 1's, ...: cut the
    // output into those pieces and hand each share its 256.
    let mut pieces: Vec<Vec<&mut [u64]>> = counts.iter().map(|_| Vec::with_capacity(256)).collect();
    let mut rest: &mut [u64] = scratch;
    for b in 0..256 {
        for (share, c) in pieces.iter_mut().zip(&counts) {
            let (piece, tail) = std::mem::take(&mut rest).split_at_mut(c[b]);
            share.push(piece);
            rest = tail;
        }
    }
    std::thread::scope(|s| {
        for (part, mut share) in values.chunks(chunk).zip(pieces) {
            s.spawn(move || {
                let mut at = [0usize; 256];
                for &v in part {
                    let d = digit(v);
                    share[d][at[d]] = v;
                    at[d] += 1;
                }
            });
        }
    });
    std::mem::swap(values, scratch);
    sort_buckets(values, &starts, &ends, threads);
}

#[cfg(test)]
mod tests {
    use super::{sort_u64_in_place, sort_u64_parallel};

    #[test]
    fn parallel_and_in_place_sorts_agree_with_the_standard_library() {
        let mut x: u64 = 0x9876_5432;
        for len in [0usize, 1, 5000, 65_535, 65_536, 200_003] {
            for threads in [1usize, 2, 3, 8, 300] {
                let v: Vec<u64> = (0..len)
                    .map(|i| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        // skewed: most values in a few top-byte buckets, some repeated
                        match i % 5 {
                            0 => x >> 8,
                            1 => 42,
                            2 => u64::MAX - (x & 7),
                            _ => x,
                        }
                    })
                    .collect();
                let mut want = v.clone();
                want.sort_unstable();
                let (mut a, mut b, mut scratch) = (v.clone(), v, vec![7u64; 3]);
                sort_u64_parallel(&mut a, &mut scratch, threads);
                assert_eq!(a, want, "parallel, len {len} threads {threads}");
                sort_u64_in_place(&mut b, threads);
                assert_eq!(b, want, "in place, len {len} threads {threads}");
            }
        }
    }
}
