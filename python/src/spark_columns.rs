//! The document steps of `simdex.spark dedup` over Arrow columns: a batch's texts, sizes and
//! sketches arrive as the buffers of Arrow string, int64 and binary columns (data and i32
//! offsets, no nulls) and the answers leave as buffers the Python side wraps into Arrow
//! arrays, so no document is a Python object on these paths: the IDF pass's feature counts,
//! the fingerprints and sketches, and the sketch confirmation of candidate pairs.

use std::collections::HashMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use simdex_fingerprint::corpus::similarity_text;
use simdex_fingerprint::document::Format;
use simdex_fingerprint::sketch::{Sketch, SketchOptions};

use crate::batch::u64s;
use crate::spark::CorpusRecipe;

/// The values of an Arrow string or binary column without nulls: `data` and the i32
/// `offsets` (one more than values, the first 0 or any base).
struct Column<'a> {
    data: &'a [u8],
    offsets: Vec<usize>,
}

impl<'a> Column<'a> {
    fn new(data: &'a [u8], offsets: &[u8], what: &str) -> PyResult<Self> {
        if offsets.len() % 4 != 0 || offsets.is_empty() {
            return Err(PyValueError::new_err(format!("{what}: offsets are not i32s")));
        }
        let offsets: Vec<usize> = offsets.chunks_exact(4).map(|c| i32::from_le_bytes(c.try_into().unwrap_or_default()).max(0) as usize).collect();
        if offsets.windows(2).any(|w| w.first() > w.get(1)) || offsets.last().is_some_and(|&e| e > data.len()) {
            return Err(PyValueError::new_err(format!("{what}: offsets out of order or past the data")));
        }
        Ok(Column { data, offsets })
    }

    fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    fn bytes(&self, i: usize) -> &'a [u8] {
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

/// The IDF pass of one batch: every distinct feature of `texts` (an Arrow string column's
/// buffers) counted once per document, each document weighing `sizes[i]` (little-endian
/// u64s: its copies), summed over the batch: `(features, counts)`, two u64 columns, for
/// Spark to sum per feature.
#[pyfunction]
fn feature_counts<'py>(py: Python<'py>, recipe: &CorpusRecipe, data: &[u8], offsets: &[u8], sizes: &[u8]) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let texts = Column::new(data, offsets, "texts")?;
    let sizes = u64s(sizes, "sizes")?;
    if sizes.len() != texts.len() {
        return Err(PyValueError::new_err(format!("{} texts but {} sizes", texts.len(), sizes.len())));
    }
    let (features, counts) = py.allow_threads(|| {
        let mut fp = recipe.fp();
        let mut counts: HashMap<u64, u64> = HashMap::new();
        for (i, &size) in sizes.iter().enumerate() {
            for f in fp.distinct_features(texts.text(i)) {
                *counts.entry(f).or_default() += size;
            }
        }
        (bytes_of(counts.keys().copied()), bytes_of(counts.values().copied()))
    });
    Ok((PyBytes::new(py, &features), PyBytes::new(py, &counts)))
}

/// Fingerprints and sketches of one batch's texts, as columns.
type Fingerprinted<'py> = (Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>, Vec<(usize, String)>, Bound<'py, PyBytes>, Bound<'py, PyBytes>);

/// Fingerprints (and with `sketch`, sketches) of `texts` (an Arrow string column's buffers)
/// as `simdex dedup` makes them: `(fps, has_fp, short, errors, sketch_data,
/// sketch_offsets)`: u64 fingerprints (0 where none), a u8 per text saying whether it has
/// one and whether it is short, `(row, reason)` for each text without one, and the sketches
/// as an Arrow binary column's buffers (empty without `sketch`).
#[pyfunction]
#[pyo3(signature = (recipe, data, offsets, sketch=true))]
fn fingerprint_column<'py>(py: Python<'py>, recipe: &CorpusRecipe, data: &[u8], offsets: &[u8], sketch: bool) -> PyResult<Fingerprinted<'py>> {
    let texts = Column::new(data, offsets, "texts")?;
    let (fps, has, short, errors, sketches, sketch_offsets) = py.allow_threads(|| {
        let mut fp = recipe.fp();
        let mut sketcher = recipe.sketcher();
        let n = texts.len();
        let (mut fps, mut has, mut short, mut errors) = (Vec::with_capacity(n * 8), Vec::with_capacity(n), Vec::with_capacity(n), Vec::new());
        let (mut sketches, mut sketch_offsets) = (Vec::new(), 0i32.to_le_bytes().to_vec());
        for i in 0..n {
            let text = texts.text(i);
            match fp.fingerprint(text) {
                Ok(f) => {
                    fps.extend_from_slice(&f.value.to_le_bytes());
                    has.push(1u8);
                    short.push(u8::from(f.short));
                }
                Err(e) => {
                    fps.extend_from_slice(&0u64.to_le_bytes());
                    has.push(0);
                    short.push(1);
                    errors.push((i, e.to_string()));
                }
            }
            if sketch {
                sketches.extend_from_slice(sketcher.sketch(text).as_bytes());
                sketch_offsets.extend_from_slice(&(sketches.len() as i32).to_le_bytes());
            }
        }
        (fps, has, short, errors, sketches, sketch_offsets)
    });
    let b = |v: &[u8]| PyBytes::new(py, v);
    Ok((b(&fps), b(&has), b(&short), errors, b(&sketches), b(&sketch_offsets)))
}

/// The resemblance each pair of sketches estimates (`simdex dedup`'s confirmation): `a[i]`
/// and `b[i]` from two Arrow binary columns' buffers: `(similarities, text_data,
/// text_offsets)`, f64s (NaN where a sketch is missing) and their text as `simdex dedup
/// --pairs` writes it (the corpus module's `similarity_text`) as an Arrow string column.
#[pyfunction]
fn similarity_column<'py>(
    py: Python<'py>,
    a_data: &[u8],
    a_offsets: &[u8],
    b_data: &[u8],
    b_offsets: &[u8],
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let (a, b) = (Column::new(a_data, a_offsets, "a")?, Column::new(b_data, b_offsets, "b")?);
    if a.len() != b.len() {
        return Err(PyValueError::new_err(format!("{} sketches against {}", a.len(), b.len())));
    }
    let (values, text, offsets) = py.allow_threads(|| {
        let options = SketchOptions::default();
        let (mut values, mut text, mut offsets) = (Vec::with_capacity(a.len() * 8), Vec::new(), 0i32.to_le_bytes().to_vec());
        for i in 0..a.len() {
            let x = match (Sketch::from_bytes(options, a.bytes(i)), Sketch::from_bytes(options, b.bytes(i))) {
                (Ok(x), Ok(y)) => x.similarity(&y).unwrap_or(f64::NAN),
                _ => f64::NAN,
            };
            values.extend_from_slice(&x.to_le_bytes());
            text.extend_from_slice(similarity_text(x).as_bytes());
            offsets.extend_from_slice(&(text.len() as i32).to_le_bytes());
        }
        (values, text, offsets)
    });
    Ok((PyBytes::new(py, &values), PyBytes::new(py, &text), PyBytes::new(py, &offsets)))
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
    let (places, columns) = py.allow_threads(|| -> PyResult<(Vec<u8>, [StringBuilder; 4])> {
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
        let (mut places, mut columns) = (Vec::new(), [StringBuilder::new(), StringBuilder::new(), StringBuilder::new(), StringBuilder::new()]);
        let mut record = 0u64;
        crate::spark::read_into(std::io::Cursor::new(lines), &name, Format::JsonLines, strict, &mut line_of, &mut |(id, content, text, error)| {
            places.extend_from_slice(&(start + record).to_le_bytes());
            record += 1;
            let [i, c, t, e] = &mut columns;
            i.push(Some(&id))?;
            c.push(content.as_deref())?;
            t.push(text.as_deref())?;
            e.push(error.as_deref())
        })?;
        Ok((places, columns))
    })?;
    let [i, c, t, e] = columns;
    Ok((PyBytes::new(py, &places), [i.into_py(py), c.into_py(py), t.into_py(py), e.into_py(py)]))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(read_jsonl_range, m)?)?;
    m.add_function(wrap_pyfunction!(feature_counts, m)?)?;
    m.add_function(wrap_pyfunction!(fingerprint_column, m)?)?;
    m.add_function(wrap_pyfunction!(similarity_column, m)?)?;
    Ok(())
}
