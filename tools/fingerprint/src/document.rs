//! Documents: the bytes of an input read in a format (plain text, HTML, JSON lines) as
//! documents, each fingerprinted with the recipe, and IDF tables learned from documents.
//!
//! What text the recipe sees is decided here, once for both: invalid UTF-8 is replaced (or
//! refused), HTML is reduced to its visible text (module `html`, cargo feature `html`),
//! a JSON-lines record (cargo feature `jsonl`) to its `text` or `html` body. A table learned
//! from documents therefore counts the features their fingerprints are made of.
//!
//! ```
//! use simdex_fingerprint::document::{Documents, Format, InvalidUtf8};
//! use simdex_fingerprint::{FingerprintOptions, Fingerprinter};
//!
//! let mut fp = Fingerprinter::new(FingerprintOptions::default()).unwrap();
//! let page = "the cat sat on the mat, and then the cat went to sleep on the mat";
//! for doc in Documents::new(page.as_bytes(), "page.txt", Format::Text, InvalidUtf8::Replace) {
//!     let mut doc = doc.unwrap();
//!     let outcome = doc.fingerprint(&mut fp, InvalidUtf8::Replace).unwrap();
//!     println!("{}\t{:016x}", doc.id, outcome.fingerprint.value);
//! }
//! ```

use std::io::Read;
use std::path::Path;

pub use super::input::InvalidUtf8;
use super::input::{fingerprint_text_reader, Outcome, Utf8Stream};
use super::{Error, Fingerprinter, IdfBuilder, IdfTable};

/// How the bytes of an input are read as documents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One document of plain text.
    Text,
    /// One HTML page, fingerprinted by its visible text (cargo feature `html`).
    Html,
    /// One document per line: `{"id": ..., "text": ...}` or `{"id": ..., "html": ...}`
    /// (cargo feature `jsonl`; see `input::JsonLines`).
    JsonLines,
}

impl Format {
    /// The format a file name suggests: `.html`, `.htm` and `.xhtml` are HTML, `.jsonl` and
    /// `.ndjson` JSON lines (in any case), anything else plain text.
    pub fn of_path(path: &Path) -> Format {
        match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
            Some("html" | "htm" | "xhtml") => Format::Html,
            Some("jsonl" | "ndjson") => Format::JsonLines,
            _ => Format::Text,
        }
    }
}

/// What one document's content is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DocumentKind {
    /// Plain text.
    Text,
    /// An HTML page (cargo feature `html`).
    Html,
}

/// One document, ready to be read once.
#[derive(Debug)]
pub struct Document<R> {
    /// Its id: the input's name, or a JSON-lines record's `id`.
    pub id: String,
    /// How its content is read.
    pub kind: DocumentKind,
    /// Its bytes.
    pub content: R,
    /// Invalid UTF-8 sequences already replaced before `content` (while decoding a JSON
    /// line); added to what fingerprinting finds.
    pub replaced_utf8: u64,
}

impl<R: Read> Document<R> {
    /// The fingerprint of the document's text, streaming: plain text as it is, HTML by its
    /// visible text. Reads `content` as far as the fingerprint needs.
    pub fn fingerprint(&mut self, fp: &mut Fingerprinter, utf8: InvalidUtf8) -> Result<Outcome, Error> {
        let outcome = match self.kind {
            DocumentKind::Text => fingerprint_text_reader(fp, &mut self.content, utf8),
            #[cfg(feature = "html")]
            DocumentKind::Html => super::html::fingerprint_html_reader(fp, &mut self.content, utf8),
            #[cfg(not(feature = "html"))]
            DocumentKind::Html => Err(Error::FeatureNotCompiled { feature: "html" }),
        }?;
        Ok(Outcome { replaced_utf8: outcome.replaced_utf8 + self.replaced_utf8, ..outcome })
    }

    /// The same document, its content read through `wrap` (to hash the bytes on the way, say).
    pub fn map_content<S>(self, wrap: impl FnOnce(R) -> S) -> Document<S> {
        Document { id: self.id, kind: self.kind, content: wrap(self.content), replaced_utf8: self.replaced_utf8 }
    }

    /// The whole text the fingerprint is made of (plain text as it is, HTML by its visible
    /// text as the current recipe takes it), read at once: for callers that need the text
    /// besides the fingerprint (IDF learning, sketches).
    pub fn text(&mut self, utf8: InvalidUtf8) -> Result<String, Error> {
        self.text_as(utf8, super::RECIPE_VERSION)
    }

    /// [`Document::text`] as fingerprint recipe `version` takes it (a fingerprinter's:
    /// `fp.options().version`).
    pub fn text_as(&mut self, utf8: InvalidUtf8, version: u32) -> Result<String, Error> {
        self.text_into(utf8, version, String::new())
    }

    /// [`Document::text_as`] into `text` (empty; its capacity kept: a caller that knows about
    /// how long the text is saves the string's growing).
    fn text_into(&mut self, utf8: InvalidUtf8, version: u32, mut text: String) -> Result<String, Error> {
        let mut stream = Utf8Stream::new(&mut self.content, utf8);
        match self.kind {
            DocumentKind::Text => {
                while let Some(block) = stream.next_block()? {
                    text.push_str(block);
                }
            }
            #[cfg(feature = "html")]
            DocumentKind::Html => super::html::extract_text_as(version, &mut stream, |piece| text.push_str(piece))?,
            #[cfg(not(feature = "html"))]
            DocumentKind::Html => {
                let _ = version;
                return Err(Error::FeatureNotCompiled { feature: "html" });
            }
        }
        Ok(text)
    }
}

#[cfg(feature = "jsonl")]
impl From<super::input::JsonDoc> for Document<Box<dyn Read>> {
    /// The document of a JSON-lines record.
    fn from(r: super::input::JsonDoc) -> Self {
        let (kind, body) = match r.body {
            super::input::Body::Text(t) => (DocumentKind::Text, t),
            super::input::Body::Html(h) => (DocumentKind::Html, h),
        };
        let content: Box<dyn Read> = Box::new(std::io::Cursor::new(body.into_bytes()));
        Document { id: r.id, kind, content, replaced_utf8: r.replaced_utf8 }
    }
}

impl<'a> Document<&'a [u8]> {
    /// [`Document::text_as`] of a document in memory, borrowed where the text is its bytes
    /// (plain text of valid UTF-8: no copy); the same text, and the same errors, as `text_as`.
    pub fn text_in_memory(&mut self, utf8: InvalidUtf8, version: u32) -> Result<std::borrow::Cow<'a, str>, Error> {
        let bytes = self.content;
        if self.kind == DocumentKind::Text {
            let sniffed = bytes.get(..super::input::BINARY_SNIFF_BYTES as usize).unwrap_or(bytes);
            if let Some(at) = sniffed.iter().position(|&b| b == 0) {
                return Err(Error::BinaryDocument { offset: at as u64 });
            }
            if let Ok(text) = super::input::utf8(bytes) {
                self.content = &[];
                return Ok(std::borrow::Cow::Borrowed(text));
            }
        }
        // the text is at most about as long as the bytes (HTML: its visible part)
        self.text_into(utf8, version, String::with_capacity(bytes.len())).map(std::borrow::Cow::Owned)
    }
}

/// The documents of one input, in order: one for plain text and HTML, one per record for
/// JSON lines.
///
/// An error with one JSON-lines record ([`Error::JsonLine`]) is an item of its own, and the
/// records after it follow; an [`Error::Io`] ends the input.
pub struct Documents<R> {
    state: State<R>,
}

enum State<R> {
    /// The one document of a text or HTML input, until it is handed out.
    One(Option<Document<R>>),
    #[cfg(feature = "jsonl")]
    Lines(super::input::JsonLines<std::io::BufReader<R>>),
    /// JSON lines in a build without them: the error, until it is handed out.
    #[cfg(not(feature = "jsonl"))]
    NotCompiled(Option<Error>),
}

impl<R: Read> Documents<R> {
    /// Reads `input` in `format`; `id` is the id of a text or HTML document (JSON-lines
    /// records carry their own). `utf8` applies to JSON lines here, and to the other formats
    /// when a document is read ([`Document::fingerprint`]).
    #[cfg_attr(not(feature = "jsonl"), allow(unused_variables))]
    pub fn new(input: R, id: impl Into<String>, format: Format, utf8: InvalidUtf8) -> Self {
        let one = |kind, content| State::One(Some(Document { id: id.into(), kind, content, replaced_utf8: 0 }));
        let state = match format {
            Format::Text => one(DocumentKind::Text, input),
            Format::Html => one(DocumentKind::Html, input),
            #[cfg(feature = "jsonl")]
            Format::JsonLines => State::Lines(super::input::JsonLines::new(std::io::BufReader::new(input), utf8)),
            #[cfg(not(feature = "jsonl"))]
            Format::JsonLines => State::NotCompiled(Some(Error::FeatureNotCompiled { feature: "jsonl" })),
        };
        Documents { state }
    }
}

impl<R: Read + 'static> Iterator for Documents<R> {
    type Item = Result<Document<Box<dyn Read>>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.state {
            State::One(doc) => doc.take().map(|d| Ok(d.map_content(|c| Box::new(c) as Box<dyn Read>))),
            #[cfg(feature = "jsonl")]
            State::Lines(lines) => lines.next().map(|record| record.map(Document::from)),
            #[cfg(not(feature = "jsonl"))]
            State::NotCompiled(e) => e.take().map(Err),
        }
    }
}

/// Learns an IDF table from documents, one at a time, with a fingerprinter's feature recipe:
/// every document counts once, with the distinct features of the text its fingerprint is
/// made of.
pub struct IdfLearner<'f> {
    fp: &'f mut Fingerprinter,
    utf8: InvalidUtf8,
    builder: IdfBuilder,
}

impl<'f> IdfLearner<'f> {
    /// A learner with `fp`'s feature recipe, reading documents as `utf8` says.
    pub fn new(fp: &'f mut Fingerprinter, utf8: InvalidUtf8) -> Self {
        let builder = IdfBuilder::new(fp.options().feature_recipe());
        IdfLearner { fp, utf8, builder }
    }

    /// Counts one document; one that cannot be read (refused UTF-8, an I/O error) is left
    /// out, as it would get no fingerprint.
    pub fn add<R: Read>(&mut self, mut doc: Document<R>) {
        if let Ok(text) = doc.text_as(self.utf8, self.fp.options().version) {
            self.add_text(&text);
        }
    }

    /// Counts one document given by the text its fingerprint is made of ([`Document::text`]).
    pub fn add_text(&mut self, text: &str) {
        self.builder.add_document(&self.fp.distinct_features(text));
    }

    /// The table (every feature seen is in it).
    pub fn finish(self) -> IdfTable {
        self.builder.build(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FingerprintOptions;

    fn fingerprinter() -> Fingerprinter {
        Fingerprinter::new(FingerprintOptions::default()).unwrap()
    }

    #[test]
    fn formats_by_extension() {
        let of = |p: &str| Format::of_path(Path::new(p));
        assert_eq!((of("a/b.HTM"), of("x.xhtml"), of("x.ndjson"), of("x.jsonl")), (Format::Html, Format::Html, Format::JsonLines, Format::JsonLines));
        assert_eq!((of("x.txt"), of("README"), of("x.html.gz")), (Format::Text, Format::Text, Format::Text));
    }

    #[test]
    fn a_text_document_is_its_text() {
        let text = "one two three four five six seven";
        let mut docs: Vec<_> = Documents::new(text.as_bytes(), "t", Format::Text, InvalidUtf8::Replace).collect();
        assert_eq!(docs.len(), 1);
        let mut doc = docs.pop().unwrap().unwrap();
        assert_eq!((doc.id.as_str(), doc.kind), ("t", DocumentKind::Text));
        let mut fp = fingerprinter();
        assert_eq!(doc.fingerprint(&mut fp, InvalidUtf8::Replace).unwrap().fingerprint, fp.fingerprint(text).unwrap());
    }

    #[cfg(feature = "html")]
    #[test]
    fn a_binary_html_document_is_refused_as_binary_by_text_and_by_fingerprint() {
        const BYTES: &[u8] = b"<html><body>\0\x01\x02 binary";
        let mut docs: Vec<_> = Documents::new(BYTES, "b.html", Format::Html, InvalidUtf8::Replace).collect();
        let mut doc = docs.pop().unwrap().unwrap();
        assert!(matches!(doc.text(InvalidUtf8::Replace), Err(Error::BinaryDocument { .. })));
        let mut docs: Vec<_> = Documents::new(BYTES, "b.html", Format::Html, InvalidUtf8::Replace).collect();
        let mut doc = docs.pop().unwrap().unwrap();
        assert!(matches!(doc.fingerprint(&mut fingerprinter(), InvalidUtf8::Replace), Err(Error::BinaryDocument { .. })));
    }

    #[test]
    fn refused_utf8_is_an_error_and_replaced_utf8_is_counted() {
        let bytes: &'static [u8] = b"valid words before \xff and after the bad byte";
        let mut fp = fingerprinter();
        let mut doc = Documents::new(bytes, "b", Format::Text, InvalidUtf8::Refuse).next().unwrap().unwrap();
        assert!(matches!(doc.fingerprint(&mut fp, InvalidUtf8::Refuse), Err(Error::InvalidUtf8 { offset: 19 })));
        let mut doc = Documents::new(bytes, "b", Format::Text, InvalidUtf8::Replace).next().unwrap().unwrap();
        assert_eq!(doc.fingerprint(&mut fp, InvalidUtf8::Replace).unwrap().replaced_utf8, 1);
    }

    #[cfg(all(feature = "jsonl", feature = "html"))]
    #[test]
    fn json_lines_are_documents_and_bad_lines_are_errors_of_their_own() {
        let input: &'static [u8] = b"{\"id\": \"a\", \"text\": \"one two three four\"}\nnot json\n{\"id\": 7, \"html\": \"<p>five six seven</p><script>x y z</script>\"}\n{\"id\": \"c\", \"text\": \"bad \xff byte and more words\"}\n";
        let docs: Vec<_> = Documents::new(input, "in.jsonl", Format::JsonLines, InvalidUtf8::Replace).collect();
        assert_eq!(docs.len(), 4);
        assert!(matches!(&docs[1], Err(Error::JsonLine { line: 2, .. })));
        let mut fp = fingerprinter();
        let mut docs: Vec<_> = docs.into_iter().filter_map(|d| d.ok()).collect();
        assert_eq!(docs.iter().map(|d| (d.id.as_str(), d.kind)).collect::<Vec<_>>(), [("a", DocumentKind::Text), ("7", DocumentKind::Html), ("c", DocumentKind::Text)]);
        let html = docs[1].fingerprint(&mut fp, InvalidUtf8::Replace).unwrap();
        assert_eq!(html.fingerprint, fp.fingerprint("five six seven").unwrap());
        // the replacement made while decoding the line counts
        assert_eq!(docs[2].fingerprint(&mut fp, InvalidUtf8::Replace).unwrap().replaced_utf8, 1);
    }

    #[cfg(feature = "html")]
    #[test]
    fn idf_is_learned_from_the_text_fingerprints_see() {
        let pages: [&'static [u8]; 3] = [b"<p>alpha beta gamma</p><script>delta</script>", b"<p>alpha beta</p>", b"<p>bad \xff byte</p>"];
        let mut fp = fingerprinter();
        let mut learner = IdfLearner::new(&mut fp, InvalidUtf8::Refuse);
        for page in pages {
            learner.add(Documents::new(page, "p", Format::Html, InvalidUtf8::Refuse).next().unwrap().unwrap());
        }
        let table = learner.finish();
        let mut builder = IdfBuilder::new(fp.options().feature_recipe());
        for text in ["alpha beta gamma", "alpha beta"] {
            builder.add_document(&fp.distinct_features(text));
        }
        // the refused page is left out, the script's text is not seen
        assert_eq!(table.encode(), builder.build(1).encode());
    }
}
