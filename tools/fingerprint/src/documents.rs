//! The document calls of an index: [`DocumentIndex`] is a [`simdex::Index`] that also
//! fingerprints documents with the recipe pinned in it (its `RECIPE` file, which the index
//! crate keeps as opaque bytes: [`simdex::PinnedRecipe`]) and, when the index stores
//! sketches of this crate's recipe, confirms candidates by their sketches. Everything else
//! is the index's: `DocumentIndex` dereferences to [`simdex::Index`].
//!
//! ```
//! use simdex::{IndexOptions, FindOrInsert};
//! use simdex_fingerprint::document::DocumentKind;
//! use simdex_fingerprint::{DocumentIndex, DocumentInput, DocumentQuery};
//!
//! let dir = std::env::temp_dir().join(format!("simdex-doc-example-{}", std::process::id()));
//! let index = DocumentIndex::open(&dir, IndexOptions::default())?;
//! let page = DocumentInput { bytes: b"the quick brown fox jumps over the lazy dog again and again", kind: DocumentKind::Text };
//! assert!(matches!(index.find_or_insert_document(page, 1, &DocumentQuery::within(3))?.1, FindOrInsert::Inserted { .. }));
//! assert!(matches!(index.find_or_insert_document(page, 2, &DocumentQuery::within(3))?.1, FindOrInsert::Found(_)));
//! index.close()?;
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::ops::Deref;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use simdex::{ConfirmOptions, FindOrInsert, Index, IndexOptions, Match, QueryOptions};

use crate::document::{Document, DocumentKind, InvalidUtf8};
use crate::sketch::{Sketch, SketchOptions, Sketcher};
use crate::{Error, Fingerprint, FingerprintOptions, Fingerprinter, Recipe};

type Result<T> = std::result::Result<T, Error>;

/// Locks `m`, ignoring poisoning (every protected value is replaced whole).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// An open index with document calls: the index, its pinned recipe and idle fingerprinters
/// and sketchers made with it (so a document call does not rebuild one).
#[derive(Debug)]
pub struct DocumentIndex {
    index: Index,
    recipe: RecipeState,
}

impl Deref for DocumentIndex {
    type Target = Index;
    fn deref(&self) -> &Index {
        &self.index
    }
}

/// An open index's recipe: the pinned one (if any) and idle fingerprinters made with it, so
/// that a document call does not rebuild one.
#[derive(Debug)]
struct RecipeState {
    inner: Mutex<Pinned>,
    /// Idle sketchers of the index's sketch recipe (an index that stores sketches).
    sketchers: Mutex<Vec<Sketcher>>,
}

#[derive(Debug)]
struct Pinned {
    recipe: Option<Arc<Recipe>>,
    /// Counts pins, so that a fingerprinter of an older recipe is not taken back.
    generation: u64,
    idle: Vec<Fingerprinter>,
}

/// Idle fingerprinters kept per index (one per concurrent document call is enough).
const MAX_IDLE: usize = 64;

impl DocumentIndex {
    /// Opens the index in `dir` read-write ([`Index::open`]) with document calls.
    pub fn open(dir: impl AsRef<Path>, options: IndexOptions) -> Result<Self> {
        Self::new(Index::open(dir, options)?)
    }

    /// Opens the index in `dir` read-only ([`Index::open_read_only`]) with document calls.
    pub fn open_read_only(dir: impl AsRef<Path>, options: IndexOptions) -> Result<Self> {
        Self::new(Index::open_read_only(dir, options)?)
    }

    /// Document calls on an open index; fails when its pinned recipe is unreadable.
    pub fn new(index: Index) -> Result<Self> {
        let recipe = match index.pinned_recipe()? {
            Some(p) => Some(Arc::new(Recipe::from_pinned(&p).map_err(|detail| Error::BadPinnedRecipe { path: index.dir().join(simdex::RECIPE_NAME), detail })?)),
            None => None,
        };
        let recipe = RecipeState { inner: Mutex::new(Pinned { recipe, generation: 0, idle: Vec::new() }), sketchers: Mutex::new(Vec::new()) };
        Ok(DocumentIndex { index, recipe })
    }

    /// The index, for calls that consume it.
    pub fn into_inner(self) -> Index {
        self.index
    }

    /// [`Index::stats`]' summary ([`simdex::Stats::summary`]) and the pinned recipe's
    /// descriptor under `recipe`: what every front reports as the index's stats.
    pub fn stats_summary(&self) -> Vec<(&'static str, simdex::StatValue)> {
        let mut out = self.stats().summary();
        out.push(("recipe", simdex::StatValue::Text(self.recipe().map(|r| r.descriptor()))));
        out
    }

    /// [`Index::close`].
    pub fn close(self) -> Result<()> {
        Ok(self.index.close()?)
    }
}

/// How a document call judges a document: the one place where the fronts' document
/// decision is made (the Python package, the Scrapy middleware, `simdex serve`, `simdex
/// dedup` and `simdex.spark` all build one and call [`DocumentIndex`] with it).
///
/// - Candidates: stored fingerprints within [`DocumentQuery::k`] bits. Unless set with
///   [`DocumentQuery::with_k`], `k` is [`DEFAULT_CONFIRMED_K`] (8) when candidates are
///   confirmed by sketch and [`DEFAULT_UNCONFIRMED_K`] (3) when fingerprints alone decide.
/// - Confirmation: where the index stores sketches of the library's recipe and `confirm` is
///   on, a candidate is a near-duplicate when the two sketches estimate a resemblance of at
///   least `min_similarity`; a candidate stored without a sketch (or a query without one)
///   only within [`DocumentQuery::unconfirmed_k`].
/// - Band candidates: with confirmation at `min_similarity >= 0.9`, a stored document beyond
///   `k` whose sketch shares one of the 16 bands with the document's is a near-duplicate too,
///   whatever its fingerprint's distance, when the estimate reaches `min_similarity` plus
///   [`ConfirmOptions::band_margin`] (0.0167; as `simdex dedup` takes band candidates, which
///   then gives them a second look): near-duplicates whose fingerprints lie more than `k`
///   bits apart are found.
/// - Every match carries the similarity its sketch and the document's estimate, whenever
///   both exist ([`simdex::Match::similarity`]).
///
/// ```
/// use simdex_fingerprint::DocumentQuery;
/// assert_eq!(DocumentQuery::default().k(), 8); // confirmed by sketch
/// assert_eq!(DocumentQuery::default().with_confirm(false).k(), 3); // fingerprints alone
/// assert_eq!(DocumentQuery::default().with_k(5).k(), 5);
/// assert!(DocumentQuery::default().with_k(9).check().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct DocumentQuery {
    /// Candidates' distance when set; `None`: the default for `confirm` ([`Self::k`]).
    k: Option<u32>,
    /// A document of fewer words is refused ([`Error::EmptyDocument`], nothing stored).
    pub min_words: u64,
    /// Confirm candidates by sketch when the index stores sketches of the library's recipe
    /// (on by default: the dev corpus's F1 rises from 0.72 to 0.79 at k = 3, to 0.89 at k = 8;
    /// `benches/QUALITY.md`); off, fingerprints alone decide.
    pub confirm: bool,
    /// The resemblance a confirmed candidate needs ([`ConfirmOptions::min_similarity`]).
    pub min_similarity: f64,
}

/// The distance a document call's candidates may have when sketches confirm them (what
/// `simdex dedup` uses; chosen on the dev corpus, `benches/QUALITY.md`).
pub const DEFAULT_CONFIRMED_K: u32 = 8;
/// The largest distance at which fingerprints alone decide: without confirmation by default,
/// and for candidates stored without a sketch.
pub const DEFAULT_UNCONFIRMED_K: u32 = 3;
/// The resemblance a confirmed candidate needs by default: the ground truth's own threshold
/// (Jaccard of word 3-shingles >= 0.9).
pub const DEFAULT_MIN_SIMILARITY: f64 = 0.9;

/// `simdex dedup`'s decision: candidates within [`DEFAULT_CONFIRMED_K`] confirmed by sketch at
/// a resemblance of at least [`DEFAULT_MIN_SIMILARITY`] (fingerprints alone within
/// [`DEFAULT_UNCONFIRMED_K`] where there is no sketch), no minimum length beyond the recipe's.
impl Default for DocumentQuery {
    fn default() -> Self {
        DocumentQuery { k: None, min_words: 0, confirm: true, min_similarity: DEFAULT_MIN_SIMILARITY }
    }
}

impl DocumentQuery {
    /// Near-duplicates within `k`, confirmed by sketch when the index has sketches, resemblance at
    /// least 0.90, no minimum length beyond the recipe's.
    pub fn within(k: u32) -> Self {
        DocumentQuery::default().with_k(k)
    }

    /// The candidates' distance: the one set, else [`DEFAULT_CONFIRMED_K`] with confirmation
    /// and [`DEFAULT_UNCONFIRMED_K`] without.
    pub fn k(&self) -> u32 {
        self.k.unwrap_or(if self.confirm { DEFAULT_CONFIRMED_K } else { DEFAULT_UNCONFIRMED_K })
    }

    /// The distance within which fingerprints alone decide: `k` without confirmation, else at
    /// most [`DEFAULT_UNCONFIRMED_K`] (beyond it, pages a few words apart and unrelated pages
    /// look alike to fingerprints; only sketches tell them apart).
    pub fn unconfirmed_k(&self) -> u32 {
        if self.confirm {
            self.k().min(DEFAULT_UNCONFIRMED_K)
        } else {
            self.k()
        }
    }

    /// How the query decides on an index that stores sketches of the library's recipe
    /// (`sketched`) or not: the distance its candidates are found within, and the resemblance
    /// sketches confirm them at (`None`: fingerprints alone decide). What a front reports
    /// before it checks documents (the Scrapy middleware's start line).
    ///
    /// ```
    /// use simdex_fingerprint::DocumentQuery;
    /// assert_eq!(DocumentQuery::default().decision(true), (8, Some(0.9)));
    /// assert_eq!(DocumentQuery::default().decision(false), (3, None)); // no sketches: the fallback
    /// assert_eq!(DocumentQuery::within(5).with_confirm(false).decision(true), (5, None));
    /// ```
    pub fn decision(&self, sketched: bool) -> (u32, Option<f64>) {
        if sketched && self.confirm {
            (self.k(), Some(self.min_similarity))
        } else {
            (self.unconfirmed_k(), None)
        }
    }

    /// Fails with [`Error::InvalidOptions`] unless the query can be answered: `k` at most
    /// [`simdex::MAX_K`] (the tables answer any `k` up to 8 exactly, whatever the design), a
    /// resemblance within `0..=1`. Every front checks its arguments with this, so they refuse
    /// the same values with the same message.
    pub fn check(&self) -> Result<()> {
        let k = self.k();
        if k > simdex::MAX_K {
            return Err(Error::InvalidOptions(format!("k = {k}: document near-duplicates are found within at most k = {} bits", simdex::MAX_K)));
        }
        if !(0.0..=1.0).contains(&self.min_similarity) {
            return Err(Error::InvalidOptions(format!("min_similarity = {}: a resemblance is between 0 and 1", self.min_similarity)));
        }
        Ok(())
    }

    /// The same, with candidates within `k` (`None`: the default for [`Self::confirm`]).
    pub fn with_k(self, k: impl Into<Option<u32>>) -> Self {
        DocumentQuery { k: k.into(), ..self }
    }

    /// The same, refusing documents of fewer than `min_words` words.
    pub fn with_min_words(self, min_words: u64) -> Self {
        DocumentQuery { min_words, ..self }
    }

    /// The same, with confirmation by sketch on or off.
    pub fn with_confirm(self, confirm: bool) -> Self {
        DocumentQuery { confirm, ..self }
    }

    /// The same, with another resemblance threshold for confirmed candidates.
    pub fn with_min_similarity(self, min_similarity: f64) -> Self {
        DocumentQuery { min_similarity, ..self }
    }

    /// The index call's options for a document with a sketch: candidates within `k`,
    /// confirmed at `min_similarity` when `confirm` is on; without confirmation every
    /// candidate within `k` is accepted (a resemblance of at least 0), each still with its
    /// similarity.
    pub fn confirm_options(&self) -> ConfirmOptions {
        let min_similarity = if self.confirm { self.min_similarity } else { 0.0 };
        ConfirmOptions::default().with_k(self.k()).with_min_similarity(min_similarity).with_unsketched_k(self.unconfirmed_k())
    }
}

/// Which document a document call is given.
#[derive(Clone, Copy, Debug)]
pub struct DocumentInput<'a> {
    /// The bytes (invalid UTF-8 is replaced by U+FFFD).
    pub bytes: &'a [u8],
    /// Plain text or HTML (fingerprinted by its visible text; cargo feature `html`).
    pub kind: DocumentKind,
}

impl DocumentIndex {
    /// The fingerprint recipe pinned in the index: what every document fingerprint it stores
    /// was made with. `None` until the first document is stored or a recipe is pinned.
    pub fn recipe(&self) -> Option<Arc<Recipe>> {
        lock(&self.recipe.inner).recipe.clone()
    }

    /// Pins `recipe` when the index has none (writing its `RECIPE` file durably) and returns
    /// the pinned recipe. An index that already has one keeps it: an equal recipe is
    /// accepted, another is refused with [`Error::RecipeMismatch`] naming both.
    pub fn pin_recipe(&self, recipe: Recipe) -> Result<Arc<Recipe>> {
        let mut p = lock(&self.recipe.inner);
        match &p.recipe {
            Some(pinned) if **pinned == recipe => Ok(pinned.clone()),
            Some(pinned) => Err(Error::RecipeMismatch { dir: self.dir().to_path_buf(), index: pinned.descriptor(), given: recipe.descriptor() }),
            None => self.store_recipe(&mut p, recipe),
        }
    }

    /// Replaces the pinned recipe, e.g. with an IDF table learned again from a larger corpus.
    ///
    /// What it costs: the fingerprints already stored were made with the old recipe and are
    /// not comparable with the new one's (a byte-identical page may now get a fingerprint
    /// several bits away), so near-duplicate answers across the two are unreliable. Re-pin
    /// only on an empty index or one whose documents you fingerprint and insert again.
    pub fn replace_recipe(&self, recipe: Recipe) -> Result<Arc<Recipe>> {
        let mut p = lock(&self.recipe.inner);
        self.store_recipe(&mut p, recipe)
    }

    fn store_recipe(&self, p: &mut Pinned, recipe: Recipe) -> Result<Arc<Recipe>> {
        self.index.store_pinned_recipe(&recipe.to_pinned())?;
        let recipe = Arc::new(recipe);
        p.recipe = Some(recipe.clone());
        p.generation += 1;
        p.idle.clear();
        Ok(recipe)
    }

    /// A fingerprinter for the pinned recipe, or for the default one (word 2-shingles, no
    /// IDF) when none is pinned yet.
    pub fn fingerprinter(&self) -> Result<Fingerprinter> {
        let recipe = self.recipe().map_or_else(|| Recipe::new(FingerprintOptions::default(), None), |r| Ok((*r).clone()));
        recipe.and_then(|r| r.fingerprinter())
    }

    /// The fingerprint of a document with the pinned recipe (the default one, not pinned,
    /// when the index has none). Fails with [`Error::EmptyDocument`] for an empty or nearly
    /// empty document.
    pub fn fingerprint_document(&self, doc: DocumentInput<'_>) -> Result<Fingerprint> {
        let mut fp = self.take_fingerprinter(false)?;
        let out = fingerprint(&mut fp.1, doc);
        self.give_back(fp);
        out
    }

    /// The sketch recipe of the index's sketches, `None` when it stores none or stores
    /// sketches of another kind (made by the embedder: [`Index::insert_sketched`]).
    pub fn sketch_options(&self) -> Option<SketchOptions> {
        self.sketches().as_ref().and_then(SketchOptions::from_column)
    }

    /// The sketch of a document, made with the index's sketch recipe; `None` when the
    /// index stores no sketches of the library's recipe.
    pub fn sketch_document(&self, doc: DocumentInput<'_>) -> Result<Option<Sketch>> {
        let Some(options) = self.sketch_options() else { return Ok(None) };
        let text = document_text(doc, self.recipe_version())?;
        Ok(Some(self.sketch_text(options, &text)?))
    }

    /// The recipe version documents' text is taken with: the pinned recipe's, else the
    /// default recipe's (the one a first document pins).
    fn recipe_version(&self) -> u32 {
        self.recipe().map_or(crate::RECIPE_VERSION, |r| r.options().version)
    }

    /// Fingerprints the document with the index's recipe (pinning the default recipe when
    /// the index has none) and inserts `(fingerprint, doc_id)`, with the document's sketch
    /// when the index stores sketches of the library's recipe.
    pub fn insert_document(&self, doc: DocumentInput<'_>, doc_id: u64) -> Result<Fingerprint> {
        let (f, sketch) = self.analyse(doc, true)?;
        match &sketch {
            Some(s) => self.insert_sketched(f.value, doc_id, s.as_bytes())?,
            None => self.insert(f.value, doc_id)?,
        };
        Ok(f)
    }

    /// The crawler's check-then-add for a document: fingerprints it with the index's recipe
    /// (pinning the default recipe when the index has none) and sketches it (when the index
    /// stores sketches of the library's recipe), then finds its near-duplicates as `query`
    /// decides or inserts it, in one atomic index call ([`Self::find_or_insert_analysed`]).
    /// `simdex dedup`'s decision, the default of the Python, Scrapy and server document
    /// calls, is `find_or_insert_document(doc, id, &DocumentQuery::default())` (k = 8
    /// confirmed at 0.90). Each match carries its similarity where both sketches exist.
    pub fn find_or_insert_document(&self, doc: DocumentInput<'_>, doc_id: u64, query: &DocumentQuery) -> Result<(Fingerprint, FindOrInsert)> {
        query.check()?;
        let (f, sketch) = self.analyse(doc, true)?;
        let found = self.find_or_insert_analysed(&f, sketch.as_ref(), doc_id, query)?;
        Ok((f, found))
    }

    /// The near-duplicates of a document stored in the index, judged as
    /// [`Self::find_or_insert_document`] judges them, without storing anything and without
    /// pinning a recipe.
    pub fn query_document(&self, doc: DocumentInput<'_>, query: &DocumentQuery) -> Result<(Fingerprint, Vec<Match>)> {
        query.check()?;
        let (f, sketch) = self.analyse(doc, false)?;
        let found = self.query_analysed(&f, sketch.as_ref(), query)?;
        Ok((f, found))
    }

    /// The decision of [`Self::find_or_insert_document`] for a document already
    /// fingerprinted (`f`) and sketched (`sketch`, `None` when the index stores no sketches),
    /// with the index's recipe: refused below `query.min_words` words, else its matches
    /// (each with its similarity where both sketches exist) or inserted (with its sketch),
    /// in one index call (for callers that fingerprint many documents at once, then decide
    /// in order).
    pub fn find_or_insert_analysed(&self, f: &Fingerprint, sketch: Option<&Sketch>, doc_id: u64, query: &DocumentQuery) -> Result<FindOrInsert> {
        query.check()?;
        if f.words < query.min_words {
            return Err(Error::EmptyDocument { words: f.words, min_words: query.min_words });
        }
        Ok(match sketch {
            Some(s) => self.find_or_insert_confirmed(f.value, doc_id, s.as_bytes(), &query.confirm_options())?,
            None => self.find_or_insert(f.value, doc_id, &QueryOptions::within(query.unconfirmed_k()))?,
        })
    }

    /// The near-duplicates of a document already fingerprinted and sketched, judged as
    /// [`Self::find_or_insert_analysed`] judges them, storing nothing.
    pub fn query_analysed(&self, f: &Fingerprint, sketch: Option<&Sketch>, query: &DocumentQuery) -> Result<Vec<Match>> {
        query.check()?;
        if f.words < query.min_words {
            return Err(Error::EmptyDocument { words: f.words, min_words: query.min_words });
        }
        Ok(match sketch {
            Some(s) => self.query_confirmed(f.value, s.as_bytes(), &query.confirm_options())?,
            None => self.query(f.value, &QueryOptions::within(query.unconfirmed_k()))?,
        })
    }

    /// [`Self::query_analysed`] of many documents already fingerprinted (`fps`) and sketched
    /// (`sketches`: one sketch of the index's recipe per fingerprint, back to back; empty
    /// when there are none), over one version of the index, judged by the same rule and code
    /// ([`simdex::query_confirmed_many`]): item `i`'s matches are the answer's item
    /// `i`. No minimum length is checked (the callers' documents have fingerprints).
    pub fn query_analysed_many(&self, fps: &[u64], sketches: &[u8], query: &DocumentQuery) -> Result<simdex::Grouped> {
        query.check()?;
        let sketches = if self.sketch_options().is_some() { sketches } else { &[] };
        Ok(simdex::query_confirmed_many(&self.index, fps, sketches, &query.confirm_options())?)
    }

    /// The fingerprint (and, when the index stores sketches of the library's recipe, the
    /// sketch, made of the same text in the same scan) of a document: its text extracted
    /// once (borrowed where it is the document's own bytes).
    pub(crate) fn analyse(&self, doc: DocumentInput<'_>, pin: bool) -> Result<(Fingerprint, Option<Sketch>)> {
        let Some(options) = self.sketch_options() else {
            let mut fp = self.take_fingerprinter(pin)?;
            let f = fingerprint(&mut fp.1, doc);
            self.give_back(fp);
            return Ok((f?, None));
        };
        let text = document_text(doc, self.recipe_version())?;
        let mut sketcher = self.take_sketcher(options)?;
        let mut fp = self.take_fingerprinter(pin)?;
        let (f, sketch) = fp.1.fingerprint_and_sketch(&text, &mut sketcher);
        self.give_back(fp);
        self.give_back_sketcher(sketcher);
        Ok((f?, Some(sketch)))
    }

    /// The sketch of `text`, with an idle sketcher when there is one.
    fn sketch_text(&self, options: SketchOptions, text: &str) -> Result<Sketch> {
        let mut sketcher = self.take_sketcher(options)?;
        let sketch = sketcher.sketch(text);
        self.give_back_sketcher(sketcher);
        Ok(sketch)
    }

    /// An idle sketcher of `options`, or a new one.
    fn take_sketcher(&self, options: SketchOptions) -> Result<Sketcher> {
        match lock(&self.recipe.sketchers).pop().filter(|s| s.options() == options) {
            Some(s) => Ok(s),
            None => Sketcher::new(options).map_err(|e| Error::InvalidOptions(format!("the index's sketch recipe: {e}"))),
        }
    }

    fn give_back_sketcher(&self, sketcher: Sketcher) {
        let mut idle = lock(&self.recipe.sketchers);
        if idle.len() < MAX_IDLE {
            idle.push(sketcher);
        }
    }

    /// An idle fingerprinter of the pinned recipe, or a new one; `pin` pins the default
    /// recipe when none is.
    fn take_fingerprinter(&self, pin: bool) -> Result<(u64, Fingerprinter)> {
        let mut p = lock(&self.recipe.inner);
        if let Some(fp) = p.idle.pop() {
            return Ok((p.generation, fp));
        }
        let recipe = match &p.recipe {
            Some(r) => r.clone(),
            None => {
                let default = Recipe::new(FingerprintOptions::default(), None)?;
                if pin {
                    self.store_recipe(&mut p, default)?
                } else {
                    Arc::new(default)
                }
            }
        };
        // a fingerprinter of the unpinned default recipe is never taken back
        let generation = if p.recipe.is_some() { p.generation } else { u64::MAX };
        Ok((generation, recipe.fingerprinter()?))
    }

    fn give_back(&self, (generation, fp): (u64, Fingerprinter)) {
        let mut p = lock(&self.recipe.inner);
        // a fingerprinter of a replaced recipe is dropped
        if p.idle.len() < MAX_IDLE && generation == p.generation {
            p.idle.push(fp);
        }
    }
}

/// The text a document's fingerprint and sketch are made of, as recipe `version` takes it
/// (borrowed where it is the document's bytes).
fn document_text(doc: DocumentInput<'_>, version: u32) -> Result<std::borrow::Cow<'_, str>> {
    let mut d = Document { id: String::new(), kind: doc.kind, content: doc.bytes, replaced_utf8: 0 };
    d.text_in_memory(InvalidUtf8::Replace, version)
}

fn fingerprint(fp: &mut Fingerprinter, doc: DocumentInput<'_>) -> Result<Fingerprint> {
    let mut d = Document { id: String::new(), kind: doc.kind, content: doc.bytes, replaced_utf8: 0 };
    d.fingerprint(fp, InvalidUtf8::Replace).map(|o| o.fingerprint)
}
