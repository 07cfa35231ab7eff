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

/// The exception class of an error kind (`simdex::ErrorKind`, the library's one list).
fn exception(kind: simdex::ErrorKind, msg: String) -> PyErr {
    use simdex::ErrorKind as K;
    match kind {
        K::Locked => LockedError::new_err(msg),
        K::InvalidArgument => PyValueError::new_err(msg),
        K::Corrupt => CorruptError::new_err(msg),
        K::RecipeMismatch => RecipeMismatchError::new_err(msg),
        K::EmptyDocument => EmptyDocumentError::new_err(msg),
        K::BinaryDocument => BinaryDocumentError::new_err(msg),
        _ => Error::new_err(msg),
    }
}

pub(crate) fn to_py(e: simdex::Error) -> PyErr {
    exception(e.kind(), e.chain_message())
}

/// Errors of the text pipeline and of the document calls (which wrap the index's).
pub(crate) fn fp_error(e: simdex_fingerprint::Error) -> PyErr {
    match e {
        simdex_fingerprint::Error::Index(e) => to_py(e),
        simdex_fingerprint::Error::RecipeMismatch { .. } => exception(e.kind(), e.to_string()),
        e => {
            let kind = e.kind();
            let msg = if kind == simdex::ErrorKind::InvalidArgument { e.to_string() } else { format!("document not fingerprinted: {e}") };
            exception(kind, msg)
        }
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
