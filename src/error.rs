//! The library's error type. Every error names the file it concerns and, for damaged files,
//! the byte offset and the table and block, so an operator can find the damage.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use crate::plan::DesignError;

/// The message of [`Error::stopped`].
const STOPPED: &str = "stopped: the index is closing";

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
///
/// A message names what failed and where; the cause, when there is one, is the error's
/// [`source`](std::error::Error::source), not repeated in the message (print the chain, as
/// `anyhow`'s `{:#}` does, to see both). Errors are `Clone` (an I/O cause is shared), so a
/// failed writer can keep its first failure and report it again.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An I/O operation failed.
    #[error("{}: {op}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done (`open`, `write`, `rename`...).
        op: &'static str,
        /// The operating system's error.
        #[source]
        source: Arc<io::Error>,
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
    #[error("{}: format version {found} is not supported (this build reads {}); upgrade simdex or rebuild the file", path.display(), versions_read(*oldest, *supported))]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// The version in the file.
        found: u32,
        /// The newest version this build reads (and the one it writes).
        supported: u32,
        /// The oldest version this build still reads.
        oldest: u32,
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
    #[error("invalid design")]
    Design(#[from] DesignError),
    /// A query asked for a larger distance than the tables answer: any `k` up to
    /// [`crate::MAX_K`] (8) is answered exactly whatever the design (above the design's `k`
    /// by probing prefix variants), a larger one only by a full scan.
    #[error("k = {requested} is above {}, the largest distance the tables answer exactly (the design's k = {design_k}, and up to {} by multi-probe); ask for a full scan to go further", (*design_k).max(crate::MAX_K), (*design_k).max(crate::MAX_K))]
    KTooLarge {
        /// The distance asked for.
        requested: u32,
        /// The distance the design was built for.
        design_k: u32,
    },
    /// An argument is invalid (the message says which and why).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Another writer (in this process or another) holds the index's lock file. Close that
    /// writer, or open the index read-only.
    #[error("{}: the index is locked by another writer (open it read-only to inspect it while that writer runs)", path.display())]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// The directory holds no index (no `MANIFEST`) and the options did not ask to create one.
    #[error("{}: no simdex index here (no MANIFEST){hint}", dir.display())]
    NoIndex {
        /// The directory.
        dir: PathBuf,
        /// Why it cannot simply be created, when it cannot.
        hint: String,
    },
    /// The directory is not an index and holds other files: creating an index there was
    /// refused (nothing was written), so that a mistyped path never turns a directory of
    /// other files into an index. Point at an empty or new directory, or ask for it
    /// (`IndexOptions::create_in_nonempty`, the CLI's `--create-in-nonempty`).
    #[error("{}: not a simdex index (no MANIFEST) and not empty ({found}): refused to create an index among other files; use an empty or new directory, or ask for it with --create-in-nonempty (IndexOptions::create_in_nonempty, create_in_nonempty=True in Python)", dir.display())]
    NotAnIndex {
        /// The directory.
        dir: PathBuf,
        /// What it holds, in words (a count and a few names).
        found: String,
    },
    /// A write was attempted on an index opened read-only.
    #[error("{}: the index is open read-only", dir.display())]
    ReadOnly {
        /// The index directory.
        dir: PathBuf,
    },
    /// A background flush, compaction or log sync failed (the source says why: a full
    /// disk, an I/O error). Writes acknowledged before it stay durable in the log, and the
    /// call that returns this did nothing; the work is retried by later writes and by the
    /// background thread. Each failure is reported once, by the next write, `sync`,
    /// `flush`, `compact` or `close`; free space or fix the cause, then go on.
    #[error("{}: background maintenance failed (nothing acknowledged is lost)", dir.display())]
    Maintenance {
        /// The index directory.
        dir: PathBuf,
        /// The failure.
        #[source]
        source: Box<Error>,
    },
    /// Too little free space for what was asked (a merge writes its output, and may spill
    /// sorted runs, before it removes its inputs). Nothing was changed; free space first.
    #[error("{}: {what} needs about {} MiB free, the file system has {} MiB: free space first (nothing was changed)", dir.display(), needed / (1 << 20), available / (1 << 20))]
    NoSpace {
        /// The directory checked.
        dir: PathBuf,
        /// What needed the space.
        what: String,
        /// Bytes needed (an estimate).
        needed: u64,
        /// Bytes available to this user.
        available: u64,
    },
    /// An earlier write failed part-way, so the log may end in a partial record; the index
    /// refuses further writes until it is reopened (which recovers the log's valid prefix).
    #[error("{}: an earlier write failed; reopen the index to recover", dir.display())]
    WriterFailed {
        /// The index directory.
        dir: PathBuf,
        /// The first failure.
        #[source]
        source: Box<Error>,
    },
}

/// What kind of failure an error is: the one classification every front maps from (the
/// Python package's exception classes, the server's statuses and `kind` strings, the CLI's
/// exit codes). [`Error::kind`] classifies the index's errors; the text pipeline's errors
/// (`simdex_fingerprint::Error::kind`) use the same list, with the kinds only documents have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// An argument or option is invalid (the message says which); nothing was done.
    InvalidArgument,
    /// Another writer holds the index's lock.
    Locked,
    /// A write on an index opened read-only.
    ReadOnly,
    /// Stored data is damaged, not simdex's, or of an unsupported version.
    Corrupt,
    /// The file system is full (or too full for what was asked).
    NoSpace,
    /// An earlier write failed part-way; the index refuses writes until it is reopened.
    WriterFailed,
    /// The index's fingerprint recipe differs from the one given (documents only).
    RecipeMismatch,
    /// A document too short to be fingerprinted; nothing was stored (documents only).
    EmptyDocument,
    /// A binary document (not text or HTML); nothing was stored (documents only).
    BinaryDocument,
    /// Anything else: I/O errors, background failures, a missing index.
    Other,
}

impl ErrorKind {
    /// The kind's name in the server's protocol and in reports: `invalid_argument`,
    /// `locked`, `read_only`, `corrupt`, `no_space`, `writer_failed`, `recipe_mismatch`,
    /// `empty_document`, `binary_document`, `internal`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgument => "invalid_argument",
            ErrorKind::Locked => "locked",
            ErrorKind::ReadOnly => "read_only",
            ErrorKind::Corrupt => "corrupt",
            ErrorKind::NoSpace => "no_space",
            ErrorKind::WriterFailed => "writer_failed",
            ErrorKind::RecipeMismatch => "recipe_mismatch",
            ErrorKind::EmptyDocument => "empty_document",
            ErrorKind::BinaryDocument => "binary_document",
            ErrorKind::Other => "internal",
        }
    }
}

/// True when `e` or one of its causes is a full file system (ENOSPC, `StorageFull`) or
/// [`Error::NoSpace`].
pub(crate) fn caused_by_full_disk(e: &(dyn std::error::Error + 'static)) -> bool {
    let full = |io: &io::Error| io.kind() == io::ErrorKind::StorageFull || io.raw_os_error() == Some(28);
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        // `Error::Io` keeps its cause in an `Arc`, and gives the `Arc` as its source
        let io = c.downcast_ref::<io::Error>().or_else(|| c.downcast_ref::<Arc<io::Error>>().map(|a| &**a));
        if io.is_some_and(full) || matches!(c.downcast_ref::<Error>(), Some(Error::NoSpace { .. })) {
            return true;
        }
        cause = c.source();
    }
    false
}

impl Error {
    /// Wraps an I/O error with the path and the operation.
    pub fn io(path: impl Into<PathBuf>, op: &'static str, source: io::Error) -> Self {
        Error::Io { path: path.into(), op, source: Arc::new(source) }
    }

    /// What background work (a merge, a band file's build) returns when it was asked to
    /// stop because the index is closing: its files and last checkpoint stay, and the next
    /// merge of the same segments goes on from there. Told apart by [`Self::is_stopped`];
    /// the engine never reports it.
    pub(crate) fn stopped(path: &std::path::Path) -> Self {
        Error::io(path, "stop (the index is closing)", io::Error::new(io::ErrorKind::Interrupted, STOPPED))
    }

    /// True for the error [`Self::stopped`] makes.
    pub(crate) fn is_stopped(&self) -> bool {
        matches!(self, Error::Io { source, .. } if source.kind() == io::ErrorKind::Interrupted && source.to_string() == STOPPED)
    }

    /// The message followed by every cause, joined by `": "` (what `anyhow`'s `{:#}`
    /// prints): for reports that keep errors as text.
    pub fn chain_message(&self) -> String {
        let mut out = self.to_string();
        let mut cause = std::error::Error::source(self);
        while let Some(c) = cause {
            out.push_str(": ");
            out.push_str(&c.to_string());
            cause = c.source();
        }
        out
    }

    /// What kind of failure this is ([`ErrorKind`]): a writer failed earlier
    /// ([`ErrorKind::WriterFailed`], whatever failed it), else a full disk anywhere in the
    /// chain of causes ([`ErrorKind::NoSpace`]), else the variant's kind.
    pub fn kind(&self) -> ErrorKind {
        if let Error::WriterFailed { .. } = self {
            return ErrorKind::WriterFailed;
        }
        if caused_by_full_disk(self) {
            return ErrorKind::NoSpace;
        }
        match self {
            Error::InvalidArgument(_) | Error::KTooLarge { .. } | Error::Design(_) => ErrorKind::InvalidArgument,
            Error::Locked { .. } => ErrorKind::Locked,
            Error::ReadOnly { .. } => ErrorKind::ReadOnly,
            e if e.is_corruption() => ErrorKind::Corrupt,
            _ => ErrorKind::Other,
        }
    }

    /// True for errors that mean stored data is damaged or unreadable.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corrupt { .. } | Error::NotSimdexFile { .. } | Error::UnsupportedVersion { .. })
    }

    /// A `Corrupt` error for `path` at `offset` with no table or block.
    pub(crate) fn corrupt(path: impl Into<PathBuf>, offset: u64, detail: impl Into<String>) -> Self {
        Error::Corrupt { path: path.into(), offset, location: Location::default(), detail: detail.into() }
    }
}

/// "version 2" or "versions 1 to 2".
fn versions_read(oldest: u32, newest: u32) -> String {
    if oldest == newest {
        format!("version {newest}")
    } else {
        format!("versions {oldest} to {newest}")
    }
}
