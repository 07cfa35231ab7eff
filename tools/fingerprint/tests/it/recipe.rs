//! The fingerprint recipe end to end: golden values (computed by the independent Python
//! transcription `format-spec/fingerprint_ref.py`), the seeds' worked examples, input edge
//! cases, HTML extraction, IDF tables and streaming.

use proptest::prelude::*;
use simdex_fingerprint::{decode_utf8, fingerprint_text_reader, Error, FeatureKind, FingerprintOptions, Fingerprinter, IdfBuilder, IdfTable, InvalidUtf8, Language, TfMode};
use std::sync::Arc;

const EN: &str = "Near-duplicate web documents are abundant. Two such documents differ from each other in \
    a very small portion that displays advertisements, for example. Such differences are \
    irrelevant for web search. So the quality of a web crawler increases if it can assess \
    whether a newly crawled web page is a near-duplicate of a previously crawled web page or not.";
const RU: &str = "Почти одинаковые веб страницы встречаются очень часто и отличаются друг от друга лишь \
    небольшой частью например рекламой Такие различия не важны для поиска";
const ZH_A: &str = "你妈妈喊你回家吃饭哦,回家罗回家罗";
const ZH_B: &str = "你妈妈叫你回家吃饭啦,回家罗回家罗";
const CORPUS: [&str; 6] =
    [EN, RU, ZH_A, "the cat sat on the mat", "we all scream for ice cream", "Near-duplicate web documents are abundant, and web search engines crawl the web daily."];

fn opts(features: &[FeatureKind], tf: TfMode, stop: &[Language]) -> FingerprintOptions {
    FingerprintOptions::default().with_features(features.to_vec()).with_tf(tf).with_stop_words(stop.to_vec()).with_min_words(1)
}

fn fp(o: FingerprintOptions, text: &str) -> u64 {
    Fingerprinter::new(o).unwrap().fingerprint(text).unwrap().value
}

fn distance(o: &FingerprintOptions, a: &str, b: &str) -> u32 {
    (fp(o.clone(), a) ^ fp(o.clone(), b)).count_ones()
}

#[test]
fn golden_fingerprints() {
    use FeatureKind::*;
    // `python3 format-spec/fingerprint_ref.py` prints these; a change here is a new recipe version
    assert_eq!(fp(FingerprintOptions::default(), EN), 0x47cf_ebc7_f2e5_c23a);
    let short = FingerprintOptions::short_text().with_min_words(1);
    assert_eq!(fp(short, "the cat sat on the mat"), 0xca25_2def_88a4_14b4);
    assert_eq!(fp(opts(&[WordShingles(3)], TfMode::Log, &[]), RU), 0xacde_760b_c02d_3d28);
    assert_eq!(fp(opts(&[CharNgrams(4)], TfMode::Raw, &[]), ZH_A), 0x293e_50e1_6cf0_511a);
    assert_eq!(fp(opts(&[Words, WordShingles(2)], TfMode::Raw, &[Language::English]), EN), 0xc68a_cfc9_5b27_c618);

    let mut f = Fingerprinter::new(FingerprintOptions::default()).unwrap();
    let mut b = IdfBuilder::new(f.options().feature_recipe());
    for t in CORPUS {
        b.add_document(&f.distinct_features(t));
    }
    let mut f = f.with_idf(Arc::new(b.build(1))).unwrap();
    assert_eq!(f.fingerprint(EN).unwrap().value, 0x47c7_ebc7_f0e5_c23a);
}

#[test]
fn default_recipe_descriptor() {
    let f = Fingerprinter::new(FingerprintOptions::default()).unwrap();
    assert_eq!(f.recipe(), "simdex-fp/2 features=w2 cjk=chars stop=- stem=- digits=keep tf=binary idf=-");
}

/// Near: Hamming distance <= 3; far: >= 12 (random pairs average 32).
const NEAR: u32 = 3;
const FAR: u32 = 12;

#[test]
fn seed_examples_with_the_short_text_recipe() {
    let o = FingerprintOptions::short_text().with_min_words(1);
    assert!(distance(&o, "the cat sat on the mat", "the cat sat on a mat") <= NEAR);
    assert!(distance(&o, "the cat sat on the mat", "we all scream for ice cream") >= FAR);
    assert!(distance(&o, "the cat sat on a mat", "we all scream for ice cream") >= FAR);
    assert!(distance(&o, ZH_A, ZH_B) <= NEAR);
    assert!(distance(&o, ZH_A, "the cat sat on the mat") >= FAR);
}

#[test]
fn seed_chinese_with_jieba() {
    let o = FingerprintOptions::short_text().with_min_words(1).with_cjk(simdex_fingerprint::CjkSegmenter::Jieba);
    assert!(distance(&o, ZH_A, ZH_B) <= NEAR);
}

const AR: &str = "يعتبر اكتشاف الصفحات المتشابهة تقريبا مشكلة مهمة في زحف الويب، لأن الصفحات المكررة تهدر \
    عرض النطاق وتضخم الفهرس وتزعج المستخدمين الذين يبحثون عن معلومات جديدة. تختلف هذه الصفحات عن \
    بعضها في أجزاء صغيرة جدا مثل الإعلانات أو التاريخ أو عداد الزوار، وهذه الفروق لا تهم محرك البحث. \
    نقترح استخدام بصمات سيمهاش بطول أربعة وستين بتا لكل صفحة، ونبين بالتجربة على ثمانية مليارات صفحة \
    أن الصفحات التي تختلف بصماتها في ثلاثة بتات على الأكثر هي صفحات متشابهة تقريبا. ثم ندرس مسألة \
    إيجاد كل البصمات التي تختلف عن بصمة معطاة في عدد قليل من البتات، ونقدم حلا عمليا يعتمد على جداول \
    مرتبة ومضغوطة يمكن البحث فيها بسرعة كبيرة سواء لاستعلام واحد أو لدفعة كبيرة من الاستعلامات. \
    يبدأ الزاحف كل يوم بقائمة طويلة من العناوين، فيحمل الصفحات واحدة بعد أخرى ويستخرج منها النص \
    الظاهر للقارئ بعد حذف القوائم والتذييلات والنصوص البرمجية. ثم يحسب لكل نص بصمة قصيرة ويسأل \
    الفهرس هل رأى صفحة قريبة منها من قبل. فإذا كان الجواب نعم ترك الصفحة أو ربطها بالنسخة القديمة، \
    وإذا كان الجواب لا أضافها إلى الفهرس وتابع العمل. وتحتاج هذه الخطوة إلى أن تكون سريعة جدا، \
    لأن الزاحف يرى ملايين الصفحات في الساعة الواحدة ولا يستطيع الانتظار طويلا عند كل صفحة. \
    ولهذا يحفظ الفهرس البصمات في جداول مرتبة على القرص، ويقسم كل بصمة إلى أجزاء صغيرة يبحث بها \
    في الجداول، فلا يقرأ إلا عددا قليلا من الكتل عند كل سؤال.";

/// Every copy of `text` with one word replaced.
fn one_word_edits(text: &str) -> Vec<String> {
    let words: Vec<&str> = text.split(' ').filter(|w| !w.is_empty()).collect();
    (0..words.len())
        .map(|i| {
            let mut w = words.clone();
            w[i] = "تعديل";
            w.join(" ")
        })
        .collect()
}

#[test]
fn seed_arabic_paragraph_and_light_edit_are_near() {
    // a light edit: one word replaced, anywhere. Simhash distances of single edits vary with the
    // position (a bit whose sum is near zero flips easily), so the median is what is pinned,
    // and no edit may look like an unrelated text.
    for o in [FingerprintOptions::default(), FingerprintOptions::short_text()] {
        let recipe = Fingerprinter::new(o.clone()).unwrap().recipe();
        let mut d: Vec<u32> = one_word_edits(AR).iter().map(|e| distance(&o, AR, e)).collect();
        d.sort_unstable();
        assert!(d[d.len() / 2] <= NEAR, "{recipe}: median {}", d[d.len() / 2]);
        assert!(d[d.len() - 1] < FAR, "{recipe}: max {}", d[d.len() - 1]);
        assert!(distance(&o, AR, EN) >= FAR);
    }
}

#[test]
fn short_texts_are_flagged() {
    let mut f = Fingerprinter::new(FingerprintOptions::default()).unwrap();
    let short = f.fingerprint("the cat sat on the mat").unwrap();
    assert!(short.short && short.words == 6);
    assert!(!f.fingerprint(AR).unwrap().short);
}

#[test]
fn empty_and_nearly_empty_documents_are_refused() {
    let mut f = Fingerprinter::new(FingerprintOptions::default()).unwrap();
    for text in ["", "   \n\t ", "!!! ... ---", "two words"] {
        match f.fingerprint(text) {
            Err(Error::EmptyDocument { min_words: 3, .. }) => {}
            other => panic!("{text:?}: {other:?}"),
        }
    }
    // with stop words on, a text of stop words only is empty too
    let mut f = Fingerprinter::new(FingerprintOptions::short_text()).unwrap();
    assert!(matches!(f.fingerprint("the of and a to in"), Err(Error::EmptyDocument { words: 0, .. })));
}

#[test]
fn invalid_utf8_is_replaced_and_counted_or_refused() {
    let bytes = b"valid words then \xff\xfe bad bytes and \xe2\x82 a cut sequence at the end \xe2";
    let mut f = Fingerprinter::new(FingerprintOptions::default()).unwrap();
    let lenient = fingerprint_text_reader(&mut f, &bytes[..], InvalidUtf8::Replace).unwrap();
    assert_eq!(lenient.replaced_utf8, 4);
    let lossy = String::from_utf8_lossy(bytes);
    assert_eq!(lenient.fingerprint, f.fingerprint(&lossy).unwrap());
    match fingerprint_text_reader(&mut f, &bytes[..], InvalidUtf8::Refuse) {
        Err(Error::InvalidUtf8 { offset: 17 }) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(decode_utf8(bytes, InvalidUtf8::Replace).unwrap().1, 4);
}

#[test]
fn case_width_and_spacing_do_not_matter() {
    let o = FingerprintOptions::default();
    let shouty = EN.to_uppercase().replace(' ', "  \n ");
    assert_eq!(distance(&o, EN, &shouty), 0);
    assert_eq!(distance(&o, "Ｗｉｄｅ ｌｅｔｔｅｒｓ ａｒｅ ｆｏｌｄｅｄ", "wide letters are folded"), 0);
}

#[test]
fn idf_tables_roundtrip_and_must_match_the_recipe() {
    let mut f = Fingerprinter::new(FingerprintOptions::default()).unwrap();
    let mut b = IdfBuilder::new(f.options().feature_recipe());
    for t in CORPUS {
        b.add_document(&f.distinct_features(t));
    }
    let table = b.build(1);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idf.simdex");
    table.save(&path).unwrap();
    let loaded = IdfTable::load(&path).unwrap();
    assert_eq!(loaded, table);
    let other = Fingerprinter::new(FingerprintOptions::short_text()).unwrap();
    assert!(matches!(other.with_idf(Arc::new(loaded)), Err(Error::IdfRecipeMismatch { .. })));
    std::fs::write(&path, b"not a table").unwrap();
    assert!(matches!(IdfTable::load(&path), Err(Error::IdfBadMagic)));
}

#[test]
fn missing_cargo_features_and_bad_options_are_errors() {
    let no_features = FingerprintOptions::default().with_features(vec![]);
    assert!(matches!(Fingerprinter::new(no_features), Err(Error::InvalidOptions(_))));
    let two_char_sizes = FingerprintOptions::default().with_features(vec![FeatureKind::CharNgrams(3), FeatureKind::CharNgrams(5)]);
    assert!(matches!(Fingerprinter::new(two_char_sizes), Err(Error::InvalidOptions(_))));
    let zh_stem = FingerprintOptions::default().with_stemming(Some(Language::Chinese));
    assert!(Fingerprinter::new(zh_stem).is_err());
}

mod html {
    use super::*;
    use simdex_fingerprint::{fingerprint_html_reader, visible_text};

    const PAGE: &str = r#"<!DOCTYPE html><html><head><title>Page title</title>
        <style>body { color: red }</style><script>var x = "<p>script text</p>";</script></head>
        <body><header>Site header</header><nav><a href="/">Home</a> <a href="/b">Blog</a></nav>
        <!-- a comment that is not text -->
        <main><h1>Fish &amp; chips</h1><p>Caf&eacute; r&#233;sum&#xE9; na&iuml;ve &lt;tag&gt; text.</p>
        <p>Second paragraph<br>after a break.</p></main>
        <footer>Site footer &copy; 2024</footer></body></html>"#;

    #[test]
    fn visible_text_only_with_entities_decoded() {
        let words: Vec<String> = visible_text(PAGE).split_whitespace().map(str::to_owned).collect();
        assert_eq!(words, ["Fish", "&", "chips", "Café", "résumé", "naïve", "<tag>", "text.", "Second", "paragraph", "after", "a", "break."]);
    }

    #[test]
    fn html_fingerprint_equals_fingerprint_of_its_visible_text() {
        let mut f = Fingerprinter::new(FingerprintOptions::default()).unwrap();
        let from_html = fingerprint_html_reader(&mut f, PAGE.as_bytes(), InvalidUtf8::Refuse).unwrap().fingerprint;
        let text = "Fish & chips Café résumé naïve <tag> text. Second paragraph after a break.";
        assert_eq!(from_html, f.fingerprint(text).unwrap());
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

        /// Any bytes: a fingerprint or a typed error, never a panic; lenient mode always reads.
        #[test]
        fn arbitrary_html_bytes_never_panic(
            bytes in proptest::collection::vec(
                prop_oneof![Just(b'<'), Just(b'>'), Just(b'/'), Just(b'&'), Just(b' '), any::<u8>()], 0..300),
            tags in proptest::collection::vec("</?(nav|p|script|style|footer|div role=navigation|br)>", 0..6),
        ) {
            let mut doc = bytes.clone();
            for t in &tags {
                doc.extend_from_slice(t.as_bytes());
                doc.extend_from_slice(b" word ");
            }
            let mut f = Fingerprinter::new(FingerprintOptions::default()).unwrap();
            // A NUL byte near the start makes it a binary document, refused by name (where);
            // any other bytes are read.
            let nul = doc.iter().take(8_000).position(|&b| b == 0);
            match (fingerprint_html_reader(&mut f, &doc[..], InvalidUtf8::Replace), nul) {
                (Ok(_) | Err(Error::EmptyDocument { .. }), None) => {}
                (Err(Error::BinaryDocument { offset }), Some(at)) => prop_assert_eq!(offset, at as u64),
                (r, _) => prop_assert!(false, "lenient read: {:?} (first NUL at {:?})", r.map(|o| o.fingerprint), nul),
            }
            let _ = fingerprint_html_reader(&mut f, &doc[..], InvalidUtf8::Refuse);
        }
    }

    #[test]
    fn strict_html_refuses_invalid_utf8() {
        let mut f = Fingerprinter::new(FingerprintOptions::default()).unwrap();
        let bad = b"<p>some words here \xff and more words</p>";
        assert!(matches!(fingerprint_html_reader(&mut f, &bad[..], InvalidUtf8::Refuse), Err(Error::InvalidUtf8 { offset: 19 })));
        let ok = fingerprint_html_reader(&mut f, &bad[..], InvalidUtf8::Replace).unwrap();
        assert_eq!(ok.replaced_utf8, 1);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Streaming in arbitrary pieces gives the one-shot fingerprint.
    #[test]
    fn streaming_matches_one_shot(
        words in proptest::collection::vec("[a-zé]{1,8}|[0-9]{1,3}|回家|\\.|, ", 3..60),
        cuts in proptest::collection::vec(0usize..400, 0..8),
    ) {
        let text = words.join(" ");
        let mut f = Fingerprinter::new(FingerprintOptions::default().with_min_words(1)).unwrap();
        let whole = f.fingerprint(&text);
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(text.len())).filter(|&c| text.is_char_boundary(c)).collect();
        cuts.sort_unstable();
        let mut s = f.session();
        let mut last = 0;
        for c in cuts {
            s.push(&text[last..c]);
            last = c;
        }
        s.push(&text[last..]);
        prop_assert_eq!(format!("{:?}", s.finish()), format!("{:?}", whole));
    }
}

/// Every page of `fixtures/corpus` and a set of generated texts full of tokenizer edge cases,
/// fingerprinted with several recipes, against `fixtures/corpus/fingerprints-recipe1.tsv`
/// (written by recipe version 1 before the fast paths existed; the HTML pages need the `html`
/// feature) and, for recipe version 2, `fingerprints-recipe2.tsv`: the lines where version 2
/// differs from version 1 (its HTML text: the pages with a head `noscript`), every other line
/// being version 1's. Pins the whole pipeline on more text than the hand-picked golden values:
/// any fast path that disagrees with the definition on any of these documents fails here.
///
/// A file is only ever written for a new recipe version:
/// `SIMDEX_REGENERATE_FIXTURES=2 cargo test --test it corpus_fingerprints` (the version's).
#[test]
fn corpus_fingerprints_are_pinned() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/corpus");
    let v1 = corpus_fingerprints(1);
    let v2 = corpus_fingerprints(2);
    let regenerate = std::env::var("SIMDEX_REGENERATE_FIXTURES").ok();
    let diff: String = v2.lines().zip(v1.lines()).filter(|(a, b)| a != b).map(|(a, _)| format!("{a}\n")).collect();
    for (version, written) in [("1", &v1), ("2", &diff)] {
        if regenerate.as_deref() == Some(version) {
            std::fs::write(dir.join(format!("fingerprints-recipe{version}.tsv")), written).unwrap();
        }
    }
    let read = |version: u32| -> Vec<(String, String)> {
        let text = std::fs::read_to_string(dir.join(format!("fingerprints-recipe{version}.tsv"))).unwrap();
        text.lines().map(|l| l.rsplit_once('\t').map(|(k, v)| (k.to_owned(), v.to_owned())).unwrap()).collect()
    };
    let recipe1: std::collections::HashMap<String, String> = read(1).into_iter().collect();
    let changed = read(2);
    let mut recipe2 = recipe1.clone();
    for (key, value) in &changed {
        // only lines that differ from version 1's
        assert_ne!(recipe1.get(key), Some(value), "{key}");
        assert!(recipe2.insert(key.clone(), value.clone()).is_some(), "{key}");
    }
    // the pages with a head `noscript` (85), for every recipe of the list
    assert!(changed.len() >= 85 && changed.iter().all(|(k, _)| k.contains(".html\t")), "{}", changed.len());
    for (actual, expected) in [(&v1, &recipe1), (&v2, &recipe2)] {
        for line in actual.lines() {
            let (key, value) = line.rsplit_once('\t').unwrap();
            assert_eq!(expected.get(key).map(String::as_str), Some(value), "{key}");
        }
        assert_eq!(expected.len(), actual.lines().count());
    }
}

/// The lines of the pinned fingerprints of recipe version `version` (`id<TAB>recipe<TAB>fingerprint`).
fn corpus_fingerprints(version: u32) -> String {
    use FeatureKind::*;
    let opts = |features: &[FeatureKind], tf: TfMode, stop: &[Language]| opts(features, tf, stop).with_version(version);
    let base = FingerprintOptions::default().with_min_words(1).with_version(version);
    let recipes = [
        ("default", base.clone()),
        ("w+tf", opts(&[Words], TfMode::Raw, &[])),
        ("short-text", FingerprintOptions::short_text().with_min_words(1).with_version(version)),
        ("w3+logtf", opts(&[WordShingles(3)], TfMode::Log, &[])),
        ("c4+tf", opts(&[CharNgrams(4)], TfMode::Raw, &[])),
        ("w+w2+tf+stop", opts(&[Words, WordShingles(2)], TfMode::Raw, &[Language::English, Language::Russian])),
        ("w2+binary+fold", base.clone().with_fold_digits(true)),
    ];
    let mut fingerprinters: Vec<(&str, Fingerprinter)> = recipes.into_iter().map(|(name, o)| (name, Fingerprinter::new(o).unwrap())).collect();
    let mut actual = String::new();
    for (id, text) in pinned_documents(version) {
        for (name, f) in &mut fingerprinters {
            let value = f.fingerprint(&text).map_or("empty".to_owned(), |x| format!("{:016x}", x.value));
            actual.push_str(&format!("{id}\t{name}\t{value}\n"));
        }
    }
    actual
}

/// `(id, text)`: the visible text of every HTML page of `fixtures/corpus/pages` as recipe
/// `version` takes it (the text of the `.txt` pages), then 64 generated texts.
fn pinned_documents(version: u32) -> Vec<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/corpus/pages");
    let mut names: Vec<String> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    let mut docs = Vec::new();
    for name in names {
        let raw = std::fs::read_to_string(dir.join(&name)).unwrap();
        if name.ends_with(".html") {
            docs.push((name, simdex_fingerprint::visible_text_as(version, &raw)));
        } else {
            docs.push((name, raw));
        }
    }
    // pieces that exercise every branch of the tokenizer: ASCII words of every length around
    // the 8-byte hash blocks, UAX #29 punctuation rules, case mappings that change length,
    // compatibility characters, combining marks, scripts with and without fast paths
    const PIECES: &[&str] = &[
        "the",
        "Cat",
        "SAT",
        "on",
        "a",
        "mat",
        "internationalization",
        "x",
        "abcdefgh",
        "abcdefghi",
        "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
        "can't",
        "e.g.",
        "3.14",
        "1,000",
        "foo_bar",
        "std::vec",
        "a:b",
        "_x_",
        "'q'",
        "1.2.3",
        "a.b.c",
        "x;y",
        "9,a",
        "a'b'",
        "..",
        "::",
        "café",
        "CAFÉ",
        "Straße",
        "ΣΊΣΥΦΟΣ",
        "σς",
        "Привет",
        "МИР",
        "ёЁ",
        "مرحبا",
        "بِسْمِ",
        "回家",
        "吃饭哦",
        "、",
        "。",
        "（测试）",
        "ＡＢＣ１２",
        "ﬁne",
        "e\u{301}",
        "a\u{a0}b",
        "\u{200b}",
        "🦀",
        "👍🏽",
        "ǅ",
        "ᾈ",
        "İstanbul",
        "\u{feff}",
        "\t",
        "\n",
        "\r\n",
        "\u{c}",
        "\u{b}",
        "\u{85}",
        "—",
        "«",
        "»",
        "؟",
        "،",
        "٫",
        "٣٤",
        "한국어",
        "日本語",
        "カタカナ",
        "ｶﾀｶﾅ",
        "ℌ",
        "Ⅻ",
        "①",
        "½",
        "x²",
        "ǈ",
        "Ǳ",
        "ß",
        "ŉ",
        "ΐ",
        "ﬀ",
        "\u{0}",
        "<",
        "&amp;",
        "a-b",
        "--",
        "http://example.com/a?b=c",
        "user@example.com",
        "$100",
        "#tag",
        "@me",
        "C++",
        "f32",
        "_mm256_add_epi32",
        "\u{300}",
        "a\u{300}b",
        "Ⓐ",
        "𝐀𝐁",
        "ꙮ",
        "\u{2028}",
        "  ",
        " ",
    ];
    let mut state = 12345u64;
    let mut next = || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        simdex_fingerprint::hash::fmix64(state)
    };
    for i in 0..64 {
        let len = (next() % 400) as usize + 1;
        let mut text = String::new();
        for _ in 0..len {
            let r = next();
            text.push_str(PIECES[(r % PIECES.len() as u64) as usize]);
            match (r >> 20) % 8 {
                0 => {}
                1 => text.push('\n'),
                _ => text.push(' '),
            }
        }
        docs.push((format!("generated-{i}"), text));
    }
    docs
}

/// A session dropped before `finish` leaves nothing behind in the fingerprinter.
#[test]
fn abandoned_session_does_not_leak_into_the_next() {
    let mut f = Fingerprinter::new(FingerprintOptions::default()).unwrap();
    let expected = f.fingerprint(EN).unwrap();
    let mut s = f.session();
    s.push(RU);
    s.push(" more words ");
    drop(s);
    assert_eq!(f.fingerprint(EN).unwrap(), expected);
}
