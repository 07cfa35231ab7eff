//! How the document calls judge a document, as Python sees it: `simdex.DocumentQuery`, the
//! library's [`simdex_fingerprint::DocumentQuery`] (its k, its fallback without sketches, its
//! resemblance threshold and its check), so that no Python module restates a default or a
//! range; and [`Distance`], the `k` argument of every call, refusing a negative one with a
//! ValueError.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use simdex_fingerprint::DocumentQuery as RustQuery;

use crate::errors::fp_error;

/// A distance in bits from Python: a negative or huge int is a ValueError naming the
/// argument, not pyo3's OverflowError. The range the index answers is the library's check.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Distance(pub(crate) u32);

impl<'py> FromPyObject<'py> for Distance {
    fn extract_bound(ob: &Bound<'py, PyAny>) -> PyResult<Self> {
        let wide: i64 =
            ob.extract().map_err(|_| PyValueError::new_err(format!("k = {}: a distance in bits is a whole number", ob.repr().map(|r| r.to_string()).unwrap_or_default())))?;
        match u32::try_from(wide) {
            Ok(k) => Ok(Distance(k)),
            Err(_) if wide < 0 => Err(PyValueError::new_err(format!("k = {wide}: a distance in bits is not negative"))),
            Err(_) => Err(PyValueError::new_err(format!("k = {wide}: the index answers k = 0 to {}", simdex::MAX_K))),
        }
    }
}

/// `k` as the library takes it.
pub(crate) fn bits(k: Option<Distance>) -> Option<u32> {
    k.map(|d| d.0)
}

/// How the document calls judge a document (see the stubs, `simdex.DocumentQuery`).
#[pyclass(module = "simdex._simdex", name = "DocumentQuery", frozen, eq)]
#[derive(Clone, PartialEq)]
pub(crate) struct DocumentQuery {
    pub(crate) inner: RustQuery,
}

impl DocumentQuery {
    /// The library's query for a document call's arguments, checked.
    pub(crate) fn checked(k: Option<Distance>, min_words: Option<u64>, confirm: bool, min_similarity: Option<f64>) -> PyResult<RustQuery> {
        let q = Self::new(k, confirm, min_similarity, min_words).inner;
        q.check().map_err(fp_error)?;
        Ok(q)
    }
}

#[pymethods]
impl DocumentQuery {
    #[new]
    #[pyo3(signature = (k=None, confirm=true, min_similarity=None, min_words=None))]
    fn new(k: Option<Distance>, confirm: bool, min_similarity: Option<f64>, min_words: Option<u64>) -> Self {
        let mut q = RustQuery::default().with_confirm(confirm).with_k(bits(k));
        if let Some(s) = min_similarity {
            q = q.with_min_similarity(s);
        }
        if let Some(w) = min_words {
            q = q.with_min_words(w);
        }
        DocumentQuery { inner: q }
    }

    /// The candidates' distance: the one given, else the library's default for `confirm`.
    #[getter]
    fn k(&self) -> u32 {
        self.inner.k()
    }

    /// The distance within which fingerprints alone decide (a candidate or a document
    /// without a sketch).
    #[getter]
    fn unconfirmed_k(&self) -> u32 {
        self.inner.unconfirmed_k()
    }

    #[getter]
    fn confirm(&self) -> bool {
        self.inner.confirm
    }

    /// The resemblance a candidate confirmed by sketch needs.
    #[getter]
    fn min_similarity(&self) -> f64 {
        self.inner.min_similarity
    }

    #[getter]
    fn min_words(&self) -> u64 {
        self.inner.min_words
    }

    /// Raises ValueError (the library's message) unless the query can be answered.
    fn check(&self) -> PyResult<()> {
        self.inner.check().map_err(|e| match e {
            simdex_fingerprint::Error::InvalidOptions(detail) => PyValueError::new_err(detail),
            e => fp_error(e),
        })
    }

    /// (k, min_similarity) on an index that stores sketches (`sketches`) or not: the distance
    /// the candidates are found within and the resemblance sketches confirm them at (None:
    /// fingerprints alone decide).
    fn decision(&self, sketches: bool) -> (u32, Option<f64>) {
        self.inner.decision(sketches)
    }

    fn __repr__(&self) -> String {
        let q = &self.inner;
        format!("DocumentQuery(k={}, confirm={}, min_similarity={}, min_words={})", q.k(), if q.confirm { "True" } else { "False" }, q.min_similarity, q.min_words)
    }
}
