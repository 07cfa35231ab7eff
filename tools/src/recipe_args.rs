//! The fingerprint recipe flags shared by `fingerprint`, `dedup` and `tune`: clap arguments ->
//! `simdex_fingerprint::Fingerprinter`.

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use simdex_fingerprint::{FingerprintOptions, Fingerprinter, IdfTable, OptionNames};
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Preset {
    /// The library defaults, chosen for web pages (word 2-shingles, binary weights)
    Pages,
    /// For sentences and snippets: words, term frequency, stop words of every language
    ShortText,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Cjk {
    /// every Han ideograph is a word
    Chars,
    /// jieba dictionary segmentation
    Jieba,
}

/// Fingerprint recipe (see format-spec/fingerprint.md); flags override the preset.
#[derive(Debug, Args)]
pub struct RecipeArgs {
    /// Starting point for the recipe
    #[arg(long, value_enum, default_value = "pages")]
    pub preset: Preset,
    /// Feature kinds, comma-separated: w (words), wN (word N-shingles), cN (character N-grams)
    #[arg(long, value_delimiter = ',', value_name = "KINDS")]
    pub features: Option<Vec<String>>,
    /// Term weights: tf, logtf or binary
    #[arg(long, value_name = "MODE")]
    pub tf: Option<String>,
    /// Stop words to drop: language codes (en,ru,ar,zh,de,fr,es), `all` or `none`
    #[arg(long, value_delimiter = ',', value_name = "LANGS")]
    pub stop: Option<Vec<String>>,
    /// Stem words with this language's Snowball stemmer
    #[arg(long, value_name = "LANG")]
    pub stem: Option<String>,
    /// How Han ideographs become words
    #[arg(long, value_enum)]
    pub cjk: Option<Cjk>,
    /// Replace digits by 0 before hashing
    #[arg(long)]
    pub fold_digits: bool,
    /// Weight features by this IDF table (made with `--learn-idf`)
    #[arg(long, value_name = "FILE")]
    pub idf: Option<PathBuf>,
}

impl RecipeArgs {
    /// The options these flags describe (parsed by the library, as every front's are).
    pub fn options(&self) -> anyhow::Result<FingerprintOptions> {
        let names = OptionNames {
            preset: Some(
                match self.preset {
                    Preset::Pages => "pages",
                    Preset::ShortText => "short_text",
                }
                .to_owned(),
            ),
            features: self.features.clone(),
            tf: self.tf.clone(),
            stop_words: self.stop.clone(),
            stem: self.stem.clone(),
            cjk: self.cjk.map(|c| match c {
                Cjk::Chars => "chars".to_owned(),
                Cjk::Jieba => "jieba".to_owned(),
            }),
            fold_digits: self.fold_digits.then_some(true),
            min_words: None,
        };
        Ok(FingerprintOptions::from_names(&names)?)
    }

    /// The fingerprinter, with the IDF table of `--idf` if given.
    pub fn fingerprinter(&self) -> anyhow::Result<Fingerprinter> {
        let fp = Fingerprinter::new(self.options()?)?;
        match &self.idf {
            None => Ok(fp),
            Some(path) => {
                let table = IdfTable::load(path).with_context(|| format!("cannot read IDF table {}", path.display()))?;
                Ok(fp.with_idf(Arc::new(table))?)
            }
        }
    }

    /// The flags that ask for this recipe again (none for the defaults), each a word.
    pub fn flags(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut flag = |name: &str, value: Option<String>| out.extend(std::iter::once(format!("--{name}")).chain(value));
        if !matches!(self.preset, Preset::Pages) {
            flag("preset", Some(crate::value_parsers::value_name(self.preset)));
        }
        if let Some(v) = &self.features {
            flag("features", Some(v.join(",")));
        }
        if let Some(v) = &self.tf {
            flag("tf", Some(v.clone()));
        }
        if let Some(v) = &self.stop {
            flag("stop", Some(v.join(",")));
        }
        if let Some(v) = &self.stem {
            flag("stem", Some(v.clone()));
        }
        if let Some(v) = self.cjk {
            flag("cjk", Some(crate::value_parsers::value_name(v)));
        }
        if self.fold_digits {
            flag("fold-digits", None);
        }
        if let Some(v) = &self.idf {
            flag("idf", Some(v.to_string_lossy().into_owned()));
        }
        out
    }

    /// Whether no recipe flag was given (the `pages` preset, nothing overridden).
    pub fn is_default(&self) -> bool {
        matches!(self.preset, Preset::Pages)
            && self.features.is_none()
            && self.tf.is_none()
            && self.stop.is_none()
            && self.stem.is_none()
            && self.cjk.is_none()
            && !self.fold_digits
            && self.idf.is_none()
    }

    /// The recipe to fingerprint documents for the index `index` with: the index's pinned
    /// recipe, if it has one (flags that ask for another are refused, naming both), else
    /// `None` (the caller makes one and pins it). `no_idf` asks for a recipe without a table.
    /// No flag names the recipe version: the index's is taken (an index pinned at version 1
    /// keeps taking text from HTML as version 1 did).
    pub fn for_index(&self, index: &simdex_fingerprint::DocumentIndex, no_idf: bool) -> anyhow::Result<Option<Fingerprinter>> {
        let Some(pinned) = index.recipe() else { return Ok(None) };
        if self.is_default() && !no_idf {
            return Ok(Some(pinned.fingerprinter()?));
        }
        let asked = self.fingerprinter()?;
        let options_match = asked.options().clone().with_version(pinned.options().version) == *pinned.options();
        let idf_match = match (&self.idf, pinned.idf()) {
            // a table given by file must be the pinned one
            (Some(_), Some(t)) => asked.idf_table().as_deref() == Some(&**t),
            (Some(_), None) => false,
            // no file: without a table if --no-idf, else whatever table the index pinned
            (None, t) => !no_idf || t.is_none(),
        };
        if options_match && idf_match {
            return Ok(Some(pinned.fingerprinter()?));
        }
        let given = if no_idf || self.idf.is_some() {
            simdex_fingerprint::Recipe::of(&asked).descriptor()
        } else {
            format!("{} (IDF to be learned)", simdex_fingerprint::Recipe::of(&asked).descriptor())
        };
        Err(simdex_fingerprint::Error::RecipeMismatch { dir: index.dir().to_path_buf(), index: pinned.descriptor(), given }.into())
    }

    /// Refuses `--idf` together with learning a table.
    pub fn check_no_idf(&self, why: &str) -> anyhow::Result<()> {
        if self.idf.is_some() {
            bail!("--idf cannot be combined with {why}");
        }
        Ok(())
    }
}
