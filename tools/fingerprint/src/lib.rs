//! Text -> 64-bit simhash fingerprint (Charikar's simhash, PAPER.md section 1).
//!
//! Owns the whole fingerprint recipe: normalisation ([`normalize`]), words ([`tokenize`]),
//! stop words ([`stopwords`]), stemming ([`stem`]), features ([`features`]), the feature hash
//! ([`hash`]), weights and the bit rule ([`weights`]), IDF tables ([`idf`]), and reading
//! documents ([`input`], `html`): [`document`] is the entry point from an input's bytes
//! to fingerprints and IDF tables, [`corpus`] the dedup of a whole corpus. It knows nothing
//! of indexes' files: a fingerprint is a `u64`.
//!
//! The recipe is persisted with every fingerprint an index stores, so it is specified byte by
//! byte in `format-spec/fingerprint.md` and pinned by golden tests. [`RECIPE_VERSION`] changes
//! whenever any fingerprint would.
//!
//! ```
//! use simdex_fingerprint::{Fingerprinter, FingerprintOptions};
//! let mut fp = Fingerprinter::new(FingerprintOptions::default()).unwrap();
//! let a = fp.fingerprint("the cat sat on the mat, and then the cat went to sleep on the mat").unwrap();
//! let b = fp.fingerprint("the cat sat on a mat, and then the cat went to sleep on the mat").unwrap();
//! assert!((a.value ^ b.value).count_ones() <= 12);
//! ```

pub mod chunks;
pub mod corpus;
pub mod document;
mod documents;
mod error;
mod feature_map;
pub mod features;
mod fingerprinter;
pub mod hash;
#[cfg(feature = "html")]
pub mod html;
pub mod idf;
pub mod input;
pub mod many;
pub mod normalize;
mod options;
pub mod recipe;
pub mod sketch;
pub mod stem;
pub mod stopwords;
pub mod tokenize;
pub mod weights;

/// The document id of a document's name (a URL, a file name, a record's `id`): `sfh64(0,
/// name)`, what `simdex fingerprint --for-index`, `simdex dedup --index`, the Python
/// package's `simdex.doc_id` and the Scrapy middleware store for it.
pub fn doc_id(name: &str) -> u64 {
    hash::sfh64(0, name.as_bytes())
}

pub use documents::{DocumentIndex, DocumentInput, DocumentQuery, DEFAULT_CONFIRMED_K, DEFAULT_MIN_SIMILARITY, DEFAULT_UNCONFIRMED_K};
pub use error::Error;
pub use features::FeatureKind;
pub use fingerprinter::{DocumentFeatures, Fingerprint, Fingerprinter, Session, MAX_PENDING};
pub use idf::{IdfBuilder, IdfTable};
pub use options::{FingerprintOptions, OptionNames, RECIPE_VERSION};
pub use recipe::Recipe;
pub use stopwords::Language;
pub use tokenize::CjkSegmenter;
pub use weights::TfMode;
