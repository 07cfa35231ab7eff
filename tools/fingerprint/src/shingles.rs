//! The sketch's shingle set of a text (recipe steps 1 and 2 of `sketch`'s module docs: the
//! ground truth's tokens, word 3-shingles), made one chunk at a time as the fingerprint's
//! word scan passes them, so that one scan of the text serves both.
//!
//! The chunks are the runs between ASCII whitespace (`chunks`). A token never spans ASCII
//! whitespace, and NFKC and the lowercase mapping act on each chunk alone (ASCII whitespace
//! neither composes with a neighbour nor changes), so the chunks' tokens in order are the
//! whole text's. A chunk of ASCII letters and digits is one token whose hash is the
//! fingerprint's word hash of it (`sfh64(0, ascii lowercase)`), shared; a chunk of ASCII with
//! punctuation is cut at bytes other than `[A-Za-z0-9_]`; any other chunk is normalised and
//! cut by the token rule ([`tokens`]).

// Indexing: chunk bytes are indexed at positions the scan found.
#![allow(clippy::indexing_slicing)]

use super::chunks::ChunkKind;
use super::hash::{combine, seed, sfh64, sfh64_ascii_lower_at};
use super::normalize::nfkc_lower_into;
use super::tokenize::ChunkSink;
use unicode_normalization::char::is_combining_mark;

/// The shingle set of a text fed chunk by chunk, in order (a [`ChunkSink`] of the word
/// scan, `Tokenizer::word_hashes_and`), into a sketcher's buffers.
pub(crate) struct ShingleScan<'a> {
    /// The last three token hashes, the newest last.
    recent: [u64; 3],
    /// Tokens so far.
    n: usize,
    shingles: &'a mut Vec<u64>,
    /// A normalised chunk.
    norm: &'a mut String,
}

impl<'a> ShingleScan<'a> {
    /// A scan into `shingles` (cleared), `norm` its buffer for normalised chunks.
    pub(crate) fn new(shingles: &'a mut Vec<u64>, norm: &'a mut String) -> Self {
        shingles.clear();
        ShingleScan { recent: [0; 3], n: 0, shingles, norm }
    }

    #[inline]
    fn token(&mut self, h: u64) {
        self.recent = [self.recent[1], self.recent[2], h];
        self.n += 1;
        if self.n >= 3 {
            self.shingles.push(combine(combine(self.recent[0], self.recent[1]), self.recent[2]));
        }
    }

    /// The shingles in text order, with repeats (a text of one or two tokens: one shingle of
    /// them all); the set is these sorted and deduplicated (`Sketcher::last_shingles`).
    pub(crate) fn finish(self) -> &'a [u64] {
        if (1..3).contains(&self.n) {
            let first = 3 - self.n;
            let s = self.recent[first + 1..].iter().fold(self.recent[first], |acc, &t| combine(acc, t));
            self.shingles.push(s);
        }
        self.shingles
    }
}

impl ChunkSink for ShingleScan<'_> {
    #[inline]
    fn alnum(&mut self, hash: u64) {
        self.token(hash);
    }

    fn other(&mut self, chunk: &str, kind: ChunkKind, normalized: Option<&str>) {
        if kind != ChunkKind::Unicode {
            // ASCII: NFKC leaves it, the tokens are the runs of `[A-Za-z0-9_]`, lowercased
            let bytes = chunk.as_bytes();
            let mut start = None;
            for (i, b) in bytes.iter().enumerate() {
                match (b.is_ascii_alphanumeric() || *b == b'_', start) {
                    (true, None) => start = Some(i),
                    (false, Some(s)) => {
                        self.token(sfh64_ascii_lower_at(seed::WORD, bytes, s, i));
                        start = None;
                    }
                    _ => {}
                }
            }
            if let Some(s) = start {
                self.token(sfh64_ascii_lower_at(seed::WORD, bytes, s, bytes.len()));
            }
            return;
        }
        if let Some(n) = normalized.filter(|n| !n.contains(['ß', 'ς'])) {
            // the word scan's normalised form, used as it is (no fold to make)
            tokens(n, |token| self.token(sfh64(seed::WORD, token.as_bytes())));
            return;
        }
        let mut norm = std::mem::take(self.norm);
        norm.clear();
        match normalized {
            Some(n) => norm.push_str(n),
            None => nfkc_lower_into(chunk, &mut norm),
        }
        if !norm.is_ascii() && norm.contains(['ß', 'ς']) {
            norm = norm.replace('ß', "ss").replace('ς', "σ");
        }
        tokens(&norm, |token| self.token(sfh64(seed::WORD, token.as_bytes())));
        *self.norm = norm;
    }
}

/// True for the characters that are tokens of their own (Han, Hiragana, Katakana).
fn is_cjk(c: char) -> bool {
    matches!(c, '\u{3040}'..='\u{30ff}' | '\u{3400}'..='\u{4dbf}' | '\u{4e00}'..='\u{9fff}' | '\u{f900}'..='\u{faff}')
}

/// The token rule's word characters: alphabetic but not a combining mark, numeric, or `_`
/// (Python's `\w`).
fn is_word_char_by_definition(c: char) -> bool {
    (c.is_alphabetic() && !is_combining_mark(c)) || c.is_numeric() || c == '_'
}

/// [`is_word_char_by_definition`], by a table below U+0800 (Latin, Greek, Cyrillic, Arabic)
/// and at once for Hangul syllables (letters, never marks): the common characters skip
/// the Unicode tables' searches.
#[inline]
fn is_word_char(c: char) -> bool {
    static TABLE: std::sync::OnceLock<Box<[bool; 0x800]>> = std::sync::OnceLock::new();
    match c as u32 {
        u @ 0..=0x7FF => {
            let table = TABLE.get_or_init(|| {
                let mut t = Box::new([false; 0x800]);
                for (u, entry) in t.iter_mut().enumerate() {
                    *entry = char::from_u32(u as u32).is_some_and(is_word_char_by_definition);
                }
                t
            });
            table[u as usize]
        }
        0xAC00..=0xD7A3 => true,
        _ => is_word_char_by_definition(c),
    }
}

/// Calls `emit` with every token of normalised `text` (see the module docs).
pub(crate) fn tokens(text: &str, mut emit: impl FnMut(&str)) {
    let mut start: Option<usize> = None;
    for (i, c) in text.char_indices() {
        if is_cjk(c) {
            if let Some(s) = start.take() {
                emit(&text[s..i]);
            }
            emit(&text[i..i + c.len_utf8()]);
        } else if is_word_char(c) {
            start.get_or_insert(i);
        } else if let Some(s) = start.take() {
            emit(&text[s..i]);
        }
    }
    if let Some(s) = start {
        emit(&text[s..]);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Recipe steps 1 and 2 over the whole text at once, as `format-spec/sketch.md` states
    /// them (NFKC and lowercase of the text, the folds, the tokens, the 3-shingles): the
    /// oracle of the chunk-wise scan.
    fn whole_text_shingles(text: &str) -> Vec<u64> {
        let mut norm = String::new();
        nfkc_lower_into(text, &mut norm);
        let norm = norm.replace('ß', "ss").replace('ς', "σ");
        let mut hashes = Vec::new();
        tokens(&norm, |t| hashes.push(sfh64(seed::WORD, t.as_bytes())));
        let mut out: Vec<u64> = hashes.windows(3).map(|w| combine(combine(w[0], w[1]), w[2])).collect();
        if (1..3).contains(&hashes.len()) {
            out.push(hashes[1..].iter().fold(hashes[0], |acc, &t| combine(acc, t)));
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    fn chunkwise(text: &str) -> Vec<u64> {
        let (mut shingles, mut norm) = (Vec::new(), String::new());
        let mut scan = ShingleScan::new(&mut shingles, &mut norm);
        crate::tokenize::feed_chunks(text, &mut scan);
        let mut set = scan.finish().to_vec();
        set.sort_unstable();
        set.dedup();
        set
    }

    #[test]
    fn the_word_character_table_is_the_definition() {
        for c in (0..0x800).chain(0xAC00..=0xD7A3).filter_map(char::from_u32) {
            assert_eq!(is_word_char(c), is_word_char_by_definition(c), "{c:?}");
        }
    }

    #[test]
    fn chunks_give_the_whole_texts_shingles() {
        for text in ["", "one", "two words", "Rust 1.95.0: don't_panic!", "ΛΌΓΟΣ\u{a0}λόγος straße", "a\u{301} \u{301}b ｶﾞ ﬁ½", "x\u{b}y z\u{3000}w"] {
            assert_eq!(chunkwise(text), whole_text_shingles(text), "{text:?}");
        }
    }

    proptest! {
        #[test]
        fn chunkwise_shingles_are_the_whole_texts(s in "[a-cA-C0-2_:.,;'! \t\n\u{b}\u{a0}\u{3000}àÀßΣσςжЁ中文回ｶﾞﬁ½Ⅻ\u{301}\u{64B}\u{1100}\u{1161}]{0,40}") {
            prop_assert_eq!(chunkwise(&s), whole_text_shingles(&s));
        }
    }
}
