//! The part files of an IDF table learned in parts: the entries of the table file
//! (format-spec/fingerprint.md, "IDF table file") split by feature-hash range, each part
//! written by the process that summed that range's document frequencies, and read back by
//! mapping the files. No process holds the whole table (a distributed front's driver never
//! sees it); the table ([`crate::IdfTable::from_parts`]) weighs the entries by its one rule
//! and its weights, bytes and id are those [`crate::IdfBuilder`] learns in one process.
//!
//! Part `p` of `P` holds the features `h` with `h * P >> 64 == p` ([`part_of`]): ascending
//! hash ranges, so the parts in order are the table file's entries. A part file is only
//! those entries (hash u64, weight u32, little-endian, strictly ascending); its
//! [`PartSummary`] (entry count, CRC-32 of its bytes) travels with its path, so the table's
//! checksum, hence its id, is combined from the parts' without reading them again. A reader
//! ([`IdfTable::from_parts`]) maps each part, checks it against its summary, and keeps a small
//! directory a part (one `u32` per 16 entries) to find a feature in a few reads.

// Indexing: directory slots and entry positions are bounded by the checks in `Part::open`.
#![allow(clippy::indexing_slicing)]

use super::feature_map::FeatureMap;
use super::Error;
use simdex::storage::{FileBytes, FsStorage, Storage};
use std::path::{Path, PathBuf};

/// Bytes of an entry: hash u64, weight u32 (the table file's entries).
pub(crate) const ENTRY_LEN: usize = 12;

/// Entries a directory slot covers, on average.
const PER_SLOT: u64 = 16;

/// The part (of `parts`) that holds `feature`: ascending ranges of hashes.
pub fn part_of(feature: u64, parts: usize) -> usize {
    ((u128::from(feature) * parts as u128) >> 64) as usize
}

/// The smallest hash of part `p` of `parts`.
fn first_hash(p: usize, parts: usize) -> u64 {
    // ceil(p * 2^64 / parts), which is below 2^64 for p < parts
    (((p as u128) << 64).div_ceil(parts as u128)) as u64
}

/// What a written part holds: its entry count and the CRC-32 of its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartSummary {
    /// Entries (features) in the part.
    pub entries: u64,
    /// CRC-32 (IEEE) of the part file's bytes.
    pub crc: u32,
}

/// Writes `entries` (feature hash, weight; any order, each feature once, all in part `part`
/// of `parts`) sorted as part file `path`: its summary.
pub(crate) fn write_entries(path: &Path, part: usize, parts: usize, mut entries: Vec<(u64, u32)>) -> Result<PartSummary, Error> {
    entries.sort_unstable();
    let mut bytes = Vec::with_capacity(entries.len() * ENTRY_LEN);
    let mut prev = None;
    for &(h, w) in &entries {
        if part_of(h, parts) != part {
            return Err(Error::IdfCorrupt { what: "a feature outside its part" });
        }
        if prev == Some(h) {
            return Err(Error::IdfCorrupt { what: "a feature counted twice in a part" });
        }
        prev = Some(h);
        bytes.extend_from_slice(&h.to_le_bytes());
        bytes.extend_from_slice(&w.to_le_bytes());
    }
    simdex::storage::write_atomically(&FsStorage, path, &bytes)?;
    Ok(PartSummary { entries: entries.len() as u64, crc: crc32fast::hash(&bytes) })
}

/// Document frequencies being counted for a table learned in parts: a batch of documents'
/// distinct features (what a map task counts, [`PartCounts::default`]), or the counts of one
/// part summed over the batches (what a reduce task sums, [`PartCounts::of_one_part`]), in a
/// map whose lookups overlap their cache misses (`FeatureMap`: a general hash map was a
/// tenth of `simdex.spark dedup`'s IDF pass).
#[derive(Debug, Default)]
pub struct PartCounts {
    counts: FeatureMap,
    /// Bits the keys are rotated left by: the map's slot of a key follows its high bits,
    /// which one part's features share (a part is a range of hashes), so those are summed
    /// with their uniform low bits on top (else every key of the part falls in one run of
    /// slots, and each insertion probes the whole run).
    rotate: u32,
}

impl PartCounts {
    /// Counts for the features of one part (of any number of parts): see `rotate`.
    pub fn of_one_part() -> Self {
        PartCounts { counts: FeatureMap::default(), rotate: 32 }
    }

    /// Counts one document's distinct features (each once: `distinct` must not repeat a
    /// hash), `copies` times.
    pub fn add_document(&mut self, distinct: &[u64], copies: u64) {
        let keys = self.keys(distinct);
        self.counts.add_many(&keys, copies);
    }

    /// Adds counts summed elsewhere: `features[i]` counted `counts[i]` more times (the two
    /// of the same length).
    pub fn add_counts(&mut self, features: &[u64], counts: &[u64]) {
        let keys = self.keys(features);
        self.counts.add_each(&keys, counts);
    }

    /// The map's keys of `features` (see `rotate`).
    fn keys<'a>(&self, features: &'a [u64]) -> std::borrow::Cow<'a, [u64]> {
        match self.rotate {
            0 => features.into(),
            r => features.iter().map(|h| h.rotate_left(r)).collect::<Vec<_>>().into(),
        }
    }

    /// Distinct features counted.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.counts.len() == 0
    }

    /// The counts, `(feature, count)` ascending by feature, split into the `parts` parts
    /// of the table ([`part_of`]): what [`crate::write_idf_part`] writes, part by part.
    pub fn into_parts(self, parts: usize) -> Vec<Vec<(u64, u64)>> {
        let parts = parts.max(1);
        let mut out = vec![Vec::new(); parts];
        let mut put = |h: u64, c: u64| {
            if let Some(p) = out.get_mut(part_of(h, parts)) {
                p.push((h, c));
            }
        };
        if self.rotate == 0 {
            // (the map's slots in order are the keys in order)
            self.counts.for_each_sorted(|run| run.iter().for_each(|&(h, c)| put(h, c)));
        } else {
            let mut all: Vec<(u64, u64)> = self.counts.iter().map(|(k, c)| (k.rotate_right(self.rotate), c)).collect();
            all.sort_unstable();
            all.into_iter().for_each(|(h, c)| put(h, c));
        }
        out
    }
}

/// One mapped part and its directory.
#[derive(Debug)]
struct Part {
    bytes: FileBytes,
    /// the part's smallest hash
    first: u64,
    /// a slot covers `1 << shift` hashes
    shift: u32,
    /// `dir[s]`: the first entry whose slot is `s` or later (one more than slots)
    dir: Vec<u32>,
}

impl Part {
    fn open(path: &Path, p: usize, parts: usize, summary: PartSummary) -> Result<Part, Error> {
        let bad = |what: &str| Error::IdfPart { path: path.to_owned(), what: what.to_owned() };
        let bytes = FsStorage.read(path)?;
        let n = summary.entries;
        if bytes.len() as u64 != n * ENTRY_LEN as u64 {
            return Err(bad(&format!("{} bytes, {} entries expected", bytes.len(), n)));
        }
        if n > u64::from(u32::MAX) {
            return Err(bad("more than 2^32 entries in one part"));
        }
        bytes.will_need(0, bytes.len());
        let computed = crc32fast::hash(&bytes);
        if computed != summary.crc {
            return Err(bad(&format!("checksum {computed:#010x}, {:#010x} expected", summary.crc)));
        }
        let first = first_hash(p, parts);
        let width = if p + 1 == parts { u64::MAX - first } else { first_hash(p + 1, parts) - 1 - first };
        let slots_log2 = (n / PER_SLOT).max(1).ilog2();
        // (at most 63: a shift by 64 is no shift; one part of a few entries spans all hashes)
        let shift = (64 - width.leading_zeros()).saturating_sub(slots_log2).min(63);
        let slots = (width >> shift) as usize + 1;
        let mut dir = Vec::with_capacity(slots + 1);
        let mut prev = None;
        for i in 0..n as usize {
            let h = hash_at(&bytes, i);
            if prev.is_some_and(|q| q >= h) || part_of(h, parts) != p {
                return Err(bad("entries not ascending within the part's range"));
            }
            prev = Some(h);
            let s = ((h - first) >> shift) as usize;
            while dir.len() <= s {
                dir.push(i as u32);
            }
        }
        dir.resize(slots + 1, n as u32);
        Ok(Part { bytes, first, shift, dir })
    }

    /// The entries `[lo, hi)` of `h`'s directory slot, and where in them `h` would be if
    /// the slot's hashes were spread evenly (they are uniform hashes): the entry a lookup
    /// reads first.
    #[inline]
    fn guess(&self, h: u64) -> (usize, usize, usize) {
        let s = ((h - self.first) >> self.shift) as usize;
        let (lo, hi) = (self.dir[s] as usize, self.dir[s + 1] as usize);
        let within = (h - self.first) & ((1u64 << self.shift) - 1);
        let at = lo + ((u128::from(within) * (hi - lo) as u128) >> self.shift) as usize;
        (lo, hi, at)
    }

    /// The weight of `h`: the entry guessed first ([`Part::guess`]), then the next ones up
    /// or down (a slot holds about 16 entries, and the guess is usually within one or two).
    #[inline]
    fn weight(&self, h: u64) -> Option<u32> {
        let (lo, hi, mut at) = self.guess(h);
        if lo == hi {
            return None;
        }
        at = at.min(hi - 1);
        if hash_at(&self.bytes, at) < h {
            at += 1;
            while at < hi && hash_at(&self.bytes, at) < h {
                at += 1;
            }
        } else {
            while at > lo && hash_at(&self.bytes, at - 1) >= h {
                at -= 1;
            }
        }
        (at < hi && hash_at(&self.bytes, at) == h).then(|| {
            let at = at * ENTRY_LEN + 8;
            u32::from_le_bytes(self.bytes[at..at + 4].try_into().unwrap_or_default())
        })
    }

    /// Asks the memory system for `h`'s directory slot.
    #[inline]
    fn prefetch_slot(&self, h: u64) {
        let s = ((h - self.first) >> self.shift) as usize;
        crate::feature_map::prefetch((&self.dir[s] as *const u32).cast());
    }

    /// Asks the memory system for the entry a lookup of `h` reads first (its directory slot
    /// read: fetched by [`Part::prefetch_slot`] a while before).
    #[inline]
    fn prefetch_entry(&self, h: u64) {
        let (lo, hi, at) = self.guess(h);
        if lo < hi {
            crate::feature_map::prefetch(self.bytes[at.min(hi - 1) * ENTRY_LEN..].as_ptr().cast());
        }
    }
}

fn hash_at(bytes: &[u8], i: usize) -> u64 {
    let at = i * ENTRY_LEN;
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap_or_default())
}

/// The weights of a table in parts (what [`IdfTable`] looks them up in).
#[derive(Debug)]
pub(crate) struct Parts {
    parts: Vec<Part>,
    paths: Vec<PathBuf>,
    summaries: Vec<PartSummary>,
}

impl Parts {
    /// Maps the part files `paths` (part `p` at `paths[p]`) and checks each against its
    /// summary: length, checksum, entries ascending within the part's range.
    pub(crate) fn open(paths: &[PathBuf], summaries: &[PartSummary]) -> Result<Parts, Error> {
        if paths.len() != summaries.len() || paths.is_empty() {
            return Err(Error::IdfCorrupt { what: "a table in parts needs one summary a part, and at least one part" });
        }
        let parts = paths.iter().zip(summaries).enumerate().map(|(p, (path, &s))| Part::open(path, p, paths.len(), s)).collect::<Result<Vec<_>, _>>()?;
        Ok(Parts { parts, paths: paths.to_vec(), summaries: summaries.to_vec() })
    }

    /// The weight of `h`, if stored.
    #[inline]
    pub(crate) fn get(&self, h: u64) -> Option<u32> {
        self.parts.get(part_of(h, self.parts.len())).and_then(|p| p.weight(h))
    }

    /// Calls `f(i, weight)` for each of `hashes` (`i` its position): each lookup's two reads
    /// (directory slot, entry) asked of the memory system ahead of it, the slot
    /// `2 * AHEAD` lookups before and the entry `AHEAD` before, so that a document's cache
    /// misses overlap instead of following one another (one at a time, they were a sixth of
    /// `simdex.spark dedup`'s CPU).
    #[inline]
    pub(crate) fn get_many(&self, hashes: &[u64], mut f: impl FnMut(usize, Option<u32>)) {
        const AHEAD: usize = 8;
        let part = |h: u64| &self.parts[part_of(h, self.parts.len())];
        for &h in hashes.iter().take(2 * AHEAD) {
            part(h).prefetch_slot(h);
        }
        for &h in hashes.iter().take(AHEAD) {
            part(h).prefetch_entry(h);
        }
        for (i, &h) in hashes.iter().enumerate() {
            if let Some(&g) = hashes.get(i + 2 * AHEAD) {
                part(g).prefetch_slot(g);
            }
            if let Some(&g) = hashes.get(i + AHEAD) {
                part(g).prefetch_entry(g);
            }
            f(i, part(h).weight(h));
        }
    }

    /// Entries in all parts.
    pub(crate) fn len(&self) -> usize {
        self.summaries.iter().map(|s| s.entries as usize).sum()
    }

    /// The entries' bytes, part after part (the table file's entries).
    pub(crate) fn bytes(&self) -> impl Iterator<Item = &[u8]> {
        self.parts.iter().map(|p| &*p.bytes)
    }

    /// The part files and their summaries.
    pub(crate) fn files(&self) -> (&[PathBuf], &[PartSummary]) {
        (&self.paths, &self.summaries)
    }

    /// The CRC-32 state of the entries of every part, combined from the summaries.
    pub(crate) fn crc_after(&self, head: &[u8]) -> crc32fast::Hasher {
        let mut crc = crc32fast::Hasher::new();
        crc.update(head);
        for s in &self.summaries {
            crc.combine(&crc32fast::Hasher::new_with_initial_len(s.crc, s.entries * ENTRY_LEN as u64));
        }
        crc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_cover_the_hashes_in_order() {
        for parts in [1, 2, 3, 5, 100] {
            assert_eq!(part_of(0, parts), 0);
            assert_eq!(part_of(u64::MAX, parts), parts - 1);
            for p in 0..parts {
                let f = first_hash(p, parts);
                assert_eq!(part_of(f, parts), p);
                if p > 0 {
                    assert_eq!(part_of(f - 1, parts), p - 1);
                }
            }
        }
    }
}
