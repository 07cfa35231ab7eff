//! The document calls' answers as Python sees them; the batches themselves are the
//! library's (`simdex_fingerprint::many`).

use simdex_fingerprint::many::DocumentAnswer as Answer;

/// One match of a document call as Python sees it: (fingerprint, distance, doc_id,
/// similarity), the similarity the sketches estimate (None: no sketch on either side).
pub(crate) type DocumentRow = (u64, u32, Option<u64>, Option<f64>);

/// What a document call answers: (fingerprint, matches, words).
pub(crate) type DocumentAnswer = (u64, Vec<DocumentRow>, u64);

/// `matches` as `simdex.DocumentMatch` named tuples.
pub(crate) fn matches(py: pyo3::Python<'_>, matches: &[simdex::Match]) -> pyo3::PyResult<Vec<pyo3::PyObject>> {
    use pyo3::types::PyAnyMethods;
    let class = py.import("simdex._types")?.getattr("DocumentMatch")?;
    matches.iter().map(|m| class.call1((m.fingerprint, m.distance, m.doc_id, m.similarity)).map(pyo3::Bound::unbind)).collect()
}

pub(crate) fn answer(a: Answer) -> DocumentAnswer {
    let rows = a.matches.iter().map(|m| (m.fingerprint, m.distance, m.doc_id, m.similarity)).collect();
    (a.fingerprint, rows, a.words)
}
