//! The document calls' similarity estimates and batches (`fingerprint_documents`,
//! `find_or_insert_documents`): every document of a batch is fingerprinted (and sketched,
//! when the index stores sketches) on every core, then the index calls run in the batch's
//! order, each exactly what `DocumentIndex::find_or_insert_document_with` does with the
//! fingerprint and sketch it would make of that document.

use simdex::{ConfirmOptions, FindOrInsert, Match};
use simdex_fingerprint::document::{Document, InvalidUtf8};
use simdex_fingerprint::sketch::{Sketch, Sketcher};
use simdex_fingerprint::{DocumentIndex, DocumentInput, DocumentQuery, Error, Fingerprint, FingerprintOptions, Fingerprinter, Recipe};

/// One match of a document call as Python sees it: (fingerprint, distance, doc_id,
/// similarity), the similarity the sketches estimate (None: no sketch on either side).
pub(crate) type DocumentRow = (u64, u32, Option<u64>, Option<f64>);

/// What a document call answers: (fingerprint, matches, words).
pub(crate) type DocumentAnswer = (u64, Vec<DocumentRow>, u64);

/// The rows of `matches`, each with the resemblance its stored sketch and `sketch` estimate
/// (when both exist; k above `MAX_K`, which only a full scan answers: None). The estimates are read after the decision, so a pair deleted in
/// between has None.
pub(crate) fn with_similarity(index: &DocumentIndex, fp: u64, sketch: Option<&Sketch>, k: u32, matches: &[Match]) -> simdex::Result<Vec<DocumentRow>> {
    let estimates = match (sketch, index.sketches()) {
        (Some(s), Some(_)) if !matches.is_empty() && k <= simdex::plan::MAX_K => {
            index.query_confirmed(fp, s.as_bytes(), &ConfirmOptions { k, min_similarity: 0.0, unsketched_k: k })?
        }
        _ => Vec::new(),
    };
    let similarity = |m: &Match| estimates.iter().find(|e| e.matched.fingerprint == m.fingerprint && e.matched.doc_id == m.doc_id).and_then(|e| e.similarity);
    Ok(matches.iter().map(|m| (m.fingerprint, m.distance, m.doc_id, similarity(m))).collect())
}

/// A document's fingerprint and (when the index stores sketches and `sketched`) its sketch.
type Analysed = Result<(Fingerprint, Option<Sketch>), Error>;

/// Each document's fingerprint made with the index's recipe, and its sketch when `sketched`
/// and the index stores sketches of the library's recipe, made of the same text (as
/// `DocumentIndex` does for one document), on every core. `Err` items are the documents'
/// own errors; the outer error is the recipe's.
pub(crate) fn analyse_all(index: &DocumentIndex, docs: &[DocumentInput<'_>], sketched: bool) -> Result<Vec<Analysed>, Error> {
    let sketch_options = index.sketch_options().filter(|_| sketched);
    let analyse_part = |part: &[DocumentInput<'_>]| {
        let mut fp = index.fingerprinter()?;
        let mut sketcher = sketch_options.map(Sketcher::new).transpose().map_err(|e| Error::InvalidOptions(format!("the index's sketch recipe: {e}")))?;
        Ok::<Vec<Analysed>, Error>(part.iter().map(|&doc| analyse(&mut fp, sketcher.as_mut(), doc)).collect())
    };
    Ok(crate::batch::on_every_core(docs, 8, analyse_part)?.into_iter().flatten().collect())
}

fn analyse(fp: &mut Fingerprinter, sketcher: Option<&mut Sketcher>, doc: DocumentInput<'_>) -> Analysed {
    let mut d = Document { id: String::new(), kind: doc.kind, content: doc.bytes, replaced_utf8: 0 };
    let Some(sketcher) = sketcher else {
        return Ok((d.fingerprint(fp, InvalidUtf8::Replace)?.fingerprint, None));
    };
    let text = d.text(InvalidUtf8::Replace)?;
    Ok((fp.fingerprint(&text)?, Some(sketcher.sketch(&text))))
}

/// An item of `find_or_insert_documents`: its answer, or why the document was refused
/// (too few words, binary; nothing stored).
pub(crate) type DocumentOutcome = Result<DocumentAnswer, Error>;

/// `find_or_insert_document` of every `(docs[i], ids[i])`, in order, the documents analysed
/// on every core first. The recipe is pinned first (the default one when the index has
/// none), as the first single call would. An error other than a refused document stops the
/// batch; the items before it stay stored.
pub(crate) fn find_or_insert_documents(index: &DocumentIndex, docs: &[DocumentInput<'_>], ids: &[u64], query: &DocumentQuery) -> Result<Vec<DocumentOutcome>, Error> {
    if index.recipe().is_none() && !docs.is_empty() {
        index.pin_recipe(Recipe::new(FingerprintOptions::default(), None)?)?;
    }
    let analysed = analyse_all(index, docs, true)?;
    let mut out = Vec::with_capacity(docs.len());
    for (a, &id) in analysed.into_iter().zip(ids) {
        let (f, sketch) = match a {
            Ok(a) => a,
            Err(e @ (Error::EmptyDocument { .. } | Error::BinaryDocument { .. })) => {
                out.push(Err(e));
                continue;
            }
            Err(e) => return Err(e),
        };
        let found = match index.find_or_insert_analysed(&f, sketch.as_ref(), id, query) {
            Ok(found) => found,
            Err(e @ Error::EmptyDocument { .. }) => {
                out.push(Err(e));
                continue;
            }
            Err(e) => return Err(e),
        };
        let rows = match found {
            FindOrInsert::Found(m) => with_similarity(index, f.value, sketch.as_ref(), query.k, &m)?,
            FindOrInsert::Inserted { .. } => Vec::new(),
        };
        out.push(Ok((f.value, rows, f.words)));
    }
    Ok(out)
}
