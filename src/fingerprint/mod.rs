//! Text -> 64-bit simhash fingerprint (Charikar's simhash, PAPER.md section 1).
//!
//! Owns the whole fingerprint recipe: normalisation ([`normalize`]), words ([`tokenize`]),
//! stop words ([`stopwords`]), stemming ([`stem`]), features ([`features`]), the feature hash
//! ([`hash`]), weights and the bit rule ([`weights`]), IDF tables ([`idf`]), and reading
//! documents ([`input`], `html`): [`document`] is the entry point from an input's bytes
//! to fingerprints and IDF tables. It knows nothing of indexes: a fingerprint is a `u64`.
//!
//! The recipe is persisted with every fingerprint an index stores, so it is specified byte by
//! byte in `format-spec/fingerprint.md` and pinned by golden tests. [`RECIPE_VERSION`] changes
//! whenever any fingerprint would.
//!
//! ```
//! use simdex::fingerprint::{Fingerprinter, FingerprintOptions};
//! let mut fp = Fingerprinter::new(FingerprintOptions::default()).unwrap();
//! let a = fp.fingerprint("the cat sat on the mat, and then the cat went to sleep on the mat").unwrap();
//! let b = fp.fingerprint("the cat sat on a mat, and then the cat went to sleep on the mat").unwrap();
//! assert!((a.value ^ b.value).count_ones() <= 12);
//! ```

pub mod chunks;
pub mod document;
pub mod features;
pub mod hash;
#[cfg(feature = "html")]
pub mod html;
pub mod idf;
pub mod input;
pub mod normalize;
pub mod recipe;
pub mod sketch;
pub mod stem;
pub mod stopwords;
pub mod tokenize;
pub mod weights;

pub use features::FeatureKind;
pub use idf::{IdfBuilder, IdfTable};
pub use recipe::Recipe;
pub use stopwords::Language;
pub use tokenize::CjkSegmenter;
pub use weights::TfMode;

use features::FeatureExtractor;
use stem::Stemmer;
use stopwords::StopWords;
use tokenize::Tokenizer;
use weights::Accumulator;

/// Version of the fingerprint recipe; part of every recipe descriptor.
pub const RECIPE_VERSION: u32 = 1;

/// Errors of fingerprinting, document input and IDF tables.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The document has fewer words than [`FingerprintOptions::min_words`]. Its fingerprint
    /// would say nothing (an empty document would get 0 and match every other empty one), so
    /// none is given; skip or store the document by its content hash instead.
    #[error("document is empty or nearly empty: {words} words, at least {min_words} needed")]
    EmptyDocument {
        /// Words the document has (after stop words).
        words: u64,
        /// Words a fingerprint needs ([`FingerprintOptions::min_words`], at least 1).
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
    /// [`input::BINARY_SNIFF_BYTES`] bytes (an executable, an image, UTF-16 text). It is not
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
}

/// What a fingerprint is made from. `Default` is the recipe the crate recommends; see
/// `benches/QUALITY.md` for the measurements behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FingerprintOptions {
    /// Feature kinds, all added to one simhash.
    pub features: Vec<FeatureKind>,
    /// How Han ideographs become words.
    pub cjk: CjkSegmenter,
    /// Languages whose stop words are dropped (empty: stop words kept).
    pub stop_words: Vec<Language>,
    /// Stem words with this language's Snowball stemmer (cargo feature `stem`).
    pub stemming: Option<Language>,
    /// Replace every ASCII digit of a word by `0` before hashing, so that version numbers,
    /// line numbers and dates do not separate otherwise equal pages.
    pub fold_digits: bool,
    /// How occurrences become weights (multiplied by the IDF weight when a table is set).
    pub tf: TfMode,
    /// Documents with fewer words (after stop words) are refused as empty.
    pub min_words: u64,
    /// Documents with fewer words get a fingerprint and a "short" warning.
    pub short_words: u64,
}

impl Default for FingerprintOptions {
    fn default() -> Self {
        FingerprintOptions {
            features: vec![FeatureKind::WordShingles(2)],
            cjk: CjkSegmenter::Chars,
            stop_words: Vec::new(),
            stemming: None,
            fold_digits: false,
            tf: TfMode::Binary,
            min_words: 3,
            short_words: 50,
        }
    }
}

impl FingerprintOptions {
    /// A recipe for sentences and snippets (the seeds' worked examples): words with term
    /// frequency and the stop words of every language, so that a changed article or particle
    /// does not weigh as much as a changed noun. Weak on pages that share a template.
    pub fn short_text() -> Self {
        FingerprintOptions { features: vec![FeatureKind::Words], stop_words: Language::ALL.to_vec(), tf: TfMode::Raw, fold_digits: false, ..FingerprintOptions::default() }
    }

    /// Descriptor of the feature part of the recipe (what an IDF table must match), e.g.
    /// `simdex-fp/1 features=w3 cjk=chars stop=- stem=- digits=fold`.
    pub fn feature_recipe(&self) -> String {
        let features: Vec<String> = self.features.iter().map(|k| k.name()).collect();
        let stop: Vec<&str> = self.stop_words.iter().map(|l| l.code()).collect();
        format!(
            "simdex-fp/{RECIPE_VERSION} features={} cjk={} stop={} stem={} digits={}",
            features.join(","),
            self.cjk.name(),
            if stop.is_empty() { "-".to_owned() } else { stop.join(",") },
            self.stemming.map_or("-", Language::code),
            if self.fold_digits { "fold" } else { "keep" },
        )
    }

    fn validate(&self) -> Result<(), Error> {
        if self.features.is_empty() {
            return Err(Error::InvalidOptions("no feature kind".into()));
        }
        let char_kinds = self.features.iter().filter(|k| matches!(k, FeatureKind::CharNgrams(_))).count();
        if char_kinds > 1 {
            return Err(Error::InvalidOptions("at most one character n-gram size".into()));
        }
        for k in &self.features {
            if FeatureKind::parse(&k.name()) != Some(*k) {
                return Err(Error::InvalidOptions(format!("unsupported feature {k:?}")));
            }
        }
        Ok(())
    }
}

/// A fingerprint and what went into it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint {
    /// The 64-bit simhash.
    pub value: u64,
    /// Words kept (after stop words).
    pub words: u64,
    /// Feature occurrences added to the simhash.
    pub features: u64,
    /// Fewer words than [`FingerprintOptions::short_words`]: simhash is weak on short texts,
    /// so near-duplicate answers for this document deserve less trust.
    pub short: bool,
}

/// Turns documents into fingerprints. Reusable; clone it for another thread.
#[derive(Debug, Clone)]
pub struct Fingerprinter {
    options: FingerprintOptions,
    tokenizer: Tokenizer,
    stop: StopWords,
    stemmer: Option<std::sync::Arc<Stemmer>>,
    idf: Option<std::sync::Arc<IdfTable>>,
    scratch: weights::Scratch,
    batch: Batch,
}

/// Word and feature hashes on their way through a [`Session`], a batch at a time: each stage
/// runs as one tight loop over a slice.
#[derive(Debug, Clone, Default)]
struct Batch {
    words: Vec<u64>,
    features: Vec<u64>,
}

/// Words per batch.
const BATCH: usize = 1024;

impl Batch {
    /// Turns the batched words into features and adds them to `acc`.
    fn flush(&mut self, features: &mut FeatureExtractor<'_>, acc: &mut Accumulator<'_>) {
        features.hashed_words(&self.words, &mut self.features);
        acc.add_all(&self.features);
        self.words.clear();
        self.features.clear();
    }
}

impl Fingerprinter {
    /// A fingerprinter for `options` (without IDF weights).
    pub fn new(options: FingerprintOptions) -> Result<Self, Error> {
        options.validate()?;
        let stemmer = options.stemming.map(Stemmer::new).transpose()?.map(std::sync::Arc::new);
        Ok(Fingerprinter {
            tokenizer: Tokenizer::new(options.cjk)?,
            stop: StopWords::new(&options.stop_words),
            stemmer,
            idf: None,
            scratch: weights::Scratch::default(),
            batch: Batch::default(),
            options,
        })
    }

    /// Multiplies every weight by the feature's IDF weight from `table`, which must have been
    /// learned with the same feature recipe.
    pub fn with_idf(mut self, table: std::sync::Arc<IdfTable>) -> Result<Self, Error> {
        let mine = self.options.feature_recipe();
        if table.recipe() != mine {
            return Err(Error::IdfRecipeMismatch { table: table.recipe().to_owned(), fingerprinter: mine });
        }
        self.idf = Some(table);
        Ok(self)
    }

    /// The options.
    pub fn options(&self) -> &FingerprintOptions {
        &self.options
    }

    /// The IDF table the weights are multiplied by, if any.
    pub fn idf_table(&self) -> Option<std::sync::Arc<IdfTable>> {
        self.idf.clone()
    }

    /// The full recipe descriptor: the feature recipe, the weighting and the IDF table's id.
    pub fn recipe(&self) -> String {
        format!("{} tf={} idf={}", self.options.feature_recipe(), self.options.tf.name(), self.idf.as_ref().map_or("-".to_owned(), |t| format!("{:08x}", t.id())),)
    }

    /// The fingerprint of `text`.
    pub fn fingerprint(&mut self, text: &str) -> Result<Fingerprint, Error> {
        let mut s = self.session();
        s.push_complete(text);
        s.finish()
    }

    /// The distinct feature hashes of `text`, ascending (what [`IdfBuilder`] counts).
    pub fn distinct_features(&mut self, text: &str) -> Vec<u64> {
        let Fingerprinter { tokenizer, stop, stemmer, options, .. } = self;
        let mut fx = FeatureExtractor::new(&options.features, stop, stemmer.as_deref(), options.fold_digits);
        let mut out = Vec::new();
        let mut emit = |h| out.push(h);
        if fx.needs_text() {
            tokenizer.words(text, |w| fx.word(w, &mut emit));
        } else {
            tokenizer.word_hashes(text, |h| fx.hashed_word(h, &mut emit));
        }
        fx.finish(&mut emit);
        out.sort_unstable();
        out.dedup();
        out
    }

    /// A streaming fingerprint: push text in pieces of any size, then `finish`. Memory stays
    /// bounded by the longest run of text without ASCII whitespace (capped at 1 MiB).
    pub fn session(&mut self) -> Session<'_> {
        let Fingerprinter { tokenizer, stop, stemmer, idf, options, scratch, batch } = self;
        // a session dropped without `finish` may have left words behind
        batch.words.clear();
        batch.features.clear();
        Session {
            features: FeatureExtractor::new(&options.features, stop, stemmer.as_deref(), options.fold_digits),
            acc: Accumulator::new(options.tf, idf.as_deref(), scratch),
            tokenizer,
            options,
            batch,
            pending: String::new(),
        }
    }
}

/// Longest run without ASCII whitespace that a [`Session`] buffers before cutting it.
pub const MAX_PENDING: usize = 1 << 20;

/// One document being fingerprinted piece by piece ([`Fingerprinter::session`]).
#[derive(Debug)]
pub struct Session<'a> {
    tokenizer: &'a mut Tokenizer,
    features: FeatureExtractor<'a>,
    acc: Accumulator<'a>,
    options: &'a FingerprintOptions,
    batch: &'a mut Batch,
    pending: String,
}

impl Session<'_> {
    /// Adds a piece of the document. Pieces join without a separator, so a word may be split
    /// across two pushes.
    pub fn push(&mut self, piece: &str) {
        let bytes = piece.as_bytes();
        let (Some(first), Some(last)) = (bytes.iter().position(u8::is_ascii_whitespace), bytes.iter().rposition(u8::is_ascii_whitespace)) else {
            // no word boundary in `piece`: keep it, unless the run gets too long
            self.pending.push_str(piece);
            if self.pending.len() >= MAX_PENDING {
                self.flush_pending("");
            }
            return;
        };
        // the pending partial word ends at `first`; whole words run up to `last`
        self.flush_pending(&piece[..first]);
        self.push_complete(&piece[first..last]);
        self.pending.push_str(&piece[last..]);
    }

    /// Processes the pending text followed by `end` (which has no whitespace).
    fn flush_pending(&mut self, end: &str) {
        if self.pending.is_empty() {
            self.push_complete(end);
            return;
        }
        let mut pending = std::mem::take(&mut self.pending);
        pending.push_str(end);
        self.push_complete(&pending);
        pending.clear();
        self.pending = pending;
    }

    /// Adds text that ends at a word boundary (no pending partial word).
    fn push_complete(&mut self, text: &str) {
        let Session { tokenizer, features, acc, batch, .. } = self;
        if text.is_empty() {
            return;
        }
        if features.needs_text() {
            tokenizer.words(text, |w| features.word(w, &mut |h| acc.add(h)));
            return;
        }
        // the batch is flushed when full and by `finish`, so that many small pieces (the text
        // nodes of a page) do not each pay for a pass through the later stages
        tokenizer.word_hashes(text, |h| {
            batch.words.push(h);
            if batch.words.len() == BATCH {
                batch.flush(features, acc);
            }
        });
    }

    /// The fingerprint of everything pushed.
    pub fn finish(mut self) -> Result<Fingerprint, Error> {
        let rest = std::mem::take(&mut self.pending);
        self.push_complete(&rest);
        let Session { mut features, mut acc, options, batch, .. } = self;
        batch.flush(&mut features, &mut acc);
        features.finish(&mut |h| acc.add(h));
        let words = features.words();
        if words < options.min_words.max(1) {
            return Err(Error::EmptyDocument { words, min_words: options.min_words.max(1) });
        }
        Ok(Fingerprint { words, features: acc.features(), short: words < options.short_words, value: acc.finish() })
    }
}
