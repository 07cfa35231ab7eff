//! The document steps of `simdex.spark dedup` over Arrow columns: a batch's texts, sizes and
//! sketches arrive as the buffers of Arrow string, int64 and binary columns (data and i32
//! offsets, no nulls) and the answers leave as buffers the Python side wraps into Arrow
//! arrays, so no document is a Python object on these paths: the IDF pass's feature counts,
//! the fingerprints and sketches, and the sketch confirmation of candidate pairs.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use simdex_fingerprint::document::Format;
use simdex_fingerprint::IdfPartCounts;

use crate::batch::u64s;
use crate::spark::CorpusRecipe;

/// The values of an Arrow string or binary column without nulls: `data` and the i32
/// `offsets` (one more than values, the first 0 or any base).
pub(crate) struct Column<'a> {
    data: &'a [u8],
    offsets: Vec<usize>,
}

impl<'a> Column<'a> {
    pub(crate) fn new(data: &'a [u8], offsets: &[u8], what: &str) -> PyResult<Self> {
        if offsets.len() % 4 != 0 || offsets.is_empty() {
            return Err(PyValueError::new_err(format!("{what}: offsets are not i32s")));
        }
        let offsets: Vec<usize> = offsets.chunks_exact(4).map(|c| i32::from_le_bytes(c.try_into().unwrap_or_default()).max(0) as usize).collect();
        if offsets.windows(2).any(|w| w.first() > w.get(1)) || offsets.last().is_some_and(|&e| e > data.len()) {
            return Err(PyValueError::new_err(format!("{what}: offsets out of order or past the data")));
        }
        Ok(Column { data, offsets })
    }

    pub(crate) fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    pub(crate) fn bytes(&self, i: usize) -> &'a [u8] {
        self.offsets.get(i).zip(self.offsets.get(i + 1)).and_then(|(&a, &b)| self.data.get(a..b)).unwrap_or_default()
    }

    fn text(&self, i: usize) -> &'a str {
        // Spark's strings are UTF-8; anything else reads as empty (no fingerprint)
        std::str::from_utf8(self.bytes(i)).unwrap_or_default()
    }
}

fn bytes_of(values: impl Iterator<Item = u64>) -> Vec<u8> {
    values.flat_map(u64::to_le_bytes).collect()
}

/// `(features, counts)` of a part's counts, as two u64 columns' bytes.
type Counted<'py> = (Bound<'py, PyBytes>, Bound<'py, PyBytes>);

/// The IDF pass of one batch: every distinct feature of `texts` (an Arrow string column's
/// buffers) counted once per document, each document weighing `sizes[i]` (little-endian
/// u64s: its copies), summed over the batch: `(features, counts)`, two u64 columns
/// (features ascending), one pair per part of the IDF table (`buckets` of them: the
/// library's ranges of feature hashes), for Spark to sum part by part ([`FeatureSum`]).
#[pyfunction]
#[pyo3(signature = (recipe, data, offsets, sizes, buckets=1))]
fn feature_counts<'py>(py: Python<'py>, recipe: &CorpusRecipe, data: &[u8], offsets: &[u8], sizes: &[u8], buckets: usize) -> PyResult<Vec<Counted<'py>>> {
    let texts = Column::new(data, offsets, "texts")?;
    let sizes = u64s(sizes, "sizes")?;
    if sizes.len() != texts.len() {
        return Err(PyValueError::new_err(format!("{} texts but {} sizes", texts.len(), sizes.len())));
    }
    let parts = py.allow_threads(|| {
        let mut fp = recipe.fp();
        let mut counts = IdfPartCounts::default();
        for (i, &size) in sizes.iter().enumerate() {
            counts.add_document(&fp.distinct_features(texts.text(i)), size);
        }
        counts.into_parts(buckets)
    });
    Ok(parts.iter().map(|p| (PyBytes::new(py, &bytes_of(p.iter().map(|e| e.0))), PyBytes::new(py, &bytes_of(p.iter().map(|e| e.1))))).collect())
}

/// One part of the IDF table being summed in a reduce task: `feature_counts`' answers for
/// the part added as they stream in (only the part's distinct features are held), then the
/// part file written with the library's weights ([`simdex_fingerprint::write_idf_part`]).
#[pyclass(module = "simdex._simdex")]
pub(crate) struct FeatureSum {
    sum: IdfPartCounts,
}

#[pymethods]
impl FeatureSum {
    #[new]
    fn new() -> Self {
        FeatureSum { sum: IdfPartCounts::of_one_part() }
    }

    /// Adds one answer's columns (u64 features and their counts).
    fn add(&mut self, py: Python<'_>, features: &[u8], counts: &[u8]) -> PyResult<()> {
        let (f, c) = (u64s(features, "features")?, u64s(counts, "counts")?);
        if f.len() != c.len() {
            return Err(PyValueError::new_err(format!("{} features but {} counts", f.len(), c.len())));
        }
        let sum = &mut self.sum;
        py.allow_threads(|| sum.add_counts(&f, &c));
        Ok(())
    }

    /// Writes the sum as part `part` of `parts` of the table of `documents` documents to
    /// `path` (emptying it): `(entries, crc)`, the part's summary.
    fn write(&mut self, py: Python<'_>, path: std::path::PathBuf, part: usize, parts: usize, documents: u64) -> PyResult<(u64, u32)> {
        let sum = std::mem::replace(&mut self.sum, IdfPartCounts::of_one_part());
        let s = py
            .allow_threads(|| simdex_fingerprint::write_idf_part(&path, part, parts, documents, sum.into_parts(1).into_iter().flatten().collect()))
            .map_err(crate::errors::fp_error)?;
        Ok((s.entries, s.crc))
    }
}

/// A nullable Arrow string column being built: UTF-8 data, i32 offsets, validity bitmap.
struct StringBuilder {
    data: Vec<u8>,
    offsets: Vec<u8>,
    valid: Vec<u8>,
    len: usize,
}

impl StringBuilder {
    fn new() -> Self {
        StringBuilder { data: Vec::new(), offsets: 0i32.to_le_bytes().to_vec(), valid: Vec::new(), len: 0 }
    }

    fn push(&mut self, value: Option<&str>) -> PyResult<()> {
        if self.len % 8 == 0 {
            self.valid.push(0);
        }
        if let Some(v) = value {
            self.data.extend_from_slice(v.as_bytes());
            if let Some(last) = self.valid.last_mut() {
                *last |= 1 << (self.len % 8);
            }
        }
        let end = i32::try_from(self.data.len()).map_err(|_| PyValueError::new_err("a batch of documents passes 2 GiB of text: use smaller input ranges"))?;
        self.offsets.extend_from_slice(&end.to_le_bytes());
        self.len += 1;
        Ok(())
    }

    fn into_py(self, py: Python<'_>) -> (Bound<'_, PyBytes>, Bound<'_, PyBytes>, Bound<'_, PyBytes>) {
        (PyBytes::new(py, &self.data), PyBytes::new(py, &self.offsets), PyBytes::new(py, &self.valid))
    }
}

/// The columns id, content, text and error of documents read, with each record's place.
struct DocumentColumns {
    places: Vec<u8>,
    columns: [StringBuilder; 4],
}

impl DocumentColumns {
    fn new() -> Self {
        DocumentColumns { places: Vec::new(), columns: [StringBuilder::new(), StringBuilder::new(), StringBuilder::new(), StringBuilder::new()] }
    }

    /// Appends one record read (`crate::spark::read_into`'s) at `place`.
    fn push(&mut self, place: u64, (id, content, text, error): crate::spark::ReadDocument) -> PyResult<()> {
        self.places.extend_from_slice(&place.to_le_bytes());
        let [i, c, t, e] = &mut self.columns;
        i.push(Some(&id))?;
        c.push(content.as_deref())?;
        t.push(text.as_deref())?;
        e.push(error.as_deref())
    }

    fn into_py(self, py: Python<'_>) -> (Bound<'_, PyBytes>, [StringColumn<'_>; 4]) {
        let [i, c, t, e] = self.columns;
        (PyBytes::new(py, &self.places), [i.into_py(py), c.into_py(py), t.into_py(py), e.into_py(py)])
    }
}

/// A string column for Python: `(data, offsets, validity)`.
type StringColumn<'py> = (Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>);

/// The JSON-lines records of `path` whose lines start in the byte range `[start, end)`, read
/// as `simdex dedup` reads them (`read_documents`, the corpus module's content hash), as
/// columns: `(places, id, content, text, error)`, a u64 per record (`start` plus its number
/// in the range: ordered as the file is) and four nullable Arrow string columns (`content`
/// null for a record that is not a document, whose `id` is `name` and whose `error` names its
/// line in the file, as the CLI does).
#[pyfunction]
#[pyo3(signature = (path, name, start, end, strict=false))]
fn read_jsonl_range<'py>(py: Python<'py>, path: std::path::PathBuf, name: String, start: u64, end: u64, strict: bool) -> PyResult<(Bound<'py, PyBytes>, [StringColumn<'py>; 4])> {
    use std::io::{BufRead, Seek};
    let failed = |e: std::io::Error| PyValueError::new_err(format!("cannot read {name}: {e}"));
    let columns = py.allow_threads(|| -> PyResult<DocumentColumns> {
        let mut file = std::fs::File::open(&path).map_err(failed)?;
        if start > 0 {
            file.seek(std::io::SeekFrom::Start(start - 1)).map_err(failed)?;
        }
        let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
        let mut at = start;
        let mut skip = Vec::new();
        if start > 0 {
            // the line holding byte `start - 1` belongs to the range before
            at = start - 1 + reader.read_until(b'\n', &mut skip).map_err(failed)? as u64;
        }
        let mut lines = Vec::new();
        while at < end {
            let n = reader.read_until(b'\n', &mut lines).map_err(failed)?;
            if n == 0 {
                break;
            }
            at += n as u64;
        }
        let mut first_line = None;
        let mut line_of = |line: u64| -> std::io::Result<u64> {
            let before = match first_line {
                Some(b) => b,
                None => *first_line.insert(crate::spark::lines_before(&path, start)?),
            };
            Ok(before + line)
        };
        let mut columns = DocumentColumns::new();
        let mut record = 0u64;
        crate::spark::read_into(std::io::Cursor::new(lines), &name, Format::JsonLines, strict, &mut line_of, &mut |doc| {
            record += 1;
            columns.push(start + record - 1, doc)
        })?;
        Ok(columns)
    })?;
    Ok(columns.into_py(py))
}

/// The documents of whole files (text or HTML: one record each), read as `simdex dedup`
/// reads them: `paths[i]` named `names[i]` in `formats[i]`, its record's place `places[i]`
/// (little-endian u64s). The same columns as [`read_jsonl_range`].
#[pyfunction]
#[pyo3(signature = (paths, names, formats, places, strict=false))]
fn read_whole_files<'py>(
    py: Python<'py>,
    paths: Vec<std::path::PathBuf>,
    names: Vec<String>,
    formats: Vec<String>,
    places: &[u8],
    strict: bool,
) -> PyResult<(Bound<'py, PyBytes>, [StringColumn<'py>; 4])> {
    let places = u64s(places, "places")?;
    if names.len() != paths.len() || formats.len() != paths.len() || places.len() != paths.len() {
        return Err(PyValueError::new_err("paths, names, formats and places differ in length"));
    }
    let columns = py.allow_threads(|| -> PyResult<DocumentColumns> {
        let mut columns = DocumentColumns::new();
        for (((path, name), format), place) in paths.iter().zip(&names).zip(&formats).zip(&places) {
            let format = match format.as_str() {
                "html" => Format::Html,
                "jsonl" => Format::JsonLines,
                _ => Format::Text,
            };
            let data = std::fs::read(path).map_err(|e| PyValueError::new_err(format!("cannot read {name}: {e}")))?;
            crate::spark::read_into(std::io::Cursor::new(data), name, format, strict, &mut Ok, &mut |doc| columns.push(*place, doc))?;
        }
        Ok(columns)
    })?;
    Ok(columns.into_py(py))
}

/// Documents from a DataFrame's column of bodies (`bodies`, an Arrow string or binary
/// column's buffers, nulls filled with empty values) in `format` ("text" or "html"): the
/// content hash, text and error columns of [`read_jsonl_range`], one row per body.
#[pyfunction]
fn read_bodies<'py>(py: Python<'py>, data: &[u8], offsets: &[u8], format: &str) -> PyResult<[StringColumn<'py>; 3]> {
    let bodies = Column::new(data, offsets, "bodies")?;
    let format = if format == "html" { Format::Html } else { Format::Text };
    let columns = py.allow_threads(|| -> PyResult<[StringBuilder; 3]> {
        let mut columns = [StringBuilder::new(), StringBuilder::new(), StringBuilder::new()];
        for i in 0..bodies.len() {
            let mut row = None;
            crate::spark::read_into(std::io::Cursor::new(bodies.bytes(i).to_vec()), "", format, false, &mut Ok, &mut |d| {
                row.get_or_insert(d);
                Ok(())
            })?;
            let (_, content, text, error) = row.unwrap_or_default();
            let [c, t, e] = &mut columns;
            c.push(content.as_deref())?;
            t.push(text.as_deref())?;
            e.push(error.as_deref())?;
        }
        Ok(columns)
    })?;
    let [c, t, e] = columns;
    Ok([c.into_py(py), t.into_py(py), e.into_py(py)])
}

/// Writes `rows` lines to `path` (appending when `append`), each the values of `columns`
/// (Arrow string columns' data and offsets, nulls filled) joined by tabs. Returns the lines.
#[pyfunction]
#[pyo3(signature = (path, columns, append=false))]
fn write_tsv(py: Python<'_>, path: &str, columns: Vec<(Vec<u8>, Vec<u8>)>, append: bool) -> PyResult<u64> {
    let columns: Vec<Column<'_>> = columns.iter().map(|(d, o)| Column::new(d, o, "column")).collect::<PyResult<_>>()?;
    let rows = columns.first().map_or(0, Column::len);
    if columns.iter().any(|c| c.len() != rows) {
        return Err(PyValueError::new_err("columns of different lengths"));
    }
    py.allow_threads(|| {
        use std::io::Write;
        let failed = |e: std::io::Error| pyo3::exceptions::PyOSError::new_err(format!("cannot write {path}: {e}"));
        let file = std::fs::OpenOptions::new().create(true).write(true).append(append).truncate(!append).open(path).map_err(failed)?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
        for i in 0..rows {
            for (j, c) in columns.iter().enumerate() {
                if j > 0 {
                    out.write_all(b"\t").map_err(failed)?;
                }
                out.write_all(c.bytes(i)).map_err(failed)?;
            }
            out.write_all(b"\n").map_err(failed)?;
        }
        out.flush().map_err(failed)?;
        Ok(rows as u64)
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(read_whole_files, m)?)?;
    m.add_function(wrap_pyfunction!(read_bodies, m)?)?;
    m.add_function(wrap_pyfunction!(write_tsv, m)?)?;
    m.add_function(wrap_pyfunction!(read_jsonl_range, m)?)?;
    m.add_function(wrap_pyfunction!(feature_counts, m)?)?;
    m.add_class::<FeatureSum>()?;
    Ok(())
}
