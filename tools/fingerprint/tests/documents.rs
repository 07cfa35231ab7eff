//! The document calls of an index ([`DocumentIndex`]): the pinned recipe across opens, a
//! refused other recipe, empty documents, re-pinning; fingerprints checked against the
//! recipe's own fingerprinter.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // tests: a panic is a failed test

use std::sync::Arc;

use simdex::{FindOrInsert, IndexOptions, QueryOptions, RECIPE_NAME};
use simdex_fingerprint::document::DocumentKind;
use simdex_fingerprint::{DocumentIndex, DocumentInput, Error, FingerprintOptions, Fingerprinter, IdfBuilder, Recipe};

fn with_idf() -> Recipe {
    let mut fp = Fingerprinter::new(FingerprintOptions::default()).unwrap();
    let mut b = IdfBuilder::new(fp.options().feature_recipe());
    b.add_document(&fp.distinct_features("alpha beta gamma delta"));
    b.add_document(&fp.distinct_features("alpha beta epsilon"));
    Recipe::new(FingerprintOptions::default(), Some(Arc::new(b.build(1)))).unwrap()
}

#[test]
fn a_recipe_roundtrips_through_what_the_index_pins_and_damage_is_refused() {
    for r in [Recipe::new(FingerprintOptions::short_text(), None).unwrap(), with_idf()] {
        let pinned = r.to_pinned();
        assert_eq!(Recipe::from_pinned(&pinned).unwrap(), r);
        // every cut of the IDF table is refused (the table has its own checksum)
        for n in 1..pinned.idf_table.len() {
            let cut = simdex::PinnedRecipe { idf_table: pinned.idf_table[..n].to_vec(), ..pinned.clone() };
            assert!(Recipe::from_pinned(&cut).is_err(), "IDF table cut to {n}");
        }
        // a missing, repeated or unknown key is refused
        let lines: Vec<&str> = pinned.options.lines().collect();
        for i in 0..lines.len() {
            let mut dropped = lines.clone();
            dropped.remove(i);
            assert!(Recipe::from_pinned(&simdex::PinnedRecipe { options: dropped.join("\n"), ..pinned.clone() }).is_err(), "without line {i}");
        }
        let extra = simdex::PinnedRecipe { options: format!("{}colour=blue\n", pinned.options), ..pinned.clone() };
        assert!(Recipe::from_pinned(&extra).is_err());
    }
}

#[test]
fn documents_use_the_pinned_recipe_across_opens_and_another_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let opts = || IndexOptions { background: false, ..IndexOptions::default() };
    let page = DocumentInput { bytes: b"the cat sat on the mat and then the cat went to sleep on the mat all day", kind: DocumentKind::Text };
    let index = DocumentIndex::open(dir.path(), opts()).unwrap();
    assert!(index.recipe().is_none());
    let pinned = index.pin_recipe(with_idf()).unwrap();
    let f = index.insert_document(page, 7).unwrap();
    // the oracle: the recipe's own fingerprinter
    assert_eq!(f, pinned.fingerprinter().unwrap().fingerprint(std::str::from_utf8(page.bytes).unwrap()).unwrap());
    index.close().unwrap();
    let index = DocumentIndex::open(dir.path(), opts()).unwrap();
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
    assert!(matches!(index.insert_document(empty, 9), Err(Error::EmptyDocument { .. })));
    index.replace_recipe(other.clone()).unwrap();
    assert_eq!(index.recipe().as_deref(), Some(&other));
    assert_ne!(index.fingerprint_document(page).unwrap(), f);
}

#[test]
fn the_first_document_pins_the_default_recipe() {
    let dir = tempfile::tempdir().unwrap();
    let index = DocumentIndex::open(dir.path(), IndexOptions { background: false, ..IndexOptions::default() }).unwrap();
    index.insert_document(DocumentInput { bytes: b"one two three four five", kind: DocumentKind::Text }, 1).unwrap();
    assert_eq!(index.recipe().as_deref(), Some(&Recipe::new(FingerprintOptions::default(), None).unwrap()));
    assert!(dir.path().join(RECIPE_NAME).exists());
}
