//! `FingerprintOptions::from_names`: the names every front (CLI flags, Python keywords) gives,
//! against options built field by field.

use simdex_fingerprint::{CjkSegmenter, Error, FeatureKind, FingerprintOptions, Language, OptionNames, TfMode};

fn names() -> OptionNames {
    OptionNames::default()
}

#[test]
fn presets_and_overrides_give_the_options_built_by_hand() {
    assert_eq!(FingerprintOptions::from_names(&names()).unwrap(), FingerprintOptions::default());
    for p in ["short_text", "short-text"] {
        assert_eq!(FingerprintOptions::from_names(&OptionNames { preset: Some(p.into()), ..names() }).unwrap(), FingerprintOptions::short_text());
    }
    let given = OptionNames {
        preset: Some("pages".into()),
        features: Some(vec!["w".into(), "c3".into()]),
        tf: Some("logtf".into()),
        stop_words: Some(vec!["en".into(), "de".into()]),
        stem: Some("en".into()),
        cjk: Some("chars".into()),
        fold_digits: Some(true),
        min_words: Some(7),
    };
    let want = FingerprintOptions::default()
        .with_features(vec![FeatureKind::parse("w").unwrap(), FeatureKind::parse("c3").unwrap()])
        .with_tf(TfMode::parse("logtf").unwrap())
        .with_stop_words(vec![Language::from_code("en").unwrap(), Language::from_code("de").unwrap()])
        .with_stemming(Language::from_code("en"))
        .with_cjk(CjkSegmenter::Chars)
        .with_fold_digits(true)
        .with_min_words(7);
    assert_eq!(FingerprintOptions::from_names(&given).unwrap(), want);
    let all = FingerprintOptions::from_names(&OptionNames { stop_words: Some(vec!["all".into()]), ..names() }).unwrap();
    assert_eq!(all.stop_words, Language::ALL.to_vec());
    let none = FingerprintOptions::from_names(&OptionNames { stop_words: Some(vec!["none".into()]), ..names() }).unwrap();
    assert!(none.stop_words.is_empty());
}

#[test]
fn every_unknown_name_is_refused_by_name() {
    let cases = [
        (OptionNames { preset: Some("poems".into()), ..names() }, "preset `poems`"),
        (OptionNames { features: Some(vec!["x9".into()]), ..names() }, "feature kind `x9`"),
        (OptionNames { tf: Some("idf".into()), ..names() }, "tf mode `idf`"),
        (OptionNames { stop_words: Some(vec!["xx".into()]), ..names() }, "language `xx`"),
        (OptionNames { stem: Some("qq".into()), ..names() }, "language `qq`"),
        (OptionNames { cjk: Some("words".into()), ..names() }, "cjk segmenter `words`"),
    ];
    for (given, named) in cases {
        let e = FingerprintOptions::from_names(&given).unwrap_err();
        assert!(matches!(e, Error::InvalidOptions(_)) && e.to_string().contains(named), "{e}");
    }
}
