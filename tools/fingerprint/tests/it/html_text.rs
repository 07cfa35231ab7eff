//! Recipe 2's visible text of HTML against the ground truth's (`../shared/eval/extract.py`:
//! selectolax, Lexbor's HTML5 parser, scripting off), whose texts are checked in
//! (`fixtures/html-text`, written by `benches/html_ground_truth.py`, never by simdex): small
//! cases where the head's tree-building rules decide, and every page of the bundled corpus.
//! Recipe 1's extraction is kept for the indexes that pinned it: an index pinned at recipe 1
//! still fingerprints and sketches HTML with it.

use simdex::IndexOptions;
use simdex_fingerprint::sketch::{SketchOptions, Sketcher};
use simdex_fingerprint::{visible_text_as, DocumentIndex, DocumentInput, DocumentKind, FingerprintOptions, Fingerprinter, Recipe};

fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures").join(name)
}

/// The words of a text joined by single spaces (the ground truth's `" ".join(text.split())`).
fn words(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn recipe_2_text_is_the_ground_truths_on_small_cases() {
    let cases = std::fs::read_to_string(fixture("html-text/cases.jsonl")).unwrap();
    let mut v1_differs = 0;
    for line in cases.lines() {
        let case: serde_json::Value = serde_json::from_str(line).unwrap();
        let (name, html, truth) = (case["name"].as_str().unwrap(), case["html"].as_str().unwrap(), case["text"].as_str().unwrap());
        assert_eq!(words(&visible_text_as(2, html)), truth, "{name}: {html}");
        v1_differs += usize::from(words(&visible_text_as(1, html)) != truth);
    }
    assert_eq!(cases.lines().count(), 21);
    // the cases are where recipe 1 (tag by tag, title always dropped) is wrong
    assert!(v1_differs >= 12, "{v1_differs}");
}

#[test]
fn recipe_2_text_is_the_ground_truths_on_the_corpus() {
    let truth = std::fs::read_to_string(fixture("html-text/corpus.tsv")).unwrap();
    let (mut pages, mut v1_equal) = (0, 0);
    for line in truth.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let html = std::fs::read_to_string(fixture("corpus/pages").join(f[0])).unwrap();
        let summary = |text: &str| {
            let w = words(text);
            (w.split(' ').filter(|s| !s.is_empty()).count().to_string(), format!("{:08x}", crc32fast::hash(w.as_bytes())))
        };
        assert_eq!(summary(&visible_text_as(2, &html)), (f[1].to_owned(), f[2].to_owned()), "{}", f[0]);
        v1_equal += usize::from(summary(&visible_text_as(1, &html)) == (f[1].to_owned(), f[2].to_owned()));
        pages += 1;
    }
    assert_eq!(pages, 315);
    // recipe 1 misses the text of a head `noscript` on the 85 pages that have one
    assert_eq!(v1_equal, 230);
}

#[test]
fn an_index_pinned_at_recipe_1_keeps_extracting_as_recipe_1() {
    let html = b"<html><head><title>Late notice</title><noscript>Enable scripts to read on</noscript></head><body><p>the cat sat on the mat and then the cat went to sleep on the mat all day long</p></body></html>";
    let page = DocumentInput { bytes: html, kind: DocumentKind::Html };
    let text = |v| visible_text_as(v, std::str::from_utf8(html).unwrap());
    assert_ne!(words(&text(1)), words(&text(2)));
    let dir = tempfile::tempdir().unwrap();
    let options = || IndexOptions::default().with_background(false).with_sketches(Some(SketchOptions::default().column()));
    let index = DocumentIndex::open(dir.path(), options()).unwrap();
    let old = Recipe::new(FingerprintOptions::default().with_version(1), None).unwrap();
    index.pin_recipe(old.clone()).unwrap();
    index.close().unwrap();
    // opened again: the version comes from the RECIPE file
    let index = DocumentIndex::open(dir.path(), options()).unwrap();
    assert_eq!(index.recipe().unwrap().options().version, 1);
    assert!(index.pinned_recipe().unwrap().unwrap().options.starts_with("recipe_version=1\n"));
    let mut sketcher = Sketcher::new(SketchOptions::default()).unwrap();
    let new_dir = tempfile::tempdir().unwrap();
    let new = DocumentIndex::open(new_dir.path(), options()).unwrap();
    for (version, index) in [(1, &index), (2, &new)] {
        // the oracle: the recipe's fingerprinter and sketcher on that version's text
        let mut fp = Fingerprinter::new(FingerprintOptions::default().with_version(version)).unwrap();
        assert_eq!(index.fingerprint_document(page).unwrap(), fp.fingerprint(&text(version)).unwrap(), "recipe {version}");
        assert_eq!(index.sketch_document(page).unwrap(), Some(sketcher.sketch(&text(version))), "recipe {version}");
        assert_eq!(index.insert_document(page, 1).unwrap(), fp.fingerprint(&text(version)).unwrap());
    }
    assert_eq!(index.recipe().as_deref(), Some(&old));
    assert_eq!(new.recipe().unwrap().options().version, 2);
}
