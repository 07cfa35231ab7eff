//! What `simdex.spark`'s incremental mode reads from and writes to an index directory: its
//! pinned recipe, its live entries one fingerprint range at a time (one Spark task each), the
//! sketches stored with a fingerprint, and the new documents added back in batches.

use std::io::Write;
use std::path::PathBuf;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use simdex::IndexOptions;
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

    /// True when it stores sketches of a recipe the library makes (documents are confirmed
    /// by them; `recipe()` makes sketches of the same recipe).
    #[getter]
    fn sketches(&self) -> bool {
        self.inner.sketch_options().is_some()
    }

    /// The pinned recipe, or None when no document was stored yet.
    fn recipe(&self) -> PyResult<Option<CorpusRecipe>> {
        let sketches = self.inner.sketch_options().unwrap_or_default();
        self.inner.recipe().map(|r| r.fingerprinter().map_err(fp_error).and_then(|fp| CorpusRecipe::from_fingerprinter(fp, sketches))).transpose()
    }

    /// `recipe` making the index's sketches (an index keeps the sketch recipe it was created
    /// with, an older one included: sketches of another recipe do not compare); the library's
    /// default for an index without sketches.
    fn sketching(&self, recipe: &CorpusRecipe) -> PyResult<CorpusRecipe> {
        let fp = recipe.fp().clone();
        CorpusRecipe::from_fingerprinter(fp, self.inner.sketch_options().unwrap_or_default())
    }

    /// Every live stored fingerprint within `k` of each of `fps` (little-endian u64s):
    /// `(queries, stored)`, two u64 columns, one row per distinct pair of a query and a
    /// stored fingerprint (equal ones included). The library's batch check without sketches
    /// (`DocumentIndex::query_analysed_many`, fingerprints alone within `k`; `None`: the
    /// library's default), which joins the sorted batch with each stored table when the batch
    /// is large against the index and probes per query otherwise.
    #[pyo3(signature = (fps, k=None))]
    fn near<'py>(&self, py: Python<'py>, fps: &[u8], k: Option<u32>) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        let fps = u64s(fps, "fps")?;
        let query = simdex_fingerprint::DocumentQuery::default().with_confirm(false).with_k(k);
        let (queries, stored) = py
            .allow_threads(|| {
                let grouped = self.inner.query_analysed_many(&fps, &[], &query)?;
                let mut found: Vec<(u64, u64)> = grouped.flat().filter_map(|(i, m)| fps.get(i).map(|&q| (q, m.fingerprint))).collect();
                found.sort_unstable();
                found.dedup();
                let (mut queries, mut stored) = (Vec::with_capacity(found.len() * 8), Vec::with_capacity(found.len() * 8));
                for (q, f) in found {
                    queries.extend_from_slice(&q.to_le_bytes());
                    stored.extend_from_slice(&f.to_le_bytes());
                }
                Ok::<_, simdex_fingerprint::Error>((queries, stored))
            })
            .map_err(fp_error)?;
        Ok((PyBytes::new(py, &queries), PyBytes::new(py, &stored)))
    }

    /// The documents of a batch checked against the index by the library's document rule
    /// (`DocumentIndex::query_analysed_many`: candidates within `k`, confirmed by sketch at
    /// `threshold` when `confirm` and the index stores the library's sketches; `k`,
    /// `confirm` and `threshold` decided as every document call decides them; a large batch
    /// checked in batch mode, its band lookups in key order and its candidates' sketches in
    /// ordinal order, with the answers of one check per document): `fps` and
    /// `sketches` (little-endian u64s; 64-byte sketches back to back, or empty) of documents
    /// with ids `ids` (an Arrow string column's data and offsets). Appends a line per match to
    /// `out`: `id<TAB>index_doc_id<TAB>stored fingerprint (16 hex)<TAB>distance<TAB>similarity`
    /// (`-` without one). Returns the number of matches.
    #[pyo3(signature = (out, fps, sketches, id_data, id_offsets, k=None, confirm=true, threshold=None))]
    #[allow(clippy::too_many_arguments)]
    fn check_documents(
        &self,
        py: Python<'_>,
        out: &str,
        fps: &[u8],
        sketches: &[u8],
        id_data: &[u8],
        id_offsets: &[u8],
        k: Option<u32>,
        confirm: bool,
        threshold: Option<f64>,
    ) -> PyResult<u64> {
        let fps = u64s(fps, "fps")?;
        let ids = crate::spark_columns::Column::new(id_data, id_offsets, "ids")?;
        if ids.len() != fps.len() {
            return Err(PyValueError::new_err(format!("{} fingerprints but {} ids", fps.len(), ids.len())));
        }
        let mut query = simdex_fingerprint::DocumentQuery::default().with_k(k).with_confirm(confirm);
        if let Some(t) = threshold {
            query = query.with_min_similarity(t);
        }
        let sketches = if confirm { sketches } else { &[] };
        py.allow_threads(|| {
            let found = self.inner.query_analysed_many(&fps, sketches, &query).map_err(fp_error)?;
            let failed = |e: std::io::Error| pyo3::exceptions::PyOSError::new_err(format!("cannot write {out}: {e}"));
            let file = std::fs::OpenOptions::new().create(true).append(true).open(out).map_err(failed)?;
            let mut w = std::io::BufWriter::new(file);
            let mut n = 0u64;
            for (i, m) in found.flat() {
                let similarity = m.similarity.map_or_else(|| "-".to_owned(), simdex_fingerprint::corpus::similarity_text);
                w.write_all(ids.bytes(i)).map_err(failed)?;
                writeln!(w, "\t{}\t{:016x}\t{}\t{similarity}", m.doc_id.unwrap_or(0), m.fingerprint, m.distance).map_err(failed)?;
                n += 1;
            }
            w.flush().map_err(failed)?;
            Ok(n)
        })
    }
}

/// Appends new documents to `out` for [`insert_file_into_index`]: a 16-byte row per
/// document (`fps[i]`, `doc_id(ids[i])`, little-endian), its sketch (`sketches`, 64 bytes a
/// document, or none) after it. Returns the documents.
#[pyfunction]
fn append_new_documents(py: Python<'_>, out: &str, fps: &[u8], sketches: &[u8], id_data: &[u8], id_offsets: &[u8]) -> PyResult<u64> {
    let fps = u64s(fps, "fps")?;
    let ids = crate::spark_columns::Column::new(id_data, id_offsets, "ids")?;
    let width = if sketches.is_empty() { 0 } else { sketches.len() / fps.len().max(1) };
    py.allow_threads(|| {
        let failed = |e: std::io::Error| pyo3::exceptions::PyOSError::new_err(format!("cannot write {out}: {e}"));
        let file = std::fs::OpenOptions::new().create(true).append(true).open(out).map_err(failed)?;
        let mut w = std::io::BufWriter::new(file);
        for (i, fp) in fps.iter().enumerate() {
            let id = simdex_fingerprint::doc_id(&String::from_utf8_lossy(ids.bytes(i)));
            w.write_all(&fp.to_le_bytes()).and_then(|_| w.write_all(&id.to_le_bytes())).map_err(failed)?;
            w.write_all(sketches.get(i * width..(i + 1) * width).unwrap_or_default()).map_err(failed)?;
        }
        w.flush().map_err(failed)?;
        Ok(fps.len() as u64)
    })
}

/// Inserts the new documents of the files `parts` ([`append_new_documents`]'s, with
/// the sketch of `recipe`'s sketch recipe after each row when `sketches`) into the index at `path`, 2^16 documents at a time (created with sketches if missing, pinning `recipe`, refused
/// when the index pins another; synced). Returns the count.
#[pyfunction]
fn insert_files_into_index(py: Python<'_>, path: PathBuf, recipe: &CorpusRecipe, parts: Vec<PathBuf>, sketches: bool) -> PyResult<u64> {
    let (recipe, made) = (recipe.pinned(), recipe.sketcher().options());
    py.allow_threads(|| {
        let options = IndexOptions::default().with_sketches(Some(SketchOptions::default().column()));
        let index = DocumentIndex::open(&path, options)?;
        index.pin_recipe(recipe)?;
        // the sketches were made with the recipe of the index's reader (its own): stored only
        // when the index keeps that recipe
        let sketched = sketches && index.sketch_options() == Some(made);
        let row = 16 + if sketches { made.bytes() } else { 0 };
        let mut n = 0u64;
        for part in &parts {
            let data = std::fs::read(part).map_err(simdex_fingerprint::Error::Io)?;
            for chunk in data.chunks(row << 16) {
                let rows: Vec<&[u8]> = chunk.chunks_exact(row).collect();
                let entries: Vec<simdex::Entry> = rows
                    .iter()
                    .map(|r| {
                        let fp = u64::from_le_bytes(r.get(..8).and_then(|b| b.try_into().ok()).unwrap_or_default());
                        let id = u64::from_le_bytes(r.get(8..16).and_then(|b| b.try_into().ok()).unwrap_or_default());
                        simdex::Entry::new(fp, id)
                    })
                    .collect();
                if sketched {
                    let sketches: Vec<u8> = rows.iter().flat_map(|r| r.get(16..).unwrap_or_default().iter().copied()).collect();
                    index.insert_many_sketched(&entries, &sketches)?;
                } else {
                    index.insert_many(&entries)?;
                }
                n += entries.len() as u64;
            }
        }
        index.sync()?;
        index.close()?;
        Ok(n)
    })
    .map_err(|e: simdex_fingerprint::Error| PyValueError::new_err(format!("{}: {e}", path.display())))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<IndexReader>()?;
    m.add_function(wrap_pyfunction!(append_new_documents, m)?)?;
    m.add_function(wrap_pyfunction!(insert_files_into_index, m)?)?;
    Ok(())
}
