//! A map from feature hashes to integers, laid out for many lookups at once: what the IDF
//! table (`idf`) keeps its weights and document frequencies in.
//!
//! A corpus has millions of distinct features, so nearly every lookup misses the caches. A
//! general hash map probes one key after another, each miss waiting for the one before; here
//! the slot of each key is prefetched a fixed distance ahead of its lookup, so that the
//! misses overlap. Open addressing with linear probing on the (uniform) feature hash: the
//! home slot of `h` is `h * slots >> 64`, at most three quarters of the slots are taken, a
//! slot holds its key and value side by side (one cache line for the common probe), and the
//! hash 0 marks an empty slot (its value is kept apart). Tables this large are asked for huge
//! pages ([`huge_vec`]), so that a lookup misses the TLB less often than the caches.

// Indexing: slots are indexed by positions below `slots.len()`, reduced by `home` and `next`.
#![allow(clippy::indexing_slicing)]

/// How far ahead of the key looked up the slot of a later key is prefetched
/// ([`FeatureMap::get_many`]): enough misses in flight to fill the memory system, few enough
/// that the prefetched lines are still there. A rolling distance keeps that many in flight
/// all the time (batches of 16 prefetched together, then looked up, drained the pipe at
/// each batch's end: 25-35% slower a key on a 64 MB table).
const AHEAD: usize = 32;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Slot {
    key: u64,
    value: u64,
}

/// Feature hash -> `u64`.
#[derive(Debug, Clone, Default)]
pub(crate) struct FeatureMap {
    slots: Vec<Slot>,
    /// keys other than 0 stored
    len: usize,
    /// the value of the key 0
    zero: Option<u64>,
}

impl FeatureMap {
    /// An empty map with room for `n` keys before it grows.
    pub(crate) fn with_capacity(n: usize) -> Self {
        let mut m = FeatureMap::default();
        m.reserve(n);
        m
    }

    /// Bytes of memory the slots take.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Slot>()
    }

    /// [`FeatureMap::heap_bytes`] at its largest while up to `n` more keys are added: when
    /// the slots grow for them, the old slots and the new are held together while the keys
    /// move.
    pub(crate) fn heap_bytes_adding(&self, n: usize) -> usize {
        self.heap_bytes() + self.grown(self.len + n).map_or(0, |slots| slots * std::mem::size_of::<Slot>())
    }

    /// Keys stored.
    pub(crate) fn len(&self) -> usize {
        self.len + usize::from(self.zero.is_some())
    }

    #[inline]
    fn home(&self, h: u64) -> usize {
        ((u128::from(h) * self.slots.len() as u128) >> 64) as usize
    }

    #[inline]
    fn next(&self, i: usize) -> usize {
        if i + 1 == self.slots.len() {
            0
        } else {
            i + 1
        }
    }

    /// The slot of `h` (non-zero), or the empty slot where it would go.
    #[inline]
    fn find(&self, h: u64) -> usize {
        let mut i = self.home(h);
        loop {
            let key = self.slots[i].key;
            if key == h || key == 0 {
                return i;
            }
            i = self.next(i);
        }
    }

    /// The value of `h`.
    #[inline]
    pub(crate) fn get(&self, h: u64) -> Option<u64> {
        if h == 0 {
            return self.zero;
        }
        if self.slots.is_empty() {
            return None;
        }
        let s = self.slots[self.find(h)];
        (s.key == h).then_some(s.value)
    }

    /// Calls `f(i, value)` for each of `keys` (`i` its position), the keys' slots fetched a
    /// batch at a time.
    #[inline]
    pub(crate) fn get_many(&self, keys: &[u64], mut f: impl FnMut(usize, Option<u64>)) {
        self.prefetch(&keys[..keys.len().min(AHEAD)]);
        for (i, &h) in keys.iter().enumerate() {
            self.prefetch(keys.get(i + AHEAD..=i + AHEAD).unwrap_or_default());
            f(i, self.get(h));
        }
    }

    /// Adds `by` to the value of each of `keys` (a missing key counts from 0), the keys'
    /// slots fetched a batch at a time.
    pub(crate) fn add_many(&mut self, keys: &[u64], by: u64) {
        self.add_by(keys, |_| by);
    }

    /// Adds `by[i]` to the value of each of `keys[i]` (a missing key counts from 0), as
    /// `add_many`.
    pub(crate) fn add_each(&mut self, keys: &[u64], by: &[u64]) {
        self.add_by(&keys[..keys.len().min(by.len())], |i| by[i]);
    }

    /// Adds `by(i)` to the value of each of `keys[i]`, the slots prefetched `AHEAD` keys ahead.
    fn add_by(&mut self, keys: &[u64], by: impl Fn(usize) -> u64) {
        self.reserve(self.len + keys.len());
        self.prefetch(&keys[..keys.len().min(AHEAD)]);
        for (i, &h) in keys.iter().enumerate() {
            self.prefetch(keys.get(i + AHEAD..=i + AHEAD).unwrap_or_default());
            self.add_reserved(h, by(i));
        }
    }

    /// Counts each of the distinct `keys` once in the low 32 bits of its value, numbering
    /// the keys it meets for the first time in the high 32 bits (`vocabulary.len()` then,
    /// the key pushed onto `vocabulary`), and appends each key's number to `numbers`. The
    /// map's values must all have been made so, and the caller keeps counts and numbers
    /// below 2^32.
    pub(crate) fn number_many(&mut self, keys: &[u64], vocabulary: &mut Vec<u64>, numbers: &mut Vec<u32>) {
        self.reserve(self.len + keys.len());
        numbers.reserve(keys.len());
        self.prefetch(&keys[..keys.len().min(AHEAD)]);
        for (i, &h) in keys.iter().enumerate() {
            self.prefetch(keys.get(i + AHEAD..=i + AHEAD).unwrap_or_default());
            numbers.push(self.number_reserved(h, vocabulary));
        }
    }

    /// Counts `h` once and gives its number, numbering it if new (`number_many`'s step),
    /// with room for it already made.
    #[inline]
    fn number_reserved(&mut self, h: u64, vocabulary: &mut Vec<u64>) -> u32 {
        let i = if h == 0 { 0 } else { self.find(h) };
        let FeatureMap { slots, len, zero } = &mut *self;
        let (new, value) = if h == 0 {
            (zero.is_none(), zero.get_or_insert(0))
        } else {
            let slot = &mut slots[i];
            let new = slot.key == 0;
            if new {
                slot.key = h;
                *len += 1;
            }
            (new, &mut slot.value)
        };
        if new {
            *value = (vocabulary.len() as u64) << 32;
            vocabulary.push(h);
        }
        *value += 1;
        (*value >> 32) as u32
    }

    /// Sets the value of `h`.
    pub(crate) fn insert(&mut self, h: u64, value: u64) {
        if h == 0 {
            self.zero = Some(value);
            return;
        }
        self.reserve(self.len + 1);
        let i = self.find(h);
        if self.slots[i].key == 0 {
            self.len += 1;
        }
        self.slots[i] = Slot { key: h, value };
    }

    /// `add_many` of one key, with room for it already made.
    #[inline]
    fn add_reserved(&mut self, h: u64, by: u64) {
        if h == 0 {
            *self.zero.get_or_insert(0) += by;
            return;
        }
        let i = self.find(h);
        let slot = &mut self.slots[i];
        if slot.key == 0 {
            slot.key = h;
            self.len += 1;
        }
        slot.value += by;
    }

    /// Grows so that `n` non-zero keys fit within three quarters of the slots.
    fn reserve(&mut self, n: usize) {
        let Some(slots) = self.grown(n) else { return };
        let old = std::mem::replace(&mut self.slots, huge_vec(slots, Slot::default()));
        for s in old.into_iter().filter(|s| s.key != 0) {
            let i = self.find(s.key);
            self.slots[i] = s;
        }
    }

    /// The slots the map grows to for `n` non-zero keys (`None`: they fit in three quarters
    /// of today's).
    fn grown(&self, n: usize) -> Option<usize> {
        (4 * n > 3 * self.slots.len()).then(|| (4 * n / 3 + 1).max(2 * self.slots.len()).max(64))
    }

    /// Every `(key, value)`, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.slots.iter().filter(|s| s.key != 0).map(|s| (s.key, s.value)).chain(self.zero.map(|v| (0, v)))
    }

    /// Every `(key, value)` in ascending key order, handed to `f` a run at a time, without a
    /// sorted copy of the map: a key's home slot rises with the key, and linear probing keeps
    /// each key in the run of taken slots (a cluster) that holds its home, so the clusters in
    /// slot order, each sorted alone, are the keys in order. The cluster that wraps around the
    /// table's end holds the smallest keys (homes at its start) and the largest (homes at its
    /// end).
    pub(crate) fn for_each_sorted(&self, mut f: impl FnMut(&[(u64, u64)])) {
        if let Some(v) = self.zero {
            f(&[(0, v)]);
        }
        let taken = |s: &Slot| (s.key != 0).then_some((s.key, s.value));
        let (Some(first_empty), Some(last_empty)) = (self.slots.iter().position(|s| s.key == 0), self.slots.iter().rposition(|s| s.key == 0)) else {
            // no empty slot (no slots, or a full table: never left so by `reserve`)
            let mut all: Vec<(u64, u64)> = self.slots.iter().filter_map(taken).collect();
            all.sort_unstable();
            return f(&all);
        };
        let mut wrapped: Vec<(u64, u64)> = self.slots[last_empty + 1..].iter().chain(&self.slots[..first_empty]).filter_map(taken).collect();
        wrapped.sort_unstable();
        let low = wrapped.partition_point(|&(k, _)| self.home(k) < first_empty);
        f(&wrapped[..low]);
        let mut run = Vec::new();
        for s in &self.slots[first_empty..=last_empty] {
            match taken(s) {
                Some(e) => run.push(e),
                None if !run.is_empty() => {
                    run.sort_unstable();
                    f(&run);
                    run.clear();
                }
                None => {}
            }
        }
        f(&wrapped[low..]);
    }

    /// Replaces every value by `f(value)`, keeping the keys where they are.
    pub(crate) fn map_values(&mut self, f: impl Fn(u64) -> u64) {
        for s in self.slots.iter_mut().filter(|s| s.key != 0) {
            s.value = f(s.value);
        }
        if let Some(z) = self.zero.as_mut() {
            *z = f(*z);
        }
    }

    /// Asks the memory system for the home slots of `keys`.
    #[inline]
    fn prefetch(&self, keys: &[u64]) {
        if self.slots.is_empty() {
            return;
        }
        for &h in keys {
            let slot: *const Slot = &self.slots[self.home(h)];
            prefetch(slot.cast());
        }
    }
}

impl PartialEq for FeatureMap {
    /// The same keys with the same values (however they are laid out).
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().all(|(k, v)| other.get(k) == Some(v))
    }
}

impl Eq for FeatureMap {}

/// `n` copies of `value`, in memory the kernel is asked to back with huge pages where it can
/// (Linux's transparent huge pages in their `madvise` mode): for tables of many megabytes
/// read at random (this map, the vocabulary's weights), whose every lookup would otherwise
/// also miss the TLB.
pub(crate) fn huge_vec<T: Clone>(n: usize, value: T) -> Vec<T> {
    let mut v: Vec<T> = Vec::with_capacity(n);
    advise_huge_pages(v.as_ptr().cast(), n * std::mem::size_of::<T>());
    v.resize(n, value);
    v
}

/// Asks for huge pages for the whole 4 KiB pages of the `bytes` bytes at `p` (not yet
/// touched: pages are backed when first written); smaller regions are left alone.
fn advise_huge_pages(p: *const u8, bytes: usize) {
    const PAGE: usize = 4096;
    if bytes < 4 << 20 {
        return;
    }
    let (start, end) = ((p as usize).next_multiple_of(PAGE), (p as usize + bytes) & !(PAGE - 1));
    #[cfg(target_os = "linux")]
    // SAFETY: `start..end` lies inside the allocation at `p` (its bounds rounded inward to
    // whole pages), which this process owns; MADV_HUGEPAGE is advice on how to back those
    // pages: it changes neither their contents nor the mapping's validity, and a failure
    // (no huge pages, an older kernel) is ignored, as the advice is.
    unsafe {
        libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (start, end);
}

/// Hints that the cache line at `p` is about to be read.
#[inline(always)]
pub(crate) fn prefetch(p: *const i8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that never faults, whatever the address; SSE (which has
    // it) is part of every x86-64 CPU. `p` points into a live slot anyway.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Uniform keys from `seed` (an LCG through `fmix64`).
    fn random_keys(mut s: u64) -> impl FnMut() -> u64 {
        move || {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            crate::hash::fmix64(s)
        }
    }

    /// Every operation against std's HashMap, through growth, with the key 0 and with keys
    /// that share a home slot (clustered at the end of the table, to wrap around).
    #[test]
    fn agrees_with_a_hash_map() {
        let mut next = random_keys(1);
        let mut keys: Vec<u64> = (0..5000).map(|_| next()).collect();
        keys.extend([0, u64::MAX, u64::MAX - 1, u64::MAX - 2, 1, 2, 3]);
        let repeated = keys[..200].to_vec();
        keys.extend(repeated);
        let mut m = FeatureMap::default();
        let mut oracle: HashMap<u64, u64> = HashMap::new();
        for (n, chunk) in keys.chunks(97).enumerate() {
            m.add_many(chunk, n as u64 + 1);
            for &k in chunk {
                *oracle.entry(k).or_insert(0) += n as u64 + 1;
            }
            m.insert(chunk[0], 7);
            oracle.insert(chunk[0], 7);
        }
        assert_eq!(m.len(), oracle.len());
        for (&k, &v) in &oracle {
            assert_eq!(m.get(k), Some(v), "{k}");
        }
        let probe: Vec<u64> = keys.iter().map(|k| k ^ 0x10).chain(keys.iter().copied()).collect();
        m.get_many(&probe, |i, v| assert_eq!(v, oracle.get(&probe[i]).copied(), "{}", probe[i]));
        let mut all: Vec<(u64, u64)> = m.iter().collect();
        all.sort_unstable();
        let mut want: Vec<(u64, u64)> = oracle.into_iter().collect();
        want.sort_unstable();
        assert_eq!(all, want);
        let mut doubled = m.clone();
        doubled.map_values(|v| 2 * v);
        assert!(all.iter().all(|&(k, v)| doubled.get(k) == Some(2 * v)));
        assert_ne!(doubled, m);
        assert_eq!(m.clone(), m);
        assert_eq!(FeatureMap::with_capacity(10).get(5), None);
    }

    /// The runs of `for_each_sorted`, joined, are `iter`'s entries sorted: maps of every
    /// size through growth, with the key 0, clusters that wrap around the table's end (keys
    /// near `u64::MAX`) and clusters at its start (keys near 0).
    #[test]
    fn sorted_runs_are_the_entries_sorted() {
        let mut next = random_keys(3);
        let mut m = FeatureMap::default();
        let joined = |m: &FeatureMap| {
            let mut out = Vec::new();
            m.for_each_sorted(|run| out.extend_from_slice(run));
            out
        };
        assert_eq!(joined(&m), []);
        for n in 0..600u64 {
            let key = match n % 5 {
                0 => u64::MAX - n,
                1 => n,
                _ => next(),
            };
            m.insert(key, n);
            if n == 300 {
                m.insert(0, 42);
            }
            let mut want: Vec<(u64, u64)> = m.iter().collect();
            want.sort_unstable();
            assert_eq!(joined(&m), want, "{n} keys");
        }
    }

    /// A table large enough to be advised huge pages holds its values, as a small one does.
    #[test]
    fn huge_vectors_are_their_copies() {
        for n in [0, 3, 1 << 20] {
            let mut v = huge_vec(n, Slot { key: 7, value: 9 });
            assert_eq!(v.len(), n);
            assert!(v.iter().all(|s| *s == Slot { key: 7, value: 9 }));
            if let Some(last) = v.last_mut() {
                last.key = 1;
            }
            assert_eq!(v.iter().filter(|s| s.key == 1).count(), usize::from(n > 0));
        }
    }

    /// Numbering against a HashMap oracle: documents of distinct keys (0 and keys sharing a
    /// home slot among them), through growth; every key keeps the number it got first, the
    /// vocabulary lists the keys by number, and the low 32 bits count the documents.
    #[test]
    fn numbering_agrees_with_a_hash_map() {
        let mut next = random_keys(7);
        let pool: Vec<u64> = (0..3000).map(|_| next()).chain([0, u64::MAX, u64::MAX - 1, 1, 2]).collect();
        let (mut m, mut vocabulary) = (FeatureMap::default(), Vec::new());
        let mut number: HashMap<u64, u32> = HashMap::new();
        let mut df: HashMap<u64, u64> = HashMap::new();
        for d in 0..300 {
            let mut doc: Vec<u64> = (0..40).map(|_| pool[(next() % pool.len() as u64) as usize]).chain([0, u64::MAX][..d % 3].iter().copied()).collect();
            doc.sort_unstable();
            doc.dedup();
            let mut numbers = Vec::new();
            m.number_many(&doc, &mut vocabulary, &mut numbers);
            assert_eq!(numbers.len(), doc.len());
            for (&k, &n) in doc.iter().zip(&numbers) {
                let len = number.len() as u32;
                assert_eq!(n, *number.entry(k).or_insert(len), "{k}");
                *df.entry(k).or_default() += 1;
            }
        }
        assert_eq!(vocabulary.len(), number.len());
        assert_eq!(m.len(), number.len());
        for (&k, &n) in &number {
            assert_eq!(vocabulary[n as usize], k);
            assert_eq!(m.get(k), Some((u64::from(n) << 32) | df[&k]), "{k}");
        }
    }
}
