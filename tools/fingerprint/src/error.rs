//! The crate's one error type: fingerprinting, document input, IDF tables, and the document
//! calls on an index (whose index errors it wraps).

use std::path::PathBuf;

/// Errors of fingerprinting, document input and IDF tables.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The document has fewer words than [`FingerprintOptions::min_words`](crate::FingerprintOptions::min_words). Its fingerprint
    /// would say nothing (an empty document would get 0 and match every other empty one), so
    /// none is given; skip or store the document by its content hash instead.
    #[error("document is empty or nearly empty: {words} words, at least {min_words} needed")]
    EmptyDocument {
        /// Words the document has (after stop words).
        words: u64,
        /// Words a fingerprint needs ([`FingerprintOptions::min_words`](crate::FingerprintOptions::min_words), at least 1).
        min_words: u64,
    },
    /// Strict input found bytes that are not UTF-8; fix the input or drop strict mode to have
    /// them replaced by U+FFFD (and counted).
    #[error("invalid UTF-8 at byte offset {offset}")]
    InvalidUtf8 {
        /// Byte offset of the first invalid byte in the input.
        offset: u64,
    },
    /// The document is binary, not text: a NUL byte among its first
    /// 8,000 bytes (`BINARY_SNIFF_BYTES`) (an executable, an image, UTF-16 text). It is not
    /// fingerprinted; convert text in UTF-16 to UTF-8 first.
    #[error("binary document (a NUL byte at byte offset {offset}): not fingerprinted")]
    BinaryDocument {
        /// Byte offset of the first NUL byte.
        offset: u64,
    },
    /// The options ask for something this build left out; rebuild with the cargo feature.
    #[error("this build of simdex lacks the cargo feature `{feature}`")]
    FeatureNotCompiled {
        /// The cargo feature to enable (`cjk`, `stem`, ...).
        feature: &'static str,
    },
    /// Stemming was asked for a language that has no stemmer.
    #[error("no stemmer for language `{language}`")]
    NoStemmer {
        /// ISO 639-1 code of the language.
        language: &'static str,
    },
    /// Options that contradict each other; the message says which.
    #[error("invalid fingerprint options: {0}")]
    InvalidOptions(String),
    /// The IDF table was learned with other features than the fingerprinter uses; learn a
    /// table with the same feature options.
    #[error("IDF table was learned with features `{table}`, but the fingerprinter uses `{fingerprinter}`")]
    IdfRecipeMismatch {
        /// The feature recipe the table was learned with.
        table: String,
        /// The feature recipe of the fingerprinter.
        fingerprinter: String,
    },
    /// Not an IDF table file.
    #[error("not an IDF table (bad magic)")]
    IdfBadMagic,
    /// An IDF table of a format this build does not read.
    #[error("IDF table format version {found} is not supported (this build reads {supported})")]
    IdfUnsupportedVersion {
        /// The version in the file.
        found: u32,
        /// The version this build reads.
        supported: u32,
    },
    /// The IDF table's bytes do not match its checksum: the file is damaged; learn it again.
    #[error("IDF table checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    IdfChecksum {
        /// The CRC-32 stored in the file.
        stored: u32,
        /// The CRC-32 of the bytes read.
        computed: u32,
    },
    /// The IDF table file ends early.
    #[error("IDF table truncated: {needed} more bytes expected")]
    IdfTruncated {
        /// How many more bytes the file should have had.
        needed: usize,
    },
    /// The IDF table passed its checksum but is inconsistent (written by a faulty writer).
    #[error("IDF table corrupt: {what}")]
    IdfCorrupt {
        /// Which check failed.
        what: &'static str,
    },
    /// A part file of an IDF table learned in parts is missing, damaged or not the part its
    /// summary describes (written by another run, or changed since): learn the table again.
    #[error("IDF table part {}: {what}", path.display())]
    IdfPart {
        /// The part file.
        path: PathBuf,
        /// What is wrong with it.
        what: String,
    },
    /// A JSON-lines document could not be read; `line` is 1-based.
    #[error("line {line}: {message}")]
    JsonLine {
        /// The 1-based line number.
        line: u64,
        /// What is wrong with the line.
        message: String,
    },
    /// An I/O error while reading a document or a table.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The index a document call used failed (I/O, a damaged file, a closed writer...): see
    /// [`simdex::Error`] for what each kind means and how to recover.
    #[error(transparent)]
    Index(#[from] simdex::Error),
    /// The index stores fingerprints made with one recipe (its `RECIPE` file) and was given
    /// another: their fingerprints are not comparable. Use the index's recipe
    /// ([`crate::DocumentIndex::recipe`]), or re-pin deliberately with
    /// [`crate::DocumentIndex::replace_recipe`] (after which the fingerprints stored before
    /// no longer match what new documents get).
    #[error("{}: the index's fingerprint recipe is `{index}`, but `{given}` was given; fingerprints of different recipes are not comparable (use the index's recipe, or re-pin it explicitly)", dir.display())]
    RecipeMismatch {
        /// The index directory.
        dir: PathBuf,
        /// The recipe pinned in the index.
        index: String,
        /// The recipe given.
        given: String,
    },
    /// The index's pinned recipe (its `RECIPE` file) passed its checksum but does not parse:
    /// written by another version or a faulty writer. `simdex recover` keeps the index's
    /// fingerprints; pin a recipe again before adding documents.
    #[error("{}: the pinned fingerprint recipe is unreadable: {detail}", path.display())]
    BadPinnedRecipe {
        /// The `RECIPE` file.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
}

impl Error {
    /// What kind of failure this is, in the index crate's one list ([`simdex::ErrorKind`]),
    /// which every front maps from: an index error keeps its own kind; a refused document is
    /// [`simdex::ErrorKind::EmptyDocument`] or [`simdex::ErrorKind::BinaryDocument`]; a
    /// damaged IDF table or pinned recipe is [`simdex::ErrorKind::Corrupt`]; options, features
    /// and input the call cannot use are [`simdex::ErrorKind::InvalidArgument`].
    pub fn kind(&self) -> simdex::ErrorKind {
        use simdex::ErrorKind as K;
        match self {
            Error::Index(e) => e.kind(),
            Error::RecipeMismatch { .. } => K::RecipeMismatch,
            Error::EmptyDocument { .. } => K::EmptyDocument,
            Error::BinaryDocument { .. } => K::BinaryDocument,
            Error::IdfBadMagic
            | Error::IdfUnsupportedVersion { .. }
            | Error::IdfChecksum { .. }
            | Error::IdfTruncated { .. }
            | Error::IdfCorrupt { .. }
            | Error::IdfPart { .. }
            | Error::BadPinnedRecipe { .. } => K::Corrupt,
            Error::Io(_) => K::Other,
            _ => K::InvalidArgument,
        }
    }
}
