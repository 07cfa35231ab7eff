//! Many documents in one call, through a [`DocumentIndex`] (as `simdex::query_many` and
//! `simdex::find_or_insert_many` are many fingerprints): every document is fingerprinted (and
//! sketched, when the index stores sketches) on every core, then the index calls run in the
//! documents' order, each exactly what [`DocumentIndex::find_or_insert_document`] does with
//! the fingerprint and sketch it would make of that document
//! ([`DocumentIndex::find_or_insert_analysed`]). The fronts that take many documents at once
//! (the Python package, `simdex serve`) call these.

use simdex::{FindOrInsert, Match};

use crate::document::{Document, InvalidUtf8};
use crate::sketch::{Sketch, Sketcher};
use crate::{DocumentIndex, DocumentInput, DocumentQuery, Error, Fingerprint, FingerprintOptions, Fingerprinter, Recipe};

/// What a document call answers: its fingerprint and words, and its matches (empty: it was
/// inserted, or nothing is near), each with the similarity its sketch and the document's
/// estimate where both exist.
#[derive(Clone, Debug, PartialEq)]
pub struct DocumentAnswer {
    /// The document's fingerprint.
    pub fingerprint: u64,
    /// Its matches; empty when it was inserted.
    pub matches: Vec<Match>,
    /// Words kept (after stop words).
    pub words: u64,
}

impl DocumentAnswer {
    /// The answer of a check-then-add ([`DocumentIndex::find_or_insert_document`]).
    pub fn new(f: &Fingerprint, found: FindOrInsert) -> Self {
        let matches = match found {
            FindOrInsert::Found(m) => m,
            FindOrInsert::Inserted { .. } => Vec::new(),
        };
        DocumentAnswer { fingerprint: f.value, matches, words: f.words }
    }
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
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let per_thread = docs.len().div_ceil(cores).max(8);
    if docs.len() <= per_thread {
        return analyse_part(docs);
    }
    let parts: Vec<Result<Vec<Analysed>, Error>> = std::thread::scope(|s| {
        let analyse_part = &analyse_part;
        let handles: Vec<_> = docs.chunks(per_thread).map(|part| s.spawn(move || analyse_part(part))).collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    });
    let mut out = Vec::with_capacity(docs.len());
    for part in parts {
        out.extend(part?);
    }
    Ok(out)
}

fn analyse(fp: &mut Fingerprinter, sketcher: Option<&mut Sketcher>, doc: DocumentInput<'_>) -> Analysed {
    let mut d = Document { id: String::new(), kind: doc.kind, content: doc.bytes, replaced_utf8: 0 };
    let Some(sketcher) = sketcher else {
        return Ok((d.fingerprint(fp, InvalidUtf8::Replace)?.fingerprint, None));
    };
    let text = d.text_in_memory(InvalidUtf8::Replace, fp.options().version)?;
    let (f, sketch) = fp.fingerprint_and_sketch(&text, sketcher);
    Ok((f?, Some(sketch)))
}

/// An item of [`find_or_insert_documents`]: its answer, or why the document was refused
/// (too few words, binary; nothing stored).
pub type DocumentOutcome = Result<DocumentAnswer, Error>;

/// True for the errors that refuse one document of a batch (the batch goes on).
pub fn refuses_document(e: &Error) -> bool {
    matches!(e, Error::EmptyDocument { .. } | Error::BinaryDocument { .. })
}

/// Many documents stopped part-way ([`find_or_insert_documents`]): the outcomes of the items
/// done before the error (stored or found, exactly as answered), and the error. The items
/// after them were not done.
#[derive(Debug)]
pub struct Stopped {
    /// The first items' outcomes, in order.
    pub done: Vec<DocumentOutcome>,
    /// What stopped the call (a full disk, a failed writer, the recipe).
    pub error: Error,
}

impl From<Error> for Stopped {
    fn from(error: Error) -> Self {
        Stopped { done: Vec::new(), error }
    }
}

/// [`DocumentIndex::find_or_insert_document`] of every `(docs[i], ids[i])`, in order, the documents
/// analysed on every core first. The recipe is pinned first (the default one when the index
/// has none), as the first single call would. An error other than a refused document
/// ([`refuses_document`]) stops the call: [`Stopped`] says how far it got (the items before
/// the error stay stored, the rest were not done).
pub fn find_or_insert_documents(index: &DocumentIndex, docs: &[DocumentInput<'_>], ids: &[u64], query: &DocumentQuery) -> Result<Vec<DocumentOutcome>, Stopped> {
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
            Err(error) => return Err(Stopped { done: out, error }),
        };
        let found = match index.find_or_insert_analysed(&f, sketch.as_ref(), id, query) {
            Ok(found) => found,
            Err(e) if refuses_document(&e) => {
                out.push(Err(e));
                continue;
            }
            Err(error) => return Err(Stopped { done: out, error }),
        };
        out.push(Ok(DocumentAnswer::new(&f, found)));
    }
    Ok(out)
}

/// The fingerprints of `docs` with the index's recipe, made on every core; the first
/// document that cannot be fingerprinted fails the call, with its position.
pub fn fingerprint_documents(index: &DocumentIndex, docs: &[DocumentInput<'_>]) -> Result<Vec<u64>, (usize, Error)> {
    let analysed = analyse_all(index, docs, false).map_err(|e| (0, e))?;
    analysed.into_iter().enumerate().map(|(i, a)| a.map(|(f, _)| f.value).map_err(|e| (i, e))).collect()
}
