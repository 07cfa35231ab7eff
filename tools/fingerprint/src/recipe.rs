//! A whole fingerprint recipe as one value: the options and the frozen IDF table, if any.
//! Two fingerprints are comparable only when made with equal recipes, so an index that stores
//! document fingerprints keeps its recipe (the `RECIPE` file, `format-spec/recipe.md`) and
//! fingerprints every document with it.
//!
//! The options travel as text, one `key=value` per line ([`Recipe::options_text`]), so that
//! the file stays readable and a new option is a new key, not a new layout.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::sync::Arc;

use super::{CjkSegmenter, Error, FeatureKind, FingerprintOptions, Fingerprinter, IdfTable, Language, TfMode};

/// Fingerprint options plus the IDF table they weight by: everything a fingerprint depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recipe {
    options: FingerprintOptions,
    idf: Option<Arc<IdfTable>>,
}

impl Recipe {
    /// A recipe; the table, when given, must have been learned with `options`' features.
    pub fn new(options: FingerprintOptions, idf: Option<Arc<IdfTable>>) -> Result<Self, Error> {
        let recipe = Recipe { options, idf };
        recipe.fingerprinter()?;
        Ok(recipe)
    }

    /// The recipe of a fingerprinter.
    pub fn of(fp: &Fingerprinter) -> Self {
        Recipe { options: fp.options().clone(), idf: fp.idf_table() }
    }

    /// The options.
    pub fn options(&self) -> &FingerprintOptions {
        &self.options
    }

    /// The IDF table, if the recipe weights by one.
    pub fn idf(&self) -> Option<&Arc<IdfTable>> {
        self.idf.as_ref()
    }

    /// A fingerprinter for this recipe.
    pub fn fingerprinter(&self) -> Result<Fingerprinter, Error> {
        let fp = Fingerprinter::new(self.options.clone())?;
        match &self.idf {
            Some(t) => fp.with_idf(t.clone()),
            None => Ok(fp),
        }
    }

    /// One line naming the whole recipe: [`Fingerprinter::recipe`]'s descriptor (features,
    /// weighting, the IDF table's checksum) and the word thresholds, e.g.
    /// `simdex-fp/2 features=w2 cjk=chars stop=- stem=- digits=keep tf=binary idf=- min_words=3 short_words=50`.
    pub fn descriptor(&self) -> String {
        let o = &self.options;
        let idf = self.idf.as_ref().map_or("-".to_owned(), |t| format!("{:08x}", t.id()));
        format!("{} tf={} idf={idf} min_words={} short_words={}", o.feature_recipe(), o.tf.name(), o.min_words, o.short_words)
    }

    /// The options as `key=value` lines (format-spec/recipe.md).
    pub fn options_text(&self) -> String {
        let o = &self.options;
        let features: Vec<String> = o.features.iter().map(|k| k.name()).collect();
        let stop: Vec<&str> = o.stop_words.iter().map(|l| l.code()).collect();
        format!(
            "recipe_version={}\nfeatures={}\ncjk={}\nstop={}\nstem={}\ndigits={}\ntf={}\nmin_words={}\nshort_words={}\n",
            o.version,
            features.join(","),
            o.cjk.name(),
            if stop.is_empty() { "-".to_owned() } else { stop.join(",") },
            o.stemming.map_or("-", Language::code),
            if o.fold_digits { "fold" } else { "keep" },
            o.tf.name(),
            o.min_words,
            o.short_words,
        )
    }

    /// Parses [`Recipe::options_text`]'s output; every key is required, none may repeat.
    pub fn parse_options(text: &str) -> Result<FingerprintOptions, String> {
        const KEYS: [&str; 9] = ["recipe_version", "features", "cjk", "stop", "stem", "digits", "tf", "min_words", "short_words"];
        let mut values: [Option<&str>; 9] = [None; 9];
        for line in text.lines().filter(|l| !l.is_empty()) {
            let (key, value) = line.split_once('=').ok_or_else(|| format!("line `{line}` is not key=value"))?;
            let slot = KEYS.iter().position(|k| *k == key).and_then(|i| values.get_mut(i)).ok_or_else(|| format!("unknown key `{key}`"))?;
            if slot.replace(value).is_some() {
                return Err(format!("key `{key}` repeated"));
            }
        }
        let get = |i: usize| values.get(i).copied().flatten().ok_or_else(|| format!("key `{}` missing", KEYS.get(i).copied().unwrap_or("?")));
        let version = get(0)?;
        let version = version
            .parse()
            .ok()
            .filter(|v| super::RECIPE_VERSIONS.contains(v))
            .ok_or_else(|| format!("fingerprint recipe version {version} (this build makes versions {}-{})", super::RECIPE_VERSIONS.start(), super::RECIPE_VERSIONS.end()))?;
        let lang = |c: &str| Language::from_code(c).ok_or_else(|| format!("unknown language `{c}`"));
        let list = |v: &str| -> Vec<String> {
            if v == "-" {
                Vec::new()
            } else {
                v.split(',').map(str::to_owned).collect()
            }
        };
        let number = |i: usize| -> Result<u64, String> { get(i)?.parse().map_err(|_| format!("`{}` is not a number", KEYS.get(i).copied().unwrap_or("?"))) };
        Ok(FingerprintOptions {
            features: list(get(1)?).iter().map(|k| FeatureKind::parse(k).ok_or_else(|| format!("unknown feature kind `{k}`"))).collect::<Result<_, _>>()?,
            cjk: CjkSegmenter::parse(get(2)?).ok_or("unknown cjk segmenter")?,
            stop_words: list(get(3)?).iter().map(|c| lang(c)).collect::<Result<_, _>>()?,
            stemming: match get(4)? {
                "-" => None,
                c => Some(lang(c)?),
            },
            fold_digits: match get(5)? {
                "fold" => true,
                "keep" => false,
                d => return Err(format!("unknown digits `{d}`")),
            },
            tf: TfMode::parse(get(6)?).ok_or("unknown tf mode")?,
            min_words: number(7)?,
            short_words: number(8)?,
            version,
        })
    }
}

impl Recipe {
    /// The recipe as an index pins it (its `RECIPE` file's contents).
    pub fn to_pinned(&self) -> simdex::PinnedRecipe {
        simdex::PinnedRecipe { options: self.options_text(), idf_table: self.idf.as_ref().map(|t| t.encode()).unwrap_or_default() }
    }

    /// The recipe an index pinned; `Err` says what does not parse.
    pub fn from_pinned(pinned: &simdex::PinnedRecipe) -> Result<Self, String> {
        let options = Recipe::parse_options(&pinned.options).map_err(|e| format!("options: {e}"))?;
        let idf = match pinned.idf_table.as_slice() {
            [] => None,
            t => Some(Arc::new(IdfTable::decode(t).map_err(|e| format!("IDF table: {e}"))?)),
        };
        Recipe::new(options, idf).map_err(|e| e.to_string())
    }
}

impl std::fmt::Display for Recipe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.descriptor())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn options_roundtrip_through_text() {
        let mut o = FingerprintOptions::short_text();
        o.fold_digits = true;
        o.features = vec![FeatureKind::Words, FeatureKind::CharNgrams(4)];
        for o in [FingerprintOptions::default(), o.clone(), o.with_version(1)] {
            let r = Recipe::new(o.clone(), None).unwrap();
            assert_eq!(Recipe::parse_options(&r.options_text()).unwrap(), o);
        }
    }

    #[test]
    fn bad_options_text_is_an_error() {
        let good = Recipe::new(FingerprintOptions::default(), None).unwrap().options_text();
        assert!(Recipe::parse_options(&good.replace("tf=binary", "tf=nope")).unwrap_err().contains("tf"));
        assert!(Recipe::parse_options(&good.replace("recipe_version=2", "recipe_version=9")).unwrap_err().contains("version 9"));
        assert!(Recipe::parse_options(&good.replace("min_words=3\n", "")).unwrap_err().contains("min_words"));
        assert!(Recipe::parse_options(&format!("{good}tf=tf\n")).unwrap_err().contains("repeated"));
        assert!(Recipe::parse_options("garbage").is_err());
    }
}
