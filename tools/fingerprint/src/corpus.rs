//! Whole-corpus dedup, decided once for every front (`simdex dedup`, `python -m simdex.spark
//! dedup`): the options (k's default and its one limit, with one message), the content hash
//! that groups exact copies (made by `content_hash`), the exact groups, the near links among
//! one representative per content (candidates within k, or sharing a sketch band; confirmed
//! by sketch, and, where the estimate is within the sketch's noise of the threshold, by the
//! exact Jaccard of the shingle sets when the caller can give it: [`CorpusDedup::settle`]),
//! the clusters, and the pairs and report files.
//!
//! Reading the inputs, the index and the printed summary are the fronts'; this module takes
//! documents already read ([`CorpusDoc`]: id, content hash, fingerprint, sketch).

// Indexing: documents by the u32 numbers given to them here (their places in `docs`).
#![allow(clippy::indexing_slicing)]
use std::collections::HashMap;
use std::io::Write;

use simdex::SortedTables;
use simdex::{clusters_from_pairs, near_pairs, ClusterOptions};

pub use crate::content_hash::ContentHash;
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
    /// With `confirm`, also take as candidates the pairs whose sketches share a band (one of
    /// their 32-bit words, as an index's band files do: [`band_keys`]), whatever their
    /// fingerprints' distance: near-duplicates the fingerprints put beyond `k`.
    pub band_candidates: bool,
    /// With `confirm`, leave the pairs whose estimate is within the sketch's noise of the
    /// threshold ([`noise_window`]) to [`CorpusDedup::settle`], which decides them by exact
    /// Jaccard.
    pub second_look: bool,
}

/// What a run's rule says of a candidate pair from its sketches' estimate
/// ([`CorpusOptions::verdict`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Near-duplicates (every candidate, when pairs are not confirmed).
    Near,
    /// Not near-duplicates.
    Apart,
    /// Within the sketch's noise of the threshold: the exact Jaccard decides
    /// ([`CorpusOptions::near_by_exact`]) when it is known; else the estimate stands (`near`).
    Undecided {
        /// What the estimate alone says.
        near: bool,
    },
}

impl Verdict {
    /// Whether the pair is kept while no exact Jaccard is known.
    pub fn near(self) -> bool {
        matches!(self, Verdict::Near | Verdict::Undecided { near: true })
    }
}

impl CorpusOptions {
    /// The options of a run, decided as a document call decides them ([`DocumentQuery`]: `k`
    /// defaults to [`crate::DEFAULT_CONFIRMED_K`] when pairs are confirmed, at `threshold`,
    /// default [`crate::DEFAULT_MIN_SIMILARITY`], and [`crate::DEFAULT_UNCONFIRMED_K`] when
    /// not), refused with its one limit and message ([`DocumentQuery::check`]); band
    /// candidates and the second look on (`simdex dedup`'s defaults).
    pub fn new(k: Option<u32>, confirm: bool, threshold: Option<f64>) -> Result<Self, Error> {
        let mut query = DocumentQuery::default().with_k(k).with_confirm(confirm);
        if let Some(t) = threshold {
            query = query.with_min_similarity(t);
        }
        query.check()?;
        Ok(Self { k: query.k(), confirm: confirm.then(|| threshold.unwrap_or(DEFAULT_MIN_SIMILARITY)), band_candidates: true, second_look: true })
    }

    /// The rule for a candidate pair whose sketches (of `sketch`'s recipe; `None`: no
    /// sketches) estimate `similarity` (NaN without sketches): near when not confirmed; else
    /// undecided within the noise window of the threshold (with a second look), near at or
    /// above the threshold, apart below it.
    pub fn verdict(&self, similarity: f64, sketch: Option<crate::sketch::SketchOptions>) -> Verdict {
        let Some(threshold) = self.confirm else { return Verdict::Near };
        let near = similarity >= threshold;
        if let Some(sketch) = sketch.filter(|_| self.second_look) {
            let (low, high) = noise_window(threshold, sketch);
            if similarity >= low && similarity < high {
                return Verdict::Undecided { near };
            }
        }
        if near {
            Verdict::Near
        } else {
            Verdict::Apart
        }
    }

    /// Whether a pair the second look measured at exact Jaccard `jaccard` is near.
    pub fn near_by_exact(&self, jaccard: f64) -> bool {
        self.confirm.is_none_or(|threshold| jaccard >= threshold)
    }

    /// The same options with candidates by shared sketch band on or off.
    pub fn with_band_candidates(self, band_candidates: bool) -> Self {
        Self { band_candidates, ..self }
    }

    /// The same options with the second look by exact Jaccard on or off.
    pub fn with_second_look(self, second_look: bool) -> Self {
        Self { second_look, ..self }
    }
}

/// The estimates a second look decides at `threshold` for sketches of `options`:
/// `threshold` plus or minus three standard deviations of the estimate there (b-bit
/// MinHash: `sqrt(P (1 - P) / n) / (1 - c)` with `c = 2^-b`, `P = t + (1 - t) c`; 0.058 for
/// 512 one-bit values at 0.90). A true pair at the threshold is estimated below the window
/// with probability about 0.1%.
pub fn noise_window(threshold: f64, options: crate::sketch::SketchOptions) -> (f64, f64) {
    let c = 0.5f64.powi(options.bits as i32);
    let p = threshold + (1.0 - threshold) * c;
    let sd = (p * (1.0 - p) / f64::from(options.hashes.max(1))).sqrt() / (1.0 - c);
    (threshold - 3.0 * sd, threshold + 3.0 * sd)
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
/// resemblance (NaN without sketches; the exact Jaccard once [`CorpusDedup::settle`]
/// decided it).
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
    /// Pairs of representatives within `k` or sharing a sketch band (confirmed, when the
    /// options confirm).
    pub links: Vec<NearLink>,
    /// The candidates whose estimate is within the noise of the threshold, for
    /// [`Self::settle`] (empty without a second look), and the options that found them.
    undecided: Vec<NearLink>,
    options: Option<CorpusOptions>,
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
        if options.confirm.is_some() && options.band_candidates {
            links.extend(band_links(docs, &reps, &links, threads));
        }
        for l in links.iter_mut() {
            l.similarity = match (&docs[l.a as usize].sketch, &docs[l.b as usize].sketch) {
                (Some(x), Some(y)) => x.similarity(y).unwrap_or(0.0),
                _ => f64::NAN,
            };
        }
        let sketch_options = docs.iter().find_map(|d| d.sketch.as_ref().map(|s| s.options()));
        let undecided = links.iter().filter(|l| matches!(options.verdict(l.similarity, sketch_options), Verdict::Undecided { .. })).copied().collect();
        links.retain(|l| options.verdict(l.similarity, sketch_options).near());
        let mut found = CorpusDedup { exact, clusters: Vec::new(), links, undecided, options: Some(*options) };
        found.cluster(docs);
        Ok(found)
    }

    /// The documents of the pairs a second look would decide, ascending (none without one).
    pub fn undecided_docs(&self) -> Vec<u32> {
        let mut out: Vec<u32> = self.undecided.iter().flat_map(|l| [l.a, l.b]).collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Decides the pairs whose estimate is within the noise of the threshold by `exact`, the
    /// exact Jaccard of two documents' shingle sets (`None`: unknown, the estimate stands),
    /// and clusters again. Returns how many pairs it decided and how many of them changed
    /// sides.
    pub fn settle(&mut self, docs: &[CorpusDoc], mut exact: impl FnMut(u32, u32) -> Option<f64>) -> (usize, usize) {
        let undecided = std::mem::take(&mut self.undecided);
        let key = |l: &NearLink| (l.a, l.b);
        let mut by_pair: HashMap<(u32, u32), f64> = HashMap::with_capacity(undecided.len());
        let (mut decided, mut changed) = (0, 0);
        for l in &undecided {
            if let Some(j) = exact(l.a, l.b) {
                decided += 1;
                changed += usize::from(self.near_by_exact(j) != self.options.is_none_or(|o| o.verdict(l.similarity, None).near()));
                by_pair.insert(key(l), j);
            }
        }
        self.links.retain(|l| !by_pair.contains_key(&key(l)));
        let settled: Vec<NearLink> = undecided.iter().filter_map(|l| by_pair.get(&key(l)).filter(|&&j| self.near_by_exact(j)).map(|&j| NearLink { similarity: j, ..*l })).collect();
        self.links.extend(settled);
        self.cluster(docs);
        (decided, changed)
    }

    fn near_by_exact(&self, jaccard: f64) -> bool {
        self.options.is_none_or(|o| o.near_by_exact(jaccard))
    }

    /// The clusters of the links and the exact groups.
    fn cluster(&mut self, docs: &[CorpusDoc]) {
        let exact_links = self.exact.iter().flat_map(|g| g[1..].iter().map(move |&i| (g[0], i)));
        self.clusters = clusters_from_pairs(docs.len(), self.links.iter().map(|l| (l.a, l.b)).chain(exact_links))
            .into_iter()
            // clusters made of exact copies only are exact groups, not near ones again
            .filter(|c| c.iter().any(|&i| docs[i as usize].content != docs[c[0] as usize].content))
            .collect();
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

/// The bands of a sketch, `(band, word)`: its 32-bit words (little-endian) by place, as an
/// index's band files key them (`format-spec/bands.md`). Two sketches sharing one are
/// candidates ([`CorpusOptions::band_candidates`]).
pub fn band_keys(sketch: &Sketch) -> impl Iterator<Item = (u8, u32)> + '_ {
    sketch.as_bytes().chunks_exact(4).enumerate().map(|(band, w)| (band as u8, u32::from_le_bytes([w[0], w[1], w[2], w[3]])))
}

/// Every pair of representatives with sketches that share a band (a 32-bit word of the
/// sketch, as the index's band files, `format-spec/bands.md`) and is not in `known`, with its
/// fingerprints' distance (the similarity is filled in by the caller). Each pair once, `a < b`,
/// in `(a, b)` order. The bands are shared out among `threads` threads: each sorts a band's
/// `(word, document)` keys and takes the pairs within each run of equal words.
fn band_links(docs: &[CorpusDoc], reps: &[(u64, u32)], known: &[NearLink], threads: usize) -> Vec<NearLink> {
    let sketched: Vec<(u32, &Sketch)> = reps.iter().filter_map(|&(_, i)| docs[i as usize].sketch.as_ref().map(|s| (i, s))).collect();
    let bands = sketched.iter().map(|(_, s)| band_keys(s).count()).max().unwrap_or(0);
    let threads = threads.clamp(1, bands.max(1));
    // the pairs of the bands `first, first + threads, ...`, ascending, each once
    let pairs_of = |first: usize| {
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        let mut keys: Vec<(u32, u32)> = Vec::with_capacity(sketched.len());
        for band in (first..bands).step_by(threads) {
            keys.clear();
            keys.extend(sketched.iter().filter_map(|&(i, s)| band_keys(s).nth(band).map(|(_, word)| (word, i))));
            keys.sort_unstable();
            for run in keys.chunk_by(|x, y| x.0 == y.0).filter(|run| run.len() > 1) {
                // documents ascend within a run: a < b
                for (x, &(_, a)) in run.iter().enumerate() {
                    pairs.extend(run[x + 1..].iter().map(|&(_, b)| (a, b)));
                }
            }
            // a pair sharing many bands is held once
            pairs.sort_unstable();
            pairs.dedup();
        }
        pairs
    };
    let mut pairs: Vec<(u32, u32)> = if threads == 1 {
        pairs_of(0)
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads).map(|t| s.spawn(move || pairs_of(t))).collect();
            handles.into_iter().flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
        })
    };
    pairs.sort_unstable();
    pairs.dedup();
    let mut known: Vec<(u32, u32)> = known.iter().map(|l| (l.a.min(l.b), l.a.max(l.b))).collect();
    known.sort_unstable();
    pairs
        .into_iter()
        .filter(|p| known.binary_search(p).is_err())
        .map(|(a, b)| {
            let (fa, fb) = (docs[a as usize].fingerprint.unwrap_or(0), docs[b as usize].fingerprint.unwrap_or(0));
            NearLink { a, b, distance: (fa ^ fb).count_ones(), similarity: f64::NAN }
        })
        .collect()
}

/// Every pair of representatives whose fingerprints are equal or within `k`, with its
/// distance (the similarity is filled in by the caller).
fn near_links(reps: &[(u64, u32)], k: u32, threads: usize) -> Result<Vec<NearLink>, Error> {
    let tables = SortedTables::new(reps.iter().map(|&(fp, i)| (fp, u64::from(i))).collect(), k)?;
    let fp_pairs = near_pairs(&tables, &ClusterOptions::new(k).with_threads(threads.max(1)))?;
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
    use crate::sketch::{jaccard, SketchOptions, Sketcher};
    use crate::{DEFAULT_CONFIRMED_K, DEFAULT_UNCONFIRMED_K};

    /// 300 words; `changed` of them (spread out) replaced, so that the shingle sets of two
    /// versions differ by about 3 shingles per changed word.
    fn text(seed: u32, changed: &[usize]) -> String {
        (0..300usize).map(|i| if changed.contains(&i) { format!("x{i}y{seed}") } else { format!("w{}", (i as u64 * 7919 + 13) % 1009) }).collect::<Vec<_>>().join(" ")
    }

    /// Documents with sketches, fingerprints as given.
    fn docs(texts: &[String], fps: &[u64]) -> (Vec<CorpusDoc>, Vec<Vec<u64>>) {
        let mut s = Sketcher::new(SketchOptions::default()).unwrap();
        let sets: Vec<Vec<u64>> = texts.iter().map(|t| s.shingles(t).to_vec()).collect();
        let docs = texts
            .iter()
            .zip(fps)
            .enumerate()
            .map(|(i, (t, &fp))| CorpusDoc { id: format!("d{i}"), content: format!("c{i}"), fingerprint: Some(fp), sketch: Some(s.sketch(t)), short: false })
            .collect();
        (docs, sets)
    }

    /// A pair whose fingerprints are 40 bits apart is found by a shared sketch band, and only
    /// with band candidates on.
    #[test]
    fn band_candidates_find_pairs_beyond_k() {
        let texts = [text(0, &[]), text(1, &[150]), text(2, &(0..300).step_by(2).collect::<Vec<_>>())];
        let (docs, sets) = docs(&texts, &[0, (1u64 << 40) - 1, 0xFFFF_0000_0000_0000]);
        assert!(jaccard(&sets[0], &sets[1]) > 0.95 && jaccard(&sets[0], &sets[2]) < 0.2);
        let options = CorpusOptions::new(None, true, None).unwrap().with_band_candidates(false);
        let without = CorpusDedup::new(&docs, &options, 1).unwrap();
        assert!(without.links.is_empty(), "{:?}", without.links);
        let with = CorpusDedup::new(&docs, &options.with_band_candidates(true), 1).unwrap();
        let pairs: Vec<(u32, u32, u32)> = with.links.iter().map(|l| (l.a.min(l.b), l.a.max(l.b), l.distance)).collect();
        assert_eq!(pairs, vec![(0, 1, 40)]);
        assert_eq!(with.clusters, vec![vec![0, 1]]);
    }

    /// The band candidates on any number of threads are the pairs of representatives whose
    /// sketches share a band, by brute force over every pair, less the known ones.
    #[test]
    fn band_links_are_every_pair_sharing_a_band_on_any_threads() {
        // versions of three texts, 0 to 40 words changed: some share many bands, some few
        let texts: Vec<String> = (0..45u32).map(|n| text(n, &(0..(n / 3) as usize).map(|i| ((n % 3) as usize * 7 + i * 23) % 300).collect::<Vec<_>>())).collect();
        let fps: Vec<u64> = (0..texts.len() as u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect();
        let (docs, _) = docs(&texts, &fps);
        // every third document is no representative
        let reps: Vec<(u64, u32)> = (0..docs.len() as u32).filter(|i| i % 3 != 2).map(|i| (fps[i as usize], i)).collect();
        let known = [NearLink { a: 3, b: 0, distance: 0, similarity: f64::NAN }, NearLink { a: 1, b: 4, distance: 0, similarity: f64::NAN }];
        let mut want = Vec::new();
        for (x, &(fa, a)) in reps.iter().enumerate() {
            for &(fb, b) in &reps[x + 1..] {
                let (sa, sb) = (docs[a as usize].sketch.as_ref().unwrap(), docs[b as usize].sketch.as_ref().unwrap());
                let shared = band_keys(sa).zip(band_keys(sb)).any(|(p, q)| p == q);
                if shared && !known.iter().any(|l| (l.a.min(l.b), l.a.max(l.b)) == (a, b)) {
                    want.push((a, b, (fa ^ fb).count_ones()));
                }
            }
        }
        assert!(want.len() > 20 && want.len() < reps.len() * (reps.len() - 1) / 2, "the test needs some pairs and not all: {}", want.len());
        for threads in [1, 2, 3, 16, 40] {
            let got: Vec<(u32, u32, u32)> = band_links(&docs, &reps, &known, threads).iter().map(|l| (l.a, l.b, l.distance)).collect();
            assert_eq!(got, want, "{threads} threads");
        }
    }

    /// With a second look, every pair estimated within the noise window is decided by its
    /// exact Jaccard (the oracle), whatever its estimate; without, by the estimate.
    #[test]
    fn the_second_look_decides_by_exact_jaccard_within_the_noise() {
        // versions of one text at exact Jaccard 0.85-0.97 of the first, all within k
        let texts: Vec<String> = (0..14u32).map(|n| text(n, &(0..n as usize).map(|i| 11 + i * 21).collect::<Vec<_>>())).collect();
        let (docs, sets) = docs(&texts, &vec![7; texts.len()]);
        let options = CorpusOptions::new(None, true, None).unwrap().with_band_candidates(false);
        let (low, high) = noise_window(0.9, SketchOptions::default());
        assert!((high - low - 2.0 * 3.0 * (0.19f64 / 512.0).sqrt()).abs() < 1e-9, "3 sd each side at 0.90");
        let mut found = CorpusDedup::new(&docs, &options, 1).unwrap();
        let estimate_only = CorpusDedup::new(&docs, &options.with_second_look(false), 1).unwrap();
        let wanted = found.undecided_docs();
        let mut asked = 0;
        found.settle(&docs, |a, b| {
            asked += 1;
            assert!(wanted.contains(&a) && wanted.contains(&b));
            Some(jaccard(&sets[a as usize], &sets[b as usize]))
        });
        assert!(asked > 0);
        let key = |l: &NearLink| (l.a.min(l.b), l.a.max(l.b));
        let kept: std::collections::HashSet<(u32, u32)> = found.links.iter().map(key).collect();
        let mut within = 0;
        for a in 0..texts.len() as u32 {
            for b in a + 1..texts.len() as u32 {
                let exact = jaccard(&sets[a as usize], &sets[b as usize]);
                let est = docs[a as usize].sketch.as_ref().unwrap().similarity(docs[b as usize].sketch.as_ref().unwrap()).unwrap();
                let want = if est >= low && est < high { exact >= 0.9 } else { est >= 0.9 };
                within += usize::from(est >= low && est < high);
                assert_eq!(kept.contains(&(a, b)), want, "pair {a} {b}: exact {exact:.3}, estimate {est:.3}");
                let by_estimate = estimate_only.links.iter().any(|l| key(l) == (a, b));
                assert_eq!(by_estimate, est >= 0.9, "without the second look, pair {a} {b}");
            }
        }
        assert!(within > 10, "the test needs pairs within the window: {within}");
        // a decided pair reports its exact Jaccard
        for l in &found.links {
            let (est, exact) =
                (docs[l.a as usize].sketch.as_ref().unwrap().similarity(docs[l.b as usize].sketch.as_ref().unwrap()).unwrap(), jaccard(&sets[l.a as usize], &sets[l.b as usize]));
            assert_eq!(l.similarity, if est >= low && est < high { exact } else { est });
        }
    }

    #[test]
    fn one_k_limit_and_one_message() {
        assert_eq!(
            CorpusOptions::new(None, true, None).unwrap(),
            CorpusOptions { k: DEFAULT_CONFIRMED_K, confirm: Some(DEFAULT_MIN_SIMILARITY), band_candidates: true, second_look: true }
        );
        assert_eq!(CorpusOptions::new(None, false, None).unwrap(), CorpusOptions { k: DEFAULT_UNCONFIRMED_K, confirm: None, band_candidates: true, second_look: true });
        assert_eq!(CorpusOptions::new(Some(8), true, Some(0.5)).unwrap().k, 8);
        let e = CorpusOptions::new(Some(9), true, None).unwrap_err().to_string();
        // the document calls' limit and message
        assert_eq!(e, DocumentQuery::within(9).check().unwrap_err().to_string());
        assert!(e.contains("k = 9") && e.contains("at most k = 8"), "{e}");
        assert!(CorpusOptions::new(Some(3), true, Some(1.5)).is_err());
    }
}
