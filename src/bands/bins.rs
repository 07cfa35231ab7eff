//! A band's gathered entries held once, in bins of buckets ([`Bins`]): the band build's
//! buffer between its pass over the sketch column and its entry pages.
//!
//! Entries (`bucket << 40 | ordinal << 8 | tag`, gathered in ordinal order) go to the bin of
//! their bucket's high bits as they come, each bin a fixed region of one allocation (sized
//! for the expected share and four standard deviations more; a fresh zeroed allocation, so
//! only what is filled is resident). A region holds an entry in 6 bytes, not the packed 8:
//! its ordinal (a `u32`) and, in a `u16`, its bucket's low bits (the bin gives the high
//! ones) above its tag. A bin's entries past its region go to an overflow list, packed, in
//! gathering order, so they follow the region's in ordinal order. [`Bins::drain_sorted`]
//! then gives each bin's entries in bucket order, stable (ordinal order within a bucket), by
//! a counting sort of the bucket's low bits into a scratch the size of one bin: the band is
//! held once, where a sort of it all held it twice.

/// log2 of the buckets a bin holds (fewer when a bucket's low bits and the tag would not
/// fit a `u16` together: version 1's 8-bit tags).
pub(super) const BIN_BITS: u32 = 9;

/// The bit of a packed entry where its bucket starts.
const BUCKET_SHIFT: u32 = 40;

/// Entries of the buckets `first_bin << low_bits ..` in bins (see the module docs).
pub(super) struct Bins {
    buckets: std::ops::Range<u32>,
    first_bin: u32,
    /// Bits of the bucket a bin sorts by (`BIN_BITS`, fewer for a design of fewer buckets or
    /// wide tags).
    low_bits: u32,
    tag_bits: u32,
    capacity: usize,
    lens: Vec<u32>,
    /// Each region's ordinals.
    ordinals: Vec<u32>,
    /// Each region's `low bucket bits << tag_bits | tag`.
    lows: Vec<u16>,
    overflow: Vec<u64>,
}

impl Bins {
    /// Empty bins for the buckets in `buckets` of a design of `bucket_bits` bits and
    /// `tag_bits`-bit tags (at most 8), about `entries` entries in all of the design's buckets;
    /// in the memory of `spent` bins (drained by [`Bins::drain_sorted`]) when given, so that a
    /// build's next pass fills pages this process already holds instead of fresh ones (each a
    /// page fault and a zeroing; in a virtual machine that hands freed memory back to its
    /// host, a fault in the host too).
    pub(super) fn new(buckets: &std::ops::Range<u32>, bucket_bits: u32, tag_bits: u32, entries: u64, spent: Option<Bins>) -> Bins {
        let (mut ordinals, mut lows) = spent.map_or_else(Default::default, |s| (s.ordinals, s.lows));
        let low_bits = BIN_BITS.min(bucket_bits).min(16 - tag_bits.min(8));
        let first_bin = buckets.start >> low_bits;
        let bins = if buckets.is_empty() { 0 } else { ((buckets.end - 1) >> low_bits) - first_bin + 1 } as usize;
        // the share of the entries a bin holds (uniform band values), and a margin
        let expected = entries.saturating_mul(1 << low_bits) >> bucket_bits;
        let capacity = (expected + 4 * expected.isqrt() + 16).min(entries.max(1)) as usize;
        // a region is read only as far as it was filled: what a spent one held is never seen
        ordinals.resize(bins * capacity, 0);
        lows.resize(bins * capacity, 0);
        Bins { buckets: buckets.clone(), first_bin, low_bits, tag_bits: tag_bits.min(8), capacity, lens: vec![0; bins], ordinals, lows, overflow: Vec::new() }
    }

    /// Adds entry `v` (`bucket << 40 | ordinal << 8 | tag`, the tag below `1 << tag_bits`)
    /// when its bucket is one of these bins' (returns whether it is).
    pub(super) fn push(&mut self, v: u64) -> bool {
        let bucket = (v >> BUCKET_SHIFT) as u32;
        if !self.buckets.contains(&bucket) {
            return false;
        }
        let bin = (bucket >> self.low_bits).wrapping_sub(self.first_bin) as usize;
        let Some(len) = self.lens.get_mut(bin) else { return false };
        let at = bin * self.capacity + *len as usize;
        match (self.ordinals.get_mut(at), self.lows.get_mut(at)) {
            (Some(ordinal), Some(low)) if (*len as usize) < self.capacity => {
                *ordinal = (v >> 8) as u32;
                *low = ((bucket & ((1 << self.low_bits) - 1)) << self.tag_bits | (v as u32 & 0xff)) as u16;
                *len += 1;
            }
            _ => self.overflow.push(v),
        }
        true
    }

    /// Calls `f` with each entry (packed as it was added), in bucket order and, within a
    /// bucket, in the order added; the bins are then spent (for [`Bins::new`] to fill again).
    pub(super) fn drain_sorted<E>(&mut self, mut f: impl FnMut(u64) -> Result<(), E>) -> Result<(), E> {
        let (low_bits, tag_bits) = (self.low_bits, self.tag_bits);
        // the overflow by bin, stable: each bin's part stays in the order added
        self.overflow.sort_by_key(|&v| v >> (BUCKET_SHIFT + low_bits));
        let mut over = self.overflow.as_slice();
        let mut counts = vec![0usize; 1 << low_bits];
        let mut sorted = Vec::new();
        let mask = (1u64 << low_bits) - 1;
        let low = |v: u64| ((v >> BUCKET_SHIFT) & mask) as usize;
        for (i, &len) in self.lens.iter().enumerate() {
            let bin = u64::from(self.first_bin) + i as u64;
            let span = i * self.capacity..i * self.capacity + len as usize;
            let (ordinals, lows) = (self.ordinals.get(span.clone()).unwrap_or_default(), self.lows.get(span).unwrap_or_default());
            let taken = over.iter().take_while(|&&v| v >> (BUCKET_SHIFT + low_bits) == bin).count();
            let (extra, rest) = over.split_at(taken);
            over = rest;
            // the region's entries packed again, then the overflow's
            let region = ordinals.iter().zip(lows).map(|(&o, &l)| {
                let l = u64::from(l);
                (bin << low_bits | l >> tag_bits) << BUCKET_SHIFT | u64::from(o) << 8 | (l & ((1 << tag_bits) - 1))
            });
            counts.fill(0);
            for v in region.clone().chain(extra.iter().copied()) {
                if let Some(c) = counts.get_mut(low(v)) {
                    *c += 1;
                }
            }
            let mut at = 0;
            for c in counts.iter_mut() {
                (*c, at) = (at, at + *c);
            }
            sorted.clear();
            sorted.resize(at, 0);
            for v in region.chain(extra.iter().copied()) {
                if let Some(c) = counts.get_mut(low(v)) {
                    if let Some(slot) = sorted.get_mut(*c) {
                        *slot = v;
                    }
                    *c += 1;
                }
            }
            for &v in &sorted {
                f(v)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entries of `n` random buckets below `1 << bits`, ordinals in order, `tag_bits`-bit
    /// tags, a third of them in one bucket (a bin past its region).
    fn entries(n: u64, bits: u32, tag_bits: u32, seed: u64) -> Vec<u64> {
        let mut x = seed;
        (0..n)
            .map(|o| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let bucket = if o % 3 == 0 { 77 % (1 << bits) } else { x % (1 << bits) };
                bucket << BUCKET_SHIFT | o << 8 | (x >> (64 - tag_bits))
            })
            .collect()
    }

    #[test]
    fn bins_give_the_entries_of_their_buckets_as_a_stable_sort_by_bucket_does() {
        // each case twice: in fresh bins, then in the spent ones of the case before (larger
        // or smaller, holding that case's entries)
        let mut spent: Option<Bins> = None;
        let cases = [(0u64, 4u32, 0..16u32), (1000, 4, 0..16), (50_000, 13, 0..8192), (50_000, 13, 2730..5461), (20_000, 20, 1000..900_000), (70_000, 12, 100..4000)];
        // 5-bit tags (version 4), 6 (versions 2 and 3) and 8 (version 1: bins of 256 buckets)
        for (((n, bits, range), tag_bits), reused) in cases.into_iter().flat_map(|c| [5u32, 6, 8].map(|t| (c.clone(), t))).flat_map(|c| [(c.clone(), false), (c, true)]) {
            let all = entries(n, bits, tag_bits, n + u64::from(bits));
            let mut bins = Bins::new(&range, bits, tag_bits, n, if reused { spent.take() } else { None });
            let kept = all.iter().filter(|&&v| bins.push(v)).count();
            let mut got = Vec::new();
            bins.drain_sorted(|v| {
                got.push(v);
                Ok::<(), ()>(())
            })
            .unwrap();
            let mut want: Vec<u64> = all.into_iter().filter(|v| range.contains(&((v >> BUCKET_SHIFT) as u32))).collect();
            want.sort_by_key(|v| v >> BUCKET_SHIFT);
            assert_eq!(kept, want.len());
            assert!(got == want, "n {n} bits {bits} tags {tag_bits} range {range:?} reused {reused}: {} against {}", got.len(), want.len());
            if reused {
                spent = Some(bins);
            }
        }
    }
}
