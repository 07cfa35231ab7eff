//! The document calls by id (`find_or_replace_document`, `replace_document`): a page that
//! changes under its URL's id replaces its old version, a revisit and a near copy of another
//! page write nothing, on an index with sketches (confirmed) and one without. The oracle: a
//! model of what the id should hold, fingerprinted and sketched by the recipe's own
//! fingerprinter and an independent sketcher.

use simdex::{FindOrReplace, IndexOptions};
use simdex_fingerprint::sketch::{SketchOptions, Sketcher};
use simdex_fingerprint::{DocumentIndex, DocumentInput, DocumentKind, DocumentQuery, Error};

fn text(s: &str) -> DocumentInput<'_> {
    DocumentInput { bytes: s.as_bytes(), kind: DocumentKind::Text }
}

/// Version `v` of a page: 300 words drawn from `v` (versions share almost no 3-shingle).
fn page(v: u64) -> Vec<String> {
    let mut x = v.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..300)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            format!("w{}", x % 20_000)
        })
        .collect()
}

/// The page with one word changed: a near copy.
fn edited(words: &[String]) -> String {
    words.iter().enumerate().map(|(i, w)| if i == 150 { "edited".to_string() } else { w.clone() }).collect::<Vec<_>>().join(" ")
}

#[test]
fn a_page_changed_30_times_keeps_one_entry_and_revisits_and_near_copies_write_nothing() {
    for sketched in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let sketches = sketched.then(|| SketchOptions::default().column());
        let index = DocumentIndex::open(dir.path(), IndexOptions::default().with_background(false).with_sketches(sketches)).unwrap();
        let q = DocumentQuery::default();
        let url = simdex_fingerprint::doc_id("https://example.com/news");
        let neighbour = page(1_000).join(" ");
        assert!(matches!(index.find_or_replace_document(text(&neighbour), 1, &q).unwrap().1, FindOrReplace::Inserted { .. }));
        let mut fingerprinter = index.fingerprinter().unwrap();
        let mut sketcher = Sketcher::new(SketchOptions::default()).unwrap();
        let mut held: Option<u64> = None;
        for v in 0..30 {
            let words = page(v);
            let body = words.join(" ");
            let want = fingerprinter.fingerprint(&body).unwrap().value;
            let (f, found) = index.find_or_replace_document(text(&body), url, &q).unwrap();
            assert_eq!(f.value, want, "sketched {sketched}, version {v}: the recipe's fingerprint");
            match (held, found) {
                (None, FindOrReplace::Inserted { .. }) => {}
                (Some(old), FindOrReplace::Replaced { previous, .. }) => assert_eq!(previous, vec![old], "version {v}"),
                (h, other) => panic!("sketched {sketched}, version {v} (held {h:x?}): {other:?}"),
            }
            held = Some(want);
            assert_eq!(index.fingerprints_of(url).unwrap(), vec![want]);
            // fetched again (with a word changed where sketches confirm: fingerprints alone
            // decide within 3 bits, which one word in 300 may exceed): a revisit, nothing written
            let seq = index.stats().last_seq;
            let revisit = if sketched { edited(&words) } else { body.clone() };
            let (_, again) = index.find_or_replace_document(text(&revisit), url, &q).unwrap();
            let FindOrReplace::Unchanged(m) = again else { panic!("sketched {sketched}, version {v}: a revisit is unchanged: {again:?}") };
            assert!(m.iter().any(|m| m.doc_id == Some(url)));
            assert_eq!(index.stats().last_seq, seq, "a revisit writes nothing");
            if sketched {
                // stored with its own sketch: the independent sketcher's equals it exactly
                let got = index.query_confirmed(want, sketcher.sketch(&body).as_bytes(), &simdex::ConfirmOptions::within(0)).unwrap();
                assert_eq!(got.iter().find(|m| m.doc_id == Some(url)).and_then(|m| m.similarity), Some(1.0));
            }
            if v % 10 == 9 {
                index.flush().unwrap();
            }
        }
        let live = index.live_entries().unwrap();
        assert_eq!(live.len(), 2, "sketched {sketched}: the neighbour and one version of the page");
        assert_eq!(live.iter().filter(|e| e.doc_id == url).map(|e| e.fingerprint).collect::<Vec<_>>(), vec![held.unwrap()]);
        // a near copy of the neighbour under a new id: found, nothing stored under that id
        let copy = if sketched { edited(&page(1_000)) } else { neighbour.clone() };
        let (_, found) = index.find_or_replace_document(text(&copy), 3, &q).unwrap();
        assert!(matches!(&found, FindOrReplace::Found(m) if m[0].doc_id == Some(1)), "{found:?}");
        assert!(index.fingerprints_of(3).unwrap().is_empty());
        // too short for the query's minimum: refused, the id keeps what it held
        let e = index.find_or_replace_document(text("a short page"), url, &q.with_min_words(10)).unwrap_err();
        assert!(matches!(e, Error::EmptyDocument { .. }), "{e}");
        assert_eq!(index.fingerprints_of(url).unwrap(), vec![held.unwrap()]);
        // stored unchecked: replaces whatever the id held
        let body = page(2_000).join(" ");
        let (f, replaced) = index.replace_document(text(&body), url).unwrap();
        assert_eq!((f.value, replaced.previous), (fingerprinter.fingerprint(&body).unwrap().value, vec![held.unwrap()]));
        assert_eq!(index.fingerprints_of(url).unwrap(), vec![f.value]);
        index.close().unwrap();
    }
}
