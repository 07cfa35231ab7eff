//! A document's features counted once (`Fingerprinter::document_features`) give the
//! fingerprint of its text with any IDF table of the recipe (`fingerprint_features`), for
//! every kind of recipe: the oracle is `Fingerprinter::fingerprint` of the text. And the
//! one-scan calls (`fingerprint_and_sketch`, `document_features_and_sketch`) give what the
//! separate calls give (`fingerprint`/`document_features` and `Sketcher::sketch`), and
//! features kept by number (`DocumentFeatures::add_to`) what they gave before.

use proptest::prelude::*;
use simdex_fingerprint::{Error, FeatureKind, FingerprintOptions, Fingerprinter, IdfBuilder, Language, SketchOptions, Sketcher, TfMode};
use std::sync::Arc;

fn recipes() -> Vec<FingerprintOptions> {
    use FeatureKind::*;
    let base = FingerprintOptions::default().with_min_words(1);
    let mut out = vec![base.clone(), FingerprintOptions::short_text().with_min_words(1)];
    for tf in [TfMode::Raw, TfMode::Log, TfMode::Binary] {
        for features in [vec![Words], vec![WordShingles(3)], vec![Words, WordShingles(2)], vec![CharNgrams(4)]] {
            out.push(base.clone().with_tf(tf).with_features(features));
        }
    }
    out.push(base.clone().with_stop_words(vec![Language::English]).with_stemming(Some(Language::English)).with_fold_digits(true));
    out
}

/// The recipe's fingerprinters without IDF and with a table learned from `corpus` (none when
/// the recipe needs a cargo feature this build lacks).
fn fingerprinters(o: &FingerprintOptions, corpus: &[String]) -> Vec<Fingerprinter> {
    let mut plain = match Fingerprinter::new(o.clone()) {
        Ok(fp) => fp,
        Err(Error::FeatureNotCompiled { .. }) => return Vec::new(),
        Err(e) => panic!("{e}"),
    };
    let mut b = IdfBuilder::new(o.feature_recipe());
    for t in corpus {
        b.add_document(&plain.distinct_features(t));
    }
    let weighted = plain.clone().with_idf(Arc::new(b.build(1))).unwrap();
    vec![plain, weighted]
}

/// Features kept by their numbers in a numbering IDF builder's vocabulary
/// (`DocumentFeatures::add_to`, what `simdex dedup` keeps between its passes) give the same
/// table as the hashes counted (`IdfBuilder::add_document`) and, resolved by the vocabulary
/// (`fingerprint_numbered`), the fingerprint of the text.
fn check_numbered(o: &FingerprintOptions, corpus: &[String]) {
    let Ok(mut plain) = Fingerprinter::new(o.clone()) else { return };
    let (mut counted, mut numbering) = (IdfBuilder::new(o.feature_recipe()), IdfBuilder::numbering(o.feature_recipe()));
    let mut kept = Vec::new();
    for t in corpus {
        let mut f = plain.document_features(t);
        counted.add_document(f.distinct());
        let (hashes, before) = (f.distinct().to_vec(), f.heap_bytes());
        assert!(f.add_to(&mut numbering), "{o:?} {t:?}");
        assert!(f.distinct().is_empty(), "numbered: the hashes are dropped");
        assert!(f.heap_bytes() + 4 * hashes.len() <= before, "{o:?} {t:?}: 4 bytes a feature saved");
        assert!(!f.add_to(&mut numbering), "numbered features are not counted twice");
        kept.push(f);
    }
    assert_eq!(numbering.documents(), corpus.len() as u64);
    let (table, vocabulary) = numbering.build_keeping_vocabulary(1);
    assert_eq!(table.encode(), counted.build(1).encode(), "{o:?}");
    let hashes = vocabulary.expect("every document numbered");
    let mut weighted = plain.clone().with_idf(Arc::new(table)).unwrap();
    // the weights looked up once by the fingerprinter's own vocabulary; with another's (other
    // weights, or none) they are looked up in each document
    let (own, unweighted) = (weighted.vocabulary(hashes.clone()), plain.vocabulary(hashes.clone()));
    let mut other = plain.clone().with_idf(Arc::new(IdfBuilder::new(o.feature_recipe()).build(1))).unwrap();
    for (t, f) in corpus.iter().zip(&kept) {
        let expect = format!("{:?}", weighted.fingerprint(t));
        for v in [&own, &unweighted] {
            assert_eq!(format!("{:?}", weighted.fingerprint_numbered(f, v)), expect, "{o:?} {t:?}");
        }
        for (which, v) in [(0, &own), (1, &own), (1, &unweighted)] {
            let fp = if which == 0 { &mut plain } else { &mut other };
            let expect = format!("{:?}", fp.fingerprint(t));
            assert_eq!(format!("{:?}", fp.fingerprint_numbered(f, v)), expect, "{o:?} {t:?}");
        }
    }
    // the last feature numbered is beyond a vocabulary one shorter
    if let Some((_, shorter)) = hashes.split_last() {
        let short = weighted.vocabulary(shorter.to_vec());
        assert!(kept.iter().any(|f| matches!(weighted.fingerprint_numbered(f, &short), Err(Error::InvalidOptions(_)))), "{o:?}: a number beyond the vocabulary is an error");
    }
}

fn check(corpus: &[String]) {
    for o in recipes() {
        check_numbered(&o, corpus);
    }
    for o in recipes() {
        for mut fp in fingerprinters(&o, corpus) {
            for text in corpus {
                let features = fp.document_features(text);
                let mut distinct = features.distinct().to_vec();
                distinct.sort_unstable();
                assert_eq!(distinct, fp.distinct_features(text), "{o:?} {text:?}");
                let expect = fp.fingerprint(text);
                assert_eq!(format!("{:?}", fp.fingerprint_features(&features)), format!("{expect:?}"), "{} {text:?}", fp.recipe());
                for version in [1, 2] {
                    let options = SketchOptions::default().with_version(version);
                    let (mut joint, mut alone) = (Sketcher::new(options).unwrap(), Sketcher::new(options).unwrap());
                    let sketch = alone.sketch(text);
                    let scanned = alone.last_scan().to_vec();
                    // recipe 2 sketches the shingles as scanned (text order, repeats): the
                    // same as the sketch of the sorted distinct set
                    let set = alone.last_shingles().to_vec();
                    assert!(set.windows(2).all(|w| w[0] < w[1]), "the set is ascending and distinct");
                    assert_eq!(alone.sketch_of_set(&set), sketch, "{text:?}");
                    let (f, s) = fp.fingerprint_and_sketch(text, &mut joint);
                    assert_eq!(format!("{f:?}"), format!("{expect:?}"), "{} {text:?}", fp.recipe());
                    assert_eq!(s, sketch, "{} {text:?}", fp.recipe());
                    // the one scan's shingles as scanned (text order, repeats), and as a set
                    assert_eq!(joint.last_scan(), scanned, "{text:?}");
                    assert_eq!(joint.last_shingles(), alone.last_shingles());
                    let (f, s) = fp.document_features_and_sketch(text, &mut joint);
                    assert_eq!(joint.last_scan(), scanned, "{text:?}");
                    assert_eq!(f, features, "{} {text:?}", fp.recipe());
                    assert_eq!(s, sketch, "{} {text:?}", fp.recipe());
                }
            }
        }
    }
}

#[test]
fn features_once_give_the_texts_fingerprint() {
    let corpus: Vec<String> = [
        "the cat sat on the mat, and then the cat went to sleep on the mat",
        "The Cat sat on a mat; and then the cat went to sleep on the mat! 1.95.0 don't",
        "Почти одинаковые веб страницы встречаются очень часто 你妈妈喊你回家吃饭哦 running runs ran",
        "one",
        "",
        "a a a a a a a b b b c",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    check(&corpus);
}

#[test]
fn too_few_words_is_the_same_error() {
    let mut fp = Fingerprinter::new(FingerprintOptions::default()).unwrap();
    let f = fp.document_features("two words");
    assert_eq!(f.words(), 2);
    assert!(matches!(fp.fingerprint_features(&f), Err(Error::EmptyDocument { words: 2, min_words: 3 })));
    assert!(matches!(fp.fingerprint("two words"), Err(Error::EmptyDocument { words: 2, min_words: 3 })));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn features_once_on_generated_texts(texts in proptest::collection::vec(proptest::collection::vec("[a-dé]{1,3}|[0-9]{1,2}|回家|the|\\.|, ", 0..40), 1..5)) {
        check(&texts.iter().map(|w| w.join(" ")).collect::<Vec<_>>());
    }

    #[test]
    fn one_scan_on_texts_of_every_kind_of_chunk(texts in proptest::collection::vec(proptest::collection::vec("[a-cA-C0-2_:.,;'!]{1,4}|[àÀßΣσςжЁ中文回ｶﬁ½Ⅻ\u{301}\u{64B}]{1,3}|dön't|1.95.0", 0..30), 1..4), seps in proptest::collection::vec("[ \t\n\u{b}\u{a0}\u{3000}]", 1..4)) {
        let texts: Vec<String> = texts.iter().enumerate().map(|(i, w)| w.join(&seps[i % seps.len()])).collect();
        check(&texts);
    }
}
