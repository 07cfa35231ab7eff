//! What a fingerprint is made from ([`FingerprintOptions`]) and the version of the recipe.

use crate::error::Error;
use crate::features::FeatureKind;
use crate::stopwords::Language;
use crate::tokenize::CjkSegmenter;
use crate::weights::TfMode;

/// Version of the fingerprint recipe new recipes are made with; part of every recipe
/// descriptor. Versions differ in how text is taken from HTML (`format-spec/fingerprint.md`,
/// "1. Text"); an index keeps the version it pinned.
pub const RECIPE_VERSION: u32 = 2;

/// The fingerprint recipe versions this build makes fingerprints of.
pub const RECIPE_VERSIONS: std::ops::RangeInclusive<u32> = 1..=2;

/// What a fingerprint is made from. `Default` is the recipe the crate recommends; see
/// `benches/QUALITY.md` for the measurements behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FingerprintOptions {
    /// Feature kinds, all added to one simhash.
    pub features: Vec<FeatureKind>,
    /// How Han ideographs become words.
    pub cjk: CjkSegmenter,
    /// Languages whose stop words are dropped (empty: stop words kept).
    pub stop_words: Vec<Language>,
    /// Stem words with this language's Snowball stemmer (cargo feature `stem`).
    pub stemming: Option<Language>,
    /// Replace every ASCII digit of a word by `0` before hashing, so that version numbers,
    /// line numbers and dates do not separate otherwise equal pages.
    pub fold_digits: bool,
    /// How occurrences become weights (multiplied by the IDF weight when a table is set).
    pub tf: TfMode,
    /// Documents with fewer words (after stop words) are refused as empty.
    pub min_words: u64,
    /// Documents with fewer words get a fingerprint and a "short" warning.
    pub short_words: u64,
    /// The recipe version ([`RECIPE_VERSIONS`]): new options have [`RECIPE_VERSION`], a
    /// pinned recipe keeps its own.
    pub version: u32,
}

simdex::__with_fields!(FingerprintOptions { features: Vec<FeatureKind> => with_features, cjk: CjkSegmenter => with_cjk, stop_words: Vec<Language> => with_stop_words, stemming: Option<Language> => with_stemming, fold_digits: bool => with_fold_digits, tf: TfMode => with_tf, min_words: u64 => with_min_words, short_words: u64 => with_short_words, version: u32 => with_version });

impl Default for FingerprintOptions {
    fn default() -> Self {
        FingerprintOptions {
            features: vec![FeatureKind::WordShingles(2)],
            cjk: CjkSegmenter::Chars,
            stop_words: Vec::new(),
            stemming: None,
            fold_digits: false,
            tf: TfMode::Binary,
            min_words: 3,
            short_words: 50,
            version: RECIPE_VERSION,
        }
    }
}

impl FingerprintOptions {
    /// A recipe for sentences and snippets (the seeds' worked examples): words with term
    /// frequency and the stop words of every language, so that a changed article or particle
    /// does not weigh as much as a changed noun. Weak on pages that share a template.
    pub fn short_text() -> Self {
        FingerprintOptions { features: vec![FeatureKind::Words], stop_words: Language::ALL.to_vec(), tf: TfMode::Raw, fold_digits: false, ..FingerprintOptions::default() }
    }

    /// Descriptor of the feature part of the recipe (what an IDF table must match), e.g.
    /// `simdex-fp/2 features=w3 cjk=chars stop=- stem=- digits=fold`.
    pub fn feature_recipe(&self) -> String {
        let features: Vec<String> = self.features.iter().map(|k| k.name()).collect();
        let stop: Vec<&str> = self.stop_words.iter().map(|l| l.code()).collect();
        format!(
            "simdex-fp/{} features={} cjk={} stop={} stem={} digits={}",
            self.version,
            features.join(","),
            self.cjk.name(),
            if stop.is_empty() { "-".to_owned() } else { stop.join(",") },
            self.stemming.map_or("-", Language::code),
            if self.fold_digits { "fold" } else { "keep" },
        )
    }

    pub(crate) fn validate(&self) -> Result<(), Error> {
        if !RECIPE_VERSIONS.contains(&self.version) {
            return Err(Error::InvalidOptions(format!("fingerprint recipe version {} (known: {RECIPE_VERSIONS:?})", self.version)));
        }
        if self.features.is_empty() {
            return Err(Error::InvalidOptions("no feature kind".into()));
        }
        let char_kinds = self.features.iter().filter(|k| matches!(k, FeatureKind::CharNgrams(_))).count();
        if char_kinds > 1 {
            return Err(Error::InvalidOptions("at most one character n-gram size".into()));
        }
        for k in &self.features {
            if FeatureKind::parse(&k.name()) != Some(*k) {
                return Err(Error::InvalidOptions(format!("unsupported feature {k:?}")));
            }
        }
        Ok(())
    }
}

/// Fingerprint options named the way people give them (the CLI's flags, Python's keyword
/// arguments): a preset, then overrides, each `None` when not given. The one place those
/// names are parsed, so every front accepts the same words and refuses the same mistakes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OptionNames {
    /// `pages` (the default: [`FingerprintOptions::default`]) or `short_text`
    /// (`short-text` too: [`FingerprintOptions::short_text`]).
    pub preset: Option<String>,
    /// Feature kinds: `w` (words), `wN` (word N-shingles), `cN` (character N-grams).
    pub features: Option<Vec<String>>,
    /// Term weights: `tf`, `logtf` or `binary`.
    pub tf: Option<String>,
    /// Stop words to drop: language codes, or one `all` or `none`.
    pub stop_words: Option<Vec<String>>,
    /// Stem words with this language's Snowball stemmer (a language code).
    pub stem: Option<String>,
    /// How Han ideographs become words: `chars` or `jieba`.
    pub cjk: Option<String>,
    /// Replace digits by 0 before hashing.
    pub fold_digits: Option<bool>,
    /// Documents with fewer words are refused as empty.
    pub min_words: Option<u64>,
}

impl FingerprintOptions {
    /// The options `names` describe; [`Error::InvalidOptions`] names the first unknown word
    /// and what is known.
    pub fn from_names(names: &OptionNames) -> Result<Self, Error> {
        let invalid = |what: &str, given: &str, known: &str| Error::InvalidOptions(format!("unknown {what} `{given}` ({known})"));
        let mut o = match names.preset.as_deref() {
            None | Some("pages") => FingerprintOptions::default(),
            Some("short_text" | "short-text") => FingerprintOptions::short_text(),
            Some(p) => return Err(invalid("preset", p, "pages, short_text")),
        };
        if let Some(kinds) = &names.features {
            o.features = kinds.iter().map(|k| FeatureKind::parse(k).ok_or_else(|| invalid("feature kind", k, "w, w2..w16, c1..c16"))).collect::<Result<_, _>>()?;
        }
        if let Some(tf) = &names.tf {
            o.tf = TfMode::parse(tf).ok_or_else(|| invalid("tf mode", tf, "tf, logtf, binary"))?;
        }
        let language = |code: &str| {
            Language::from_code(code).ok_or_else(|| {
                let known: Vec<&str> = Language::ALL.iter().map(|l| l.code()).collect();
                invalid("language", code, &format!("known: {}", known.join(", ")))
            })
        };
        if let Some(stop) = &names.stop_words {
            o.stop_words = match stop.as_slice() {
                [one] if one == "all" => Language::ALL.to_vec(),
                [one] if one == "none" => Vec::new(),
                codes => codes.iter().map(|c| language(c)).collect::<Result<_, _>>()?,
            };
        }
        if let Some(stem) = &names.stem {
            o.stemming = Some(language(stem)?);
        }
        if let Some(cjk) = &names.cjk {
            o.cjk = CjkSegmenter::parse(cjk).ok_or_else(|| invalid("cjk segmenter", cjk, "chars, jieba"))?;
        }
        if let Some(f) = names.fold_digits {
            o.fold_digits = f;
        }
        if let Some(m) = names.min_words {
            o.min_words = m;
        }
        Ok(o)
    }
}
