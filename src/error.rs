//! The library's error type. Every error names the file it concerns and, for damaged files,
//! the byte offset and the table and block, so an operator can find the damage.

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::plan::DesignError;

/// Result alias for the library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where in a segment a fault sits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Location {
    /// Table index, when the fault is inside a table.
    pub table: Option<usize>,
    /// Block index within the table, when the fault is inside a block or its index entry.
    pub block: Option<u64>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.table, self.block) {
            (Some(t), Some(b)) => write!(f, " (table {t}, block {b})"),
            (Some(t), None) => write!(f, " (table {t})"),
            (None, Some(b)) => write!(f, " (block {b})"),
            (None, None) => Ok(()),
        }
    }
}

/// Everything that can go wrong in simdex.
///
/// Recovery, by variant: `Io` is the operating system's error (retry, or fix permissions or
/// space); `NotASegment`, `UnsupportedVersion` and `Corrupt` mean the file cannot be read as
/// it is (restore it, rebuild it, or for an index directory run `simdex recover`); the others
/// are mistakes in the call and change nothing on disk.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An I/O operation failed.
    #[error("{}: {op}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done (`open`, `write`, `rename`...).
        op: &'static str,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// The file does not start with a simdex magic number.
    #[error("{}: not a simdex {expected} (it starts with {found})", path.display())]
    NotSimdexFile {
        /// The file.
        path: PathBuf,
        /// What kind of file was expected.
        expected: &'static str,
        /// Its first bytes, escaped.
        found: String,
    },
    /// The file is a simdex file of a format version this build cannot read.
    #[error("{}: format version {found} is not supported (this build reads version {supported}); upgrade simdex or rebuild the file", path.display())]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// The version in the file.
        found: u32,
        /// The version this build reads.
        supported: u32,
    },
    /// The file is damaged: a checksum or an invariant failed.
    #[error("{}: corrupt at byte offset {offset}{location}: {detail}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Byte offset of the damaged structure.
        offset: u64,
        /// Table and block, where they apply.
        location: Location,
        /// What failed.
        detail: String,
    },
    /// A design is invalid or cannot be built.
    #[error("invalid design: {0}")]
    Design(#[from] DesignError),
    /// A query asked for a larger distance than the index's design guarantees.
    #[error("k = {requested} is larger than the design's k = {design_k}; queries above it can miss matches (request a full scan to answer it exactly)")]
    KTooLarge {
        /// The distance asked for.
        requested: u32,
        /// The distance the design was built for.
        design_k: u32,
    },
    /// An argument is invalid (the message says which and why).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl Error {
    /// Wraps an I/O error with the path and the operation.
    pub fn io(path: impl Into<PathBuf>, op: &'static str, source: io::Error) -> Self {
        Error::Io { path: path.into(), op, source }
    }

    /// True for errors that mean stored data is damaged or unreadable.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corrupt { .. } | Error::NotSimdexFile { .. } | Error::UnsupportedVersion { .. })
    }
}
