//! The IDF table: inverse document frequencies learned from a corpus, stored as integer
//! weights in a versioned, checksummed file (format-spec/fingerprint.md, "IDF table file").
//!
//! Weights are computed once, when the table is learned, as
//! `round(1000 * ln((1 + N) / (1 + df)))` clamped to `1..=65535` (N documents, df the number
//! of documents containing the feature); a feature the table has never seen gets the weight of
//! df = 0. Fingerprinting only reads the stored integers, so it is exact on every platform.
//! The weights are held in memory, or read from the file's entries written in parts by many
//! processes and mapped (`idf_parts`, [`IdfTable::from_parts`]).
//!
//! Layout (all integers little-endian):
//! ```text
//! 0   magic "SDXIDF\r\n"                8 bytes
//! 8   format version = 1                u32
//! 12  recipe length R                   u32
//! 16  recipe descriptor (UTF-8)         R bytes   features the table was learned with
//! ..  documents N                       u64
//! ..  default weight (unseen features)  u32
//! ..  entry count E                     u64
//! ..  E entries: hash u64, weight u32   12 bytes each, strictly ascending by hash
//! ..  CRC-32 (IEEE) of all bytes above  u32
//! ```

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::undocumented_unsafe_blocks)]

use super::feature_map::FeatureMap;
use super::idf_parts::{write_entries, PartSummary, Parts, ENTRY_LEN};
use super::Error;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// File magic of an IDF table.
pub const MAGIC: [u8; 8] = *b"SDXIDF\r\n";
/// The only format version this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;
/// Fixed bytes around the variable parts: magic, version, R, N, default, E, CRC.
const FIXED_LEN: usize = 8 + 4 + 4 + 8 + 4 + 8 + 4;

/// Integer IDF weights by feature hash.
#[derive(Debug, Clone)]
pub struct IdfTable {
    recipe: String,
    docs: u64,
    default_weight: u32,
    /// weights by feature hash (each within `1..=65535`)
    weights: Weights,
    /// [`IdfTable::id`], once computed (it encodes the whole table)
    id: std::sync::OnceLock<u32>,
}

/// Where a table's weights are: a map in memory, or part files mapped
/// ([`IdfTable::from_parts`]).
#[derive(Debug, Clone)]
enum Weights {
    Map(FeatureMap),
    Parts(std::sync::Arc<Parts>),
}

impl PartialEq for IdfTable {
    fn eq(&self, other: &Self) -> bool {
        let same = (&self.recipe, self.docs, self.default_weight) == (&other.recipe, other.docs, other.default_weight);
        same && match (&self.weights, &other.weights) {
            (Weights::Map(a), Weights::Map(b)) => a == b,
            _ => self.encode() == other.encode(),
        }
    }
}

impl Eq for IdfTable {}

/// Weight for a feature in `df` of `docs` documents: `round(1000 * ln((1 + N) / (1 + df)))`.
pub fn idf_weight(docs: u64, df: u64) -> u32 {
    clamp_weight(1000.0 * ((1 + docs) as f64 / (1 + df) as f64).ln())
}

/// Rounds a weight to the stored integer range `1..=65535`.
fn clamp_weight(w: f64) -> u32 {
    // floats are only used here, at learning time; the table persists the integers
    if w.is_nan() {
        return 1;
    }
    w.round().clamp(1.0, 65535.0) as u32
}

/// Learns an [`IdfTable`]: feed it the distinct features of each document.
///
/// A numbering builder ([`IdfBuilder::numbering`]) also numbers the features as it meets
/// them (0, 1, 2...), so that a caller keeping many documents' features until the table is
/// learned keeps each as a 4-byte number instead of its 8-byte hash
/// ([`DocumentFeatures::add_to`](crate::DocumentFeatures::add_to)), resolved by the vocabulary
/// ([`IdfBuilder::build_keeping_vocabulary`]). It counts at most `u32::MAX - 1` documents
/// and numbers at most `u32::MAX` features: beyond, it goes on counting without numbers.
#[derive(Debug)]
pub struct IdfBuilder {
    recipe: String,
    docs: u64,
    /// Feature hash -> document frequency; while numbering, the feature's number in the
    /// high 32 bits and its document frequency in the low 32 bits.
    df: FeatureMap,
    /// While numbering: the features' hashes by number.
    vocabulary: Option<Vec<u64>>,
}

impl IdfBuilder {
    /// A builder for features made with the feature recipe `recipe`
    /// ([`super::FingerprintOptions::feature_recipe`]).
    pub fn new(recipe: impl Into<String>) -> Self {
        IdfBuilder { recipe: recipe.into(), docs: 0, df: FeatureMap::default(), vocabulary: None }
    }

    /// [`IdfBuilder::new`], numbering the features it counts (see the type's docs).
    pub fn numbering(recipe: impl Into<String>) -> Self {
        IdfBuilder { vocabulary: Some(Vec::new()), ..IdfBuilder::new(recipe) }
    }

    /// Counts one document; `distinct_features` must not repeat a hash.
    pub fn add_document(&mut self, distinct_features: &[u64]) {
        if self.vocabulary.is_some() {
            let mut numbers = Vec::new();
            if self.number(distinct_features, &mut numbers) {
                return;
            }
        }
        self.docs += 1;
        self.df.add_many(distinct_features, 1);
    }

    /// Counts a document while numbering, its features' numbers appended to `numbers`;
    /// false (nothing counted, numbering stopped) when they would not fit in 32 bits.
    pub(crate) fn number(&mut self, distinct_features: &[u64], numbers: &mut Vec<u32>) -> bool {
        let Some(vocabulary) = self.vocabulary.as_mut() else { return false };
        if self.docs >= u64::from(u32::MAX) - 1 || vocabulary.len() + distinct_features.len() > u32::MAX as usize {
            self.stop_numbering();
            return false;
        }
        self.docs += 1;
        self.df.number_many(distinct_features, vocabulary, numbers);
        true
    }

    /// Leaves numbering (the counts stay): the vocabulary, if it was numbering.
    fn stop_numbering(&mut self) -> Option<Vec<u64>> {
        let vocabulary = self.vocabulary.take()?;
        self.df.map_values(|v| v & u64::from(u32::MAX));
        Some(vocabulary)
    }

    /// [`IdfBuilder::build`], and the features' hashes by number when it numbered every
    /// document it counted (`None` otherwise).
    pub fn build_keeping_vocabulary(mut self, min_df: u64) -> (IdfTable, Option<Vec<u64>>) {
        let vocabulary = self.stop_numbering();
        (self.build(min_df), vocabulary)
    }

    /// Documents counted so far.
    pub fn documents(&self) -> u64 {
        self.docs
    }

    /// Bytes of memory the counts hold (and, while numbering, the vocabulary of hashes).
    pub fn heap_bytes(&self) -> usize {
        self.df.heap_bytes() + self.vocabulary.as_ref().map_or(0, |v| 8 * v.capacity())
    }

    /// [`IdfBuilder::heap_bytes`] at its largest while it counts a document of `distinct`
    /// distinct features (what a budget must leave room for): when the counts grow for them,
    /// the old table and the new are held together for a moment, and so are the old and
    /// new vocabulary while numbering.
    pub fn heap_bytes_counting(&self, distinct: usize) -> usize {
        let vocabulary = self.vocabulary.as_ref().map_or(0, |v| {
            // pushed one at a time, it doubles (from 4) until they fit: the last old and new
            let (mut old, mut capacity) = (0, v.capacity());
            while capacity < v.len() + distinct {
                (old, capacity) = (capacity, (2 * capacity).max(4));
            }
            8 * (old + capacity)
        });
        self.df.heap_bytes_adding(distinct) + vocabulary
    }

    /// The table; features in fewer than `min_df` documents are left out (they get the
    /// default weight, which is at least theirs).
    pub fn build(self, min_df: u64) -> IdfTable {
        self.build_with(min_df, |docs, df| f64::from(idf_weight(docs, df)))
    }

    /// Like [`IdfBuilder::build`] with another weight function `weight(N, df)` (rounded and
    /// clamped to `1..=65535`); the table stores the resulting integers, so fingerprints made
    /// with it stay exact.
    pub fn build_with(mut self, min_df: u64, weight: impl Fn(u64, u64) -> f64) -> IdfTable {
        self.stop_numbering();
        let docs = self.docs;
        let weigh = |df: u64| u64::from(clamp_weight(weight(docs, df)));
        let weights = if min_df <= 1 {
            // every feature stays: its weight takes the place of its count
            let mut weights = self.df;
            weights.map_values(weigh);
            weights
        } else {
            let kept: Vec<(u64, u64)> = self.df.iter().filter(|&(_, df)| df >= min_df).collect();
            let mut weights = FeatureMap::with_capacity(kept.len());
            kept.into_iter().for_each(|(h, df)| weights.insert(h, weigh(df)));
            weights
        };
        IdfTable::with_weights(self.recipe, docs, clamp_weight(weight(docs, 0)), Weights::Map(weights))
    }
}

/// Writes part `part` (of `parts`, [`crate::idf_part_of`]) of the table of a corpus of `docs`
/// documents to `path`: `counts` are the part's distinct features with their document
/// frequencies (any order; each feature once), weighed as the table weighs them. A feature
/// outside the part, repeated, or counted in more documents than `docs` is refused. Returns
/// the part's summary, which [`IdfTable::from_parts`] checks the file against.
pub fn write_part(path: &Path, part: usize, parts: usize, docs: u64, counts: Vec<(u64, u64)>) -> Result<PartSummary, Error> {
    if counts.iter().any(|&(_, df)| df > docs) {
        return Err(Error::IdfCorrupt { what: "a feature counted in more documents than the corpus has" });
    }
    write_entries(path, part, parts, counts.into_iter().map(|(h, df)| (h, idf_weight(docs, df))).collect())
}

impl IdfTable {
    /// The table of `docs` documents, features of `recipe`, whose parts are the files `paths`
    /// (part `p` at `paths[p]`, written by [`write_part`] with the same `docs` and summarised
    /// by `summaries[p]`): each is mapped and checked against its summary (length, checksum,
    /// entries ascending within the part's range), a damaged or missing part refused, naming
    /// its file. The same weights, bytes and id as the table learned in one process.
    pub fn from_parts(recipe: &str, docs: u64, paths: &[PathBuf], summaries: &[PartSummary]) -> Result<IdfTable, Error> {
        let parts = Parts::open(paths, summaries)?;
        Ok(IdfTable::with_weights(recipe.to_owned(), docs, idf_weight(docs, 0), Weights::Parts(std::sync::Arc::new(parts))))
    }

    /// The part files and their summaries, when the table is read from parts
    /// ([`IdfTable::from_parts`]): what another process needs to open the same table.
    pub fn part_files(&self) -> Option<(&[PathBuf], &[PartSummary])> {
        match &self.weights {
            Weights::Parts(p) => Some(p.files()),
            Weights::Map(_) => None,
        }
    }

    fn with_weights(recipe: String, docs: u64, default_weight: u32, weights: Weights) -> IdfTable {
        IdfTable { recipe, docs, default_weight, weights, id: Default::default() }
    }

    /// Weight of the feature with hash `h`.
    #[inline]
    pub fn weight(&self, h: u64) -> u32 {
        match &self.weights {
            Weights::Map(m) => m.get(h).map_or(self.default_weight, |w| w as u32),
            Weights::Parts(p) => p.get(h).unwrap_or(self.default_weight),
        }
    }

    /// Calls `f(i, weight)` with the weight of each of `hashes` (`i` its position): the
    /// lookups of a document at once, their cache misses overlapping.
    #[inline]
    pub fn weights_of(&self, hashes: &[u64], mut f: impl FnMut(usize, u32)) {
        match &self.weights {
            Weights::Map(m) => m.get_many(hashes, |i, w| f(i, w.map_or(self.default_weight, |w| w as u32))),
            Weights::Parts(p) => p.get_many(hashes, |i, w| f(i, w.unwrap_or(self.default_weight))),
        }
    }

    /// The feature recipe the table was learned with.
    pub fn recipe(&self) -> &str {
        &self.recipe
    }

    /// Number of documents it was learned from.
    pub fn documents(&self) -> u64 {
        self.docs
    }

    /// Number of stored features.
    pub fn len(&self) -> usize {
        match &self.weights {
            Weights::Map(m) => m.len(),
            Weights::Parts(p) => p.len(),
        }
    }

    /// Whether no feature is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// CRC-32 of the encoded table: identifies it in fingerprint recipe descriptors.
    pub fn id(&self) -> u32 {
        *self.id.get_or_init(|| match &self.weights {
            Weights::Parts(p) => p.crc_after(&self.head()).finalize(),
            // the encoded entries' CRC, made as they stream by (not kept)
            Weights::Map(_) => self.write_to(&mut std::io::sink()).unwrap_or(0),
        })
    }

    /// The file's bytes before the entries.
    fn head(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FIXED_LEN + self.recipe.len());
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&(self.recipe.len() as u32).to_le_bytes());
        out.extend_from_slice(self.recipe.as_bytes());
        out.extend_from_slice(&self.docs.to_le_bytes());
        out.extend_from_slice(&self.default_weight.to_le_bytes());
        out.extend_from_slice(&(self.len() as u64).to_le_bytes());
        out
    }

    /// The file bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FIXED_LEN + self.recipe.len() + self.len() * ENTRY_LEN);
        // (writing to a Vec cannot fail)
        let _ = self.write_to(&mut out);
        out
    }

    /// Writes the file bytes to `out`: a table in parts streams its part files' entries, a
    /// table in memory its entries in order a run at a time
    /// (`FeatureMap::for_each_sorted`: no sorted copy of them). Returns the CRC it ended with.
    fn write_to(&self, out: &mut dyn Write) -> std::io::Result<u32> {
        let head = self.head();
        out.write_all(&head)?;
        let crc = match &self.weights {
            Weights::Map(m) => {
                const FLUSH: usize = 1 << 16;
                let mut crc = crc32fast::Hasher::new();
                crc.update(&head);
                let mut buf = Vec::with_capacity((FLUSH + 1024) * ENTRY_LEN);
                let mut written = Ok(());
                let mut flush = |buf: &mut Vec<u8>| {
                    crc.update(buf);
                    if written.is_ok() {
                        written = out.write_all(buf);
                    }
                    buf.clear();
                };
                m.for_each_sorted(|run| {
                    for &(h, w) in run {
                        buf.extend_from_slice(&h.to_le_bytes());
                        buf.extend_from_slice(&(w as u32).to_le_bytes());
                    }
                    if buf.len() >= FLUSH * ENTRY_LEN {
                        flush(&mut buf);
                    }
                });
                flush(&mut buf);
                written?;
                crc.finalize()
            }
            Weights::Parts(p) => {
                for bytes in p.bytes() {
                    out.write_all(bytes)?;
                }
                p.crc_after(&head).finalize()
            }
        };
        out.write_all(&crc.to_le_bytes())?;
        Ok(crc)
    }

    /// Parses file bytes; never panics on bad input.
    pub fn decode(bytes: &[u8]) -> Result<IdfTable, Error> {
        let mut r = Cursor { bytes, pos: 0 };
        if r.take(8)? != MAGIC {
            return Err(Error::IdfBadMagic);
        }
        let version = r.u32()?;
        if version != FORMAT_VERSION {
            return Err(Error::IdfUnsupportedVersion { found: version, supported: FORMAT_VERSION });
        }
        let (body, stored) = bytes.split_last_chunk::<4>().ok_or(Error::IdfTruncated { needed: 4 })?;
        let (stored, computed) = (u32::from_le_bytes(*stored), crc32fast::hash(body));
        if stored != computed {
            return Err(Error::IdfChecksum { stored, computed });
        }
        let recipe_len = r.u32()? as usize;
        let recipe = std::str::from_utf8(r.take(recipe_len)?).map_err(|_| Error::IdfCorrupt { what: "recipe is not UTF-8" })?.to_owned();
        let docs = r.u64()?;
        let default_weight = r.u32()?;
        let count = r.u64()?;
        let expected = (count as u128) * ENTRY_LEN as u128 + 4;
        if (bytes.len() - r.pos) as u128 != expected {
            return Err(Error::IdfCorrupt { what: "entry count does not match the file length" });
        }
        // (the count is checked against the file's length above)
        let mut weights = FeatureMap::with_capacity(count as usize);
        let mut prev: Option<u64> = None;
        for _ in 0..count {
            let h = r.u64()?;
            let w = r.u32()?;
            if prev.is_some_and(|p| p >= h) {
                return Err(Error::IdfCorrupt { what: "entries not strictly ascending" });
            }
            prev = Some(h);
            weights.insert(h, u64::from(w));
        }
        Ok(IdfTable::with_weights(recipe, docs, default_weight, Weights::Map(weights)))
    }

    /// Writes the table to `path` (via a temporary file and a rename).
    pub fn save(&self, path: &Path) -> Result<(), Error> {
        // as the index writes its files: `path.tmp`, fsynced, renamed, the directory fsynced;
        // a failure (a directory at `path`, a full disk) removes the temporary file. The bytes
        // stream to the file (a table in parts may not fit in memory).
        Ok(simdex::storage::write_atomically_from(&simdex::storage::FsStorage, path, |out| self.write_to(out).map(|_| ()))?)
    }

    /// Reads and verifies a table file.
    pub fn load(path: &Path) -> Result<IdfTable, Error> {
        let mut bytes = Vec::new();
        std::fs::File::open(path)?.read_to_end(&mut bytes)?;
        IdfTable::decode(&bytes)
    }
}

struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        let end = self.pos.checked_add(n);
        let s = end.and_then(|end| self.bytes.get(self.pos..end)).ok_or(Error::IdfTruncated { needed: n })?;
        self.pos += n;
        Ok(s)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        let mut b = [0u8; N];
        b.copy_from_slice(self.take(N)?);
        Ok(b)
    }
    fn u32(&mut self) -> Result<u32, Error> {
        self.array().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Result<u64, Error> {
        self.array().map(u64::from_le_bytes)
    }
}

/// Fuzz entry point (`tools/fuzz`, feature `fuzzing`): `data` is an IDF table file: decode
/// it as [`IdfTable::load`] does and look up a few weights. A table that decodes must encode
/// back to the same bytes.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub fn fuzz_decode(data: &[u8]) {
    for data in simdex::fuzzing::with_trailing_crc(data) {
        if let Ok(t) = IdfTable::decode(&data) {
            for h in [0, 1, u64::MAX] {
                std::hint::black_box(t.weight(h));
            }
            assert_eq!(t.encode(), data, "IDF table does not encode back to its bytes");
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn table() -> IdfTable {
        let mut b = IdfBuilder::new("w3");
        b.add_document(&[1, 2, 3]);
        b.add_document(&[1, 2]);
        b.add_document(&[1, 9]);
        b.build(1)
    }

    /// What the counts hold (what dedup's budget counts): at least 16 bytes a feature in the
    /// map, and 8 more in the vocabulary while numbering; none before the first document.
    #[test]
    fn heap_bytes_cover_the_features_counted() {
        for numbering in [false, true] {
            let mut b = if numbering { IdfBuilder::numbering("w3") } else { IdfBuilder::new("w3") };
            assert_eq!(b.heap_bytes(), 0);
            for d in 0..200u64 {
                b.add_document(&(0..50).map(|i| d * 1000 + i + 1).collect::<Vec<u64>>());
                let features = (d as usize + 1) * 50;
                assert!(b.heap_bytes() >= features * if numbering { 24 } else { 16 }, "{d}");
                assert!(b.heap_bytes() <= features * 64 + 4096, "{d}");
            }
        }
    }

    #[test]
    fn weights_follow_document_frequency() {
        let t = table();
        assert_eq!(t.documents(), 3);
        // ln(4/4) = 0 clamps to 1; ln(4/3), ln(4/2); unseen ln(4/1)
        assert_eq!(t.weight(1), 1);
        assert_eq!(t.weight(2), 288);
        assert_eq!(t.weight(3), 693);
        assert_eq!(t.weight(12345), 1386);
    }

    #[test]
    fn roundtrip_and_checksum() {
        let t = table();
        let bytes = t.encode();
        assert_eq!(IdfTable::decode(&bytes).unwrap(), t);
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert!(IdfTable::decode(&bad).is_err(), "flip at {i} accepted");
        }
        for n in 0..bytes.len() {
            assert!(IdfTable::decode(&bytes[..n]).is_err(), "truncation to {n} accepted");
        }
    }

    #[test]
    fn save_and_load() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("idf.bin");
        table().save(&p).unwrap();
        assert_eq!(IdfTable::load(&p).unwrap(), table());
    }
}
