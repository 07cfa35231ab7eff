//! Text normalisation: Unicode NFKC followed by full lowercase mapping ("case folding" in the
//! recipe), with an ASCII fast path. Owns nothing else: where words begin and end is
//! `tokenize`'s business.
//!
//! ASCII is invariant under NFKC, and its lowercase mapping is `A-Z -> a-z`, so ASCII text
//! takes a byte loop; anything else goes through `unicode-normalization` and
//! `char::to_lowercase`.

use unicode_normalization::UnicodeNormalization;

/// Appends NFKC(`text`), lowercased char by char, to `out`.
pub fn nfkc_lower_into(text: &str, out: &mut String) {
    if text.is_ascii() {
        ascii_lower_into(text, out);
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

/// Appends the ASCII lowercase of `text` (which must be ASCII) to `out`.
#[inline]
pub fn ascii_lower_into(text: &str, out: &mut String) {
    debug_assert!(text.is_ascii());
    out.extend(text.bytes().map(|b| char::from(b.to_ascii_lowercase())));
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
