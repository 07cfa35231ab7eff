//! Documents in batches, through a [`DocumentIndex`]: every document of a batch is
//! fingerprinted (and sketched, when the index stores sketches) on every core, then the index
//! calls run in the batch's order, each exactly what
//! [`DocumentIndex::find_or_insert_document_with`] does with the fingerprint and sketch it
//! would make of that document. Also the similarity each match's sketches estimate. The
//! fronts that take document batches (the Python package, `simdex serve`) call these.

use simdex::many::on_every_core;
use simdex::{ConfirmOptions, FindOrInsert, Match, QueryOptions};

use crate::document::{Document, InvalidUtf8};
use crate::sketch::{Sketch, Sketcher};
use crate::{DocumentIndex, DocumentInput, DocumentQuery, Error, Fingerprint, FingerprintOptions, Fingerprinter, Recipe};

/// One match of a document call: the stored pair, and the resemblance its stored sketch and
/// the document's estimate (`None`: no sketch on either side).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DocumentMatch {
    /// The stored fingerprint, its distance and document id.
    pub matched: Match,
    /// Estimated Jaccard similarity of the two documents' word shingles.
    pub similarity: Option<f64>,
}

/// What a document's check-then-add answers: its fingerprint and words, and its matches
/// (empty: it was inserted).
#[derive(Clone, Debug, PartialEq)]
pub struct DocumentAnswer {
    /// The document's fingerprint.
    pub fingerprint: u64,
    /// Its matches; empty when it was inserted.
    pub matches: Vec<DocumentMatch>,
    /// Words kept (after stop words).
    pub words: u64,
}

/// `matches` with the resemblance each stored sketch and `sketch` estimate (when both exist;
/// `k` above `MAX_K`, which only a full scan answers: `None`). The estimates are read after
/// the decision, so a pair deleted in between has `None`.
pub fn with_similarity(index: &DocumentIndex, fp: u64, sketch: Option<&Sketch>, k: u32, matches: &[Match]) -> simdex::Result<Vec<DocumentMatch>> {
    let estimates = match (sketch, index.sketches()) {
        (Some(s), Some(_)) if !matches.is_empty() && k <= simdex::plan::MAX_K => {
            index.query_confirmed(fp, s.as_bytes(), &ConfirmOptions { k, min_similarity: 0.0, unsketched_k: k, exhaustive: false })?
        }
        _ => Vec::new(),
    };
    let similarity = |m: &Match| estimates.iter().find(|e| e.matched.fingerprint == m.fingerprint && e.matched.doc_id == m.doc_id).and_then(|e| e.similarity);
    Ok(matches.iter().map(|m| DocumentMatch { matched: *m, similarity: similarity(m) }).collect())
}

/// The answer of [`DocumentIndex::find_or_insert_document_with`] for `doc`, with each match's
/// similarity.
pub fn find_or_insert_document(index: &DocumentIndex, doc: DocumentInput<'_>, doc_id: u64, query: &DocumentQuery) -> Result<DocumentAnswer, Error> {
    let (f, found) = index.find_or_insert_document_with(doc, doc_id, query)?;
    let matches = match found {
        // the sketch is made again only for a document that was not stored
        FindOrInsert::Found(m) => with_similarity(index, f.value, index.sketch_document(doc)?.as_ref(), query.k, &m)?,
        FindOrInsert::Inserted { .. } => Vec::new(),
    };
    Ok(DocumentAnswer { fingerprint: f.value, matches, words: f.words })
}

/// The near-duplicates of `doc` stored in the index, judged as
/// [`DocumentIndex::find_or_insert_document_with`] judges them (confirmed by sketch when
/// `query.confirm` and the index stores sketches), without storing anything and without
/// pinning a recipe: `(fingerprint, matches, words)` as a [`DocumentAnswer`].
pub fn query_document(index: &DocumentIndex, doc: DocumentInput<'_>, query: &DocumentQuery) -> Result<DocumentAnswer, Error> {
    let f = index.fingerprint_document(doc)?;
    if f.words < query.min_words {
        return Err(Error::EmptyDocument { words: f.words, min_words: query.min_words });
    }
    let sketch = if query.confirm { index.sketch_document(doc)? } else { None };
    let matches = match &sketch {
        Some(s) if query.k <= simdex::plan::MAX_K => {
            let options = ConfirmOptions { k: query.k, min_similarity: query.min_similarity, unsketched_k: query.unconfirmed_k(), exhaustive: false };
            index.query_confirmed(f.value, s.as_bytes(), &options)?.into_iter().map(|c| DocumentMatch { matched: c.matched, similarity: c.similarity }).collect()
        }
        _ => {
            let found = index.query(f.value, &QueryOptions::within(query.unconfirmed_k()))?;
            with_similarity(index, f.value, sketch.as_ref(), query.unconfirmed_k(), &found)?
        }
    };
    Ok(DocumentAnswer { fingerprint: f.value, matches, words: f.words })
}

/// A document's fingerprint and (when the index stores sketches and it was asked for) its sketch.
pub type Analysed = Result<(Fingerprint, Option<Sketch>), Error>;

/// Each document's fingerprint made with the index's recipe, and its sketch when `sketched`
/// and the index stores sketches of the library's recipe, made of the same text (as
/// `DocumentIndex` does for one document), on every core. `Err` items are the documents'
/// own errors; the outer error is the recipe's.
pub fn analyse_all(index: &DocumentIndex, docs: &[DocumentInput<'_>], sketched: bool) -> Result<Vec<Analysed>, Error> {
    let sketch_options = index.sketch_options().filter(|_| sketched);
    let analyse_part = |part: &[DocumentInput<'_>]| {
        let mut fp = index.fingerprinter()?;
        let mut sketcher = sketch_options.map(Sketcher::new).transpose().map_err(|e| Error::InvalidOptions(format!("the index's sketch recipe: {e}")))?;
        Ok::<Vec<Analysed>, Error>(part.iter().map(|&doc| analyse(&mut fp, sketcher.as_mut(), doc)).collect())
    };
    Ok(on_every_core(docs, 8, analyse_part)?.into_iter().flatten().collect())
}

fn analyse(fp: &mut Fingerprinter, sketcher: Option<&mut Sketcher>, doc: DocumentInput<'_>) -> Analysed {
    let mut d = Document { id: String::new(), kind: doc.kind, content: doc.bytes, replaced_utf8: 0 };
    let Some(sketcher) = sketcher else {
        return Ok((d.fingerprint(fp, InvalidUtf8::Replace)?.fingerprint, None));
    };
    let text = d.text(InvalidUtf8::Replace)?;
    Ok((fp.fingerprint(&text)?, Some(sketcher.sketch(&text))))
}

/// An item of [`find_or_insert_documents`]: its answer, or why the document was refused
/// (too few words, binary; nothing stored).
pub type DocumentOutcome = Result<DocumentAnswer, Error>;

/// True for the errors that refuse one document of a batch (the batch goes on).
pub fn refuses_document(e: &Error) -> bool {
    matches!(e, Error::EmptyDocument { .. } | Error::BinaryDocument { .. })
}

/// [`find_or_insert_document`] of every `(docs[i], ids[i])`, in order, the documents
/// analysed on every core first. The recipe is pinned first (the default one when the index
/// has none), as the first single call would. An error other than a refused document
/// ([`refuses_document`]) stops the batch; the items before it stay stored.
pub fn find_or_insert_documents(index: &DocumentIndex, docs: &[DocumentInput<'_>], ids: &[u64], query: &DocumentQuery) -> Result<Vec<DocumentOutcome>, Error> {
    if index.recipe().is_none() && !docs.is_empty() {
        index.pin_recipe(Recipe::new(FingerprintOptions::default(), None)?)?;
    }
    let analysed = analyse_all(index, docs, true)?;
    let mut out = Vec::with_capacity(docs.len());
    for (a, &id) in analysed.into_iter().zip(ids) {
        let (f, sketch) = match a {
            Ok(a) => a,
            Err(e) if refuses_document(&e) => {
                out.push(Err(e));
                continue;
            }
            Err(e) => return Err(e),
        };
        let found = match index.find_or_insert_analysed(&f, sketch.as_ref(), id, query) {
            Ok(found) => found,
            Err(e) if refuses_document(&e) => {
                out.push(Err(e));
                continue;
            }
            Err(e) => return Err(e),
        };
        let matches = match found {
            FindOrInsert::Found(m) => with_similarity(index, f.value, sketch.as_ref(), query.k, &m)?,
            FindOrInsert::Inserted { .. } => Vec::new(),
        };
        out.push(Ok(DocumentAnswer { fingerprint: f.value, matches, words: f.words }));
    }
    Ok(out)
}

/// The fingerprints of `docs` with the index's recipe, made on every core; the first
/// document that cannot be fingerprinted fails the call, with its position.
pub fn fingerprint_documents(index: &DocumentIndex, docs: &[DocumentInput<'_>]) -> Result<Vec<u64>, (usize, Error)> {
    let analysed = analyse_all(index, docs, false).map_err(|e| (0, e))?;
    analysed.into_iter().enumerate().map(|(i, a)| a.map(|(f, _)| f.value).map_err(|e| (i, e))).collect()
}
