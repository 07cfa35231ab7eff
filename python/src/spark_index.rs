//! What `simdex.spark`'s incremental mode reads from and writes to an index directory: its
//! pinned recipe, its live entries one fingerprint range at a time (one Spark task each), the
//! sketches stored with a fingerprint, and the new documents added back in batches.

use std::path::PathBuf;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use simdex::{IndexOptions, QueryOptions};
use simdex_fingerprint::sketch::SketchOptions;
use simdex_fingerprint::DocumentIndex;

use crate::batch::u64s;
use crate::errors::fp_error;
use crate::spark::CorpusRecipe;

/// An index directory opened read-only (pickles as its path: every executor opens it again,
/// so the path must be readable on every executor).
#[pyclass(module = "simdex._simdex", frozen)]
struct IndexReader {
    path: PathBuf,
    inner: DocumentIndex,
}

#[pymethods]
impl IndexReader {
    #[new]
    fn new(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        let options = IndexOptions::default().with_create(false);
        let inner = py.allow_threads(|| DocumentIndex::open_read_only(&path, options)).map_err(fp_error)?;
        Ok(IndexReader { path, inner })
    }

    fn __reduce__(slf: &Bound<'_, Self>) -> PyResult<(PyObject, (PathBuf,))> {
        Ok((slf.get_type().into_any().unbind(), (slf.get().path.clone(),)))
    }

    /// The index's design distance.
    #[getter]
    fn k(&self) -> u32 {
        self.inner.k()
    }

    /// True when it stores the default sketches (documents are confirmed by them).
    #[getter]
    fn sketches(&self) -> bool {
        self.inner.sketch_options() == Some(SketchOptions::default())
    }

    /// The pinned recipe, or None when no document was stored yet.
    fn recipe(&self) -> PyResult<Option<CorpusRecipe>> {
        self.inner.recipe().map(|r| r.fingerprinter().map_err(fp_error).and_then(CorpusRecipe::from_fingerprinter)).transpose()
    }

    /// The live `(fingerprints, doc_ids)` (little-endian u64s) whose top `bits` bits equal
    /// `part`: one of `2^bits` disjoint ranges (streamed from the segments, one range kept).
    fn entries<'py>(&self, py: Python<'py>, part: u64, bits: u32) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        if bits == 0 || bits > 16 || part >> bits != 0 {
            return Err(PyValueError::new_err(format!("part {part} of 2^{bits}: need 1 <= bits <= 16 and part < 2^bits")));
        }
        let (fps, ids) = py
            .allow_threads(|| {
                let (mut fps, mut ids) = (Vec::new(), Vec::new());
                self.inner.snapshot().for_each_live(|fp, id| {
                    if fp >> (64 - bits) == part {
                        fps.extend_from_slice(&fp.to_le_bytes());
                        ids.extend_from_slice(&id.to_le_bytes());
                    }
                    Ok(())
                })?;
                Ok::<_, simdex::Error>((fps, ids))
            })
            .map_err(crate::errors::to_py)?;
        Ok((PyBytes::new(py, &fps), PyBytes::new(py, &ids)))
    }

    /// Every live stored fingerprint within `k` of each of `fps` (little-endian u64s):
    /// `(queries, stored)`, two u64 columns, one row per distinct pair of a query and a
    /// stored fingerprint (equal ones included). The library probes the index's tables per
    /// query, or joins them when the batch is large against the index (`simdex::query_many`
    /// decides), so a small batch costs what it probes, not the index's size.
    fn near<'py>(&self, py: Python<'py>, fps: &[u8], k: u32) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        let fps = u64s(fps, "fps")?;
        let (queries, stored) = py
            .allow_threads(|| {
                let grouped = simdex::query_many(&self.inner, &fps, &QueryOptions::within(k))?;
                let mut found: Vec<(u64, u64)> = grouped.flat().filter_map(|(i, m)| fps.get(i).map(|&q| (q, m.fingerprint))).collect();
                found.sort_unstable();
                found.dedup();
                let (mut queries, mut stored) = (Vec::with_capacity(found.len() * 8), Vec::with_capacity(found.len() * 8));
                for (q, f) in found {
                    queries.extend_from_slice(&q.to_le_bytes());
                    stored.extend_from_slice(&f.to_le_bytes());
                }
                Ok::<_, simdex::Error>((queries, stored))
            })
            .map_err(crate::errors::to_py)?;
        Ok((PyBytes::new(py, &queries), PyBytes::new(py, &stored)))
    }

    /// The sketch stored with `(fp, doc_id)`, or None (stored without one).
    fn sketch<'py>(&self, py: Python<'py>, fp: u64, doc_id: u64) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let found = py.allow_threads(|| self.inner.query_sketched(fp, &QueryOptions::within(0))).map_err(crate::errors::to_py)?;
        Ok(found.into_iter().find(|(m, _)| m.doc_id == Some(doc_id)).and_then(|(_, s)| s).map(|s| PyBytes::new(py, &s)))
    }
}

/// Inserts `(fps[i], doc_ids[i])` (little-endian u64s) with `sketches` (64 bytes each,
/// concatenated; empty for none) into the index at `path` (created with sketches if missing),
/// pinning `recipe` (refused when the index pins another); syncs. Returns the count.
#[pyfunction]
fn insert_into_index(py: Python<'_>, path: PathBuf, recipe: &CorpusRecipe, fps: &[u8], doc_ids: &[u8], sketches: &[u8]) -> PyResult<usize> {
    let pairs: Vec<simdex::Entry> = u64s(fps, "fps")?.into_iter().zip(u64s(doc_ids, "doc_ids")?).map(simdex::Entry::from).collect();
    let recipe = recipe.pinned();
    py.allow_threads(|| {
        let options = IndexOptions::default().with_sketches(Some(SketchOptions::default().column()));
        let index = DocumentIndex::open(&path, options)?;
        index.pin_recipe(recipe)?;
        if sketches.is_empty() || index.sketch_options() != Some(SketchOptions::default()) {
            index.insert_many(&pairs)?;
        } else {
            index.insert_many_sketched(&pairs, sketches)?;
        }
        index.sync()?;
        index.close()?;
        Ok(pairs.len())
    })
    .map_err(|e: simdex_fingerprint::Error| PyValueError::new_err(format!("{}: {e}", path.display())))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<IndexReader>()?;
    m.add_function(wrap_pyfunction!(insert_into_index, m)?)?;
    Ok(())
}
