//! The `simdex._simdex` extension module: a thin PyO3 layer over the Rust API. The Python
//! package `simdex` (folder `simdex/`) re-exports it and adds the numpy conversions and the
//! Scrapy middleware. Every call that does I/O, a query or fingerprinting releases the GIL.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};
use pyo3::IntoPyObjectExt;
use simdex::{Durability, FindOrInsert, FindOrReplace, IndexOptions, Match, QueryOptions};
use simdex_fingerprint::document::DocumentKind;
use simdex_fingerprint::sketch::SketchOptions;
use simdex_fingerprint::{DocumentIndex, DocumentInput};
use simdex_fingerprint::{FingerprintOptions, Fingerprinter as RustFingerprinter, OptionNames};

mod batch;
mod documents;
mod errors;
mod query;
mod spark;
mod spark_cluster;
mod spark_columns;
mod spark_dedup;
mod spark_index;
mod spark_rule;

use batch::{u64s, Row};
use documents::DocumentAnswer;
use errors::{fp_error, to_py};
use query::{bits, Distance};
use simdex::Grouped;
use simdex_fingerprint::many as docs_many;

fn rows(matches: Vec<Match>) -> Vec<Row> {
    matches.iter().map(batch::row).collect()
}

/// A check-then-replace as Python sees it: its outcome (`"unchanged"`, `"found"`,
/// `"inserted"`, `"replaced"`), its matches, and the fingerprints the id held before a
/// replace (`[]` otherwise).
fn replace_outcome(found: FindOrReplace) -> (&'static str, Vec<Match>, Vec<u64>) {
    let name = found.name();
    match found {
        FindOrReplace::Unchanged(m) | FindOrReplace::Found(m) => (name, m, Vec::new()),
        FindOrReplace::Replaced { previous, .. } => (name, Vec::new(), previous),
        _ => (name, Vec::new(), Vec::new()),
    }
}

/// A batch's matches as Python wants them: lists of rows, or columns of bytes.
fn grouped_to_py(py: Python<'_>, grouped: Grouped, columnar: bool) -> PyResult<PyObject> {
    if columnar {
        batch::into_columns(py, &grouped).into_py_any(py)
    } else {
        batch::into_lists(&grouped).into_py_any(py)
    }
}

/// Documents of a batch (each a str or bytes, see [`document`]).
fn documents<'a>(docs: &'a [Bound<'_, PyAny>], html: Option<bool>) -> PyResult<Vec<(Cow<'a, [u8]>, DocumentKind)>> {
    docs.iter().map(|d| document(d, html)).collect()
}

fn inputs<'a>(docs: &'a [(Cow<'_, [u8]>, DocumentKind)]) -> Vec<DocumentInput<'a>> {
    docs.iter().map(|(bytes, kind)| DocumentInput { bytes, kind: *kind }).collect()
}

/// Text (`str`) or an HTML page (`bytes`).
fn document<'a>(data: &'a Bound<'_, PyAny>, html: Option<bool>) -> PyResult<(Cow<'a, [u8]>, DocumentKind)> {
    if let Ok(s) = data.downcast::<PyString>() {
        let kind = if html == Some(true) { DocumentKind::Html } else { DocumentKind::Text };
        // (the limited API of Python 3.9 has no borrowed UTF-8 view of a str)
        return Ok((Cow::Owned(s.to_cow()?.into_owned().into_bytes()), kind));
    }
    if let Ok(b) = data.downcast::<PyBytes>() {
        let kind = if html == Some(false) { DocumentKind::Text } else { DocumentKind::Html };
        return Ok((Cow::Borrowed(b.as_bytes()), kind));
    }
    Err(pyo3::exceptions::PyTypeError::new_err("a document is a str (text) or bytes (an HTML page)"))
}

/// An open index: `Index(path, k=None, durability="group", read_only=False, create=True, sketches=True, log_recovery="strict", expire_after=None, create_in_nonempty=False)`.
/// `simdex.Index` (the Python class) adds `insert_many`.
#[pyclass(module = "simdex._simdex", frozen, subclass)]
struct Index {
    inner: RwLock<Option<Arc<DocumentIndex>>>,
}

impl Index {
    fn get(&self) -> PyResult<Arc<DocumentIndex>> {
        self.inner.read().unwrap_or_else(PoisonError::into_inner).clone().ok_or_else(|| PyValueError::new_err("the index is closed"))
    }

    /// A document call judged by a `DocumentQuery` of (k, min_words, confirm): the document
    /// read from `data`, the query checked, then `call` without the GIL.
    fn judged<T: Send>(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        html: Option<bool>,
        (k, min_words, confirm): (Option<Distance>, Option<u64>, bool),
        call: impl FnOnce(&DocumentIndex, DocumentInput<'_>, &simdex_fingerprint::DocumentQuery) -> Result<T, simdex_fingerprint::Error> + Send,
    ) -> PyResult<T> {
        let index = self.get()?;
        let (bytes, kind) = document(data, html)?;
        let query = query::DocumentQuery::checked(k, min_words, confirm, None)?;
        py.allow_threads(|| call(&index, DocumentInput { bytes: &bytes, kind }, &query)).map_err(fp_error)
    }
}

fn query_options(index: &simdex::Index, k: Option<Distance>) -> QueryOptions {
    QueryOptions::within(bits(k).unwrap_or_else(|| index.k()))
}

/// An expiry window from Python: `None`, a str as the CLI takes it (`"30d"`), a number of
/// seconds or a `datetime.timedelta` (whole seconds, at least one).
fn expiry_arg(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<simdex::Expiry>> {
    let Some(v) = value.filter(|v| !v.is_none()) else { return Ok(None) };
    if let Ok(s) = v.downcast::<PyString>() {
        return simdex::Expiry::parse(&s.to_cow()?).map(Some).map_err(to_py);
    }
    let secs: f64 = if v.hasattr("total_seconds")? { v.call_method0("total_seconds")?.extract()? } else { v.extract()? };
    if !(secs.is_finite() && secs >= 1.0 && secs.fract() == 0.0) || secs > 1e12 {
        return Err(PyValueError::new_err(format!("expire_after = {}: whole seconds, at least 1 (or a str such as \"30d\")", v.repr()?)));
    }
    simdex::Expiry::after(std::time::Duration::from_secs(secs as u64)).map(Some).map_err(to_py)
}

#[pymethods]
impl Index {
    #[new]
    #[pyo3(signature = (path, k=None, durability="group", read_only=false, create=true, sketches=true, log_recovery="strict", expire_after=None, create_in_nonempty=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        k: Option<Distance>,
        durability: &str,
        read_only: bool,
        create: bool,
        sketches: bool,
        log_recovery: &str,
        expire_after: Option<&Bound<'_, PyAny>>,
        create_in_nonempty: bool,
    ) -> PyResult<Self> {
        let expiry = expiry_arg(expire_after)?;
        let log_recovery = match log_recovery {
            "strict" => simdex::LogRecovery::Strict,
            "point_in_time" => simdex::LogRecovery::PointInTime,
            r => return Err(PyValueError::new_err(format!("log_recovery must be \"strict\" or \"point_in_time\", not {r:?}"))),
        };
        let durability = match durability {
            "sync" => Durability::Sync,
            "group" => Durability::default(),
            "nosync" => Durability::NoSync,
            d => return Err(PyValueError::new_err(format!("durability must be \"sync\", \"group\" or \"nosync\", not {d:?}"))),
        };
        let sketches = sketches.then(|| SketchOptions::default().column());
        let defaults = IndexOptions::default();
        let design_k = bits(k).unwrap_or(defaults.k);
        let options = defaults
            .with_k(design_k)
            .with_durability(durability)
            .with_create(create && !read_only)
            .with_sketches(sketches)
            .with_log_recovery(log_recovery)
            .with_expiry(expiry)
            .with_create_in_nonempty(create_in_nonempty);
        let index = py.allow_threads(|| if read_only { DocumentIndex::open_read_only(&path, options) } else { DocumentIndex::open(&path, options) }).map_err(fp_error)?;
        // an existing index keeps the k it was created with: another one asked for is refused,
        // as another expiry window is (k=None opens it with its own)
        if let Some(asked) = bits(k).filter(|&asked| asked != index.k()) {
            let has = index.k();
            py.allow_threads(|| index.close()).map_err(fp_error)?;
            return Err(PyValueError::new_err(format!("k = {asked}: the index {} was created with k = {has}, which it keeps (open it with k=None, or k={has})", path.display())));
        }
        Ok(Index { inner: RwLock::new(Some(Arc::new(index))) })
    }

    /// True when the index stores a sketch per document (fixed at creation): document calls
    /// then confirm candidates by sketch.
    #[getter]
    fn sketches(&self) -> PyResult<bool> {
        Ok(self.get()?.sketches().is_some())
    }

    /// The expiry window in seconds (fixed at creation), or None when nothing expires.
    #[getter]
    fn expire_after(&self) -> PyResult<Option<u64>> {
        Ok(self.get()?.stats().expiry.map(|x| x.window().as_secs()))
    }

    /// Largest query distance the index guarantees.
    #[getter]
    fn k(&self) -> PyResult<u32> {
        Ok(self.get()?.k())
    }

    /// The index directory.
    #[getter]
    fn path(&self) -> PyResult<PathBuf> {
        Ok(self.get()?.dir().to_path_buf())
    }

    /// The pinned fingerprint recipe's descriptor, or None.
    #[getter]
    fn recipe(&self) -> PyResult<Option<String>> {
        Ok(self.get()?.recipe().map(|r| r.descriptor()))
    }

    /// Inserts (fp, doc_id); returns its sequence number (durable per the index's durability).
    fn insert(&self, py: Python<'_>, fp: u64, doc_id: u64) -> PyResult<u64> {
        let index = self.get()?;
        py.allow_threads(|| index.insert(fp, doc_id)).map_err(to_py)
    }

    /// Pairs as little-endian u64 bytes (the Python layer converts arrays); ids None:
    /// sequence numbers. Returns the number inserted.
    #[pyo3(signature = (fps, doc_ids=None))]
    fn _insert_many(&self, py: Python<'_>, fps: &Bound<'_, PyBytes>, doc_ids: Option<&Bound<'_, PyBytes>>) -> PyResult<usize> {
        let index = self.get()?;
        let fps = fps.as_bytes();
        let ids = doc_ids.map(|b| b.as_bytes());
        if fps.len() % 8 != 0 || ids.is_some_and(|i| i.len() != fps.len()) {
            return Err(PyValueError::new_err("fingerprints and doc_ids must be u64 arrays of equal length"));
        }
        let n = fps.len() / 8;
        py.allow_threads(|| {
            const BATCH: usize = 1 << 16;
            let u64_at = |b: &[u8], i: usize| b.get(i * 8..i * 8 + 8).and_then(|s| s.try_into().ok()).map_or(0, u64::from_le_bytes);
            let mut records = Vec::with_capacity(BATCH.min(n));
            for start in (0..n).step_by(BATCH) {
                records.clear();
                let end = (start + BATCH).min(n);
                // without ids the index numbers the records itself, under its writer's lock
                records.extend((start..end).map(|i| (u64_at(fps, i), ids.map(|ids| u64_at(ids, i)))));
                index.insert_many_numbered(&records)?;
            }
            Ok(n)
        })
        .map_err(to_py)
    }

    /// Every live pair within k (default: the index's) bits of fp, as (fingerprint, distance,
    /// doc_id), sorted by distance, fingerprint and id.
    #[pyo3(signature = (fp, k=None))]
    fn query(&self, py: Python<'_>, fp: u64, k: Option<Distance>) -> PyResult<Vec<Row>> {
        let index = self.get()?;
        py.allow_threads(|| index.query(fp, &query_options(&index, k))).map(rows).map_err(to_py)
    }

    /// Atomic check-then-add: the matches within k (default: the index's) when there are
    /// any, and nothing is inserted; else inserts (fp, doc_id) and returns [].
    #[pyo3(signature = (fp, doc_id, k=None))]
    fn find_or_insert(&self, py: Python<'_>, fp: u64, doc_id: u64, k: Option<Distance>) -> PyResult<Vec<Row>> {
        let index = self.get()?;
        match py.allow_threads(|| index.find_or_insert(fp, doc_id, &query_options(&index, k))).map_err(to_py)? {
            FindOrInsert::Found(m) => Ok(rows(m)),
            FindOrInsert::Inserted { .. } => Ok(Vec::new()),
        }
    }

    /// The fingerprint of a document with the index's recipe: a str is text, bytes an HTML
    /// page (`html` overrides). Raises EmptyDocumentError for a nearly empty one.
    #[pyo3(signature = (data, html=None))]
    fn fingerprint_document(&self, py: Python<'_>, data: &Bound<'_, PyAny>, html: Option<bool>) -> PyResult<u64> {
        let index = self.get()?;
        let (bytes, kind) = document(data, html)?;
        py.allow_threads(|| index.fingerprint_document(DocumentInput { bytes: &bytes, kind })).map(|f| f.value).map_err(fp_error)
    }

    /// Fingerprints a document with the index's recipe (pinning the default recipe when the
    /// index has none), inserts it under doc_id and returns the fingerprint.
    #[pyo3(signature = (data, doc_id, html=None))]
    fn insert_document(&self, py: Python<'_>, data: &Bound<'_, PyAny>, doc_id: u64, html: Option<bool>) -> PyResult<u64> {
        let index = self.get()?;
        let (bytes, kind) = document(data, html)?;
        py.allow_threads(|| index.insert_document(DocumentInput { bytes: &bytes, kind }, doc_id)).map(|f| f.value).map_err(fp_error)
    }

    /// (fingerprint, matches, words); with `min_words`, a document of fewer words raises
    /// EmptyDocumentError and is not stored.
    #[pyo3(signature = (data, doc_id, k=None, html=None, min_words=None, confirm=true))]
    #[allow(clippy::too_many_arguments)]
    fn find_or_insert_document(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        doc_id: u64,
        k: Option<Distance>,
        html: Option<bool>,
        min_words: Option<u64>,
        confirm: bool,
    ) -> PyResult<DocumentAnswer> {
        let (f, found) = self.judged(py, data, html, (k, min_words, confirm), |index, doc, query| index.find_or_insert_document(doc, doc_id, query))?;
        Ok(documents::answer(docs_many::DocumentAnswer::new(&f, found)))
    }

    /// The fingerprints stored under doc_id, sorted ([] when none).
    fn fingerprints_of(&self, py: Python<'_>, doc_id: u64) -> PyResult<Vec<u64>> {
        let index = self.get()?;
        py.allow_threads(|| index.fingerprints_of(doc_id)).map_err(to_py)
    }

    /// Stores (fp, doc_id) as what doc_id holds: every other fingerprint stored under doc_id is
    /// deleted in the same log record; returns the fingerprints it held before.
    fn replace(&self, py: Python<'_>, fp: u64, doc_id: u64) -> PyResult<Vec<u64>> {
        let index = self.get()?;
        py.allow_threads(|| index.replace(fp, doc_id)).map(|r| r.previous).map_err(to_py)
    }

    /// The check of a page fetched under doc_id: (outcome, matches, previous).
    #[pyo3(signature = (fp, doc_id, k=None))]
    fn find_or_replace(&self, py: Python<'_>, fp: u64, doc_id: u64, k: Option<Distance>) -> PyResult<(&'static str, Vec<Row>, Vec<u64>)> {
        let index = self.get()?;
        let (outcome, matches, previous) = replace_outcome(py.allow_threads(|| index.find_or_replace(fp, doc_id, &query_options(&index, k))).map_err(to_py)?);
        Ok((outcome, rows(matches), previous))
    }

    /// The check of a document fetched under doc_id: (fingerprint, outcome, matches, previous).
    #[pyo3(signature = (data, doc_id, k=None, html=None, min_words=None, confirm=true))]
    #[allow(clippy::too_many_arguments)]
    fn find_or_replace_document(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        doc_id: u64,
        k: Option<Distance>,
        html: Option<bool>,
        min_words: Option<u64>,
        confirm: bool,
    ) -> PyResult<(u64, &'static str, Vec<PyObject>, Vec<u64>)> {
        let (f, found) = self.judged(py, data, html, (k, min_words, confirm), |index, doc, query| index.find_or_replace_document(doc, doc_id, query))?;
        let (outcome, matches, previous) = replace_outcome(found);
        Ok((f.value, outcome, documents::matches(py, &matches)?, previous))
    }

    /// Per item of `fps` (u64 LE bytes), its matches within k, all items over one snapshot;
    /// `columnar`: (item, fingerprint, doc_id, distance) columns of bytes.
    #[pyo3(signature = (fps, k=None, columnar=false))]
    fn _query_many(&self, py: Python<'_>, fps: &Bound<'_, PyBytes>, k: Option<Distance>, columnar: bool) -> PyResult<PyObject> {
        let index = self.get()?;
        let fps = u64s(fps.as_bytes(), "fps")?;
        let grouped = py.allow_threads(|| simdex::query_many(&index, &fps, &query_options(&index, k))).map_err(to_py)?;
        grouped_to_py(py, grouped, columnar)
    }

    /// `find_or_insert` of each pair (u64 LE bytes), in order; answers as `_query_many`.
    #[pyo3(signature = (fps, doc_ids, k=None, columnar=false))]
    fn _find_or_insert_many(&self, py: Python<'_>, fps: &Bound<'_, PyBytes>, doc_ids: &Bound<'_, PyBytes>, k: Option<Distance>, columnar: bool) -> PyResult<PyObject> {
        let index = self.get()?;
        let (fps, ids) = (u64s(fps.as_bytes(), "fps")?, u64s(doc_ids.as_bytes(), "doc_ids")?);
        if fps.len() != ids.len() {
            return Err(PyValueError::new_err(format!("fps and doc_ids differ in length ({} and {})", fps.len(), ids.len())));
        }
        let grouped = py.allow_threads(|| simdex::find_or_insert_many(&index, &fps, &ids, &query_options(&index, k))).map_err(to_py)?;
        grouped_to_py(py, grouped, columnar)
    }

    /// The fingerprints of documents (u64 LE bytes), made on every core with the index's
    /// recipe; raises the first refused document's error, naming its position.
    #[pyo3(signature = (docs, html=None))]
    fn _fingerprint_documents<'py>(&self, py: Python<'py>, docs: Vec<Bound<'py, PyAny>>, html: Option<bool>) -> PyResult<Bound<'py, PyBytes>> {
        let index = self.get()?;
        let docs = documents(&docs, html)?;
        let fps = py.allow_threads(|| docs_many::fingerprint_documents(&index, &inputs(&docs))).map_err(|(i, e)| {
            let err = fp_error(e);
            let msg = format!("document {i}: {}", err.value(py));
            PyErr::from_type(err.get_type(py), msg)
        })?;
        let out: Vec<u8> = fps.iter().flat_map(|f| f.to_le_bytes()).collect();
        Ok(PyBytes::new(py, &out))
    }

    /// `find_or_insert_document` of each (document, id) in order, the documents analysed on
    /// every core first; a refused document's item is its exception (nothing stored).
    #[pyo3(signature = (docs, doc_ids, k=None, html=None, min_words=None, confirm=true))]
    #[allow(clippy::too_many_arguments)]
    fn _find_or_insert_documents(
        &self,
        py: Python<'_>,
        docs: Vec<Bound<'_, PyAny>>,
        doc_ids: &Bound<'_, PyBytes>,
        k: Option<Distance>,
        html: Option<bool>,
        min_words: Option<u64>,
        confirm: bool,
    ) -> PyResult<Vec<PyObject>> {
        let index = self.get()?;
        let ids = u64s(doc_ids.as_bytes(), "doc_ids")?;
        if docs.len() != ids.len() {
            return Err(PyValueError::new_err(format!("docs and doc_ids differ in length ({} and {})", docs.len(), ids.len())));
        }
        let docs = documents(&docs, html)?;
        let query = query::DocumentQuery::checked(k, min_words, confirm, None)?;
        let item = |o: simdex_fingerprint::many::DocumentOutcome| match o {
            Ok(a) => documents::answer(a).into_py_any(py),
            Err(e) => Ok(fp_error(e).into_value(py).into_any()),
        };
        match py.allow_threads(|| docs_many::find_or_insert_documents(&index, &inputs(&docs), &ids, &query)) {
            Ok(outcomes) => outcomes.into_iter().map(item).collect(),
            // stopped part-way (a full disk): the exception says how far it got, as the
            // server's answer does (`done`, and `results` of the items done)
            Err(stopped) => {
                let e = fp_error(stopped.error);
                let value = e.value(py);
                let results = stopped.done.into_iter().map(item).collect::<PyResult<Vec<PyObject>>>()?;
                value.setattr("done", results.len())?;
                value.setattr("results", results)?;
                Err(e)
            }
        }
    }

    /// For python/benches: `find_or_insert` of every fingerprint (u64 LE bytes) in a Rust loop,
    /// ids from `first_id`; returns the seconds taken (the Rust side of the comparison).
    fn _bench_find_or_insert(&self, py: Python<'_>, fps: &Bound<'_, PyBytes>, first_id: u64) -> PyResult<f64> {
        let index = self.get()?;
        let fps = u64s(fps.as_bytes(), "fps")?;
        py.allow_threads(|| {
            let options = query_options(&index, None);
            let start = std::time::Instant::now();
            for (i, &f) in fps.iter().enumerate() {
                index.find_or_insert(f, first_id + i as u64, &options)?;
            }
            Ok(start.elapsed().as_secs_f64())
        })
        .map_err(to_py)
    }

    /// Deletes (fp, doc_id): queries stop returning it.
    fn delete(&self, py: Python<'_>, fp: u64, doc_id: u64) -> PyResult<u64> {
        let index = self.get()?;
        py.allow_threads(|| index.delete(fp, doc_id)).map_err(to_py)
    }

    /// Makes every write so far durable (fsync of the log).
    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        let index = self.get()?;
        py.allow_threads(|| index.sync()).map_err(to_py)
    }

    /// Writes the memtable out as a segment.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let index = self.get()?;
        py.allow_threads(|| index.flush()).map_err(to_py)
    }

    /// Merges every segment into one.
    fn compact(&self, py: Python<'_>) -> PyResult<()> {
        let index = self.get()?;
        py.allow_threads(|| index.compact()).map_err(to_py)
    }

    /// Every live (fingerprint, doc_id) pair, sorted.
    fn live_entries(&self, py: Python<'_>) -> PyResult<Vec<(u64, u64)>> {
        let index = self.get()?;
        py.allow_threads(|| index.live_entries()).map(|v| v.into_iter().map(<(u64, u64)>::from).collect()).map_err(to_py)
    }

    /// Segments, memtable, sequence numbers and the recipe, as a dict.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let index = self.get()?;
        let summary = py.allow_threads(|| index.stats_summary());
        let d = PyDict::new(py);
        for (key, value) in summary {
            match value {
                simdex::StatValue::Int(n) => d.set_item(key, n)?,
                simdex::StatValue::OptionalInt(n) => d.set_item(key, n)?,
                simdex::StatValue::Bool(b) => d.set_item(key, b)?,
                simdex::StatValue::Text(t) => d.set_item(key, t)?,
                simdex::StatValue::List(l) => d.set_item(key, l)?,
                _ => d.set_item(key, py.None())?,
            }
        }
        Ok(d)
    }

    /// Syncs and releases the lock; later calls raise ValueError. Idempotent.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let taken = self.inner.write().unwrap_or_else(PoisonError::into_inner).take();
        let Some(index) = taken else { return Ok(()) };
        py.allow_threads(|| match Arc::try_unwrap(index) {
            Ok(index) => index.close().map_err(fp_error),
            // a call still running on another thread: sync now, the last reference closes
            Err(shared) => shared.sync().map_err(to_py),
        })
    }

    #[getter]
    fn closed(&self) -> bool {
        self.inner.read().unwrap_or_else(PoisonError::into_inner).is_none()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        match &*self.inner.read().unwrap_or_else(PoisonError::into_inner) {
            Some(i) => format!("simdex.Index({:?}, k={})", i.dir(), i.k()),
            None => "simdex.Index(<closed>)".to_owned(),
        }
    }
}

/// A fingerprinter with its own recipe (see the stubs).
#[pyclass(module = "simdex._simdex", frozen)]
struct Fingerprinter {
    inner: Mutex<RustFingerprinter>,
    recipe: String,
}

#[pymethods]
impl Fingerprinter {
    #[new]
    #[pyo3(signature = (preset="pages", features=None, tf=None, stop_words=None, fold_digits=None, min_words=None))]
    fn new(preset: &str, features: Option<Vec<String>>, tf: Option<&str>, stop_words: Option<Vec<String>>, fold_digits: Option<bool>, min_words: Option<u64>) -> PyResult<Self> {
        let names = OptionNames { preset: Some(preset.to_owned()), features, tf: tf.map(str::to_owned), stop_words, fold_digits, min_words, ..OptionNames::default() };
        let o = FingerprintOptions::from_names(&names).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let fp = RustFingerprinter::new(o).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let recipe = simdex_fingerprint::Recipe::of(&fp).descriptor();
        Ok(Fingerprinter { inner: Mutex::new(fp), recipe })
    }

    #[getter]
    fn recipe(&self) -> String {
        self.recipe.clone()
    }

    /// The 64-bit simhash of text. Raises EmptyDocumentError for a nearly empty one.
    fn fingerprint_text(&self, py: Python<'_>, text: &str) -> PyResult<u64> {
        py.allow_threads(|| self.inner.lock().unwrap_or_else(PoisonError::into_inner).fingerprint(text)).map(|f| f.value).map_err(fp_error)
    }

    /// The 64-bit simhash of an HTML page's visible text (invalid UTF-8 replaced).
    fn fingerprint_html(&self, py: Python<'_>, html: &[u8]) -> PyResult<u64> {
        py.allow_threads(|| {
            let mut fp = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            simdex_fingerprint::fingerprint_html_reader(&mut fp, html, simdex_fingerprint::InvalidUtf8::Replace)
        })
        .map(|o| o.fingerprint.value)
        .map_err(fp_error)
    }
}

/// A read-only segment file.
#[pyclass(module = "simdex._simdex", frozen)]
struct Segment {
    inner: simdex::Segment,
}

#[pymethods]
impl Segment {
    #[new]
    fn new(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        Ok(Segment { inner: py.allow_threads(|| simdex::Segment::open(&path)).map_err(to_py)? })
    }

    /// Every entry within k bits of fp (default: the segment's design's), as (fingerprint,
    /// distance, doc_id).
    #[pyo3(signature = (fp, k=None))]
    fn query(&self, py: Python<'_>, fp: u64, k: Option<Distance>) -> PyResult<Vec<Row>> {
        let k = bits(k).unwrap_or_else(|| self.inner.design().k());
        py.allow_threads(|| self.inner.query(fp, &QueryOptions::within(k))).map(rows).map_err(to_py)
    }

    fn __len__(&self) -> usize {
        self.inner.len() as usize
    }
}

/// The seconds of an expiry window as `Index(expire_after=...)` takes it (a ValueError
/// otherwise; None: 0), for fronts that check their settings before they open anything.
#[pyfunction]
fn _expiry_secs(value: &Bound<'_, PyAny>) -> PyResult<u64> {
    Ok(expiry_arg(Some(value))?.map_or(0, |x| x.window().as_secs()))
}

/// 64-bit hash of a document name (what `simdex fingerprint --for-index` and
/// `dedup --index` use as document ids).
#[pyfunction]
fn doc_id(name: &str) -> u64 {
    simdex_fingerprint::doc_id(name)
}

#[pymodule]
fn _simdex(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Index>()?;
    m.add_class::<Fingerprinter>()?;
    m.add_class::<Segment>()?;
    m.add_class::<query::DocumentQuery>()?;
    m.add_function(wrap_pyfunction!(doc_id, m)?)?;
    m.add_function(wrap_pyfunction!(_expiry_secs, m)?)?;
    // the document calls' defaults, decided once in the library (`DocumentQuery`)
    m.add("DEFAULT_CONFIRMED_K", simdex_fingerprint::DEFAULT_CONFIRMED_K)?;
    m.add("DEFAULT_UNCONFIRMED_K", simdex_fingerprint::DEFAULT_UNCONFIRMED_K)?;
    m.add("DEFAULT_MIN_SIMILARITY", simdex_fingerprint::DEFAULT_MIN_SIMILARITY)?;
    m.add("MAX_K", simdex::MAX_K)?;
    errors::register(m)?;
    spark::register(m)?;
    spark_index::register(m)?;
    spark_cluster::register(m)?;
    spark_columns::register(m)?;
    spark_dedup::register(m)?;
    spark_rule::register(m)?;
    Ok(())
}
