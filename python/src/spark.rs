//! What `simdex.spark` runs inside Spark's executors (and its driver), as library calls:
//! documents read from bytes as `simdex dedup` reads them (the library's `Documents` and
//! its corpus module's content hash and options), features for a distributed IDF pass and the table built back from
//! document-frequency counts, fingerprints and sketches with a pinned recipe, and the permuted
//! tables (with multi-probe flips) of the paper's batch mode. Nothing here knows Spark.

use std::io::Read;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use simdex_fingerprint::corpus::{ContentHash, CorpusOptions};
use simdex_fingerprint::document::{Documents, Format, InvalidUtf8};
use simdex_fingerprint::sketch::{SketchOptions, Sketcher};
use simdex_fingerprint::{FingerprintOptions, Fingerprinter as RustFingerprinter, IdfPartSummary, IdfTable, OptionNames, Recipe};

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

/// The IDF table in parts at `paths` (`summaries`: `(entries, crc)` a part), opened once per
/// process: the recipes of a process (each broadcast's, each task's) share one mapping.
fn opened_parts(recipe: &str, documents: u64, paths: &[PathBuf], summaries: &[(u64, u32)]) -> PyResult<Arc<IdfTable>> {
    type Opened = Vec<(Vec<PathBuf>, Vec<IdfPartSummary>, u64, Weak<IdfTable>)>;
    static OPENED: Mutex<Opened> = Mutex::new(Vec::new());
    let summaries: Vec<IdfPartSummary> = summaries.iter().map(|&(entries, crc)| IdfPartSummary { entries, crc }).collect();
    let mut opened = OPENED.lock().unwrap_or_else(PoisonError::into_inner);
    opened.retain(|(.., t)| t.strong_count() > 0);
    let found = opened.iter().find(|(p, s, n, _)| (p.as_slice(), s.as_slice(), *n) == (paths, summaries.as_slice(), documents)).and_then(|(.., t)| t.upgrade());
    if let Some(t) = found.filter(|t| t.recipe() == recipe) {
        return Ok(t);
    }
    let table = Arc::new(IdfTable::from_parts(recipe, documents, paths, &summaries).map_err(crate::errors::fp_error)?);
    opened.push((paths.to_vec(), summaries, documents, Arc::downgrade(&table)));
    Ok(table)
}

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

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(PyObject, PyObject)> {
        let py = slf.py();
        let recipe = Recipe::of(&slf.get().fp());
        let s = slf.get().sketcher().options();
        let sketches = (s.version, s.hashes, s.bits);
        if let Some((t, (paths, summaries))) = recipe.idf().and_then(|t| Some((t, t.part_files()?))) {
            // a table in parts travels as its files' names: every process maps the same files
            let summaries: Vec<(u64, u32)> = summaries.iter().map(|s| (s.entries, s.crc)).collect();
            let args = (recipe.options_text(), t.documents(), paths.to_vec(), summaries, sketches).into_pyobject(py)?.into_any().unbind();
            return Ok((slf.getattr("_restore_parts")?.unbind(), args));
        }
        let idf = recipe.idf().map(|t| PyBytes::new(py, &t.encode()));
        Ok((slf.getattr("_restore")?.unbind(), (recipe.options_text(), idf, sketches).into_pyobject(py)?.into_any().unbind()))
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

    /// This recipe weighted by the IDF table of `documents` documents written in parts (part
    /// `p` at `paths[p]`, summarised by `summaries[p]`: `FeatureSum.write`'s answers): the
    /// files are mapped, not read into memory, and the table is the one `simdex dedup` learns
    /// from the same documents (its weights, bytes and id).
    fn with_idf_parts(&self, py: Python<'_>, documents: u64, paths: Vec<PathBuf>, summaries: Vec<(u64, u32)>) -> PyResult<Self> {
        let fp = self.fp().clone();
        let table = py.allow_threads(|| opened_parts(&fp.options().feature_recipe(), documents, &paths, &summaries))?;
        Self::of(fp.with_idf(table).map_err(value_error)?, self.sketcher().options())
    }

    /// Rebuilds a recipe whose IDF table is in parts (`__reduce__`'s parts).
    #[staticmethod]
    fn _restore_parts(py: Python<'_>, options: &str, documents: u64, paths: Vec<PathBuf>, summaries: Vec<(u64, u32)>, sketches: (u32, u32, u32)) -> PyResult<Self> {
        let options = Recipe::parse_options(options).map_err(PyValueError::new_err)?;
        let table = py.allow_threads(|| opened_parts(&options.feature_recipe(), documents, &paths, &summaries))?;
        let (version, hashes, bits) = sketches;
        Self::of(Recipe::new(options, Some(table)).and_then(|r| r.fingerprinter()).map_err(value_error)?, SketchOptions::new(hashes, bits).with_version(version))
    }

    /// Writes the IDF table to `path` (the format `simdex dedup --idf FILE` reads; a table
    /// in parts streams from its files): False when no table is pinned.
    fn save_idf(&self, py: Python<'_>, path: PathBuf) -> PyResult<bool> {
        let Some(table) = self.fp().idf_table() else { return Ok(false) };
        py.allow_threads(|| table.save(&path)).map_err(crate::errors::fp_error)?;
        Ok(true)
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
