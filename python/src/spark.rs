//! What `simdex.spark` runs inside Spark's executors (and its driver), as library calls:
//! documents read from bytes as `simdex dedup` reads them (the library's `Documents`, the
//! CLI's content hash), features for a distributed IDF pass and the table built back from
//! document-frequency counts, fingerprints and sketches with a pinned recipe, and the permuted
//! tables (with multi-probe flips) of the paper's batch mode. Nothing here knows Spark.

use std::hash::Hasher;
use std::io::Read;
use std::sync::{Arc, Mutex, PoisonError};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use simdex::plan::{planned_design, prefix_mask, PlanOptions, ProbePlan, TableDesign, DEFAULT_MAX_CANDIDATES_LOG2};
use simdex_fingerprint::document::{Documents, Format, InvalidUtf8};
use simdex_fingerprint::sketch::{Sketch, SketchOptions, Sketcher};
use simdex_fingerprint::{FingerprintOptions, Fingerprinter as RustFingerprinter, IdfBuilder, IdfTable, OptionNames, Recipe};

use crate::batch::u64s;

fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// The content hash `simdex dedup` groups exact duplicates by (`HashingReader` in
/// tools/src/corpus.rs, which this must equal): two SipHash-1-3 streams of the document's
/// bytes, 32 hex digits.
struct ContentHash {
    a: std::hash::DefaultHasher,
    b: std::hash::DefaultHasher,
}

impl ContentHash {
    fn new() -> Self {
        let mut b = std::hash::DefaultHasher::new();
        b.write_u64(0x5157_4c44_4f43_5321);
        ContentHash { a: std::hash::DefaultHasher::new(), b }
    }

    fn write(&mut self, bytes: &[u8]) {
        self.a.write(bytes);
        self.b.write(bytes);
    }

    fn hex(&self) -> String {
        format!("{:016x}{:016x}", self.a.finish(), self.b.finish())
    }
}

/// One document read from bytes: `(id, content hash, text, error)`. A record that is not a
/// document (a bad JSON line) has no content hash and says why; a document whose text cannot
/// be read (refused UTF-8) has a hash and an error.
type ReadDocument = (String, Option<String>, Option<String>, Option<String>);

/// The documents of `data` read in `format` ("text", "html" or "jsonl") as `simdex dedup`
/// reads a file named `name`; `strict` refuses invalid UTF-8 instead of replacing it.
#[pyfunction]
#[pyo3(signature = (data, name, format, strict=false))]
fn read_documents(py: Python<'_>, data: Vec<u8>, name: String, format: &str, strict: bool) -> PyResult<Vec<ReadDocument>> {
    let format = match format {
        "text" => Format::Text,
        "html" => Format::Html,
        "jsonl" => Format::JsonLines,
        f => return Err(PyValueError::new_err(format!("format must be \"text\", \"html\" or \"jsonl\", not {f:?}"))),
    };
    let utf8 = if strict { InvalidUtf8::Refuse } else { InvalidUtf8::Replace };
    py.allow_threads(|| {
        let mut out = Vec::new();
        for doc in Documents::new(std::io::Cursor::new(data), name.clone(), format, utf8) {
            match doc {
                Ok(doc) => {
                    let mut hash = ContentHash::new();
                    let mut doc = doc.map_content(|c| HashingRead { inner: c, hash: &mut hash });
                    let text = doc.text(utf8);
                    std::io::copy(&mut doc.content, &mut std::io::sink()).map_err(value_error)?;
                    let id = doc.id;
                    drop(doc.content);
                    let (text, error) = match text {
                        Ok(t) => (Some(t), None),
                        Err(e) => (None, Some(e.to_string())),
                    };
                    out.push((id, Some(hash.hex()), text, error));
                }
                Err(simdex_fingerprint::Error::Io(e)) => return Err(PyValueError::new_err(format!("cannot read {name}: {e}"))),
                Err(e) => out.push((name.clone(), None, None, Some(e.to_string()))),
            }
        }
        Ok(out)
    })
}

/// A reader that hashes what passes through.
struct HashingRead<'h, R> {
    inner: R,
    hash: &'h mut ContentHash,
}

impl<R: Read> Read for HashingRead<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.write(buf.get(..n).unwrap_or_default());
        Ok(n)
    }
}

/// A fingerprint recipe for a corpus job: the options, the IDF table once learned, and the
/// sketcher that confirms pairs. Pickles as its options text and table bytes, so Spark ships
/// it to the executors (a broadcast) and every executor fingerprints with the same recipe.
#[pyclass(module = "simdex._simdex", frozen)]
pub(crate) struct CorpusRecipe {
    fp: Mutex<RustFingerprinter>,
    sketcher: Mutex<Sketcher>,
}

impl CorpusRecipe {
    pub(crate) fn from_fingerprinter(fp: RustFingerprinter) -> PyResult<Self> {
        Self::of(fp)
    }

    /// The recipe to pin in an index.
    pub(crate) fn pinned(&self) -> Recipe {
        Recipe::of(&self.fp())
    }

    fn of(fp: RustFingerprinter) -> PyResult<Self> {
        let sketcher = Sketcher::new(SketchOptions::default()).map_err(value_error)?;
        Ok(CorpusRecipe { fp: Mutex::new(fp), sketcher: Mutex::new(sketcher) })
    }

    fn fp(&self) -> std::sync::MutexGuard<'_, RustFingerprinter> {
        self.fp.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One document's fingerprint and sketch: `(fingerprint, short, error, sketch)`.
type Fingerprinted<'py> = (Option<u64>, bool, Option<String>, Option<Bound<'py, PyBytes>>);

/// What `__reduce__` returns: the constructor and its arguments (options text, IDF table).
type Reduced<'py> = (PyObject, (String, Option<Bound<'py, PyBytes>>));

/// A text's fingerprint `(value, short)` or why it has none, and its sketch.
type Made = (Result<(u64, bool), String>, Option<Sketch>);

#[pymethods]
impl CorpusRecipe {
    /// The recipe of `simdex dedup` with `--preset PRESET` (no IDF table yet).
    #[new]
    #[pyo3(signature = (preset="pages"))]
    fn new(preset: &str) -> PyResult<Self> {
        let names = OptionNames { preset: Some(preset.to_owned()), ..OptionNames::default() };
        let options = FingerprintOptions::from_names(&names).map_err(value_error)?;
        Self::of(RustFingerprinter::new(options).map_err(value_error)?)
    }

    /// Rebuilds a recipe from `__reduce__`'s parts.
    #[staticmethod]
    #[pyo3(signature = (options, idf=None))]
    fn _restore(options: &str, idf: Option<&[u8]>) -> PyResult<Self> {
        let options = Recipe::parse_options(options).map_err(PyValueError::new_err)?;
        let idf = idf.map(IdfTable::decode).transpose().map_err(value_error)?.map(Arc::new);
        Self::of(Recipe::new(options, idf).and_then(|r| r.fingerprinter()).map_err(value_error)?)
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Reduced<'py>> {
        let py = slf.py();
        let recipe = Recipe::of(&slf.get().fp());
        let idf = recipe.idf().map(|t| PyBytes::new(py, &t.encode()));
        Ok((slf.getattr("_restore")?.unbind(), (recipe.options_text(), idf)))
    }

    /// The descriptor `simdex dedup` prints as `recipe:` (the IDF table's checksum included).
    #[getter]
    fn recipe(&self) -> String {
        self.fp().recipe()
    }

    /// Whether an IDF table is pinned.
    #[getter]
    fn has_idf(&self) -> bool {
        self.fp().idf_table().is_some()
    }

    /// Per text, its distinct feature hashes (little-endian u64s): what one document counts
    /// in an IDF table.
    fn distinct_features<'py>(&self, py: Python<'py>, texts: Vec<String>) -> Vec<Bound<'py, PyBytes>> {
        let features: Vec<Vec<u8>> = py.allow_threads(|| {
            let mut fp = self.fp();
            texts.iter().map(|t| fp.distinct_features(t).iter().flat_map(|h| h.to_le_bytes()).collect()).collect()
        });
        features.iter().map(|f| PyBytes::new(py, f)).collect()
    }

    /// This recipe weighted by the IDF table of `documents` documents in which `features[i]`
    /// (little-endian u64s) occurs `counts[i]` times: the table `simdex dedup` learns from
    /// the same documents, whatever order the counts come in.
    fn with_document_frequencies(&self, py: Python<'_>, documents: u64, features: &[u8], counts: &[u8]) -> PyResult<Self> {
        let (features, counts) = (u64s(features, "features")?, u64s(counts, "counts")?);
        if features.len() != counts.len() {
            return Err(PyValueError::new_err(format!("{} features but {} counts", features.len(), counts.len())));
        }
        if let Some(&max) = counts.iter().max().filter(|&&m| m > documents) {
            return Err(PyValueError::new_err(format!("a feature occurs in {max} documents, more than the {documents} counted")));
        }
        let fp = self.fp().clone();
        let fp = py.allow_threads(|| {
            // The builder takes documents one by one; document j holds every feature found in
            // more than j documents, which gives each its count.
            let mut by_count: Vec<(u64, u64)> = counts.into_iter().zip(features).collect();
            by_count.sort_unstable_by(|a, b| b.cmp(a));
            let sorted: Vec<u64> = by_count.iter().map(|&(_, h)| h).collect();
            let mut builder = IdfBuilder::new(fp.options().feature_recipe());
            let mut held = sorted.len();
            for j in 0..documents {
                while held > 0 && by_count.get(held - 1).is_some_and(|&(c, _)| c <= j) {
                    held -= 1;
                }
                builder.add_document(sorted.get(..held).unwrap_or_default());
            }
            fp.with_idf(Arc::new(builder.build(1)))
        });
        Self::of(fp.map_err(value_error)?)
    }

    /// The IDF table's bytes (the format `simdex dedup --idf FILE` reads), if pinned.
    fn idf_table<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.fp().idf_table().map(|t| PyBytes::new(py, &t.encode()))
    }

    /// Per text, `(fingerprint, short, error, sketch)` as `simdex dedup` makes them: a text
    /// too short for a fingerprint has `error` (and still a sketch); `sketch=False` makes none.
    #[pyo3(signature = (texts, sketch=true))]
    fn fingerprint_texts<'py>(&self, py: Python<'py>, texts: Vec<String>, sketch: bool) -> Vec<Fingerprinted<'py>> {
        let made: Vec<Made> = py.allow_threads(|| {
            let mut fp = self.fp();
            let mut sketcher = self.sketcher.lock().unwrap_or_else(PoisonError::into_inner);
            texts.iter().map(|t| (fp.fingerprint(t).map(|f| (f.value, f.short)).map_err(|e| e.to_string()), sketch.then(|| sketcher.sketch(t)))).collect()
        });
        made.into_iter()
            .map(|(outcome, s)| {
                let s = s.map(|s| PyBytes::new(py, s.as_bytes()));
                match outcome {
                    Ok((value, short)) => (Some(value), short, None, s),
                    Err(e) => (None, true, Some(e), s),
                }
            })
            .collect()
    }
}

/// The resemblance two documents' sketches estimate (`simdex dedup`'s confirmation).
#[pyfunction]
fn sketch_similarity(a: &[u8], b: &[u8]) -> PyResult<f64> {
    let options = SketchOptions::default();
    let (a, b) = (Sketch::from_bytes(options, a).map_err(value_error)?, Sketch::from_bytes(options, b).map_err(value_error)?);
    a.similarity(&b).map_err(value_error)
}

/// The permuted tables of the paper's batch mode for `count` fingerprints: the library's
/// planned design for `design_k` (default `k`), probed for `k` (multi-probe when `k` is
/// above `design_k`). A pair within `k` shares, in at least one table, the leading
/// `probe_bits` of one fingerprint's permutation with one flip of the other's.
/// `max_candidates_log2` bounds the fingerprints a key is expected to share (the planner's
/// bound, 2^8 by default: one block of a segment; a join wants far fewer).
#[pyclass(module = "simdex._simdex", frozen)]
struct TablePlan {
    count: u64,
    k: u32,
    design_k: u32,
    max_candidates_log2: f64,
    tables: Vec<TableDesign>,
    probe: ProbePlan,
    terms: Vec<Vec<KeyTerm>>,
}

/// One run of a table key's bits: `((fp >> shift_right) & mask) << shift_left` (logical
/// shift); a key is the OR of its table's terms.
type KeyTerm = (u32, u64, u32);

/// The terms of the key of a table permuted by `order` (`order[dst] = src`, positions from
/// the most significant bit; the library's `Permutation::order`) and cut to its leading
/// `bits`: one per run of destination positions below `bits` whose sources are consecutive.
fn key_terms(order: &[u8; 64], bits: u32) -> Vec<KeyTerm> {
    let bits = bits.min(64) as usize;
    let mut terms = Vec::new();
    let mut i = 0usize;
    while i < bits {
        let mut j = i + 1;
        while j < bits && order.get(j).zip(order.get(j - 1)).is_some_and(|(&b, &a)| b == a + 1) {
            j += 1;
        }
        let width = j - i;
        let src = order.get(i).map_or(0, |&s| s as usize);
        let mask = if width == 64 { u64::MAX } else { (1u64 << width) - 1 };
        terms.push(((64 - (src + width)) as u32, mask, (64 - j) as u32));
        i = j;
    }
    terms
}

/// The key `terms` give `fp`.
fn apply_terms(terms: &[KeyTerm], fp: u64) -> u64 {
    terms.iter().fold(0, |key, &(r, mask, l)| key | ((fp >> r) & mask) << l)
}

#[pymethods]
impl TablePlan {
    #[new]
    #[pyo3(signature = (count, k, design_k=None, max_candidates_log2=None))]
    fn new(count: u64, k: u32, design_k: Option<u32>, max_candidates_log2: Option<f64>) -> PyResult<Self> {
        let design_k = design_k.unwrap_or(k).min(k);
        let max_candidates_log2 = max_candidates_log2.unwrap_or(DEFAULT_MAX_CANDIDATES_LOG2);
        let options = PlanOptions::new(count, design_k).with_max_candidates_log2(max_candidates_log2);
        let design = planned_design(&options).map_err(value_error)?;
        let probe = ProbePlan::new(&design, k, count).map_err(value_error)?;
        let tables = design.tables().to_vec();
        let mut terms = Vec::with_capacity(tables.len());
        for (t, p) in tables.iter().zip(probe.tables()) {
            let these = key_terms(t.permutation.order(), p.probe_bits);
            // every bit goes where `keys` puts it (a bit permutation is linear: the 64 unit
            // fingerprints check it whole)
            let mask = prefix_mask(p.probe_bits);
            if let Some(b) = (0..64).find(|&b| apply_terms(&these, 1u64 << b) != t.permutation.apply(1u64 << b) & mask) {
                return Err(PyValueError::new_err(format!("key terms {these:?} move bit {b} elsewhere than the permutation {:?}", t.permutation)));
            }
            terms.push(these);
        }
        Ok(TablePlan { count, k, design_k, max_candidates_log2, tables, probe, terms })
    }

    fn __reduce__(slf: &Bound<'_, Self>) -> PyResult<(PyObject, (u64, u32, u32, f64))> {
        let me = slf.get();
        Ok((slf.get_type().into_any().unbind(), (me.count, me.k, me.design_k, me.max_candidates_log2)))
    }

    #[getter]
    fn k(&self) -> u32 {
        self.k
    }

    #[getter]
    fn design_k(&self) -> u32 {
        self.design_k
    }

    /// Per table `(prefix_bits, probe_bits, flips)`: the leading permuted bits the design
    /// fixes, those each probe fixes, and the XOR masks of the probes (top bits; `[0]` when
    /// `k` is within the design's).
    #[getter]
    fn tables(&self) -> Vec<(u32, u32, Vec<u64>)> {
        self.tables.iter().zip(self.probe.tables()).map(|(t, p)| (t.prefix_bits, p.probe_bits, p.flips.clone())).collect()
    }

    /// Per table, its key as bit operations: `(shift_right, mask, shift_left)` terms (logical
    /// shifts; masks as u64) whose OR over `((fp >> shift_right) & mask) << shift_left` is
    /// the table's key of `fp`, what `keys` computes (derived from the same permutation and
    /// checked against it bit by bit when the plan is made).
    #[getter]
    fn key_terms(&self) -> Vec<Vec<KeyTerm>> {
        self.terms.clone()
    }

    /// The keys of `fps` (little-endian u64s) in every table, table by table: each
    /// fingerprint permuted and cut to the table's leading `probe_bits`.
    fn keys<'py>(&self, py: Python<'py>, fps: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        let fps = u64s(fps, "fps")?;
        let out: Vec<u8> = py.allow_threads(|| {
            let mut out = Vec::with_capacity(fps.len() * 8 * self.tables.len());
            for (t, p) in self.tables.iter().zip(self.probe.tables()) {
                let mask = prefix_mask(p.probe_bits);
                out.extend(fps.iter().flat_map(|&f| (t.permutation.apply(f) & mask).to_le_bytes()));
            }
            out
        });
        Ok(PyBytes::new(py, &out))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<CorpusRecipe>()?;
    m.add_class::<TablePlan>()?;
    m.add_function(wrap_pyfunction!(read_documents, m)?)?;
    m.add_function(wrap_pyfunction!(sketch_similarity, m)?)?;
    Ok(())
}
