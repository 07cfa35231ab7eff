//! The common JSON-lines record read without a JSON tree: an object whose members are all
//! strings, `id` and one of `text` and `html`, each once, their keys without escapes.
//! [`plain_record`] decodes such a line straight into the id and body strings (one
//! allocation each, no map, no keys); for any other line it says `None` and
//! [`crate::JsonDoc`] parses the line with serde_json as before, which then decides what the
//! line is and words its error. So a line read here is read as serde_json reads it: the
//! same whitespace (RFC 8259's four characters), the same escapes (a surrogate pair by
//! `\u` escapes is one character; a lone surrogate, a control character in a string or an
//! unknown escape is left to serde_json), nothing but whitespace after the object.

// Indexing: positions are checked against the line's length before each read.
#![allow(clippy::indexing_slicing)]

/// The id, whether the body is `html` (else `text`), and the body of `line` when it is a
/// plain record (see the module's comment); `None` otherwise.
pub(crate) fn plain_record(line: &str) -> Option<(String, bool, String)> {
    plain_record_with(line, Scan::string)
}

/// [`plain_record`] of a line it owns, the body decoded in the line's own buffer (JSON's
/// escapes are never shorter than what they decode to): no allocation for the body, the
/// line's allocation becomes it. The line back (`Err`) when it is not a plain record.
pub(crate) fn plain_record_owned(line: String) -> Result<(String, bool, String), String> {
    let Some((id, html, body)) = plain_record_with(&line, Scan::string_raw) else { return Err(line) };
    // the id again, decoded (short); the body in place
    let Some(id) = (Scan { s: &line, at: id.start - 1 }).string() else { return Err(line) };
    decode_in_place(line, body).map(|body| (id, html, body))
}

/// The members of `line` when it is a plain record, each string read by `string`.
fn plain_record_with<'s, T>(line: &'s str, mut string: impl FnMut(&mut Scan<'s>) -> Option<T>) -> Option<(T, bool, T)> {
    let mut p = Scan { s: line, at: 0 };
    p.whitespace();
    p.expect(b'{')?;
    let (mut id, mut text, mut html) = (None, None, None);
    loop {
        p.whitespace();
        let key = p.plain_key()?;
        p.whitespace();
        p.expect(b':')?;
        p.whitespace();
        let member = match key {
            "id" => &mut id,
            "text" => &mut text,
            "html" => &mut html,
            _ => return None,
        };
        if member.is_some() {
            return None;
        }
        *member = Some(string(&mut p)?);
        p.whitespace();
        match p.next()? {
            b',' => continue,
            b'}' => break,
            _ => return None,
        }
    }
    p.whitespace();
    if p.at != line.len() {
        return None;
    }
    let (html, body) = match (text, html) {
        (Some(t), None) => (false, t),
        (None, Some(h)) => (true, h),
        _ => return None,
    };
    Some((id?, html, body))
}

/// The JSON string `line[raw]` (between its quotes; read by [`Scan::string_raw`]), decoded
/// in the line's buffer, which becomes the string. Each decoded run or escape is written at
/// or before where it was read, so nothing is overwritten before it is read. Should it not
/// decode (never, once `string_raw` accepted it) the line is gone: an empty line, which
/// serde_json refuses.
fn decode_in_place(line: String, raw: std::ops::Range<usize>) -> Result<String, String> {
    let mut bytes = line.into_bytes();
    let (mut w, mut r) = (0, raw.start);
    loop {
        let k = r + memchr::memchr(b'\\', &bytes[r..raw.end]).unwrap_or(raw.end - r);
        bytes.copy_within(r..k, w);
        w += k - r;
        if k == raw.end {
            break;
        }
        // the escape after the backslash, at most 11 ASCII bytes (a surrogate pair), read by
        // the scanner from a prefix of what follows that is valid UTF-8
        let after = &bytes[k + 1..raw.end.min(k + 12)];
        let valid = std::str::from_utf8(after).or_else(|e| std::str::from_utf8(&after[..e.valid_up_to()]));
        let mut escape = Scan { s: valid.unwrap_or_default(), at: 0 };
        let Some(c) = escape.escape() else { return Err(String::new()) };
        let read = escape.at;
        let mut utf8 = [0u8; 4];
        let c = c.encode_utf8(&mut utf8).as_bytes();
        bytes[w..w + c.len()].copy_from_slice(c);
        w += c.len();
        r = k + 1 + read;
    }
    bytes.truncate(w);
    owned_utf8(bytes).map_err(|_| String::new())
}

/// `String::from_utf8`, the bytes validated by SIMD (std's validation was a pass of its own
/// over every line and again over its body, decoded in place).
pub(crate) fn owned_utf8(bytes: Vec<u8>) -> Result<String, Vec<u8>> {
    if simdutf8::basic::from_utf8(&bytes).is_err() {
        return Err(bytes);
    }
    // SAFETY: simdutf8 just found `bytes` valid UTF-8 (its `basic` validator errs exactly on
    // invalid input), which is from_utf8_unchecked's one requirement.
    Ok(unsafe { String::from_utf8_unchecked(bytes) })
}

struct Scan<'a> {
    s: &'a str,
    at: usize,
}

impl<'a> Scan<'a> {
    fn bytes(&self) -> &'a [u8] {
        self.s.as_bytes()
    }

    fn next(&mut self) -> Option<u8> {
        let b = *self.bytes().get(self.at)?;
        self.at += 1;
        Some(b)
    }

    fn expect(&mut self, b: u8) -> Option<()> {
        (self.next()? == b).then_some(())
    }

    /// JSON's whitespace: space, tab, line feed, carriage return.
    fn whitespace(&mut self) {
        while matches!(self.bytes().get(self.at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// Where the next `"`, `\` or control character is, from `at` on.
    fn special(&self) -> Option<usize> {
        let rest = &self.bytes()[self.at..];
        // the quote or backslash by SIMD search, then the run before it tested for control
        // characters without a branch a byte (the compiler vectorizes the fold)
        let end = memchr::memchr2(b'"', b'\\', rest).unwrap_or(rest.len());
        let run = &rest[..end];
        let control = run.iter().fold(false, |any, &c| any | (c < 0x20));
        let k = if control { run.iter().position(|&c| c < 0x20)? } else { end };
        (k < rest.len()).then_some(self.at + k)
    }

    /// A key: a string without escapes.
    fn plain_key(&mut self) -> Option<&'a str> {
        self.expect(b'"')?;
        let end = self.special()?;
        if self.bytes()[end] != b'"' {
            return None;
        }
        let key = self.s.get(self.at..end)?;
        self.at = end + 1;
        Some(key)
    }

    /// A string, its escapes decoded.
    fn string(&mut self) -> Option<String> {
        self.expect(b'"')?;
        // the decoded string is at most as long as its JSON form: up to the first quote not
        // escaped (one after an even run of backslashes)
        let rest = &self.bytes()[self.at..];
        let raw = memchr::memchr_iter(b'"', rest).find(|&q| rest[..q].iter().rev().take_while(|&&c| c == b'\\').count() % 2 == 0);
        let mut out = String::with_capacity(raw.unwrap_or(0));
        loop {
            let end = self.special()?;
            // `end` is at an ASCII byte, so a character boundary
            out.push_str(self.s.get(self.at..end)?);
            self.at = end + 1;
            match self.bytes()[end] {
                b'"' => return Some(out),
                b'\\' => out.push(self.escape()?),
                _ => return None,
            }
        }
    }

    /// [`Scan::string`] without decoding it: where its body is (between the quotes), once
    /// it reads as `string` would read it.
    fn string_raw(&mut self) -> Option<std::ops::Range<usize>> {
        self.expect(b'"')?;
        let start = self.at;
        loop {
            let end = self.special()?;
            self.at = end + 1;
            match self.bytes()[end] {
                b'"' => return Some(start..end),
                b'\\' => {
                    self.escape()?;
                }
                _ => return None,
            }
        }
    }

    /// The character of the escape after a `\`.
    fn escape(&mut self) -> Option<char> {
        Some(match self.next()? {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let first = self.hex4()?;
                let code = match first {
                    0xD800..=0xDBFF => {
                        self.expect(b'\\')?;
                        self.expect(b'u')?;
                        let second = self.hex4()?;
                        if !(0xDC00..=0xDFFF).contains(&second) {
                            return None;
                        }
                        0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
                    }
                    0xDC00..=0xDFFF => return None,
                    c => c,
                };
                char::from_u32(code)?
            }
            _ => return None,
        })
    }

    /// Four hex digits.
    fn hex4(&mut self) -> Option<u32> {
        let mut v = 0;
        for _ in 0..4 {
            v = v * 16 + char::from(self.next()?).to_digit(16)?;
        }
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The oracle: serde_json's reading of the line as the record it is (`None`: not a
    /// record with a string id and exactly one of text and html, all strings).
    fn by_serde(line: &str) -> Option<(String, bool, String)> {
        let serde_json::Value::Object(mut obj) = serde_json::from_str(line).ok()? else { return None };
        let id = match obj.remove("id")? {
            serde_json::Value::String(s) => s,
            _ => return None,
        };
        match (obj.remove("text"), obj.remove("html")) {
            (Some(serde_json::Value::String(t)), None) => Some((id, false, t)),
            (None, Some(serde_json::Value::String(h))) => Some((id, true, h)),
            _ => None,
        }
    }

    /// What this reader reads it must read as serde_json does; what it leaves may be
    /// anything.
    fn agrees(line: &str) {
        // read in the line's own buffer, the same
        assert_eq!(plain_record_owned(line.to_owned()).ok(), plain_record(line), "{line:?}");
        if let Some(fast) = plain_record(line) {
            assert_eq!(Some(fast), by_serde(line), "{line:?}");
        }
    }

    /// A JSON string's body for `s`, each character written one of the ways JSON allows
    /// (`style` picks per character: raw where allowed, a short escape, `\u` lower or upper
    /// case, a surrogate pair for characters beyond the BMP).
    fn encode(s: &str, style: &[u8]) -> String {
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            let pick = style.get(i % style.len().max(1)).copied().unwrap_or(0) % 4;
            let short = match c {
                '"' => Some("\\\""),
                '\\' => Some("\\\\"),
                '\n' => Some("\\n"),
                '\t' => Some("\\t"),
                '\r' => Some("\\r"),
                '\u{8}' => Some("\\b"),
                '\u{c}' => Some("\\f"),
                '/' if pick == 1 => Some("\\/"),
                _ => None,
            };
            let must_escape = c == '"' || c == '\\' || (c as u32) < 0x20;
            match (pick, short) {
                (0 | 1, Some(e)) => out.push_str(e),
                (0 | 1, None) if !must_escape => out.push(c),
                _ => {
                    let mut units = [0u16; 2];
                    for u in c.encode_utf16(&mut units) {
                        if pick == 3 {
                            out.push_str(&format!("\\u{u:04X}"));
                        } else {
                            out.push_str(&format!("\\u{u:04x}"));
                        }
                    }
                }
            }
        }
        out
    }

    fn text_chars() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![
                4 => proptest::char::range('a', 'z'),
                1 => Just(' '),
                1 => prop_oneof![Just('"'), Just('\\'), Just('/'), Just('\n'), Just('\t'), Just('\r'), Just('\u{0}'), Just('\u{1f}'), Just('\u{8}'), Just('\u{c}')],
                1 => prop_oneof![Just('é'), Just('你'), Just('\u{FFFD}'), Just('😀'), Just('\u{10FFFF}'), Just('\u{7f}'), Just('\u{2028}')],
                1 => any::<char>(),
            ],
            0..80,
        )
        .prop_map(|v| v.into_iter().collect())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Records written every way JSON allows (escapes, unicode, surrogate pairs, empty
        /// strings, whitespace, either member order, text or html) read as serde_json reads
        /// them, and always by this reader.
        #[test]
        fn records_read_as_serde_json_reads_them(
            id in text_chars(), body in text_chars(), html: bool, id_first: bool,
            style in proptest::collection::vec(any::<u8>(), 1..8),
            ws in proptest::collection::vec(prop_oneof![Just(""), Just(" "), Just("\t"), Just("\r\n"), Just("  \n")], 7),
        ) {
            let field = if html { "html" } else { "text" };
            let id_member = format!("\"id\"{}:{}\"{}\"", ws[0], ws[1], encode(&id, &style));
            let body_member = format!("\"{field}\"{}:{}\"{}\"", ws[2], ws[3], encode(&body, &style));
            let (a, b) = if id_first { (id_member, body_member) } else { (body_member, id_member) };
            let line = format!("{}{{{}{a}{},{}{b}{}}}{}", ws[4], ws[5], ws[6], ws[5], ws[4], ws[6]);
            prop_assert_eq!(plain_record(&line), Some((id, html, body)), "{:?}", line);
            agrees(&line);
        }

        /// Records broken or unusual at any byte (cut, a byte changed, a character inserted):
        /// whatever this reader still reads, serde_json reads the same.
        #[test]
        fn changed_records_are_read_as_serde_json_reads_them(
            id in text_chars(), body in text_chars(), style in proptest::collection::vec(any::<u8>(), 1..8),
            at: prop::sample::Index, cut: bool,
            insert in prop_oneof![Just("\\"), Just("\""), Just("\\u"), Just("\\ud800"), Just("\\udc00"), Just("\\uD83D\\uDE00"), Just(","), Just("}"), Just("{"), Just(" "), Just("\u{1}"), Just("\\x"), Just("\"id\":\"z\","), Just("\"n\":1,"), Just("\"text\":\"t\",")],
        ) {
            let line = format!("{{\"id\":\"{}\",\"text\":\"{}\"}}", encode(&id, &style), encode(&body, &style));
            let mut at = at.index(line.len() + 1);
            while !line.is_char_boundary(at) {
                at -= 1;
            }
            agrees(&line[..at]);
            let changed = if cut {
                let mut s = line.clone();
                if at < s.len() {
                    s.remove(at);
                }
                s
            } else {
                format!("{}{insert}{}", &line[..at], &line[at..])
            };
            agrees(&changed);
        }
    }

    /// Lines this reader leaves to serde_json, each for its reason.
    #[test]
    fn unusual_lines_are_left_to_serde_json() {
        for line in [
            r#"{"id": 7, "text": "a"}"#,
            r#"{"id": "a", "text": "b", "lang": "en"}"#,
            r#"{"id": "a", "text": "b", "id": "c"}"#,
            r#"{"id": "a", "text": "b", "html": "c"}"#,
            r#"{"i\u0064": "a", "text": "b"}"#,
            r#"{"id": "a", "text": null}"#,
            r#"{"id": "a"}"#,
            r#"{"id": "a", "text": "b",}"#,
            r#"{"id": "a", "text": "b"} x"#,
            r#"{"id": "a", "text": "\ud800"}"#,
            r#"{"id": "a", "text": "\udc00\ud800"}"#,
            r#"{"id": "a", "text": "\ud800\u0041"}"#,
            r#"{"id": "a", "text": "\q"}"#,
            "{\"id\": \"a\", \"text\": \"tab\there\"}",
            "{\"id\": \"a\",\u{a0}\"text\": \"b\"}",
            r#"["id", "text"]"#,
            "",
            "{}",
        ] {
            assert_eq!(plain_record(line), None, "{line:?}");
            agrees(line);
        }
    }

    /// The common line and the empty text.
    #[test]
    fn plain_records() {
        assert_eq!(plain_record("{\"id\": \"d1\", \"text\": \"\"}\n"), Some(("d1".into(), false, String::new())));
        assert_eq!(plain_record(r#"{"id":"x","html":"<p>caf\u00e9 \"q\" \ud83d\ude00 a\/b</p>"}"#), Some(("x".into(), true, "<p>café \"q\" 😀 a/b</p>".into())));
        let long = "word ".repeat(100) + "\\n" + &"é".repeat(50);
        agrees(&format!("{{\"id\":\"l\",\"text\":\"{long}\"}}"));
        assert_eq!(plain_record(&format!("{{\"id\":\"l\",\"text\":\"{long}\"}}")).map(|r| r.2), Some("word ".repeat(100) + "\n" + &"é".repeat(50)));
    }
}
