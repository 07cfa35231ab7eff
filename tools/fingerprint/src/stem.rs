//! Optional stemming: Snowball stemmers (cargo feature `stem`), applied to every word after
//! stop words are dropped. The stemmer's output is part of the recipe, so the crate pins
//! `rust-stemmers`.

use super::stopwords::Language;
use super::Error;

/// A Snowball stemmer for one language.
pub struct Stemmer {
    #[cfg(feature = "stem")]
    inner: rust_stemmers::Stemmer,
}

impl std::fmt::Debug for Stemmer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Stemmer")
    }
}

impl Stemmer {
    /// The stemmer of `lang`; fails without the `stem` feature or for a language without one.
    pub fn new(lang: Language) -> Result<Self, Error> {
        #[cfg(feature = "stem")]
        {
            use rust_stemmers::Algorithm;
            let algorithm = match lang {
                Language::English => Algorithm::English,
                Language::Russian => Algorithm::Russian,
                Language::Arabic => Algorithm::Arabic,
                Language::German => Algorithm::German,
                Language::French => Algorithm::French,
                Language::Spanish => Algorithm::Spanish,
                Language::Chinese => return Err(Error::NoStemmer { language: lang.code() }),
            };
            Ok(Stemmer { inner: rust_stemmers::Stemmer::create(algorithm) })
        }
        #[cfg(not(feature = "stem"))]
        {
            let _ = lang;
            Err(Error::FeatureNotCompiled { feature: "stem" })
        }
    }

    /// The stem of `word`.
    pub fn stem<'a>(&self, word: &'a str) -> std::borrow::Cow<'a, str> {
        #[cfg(feature = "stem")]
        return self.inner.stem(word);
        #[cfg(not(feature = "stem"))]
        std::borrow::Cow::Borrowed(word)
    }
}
