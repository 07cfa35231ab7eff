//! The corpus rule of `simdex.spark dedup`, as its tasks and driver ask it: the library's
//! [`CorpusOptions`] (k, the threshold, band candidates, the second look) with the sketch recipe
//! of the run. Spark restates none of it: the join asks [`CorpusRule::verdict`] of each
//! candidate, the map side asks which partitions a sketch's bands go to, and the driver asks
//! which documents the second look needs ([`undecided_documents`]), reads their shingle sets
//! in one more pass ([`shingle_sets`]) and settles the undecided pairs by exact Jaccard
//! ([`settle`]), as `simdex dedup` does.

use std::collections::HashMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use simdex_fingerprint::corpus::{band_keys, CorpusOptions, Verdict};
use simdex_fingerprint::sketch::{jaccard, Sketch, SketchOptions};

use crate::batch::u64s;
use crate::spark::CorpusRecipe;
use crate::spark_columns::Column;

/// A link's verdict column: kept by the estimate, or undecided (the estimate says near, or
/// apart) until the second look.
pub(crate) const NEAR: u8 = 0;
const UNDECIDED_NEAR: u8 = 1;
const UNDECIDED_APART: u8 = 2;

/// The options of a dedup run and the sketches it confirms with.
#[pyclass(module = "simdex._simdex", frozen)]
pub(crate) struct CorpusRule {
    options: CorpusOptions,
    sketches: SketchOptions,
}

impl CorpusRule {
    pub(crate) fn k(&self) -> u32 {
        self.options.k
    }

    /// Whether pairs are confirmed by sketch (documents are sketched).
    pub(crate) fn confirms(&self) -> bool {
        self.options.confirm.is_some()
    }

    /// Whether sketches sharing a band are candidates (a band group after the join's).
    pub(crate) fn bands(&self) -> bool {
        self.confirms() && self.options.band_candidates
    }

    /// The link column of a candidate estimated at `similarity`, `None` when it is dropped.
    pub(crate) fn verdict(&self, similarity: f64) -> Option<u8> {
        match self.options.verdict(similarity, Some(self.sketches)) {
            Verdict::Near => Some(NEAR),
            Verdict::Apart => None,
            Verdict::Undecided { near: true } => Some(UNDECIDED_NEAR),
            Verdict::Undecided { near: false } => Some(UNDECIDED_APART),
        }
    }

    /// The sketch of `bytes` (`None`: no sketch, or not of this run's recipe).
    pub(crate) fn sketch(&self, bytes: &[u8]) -> Option<Sketch> {
        Sketch::from_bytes(self.sketches, bytes).ok()
    }
}

/// The band partition (of `count`) of a sketch's band `key`.
pub(crate) fn band_partition(key: (u8, u32), count: usize) -> usize {
    let h = ((u64::from(key.0) << 32) | u64::from(key.1)).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32;
    ((h * count as u64) >> 32) as usize
}

/// The bands of `sketch` (see [`band_keys`]).
pub(crate) fn bands_of(sketch: &Sketch) -> Vec<(u8, u32)> {
    band_keys(sketch).collect()
}

#[pymethods]
impl CorpusRule {
    /// The rule of a dedup run with `recipe`'s sketches: k, the threshold and the rest as the
    /// library decides them from what the user gave (one limit, one message); band
    /// candidates and the second look as the library's defaults unless given.
    #[new]
    #[pyo3(signature = (recipe, k=None, confirm=true, threshold=None, band_candidates=None, second_look=None))]
    fn new(recipe: &CorpusRecipe, k: Option<u32>, confirm: bool, threshold: Option<f64>, band_candidates: Option<bool>, second_look: Option<bool>) -> PyResult<Self> {
        let mut options = CorpusOptions::new(k, confirm, threshold).map_err(crate::errors::fp_error)?;
        if let Some(b) = band_candidates {
            options = options.with_band_candidates(b);
        }
        if let Some(s) = second_look {
            options = options.with_second_look(s);
        }
        Ok(CorpusRule { options, sketches: recipe.sketcher().options() })
    }

    /// Rebuilds a rule from `__reduce__`'s parts.
    #[staticmethod]
    #[pyo3(signature = (k, threshold, band_candidates, second_look, sketches))]
    fn _restore(k: u32, threshold: Option<f64>, band_candidates: bool, second_look: bool, sketches: (u32, u32, u32)) -> PyResult<Self> {
        let options = CorpusOptions::new(Some(k), threshold.is_some(), threshold).map_err(crate::errors::fp_error)?;
        let (version, hashes, bits) = sketches;
        let options = options.with_band_candidates(band_candidates).with_second_look(second_look);
        Ok(CorpusRule { options, sketches: SketchOptions::new(hashes, bits).with_version(version) })
    }

    #[allow(clippy::type_complexity)]
    fn __reduce__(slf: &Bound<'_, Self>) -> PyResult<(PyObject, (u32, Option<f64>, bool, bool, (u32, u32, u32)))> {
        let r = slf.get();
        let s = r.sketches;
        Ok((slf.getattr("_restore")?.unbind(), (r.options.k, r.options.confirm, r.options.band_candidates, r.options.second_look, (s.version, s.hashes, s.bits))))
    }

    /// Largest Hamming distance of a candidate by fingerprint.
    #[getter(k)]
    fn py_k(&self) -> u32 {
        self.options.k
    }

    /// The estimated resemblance a pair needs, `None` when pairs are not confirmed.
    #[getter]
    fn threshold(&self) -> Option<f64> {
        self.options.confirm
    }

    /// Whether sketches sharing a band are candidates too (the join then has a band group).
    #[getter]
    fn band_candidates(&self) -> bool {
        self.bands()
    }
}

/// The documents (ords, sorted little-endian u64s) of the links whose verdict waits for the
/// second look: `la`, `lb` the links' ords, `lu` their verdict column.
#[pyfunction]
pub(crate) fn undecided_documents<'py>(py: Python<'py>, la: &[u8], lb: &[u8], lu: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
    let (la, lb) = (u64s(la, "a")?, u64s(lb, "b")?);
    let mut out: Vec<u64> = la.iter().zip(&lb).zip(lu).filter(|(_, &u)| u != NEAR).flat_map(|((&a, &b), _)| [a, b]).collect();
    out.sort_unstable();
    out.dedup();
    Ok(PyBytes::new(py, &out.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()))
}

/// The shingle sets (the sketch's, of `recipe`) of one batch's documents whose ord is in
/// `wanted` (sorted little-endian u64s): `(ords, lengths (u32s), shingles (u64s))`.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub(crate) fn shingle_sets<'py>(
    py: Python<'py>,
    recipe: &CorpusRecipe,
    ords: &[u8],
    text_data: &[u8],
    text_offsets: &[u8],
    has_text: &[u8],
    wanted: &[u8],
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let (ords, wanted) = (u64s(ords, "ords")?, u64s(wanted, "wanted")?);
    let texts = Column::new(text_data, text_offsets, "texts")?;
    if texts.len() != ords.len() || has_text.len() != ords.len() {
        return Err(PyValueError::new_err(format!("{} ords, {} texts, {} text flags", ords.len(), texts.len(), has_text.len())));
    }
    let (o, l, s) = py.allow_threads(|| {
        let mut sketcher = recipe.sketcher();
        let (mut o, mut l, mut s) = (Vec::new(), Vec::new(), Vec::new());
        for (i, ord) in ords.iter().enumerate() {
            if has_text.get(i) != Some(&1) || wanted.binary_search(ord).is_err() {
                continue;
            }
            let set = sketcher.shingles(std::str::from_utf8(texts.bytes(i)).unwrap_or_default());
            o.extend_from_slice(&ord.to_le_bytes());
            l.extend_from_slice(&(set.len() as u32).to_le_bytes());
            s.extend(set.iter().flat_map(|v| v.to_le_bytes()));
        }
        (o, l, s)
    });
    Ok((PyBytes::new(py, &o), PyBytes::new(py, &l), PyBytes::new(py, &s)))
}

/// The shingle sets `shingle_sets` returned (concatenated), by ord.
pub(crate) fn sets_by_ord(ords: &[u8], lengths: &[u8], shingles: &[u8]) -> PyResult<HashMap<u64, Vec<u64>>> {
    let (ords, shingles) = (u64s(ords, "set ords")?, u64s(shingles, "shingles")?);
    let lengths: Vec<usize> = lengths.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap_or_default()) as usize).collect();
    if lengths.len() != ords.len() || lengths.iter().sum::<usize>() != shingles.len() {
        return Err(PyValueError::new_err("shingle sets: columns of different lengths"));
    }
    let mut at = 0;
    Ok(ords
        .into_iter()
        .zip(lengths)
        .map(|(ord, n)| {
            let set = shingles.get(at..at + n).unwrap_or_default().to_vec();
            at += n;
            (ord, set)
        })
        .collect())
}

/// Settles the undecided links (`(a, b, distance, similarity, verdict)`) by the exact Jaccard
/// of their documents' shingle sets (`sets`): kept with it as their similarity when the rule
/// says near, dropped when not; a link whose sets are unknown keeps its estimate's side.
/// Returns how many links it decided and how many of them changed sides.
pub(crate) fn settle(rule: &CorpusRule, links: &mut Vec<(u64, u64, u32, f64, u8)>, sets: &HashMap<u64, Vec<u64>>) -> (u64, u64) {
    let (mut decided, mut changed) = (0, 0);
    links.retain_mut(|l| {
        if l.4 == NEAR {
            return true;
        }
        let estimate = l.4 == UNDECIDED_NEAR;
        let Some(j) = sets.get(&l.0).zip(sets.get(&l.1)).map(|(x, y)| jaccard(x, y)) else { return estimate };
        let near = rule.options.near_by_exact(j);
        decided += 1;
        changed += u64::from(near != estimate);
        l.3 = j;
        l.4 = NEAR;
        near
    });
    (decided, changed)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<CorpusRule>()?;
    m.add_function(wrap_pyfunction!(undecided_documents, m)?)?;
    m.add_function(wrap_pyfunction!(shingle_sets, m)?)?;
    Ok(())
}
