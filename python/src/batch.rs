//! The fingerprint batch calls of `Index` (`query_many`, `find_or_insert_many`): the
//! library's per-item batches (`simdex::many`) with the GIL released, their answers handed
//! to Python as lists of rows or as columns that `simdex/__init__.py` turns into numpy arrays.

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use simdex::Grouped;
use simdex::Match;

/// One match as Python sees it: (fingerprint, distance, doc_id).
pub(crate) type Row = (u64, u32, Option<u64>);

pub(crate) fn row(m: &Match) -> Row {
    (m.fingerprint, m.distance, m.doc_id)
}

/// The little-endian u64s of `bytes` (what `simdex._u64_bytes` makes of arrays and sequences).
pub(crate) fn u64s(bytes: &[u8], what: &str) -> PyResult<Vec<u64>> {
    if bytes.len() % 8 != 0 {
        return Err(pyo3::exceptions::PyValueError::new_err(format!("{what}: not a whole number of u64s")));
    }
    Ok(bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default())).collect())
}

/// One list of rows per item.
pub(crate) fn into_lists(grouped: &Grouped) -> Vec<Vec<Row>> {
    grouped.items().map(|m| m.iter().map(row).collect()).collect()
}

/// Columns as little-endian bytes, one entry per match in item order: the item's position
/// (u64), the fingerprint (u64), the document id (u64; an index always stores one) and the
/// distance (u32).
pub(crate) fn into_columns(py: Python<'_>, grouped: &Grouped) -> (Py<PyBytes>, Py<PyBytes>, Py<PyBytes>, Py<PyBytes>) {
    let c = grouped.columns();
    let bytes = |b: Vec<u8>| PyBytes::new(py, &b).unbind();
    (bytes(c.items), bytes(c.fingerprints), bytes(c.doc_ids), bytes(c.distances))
}
