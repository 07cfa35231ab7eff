//! Tokenisation: normalised text -> words.
//!
//! The recipe (format-spec/fingerprint.md, "Tokens"):
//! 1. split the text at ASCII whitespace into chunks;
//! 2. normalise each chunk (NFKC, lowercase; see `normalize`);
//! 3. segment it with the Unicode word boundaries of UAX #29 and keep the segments that contain
//!    a letter or a digit (`unicode_words` of `unicode-segmentation`);
//! 4. Han ideographs: with [`CjkSegmenter::Chars`] each ideograph is a word (what UAX #29
//!    gives); with [`CjkSegmenter::Jieba`] each maximal run of ideographs is cut by the jieba
//!    dictionary segmenter instead (cargo feature `cjk`).
//!
//! ASCII chunks take a byte-level implementation of the same UAX #29 rules (WB5-WB13b restricted
//! to ASCII), checked against `unicode-segmentation` by a property test.

// Indexing: the tokenizer indexes the text at char boundaries and positions its own scan found.
#![allow(clippy::indexing_slicing)]

use super::chunks::{for_each_chunk, ChunkKind};
use super::hash::{seed, sfh64, sfh64_ascii_lower, sfh64_ascii_lower_at};
use super::normalize::{ascii_lower_into, nfkc_lower_into};
use unicode_segmentation::UnicodeSegmentation;

/// What else is made of a text's chunks (runs between ASCII whitespace) during the word
/// scan ([`Tokenizer::word_hashes_and`]).
pub(crate) trait ChunkSink {
    /// A chunk of ASCII letters and digits only, by the hash of its ASCII lowercase
    /// (`sfh64(0, chunk)`: its one word's hash); or, from the word scan, one run of them
    /// between other ASCII bytes than `_` (`word,` `(word)`): its one word and one token.
    fn alnum(&mut self, hash: u64);
    /// Any other chunk (ASCII with punctuation, or with non-ASCII characters), with its NFKC
    /// and lowercase (`normalize::nfkc_lower_into`) where the scan made it already (a
    /// [`ChunkKind::Unicode`] chunk of the word scan).
    fn other(&mut self, chunk: &str, kind: ChunkKind, normalized: Option<&str>);
}

/// Hands every chunk of `text` to `chunks`, as [`Tokenizer::word_hashes_and`] does, without
/// the words.
pub(crate) fn feed_chunks(text: &str, chunks: &mut impl ChunkSink) {
    let bytes = text.as_bytes();
    for_each_chunk(bytes, |start, end, kind| match kind {
        ChunkKind::Alnum => chunks.alnum(sfh64_ascii_lower_at(seed::WORD, bytes, start, end)),
        _ => chunks.other(&text[start..end], kind, None),
    });
}

/// No sink: the words only.
impl ChunkSink for () {
    #[inline(always)]
    fn alnum(&mut self, _: u64) {}
    #[inline(always)]
    fn other(&mut self, _: &str, _: ChunkKind, _: Option<&str>) {}
}

/// How runs of Han ideographs become words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CjkSegmenter {
    /// Every ideograph is a word of its own (UAX #29). No dictionary, so it never changes;
    /// word shingles then act as character n-grams.
    #[default]
    Chars,
    /// The jieba dictionary segmenter (no HMM), cargo feature `cjk`. Its output depends on the
    /// bundled dictionary, so the crate pins the jieba version.
    Jieba,
}

impl CjkSegmenter {
    /// The name used in recipe descriptors.
    pub fn name(self) -> &'static str {
        match self {
            CjkSegmenter::Chars => "chars",
            CjkSegmenter::Jieba => "jieba",
        }
    }

    /// Parses [`CjkSegmenter::name`]'s output.
    pub fn parse(s: &str) -> Option<CjkSegmenter> {
        [CjkSegmenter::Chars, CjkSegmenter::Jieba].into_iter().find(|c| c.name() == s)
    }
}

/// A word as the tokenizer found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Token<'a> {
    /// ASCII as it stands in the text: the normalised word is its ASCII lowercase.
    Ascii(&'a str),
    /// Already normalised.
    Normalized(&'a str),
}

impl<'a> Token<'a> {
    /// The word's feature hash, `sfh64(0, normalised word)`.
    #[inline]
    pub fn hash(&self) -> u64 {
        match *self {
            Token::Ascii(s) => sfh64_ascii_lower(seed::WORD, s.as_bytes()),
            Token::Normalized(s) => sfh64(seed::WORD, s.as_bytes()),
        }
    }

    /// The normalised word, lowercased into `buf` where needed.
    pub fn normalized<'b>(&self, buf: &'b mut String) -> &'b str
    where
        'a: 'b,
    {
        match *self {
            Token::Ascii(s) => {
                buf.clear();
                ascii_lower_into(s, buf);
                buf
            }
            Token::Normalized(s) => s,
        }
    }
}

/// Splits text into normalised words; reusable, keeps its scratch buffer between calls.
pub struct Tokenizer {
    cjk: CjkSegmenter,
    #[cfg(feature = "cjk")]
    jieba: Option<std::sync::Arc<jieba_rs::Jieba>>,
    norm: String,
    /// word-break classes and byte offsets of a plain chunk's characters
    classes: Vec<Wb>,
    offsets: Vec<usize>,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer").field("cjk", &self.cjk).finish()
    }
}

impl Clone for Tokenizer {
    fn clone(&self) -> Self {
        Tokenizer {
            cjk: self.cjk,
            #[cfg(feature = "cjk")]
            jieba: self.jieba.clone(),
            norm: String::new(),
            classes: Vec::new(),
            offsets: Vec::new(),
        }
    }
}

/// ASCII word-break classes of UAX #29 (table 3 of the annex, restricted to ASCII).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wb {
    Letter,
    Numeric,
    ExtendNumLet,
    MidLetter,
    MidNum,
    MidNumLet,
    SingleQuote,
    /// a Han ideograph: a word of its own (WB999), alphanumeric
    Ideograph,
    Other,
}

const fn wb_class(b: u8) -> Wb {
    match b {
        b'a'..=b'z' | b'A'..=b'Z' => Wb::Letter,
        b'0'..=b'9' => Wb::Numeric,
        b'_' => Wb::ExtendNumLet,
        b':' => Wb::MidLetter,
        b',' | b';' => Wb::MidNum,
        b'.' => Wb::MidNumLet,
        b'\'' => Wb::SingleQuote,
        _ => Wb::Other,
    }
}

const WB_TABLE: [Wb; 128] = {
    let mut t = [Wb::Other; 128];
    let mut i = 0;
    while i < 128 {
        t[i] = wb_class(i as u8);
        i += 1;
    }
    t
};

/// Calls `emit(start, end)` for every UAX #29 word (a segment with a letter, digit or
/// ideograph) of a string of `n` characters whose word-break classes `class(i)` gives, for the
/// classes of [`Wb`] only (rules WB5-WB13b and WB999).
fn segment(n: usize, class: impl Fn(usize) -> Wb, mut emit: impl FnMut(usize, usize)) {
    use Wb::*;
    let at = |i: Option<usize>| i.filter(|&i| i < n).map_or(Other, &class);
    let mid_l = |c| matches!(c, MidLetter | MidNumLet | SingleQuote);
    let mid_n = |c| matches!(c, MidNum | MidNumLet | SingleQuote);
    let joins = |i: usize| match (class(i - 1), class(i)) {
        (Letter | Numeric, Letter | Numeric) => true,                // WB5, WB8, WB9, WB10
        (Letter | Numeric | ExtendNumLet, ExtendNumLet) => true,     // WB13a
        (ExtendNumLet, Letter | Numeric) => true,                    // WB13b
        (Letter, m) if mid_l(m) => at(Some(i + 1)) == Letter,        // WB6
        (m, Letter) if mid_l(m) => at(i.checked_sub(2)) == Letter,   // WB7
        (Numeric, m) if mid_n(m) => at(Some(i + 1)) == Numeric,      // WB12
        (m, Numeric) if mid_n(m) => at(i.checked_sub(2)) == Numeric, // WB11
        _ => false,
    };
    let mut start = 0;
    let mut has_alnum = false;
    for i in 0..n {
        if i > start && !joins(i) {
            if has_alnum {
                emit(start, i);
            }
            start = i;
            has_alnum = false;
        }
        has_alnum |= matches!(class(i), Letter | Numeric | Ideograph);
    }
    if has_alnum {
        emit(start, n);
    }
}

/// UAX #29 words of the ASCII string `s`, as byte ranges; true when `s` is the common case.
///
/// Common case first: punctuation around one run of letters and digits (`"word,"`,
/// `(word)`). Leading and trailing bytes other than letters, digits and `_` never join a word
/// (the Mid* classes need a letter or digit on both sides, WB6-WB7 and WB11-WB12; `Other`
/// never joins), so such a chunk has exactly that one word (and that one run of
/// `[A-Za-z0-9_]`: the sketch's one token, `shingles`).
#[inline]
fn ascii_words(s: &[u8], mut emit: impl FnMut(usize, usize)) -> bool {
    let in_word = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_';
    let Some(first) = s.iter().position(in_word) else {
        return false; // no letter or digit
    };
    let last = s.iter().rposition(in_word).unwrap_or(first);
    if s[first..=last].iter().all(u8::is_ascii_alphanumeric) {
        emit(first, last + 1);
        true
    } else {
        segment(s.len(), |i| WB_TABLE[(s[i] & 0x7F) as usize], emit);
        false
    }
}

/// A "plain" character's normalised form and word-break class: a character whose NFKC form
/// is one character with one of the classes of [`Wb`], and whose lowercase (of that form) is
/// one character (Latin-1, Greek and Cyrillic letters, Arabic letters without marks, the main
/// Han block, Hangul syllables, common CJK and Arabic punctuation, typographic quotes and
/// dashes). `None` for any other character. Checked against the Unicode crates by tests.
fn plain(c: char) -> Option<(char, Wb)> {
    let lower = |offset: u32| char::from_u32(c as u32 + offset).unwrap_or(c);
    let ascii = |b: u8| (char::from(b), WB_TABLE[b as usize]);
    Some(match c as u32 {
        0x41..=0x5A => (lower(0x20), Wb::Letter),
        0..=0x7F => (c, WB_TABLE[c as usize]),
        0xC0..=0xD6 | 0xD8..=0xDE | 0x391..=0x3A1 | 0x3A3..=0x3A9 | 0x410..=0x42F => (lower(0x20), Wb::Letter),
        0x400..=0x40F => (lower(0x50), Wb::Letter),
        0xDF..=0xF6 | 0xF8..=0xFF | 0x3B1..=0x3C9 | 0x430..=0x45F | 0x621..=0x63A | 0x641..=0x64A => (c, Wb::Letter),
        0x4E00..=0x9FFF => (c, Wb::Ideograph),
        // Hangul syllables: ALetter, already composed (NFKC recomposes them), caseless
        0xAC00..=0xD7A3 => (c, Wb::Letter),
        0x060C => (c, Wb::MidNum),                  // Arabic comma
        0x2018 | 0x2019 => (c, Wb::MidNumLet),      // ‘ ’ (don’t is one word)
        0xAB | 0xBB | 0x2013 | 0x2014 | 0x201C | 0x201D | 0x061F | 0x3001 | 0x3002 => (c, Wb::Other), // « » – — “ ” ؟ 、 。
        // fullwidth ！ （ ） ， ： ； ？ (NFKC: their ASCII forms)
        0xFF01 | 0xFF08 | 0xFF09 | 0xFF0C | 0xFF1A | 0xFF1B | 0xFF1F => ascii((c as u32 - 0xFEE0) as u8),
        _ => return None,
    })
}

/// The normalised form and word-break class of each character below U+0800, if plain.
type PlainTable = [Option<(char, Wb)>; 0x800];

/// [`plain`] of every character below U+0800 (Latin-1, Greek, Cyrillic, Arabic: two bytes of
/// UTF-8 at most), computed once from [`plain`] itself.
fn plain_table() -> &'static PlainTable {
    static TABLE: std::sync::OnceLock<Box<PlainTable>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = Box::new([None; 0x800]);
        for (u, entry) in t.iter_mut().enumerate() {
            *entry = char::from_u32(u as u32).and_then(plain);
        }
        t
    })
}

#[cfg(feature = "cjk")]
fn is_han(c: char) -> bool {
    matches!(c as u32,
        0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0x20000..=0x2FA1F)
}

impl Tokenizer {
    /// A tokenizer; fails with [`super::Error::FeatureNotCompiled`] for
    /// [`CjkSegmenter::Jieba`] in a build without the `cjk` feature.
    pub fn new(cjk: CjkSegmenter) -> Result<Self, super::Error> {
        #[cfg(feature = "cjk")]
        let jieba = match cjk {
            CjkSegmenter::Jieba => Some(std::sync::Arc::new(jieba_rs::Jieba::new())),
            CjkSegmenter::Chars => None,
        };
        #[cfg(not(feature = "cjk"))]
        if cjk == CjkSegmenter::Jieba {
            return Err(super::Error::FeatureNotCompiled { feature: "cjk" });
        }
        Ok(Tokenizer {
            cjk,
            #[cfg(feature = "cjk")]
            jieba,
            norm: String::new(),
            classes: Vec::new(),
            offsets: Vec::new(),
        })
    }

    /// Calls `emit` with every word of `text`, in order.
    pub fn words(&mut self, text: &str, mut emit: impl FnMut(Token<'_>)) {
        for_each_chunk(text.as_bytes(), |start, end, kind| {
            // chunks end at ASCII bytes, so `start..end` lies on char boundaries
            let chunk = &text[start..end];
            match kind {
                ChunkKind::Alnum => emit(Token::Ascii(chunk)),
                ChunkKind::Ascii => {
                    ascii_words(chunk.as_bytes(), |a, b| emit(Token::Ascii(&chunk[a..b])));
                }
                ChunkKind::Unicode => self.unicode_chunk(chunk, &mut emit),
            }
        });
    }

    /// Calls `emit` with the feature hash (`sfh64(0, word)`) of every word of `text`, in
    /// order: [`Tokenizer::words`] for callers that need no word's text, with ASCII words
    /// hashed straight from `text`.
    pub fn word_hashes(&mut self, text: &str, emit: impl FnMut(u64)) {
        self.word_hashes_and(text, emit, &mut ());
    }

    /// [`Tokenizer::word_hashes`], and every chunk of `text` (its words' hash where it is one
    /// word of ASCII letters and digits) handed to `chunks` as the scan passes it: one scan
    /// of the text for the words and whatever else is made of its chunks (the sketch's
    /// tokens, `sketch::ShingleScan`).
    #[inline]
    pub(crate) fn word_hashes_and(&mut self, text: &str, mut emit: impl FnMut(u64), chunks: &mut impl ChunkSink) {
        let bytes = text.as_bytes();
        for_each_chunk(bytes, |start, end, kind| {
            if kind == ChunkKind::Alnum {
                let h = sfh64_ascii_lower_at(seed::WORD, bytes, start, end);
                emit(h);
                chunks.alnum(h);
            } else if let Some(h) = self.other_chunk_hashes(text, start..end, kind, &mut emit) {
                chunks.alnum(h);
            } else {
                // a Unicode chunk's words were cut from its normalised form, left in `norm`
                let normalized = (kind == ChunkKind::Unicode).then_some(self.norm.as_str());
                chunks.other(&text[start..end], kind, normalized);
            }
        });
    }

    /// [`Tokenizer::word_hashes`] of a chunk with punctuation or non-ASCII characters (out of
    /// line, so that the loop over plain words stays small). Returns the hash of the one word
    /// of an ASCII chunk that is one run of letters and digits between bytes other than those
    /// and `_` (`ascii_words`' common case: that word is the chunk's one token too).
    #[inline(never)]
    fn other_chunk_hashes(&mut self, text: &str, chunk: std::ops::Range<usize>, kind: ChunkKind, emit: &mut dyn FnMut(u64)) -> Option<u64> {
        let start = chunk.start;
        match kind {
            ChunkKind::Unicode => {
                self.unicode_chunk(&text[chunk], &mut |t| emit(t.hash()));
                None
            }
            _ => {
                let mut last = 0;
                let one = ascii_words(&text.as_bytes()[chunk], |a, b| {
                    last = sfh64_ascii_lower_at(seed::WORD, text.as_bytes(), start + a, start + b);
                    emit(last)
                });
                one.then_some(last)
            }
        }
    }

    /// The words of a chunk with non-ASCII characters.
    fn unicode_chunk(&mut self, chunk: &str, emit: &mut impl FnMut(Token<'_>)) {
        if !self.plain_words(chunk, emit) {
            let mut norm = std::mem::take(&mut self.norm);
            norm.clear();
            nfkc_lower_into(chunk, &mut norm);
            self.unicode_words(&norm, &mut |w| emit(Token::Normalized(w)));
            self.norm = norm;
        }
    }

    /// The fast path for chunks of plain characters ([`plain`]): each character replaced by
    /// its normalised form, segmentation by [`segment`]. Returns false (and emits nothing)
    /// for any other chunk.
    fn plain_words(&mut self, chunk: &str, emit: &mut impl FnMut(Token<'_>)) -> bool {
        let Tokenizer { classes, offsets, norm, cjk, .. } = self;
        classes.clear();
        offsets.clear();
        norm.clear();
        let table = plain_table();
        for c in chunk.chars() {
            let found = match c as u32 {
                u @ 0..=0x7FF => table[u as usize],
                0x4E00..=0x9FFF => Some((c, Wb::Ideograph)),
                _ => plain(c),
            };
            match found {
                Some((_, Wb::Ideograph)) if *cjk != CjkSegmenter::Chars => return false,
                Some((n, class)) => {
                    classes.push(class);
                    offsets.push(norm.len());
                    norm.push(n);
                }
                None => return false,
            }
        }
        offsets.push(norm.len());
        // common case first, as for ASCII chunks (`ascii_words`): one run of letters and
        // digits between characters that never join a word
        let joins = |c: &Wb| !matches!(c, Wb::Other | Wb::MidLetter | Wb::MidNum | Wb::MidNumLet | Wb::SingleQuote);
        let Some(first) = classes.iter().position(joins) else {
            return true; // no letter, digit or ideograph
        };
        let last = classes.iter().rposition(joins).unwrap_or(first);
        if classes[first..=last].iter().all(|c| matches!(c, Wb::Letter | Wb::Numeric)) {
            emit(Token::Normalized(&norm[offsets[first]..offsets[last + 1]]));
            return true;
        }
        segment(classes.len(), |i| classes[i], |a, b| emit(Token::Normalized(&norm[offsets[a]..offsets[b]])));
        true
    }

    fn unicode_words(&self, norm: &str, emit: &mut impl FnMut(&str)) {
        match self.cjk {
            CjkSegmenter::Chars => norm.unicode_words().for_each(emit),
            CjkSegmenter::Jieba => self.jieba_words(norm, emit),
        }
    }

    #[cfg(feature = "cjk")]
    fn jieba_words(&self, norm: &str, emit: &mut impl FnMut(&str)) {
        let Some(jieba) = &self.jieba else {
            return norm.unicode_words().for_each(emit);
        };
        // alternate between maximal runs of Han ideographs (jieba) and the rest (UAX #29)
        let mut rest = norm;
        while let Some(first) = rest.chars().next() {
            let han = is_han(first);
            let end = rest.char_indices().find(|&(_, c)| is_han(c) != han).map_or(rest.len(), |(i, _)| i);
            let (run, tail) = rest.split_at(end);
            if han {
                for token in jieba.cut(run, false) {
                    emit(token.word);
                }
            } else {
                run.unicode_words().for_each(&mut *emit);
            }
            rest = tail;
        }
    }

    #[cfg(not(feature = "cjk"))]
    fn jieba_words(&self, norm: &str, emit: &mut impl FnMut(&str)) {
        // unreachable in practice: `new` refuses Jieba without the feature
        norm.unicode_words().for_each(emit)
    }

    /// The normalised words of `text`, collected (convenience for tests and tools).
    pub fn collect_words(&mut self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut buf = String::new();
        self.words(text, |t| out.push(t.normalized(&mut buf).to_owned()));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn words(s: &str) -> Vec<String> {
        Tokenizer::new(CjkSegmenter::Chars).unwrap().collect_words(s)
    }

    #[test]
    fn english_words() {
        assert_eq!(words("The cat sat on the mat."), ["the", "cat", "sat", "on", "the", "mat"]);
        assert_eq!(words("can't e.g. 3.14 1,000 foo_bar std::vec a:b"), ["can't", "e.g", "3.14", "1,000", "foo_bar", "std", "vec", "a:b"]);
    }

    #[test]
    fn other_scripts() {
        assert_eq!(words("Привет, МИР!"), ["привет", "мир"]);
        assert_eq!(words("مرحبا بالعالم"), ["مرحبا", "بالعالم"]);
        assert_eq!(words("回家吃饭"), ["回", "家", "吃", "饭"]);
    }

    #[cfg(feature = "cjk")]
    #[test]
    fn jieba_segments_han_runs() {
        let mut t = Tokenizer::new(CjkSegmenter::Jieba).unwrap();
        let w = t.collect_words("你妈妈喊你回家吃饭哦,Hello");
        assert!(w.contains(&"妈妈".to_owned()) && w.contains(&"吃饭".to_owned()), "{w:?}");
        assert_eq!(w.last().map(String::as_str), Some("hello"));
    }

    #[test]
    fn plain_characters_are_normalised_lowercase() {
        use unicode_normalization::char::canonical_combining_class;
        use unicode_normalization::UnicodeNormalization;
        for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
            if let Some((n, class)) = plain(c) {
                let nfkc: String = std::iter::once(c).nfkc().collect();
                assert_eq!(nfkc.to_lowercase(), n.to_string(), "{c:?}");
                assert_eq!(canonical_combining_class(c), 0, "{c:?}");
                assert_eq!(plain(n), Some((n, class)), "{c:?}: the form is plain too");
            }
        }
    }

    proptest! {
        // plain non-ASCII chunks take their own path; it equals the recipe's definition
        // (per chunk at ASCII whitespace: NFKC, lowercase, unicode_words)
        #[test]
        fn plain_path_matches_uax29(s in "[a-cA-C0-2_:.,;' àÀßΣσςжЖЁёΩشبه中文回家다이는한\u{1100}\u{1161}\u{301}\u{64B}ﬁ«»–—‘’“”؟、。،٫！（），：；？-]{0,30}") {
            let mut expected = Vec::new();
            for chunk in s.split(|c: char| c.is_ascii_whitespace()) {
                let mut norm = String::new();
                super::super::normalize::nfkc_lower_into(chunk, &mut norm);
                expected.extend(norm.unicode_words().map(str::to_owned));
            }
            prop_assert_eq!(words(&s), expected);
        }

        // the ASCII fast path equals unicode-segmentation on ASCII text
        #[test]
        fn ascii_path_matches_uax29(s in "[a-cA-C0-2_:.,;' \t\n!@#()\"-]{0,40}") {
            let expected: Vec<String> = s.unicode_words().map(|w| w.to_ascii_lowercase()).collect();
            prop_assert_eq!(words(&s), expected);
        }

        // the word scan hands each Unicode chunk's sink its NFKC and lowercase, as
        // `nfkc_lower_into` makes it, whichever path (plain or not) cut its words
        #[test]
        fn sinks_get_the_chunks_normalised_form(s in "[a-cA-C0-2_:.,;' àÀßΣσςжЖЁёΩشبه中文回家다한ｶﾞ\u{301}\u{64B}\u{1100}\u{1161}ﬁ½Ⅻ«»–—‘’“”؟、。،٫！（），：；？-]{0,30}") {
            struct Forms(Vec<(String, String)>);
            impl ChunkSink for Forms {
                fn alnum(&mut self, _: u64) {}
                fn other(&mut self, chunk: &str, kind: ChunkKind, normalized: Option<&str>) {
                    assert_eq!(normalized.is_some(), kind == ChunkKind::Unicode, "{chunk:?}");
                    if let Some(n) = normalized {
                        self.0.push((chunk.to_owned(), n.to_owned()));
                    }
                }
            }
            let mut forms = Forms(Vec::new());
            Tokenizer::new(CjkSegmenter::Chars).unwrap().word_hashes_and(&s, |_| {}, &mut forms);
            for (chunk, n) in forms.0 {
                let mut expected = String::new();
                super::super::normalize::nfkc_lower_into(&chunk, &mut expected);
                prop_assert_eq!(n, expected, "{:?}", chunk);
            }
        }

        // the hashes-only path hashes the same words
        #[test]
        fn word_hashes_are_the_hashes_of_the_words(
            s in "([a-zA-Z0-9]{1,12}|[_:.,;'()!-]|é|Ж|中|다|’|“|\u{301}|ﬁ|[ \t\n]){0,60}"
        ) {
            let mut t = Tokenizer::new(CjkSegmenter::Chars).unwrap();
            let mut hashes = Vec::new();
            t.word_hashes(&s, |h| hashes.push(h));
            let expected: Vec<u64> = words(&s).iter().map(|w| sfh64(seed::WORD, w.as_bytes())).collect();
            prop_assert_eq!(hashes, expected);
        }
    }
}
