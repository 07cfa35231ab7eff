//! The `RECIPE` file: the fingerprint recipe an index's document fingerprints were made with
//! (byte layout in `format-spec/recipe.md`). Written once, when the first document
//! fingerprint is stored or a recipe is pinned, atomically (temporary file, fsync, rename,
//! directory fsync, as the manifest is), and replaced only by an explicit re-pin.
//!
//! ```text
//! 0   magic "SDXRCP\r\n"                 8 bytes
//! 8   format version = 1                 u32
//! 12  options text length O              u32
//! 16  options text (UTF-8 key=value)     O bytes
//! ..  IDF table length T (0: no table)   u64
//! ..  IDF table file (its own format)    T bytes
//! ..  CRC-32 (IEEE) of all bytes above   u32
//! ```

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::path::Path;
use std::sync::{Arc, Mutex};

use super::state::lock;
use super::{FindOrInsert, Index};
use crate::error::{Error, Result};
use crate::fingerprint::document::{Document, DocumentKind, InvalidUtf8};
use crate::fingerprint::sketch::{Sketch, SketchOptions, Sketcher};
use crate::fingerprint::{Fingerprint, FingerprintOptions, Fingerprinter, IdfTable, Recipe};
use crate::integrity::verify_crc;
use crate::query::QueryOptions;
use crate::storage::{write_atomically, Storage};
use crate::verify_sketch::VerifyOptions;

pub use super::files::RECIPE_NAME;
/// File magic.
pub const MAGIC: [u8; 8] = *b"SDXRCP\r\n";
/// The only format version this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;
const VERSION_AT: usize = MAGIC.len();
const OPTIONS_LEN_AT: usize = VERSION_AT + 4;
const OPTIONS_AT: usize = OPTIONS_LEN_AT + 4;

/// The file's bytes.
pub fn encode(recipe: &Recipe) -> Vec<u8> {
    let options = recipe.options_text();
    let idf = recipe.idf().map(|t| t.encode()).unwrap_or_default();
    let mut out = Vec::with_capacity(OPTIONS_AT + options.len() + 12 + idf.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(options.len() as u32).to_le_bytes());
    out.extend_from_slice(options.as_bytes());
    out.extend_from_slice(&(idf.len() as u64).to_le_bytes());
    out.extend_from_slice(&idf);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Parses the file at `path`; never panics on bad bytes.
pub fn decode(path: &Path, b: &[u8]) -> Result<Recipe> {
    let corrupt = |offset: usize, detail: String| Error::corrupt(path, offset as u64, detail);
    let magic = b.get(..MAGIC.len());
    if magic != Some(&MAGIC[..]) {
        let found = b.iter().take(MAGIC.len()).flat_map(|&c| std::ascii::escape_default(c)).map(char::from).collect();
        return Err(Error::NotSimdexFile { path: path.to_path_buf(), expected: "fingerprint recipe", found });
    }
    let u32_at = |at: usize| b.get(at..at + 4).and_then(|s| s.try_into().ok()).map(u32::from_le_bytes);
    let version = u32_at(VERSION_AT).ok_or_else(|| corrupt(VERSION_AT, "truncated before the version".into()))?;
    if version != FORMAT_VERSION {
        return Err(Error::UnsupportedVersion { path: path.to_path_buf(), found: version, supported: FORMAT_VERSION, oldest: FORMAT_VERSION });
    }
    let (body, stored) = b.split_last_chunk::<4>().ok_or_else(|| corrupt(0, "truncated".into()))?;
    verify_crc(body, u32::from_le_bytes(*stored)).map_err(|m| corrupt(body.len(), format!("checksum mismatch: stored {:#010x}, computed {:#010x}", m.stored, m.computed)))?;
    let options_len = u32_at(OPTIONS_LEN_AT).ok_or_else(|| corrupt(OPTIONS_LEN_AT, "truncated before the options".into()))? as usize;
    let options_end = OPTIONS_AT.checked_add(options_len).filter(|&e| e <= body.len()).ok_or_else(|| corrupt(OPTIONS_LEN_AT, "options run past the end".into()))?;
    let text = body.get(OPTIONS_AT..options_end).and_then(|t| std::str::from_utf8(t).ok()).ok_or_else(|| corrupt(OPTIONS_AT, "options are not UTF-8".into()))?;
    let options = Recipe::parse_options(text).map_err(|e| corrupt(OPTIONS_AT, format!("options: {e}")))?;
    let idf_len = body
        .get(options_end..options_end + 8)
        .and_then(|s| s.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or_else(|| corrupt(options_end, "truncated before the IDF table".into()))?;
    let idf_at = options_end + 8;
    if idf_len != (body.len() - idf_at) as u64 {
        return Err(corrupt(options_end, format!("IDF table length {idf_len} does not match the file ({} bytes left)", body.len() - idf_at)));
    }
    let idf = match body.get(idf_at..) {
        Some([]) | None => None,
        Some(t) => Some(Arc::new(IdfTable::decode(t).map_err(|e| corrupt(idf_at, format!("IDF table: {e}")))?)),
    };
    Recipe::new(options, idf).map_err(|e| corrupt(OPTIONS_AT, e.to_string()))
}

/// The recipe of the index in `dir`; `Ok(None)` when it has none.
pub fn load(storage: &dyn Storage, dir: &Path) -> Result<Option<Recipe>> {
    let path = dir.join(RECIPE_NAME);
    match storage.read_copy(&path) {
        Ok(bytes) => decode(&path, &bytes).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(&path, "read", e)),
    }
}

/// Replaces the recipe of the index in `dir`, atomically and durably.
pub fn store(storage: &dyn Storage, dir: &Path, recipe: &Recipe) -> Result<()> {
    write_atomically(storage, &dir.join(RECIPE_NAME), &encode(recipe))
}

/// An open index's recipe: the pinned one (if any) and idle fingerprinters made with it, so
/// that a document call does not rebuild one.
#[derive(Debug)]
pub(super) struct RecipeState {
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

impl RecipeState {
    pub(super) fn load(storage: &dyn Storage, dir: &Path) -> Result<Self> {
        let recipe = load(storage, dir)?.map(Arc::new);
        Ok(RecipeState { inner: Mutex::new(Pinned { recipe, generation: 0, idle: Vec::new() }), sketchers: Mutex::new(Vec::new()) })
    }
}

/// How [`Index::find_or_insert_document_with`] judges a document.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct DocumentQuery {
    /// Near-duplicates: stored fingerprints within `k` bits (verified by sketch, see
    /// `verify`).
    pub k: u32,
    /// A document of fewer words is refused ([`Error::Document`], nothing stored).
    pub min_words: u64,
    /// Verify candidates by sketch when the index stores sketches of the library's recipe
    /// (on by default: the dev corpus's F1 rises from 0.72 to 0.79 at k = 3, to 0.89 at k = 8;
    /// `benches/QUALITY.md`); off, fingerprints alone decide.
    pub verify: bool,
    /// The resemblance a verified candidate needs ([`VerifyOptions::min_similarity`]).
    pub min_similarity: f64,
}

impl DocumentQuery {
    /// Near-duplicates within `k`, verified when the index has sketches, resemblance at
    /// least 0.90, no minimum length beyond the recipe's.
    pub fn within(k: u32) -> Self {
        DocumentQuery { k, min_words: 0, verify: true, min_similarity: VerifyOptions::default().min_similarity }
    }

    /// The same, refusing documents of fewer than `min_words` words.
    pub fn with_min_words(self, min_words: u64) -> Self {
        DocumentQuery { min_words, ..self }
    }

    /// The same, with verification on or off.
    pub fn with_verify(self, verify: bool) -> Self {
        DocumentQuery { verify, ..self }
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

impl Index {
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
        self.engine.check_writable()?;
        // the writer's lock orders the file's replacement with the writes around it
        let _w = lock(&self.engine.writer);
        store(&*self.engine.storage, self.dir(), &recipe)?;
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
        recipe.and_then(|r| r.fingerprinter()).map_err(document_error)
    }

    /// The fingerprint of a document with the pinned recipe (the default one, not pinned,
    /// when the index has none). Fails with [`Error::Document`] for an empty or nearly
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
        let text = document_text(doc)?;
        Ok(Some(self.sketch_text(options, &text)?))
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

    /// Fingerprints the document with the index's recipe (pinning the default recipe when
    /// the index has none), then finds its near-duplicates within `options.k` or inserts
    /// it: [`Index::find_or_insert_verified`] when the index stores sketches (candidates
    /// accepted at a resemblance of at least 0.90), else [`Index::find_or_insert`].
    pub fn find_or_insert_document(&self, doc: DocumentInput<'_>, doc_id: u64, options: &QueryOptions) -> Result<(Fingerprint, FindOrInsert)> {
        self.find_or_insert_document_with(doc, doc_id, &DocumentQuery::within(options.k))
    }

    /// [`Index::find_or_insert_document`] with every choice explicit.
    pub fn find_or_insert_document_with(&self, doc: DocumentInput<'_>, doc_id: u64, query: &DocumentQuery) -> Result<(Fingerprint, FindOrInsert)> {
        let (f, sketch) = self.analyse(doc, true)?;
        if f.words < query.min_words {
            return Err(document_error(crate::fingerprint::Error::EmptyDocument { words: f.words, min_words: query.min_words }));
        }
        let found = match sketch.filter(|_| query.verify) {
            Some(s) => {
                let options = VerifyOptions { k: query.k, min_similarity: query.min_similarity, unsketched_k: query.k };
                self.find_or_insert_verified(f.value, doc_id, s.as_bytes(), &options)?
            }
            None => self.find_or_insert(f.value, doc_id, &QueryOptions::within(query.k))?,
        };
        Ok((f, found))
    }

    /// The fingerprint (and, when the index stores sketches of the library's recipe, the
    /// sketch, made of the same text) of a document.
    fn analyse(&self, doc: DocumentInput<'_>, pin: bool) -> Result<(Fingerprint, Option<Sketch>)> {
        let Some(options) = self.sketch_options() else {
            let mut fp = self.take_fingerprinter(pin)?;
            let f = fingerprint(&mut fp.1, doc);
            self.give_back(fp);
            return Ok((f?, None));
        };
        let text = document_text(doc)?;
        let mut fp = self.take_fingerprinter(pin)?;
        let f = fp.1.fingerprint(&text).map_err(document_error);
        self.give_back(fp);
        Ok((f?, Some(self.sketch_text(options, &text)?)))
    }

    /// The sketch of `text`, with an idle sketcher when there is one.
    fn sketch_text(&self, options: SketchOptions, text: &str) -> Result<Sketch> {
        let idle = lock(&self.recipe.sketchers).pop().filter(|s| s.options() == options);
        let mut sketcher = match idle {
            Some(s) => s,
            None => Sketcher::new(options).map_err(|e| Error::InvalidArgument(format!("the index's sketch recipe: {e}")))?,
        };
        let sketch = sketcher.sketch(text);
        let mut idle = lock(&self.recipe.sketchers);
        if idle.len() < MAX_IDLE {
            idle.push(sketcher);
        }
        Ok(sketch)
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
                let default = Recipe::new(FingerprintOptions::default(), None).map_err(document_error)?;
                if pin {
                    self.store_recipe(&mut p, default)?
                } else {
                    Arc::new(default)
                }
            }
        };
        // a fingerprinter of the unpinned default recipe is never taken back
        let generation = if p.recipe.is_some() { p.generation } else { u64::MAX };
        Ok((generation, recipe.fingerprinter().map_err(document_error)?))
    }

    fn give_back(&self, (generation, fp): (u64, Fingerprinter)) {
        let mut p = lock(&self.recipe.inner);
        // a fingerprinter of a replaced recipe is dropped
        if p.idle.len() < MAX_IDLE && generation == p.generation {
            p.idle.push(fp);
        }
    }
}

fn document_error(e: crate::fingerprint::Error) -> Error {
    Error::Document(Arc::new(e))
}

/// The text a document's fingerprint and sketch are made of.
fn document_text(doc: DocumentInput<'_>) -> Result<String> {
    let mut d = Document { id: String::new(), kind: doc.kind, content: doc.bytes, replaced_utf8: 0 };
    d.text(InvalidUtf8::Replace).map_err(document_error)
}

fn fingerprint(fp: &mut Fingerprinter, doc: DocumentInput<'_>) -> Result<Fingerprint> {
    let mut d = Document { id: String::new(), kind: doc.kind, content: doc.bytes, replaced_utf8: 0 };
    d.fingerprint(fp, InvalidUtf8::Replace).map(|o| o.fingerprint).map_err(document_error)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::fingerprint::{FingerprintOptions, Fingerprinter, IdfBuilder};

    fn with_idf() -> Recipe {
        let mut fp = Fingerprinter::new(FingerprintOptions::default()).unwrap();
        let mut b = IdfBuilder::new(fp.options().feature_recipe());
        b.add_document(&fp.distinct_features("alpha beta gamma delta"));
        b.add_document(&fp.distinct_features("alpha beta epsilon"));
        Recipe::new(FingerprintOptions::default(), Some(Arc::new(b.build(1)))).unwrap()
    }

    #[test]
    fn roundtrip_and_every_truncation_and_flip_is_an_error() {
        let p = Path::new("RECIPE");
        for r in [Recipe::new(FingerprintOptions::short_text(), None).unwrap(), with_idf()] {
            let bytes = encode(&r);
            assert_eq!(decode(p, &bytes).unwrap(), r);
            for n in 0..bytes.len() {
                assert!(decode(p, &bytes[..n]).is_err(), "truncated to {n}");
            }
            for i in 0..bytes.len() {
                let mut b = bytes.clone();
                b[i] ^= 0x10;
                assert!(decode(p, &b).is_err(), "flipped byte {i}");
            }
        }
    }

    #[test]
    fn documents_use_the_pinned_recipe_across_opens_and_another_is_refused() {
        use crate::{IndexOptions, QueryOptions};
        let dir = tempfile::tempdir().unwrap();
        let opts = || IndexOptions { background: false, ..IndexOptions::default() };
        let page = DocumentInput { bytes: b"the cat sat on the mat and then the cat went to sleep on the mat all day", kind: DocumentKind::Text };
        let index = Index::open(dir.path(), opts()).unwrap();
        assert!(index.recipe().is_none());
        let pinned = index.pin_recipe(with_idf()).unwrap();
        let f = index.insert_document(page, 7).unwrap();
        // the oracle: the recipe's own fingerprinter
        assert_eq!(f, pinned.fingerprinter().unwrap().fingerprint(std::str::from_utf8(page.bytes).unwrap()).unwrap());
        index.close().unwrap();
        let index = Index::open(dir.path(), opts()).unwrap();
        assert_eq!(index.recipe().as_deref(), Some(&with_idf()));
        assert!(index.open_report().unknown.is_empty());
        let (g, found) = index.find_or_insert_document(page, 8, &QueryOptions::within(3)).unwrap();
        assert_eq!(g, f);
        assert!(matches!(found, FindOrInsert::Found(m) if m[0].distance == 0 && m[0].doc_id == Some(7)));
        let other = Recipe::new(FingerprintOptions::short_text(), None).unwrap();
        let e = index.pin_recipe(other.clone()).unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, Error::RecipeMismatch { .. }) && text.contains(&with_idf().descriptor()) && text.contains(&other.descriptor()), "{text}");
        // empty documents are refused, not stored
        let empty = DocumentInput { bytes: b"  ", kind: DocumentKind::Text };
        assert!(matches!(index.insert_document(empty, 9), Err(Error::Document(_))));
        index.replace_recipe(other.clone()).unwrap();
        assert_eq!(index.recipe().as_deref(), Some(&other));
        assert_ne!(index.fingerprint_document(page).unwrap(), f);
    }

    #[test]
    fn the_first_document_pins_the_default_recipe() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open(dir.path(), crate::IndexOptions { background: false, ..crate::IndexOptions::default() }).unwrap();
        index.insert_document(DocumentInput { bytes: b"one two three four five", kind: DocumentKind::Text }, 1).unwrap();
        assert_eq!(index.recipe().as_deref(), Some(&Recipe::new(FingerprintOptions::default(), None).unwrap()));
        assert!(dir.path().join(RECIPE_NAME).exists());
    }
}
