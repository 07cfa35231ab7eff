//! What `simdex.spark` runs inside Spark's executors (and its driver), as library calls:
//! documents read from bytes as `simdex dedup` reads them (the library's `Documents` and
//! its corpus module's content hash and options), features for a distributed IDF pass and the table built back from
//! document-frequency counts, fingerprints and sketches with a pinned recipe, and the permuted
//! tables (with multi-probe flips) of the paper's batch mode. Nothing here knows Spark.

use std::io::Read;
use std::sync::{Arc, Mutex, PoisonError};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use simdex_fingerprint::corpus::{ContentHash, CorpusOptions};
use simdex_fingerprint::document::{Documents, Format, InvalidUtf8};
use simdex_fingerprint::sketch::{SketchOptions, Sketcher};
use simdex_fingerprint::{FingerprintOptions, Fingerprinter as RustFingerprinter, IdfBuilder, IdfTable, OptionNames, Recipe};

use crate::batch::u64s;

fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// One document read from bytes: `(id, content hash, text, error)`. A record that is not a
/// document (a bad JSON line) has no content hash and says why; a document whose text cannot
/// be read (refused UTF-8) has a hash and an error.
pub(crate) type ReadDocument = (String, Option<String>, Option<String>, Option<String>);

/// Reads the documents of `input` (named `name`) in `format` and hands each to `each`; a
/// bad JSON line's error names the line `line_of(its line in input)` returns.
pub(crate) fn read_into(
    input: std::io::Cursor<Vec<u8>>,
    name: &str,
    format: Format,
    strict: bool,
    line_of: &mut dyn FnMut(u64) -> std::io::Result<u64>,
    each: &mut dyn FnMut(ReadDocument) -> PyResult<()>,
) -> PyResult<()> {
    let utf8 = if strict { InvalidUtf8::Refuse } else { InvalidUtf8::Replace };
    let failed = |e: std::io::Error| PyValueError::new_err(format!("cannot read {name}: {e}"));
    for doc in Documents::new(input, name.to_owned(), format, utf8) {
        match doc {
            Ok(doc) => {
                let mut doc = doc.map_content(ContentHash::new);
                let text = doc.text(utf8);
                let content = doc.content.finish().map_err(failed)?;
                let (text, error) = match text {
                    Ok(t) => (Some(t), None),
                    Err(e) => (None, Some(e.to_string())),
                };
                each((doc.id, Some(content), text, error))?;
            }
            Err(simdex_fingerprint::Error::Io(e)) => return Err(failed(e)),
            Err(simdex_fingerprint::Error::JsonLine { line, message }) => {
                let e = simdex_fingerprint::Error::JsonLine { line: line_of(line).map_err(failed)?, message };
                each((name.to_owned(), None, None, Some(e.to_string())))?;
            }
            Err(e) => each((name.to_owned(), None, None, Some(e.to_string())))?,
        }
    }
    Ok(())
}

/// Whole lines of `path` before byte `start`, when the line holding byte `start - 1`
/// belongs to the range before (every byte range's rule): 0 for `start` 0.
pub(crate) fn lines_before(path: &std::path::Path, start: u64) -> std::io::Result<u64> {
    if start == 0 {
        return Ok(0);
    }
    Ok(count_newlines(path, 0, start - 1)? + 1)
}

fn count_newlines(path: &std::path::Path, start: u64, end: u64) -> std::io::Result<u64> {
    let mut file = std::fs::File::open(path)?;
    std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(start))?;
    let mut file = file.take(end.saturating_sub(start));
    let mut buf = vec![0u8; 1 << 20];
    let mut lines = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Ok(lines);
        }
        lines += buf.get(..n).unwrap_or_default().iter().filter(|&&b| b == b'\n').count() as u64;
    }
}

/// The corpus dedup options every front shares: `(k, threshold)` with `k`'s default (8
/// confirmed by sketch, 3 without) and its one limit and message; `threshold` None when not
/// confirmed.
#[pyfunction]
#[pyo3(signature = (k=None, confirm=true, threshold=None))]
fn corpus_options(k: Option<u32>, confirm: bool, threshold: Option<f64>) -> PyResult<(u32, Option<f64>)> {
    let o = CorpusOptions::new(k, confirm, threshold).map_err(crate::errors::fp_error)?;
    Ok((o.k, o.confirm))
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
    /// The recipe of an index: its fingerprinter, and sketches of the index's own sketch
    /// recipe (an index keeps the one it was created with: sketches of another do not compare).
    pub(crate) fn from_fingerprinter(fp: RustFingerprinter, sketches: SketchOptions) -> PyResult<Self> {
        Self::of(fp, sketches)
    }

    /// The recipe to pin in an index.
    pub(crate) fn pinned(&self) -> Recipe {
        Recipe::of(&self.fp())
    }

    fn of(fp: RustFingerprinter, sketches: SketchOptions) -> PyResult<Self> {
        let sketcher = Sketcher::new(sketches).map_err(value_error)?;
        Ok(CorpusRecipe { fp: Mutex::new(fp), sketcher: Mutex::new(sketcher) })
    }

    /// The sketcher (one per recipe object, behind its lock).
    pub(crate) fn sketcher(&self) -> std::sync::MutexGuard<'_, Sketcher> {
        self.sketcher.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn fp(&self) -> std::sync::MutexGuard<'_, RustFingerprinter> {
        self.fp.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What `__reduce__` returns: the constructor and its arguments (options text, IDF table,
/// the sketches' (version, values, bits)).
type Reduced<'py> = (PyObject, (String, Option<Bound<'py, PyBytes>>, (u32, u32, u32)));

#[pymethods]
impl CorpusRecipe {
    /// The recipe of `simdex dedup` with `--preset PRESET` (no IDF table yet).
    #[new]
    #[pyo3(signature = (preset="pages"))]
    fn new(preset: &str) -> PyResult<Self> {
        let names = OptionNames { preset: Some(preset.to_owned()), ..OptionNames::default() };
        let options = FingerprintOptions::from_names(&names).map_err(value_error)?;
        Self::of(RustFingerprinter::new(options).map_err(value_error)?, SketchOptions::default())
    }

    /// Rebuilds a recipe from `__reduce__`'s parts.
    #[staticmethod]
    #[pyo3(signature = (options, idf, sketches))]
    fn _restore(options: &str, idf: Option<&[u8]>, sketches: (u32, u32, u32)) -> PyResult<Self> {
        let options = Recipe::parse_options(options).map_err(PyValueError::new_err)?;
        let idf = idf.map(IdfTable::decode).transpose().map_err(value_error)?.map(Arc::new);
        let (version, hashes, bits) = sketches;
        Self::of(Recipe::new(options, idf).and_then(|r| r.fingerprinter()).map_err(value_error)?, SketchOptions::new(hashes, bits).with_version(version))
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Reduced<'py>> {
        let py = slf.py();
        let recipe = Recipe::of(&slf.get().fp());
        let idf = recipe.idf().map(|t| PyBytes::new(py, &t.encode()));
        let sketches = slf.get().sketcher().options();
        Ok((slf.getattr("_restore")?.unbind(), (recipe.options_text(), idf, (sketches.version, sketches.hashes, sketches.bits))))
    }

    /// The descriptor of the sketches this recipe makes (an index's own sketch recipe, for
    /// an index's recipe), e.g. `simdex-sketch/2 w3 rounds hashes=512 bits=1`.
    #[getter]
    fn sketch_recipe(&self) -> String {
        self.sketcher().options().recipe()
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
        Self::of(fp.map_err(value_error)?, self.sketcher().options())
    }

    /// The IDF table's bytes (the format `simdex dedup --idf FILE` reads), if pinned.
    fn idf_table<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.fp().idf_table().map(|t| PyBytes::new(py, &t.encode()))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<CorpusRecipe>()?;
    m.add_function(wrap_pyfunction!(corpus_options, m)?)?;
    Ok(())
}
