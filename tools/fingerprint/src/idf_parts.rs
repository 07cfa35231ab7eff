//! An IDF table in parts: the entries of the table file (format-spec/fingerprint.md, "IDF
//! table file") split by feature-hash range into part files, each written by the process that
//! summed that range's document frequencies, and read back by mapping the files. No process
//! holds the whole table (a distributed front's driver never sees it), and the table's
//! weights, bytes and id are those [`crate::IdfBuilder`] learns in one process from the same
//! documents: the weights are computed here, by the table's one rule ([`crate::idf`]).
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

use super::idf::{idf_weight, IdfTable, Weights, ENTRY_LEN};
use super::Error;
use simdex::storage::{FileBytes, FsStorage, Storage};
use std::path::{Path, PathBuf};

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

/// Writes part `part` (of `parts`) of the table of a corpus of `docs` documents to `path`:
/// `counts` are the part's distinct features with their document frequencies (any order; each
/// feature once), weighed as the table weighs them. A feature outside the part, repeated, or
/// counted in more documents than `docs` is refused.
pub fn write_part(path: &Path, part: usize, parts: usize, docs: u64, mut counts: Vec<(u64, u64)>) -> Result<PartSummary, Error> {
    counts.sort_unstable();
    let mut bytes = Vec::with_capacity(counts.len() * ENTRY_LEN);
    let mut prev = None;
    for &(h, df) in &counts {
        if part_of(h, parts) != part {
            return Err(Error::IdfCorrupt { what: "a feature outside its part" });
        }
        if prev == Some(h) {
            return Err(Error::IdfCorrupt { what: "a feature counted twice in a part" });
        }
        if df > docs {
            return Err(Error::IdfCorrupt { what: "a feature counted in more documents than the corpus has" });
        }
        prev = Some(h);
        bytes.extend_from_slice(&h.to_le_bytes());
        bytes.extend_from_slice(&idf_weight(docs, df).to_le_bytes());
    }
    simdex::storage::write_atomically(&FsStorage, path, &bytes)?;
    Ok(PartSummary { entries: counts.len() as u64, crc: crc32fast::hash(&bytes) })
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
        let shift = (64 - width.leading_zeros()).saturating_sub(slots_log2);
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

    fn weight(&self, h: u64) -> Option<u32> {
        let s = ((h - self.first) >> self.shift) as usize;
        let (mut lo, mut hi) = (self.dir[s] as usize, self.dir[s + 1] as usize);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match hash_at(&self.bytes, mid).cmp(&h) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => {
                    let at = mid * ENTRY_LEN + 8;
                    return Some(u32::from_le_bytes(self.bytes[at..at + 4].try_into().unwrap_or_default()));
                }
            }
        }
        None
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
    /// The weight of `h`, if stored.
    #[inline]
    pub(crate) fn get(&self, h: u64) -> Option<u32> {
        self.parts.get(part_of(h, self.parts.len())).and_then(|p| p.weight(h))
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

impl IdfTable {
    /// The table of `docs` documents, features of `recipe`, whose parts are the files `paths`
    /// (part `p` at `paths[p]`, written by [`write_part`] with the same `docs` and summarised
    /// by `summaries[p]`): each is mapped and checked against its summary (length, checksum,
    /// entries ascending within the part's range), a damaged or missing part refused, naming
    /// its file. The same table, bytes and id as the one learned in one process.
    pub fn from_parts(recipe: &str, docs: u64, paths: &[PathBuf], summaries: &[PartSummary]) -> Result<IdfTable, Error> {
        if paths.len() != summaries.len() || paths.is_empty() {
            return Err(Error::IdfCorrupt { what: "a table in parts needs one summary a part, and at least one part" });
        }
        let parts = paths.iter().zip(summaries).enumerate().map(|(p, (path, &s))| Part::open(path, p, paths.len(), s)).collect::<Result<Vec<_>, _>>()?;
        let weights = Weights::Parts(std::sync::Arc::new(Parts { parts, paths: paths.to_vec(), summaries: summaries.to_vec() }));
        Ok(IdfTable::with_weights(recipe.to_owned(), docs, idf_weight(docs, 0), weights))
    }

    /// The part files and their summaries, when the table is read from parts
    /// ([`IdfTable::from_parts`]): what another process needs to open the same table.
    pub fn part_files(&self) -> Option<(&[PathBuf], &[PartSummary])> {
        match self.weights() {
            Weights::Parts(p) => Some(p.files()),
            Weights::Map(_) => None,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::IdfBuilder;

    /// Documents of features drawn from a small pool (some in many documents, some in one),
    /// hashes spread over the whole range (0 and u64::MAX included).
    fn documents() -> Vec<Vec<u64>> {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let pool: Vec<u64> = (0..3000).map(|_| next()).chain([0, 1, u64::MAX, u64::MAX - 1]).collect();
        (0..400)
            .map(|_| {
                let mut d: Vec<u64> = (0..40).map(|_| pool[(next() % pool.len() as u64) as usize]).collect();
                d.sort_unstable();
                d.dedup();
                d
            })
            .collect()
    }

    fn in_parts(dir: &Path, docs: &[Vec<u64>], parts: usize) -> IdfTable {
        let mut counts = vec![std::collections::HashMap::<u64, u64>::new(); parts];
        for d in docs {
            for &h in d {
                *counts[part_of(h, parts)].entry(h).or_default() += 1;
            }
        }
        let (mut paths, mut summaries) = (Vec::new(), Vec::new());
        for (p, c) in counts.into_iter().enumerate() {
            let path = dir.join(format!("part-{p}"));
            summaries.push(write_part(&path, p, parts, docs.len() as u64, c.into_iter().collect()).unwrap());
            paths.push(path);
        }
        IdfTable::from_parts("w3", docs.len() as u64, &paths, &summaries).unwrap()
    }

    #[test]
    fn a_table_in_parts_is_the_table_learned_in_one_process() {
        let docs = documents();
        let mut b = IdfBuilder::new("w3");
        docs.iter().for_each(|d| b.add_document(d));
        let whole = b.build(1);
        for parts in [1, 2, 3, 7, 64] {
            let dir = tempfile::tempdir().unwrap();
            let t = in_parts(dir.path(), &docs, parts);
            assert_eq!(t.encode(), whole.encode(), "{parts} parts");
            assert_eq!(t.id(), whole.id());
            assert_eq!(t.len(), whole.len());
            for h in docs.iter().flatten().copied().chain([2, 12345, u64::MAX - 2]) {
                assert_eq!(t.weight(h), whole.weight(h), "{h:#x} in {parts} parts");
            }
            let path = dir.path().join("t.idf");
            t.save(&path).unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), whole.encode());
        }
    }

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

    #[test]
    fn a_damaged_or_short_part_is_refused_naming_its_file() {
        let docs = documents();
        let dir = tempfile::tempdir().unwrap();
        let t = in_parts(dir.path(), &docs, 3);
        let (paths, summaries) = t.part_files().map(|(p, s)| (p.to_vec(), s.to_vec())).unwrap();
        drop(t);
        let mut bytes = std::fs::read(&paths[1]).unwrap();
        bytes[20] ^= 1;
        std::fs::write(&paths[1], &bytes).unwrap();
        let e = IdfTable::from_parts("w3", docs.len() as u64, &paths, &summaries).unwrap_err();
        assert!(e.to_string().contains("part-1") && e.to_string().contains("checksum"), "{e}");
        std::fs::write(&paths[1], &bytes[..bytes.len() - 12]).unwrap();
        let e = IdfTable::from_parts("w3", docs.len() as u64, &paths, &summaries).unwrap_err();
        assert!(e.to_string().contains("part-1") && e.to_string().contains("entries expected"), "{e}");
        // a part written for another range
        let e = write_part(&dir.path().join("x"), 0, 2, 10, vec![(u64::MAX, 1)]).unwrap_err();
        assert!(e.to_string().contains("outside"), "{e}");
        let e = write_part(&dir.path().join("x"), 0, 1, 1, vec![(5, 2)]).unwrap_err();
        assert!(e.to_string().contains("more documents"), "{e}");
    }
}
