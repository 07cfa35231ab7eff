//! Text normalisation: Unicode NFKC followed by full lowercase mapping ("case folding" in the
//! recipe), with an ASCII fast path. Owns nothing else: where words begin and end is
//! `tokenize`'s business.
//!
//! ASCII is invariant under NFKC, and its lowercase mapping is `A-Z -> a-z`, so ASCII text
//! takes a byte loop; anything else goes through `unicode-normalization` and
//! `char::to_lowercase`.

use unicode_normalization::{is_nfkc_quick, IsNormalized, UnicodeNormalization};

/// Appends NFKC(`text`), lowercased char by char, to `out`.
pub fn nfkc_lower_into(text: &str, out: &mut String) {
    if text.is_ascii() {
        ascii_lower_into(text, out);
        return;
    }
    if is_nfkc_quick(text.chars()) == IsNormalized::Yes {
        // already NFKC (the common case): only lowercase
        if !text.chars().any(may_change_when_lowercased) {
            out.push_str(text);
            return;
        }
        for c in text.chars() {
            out.extend(c.to_lowercase());
        }
        return;
    }
    for c in text.nfkc() {
        if c.is_ascii() {
            out.push(c.to_ascii_lowercase());
        } else {
            out.extend(c.to_lowercase());
        }
    }
}

/// False only where `char::to_lowercase(c)` is `c` itself: true for uppercase letters and the
/// titlecase digraphs (checked over every char by a test).
fn may_change_when_lowercased(c: char) -> bool {
    c.is_uppercase()
        || matches!(c, '\u{1C5}' | '\u{1C8}' | '\u{1CB}' | '\u{1F2}' | '\u{1F88}'..='\u{1F8F}'
            | '\u{1F98}'..='\u{1F9F}' | '\u{1FA8}'..='\u{1FAF}' | '\u{1FBC}' | '\u{1FCC}' | '\u{1FFC}')
}

/// Appends the ASCII lowercase of `text` (which must be ASCII) to `out`.
#[inline]
pub fn ascii_lower_into(text: &str, out: &mut String) {
    debug_assert!(text.is_ascii());
    let start = out.len();
    out.push_str(text);
    out[start..].make_ascii_lowercase();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(s: &str) -> String {
        let mut out = String::new();
        nfkc_lower_into(s, &mut out);
        out
    }

    #[test]
    fn may_change_when_lowercased_is_sound() {
        for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
            let mut l = c.to_lowercase();
            let same = l.next() == Some(c) && l.next().is_none();
            assert!(same || may_change_when_lowercased(c), "U+{:04X}", c as u32);
        }
    }

    #[test]
    fn nfkc_and_lowercase() {
        assert_eq!(norm("Hello WORLD"), "hello world");
        assert_eq!(norm("ＡＢＣ１２"), "abc12"); // fullwidth forms
        assert_eq!(norm("ﬁne"), "fine"); // ligature
        assert_eq!(norm("Straße"), "straße");
        assert_eq!(norm("ПРИВЕТ"), "привет");
        assert_eq!(norm("e\u{301}"), "\u{e9}"); // composed
        assert_eq!(norm("a\u{a0}b"), "a b"); // no-break space becomes a space
    }
}
