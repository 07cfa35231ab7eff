//! `simdex.spark dedup` in a handful of Spark jobs: what its executors and driver run, as
//! library calls over column buffers (no document is a Python object).
//!
//! - [`scatter_documents`] (map side, one call per Arrow batch of documents): fingerprints and
//!   sketches each text with the pinned recipe and packs every document into the block-split
//!   partitions of its fingerprint, the sketch and the id carried with it, so the join needs no
//!   second shuffle. Exact copies (one content hash) are collapsed where they meet: only the
//!   first copy of a content in a batch goes to every group; later copies go to group 0 alone
//!   (where exact groups are formed) without a sketch. A document without a fingerprint goes
//!   to the group-0 partition of its content hash, so its exact copies still meet.
//! - [`join_documents`] (reduce side, one call per partition): exact groups by content hash
//!   (group 0), the representatives' near pairs by the library's block-split join, each
//!   confirmed by the two sketches in the partition; the answer is the links between
//!   representatives and the members of exact groups and links, with their ids.
//! - [`finish_dedup`] (driver): the clusters by union-find over the links and the exact groups,
//!   the pairs file (every pair of documents, exact copies expanded), the clusters file, and
//!   the documents the deduplicated corpus leaves out.
//! - [`write_kept`] (executors): one task's documents minus those left out, as JSON lines.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use simdex_fingerprint::corpus::similarity_text;

use crate::batch::u64s;
use crate::spark::CorpusRecipe;
use crate::spark_columns::Column;
use crate::spark_rule::{band_partition, bands_of, CorpusRule};

const HAS_FP: u8 = 1;
const HAS_SKETCH: u8 = 2;
/// A member row's flag: the document belongs to an exact group (its `rep` is the group's first).
const EXACT: u8 = 4;

/// A binary column being built: data and i32 offsets.
#[derive(Default)]
struct Blobs {
    data: Vec<u8>,
    offsets: Vec<u8>,
}

impl Blobs {
    fn new() -> Self {
        Blobs { data: Vec::new(), offsets: 0i32.to_le_bytes().to_vec() }
    }

    fn end(&mut self) -> PyResult<()> {
        let end = i32::try_from(self.data.len()).map_err(|_| PyValueError::new_err("a batch passes 2 GiB: use smaller input ranges"))?;
        self.offsets.extend_from_slice(&end.to_le_bytes());
        Ok(())
    }

    fn push(&mut self, value: &[u8]) -> PyResult<()> {
        self.data.extend_from_slice(value);
        self.end()
    }
}

/// The 16 bytes of a content hash (32 hex digits), or a hash of any other text.
fn content_key(hex: &[u8]) -> u128 {
    std::str::from_utf8(hex).ok().filter(|s| s.len() == 32).and_then(|s| u128::from_str_radix(s, 16).ok()).unwrap_or_else(|| {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        hex.hash(&mut h);
        u128::from(h.finish())
    })
}

/// The group-0 partition of a document without a fingerprint: by its content hash.
fn content_partition(content: u128, parts: usize) -> usize {
    let h = (content as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32;
    ((h * parts as u64) >> 32) as usize
}

fn record(out: &mut Vec<u8>, (flags, band): (u8, u8), fp: u64, ord: u64, content: u128, sketch: &[u8], id: &[u8]) {
    out.push(flags);
    out.push(band);
    out.extend_from_slice(&fp.to_le_bytes());
    out.extend_from_slice(&ord.to_le_bytes());
    out.extend_from_slice(&content.to_le_bytes());
    out.extend_from_slice(&(sketch.len() as u16).to_le_bytes());
    out.extend_from_slice(sketch);
    out.extend_from_slice(&(id.len() as u32).to_le_bytes());
    out.extend_from_slice(id);
}

/// One document as the join reads it from a partition's blobs.
struct Rec<'a> {
    flags: u8,
    /// The band a record of the band group was sent for.
    band: u8,
    fp: u64,
    ord: u64,
    content: u128,
    sketch: &'a [u8],
    id: &'a [u8],
}

fn take<'a>(bytes: &mut &'a [u8], n: usize) -> PyResult<&'a [u8]> {
    if bytes.len() < n {
        return Err(PyValueError::new_err("a scattered document record is cut short"));
    }
    let (head, rest) = bytes.split_at(n);
    *bytes = rest;
    Ok(head)
}

fn records(mut bytes: &[u8]) -> PyResult<Vec<Rec<'_>>> {
    let mut out = Vec::new();
    let arr = |b: &[u8]| -> [u8; 8] { b.try_into().unwrap_or_default() };
    while !bytes.is_empty() {
        let head = take(&mut bytes, 2)?;
        let (flags, band) = (head.first().copied().unwrap_or(0), head.get(1).copied().unwrap_or(0));
        let fp = u64::from_le_bytes(arr(take(&mut bytes, 8)?));
        let ord = u64::from_le_bytes(arr(take(&mut bytes, 8)?));
        let content = u128::from_le_bytes(take(&mut bytes, 16)?.try_into().unwrap_or_default());
        let n = u16::from_le_bytes(take(&mut bytes, 2)?.try_into().unwrap_or_default());
        let sketch = take(&mut bytes, usize::from(n))?;
        let m = u32::from_le_bytes(take(&mut bytes, 4)?.try_into().unwrap_or_default());
        let id = take(&mut bytes, m as usize)?;
        out.push(Rec { flags, band, fp, ord, content, sketch, id });
    }
    Ok(out)
}

/// The map side's answer: `(partitions, data, offsets, status, reasons_data,
/// reasons_offsets, fps, sketches)`: one binary row per non-empty partition bucket, per
/// document 0 (fingerprinted), 1 (no fingerprint: the reason is in `reasons`) or 2 (no text),
/// and with `keep`, the fingerprint and sketch of every fingerprinted document in order.
type ScatteredDocs<'py> =
    (Vec<usize>, Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>);

/// Fingerprints, sketches (when `rule` confirms) and scatters one batch of documents (see the
/// module docs): `ords` little-endian u64s, `ids`, `contents` and `texts` Arrow string
/// columns' buffers (nulls filled), `has_text` a u8 per document. `parts[g]` partitions for
/// group `g`, numbered group after group; when `rule` takes band candidates, one more count,
/// the band group's (each representative's sketch goes to the partition of each of its bands).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (recipe, split, parts, ords, id_data, id_offsets, content_data, content_offsets, text_data, text_offsets, has_text, rule, keep=false))]
fn scatter_documents<'py>(
    py: Python<'py>,
    recipe: &CorpusRecipe,
    split: &crate::spark_cluster::BlockJoin,
    parts: Vec<usize>,
    ords: &[u8],
    id_data: &[u8],
    id_offsets: &[u8],
    content_data: &[u8],
    content_offsets: &[u8],
    text_data: &[u8],
    text_offsets: &[u8],
    has_text: &[u8],
    rule: &CorpusRule,
    keep: bool,
) -> PyResult<ScatteredDocs<'py>> {
    let sketch = rule.confirms();
    let ords = u64s(ords, "ords")?;
    let (ids, contents, texts) =
        (Column::new(id_data, id_offsets, "ids")?, Column::new(content_data, content_offsets, "contents")?, Column::new(text_data, text_offsets, "texts")?);
    let n = ords.len();
    if ids.len() != n || contents.len() != n || texts.len() != n || has_text.len() != n {
        return Err(PyValueError::new_err(format!("{n} ords, {} ids, {} contents, {} texts, {} text flags", ids.len(), contents.len(), texts.len(), has_text.len())));
    }
    let split = split.split();
    let groups = split.groups() + usize::from(rule.bands());
    if parts.len() != groups || parts.contains(&0) {
        return Err(PyValueError::new_err(format!("{} partition counts for {groups} groups (each at least 1)", parts.len())));
    }
    let out = py.allow_threads(|| -> PyResult<_> {
        let mut fp = recipe.fp();
        let mut sketcher = recipe.sketcher();
        let total: usize = parts.iter().sum();
        let mut buckets: Vec<Vec<u8>> = vec![Vec::new(); total];
        let (mut status, mut reasons) = (Vec::with_capacity(n), Blobs::new());
        let mut first_of: HashMap<u128, ()> = HashMap::new();
        let (mut kept_fps, mut kept_sketches) = (Vec::new(), Vec::new());
        for i in 0..n {
            let content = content_key(contents.bytes(i));
            let ord = ords.get(i).copied().unwrap_or(0);
            let id = ids.bytes(i);
            if has_text.get(i).copied().unwrap_or(0) == 0 {
                status.push(2u8);
                reasons.push(b"")?;
                record(&mut buckets[content_partition(content, parts[0])], (0, 0), 0, ord, content, &[], id);
                continue;
            }
            let text = std::str::from_utf8(texts.bytes(i)).unwrap_or_default();
            let first = first_of.insert(content, ()).is_none();
            // the sketch only where it is used, made in the fingerprint's scan of the text
            let (f, mut s) = if sketch && (first || keep) {
                let (f, s) = fp.fingerprint_and_sketch(text, &mut sketcher);
                (f, Some(s))
            } else {
                (fp.fingerprint(text), None)
            };
            match f {
                Ok(f) => {
                    status.push(0);
                    reasons.push(b"")?;
                    if keep {
                        kept_fps.extend_from_slice(&f.value.to_le_bytes());
                        if let Some(s) = &s {
                            kept_sketches.extend_from_slice(s.as_bytes());
                        }
                    }
                    if !first {
                        record(&mut buckets[split.partition(0, f.value, parts[0])], (HAS_FP, 0), f.value, ord, content, &[], id);
                        continue;
                    }
                    let s = s.take();
                    let bytes = s.as_ref().map_or(&[][..], |s| s.as_bytes());
                    let flags = HAS_FP | if s.is_some() { HAS_SKETCH } else { 0 };
                    let mut at = 0;
                    for (g, &count) in parts.iter().enumerate().take(split.groups()) {
                        record(&mut buckets[at + split.partition(g, f.value, count)], (flags, 0), f.value, ord, content, bytes, id);
                        at += count;
                    }
                    if let (Some(s), Some(&count)) = (s.as_ref().filter(|_| rule.bands()), parts.get(split.groups())) {
                        for key in bands_of(s) {
                            record(&mut buckets[at + band_partition(key, count)], (flags, key.0), f.value, ord, content, bytes, id);
                        }
                    }
                }
                Err(e) => {
                    status.push(1);
                    reasons.push(e.to_string().as_bytes())?;
                    record(&mut buckets[content_partition(content, parts[0])], (0, 0), 0, ord, content, &[], id);
                }
            }
        }
        let (mut partitions, mut blobs) = (Vec::new(), Blobs::new());
        for (p, b) in buckets.iter().enumerate().filter(|(_, b)| !b.is_empty()) {
            partitions.push(p);
            blobs.push(b)?;
        }
        Ok((partitions, blobs, status, reasons, kept_fps, kept_sketches))
    })?;
    let (partitions, blobs, status, reasons, fps, sketches) = out;
    let b = |v: &[u8]| PyBytes::new(py, v);
    Ok((partitions, b(&blobs.data), b(&blobs.offsets), b(&status), b(&reasons.data), b(&reasons.offsets), b(&fps), b(&sketches)))
}

/// One partition's answer: links `(a, b, distance, similarity, verdict)` between
/// representatives and members `(ord, rep, flags, id)`.
type Joined<'py> = [Bound<'py, PyBytes>; 10];

/// Joins one partition of `group` (see the module docs): `data` the partition's blobs back to
/// back. Every candidate (a pair of representatives within k, or in the band group (the group
/// after the block-split join's), sharing a band and beyond k) gets `rule`'s verdict from its
/// sketches' estimate; the pairs it keeps or leaves undecided are answered. Returns the links
/// (u64 `a`, u64 `b`, u32 distance, f64 similarity (NaN without sketches), u8 verdict: `a` the
/// document of the smaller fingerprint, or the first in corpus order when they are equal or
/// the pair shares a band only) and the members (u64 ord, u64 representative, u8 flags (1:
/// has a fingerprint, 4: in an exact group), and the id as an Arrow string column's data and
/// offsets): every document of an exact group (group 0) and every representative of a link.
#[pyfunction]
fn join_documents<'py>(py: Python<'py>, split: &crate::spark_cluster::BlockJoin, group: usize, data: &[u8], rule: &CorpusRule) -> PyResult<Joined<'py>> {
    let recs = records(data)?;
    let split = split.split();
    let bands = group == split.groups();
    let out = py.allow_threads(|| -> PyResult<_> {
        // by content, then corpus order: each content's first is its representative
        let mut order: Vec<usize> = (0..recs.len()).collect();
        order.sort_unstable_by_key(|&i| (recs[i].content, recs[i].ord, recs[i].band));
        let (mut m_ord, mut m_rep, mut m_fp, mut m_ids) = (Vec::new(), Vec::new(), Vec::new(), Blobs::new());
        let mut reps: Vec<usize> = Vec::new();
        // (band group) each representative's bands that were sent here: (band, word, rep)
        let mut keys: Vec<(u8, u32, usize)> = Vec::new();
        for run in order.chunk_by(|&x, &y| recs[x].content == recs[y].content) {
            let rep = run[0];
            // (a content a map task held more than once arrives once per task in every group)
            let mut copies: Vec<usize> = run.to_vec();
            copies.dedup_by_key(|i| recs[*i].ord);
            if group == 0 && copies.len() > 1 {
                for &i in &copies {
                    m_ord.extend_from_slice(&recs[i].ord.to_le_bytes());
                    m_rep.extend_from_slice(&recs[rep].ord.to_le_bytes());
                    m_fp.push((recs[i].flags & HAS_FP) | EXACT);
                    m_ids.push(recs[i].id)?;
                }
            }
            if recs[rep].flags & HAS_FP != 0 {
                reps.push(rep);
            }
            if let Some(words) = rule.sketch(recs[rep].sketch).filter(|_| bands).map(|s| bands_of(&s)) {
                for &i in run.iter().take_while(|&&i| recs[i].ord == recs[rep].ord) {
                    if let Some(&(band, word)) = words.get(usize::from(recs[i].band)) {
                        keys.push((band, word, rep));
                    }
                }
            }
        }
        reps.sort_unstable_by_key(|&i| (recs[i].fp, recs[i].ord));
        let sketches: HashMap<usize, _> = reps.iter().filter(|&&i| recs[i].flags & HAS_SKETCH != 0).filter_map(|&i| Some((i, rule.sketch(recs[i].sketch)?))).collect();
        let similarity = |a: usize, b: usize| match (sketches.get(&a), sketches.get(&b)) {
            (Some(x), Some(y)) => x.similarity(y).unwrap_or(0.0),
            _ => f64::NAN,
        };
        let mut cols: [Vec<u8>; 5] = Default::default();
        let mut linked: Vec<usize> = Vec::new();
        let mut link = |a: usize, b: usize, d: u32| {
            let s = similarity(a, b);
            let Some(verdict) = rule.verdict(s) else { return };
            let [la, lb, ld, ls, lu] = &mut cols;
            la.extend_from_slice(&recs[a].ord.to_le_bytes());
            lb.extend_from_slice(&recs[b].ord.to_le_bytes());
            ld.extend_from_slice(&d.to_le_bytes());
            ls.extend_from_slice(&s.to_le_bytes());
            lu.push(verdict);
            linked.push(a);
            linked.push(b);
        };
        if bands {
            // pairs sharing a band, beyond k (those within k are the join's), each from the
            // partition of the first band they share
            keys.sort_unstable();
            for bucket in keys.chunk_by(|x, y| (x.0, x.1) == (y.0, y.1)) {
                for (x, &(band, _, a)) in bucket.iter().enumerate() {
                    for &(_, _, b) in &bucket[x + 1..] {
                        let (a, b) = if recs[a].ord < recs[b].ord { (a, b) } else { (b, a) };
                        let d = (recs[a].fp ^ recs[b].fp).count_ones();
                        let first = match (sketches.get(&a), sketches.get(&b)) {
                            (Some(x), Some(y)) => bands_of(x).iter().zip(bands_of(y)).position(|(p, q)| *p == q) == Some(usize::from(band)),
                            _ => false,
                        };
                        if d > rule.k() && first {
                            link(a, b, d);
                        }
                    }
                }
            }
        } else {
            let runs: Vec<&[usize]> = reps.chunk_by(|&x, &y| recs[x].fp == recs[y].fp).collect();
            if group == 0 {
                // representatives of other contents with the same fingerprint: distance 0
                for run in &runs {
                    for (x, &a) in run.iter().enumerate() {
                        for &b in &run[x + 1..] {
                            link(a, b, 0);
                        }
                    }
                }
            }
            let distinct: Vec<u64> = runs.iter().map(|r| recs[r[0]].fp).collect();
            let found = split.join_partition(group, distinct, &[]).map_err(crate::errors::to_py)?;
            let run_of = |fp: u64| runs.binary_search_by_key(&fp, |r| recs[r[0]].fp).ok().and_then(|i| runs.get(i));
            for (fa, fb) in found.pairs {
                let (Some(ra), Some(rb)) = (run_of(fa), run_of(fb)) else { continue };
                let d = (fa ^ fb).count_ones();
                for &a in ra.iter() {
                    for &b in rb.iter() {
                        link(a, b, d);
                    }
                }
            }
        }
        linked.sort_unstable();
        linked.dedup();
        for &i in &linked {
            m_ord.extend_from_slice(&recs[i].ord.to_le_bytes());
            m_rep.extend_from_slice(&recs[i].ord.to_le_bytes());
            m_fp.push(1);
            m_ids.push(recs[i].id)?;
        }
        Ok((cols, [m_ord, m_rep, m_fp], m_ids))
    })?;
    let ([la, lb, ld, ls, lu], [mo, mr, mf], ids) = out;
    let b = |v: &[u8]| PyBytes::new(py, v);
    Ok([b(&la), b(&lb), b(&ld), b(&ls), b(&lu), b(&mo), b(&mr), b(&mf), b(&ids.data), b(&ids.offsets)])
}

/// What the driver found: counts and the documents the deduplicated corpus leaves out.
#[pyclass(module = "simdex._simdex", frozen, get_all)]
struct DedupFound {
    /// Exact groups (one content, two documents or more) and their documents.
    exact_groups: u64,
    exact_documents: u64,
    /// Copies beyond the first of each exact group, and those of them with a fingerprint.
    redundant: u64,
    redundant_fingerprinted: u64,
    /// Confirmed links between representatives, and those of them beyond k (found because
    /// their sketches share a band).
    links: u64,
    beyond_k: u64,
    /// Links the second look decided by exact Jaccard, and those of them whose estimate had
    /// said the other side.
    second_look_decided: u64,
    second_look_changed: u64,
    /// Clusters of two documents or more (exact copies and near-duplicates, transitively),
    /// and their documents.
    clusters: u64,
    clustered: u64,
    /// Pair lines written.
    pairs: u64,
    /// Ords (little-endian u64s, sorted) of the documents in a cluster that are not its
    /// first in corpus order: what `kept` leaves out.
    dropped: Py<PyBytes>,
}

/// The driver's end of `dedup` (see the module docs): the links and members of every
/// partition (columns as [`join_documents`] returns them, concatenated), the undecided links
/// settled by `rule` from `sets` (the shingle sets of their documents, as
/// [`crate::spark_rule::shingle_sets`] returns them, concatenated), the pairs file
/// (`id_a<TAB>id_b<TAB>distance<TAB>similarity`: the exact groups' pairs in corpus order,
/// then each link expanded over the copies of its two representatives) and the clusters
/// file (`id<TAB>cluster`, the cluster named by its first document's id, sorted by cluster
/// and corpus order), each written when its path is given.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (la, lb, ld, ls, lu, mo, mr, mf, id_data, id_offsets, rule, sets=None, pairs_path=None, clusters_path=None))]
fn finish_dedup(
    py: Python<'_>,
    la: &[u8],
    lb: &[u8],
    ld: &[u8],
    ls: &[u8],
    lu: &[u8],
    mo: &[u8],
    mr: &[u8],
    mf: &[u8],
    id_data: &[u8],
    id_offsets: &[u8],
    rule: &CorpusRule,
    sets: Option<(Bound<'_, PyBytes>, Bound<'_, PyBytes>, Bound<'_, PyBytes>)>,
    pairs_path: Option<&str>,
    clusters_path: Option<&str>,
) -> PyResult<DedupFound> {
    let sets = sets.map(|(o, l, s)| crate::spark_rule::sets_by_ord(o.as_bytes(), l.as_bytes(), s.as_bytes())).transpose()?.unwrap_or_default();
    let (la, lb, mo, mr) = (u64s(la, "a")?, u64s(lb, "b")?, u64s(mo, "members")?, u64s(mr, "representatives")?);
    let ld: Vec<u32> = ld.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap_or_default())).collect();
    let ls: Vec<f64> = ls.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap_or_default())).collect();
    let ids = Column::new(id_data, id_offsets, "ids")?;
    if lb.len() != la.len() || ld.len() != la.len() || ls.len() != la.len() || lu.len() != la.len() || mr.len() != mo.len() || mf.len() != mo.len() || ids.len() != mo.len() {
        return Err(PyValueError::new_err("links and members: columns of different lengths"));
    }
    let found = py.allow_threads(|| -> PyResult<_> {
        // members by ord, once each (a representative comes from every partition it links
        // in); an exact group's row (flag EXACT, from group 0) wins over a link's
        let mut members: Vec<(u64, u64, u8, usize)> = (0..mo.len()).map(|i| (mo[i], mr[i], mf[i], i)).collect();
        members.sort_unstable_by_key(|m| (m.0, m.2 & EXACT == 0));
        members.dedup_by_key(|m| m.0);
        let id_of = |ord: u64| members.binary_search_by_key(&ord, |m| m.0).ok().map_or(&[][..], |i| ids.bytes(members[i].3));
        // the exact groups: their documents in corpus order, by representative
        let mut copies: HashMap<u64, Vec<u64>> = HashMap::new();
        for m in members.iter().filter(|m| m.2 & EXACT != 0) {
            copies.entry(m.1).or_default().push(m.0);
        }
        let exact_groups = copies.len() as u64;
        let exact_documents: u64 = copies.values().map(|g| g.len() as u64).sum();
        let fingerprinted = |ord: u64| members.binary_search_by_key(&ord, |m| m.0).ok().is_some_and(|i| members[i].2 & HAS_FP != 0);
        let redundant_fingerprinted: u64 = copies.values().map(|g| g.iter().skip(1).filter(|&&o| fingerprinted(o)).count() as u64).sum();
        let mut links: Vec<(u64, u64, u32, f64, u8)> = (0..la.len()).map(|i| (la[i], lb[i], ld[i], ls[i], lu[i])).collect();
        links.sort_unstable_by_key(|x| (x.0, x.1));
        links.dedup_by(|x, y| (x.0, x.1) == (y.0, y.1));
        let (decided, changed) = crate::spark_rule::settle(rule, &mut links, &sets);
        let beyond_k = links.iter().filter(|l| l.2 > rule.k()).count() as u64;
        let edges = links.iter().map(|l| (l.0, l.1)).chain(copies.iter().flat_map(|(&rep, g)| g.iter().map(move |&o| (rep, o))));
        let components = simdex::pair_components(edges);
        let mut pairs = 0u64;
        if let Some(path) = pairs_path {
            let failed = |e: std::io::Error| PyOSError::new_err(format!("cannot write {path}: {e}"));
            let mut out = BufWriter::with_capacity(1 << 20, File::create(path).map_err(failed)?);
            let mut reps: Vec<&u64> = copies.keys().collect();
            reps.sort_unstable();
            for rep in reps {
                let g = &copies[rep];
                for (x, &a) in g.iter().enumerate() {
                    for &b in &g[x + 1..] {
                        out.write_all(id_of(a))
                            .and_then(|_| out.write_all(b"\t"))
                            .and_then(|_| out.write_all(id_of(b)))
                            .and_then(|_| out.write_all(b"\t0\t1.0000\n"))
                            .map_err(failed)?;
                        pairs += 1;
                    }
                }
            }
            for &(a, b, d, s, _) in &links {
                let text = similarity_text(s);
                let (ga, gb) = (copies.get(&a).map_or(std::slice::from_ref(&a), Vec::as_slice), copies.get(&b).map_or(std::slice::from_ref(&b), Vec::as_slice));
                for &x in ga {
                    for &y in gb {
                        out.write_all(id_of(x))
                            .and_then(|_| out.write_all(b"\t"))
                            .and_then(|_| out.write_all(id_of(y)))
                            .and_then(|_| writeln!(out, "\t{d}\t{text}"))
                            .map_err(failed)?;
                        pairs += 1;
                    }
                }
            }
            out.flush().map_err(failed)?;
        }
        // every component's members in corpus order, named by the first
        let mut by_cluster: Vec<(u64, u64)> = components.iter().map(|&(v, c)| (c, v)).collect();
        by_cluster.sort_unstable();
        let clusters = by_cluster.chunk_by(|x, y| x.0 == y.0).count() as u64;
        let clustered = by_cluster.len() as u64;
        if let Some(path) = clusters_path {
            let failed = |e: std::io::Error| PyOSError::new_err(format!("cannot write {path}: {e}"));
            let mut out = BufWriter::with_capacity(1 << 20, File::create(path).map_err(failed)?);
            for &(c, v) in &by_cluster {
                out.write_all(id_of(v)).and_then(|_| out.write_all(b"\t")).and_then(|_| out.write_all(id_of(c))).and_then(|_| out.write_all(b"\n")).map_err(failed)?;
            }
            out.flush().map_err(failed)?;
        }
        let mut dropped: Vec<u64> = by_cluster.iter().filter(|&&(c, v)| c != v).map(|&(_, v)| v).collect();
        dropped.sort_unstable();
        let dropped: Vec<u8> = dropped.iter().flat_map(|v| v.to_le_bytes()).collect();
        let redundant = exact_documents - exact_groups;
        Ok(((exact_groups, exact_documents, redundant, redundant_fingerprinted), (links.len() as u64, beyond_k, decided, changed), (clusters, clustered, pairs), dropped))
    })?;
    let ((exact_groups, exact_documents, redundant, redundant_fingerprinted), (links, beyond_k, second_look_decided, second_look_changed), (clusters, clustered, pairs), dropped) =
        found;
    Ok(DedupFound {
        exact_groups,
        exact_documents,
        redundant,
        redundant_fingerprinted,
        links,
        beyond_k,
        second_look_decided,
        second_look_changed,
        clusters,
        clustered,
        pairs,
        dropped: PyBytes::new(py, &dropped).unbind(),
    })
}

/// A JSON string literal of `s` (UTF-8; control characters escaped).
fn json_string(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for ch in String::from_utf8_lossy(s).chars() {
        match ch {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            c if (c as u32) < 0x20 => out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes()),
            c => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out.push(b'"');
}

/// Appends to `path` the documents of one batch that the deduplicated corpus keeps (every
/// document whose ord is not in `dropped`, sorted little-endian u64s) as JSON lines `{"id":
/// ..., "text": ...}` (no `text` when it has none), in batch order. Returns the lines written.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn write_kept(py: Python<'_>, path: &str, ords: &[u8], id_data: &[u8], id_offsets: &[u8], text_data: &[u8], text_offsets: &[u8], has_text: &[u8], dropped: &[u8]) -> PyResult<u64> {
    let (ords, dropped) = (u64s(ords, "ords")?, u64s(dropped, "dropped")?);
    let (ids, texts) = (Column::new(id_data, id_offsets, "ids")?, Column::new(text_data, text_offsets, "texts")?);
    py.allow_threads(|| {
        let failed = |e: std::io::Error| PyOSError::new_err(format!("cannot write {path}: {e}"));
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path).map_err(failed)?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let (mut line, mut n) = (Vec::new(), 0u64);
        for (i, ord) in ords.iter().enumerate() {
            if dropped.binary_search(ord).is_ok() {
                continue;
            }
            line.clear();
            line.extend_from_slice(b"{\"id\":");
            json_string(&mut line, ids.bytes(i));
            if has_text.get(i).copied().unwrap_or(0) != 0 {
                line.extend_from_slice(b",\"text\":");
                json_string(&mut line, texts.bytes(i));
            }
            line.extend_from_slice(b"}\n");
            out.write_all(&line).map_err(failed)?;
            n += 1;
        }
        out.flush().map_err(failed)?;
        Ok(n)
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<DedupFound>()?;
    m.add_function(wrap_pyfunction!(scatter_documents, m)?)?;
    m.add_function(wrap_pyfunction!(join_documents, m)?)?;
    m.add_function(wrap_pyfunction!(finish_dedup, m)?)?;
    m.add_function(wrap_pyfunction!(write_kept, m)?)?;
    Ok(())
}
