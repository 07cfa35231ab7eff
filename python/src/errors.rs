//! The exception classes of the module and the mapping of each Rust error kind onto one.

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;

create_exception!(simdex, Error, PyException, "Any simdex error; the message is the Rust error's.");
create_exception!(simdex, LockedError, Error, "Another writer holds the index's lock: close it, or open read-only.");
create_exception!(simdex, CorruptError, Error, "A file is damaged or of an unsupported version (run `simdex recover`).");
create_exception!(simdex, RecipeMismatchError, Error, "The index's fingerprint recipe differs from the one given.");
create_exception!(simdex, EmptyDocumentError, Error, "The document has too few words to be fingerprinted; nothing was stored.");
create_exception!(simdex, BinaryDocumentError, Error, "The document is binary (a NUL byte near its start), not text or HTML; nothing was stored.");

pub(crate) fn to_py(e: simdex::Error) -> PyErr {
    let msg = e.chain_message();
    match &e {
        simdex::Error::Locked { .. } => LockedError::new_err(msg),
        simdex::Error::InvalidArgument(_) | simdex::Error::KTooLarge { .. } | simdex::Error::Design(_) => PyValueError::new_err(msg),
        e if e.is_corruption() => CorruptError::new_err(msg),
        _ => Error::new_err(msg),
    }
}

/// Errors of the text pipeline and of the document calls (which wrap the index's).
pub(crate) fn fp_error(e: simdex_fingerprint::Error) -> PyErr {
    use simdex_fingerprint::Error as E;
    match e {
        E::Index(e) => to_py(e),
        E::RecipeMismatch { .. } => RecipeMismatchError::new_err(e.to_string()),
        E::EmptyDocument { .. } => EmptyDocumentError::new_err(format!("document not fingerprinted: {e}")),
        E::BinaryDocument { .. } => BinaryDocumentError::new_err(format!("document not fingerprinted: {e}")),
        e => Error::new_err(format!("document not fingerprinted: {e}")),
    }
}

/// Adds the exception classes to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("LockedError", py.get_type::<LockedError>())?;
    m.add("CorruptError", py.get_type::<CorruptError>())?;
    m.add("RecipeMismatchError", py.get_type::<RecipeMismatchError>())?;
    m.add("EmptyDocumentError", py.get_type::<EmptyDocumentError>())?;
    m.add("BinaryDocumentError", py.get_type::<BinaryDocumentError>())?;
    Ok(())
}
