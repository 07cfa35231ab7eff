//! Feature formation: normalised words -> 64-bit feature hashes.
//!
//! Owns the word filter (stop words, stemming, digit folding) and the three feature kinds:
//! words, word n-shingles and character n-grams. Weighting is `weights`' business.

// Indexing: shingle windows index the token buffer by positions below its length.
#![allow(clippy::indexing_slicing)]

use super::hash::{combine, seed, sfh64};
use super::stem::Stemmer;
use super::stopwords::StopWords;
use super::tokenize::Token;
use std::collections::VecDeque;

/// Longest shingle or n-gram the recipe allows.
pub const MAX_N: usize = 16;

/// One kind of feature taken from a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FeatureKind {
    /// Every word.
    Words,
    /// Every run of n consecutive words (2 <= n <= 16).
    WordShingles(usize),
    /// Every run of n consecutive characters of the words joined by single spaces
    /// (1 <= n <= 16).
    CharNgrams(usize),
}

impl FeatureKind {
    /// The name used in recipe descriptors: `w`, `w3`, `c5`.
    pub fn name(self) -> String {
        match self {
            FeatureKind::Words => "w".to_owned(),
            FeatureKind::WordShingles(n) => format!("w{n}"),
            FeatureKind::CharNgrams(n) => format!("c{n}"),
        }
    }

    /// Parses [`FeatureKind::name`]'s output.
    pub fn parse(s: &str) -> Option<FeatureKind> {
        let (kind, n) = s.split_at(1.min(s.len()));
        let n: Option<usize> = if n.is_empty() { None } else { n.parse().ok() };
        match (kind, n) {
            ("w", None) | ("w", Some(1)) => Some(FeatureKind::Words),
            ("w", Some(n)) if (2..=MAX_N).contains(&n) => Some(FeatureKind::WordShingles(n)),
            ("c", Some(n)) if (1..=MAX_N).contains(&n) => Some(FeatureKind::CharNgrams(n)),
            _ => None,
        }
    }
}

/// Streams words in, feature hashes out. One per document; `finish` flushes the tail.
#[derive(Debug)]
pub struct FeatureExtractor<'a> {
    kinds: &'a [FeatureKind],
    stop: &'a StopWords,
    stemmer: Option<&'a Stemmer>,
    fold_digits: bool,
    /// whether a word's text is needed (digit folding, stemming, character n-grams)
    needs_text: bool,
    /// hashes of the last MAX_N kept words: word number w is at `recent[w % MAX_N]`
    recent: [u64; MAX_N],
    /// the last MAX_N characters of the joined words, newest last
    chars: VecDeque<char>,
    gram: String,
    word: String,
    words: u64,
    chars_seen: u64,
}

impl<'a> FeatureExtractor<'a> {
    /// An extractor for one document: features of `kinds` from the words that `stop` keeps,
    /// stemmed by `stemmer` and with ASCII digits folded to `0` if `fold_digits`.
    pub fn new(kinds: &'a [FeatureKind], stop: &'a StopWords, stemmer: Option<&'a Stemmer>, fold_digits: bool) -> Self {
        let needs_text = fold_digits || stemmer.is_some() || kinds.iter().any(|k| matches!(k, FeatureKind::CharNgrams(_)));
        FeatureExtractor {
            kinds,
            stop,
            stemmer,
            fold_digits,
            needs_text,
            recent: [0; MAX_N],
            chars: VecDeque::with_capacity(MAX_N),
            gram: String::new(),
            word: String::new(),
            words: 0,
            chars_seen: 0,
        }
    }

    /// Words kept so far (after stop words).
    pub fn words(&self) -> u64 {
        self.words
    }

    /// Whether words must come with their text ([`FeatureExtractor::word`]); otherwise their
    /// hashes are enough ([`FeatureExtractor::hashed_word`]).
    pub fn needs_text(&self) -> bool {
        self.needs_text
    }

    /// Takes one word; calls `emit` with each feature hash it completes.
    #[inline]
    pub fn word(&mut self, token: Token<'_>, emit: &mut impl FnMut(u64)) {
        if !self.needs_text {
            return self.hashed_word(token.hash(), emit);
        }
        let h = token.hash();
        if self.stop.contains(h) {
            return;
        }
        let mut word = std::mem::take(&mut self.word);
        let text = token.normalized(&mut word);
        let folded = self.fold_digits && text.bytes().any(|b| b.is_ascii_digit());
        let text: String = if folded { text.chars().map(|c| if c.is_ascii_digit() { '0' } else { c }).collect() } else { text.to_owned() };
        word = match self.stemmer {
            Some(stemmer) => stemmer.stem(&text).into_owned(),
            None => text,
        };
        self.kept(sfh64(seed::WORD, word.as_bytes()), &word, emit);
        self.word = word;
    }

    /// Takes one word by its hash `sfh64(0, word)`, for extractors that do not
    /// [need the text](FeatureExtractor::needs_text).
    #[inline]
    pub fn hashed_word(&mut self, h: u64, emit: &mut impl FnMut(u64)) {
        debug_assert!(!self.needs_text);
        if !self.stop.contains(h) {
            self.kept(h, "", emit);
        }
    }

    /// [`FeatureExtractor::hashed_word`] for each of `hashes`, appending the features to `out`.
    pub fn hashed_words(&mut self, hashes: &[u64], out: &mut Vec<u64>) {
        out.reserve(hashes.len() * self.kinds.len());
        match self.kinds {
            // the common recipes, as loops of their own
            [FeatureKind::WordShingles(n)] if self.stop.is_empty() => {
                for &h in hashes {
                    self.recent[(self.words % MAX_N as u64) as usize] = h;
                    self.words += 1;
                    if self.words >= *n as u64 {
                        out.push(self.shingle(*n));
                    }
                }
            }
            [FeatureKind::Words] if self.stop.is_empty() => {
                for &h in hashes {
                    self.recent[(self.words % MAX_N as u64) as usize] = h;
                    self.words += 1;
                }
                out.extend_from_slice(hashes);
            }
            _ => {
                for &h in hashes {
                    self.hashed_word(h, &mut |f| out.push(f));
                }
            }
        }
    }

    /// A kept word with hash `h` (and its text, where needed).
    #[inline]
    fn kept(&mut self, h: u64, word: &str, emit: &mut impl FnMut(u64)) {
        self.recent[(self.words % MAX_N as u64) as usize] = h;
        self.words += 1;
        for &kind in self.kinds {
            match kind {
                FeatureKind::Words => emit(h),
                FeatureKind::WordShingles(n) => {
                    if self.words >= n as u64 {
                        emit(self.shingle(n));
                    }
                }
                FeatureKind::CharNgrams(n) => self.char_ngrams(word, n, emit),
            }
        }
    }

    /// Hash of the last `n` word hashes (n <= words, n <= MAX_N).
    #[inline]
    fn shingle(&self, n: usize) -> u64 {
        let first = self.words - n as u64;
        let at = |w: u64| self.recent[(w % MAX_N as u64) as usize];
        (first + 1..self.words).fold(at(first), |acc, w| combine(acc, at(w)))
    }

    fn char_ngrams(&mut self, word: &str, n: usize, emit: &mut impl FnMut(u64)) {
        // only one CharNgrams kind may run per extractor: `FingerprintOptions::validate`
        let sep = if self.words > 1 { Some(' ') } else { None };
        for c in sep.into_iter().chain(word.chars()) {
            if self.chars.len() == n {
                self.chars.pop_front();
            }
            self.chars.push_back(c);
            self.chars_seen += 1;
            if self.chars.len() == n {
                self.gram.clear();
                self.gram.extend(self.chars.iter());
                emit(sfh64(seed::CHAR_NGRAM, self.gram.as_bytes()));
            }
        }
    }

    /// Ends the document: a document shorter than a shingle (or n-gram) yields one feature for
    /// all its words (characters), so that it still has features.
    pub fn finish(&mut self, emit: &mut impl FnMut(u64)) {
        for &kind in self.kinds {
            match kind {
                FeatureKind::WordShingles(n) if self.words > 0 && (self.words as usize) < n => emit(self.shingle(self.words as usize)),
                FeatureKind::CharNgrams(n) if self.chars_seen > 0 && (self.chars_seen as usize) < n => {
                    self.gram.clear();
                    self.gram.extend(self.chars.iter());
                    emit(sfh64(seed::CHAR_NGRAM, self.gram.as_bytes()));
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn features(kinds: &[FeatureKind], words: &[&str]) -> Vec<u64> {
        let stop = StopWords::default();
        let mut fx = FeatureExtractor::new(kinds, &stop, None, false);
        let mut out = Vec::new();
        let mut emit = |h| out.push(h);
        for w in words {
            fx.word(Token::Normalized(w), &mut emit);
        }
        fx.finish(&mut emit);
        out
    }

    fn w(s: &str) -> u64 {
        sfh64(seed::WORD, s.as_bytes())
    }

    #[test]
    fn words_and_shingles() {
        assert_eq!(features(&[FeatureKind::Words], &["a", "b"]), [w("a"), w("b")]);
        assert_eq!(features(&[FeatureKind::WordShingles(2)], &["a", "b", "c"]), [combine(w("a"), w("b")), combine(w("b"), w("c"))]);
        // shorter than a shingle: one feature for all words
        assert_eq!(features(&[FeatureKind::WordShingles(3)], &["a", "b"]), [combine(w("a"), w("b"))]);
    }

    #[test]
    fn char_ngrams_span_word_gaps() {
        let c = |s: &str| sfh64(seed::CHAR_NGRAM, s.as_bytes());
        assert_eq!(features(&[FeatureKind::CharNgrams(3)], &["ab", "cd"]), [c("ab "), c("b c"), c(" cd")]);
        assert_eq!(features(&[FeatureKind::CharNgrams(5)], &["ab"]), [c("ab")]);
    }

    #[test]
    fn kind_names_roundtrip() {
        for k in [FeatureKind::Words, FeatureKind::WordShingles(3), FeatureKind::CharNgrams(5)] {
            assert_eq!(FeatureKind::parse(&k.name()), Some(k));
        }
        assert_eq!(FeatureKind::parse("w99"), None);
        assert_eq!(FeatureKind::parse("x3"), None);
    }
}
