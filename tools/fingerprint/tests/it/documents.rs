//! The document calls of an index ([`DocumentIndex`]): the pinned recipe across opens, a
//! refused other recipe, empty documents, re-pinning; fingerprints checked against the
//! recipe's own fingerprinter; documents' sketches stored and confirmed; the pinned recipe
//! through verify and salvage.

use std::path::Path;
use std::sync::Arc;

use simdex::storage::MemStorage;
use simdex::{CompactionOptions, Durability, FindOrInsert, Index, IndexOptions, QueryOptions, RECIPE_NAME};
use simdex_fingerprint::{DocumentIndex, DocumentInput, DocumentKind, Error, FingerprintOptions, Fingerprinter, IdfBuilder, Recipe};

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
    let opts = || IndexOptions::default().with_background(false);
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
    let (g, found) = index.find_or_insert_document(page, 8, &simdex_fingerprint::DocumentQuery::within(3)).unwrap();
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
    let index = DocumentIndex::open(dir.path(), IndexOptions::default().with_background(false)).unwrap();
    index.insert_document(DocumentInput { bytes: b"one two three four five", kind: DocumentKind::Text }, 1).unwrap();
    assert_eq!(index.recipe().as_deref(), Some(&Recipe::new(FingerprintOptions::default(), None).unwrap()));
    assert!(dir.path().join(RECIPE_NAME).exists());
}

/// The crawler's call decides once: a near-duplicate's match carries the similarity its
/// stored sketch and the page's estimate (the oracle: the two sketches made by the recipe's
/// own sketcher), with or without confirmation, and a page stored without confirmation
/// keeps its sketch; the k limit is the one `DocumentQuery::check` states.
#[test]
fn a_found_match_carries_its_similarity_and_the_decision_is_made_once() {
    fn text(s: &str) -> DocumentInput<'_> {
        DocumentInput { bytes: s.as_bytes(), kind: DocumentKind::Text }
    }
    use simdex_fingerprint::sketch::{SketchOptions, Sketcher};
    use simdex_fingerprint::DocumentQuery;
    let dir = tempfile::tempdir().unwrap();
    let options = IndexOptions::default().with_background(false).with_sketches(Some(SketchOptions::default().column()));
    let index = DocumentIndex::open(dir.path(), options).unwrap();
    let words: Vec<String> = (0..400).map(|i| format!("word{}", (i * 7919) % 1009)).collect();
    let a = words.join(" ");
    let b = words.iter().enumerate().map(|(i, w)| if i % 97 == 5 { "edited".to_string() } else { w.clone() }).collect::<Vec<_>>().join(" ");
    let c = words.iter().enumerate().map(|(i, w)| if i % 89 == 3 { "other".to_string() } else { w.clone() }).collect::<Vec<_>>().join(" ");
    let mut sketcher = Sketcher::new(SketchOptions::default()).unwrap();
    let (sa, sb, sc) = (sketcher.sketch(&a), sketcher.sketch(&b), sketcher.sketch(&c));
    assert!(matches!(index.find_or_insert_document(text(&a), 1, &DocumentQuery::default()).unwrap().1, FindOrInsert::Inserted { .. }));
    // confirmed (the default): found, with the similarity of the two sketches
    let (_, found) = index.find_or_insert_document(text(&b), 2, &DocumentQuery::default()).unwrap();
    let FindOrInsert::Found(m) = found else { panic!("a near copy is found") };
    assert_eq!((m.len(), m[0].doc_id), (1, Some(1)));
    assert_eq!(m[0].similarity, Some(sa.similarity(&sb).unwrap()));
    assert!(m[0].similarity.unwrap() >= simdex_fingerprint::DEFAULT_MIN_SIMILARITY);
    // not confirmed: fingerprints alone decide within 3, and the match still has its similarity
    let unconfirmed = DocumentQuery::default().with_confirm(false);
    assert_eq!(unconfirmed.k(), simdex_fingerprint::DEFAULT_UNCONFIRMED_K);
    let (fc, found) = index.find_or_insert_document(text(&c), 3, &unconfirmed).unwrap();
    match found {
        FindOrInsert::Found(m) => assert_eq!(m[0].similarity, Some(sa.similarity(&sc).unwrap())),
        // stored: with its sketch, so a confirmed query finds it by sketch
        FindOrInsert::Inserted { .. } => {
            let got = index.query_confirmed(fc.value, sc.as_bytes(), &simdex::ConfirmOptions::within(0)).unwrap();
            assert_eq!(got.iter().find(|m| m.doc_id == Some(3)).and_then(|m| m.similarity), Some(1.0));
        }
    }
    // query_document judges as find_or_insert_document, storing nothing
    let before = index.live_entries().unwrap().len();
    let (_, matches) = index.query_document(text(&b), &DocumentQuery::default()).unwrap();
    assert!(matches.iter().any(|m| m.doc_id == Some(1) && m.similarity == Some(sa.similarity(&sb).unwrap())));
    assert_eq!(index.live_entries().unwrap().len(), before);
    // one k limit, one message, for every front
    for bad in [DocumentQuery::default().with_k(9), DocumentQuery::within(64)] {
        let e = index.find_or_insert_document(text(&a), 9, &bad).unwrap_err();
        assert!(e.to_string().contains("at most k = 8"), "{e}");
        assert_eq!(e.kind(), simdex::ErrorKind::InvalidArgument);
    }
    index.close().unwrap();
}

/// Options for deterministic tests: in-memory storage, no background thread, small
/// memtables so flushes and compactions happen (as the index crate's tests make them).
fn mem_options(storage: &MemStorage, memtable_ops: u64) -> IndexOptions {
    IndexOptions::default()
        .with_storage(Arc::new(storage.clone()))
        .with_background(false)
        .with_memtable_ops(memtable_ops)
        .with_durability(Durability::Sync)
        .with_compaction(CompactionOptions::default().with_fanout(3).with_buffer_entries(4096).with_automatic(true))
}

#[test]
fn documents_carry_their_sketch_and_are_confirmed() {
    use simdex_fingerprint::sketch::{SketchOptions, Sketcher};
    use simdex_fingerprint::DocumentQuery;
    let storage = MemStorage::default();
    let index = DocumentIndex::new(Index::open("d", mem_options(&storage, 100).with_sketches(Some(SketchOptions::default().column()))).unwrap()).unwrap();
    let words: Vec<String> = (0..300).map(|i| format!("w{}", (i * 7919) % 1000)).collect();
    let page = words.join(" ");
    fn doc(t: &str) -> DocumentInput<'_> {
        DocumentInput { bytes: t.as_bytes(), kind: DocumentKind::Text }
    }
    let f = index.insert_document(doc(&page), 1).unwrap();
    // The oracle: an independent sketcher of the same text.
    let want = Sketcher::new(SketchOptions::default()).unwrap().sketch(&page);
    let got = index.query_sketched(f.value, &QueryOptions::within(0)).unwrap();
    assert_eq!(got[0].1.as_deref(), Some(want.as_bytes()));
    assert_eq!(index.sketch_document(doc(&page)).unwrap().as_ref(), Some(&want));
    // The same page again: found, confirmed (resemblance 1).
    let (_, found) = index.find_or_insert_document(doc(&page), 2, &DocumentQuery::within(3)).unwrap();
    assert!(matches!(found, FindOrInsert::Found(ref m) if m[0].doc_id == Some(1)), "{found:?}");
    // A page with the same fingerprint but different text is refused by its sketch: the
    // fingerprint is made of word 2-shingles, the sketch of 3-shingles, so reversing the
    // order of word pairs... simplest: insert a pair with doc 1's fingerprint and a far sketch.
    let far = Sketcher::new(SketchOptions::default()).unwrap().sketch("an entirely different page about other things altogether");
    index.insert_sketched(f.value ^ 1, 3, far.as_bytes()).unwrap();
    let (_, found) = index.find_or_insert_document(doc(&page), 4, &DocumentQuery::within(3)).unwrap();
    match found {
        FindOrInsert::Found(m) => assert_eq!(m.iter().map(|m| m.doc_id).collect::<Vec<_>>(), vec![Some(1)], "doc 3 is within k but not confirmed"),
        other => panic!("{other:?}"),
    }
    // Confirmation off: fingerprints alone find both.
    let (_, found) = index.find_or_insert_document(doc(&page), 5, &DocumentQuery::within(3).with_confirm(false)).unwrap();
    assert!(matches!(found, FindOrInsert::Found(ref m) if m.len() == 2), "{found:?}");
    // Too short for min_words: refused, not stored.
    assert!(matches!(index.find_or_insert_document(doc("a b c"), 6, &DocumentQuery::within(3).with_min_words(10)), Err(simdex_fingerprint::Error::EmptyDocument { .. })));
}

#[test]
fn the_pinned_recipe_is_verified_and_salvaged() {
    let storage = MemStorage::default();
    let index = DocumentIndex::open("/idx", mem_options(&storage, 1 << 20)).unwrap();
    let doc = DocumentInput { bytes: b"the cat sat on the mat and looked at the dog", kind: DocumentKind::Text };
    index.insert_document(doc, 7).unwrap();
    let pinned = index.recipe().expect("the first document pins the recipe");
    index.close().unwrap();
    let dir = Path::new("/idx");
    let report = simdex::recovery::verify_index(&storage, dir).unwrap();
    assert!(report.is_clean() && report.unknown.is_empty(), "{report:?}");
    assert!(report.checked.iter().any(|(f, _)| f == "RECIPE"), "RECIPE is checked: {:?}", report.checked);
    let report = simdex::recovery::salvage(&storage, dir, Path::new("/out"), mem_options(&storage, 1 << 20)).unwrap();
    assert!(report.recovered.iter().any(|(f, _)| f == "RECIPE"), "{report:?}");
    assert_eq!(DocumentIndex::open("/out", mem_options(&storage, 1 << 20)).unwrap().recipe(), Some(pinned));
    // A damaged recipe is a problem verify names.
    let path = dir.join("RECIPE");
    let mut bytes = storage.file(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    storage.put(&path, &bytes);
    let report = simdex::recovery::verify_index(&storage, dir).unwrap();
    assert!(report.problems.iter().any(|p| p.file == "RECIPE"), "{report:?}");
}

/// An index created with recipe 1's sketches (before recipe 2 was the default) keeps
/// working: reopened with today's default options, it still sketches its documents with
/// recipe 1 (the oracle: recipe 1's own sketcher), so a near copy is confirmed by a
/// comparable similarity; a new index gets recipe 2.
#[test]
fn an_index_keeps_the_sketch_recipe_it_was_created_with() {
    use simdex_fingerprint::sketch::{SketchOptions, Sketcher};
    use simdex_fingerprint::DocumentQuery;
    fn text(s: &str) -> DocumentInput<'_> {
        DocumentInput { bytes: s.as_bytes(), kind: DocumentKind::Text }
    }
    let words: Vec<String> = (0..400).map(|i| format!("word{}", (i * 7919) % 1009)).collect();
    let a = words.join(" ");
    let b = words.iter().enumerate().map(|(i, w)| if i % 97 == 5 { "edited".to_string() } else { w.clone() }).collect::<Vec<_>>().join(" ");
    let v1 = SketchOptions::default().with_version(1);
    let dir = tempfile::tempdir().unwrap();
    let created = IndexOptions::default().with_background(false).with_sketches(Some(v1.column()));
    let index = DocumentIndex::open(dir.path(), created).unwrap();
    index.insert_document(text(&a), 1).unwrap();
    index.close().unwrap();
    // reopened as today's fronts open it: the index's own column wins
    let today = IndexOptions::default().with_background(false).with_sketches(Some(SketchOptions::default().column()));
    let index = DocumentIndex::open(dir.path(), today.clone()).unwrap();
    assert_eq!(index.sketch_options(), Some(v1));
    let mut old = Sketcher::new(v1).unwrap();
    let want = old.sketch(&a).similarity(&old.sketch(&b)).unwrap();
    let (_, found) = index.find_or_insert_document(text(&b), 2, &DocumentQuery::default()).unwrap();
    let FindOrInsert::Found(m) = found else { panic!("a near copy is found in a recipe-1 index") };
    assert_eq!((m[0].doc_id, m[0].similarity), (Some(1), Some(want)));
    index.close().unwrap();
    let fresh = tempfile::tempdir().unwrap();
    let index = DocumentIndex::open(fresh.path(), today).unwrap();
    assert_eq!(index.sketch_options().map(|o| o.version), Some(2));
    index.close().unwrap();
}
