//! The document calls by id: a crawler's page under its URL's document id, where a page that
//! changed replaces its old version in the index (one log record) and a page fetched again
//! unchanged is told apart from a near-duplicate of another page. The rule is the index's
//! ([`simdex::FindOrReplace`]); this file fingerprints and sketches the document with the
//! index's recipe and asks it, judged as [`DocumentQuery`] says.
//!
//! ```
//! use simdex::{FindOrReplace, IndexOptions};
//! use simdex_fingerprint::document::DocumentKind;
//! use simdex_fingerprint::{DocumentIndex, DocumentInput, DocumentQuery};
//!
//! let dir = std::env::temp_dir().join(format!("simdex-by-id-example-{}", std::process::id()));
//! let index = DocumentIndex::open(&dir, IndexOptions::default())?;
//! let page = |text: &'static str| DocumentInput { bytes: text.as_bytes(), kind: DocumentKind::Text };
//! let url = simdex_fingerprint::doc_id("https://example.com/news");
//! let first = "the quick brown fox jumps over the lazy dog again and again by the river bank";
//! let q = DocumentQuery::default();
//! assert!(matches!(index.find_or_replace_document(page(first), url, &q)?.1, FindOrReplace::Inserted { .. }));
//! assert!(matches!(index.find_or_replace_document(page(first), url, &q)?.1, FindOrReplace::Unchanged(_)));
//! let rewritten = "markets fell sharply on monday as investors weighed new data on inflation and rates";
//! assert!(matches!(index.find_or_replace_document(page(rewritten), url, &q)?.1, FindOrReplace::Replaced { .. }));
//! assert_eq!(index.fingerprints_of(url)?.len(), 1);
//! index.close()?;
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use simdex::{FindOrReplace, QueryOptions, Replaced};

use crate::documents::{DocumentIndex, DocumentInput, DocumentQuery};
use crate::sketch::Sketch;
use crate::{Error, Fingerprint};

type Result<T> = std::result::Result<T, Error>;

impl DocumentIndex {
    /// The crawler's check for a page fetched under `doc_id` (its URL's id, [`crate::doc_id`]):
    /// fingerprints and sketches it with the index's recipe (pinning the default recipe when
    /// the index has none), finds its near-duplicates as `query` decides, and, in one atomic
    /// index call ([`simdex::Index::find_or_replace_confirmed`]):
    /// [`FindOrReplace::Unchanged`] when one of them is stored under `doc_id` (a revisit: its
    /// item was produced when it was stored), [`FindOrReplace::Found`] when they are other
    /// documents', else the page is stored: [`FindOrReplace::Inserted`] (a new page) or
    /// [`FindOrReplace::Replaced`] (the page changed: what `doc_id` held is deleted in the
    /// same log record, so the id keeps one entry). Documents of fewer than
    /// `query.min_words` words are refused ([`Error::EmptyDocument`], nothing stored).
    pub fn find_or_replace_document(&self, doc: DocumentInput<'_>, doc_id: u64, query: &DocumentQuery) -> Result<(Fingerprint, FindOrReplace)> {
        query.check()?;
        let (f, sketch) = self.analyse(doc, true)?;
        let found = self.find_or_replace_analysed(&f, sketch.as_ref(), doc_id, query)?;
        Ok((f, found))
    }

    /// The decision of [`Self::find_or_replace_document`] for a document already
    /// fingerprinted (`f`) and sketched (`sketch`, `None` when the index stores no sketches)
    /// with the index's recipe.
    pub fn find_or_replace_analysed(&self, f: &Fingerprint, sketch: Option<&Sketch>, doc_id: u64, query: &DocumentQuery) -> Result<FindOrReplace> {
        query.check()?;
        if f.words < query.min_words {
            return Err(Error::EmptyDocument { words: f.words, min_words: query.min_words });
        }
        Ok(match sketch {
            Some(s) => self.find_or_replace_confirmed(f.value, doc_id, s.as_bytes(), &query.confirm_options())?,
            None => self.find_or_replace(f.value, doc_id, &QueryOptions::within(query.unconfirmed_k()))?,
        })
    }

    /// Stores the document as what `doc_id` holds, whatever it held before
    /// ([`simdex::Index::replace`], with the document's sketch when the index stores sketches
    /// of the library's recipe): one log record.
    pub fn replace_document(&self, doc: DocumentInput<'_>, doc_id: u64) -> Result<(Fingerprint, Replaced)> {
        let (f, sketch) = self.analyse(doc, true)?;
        let replaced = match &sketch {
            Some(s) => self.replace_sketched(f.value, doc_id, s.as_bytes())?,
            None => self.replace(f.value, doc_id)?,
        };
        Ok((f, replaced))
    }
}
