//! Reading documents: bytes -> text for the fingerprinter.
//!
//! Owns UTF-8 repair (invalid sequences replaced by U+FFFD and counted, or refused in strict
//! mode), refusing binary documents (a NUL byte in the first [`BINARY_SNIFF_BYTES`]), streaming plain text with bounded memory, and JSON-lines documents
//! (`{"id": ..., "text": ...}` or `{"id": ..., "html": ...}`, cargo feature `jsonl`). HTML's
//! visible text is `html`'s business.

// Indexing: reading buffers are sliced at lengths the reader filled; invalid UTF-8 is found by simdutf8, not by indexing.
#![allow(clippy::indexing_slicing)]

use super::{Error, Fingerprint, Fingerprinter};
use std::io::Read;

/// `std::str::from_utf8`, validated by SIMD first: valid text (nearly all of it) never takes
/// std's byte-at-a-time path for non-ASCII characters; invalid text gets std's error.
#[inline]
pub(crate) fn utf8(bytes: &[u8]) -> Result<&str, std::str::Utf8Error> {
    simdutf8::basic::from_utf8(bytes).or_else(|_| std::str::from_utf8(bytes))
}

/// Block size for streaming reads.
const BLOCK: usize = 16 * 1024;

/// A NUL byte among a document's first this many bytes makes it binary (an executable, an
/// image, UTF-16 text): it is refused with [`Error::BinaryDocument`] rather than fingerprinted
/// as replacement characters. Git and grep use the same test.
pub const BINARY_SNIFF_BYTES: u64 = 8000;

/// What to do with bytes that are not UTF-8.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InvalidUtf8 {
    /// Replace each invalid sequence by U+FFFD and count it.
    #[default]
    Replace,
    /// Refuse the document with [`Error::InvalidUtf8`].
    Refuse,
}

/// Validates UTF-8 as it streams: complete, valid text comes out in blocks.
#[derive(Debug)]
pub struct Utf8Stream<R> {
    inner: R,
    utf8: InvalidUtf8,
    /// bytes read but not yet decoded: an incomplete sequence at the end of the last block
    carry: Vec<u8>,
    buf: Vec<u8>,
    out: String,
    /// bytes of `out` already handed out by `Read::read`
    served: usize,
    offset: u64,
    /// raw bytes read from `inner` so far (where the binary test stands)
    read: u64,
    replaced: u64,
    eof: bool,
}

impl<R: Read> Utf8Stream<R> {
    /// Reads `inner`; with [`InvalidUtf8::Refuse`] the first invalid byte is an error.
    pub fn new(inner: R, utf8: InvalidUtf8) -> Self {
        Utf8Stream { inner, utf8, carry: Vec::new(), buf: vec![0; BLOCK], out: String::new(), served: 0, offset: 0, read: 0, replaced: 0, eof: false }
    }

    /// Invalid sequences replaced so far (each maximal invalid subpart counts once, as in
    /// `String::from_utf8_lossy`).
    pub fn replaced(&self) -> u64 {
        self.replaced
    }

    /// The next block of text, `None` at the end.
    pub fn next_block(&mut self) -> Result<Option<&str>, Error> {
        self.out.clear();
        self.served = 0;
        while self.out.is_empty() {
            if self.eof {
                return Ok(None);
            }
            let n = loop {
                match self.inner.read(&mut self.buf) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e.into()),
                }
            };
            if self.read < BINARY_SNIFF_BYTES {
                let sniff = &self.buf[..n.min((BINARY_SNIFF_BYTES - self.read) as usize)];
                if let Some(at) = sniff.iter().position(|&b| b == 0) {
                    return Err(Error::BinaryDocument { offset: self.read + at as u64 });
                }
            }
            self.read += n as u64;
            if n == 0 {
                self.eof = true;
                if !self.carry.is_empty() {
                    // an incomplete sequence at the very end
                    self.invalid(0)?;
                    self.carry.clear();
                }
                continue;
            }
            let mut bytes = std::mem::take(&mut self.carry);
            bytes.extend_from_slice(&self.buf[..n]);
            self.decode(&bytes)?;
        }
        Ok(Some(&self.out))
    }

    fn invalid(&mut self, at: usize) -> Result<(), Error> {
        if self.utf8 == InvalidUtf8::Refuse {
            return Err(Error::InvalidUtf8 { offset: self.offset + at as u64 });
        }
        self.replaced += 1;
        self.out.push(char::REPLACEMENT_CHARACTER);
        Ok(())
    }

    fn decode(&mut self, mut bytes: &[u8]) -> Result<(), Error> {
        loop {
            match utf8(bytes) {
                Ok(s) => {
                    self.out.push_str(s);
                    self.offset += bytes.len() as u64;
                    return Ok(());
                }
                Err(e) => {
                    let (good, rest) = bytes.split_at(e.valid_up_to());
                    // `good` is valid UTF-8 by `valid_up_to`'s contract
                    self.out.push_str(std::str::from_utf8(good).unwrap_or_default());
                    self.offset += good.len() as u64;
                    match e.error_len() {
                        Some(len) => {
                            self.invalid(0)?;
                            self.offset += len as u64;
                            bytes = &rest[len..];
                        }
                        None => {
                            self.carry.extend_from_slice(rest);
                            return Ok(());
                        }
                    }
                }
            }
        }
    }
}

impl<R: Read> Read for Utf8Stream<R> {
    /// Valid UTF-8 bytes (for parsers that take a reader). Strict-mode errors become
    /// `io::ErrorKind::InvalidData`.
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.served == self.out.len() {
            match self.next_block() {
                Ok(Some(_)) => self.served = 0,
                Ok(None) => return Ok(0),
                Err(Error::Io(e)) => return Err(e),
                Err(e) => return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
            }
        }
        let rest = &self.out.as_bytes()[self.served..];
        let n = rest.len().min(out.len());
        out[..n].copy_from_slice(&rest[..n]);
        self.served += n;
        Ok(n)
    }
}

/// Decodes a whole byte string: the text and the number of replaced sequences.
pub fn decode_utf8(bytes: &[u8], invalid: InvalidUtf8) -> Result<(std::borrow::Cow<'_, str>, u64), Error> {
    match utf8(bytes) {
        Ok(s) => Ok((std::borrow::Cow::Borrowed(s), 0)),
        Err(e) if invalid == InvalidUtf8::Refuse => Err(Error::InvalidUtf8 { offset: e.valid_up_to() as u64 }),
        Err(_) => {
            let mut s = Utf8Stream::new(bytes, InvalidUtf8::Replace);
            let mut text = String::with_capacity(bytes.len());
            while let Some(block) = s.next_block()? {
                text.push_str(block);
            }
            Ok((std::borrow::Cow::Owned(text), s.replaced()))
        }
    }
}

/// A fingerprinted document and what reading it found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// The document's fingerprint.
    pub fingerprint: Fingerprint,
    /// Invalid UTF-8 sequences replaced by U+FFFD.
    pub replaced_utf8: u64,
}

/// Fingerprints plain text read from `reader`, streaming.
pub fn fingerprint_text_reader(fp: &mut Fingerprinter, reader: impl Read, utf8: InvalidUtf8) -> Result<Outcome, Error> {
    let mut stream = Utf8Stream::new(reader, utf8);
    let mut session = fp.session();
    while let Some(block) = stream.next_block()? {
        session.push(block);
    }
    Ok(Outcome { fingerprint: session.finish()?, replaced_utf8: stream.replaced() })
}

/// The body of a JSON-lines document.
#[cfg(feature = "jsonl")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// Plain text (the `text` field).
    Text(String),
    /// An HTML page (the `html` field), fingerprinted by its visible text.
    Html(String),
}

/// One document of a JSON-lines file.
#[cfg(feature = "jsonl")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonDoc {
    /// The `id` field (a number is turned into its decimal text).
    pub id: String,
    /// The document itself.
    pub body: Body,
    /// 1-based line number.
    pub line: u64,
    /// Invalid UTF-8 sequences replaced in this line.
    pub replaced_utf8: u64,
}

/// Reads JSON-lines documents; blank lines are skipped, every other line must be an object
/// with an `id` (string or number) and exactly one of `text` and `html` (strings).
#[cfg(feature = "jsonl")]
#[derive(Debug)]
pub struct JsonLines<R> {
    reader: R,
    utf8: InvalidUtf8,
    line: u64,
    buf: Vec<u8>,
}

#[cfg(feature = "jsonl")]
impl<R: std::io::BufRead> JsonLines<R> {
    /// Reads documents from `reader`; with [`InvalidUtf8::Refuse`] a line that is not UTF-8 is an error,
    /// otherwise invalid sequences are replaced by U+FFFD and counted.
    pub fn new(reader: R, utf8: InvalidUtf8) -> Self {
        JsonLines { reader, utf8, line: 0, buf: Vec::new() }
    }
}

#[cfg(feature = "jsonl")]
impl JsonDoc {
    /// The document of line number `line` (1-based) of a JSON-lines input, its bytes without
    /// or with the line end; `None` for a blank line. Invalid UTF-8 as `utf8` says.
    pub fn from_line(bytes: &[u8], line: u64, utf8: InvalidUtf8) -> Option<Result<JsonDoc, Error>> {
        let (text, replaced) = match decode_utf8(bytes, utf8) {
            Ok(d) => d,
            Err(Error::InvalidUtf8 { offset }) => return Some(Err(Error::JsonLine { line, message: format!("invalid UTF-8 at byte {offset} of the line") })),
            Err(e) => return Some(Err(e)),
        };
        if text.trim().is_empty() {
            return None;
        }
        Some(JsonDoc::parse(&text, line, replaced))
    }

    /// [`JsonDoc::from_line`] of a line's bytes it owns: their allocation becomes the body's
    /// (decoded in place), where `from_line` copies the body out of the line.
    pub fn from_owned_line(bytes: Vec<u8>, line: u64, utf8: InvalidUtf8) -> Option<Result<JsonDoc, Error>> {
        let text = match crate::json_record::owned_utf8(bytes) {
            Ok(text) => text,
            Err(bytes) => return JsonDoc::from_line(&bytes, line, utf8),
        };
        if text.trim().is_empty() {
            return None;
        }
        Some(match crate::json_record::plain_record_owned(text) {
            Ok((id, html, body)) => Ok(JsonDoc { id, body: if html { Body::Html(body) } else { Body::Text(body) }, line, replaced_utf8: 0 }),
            Err(text) => JsonDoc::parse_value(&text, line, 0),
        })
    }

    pub(crate) fn parse(text: &str, line: u64, replaced_utf8: u64) -> Result<JsonDoc, Error> {
        // the common record without a JSON tree; any other line as serde_json reads it
        if let Some((id, html, body)) = crate::json_record::plain_record(text) {
            let body = if html { Body::Html(body) } else { Body::Text(body) };
            return Ok(JsonDoc { id, body, line, replaced_utf8 });
        }
        JsonDoc::parse_value(text, line, replaced_utf8)
    }

    /// [`JsonDoc::parse`] by serde_json's tree: every line's reading (and what
    /// `json_record` is checked against).
    pub(crate) fn parse_value(text: &str, line: u64, replaced_utf8: u64) -> Result<JsonDoc, Error> {
        let err = |message: String| Error::JsonLine { line, message };
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| err(format!("invalid JSON: {e}")))?;
        let serde_json::Value::Object(mut obj) = value else {
            return Err(err("expected a JSON object".into()));
        };
        let id = match obj.remove("id") {
            Some(serde_json::Value::String(s)) => s,
            Some(serde_json::Value::Number(n)) => n.to_string(),
            Some(_) => return Err(err("\"id\" must be a string or a number".into())),
            None => return Err(err("missing \"id\"".into())),
        };
        let body = match (obj.remove("text"), obj.remove("html")) {
            (Some(serde_json::Value::String(t)), None) => Body::Text(t),
            (None, Some(serde_json::Value::String(h))) => Body::Html(h),
            (Some(_), Some(_)) => return Err(err("give either \"text\" or \"html\", not both".into())),
            (None, None) => return Err(err("missing \"text\" or \"html\"".into())),
            _ => return Err(err("\"text\"/\"html\" must be a string".into())),
        };
        Ok(JsonDoc { id, body, line, replaced_utf8 })
    }
}

#[cfg(feature = "jsonl")]
impl<R: std::io::BufRead> Iterator for JsonLines<R> {
    type Item = Result<JsonDoc, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            self.buf.clear();
            match self.reader.read_until(b'\n', &mut self.buf) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) => return Some(Err(e.into())),
            }
            self.line += 1;
            if let Some(doc) = JsonDoc::from_line(&self.buf, self.line, self.utf8) {
                return Some(doc);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json_record::owned_utf8;

    /// The one validation by SIMD says what std's `String::from_utf8` says, on any bytes: text
    /// of every width of character, long enough for the SIMD blocks, then cut or changed at
    /// any byte; any bytes; and the classic invalid sequences.
    #[test]
    fn owned_utf8_is_std_from_utf8() {
        let same = |bytes: Vec<u8>| assert_eq!(owned_utf8(bytes.clone()), String::from_utf8(bytes.clone()).map_err(|e| e.into_bytes()), "{bytes:?}");
        let invalid: [&[u8]; 7] = [b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xf0\x9d\x84", b"a\x80b", b"\xe2\x82"];
        for bad in invalid {
            same(bad.to_vec());
            same([&b"x".repeat(70)[..], bad, &b"y".repeat(70)[..]].concat());
        }
        proptest::proptest!(|(text in "\\PC{0,200}", at in 0usize..1000, byte in proptest::prelude::any::<u8>(), cut in 0usize..1000, any in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300))| {
            same(text.clone().into_bytes());
            let mut changed = text.into_bytes();
            if !changed.is_empty() {
                let (at, cut) = (at % changed.len(), cut % changed.len());
                changed[at] = byte;
                same(changed.clone());
                same(changed[..cut].to_vec());
            }
            same(any);
        });
    }

    #[test]
    fn a_nul_byte_near_the_start_makes_a_document_binary() {
        let mut elf = b"\x7fELF\x02\x01\x01\x00\x00".to_vec();
        elf.extend(std::iter::repeat_n(b'a', 100));
        for utf8 in [InvalidUtf8::Replace, InvalidUtf8::Refuse] {
            let mut s = Utf8Stream::new(Trickle(&elf), utf8);
            let err = loop {
                match s.next_block() {
                    Ok(Some(_)) => continue,
                    Ok(None) => panic!("an ELF header read as text"),
                    Err(e) => break e,
                }
            };
            assert!(matches!(err, Error::BinaryDocument { offset: 7 }), "{err}");
        }
        // Beyond the first BINARY_SNIFF_BYTES a NUL is text like any other character.
        let mut late = vec![b'a'; BINARY_SNIFF_BYTES as usize];
        late.push(0);
        let (text, replaced) = stream_all(&late, InvalidUtf8::Refuse).unwrap();
        assert_eq!((text.len(), replaced), (late.len(), 0));
        let mut early = vec![b'a'; BINARY_SNIFF_BYTES as usize - 1];
        early.push(0);
        assert!(matches!(stream_all(&early, InvalidUtf8::Replace), Err(Error::BinaryDocument { offset }) if offset == BINARY_SNIFF_BYTES - 1));
    }

    /// Reads in tiny pieces, to cut UTF-8 sequences across blocks.
    struct Trickle<'a>(&'a [u8]);
    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = out.len().min(self.0.len()).min(3);
            out[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    fn stream_all(bytes: &[u8], utf8: InvalidUtf8) -> Result<(String, u64), Error> {
        let mut s = Utf8Stream::new(Trickle(bytes), utf8);
        let mut text = String::new();
        while let Some(b) = s.next_block()? {
            text.push_str(b);
        }
        Ok((text, s.replaced()))
    }

    #[test]
    fn streaming_matches_lossy_decoding() {
        let cases: &[&[u8]] = &[b"plain", "héllo wörld 你好".as_bytes(), b"bad \xff byte", b"cut \xe4\xbd", b"\xf0\x9f\x98\x80 ok \xc0\xaf \xed\xa0\x80 end"];
        for &c in cases {
            let lossy = String::from_utf8_lossy(c);
            let replaced = lossy.matches('\u{FFFD}').count() as u64;
            assert_eq!(stream_all(c, InvalidUtf8::Replace).unwrap(), (lossy.to_string(), replaced), "{c:?}");
            let (whole, n) = decode_utf8(c, InvalidUtf8::Replace).unwrap();
            assert_eq!((whole.as_ref(), n), (lossy.as_ref(), replaced));
        }
    }

    #[test]
    fn strict_reports_the_offset() {
        assert!(matches!(stream_all(b"abc\xffdef", InvalidUtf8::Refuse), Err(Error::InvalidUtf8 { offset: 3 })));
        assert!(matches!(stream_all(b"abcd\xe4\xbd", InvalidUtf8::Refuse), Err(Error::InvalidUtf8 { offset: 4 })));
        assert!(matches!(decode_utf8(b"ab\x80", InvalidUtf8::Refuse), Err(Error::InvalidUtf8 { offset: 2 })));
    }

    /// Every line reads to the document, or fails with the error to the word, that
    /// serde_json's tree gives (`json_record`'s own tests check its reading against
    /// serde_json's on generated records).
    #[cfg(feature = "jsonl")]
    #[test]
    fn json_lines_read_as_by_the_tree() {
        let long = format!("{{\"id\":\"l\",\"text\":\"{}\\u00e9\\\"\\ud83d\\ude00\"}}", "word ".repeat(300));
        for line in [
            r#"{"id": "d1", "text": ""}"#,
            r#"{"id": "x", "html": "<p>caf\u00e9</p>"}"#,
            &long,
            r#"{"id": 7, "text": "a"}"#,
            r#"{"id": 7.5e3, "text": "a"}"#,
            r#"{"id": "a", "text": "b", "lang": "en"}"#,
            r#"{"id": "a", "text": "b", "id": "c"}"#,
            r#"{"id": "a", "text": "b", "html": "c"}"#,
            r#"{"id": "a", "text": null}"#,
            r#"{"id": "a"}"#,
            r#"{"text": "a"}"#,
            r#"{"id": "a", "text": "b",}"#,
            r#"{"id": "a", "text": "b"} x"#,
            r#"{"id": "a", "text": "\ud800"}"#,
            r#"{"id": "a", "text": "\q"}"#,
            "{\"id\": \"a\", \"text\": \"tab\there\"}",
            r#"["id", "text"]"#,
            "{}",
            "{",
        ] {
            let doc = |r: Result<JsonDoc, Error>| r.map_err(|e| e.to_string());
            assert_eq!(doc(JsonDoc::parse(line, 3, 1)), doc(JsonDoc::parse_value(line, 3, 1)), "{line:?}");
        }
    }

    #[cfg(feature = "jsonl")]
    /// Invalid UTF-8: refused with the line's number and the byte's offset, or replaced by
    /// U+FFFD (counted) before the line is read, on either path.
    #[test]
    fn invalid_utf8_is_refused_with_the_line_or_replaced() {
        for line in [&b"{\"id\": \"a\", \"text\": \"x \xff y\"}\n"[..], b"{\"id\": \"a\", \"n\": 1, \"text\": \"x \xff y\"}"] {
            let refused = JsonDoc::from_line(line, 12, InvalidUtf8::Refuse).map(|r| r.map_err(|e| e.to_string()));
            let at = line.iter().position(|&b| b == 0xff).unwrap_or_default();
            assert_eq!(refused, Some(Err(format!("line 12: invalid UTF-8 at byte {at} of the line"))));
            let replaced = JsonDoc::from_line(line, 12, InvalidUtf8::Replace).map(|r| r.map_err(|e| e.to_string()));
            let want = JsonDoc { id: "a".into(), body: Body::Text("x \u{FFFD} y".into()), line: 12, replaced_utf8: 1 };
            assert_eq!(replaced, Some(Ok(want)));
        }
        assert!(JsonDoc::from_line(b" \t\r\n", 2, InvalidUtf8::Refuse).is_none());
    }

    #[cfg(feature = "jsonl")]
    #[test]
    fn json_lines_errors_name_the_line() {
        let input = "{\"id\": 1, \"text\": \"a b c\"}\n\n{\"id\": \"x\", \"html\": \"<p>hi</p>\"}\n[1]\n{\"id\": 2}\nnot json\n";
        let docs: Vec<_> = JsonLines::new(input.as_bytes(), InvalidUtf8::Replace).collect();
        assert_eq!(docs.len(), 5);
        let d0 = docs[0].as_ref().unwrap();
        assert_eq!((d0.id.as_str(), &d0.body, d0.line), ("1", &Body::Text("a b c".into()), 1));
        assert_eq!(docs[1].as_ref().unwrap().line, 3);
        let msg = |i: usize| docs[i].as_ref().unwrap_err().to_string();
        assert!(msg(2).starts_with("line 4: expected a JSON object"), "{}", msg(2));
        assert!(msg(3).starts_with("line 5: missing \"text\""), "{}", msg(3));
        assert!(msg(4).starts_with("line 6: invalid JSON"), "{}", msg(4));
    }
}
