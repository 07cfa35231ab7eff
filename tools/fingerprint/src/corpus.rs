//! Whole-corpus dedup, decided once for every front (`simdex dedup`, `python -m simdex.spark
//! dedup`): the options (k's default and its one limit, with one message), the content hash
//! that groups exact copies, the exact groups, the near links among one representative per
//! content (confirmed by sketch), the clusters, and the pairs and report files.
//!
//! Reading the inputs, the index and the printed summary are the fronts'; this module takes
//! documents already read ([`CorpusDoc`]: id, content hash, fingerprint, sketch).

// Indexing: documents by the u32 numbers given to them here (their places in `docs`).
#![allow(clippy::indexing_slicing)]
use std::collections::HashMap;
use std::hash::Hasher;
use std::io::{Read, Write};

use simdex::SortedTables;
use simdex::{clusters_from_pairs, near_pairs};

use crate::sketch::Sketch;
use crate::{DocumentQuery, Error, DEFAULT_MIN_SIMILARITY};

/// How a corpus is deduplicated: near-duplicates within `k` bits, confirmed by sketch when
/// `confirm` gives the resemblance a pair needs.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct CorpusOptions {
    /// Largest Hamming distance between near-duplicates (at most [`simdex::MAX_K`]).
    pub k: u32,
    /// The sketches' estimated resemblance a pair within `k` needs, or `None` to keep every
    /// pair within `k` by fingerprint alone.
    pub confirm: Option<f64>,
}

impl CorpusOptions {
    /// The options of a run, decided as a document call decides them ([`DocumentQuery`]: `k`
    /// defaults to [`crate::DEFAULT_CONFIRMED_K`] when pairs are confirmed, at `threshold`,
    /// default [`crate::DEFAULT_MIN_SIMILARITY`], and [`crate::DEFAULT_UNCONFIRMED_K`] when
    /// not), refused with its one limit and message ([`DocumentQuery::check`]).
    pub fn new(k: Option<u32>, confirm: bool, threshold: Option<f64>) -> Result<Self, Error> {
        let mut query = DocumentQuery::default().with_k(k).with_confirm(confirm);
        if let Some(t) = threshold {
            query = query.with_min_similarity(t);
        }
        query.check()?;
        Ok(Self { k: query.k(), confirm: confirm.then(|| threshold.unwrap_or(DEFAULT_MIN_SIMILARITY)) })
    }
}

/// A reader that hashes what passes through: the content hash exact copies are grouped by,
/// 128 bits from two SipHash-1-3 states with different keys, as 32 hex digits. Not
/// persisted (it may change with the Rust release), so both sides of a comparison must
/// come from one build.
pub struct ContentHash<R> {
    inner: R,
    a: std::hash::DefaultHasher,
    b: std::hash::DefaultHasher,
}

impl<R: Read> ContentHash<R> {
    /// Hashes what is read from `inner`.
    pub fn new(inner: R) -> Self {
        let a = std::hash::DefaultHasher::new();
        let mut b = std::hash::DefaultHasher::new();
        b.write_u64(0x5157_4c44_4f43_5321);
        ContentHash { inner, a, b }
    }

    /// The content hash of everything read so far.
    pub fn hex(&self) -> String {
        format!("{:016x}{:016x}", self.a.finish(), self.b.finish())
    }

    /// Reads the rest of the input (what a fingerprint that stopped early left), so that the
    /// hash covers the whole content.
    pub fn finish(&mut self) -> std::io::Result<String> {
        std::io::copy(self, &mut std::io::sink())?;
        Ok(self.hex())
    }
}

impl<R: Read> Read for ContentHash<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let read = buf.get(..n).unwrap_or_default();
        self.a.write(read);
        self.b.write(read);
        Ok(n)
    }
}

/// One document of a corpus as dedup sees it.
#[derive(Clone, Debug)]
pub struct CorpusDoc {
    /// Its id (a file's escaped name, or a JSON-lines record's `id`).
    pub id: String,
    /// Its content hash ([`ContentHash`]).
    pub content: String,
    /// Its fingerprint, `None` when it has none (too short, unreadable).
    pub fingerprint: Option<u64>,
    /// Its sketch, when pairs are confirmed.
    pub sketch: Option<Sketch>,
    /// Whether its fingerprint was made from a short text (or it has none).
    pub short: bool,
}

/// A near-duplicate pair of representatives (documents `a` and `b`, numbered by their
/// places in the corpus), their fingerprints' distance and their sketches' estimated
/// resemblance (NaN without sketches).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NearLink {
    /// The first document.
    pub a: u32,
    /// The second document.
    pub b: u32,
    /// Hamming distance of their fingerprints.
    pub distance: u32,
    /// Estimated resemblance of their sketches (NaN without).
    pub similarity: f64,
}

/// What corpus dedup found.
#[derive(Clone, Debug, Default)]
pub struct CorpusDedup {
    /// Groups of documents with the same content hash (documents without a fingerprint
    /// included), largest first.
    pub exact: Vec<Vec<u32>>,
    /// Near-duplicate clusters (each with at least two distinct contents), largest first.
    pub clusters: Vec<Vec<u32>>,
    /// Pairs of representatives within `k` (confirmed, when the options confirm).
    pub links: Vec<NearLink>,
}

impl CorpusDedup {
    /// Deduplicates `docs` (in corpus order): exact groups by content hash, then near links
    /// among one representative per content, clustered by union-find together with the
    /// exact copies. `threads` join the fingerprints' tables.
    pub fn new(docs: &[CorpusDoc], options: &CorpusOptions, threads: usize) -> Result<Self, Error> {
        let exact = exact_groups(docs);
        let mut representative = vec![true; docs.len()];
        for g in &exact {
            for &i in &g[1..] {
                representative[i as usize] = false;
            }
        }
        let reps: Vec<(u64, u32)> = docs.iter().enumerate().filter_map(|(i, d)| d.fingerprint.filter(|_| representative[i]).map(|f| (f, i as u32))).collect();
        let mut links = near_links(&reps, options.k, threads)?;
        for l in links.iter_mut() {
            l.similarity = match (&docs[l.a as usize].sketch, &docs[l.b as usize].sketch) {
                (Some(x), Some(y)) => x.similarity(y).unwrap_or(0.0),
                _ => f64::NAN,
            };
        }
        if let Some(threshold) = options.confirm {
            links.retain(|l| l.similarity >= threshold);
        }
        let exact_links = exact.iter().flat_map(|g| g[1..].iter().map(move |&i| (g[0], i)));
        let clusters = clusters_from_pairs(docs.len(), links.iter().map(|l| (l.a, l.b)).chain(exact_links))
            .into_iter()
            // clusters made of exact copies only are exact groups, not near ones again
            .filter(|c| c.iter().any(|&i| docs[i as usize].content != docs[c[0] as usize].content))
            .collect();
        Ok(CorpusDedup { exact, clusters, links })
    }

    /// Writes every near-duplicate pair of documents, exact copies included (distance 0,
    /// similarity 1), one a line: `id_a<TAB>id_b<TAB>distance<TAB>similarity` (a pair of
    /// representatives stands for every pair of their copies).
    pub fn write_pairs(&self, out: &mut dyn Write, docs: &[CorpusDoc]) -> std::io::Result<()> {
        let copies = self.copies();
        for g in &self.exact {
            for (x, &a) in g.iter().enumerate() {
                for &b in &g[x + 1..] {
                    writeln!(out, "{}\t{}\t0\t1.0000", docs[a as usize].id, docs[b as usize].id)?;
                }
            }
        }
        for l in &self.links {
            let (ga, gb) = (copies.get(&l.a).copied().unwrap_or(std::slice::from_ref(&l.a)), copies.get(&l.b).copied().unwrap_or(std::slice::from_ref(&l.b)));
            let similarity = similarity_text(l.similarity);
            for &x in ga {
                for &y in gb {
                    writeln!(out, "{}\t{}\t{}\t{similarity}", docs[x as usize].id, docs[y as usize].id, l.distance)?;
                }
            }
        }
        Ok(())
    }

    /// What [`Self::write_pairs`] writes: `(exact, near)`, the pairs within each exact group
    /// and, for each near link, the pairs between the two representatives' copies (what a
    /// summary counts, so that it matches the pairs file line for line).
    pub fn pair_counts(&self) -> (u64, u64) {
        let copies = self.copies();
        let exact = self.exact.iter().map(|g| g.len() as u64 * (g.len() as u64).saturating_sub(1) / 2).sum();
        let size = |i: u32| copies.get(&i).map_or(1, |g| g.len() as u64);
        let near = self.links.iter().map(|l| size(l.a) * size(l.b)).sum();
        (exact, near)
    }

    /// Each exact group by its representative (its first document).
    fn copies(&self) -> HashMap<u32, &[u32]> {
        self.exact.iter().map(|g| (g[0], g.as_slice())).collect()
    }

    /// Writes the JSON-lines report: exact groups, near clusters, then `skipped` documents
    /// (`(id, reason)`).
    #[cfg(feature = "jsonl")]
    pub fn write_report(&self, out: &mut dyn Write, docs: &[CorpusDoc], skipped: &[(String, String)]) -> std::io::Result<()> {
        use serde_json::json;
        let ids = |g: &[u32]| g.iter().map(|&i| docs[i as usize].id.clone()).collect::<Vec<_>>();
        for (n, g) in self.exact.iter().enumerate() {
            writeln!(out, "{}", json!({"kind": "exact", "group": n + 1, "size": g.len(), "content_hash": docs[g[0] as usize].content, "members": ids(g)}))?;
        }
        for (n, c) in self.clusters.iter().enumerate() {
            let fps: Vec<u64> = c.iter().filter_map(|&i| docs[i as usize].fingerprint).collect();
            let max_d = fps.iter().flat_map(|a| fps.iter().map(move |b| (a ^ b).count_ones())).max().unwrap_or(0);
            let short = c.iter().filter(|&&i| docs[i as usize].short).count();
            writeln!(out, "{}", json!({"kind": "near", "cluster": n + 1, "size": c.len(), "max_distance": max_d, "short_members": short, "members": ids(c)}))?;
        }
        for (id, reason) in skipped {
            writeln!(out, "{}", json!({"kind": "skipped", "id": id, "reason": reason}))?;
        }
        Ok(())
    }
}

/// The similarity column of a pairs file: four decimals, `-` when there is none (NaN).
pub fn similarity_text(x: f64) -> String {
    if x.is_nan() {
        "-".to_owned()
    } else {
        format!("{x:.4}")
    }
}

/// Groups of documents with the same content hash, largest first (ties by first document).
fn exact_groups(docs: &[CorpusDoc]) -> Vec<Vec<u32>> {
    let mut by_content: HashMap<&str, Vec<u32>> = HashMap::new();
    for (i, d) in docs.iter().enumerate() {
        by_content.entry(d.content.as_str()).or_default().push(i as u32);
    }
    let mut exact: Vec<Vec<u32>> = by_content.into_values().filter(|g| g.len() > 1).collect();
    exact.sort_by(|a, b| b.len().cmp(&a.len()).then(a[0].cmp(&b[0])));
    exact
}

/// Every pair of representatives whose fingerprints are equal or within `k`, with its
/// distance (the similarity is filled in by the caller).
fn near_links(reps: &[(u64, u32)], k: u32, threads: usize) -> Result<Vec<NearLink>, Error> {
    let tables = SortedTables::new(reps.iter().map(|&(fp, i)| (fp, u64::from(i))).collect(), k)?;
    let fp_pairs = near_pairs(&tables, k, threads.max(1))?;
    let mut by_fp = reps.to_vec();
    by_fp.sort_unstable();
    let docs_of = |fp: u64| {
        let from = by_fp.partition_point(|r| r.0 < fp);
        &by_fp[from..from + by_fp[from..].partition_point(|r| r.0 == fp)]
    };
    let mut links = Vec::new();
    for run in by_fp.chunk_by(|a, b| a.0 == b.0) {
        for (x, a) in run.iter().enumerate() {
            links.extend(run[x + 1..].iter().map(|b| NearLink { a: a.1, b: b.1, distance: 0, similarity: f64::NAN }));
        }
    }
    for (fa, fb) in fp_pairs {
        let distance = (fa ^ fb).count_ones();
        for a in docs_of(fa) {
            links.extend(docs_of(fb).iter().map(|b| NearLink { a: a.1, b: b.1, distance, similarity: f64::NAN }));
        }
    }
    Ok(links)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DEFAULT_CONFIRMED_K, DEFAULT_UNCONFIRMED_K};

    #[test]
    fn one_k_limit_and_one_message() {
        assert_eq!(CorpusOptions::new(None, true, None).unwrap(), CorpusOptions { k: DEFAULT_CONFIRMED_K, confirm: Some(DEFAULT_MIN_SIMILARITY) });
        assert_eq!(CorpusOptions::new(None, false, None).unwrap(), CorpusOptions { k: DEFAULT_UNCONFIRMED_K, confirm: None });
        assert_eq!(CorpusOptions::new(Some(8), true, Some(0.5)).unwrap().k, 8);
        let e = CorpusOptions::new(Some(9), true, None).unwrap_err().to_string();
        // the document calls' limit and message
        assert_eq!(e, DocumentQuery::within(9).check().unwrap_err().to_string());
        assert!(e.contains("k = 9") && e.contains("at most k = 8"), "{e}");
        assert!(CorpusOptions::new(Some(3), true, Some(1.5)).is_err());
    }

    #[test]
    fn the_content_hash_covers_every_byte_read() {
        let mut a = ContentHash::new(&b"hello world"[..]);
        let mut first = [0u8; 5];
        a.read_exact(&mut first).unwrap();
        let whole = a.finish().unwrap();
        let mut b = ContentHash::new(&b"hello world"[..]);
        assert_eq!(b.finish().unwrap(), whole);
        assert_ne!(ContentHash::new(&b"hello worle"[..]).finish().unwrap(), whole);
        assert_eq!(whole.len(), 32);
    }
}
