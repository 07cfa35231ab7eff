//! Text -> 64-bit simhash fingerprint (Charikar's simhash: format-spec/DESIGN.md, section 1).
//!
//! Owns the whole fingerprint recipe: normalisation, words, stop words, stemming, features,
//! the feature hash ([`hash`]), weights and the bit rule, IDF tables ([`IdfTable`], learned in one process or in parts by
//! many: [`write_idf_part`]), and
//! reading documents (plain text, HTML, JSON lines): [`document`] is the entry point from an
//! input's bytes to fingerprints and IDF tables, [`corpus`] the dedup of a whole corpus,
//! [`many`] many documents through an index at once, [`sketch`] the documents' sketches. It
//! knows nothing of indexes' files: a fingerprint is a `u64`. It also owns the text form of
//! fingerprints that the fronts read and write ([`parse_fingerprint_line`],
//! [`write_pair_line`]).
//!
//! The public modules are those five; everything else a front needs is re-exported here at
//! the root (the recipe's internals are private: `FingerprintOptions` names every choice).
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

mod by_id;
mod chunks;
mod content_hash;
pub mod corpus;
pub mod document;
mod documents;
mod error;
mod feature_map;
simdex::internal_mod!(features);
mod fingerprinter;
pub mod hash;
#[cfg(feature = "html")]
mod html;
simdex::internal_mod!(idf);
mod idf_parts;
mod input;
#[cfg(feature = "jsonl")]
mod json_record;
pub mod many;
mod normalize;
mod options;
mod recipe;
mod shingles;
pub mod sketch;
mod stem;
mod stopwords;
mod text_line;
simdex::internal_mod!(tokenize);
mod weights;

/// The document id of a document's name (a URL, a file name, a record's `id`): `sfh64(0,
/// name)`, what `simdex fingerprint --for-index`, `simdex dedup --index`, the Python
/// package's `simdex.doc_id` and the Scrapy middleware store for it.
pub fn doc_id(name: &str) -> u64 {
    hash::sfh64(0, name.as_bytes())
}

pub use corpus::{ContentHash, CorpusDedup, CorpusDoc, CorpusOptions};
pub use document::{Document, DocumentKind, Documents, Format, IdfLearner};
pub use documents::{DocumentIndex, DocumentInput, DocumentQuery, DEFAULT_CONFIRMED_K, DEFAULT_MIN_SIMILARITY, DEFAULT_UNCONFIRMED_K};
pub use error::Error;
pub use features::FeatureKind;
pub use fingerprinter::{DocumentFeatures, Fingerprint, Fingerprinter, Session, Vocabulary, MAX_PENDING};
#[cfg(feature = "html")]
pub use html::{extract_text, extract_text_as, fingerprint_html_reader, visible_text, visible_text_as};
/// The entry point of the IDF table decoder's fuzz target (`tools/fuzz`); not an API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub use idf::fuzz_decode as fuzz_idf_decode;
pub use idf::write_part as write_idf_part;
pub use idf::{IdfBuilder, IdfTable};
pub use idf_parts::{part_of as idf_part_of, PartCounts as IdfPartCounts, PartSummary as IdfPartSummary};
pub use input::{decode_utf8, fingerprint_text_reader, InvalidUtf8, Outcome};
#[cfg(feature = "jsonl")]
pub use input::{Body, JsonDoc};
pub use options::{FingerprintOptions, OptionNames, RECIPE_VERSION, RECIPE_VERSIONS};
pub use recipe::Recipe;
pub use sketch::{Sketch, SketchOptions, Sketcher};
pub use stopwords::Language;
pub use text_line::{parse_fingerprint_hex, parse_fingerprint_line, write_pair_line, BadLine, QUOTED_BYTES};
pub use tokenize::CjkSegmenter;
pub use weights::TfMode;

// The README's Rust examples (of both library crates), compiled and run as doctests so they
// cannot rot: here, in the crate that depends on both.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
