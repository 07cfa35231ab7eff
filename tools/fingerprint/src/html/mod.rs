//! Visible text of HTML pages (cargo feature `html`), streamed through the WHATWG tokenizer of
//! `html5gum`, with entities decoded by the tokenizer; step 1 of the fingerprint recipe, which
//! differs between recipe versions (`format-spec/fingerprint.md`, "1. Text").
//!
//! Dropped with everything inside them: `script`, `style`, `noscript`, `template`, `svg`,
//! `iframe`, `form`, `button`, `nav`, `header`, `footer`, elements with `role="navigation"`
//! and navigation bars by class (`navheader`, `navfooter`, `docnav`, `breadcrumb`,
//! `breadcrumbs`); comments and doctypes. Every tag separates words (as a space would), so
//! text pieces never glue together.
//!
//! - Recipe 1: `title` is dropped wherever it stands, and `noscript`'s content is raw text
//!   (a browser with scripting on).
//! - Recipe 2 (scripting off, as the ground truth's HTML5 parser builds the tree): the head
//!   is followed as a tree builder follows it ([`head`]): text in the head is dropped, but
//!   the head ends where a token it may not hold stands (text in a head `noscript`, say), and
//!   from there on the text is the body's (a later `title` too: in the body, `title` is
//!   visible). `noscript` is markup (dropped with its elements); `noframes` is raw text.
//!
//! A tokenizer, not a tree builder: a dropped element ends at its matching end tag, and end
//! tags close whatever opened after them (implied end tags); void elements never open.

mod head;

use super::input::{InvalidUtf8, Outcome, Utf8Stream};
use super::{Error, Fingerprinter, RECIPE_VERSION, RECIPE_VERSIONS};
use html5gum::emitters::callback::CallbackEvent;
use html5gum::{Emitter, IoReader, State, Tokenizer};
use std::io::Read;

const DROP_TAGS: &[&[u8]] = &[b"script", b"style", b"noscript", b"template", b"svg", b"iframe", b"form", b"button", b"nav", b"header", b"footer"];
const DROP_CLASSES: &[&[u8]] = &[b"navheader", b"navfooter", b"docnav", b"breadcrumb", b"breadcrumbs"];
const VOID_TAGS: &[&[u8]] = &[b"area", b"base", b"br", b"col", b"embed", b"hr", b"img", b"input", b"link", b"meta", b"param", b"source", b"track", b"wbr"];

/// Tracks which elements are being dropped while the tokenizer streams events.
#[derive(Debug)]
struct Dropper {
    /// the fingerprint recipe version whose extraction this is (1 or 2)
    version: u32,
    /// recipe 2: where the tree builder would be (text before the body is the head's)
    mode: head::Mode,
    /// recipe 2: since the last visible text only tags a tree builder ignores in the body came
    /// (`<body>`, `</head>`, an end tag of an element not open), so more text would extend
    /// the same text node
    in_text_node: bool,
    /// recipe 2: the visible text just returned extends the previous one's text node (no
    /// space between them)
    glued: bool,
    /// open elements since the outermost dropped one (empty: text is visible)
    open: Vec<Vec<u8>>,
    tag: Vec<u8>,
    attr: Vec<u8>,
    boilerplate: bool,
}

impl Dropper {
    fn new(version: u32) -> Self {
        Dropper { version, mode: head::Mode::default(), in_text_node: false, glued: false, open: Vec::new(), tag: Vec::new(), attr: Vec::new(), boilerplate: false }
    }

    /// Recipe 2, in the body outside every dropped element: whether a tree builder ignores
    /// this tag (`end`: an end tag), inserting no element, so that text before and after it
    /// is one text node. End tags of the dropped elements are ignored when none is open: an
    /// open one would be in `open`. (Other stray end tags are ignored too, but which elements
    /// are open is not followed here: they separate words.)
    fn ignored_in_body(&self, tag: &[u8], end: bool) -> bool {
        let ignored = matches!(tag, b"html" | b"head" | b"body") || (end && DROP_TAGS.contains(&tag));
        ignored && self.version >= 2 && self.open.is_empty() && self.mode == head::Mode::InBody
    }

    /// Recipe 2, outside every dropped element (so before the body: outside the head's
    /// hidden elements): the tree builder's rules decide.
    fn follows_the_head(&self) -> bool {
        self.version >= 2 && self.open.is_empty()
    }

    /// Handles one event; returns visible text, if the event is some.
    fn event<'e>(&mut self, event: CallbackEvent<'e>) -> Option<&'e [u8]> {
        match event {
            CallbackEvent::OpenStartTag { name } => {
                self.tag.clear();
                self.tag.extend_from_slice(name);
                self.boilerplate = false;
            }
            CallbackEvent::AttributeName { name } => {
                self.attr.clear();
                self.attr.extend_from_slice(name);
            }
            CallbackEvent::AttributeValue { value } => {
                self.boilerplate |= match self.attr.as_slice() {
                    b"role" => value.eq_ignore_ascii_case(b"navigation"),
                    b"class" => value.split(|b| b.is_ascii_whitespace()).any(|c| DROP_CLASSES.contains(&c)),
                    _ => false,
                };
            }
            CallbackEvent::CloseStartTag { .. } => {
                let tag = self.tag.as_slice();
                self.in_text_node &= self.ignored_in_body(tag, false);
                if self.follows_the_head() {
                    match self.mode.start_tag(tag) {
                        head::Step::Head => return None,
                        head::Step::Hidden => {
                            self.open.push(self.tag.clone());
                            return None;
                        }
                        head::Step::Body => {}
                    }
                }
                if VOID_TAGS.contains(&tag) {
                    return None;
                }
                let title = self.version == 1 && tag == b"title";
                if !self.open.is_empty() || self.boilerplate || title || DROP_TAGS.contains(&tag) {
                    self.open.push(self.tag.clone());
                }
            }
            CallbackEvent::EndTag { name } => {
                self.in_text_node &= self.ignored_in_body(name, true);
                if self.follows_the_head() && self.mode.end_tag(name) == head::Step::Head {
                    return None;
                }
                if let Some(i) = self.open.iter().rposition(|t| t.as_slice() == name) {
                    self.open.truncate(i);
                }
            }
            CallbackEvent::String { value } if self.open.is_empty() => {
                if self.follows_the_head() && self.mode.text(value) == head::Step::Head {
                    return None;
                }
                self.glued = self.in_text_node;
                self.in_text_node = self.version >= 2;
                return Some(value);
            }
            CallbackEvent::Comment { .. } => self.in_text_node = false,
            _ => {}
        }
        None
    }
}

/// An `html5gum` emitter that hands visible text to `sink`.
///
/// The recipe's extraction is defined on the events of `html5gum`'s `CallbackEmitter`; this
/// emitter produces exactly the events the [`Dropper`] reads, in the same order (text runs are
/// accumulated and flushed where that emitter flushes them), and leaves out what nothing here
/// reads: parse errors (so the tokenizer skips its per-byte character validation), spans,
/// comments and doctypes. Checked against `CallbackEmitter` by a property test.
struct TextEmitter<F> {
    sink: F,
    dropper: Dropper,
    /// the text run being accumulated
    text: Vec<u8>,
    tag: Option<TagKind>,
    tag_name: Vec<u8>,
    last_start_tag: Vec<u8>,
    attr_name: Vec<u8>,
    attr_value: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TagKind {
    Start,
    End,
}

impl<F: FnMut(&str)> TextEmitter<F> {
    fn new(sink: F, version: u32) -> Self {
        TextEmitter {
            sink,
            dropper: Dropper::new(version),
            text: Vec::new(),
            tag: None,
            tag_name: Vec::new(),
            last_start_tag: Vec::new(),
            attr_name: Vec::new(),
            attr_value: Vec::new(),
        }
    }

    fn flush_text(&mut self) {
        if self.text.is_empty() {
            return;
        }
        if let Some(text) = self.dropper.event(CallbackEvent::String { value: &self.text }) {
            if !self.dropper.glued {
                (self.sink)(" ");
            }
            match super::input::utf8(text) {
                Ok(text) => (self.sink)(text),
                Err(_) => (self.sink)(&String::from_utf8_lossy(text)),
            }
        }
        self.text.clear();
    }

    fn flush_open_start_tag(&mut self) {
        self.flush_text();
        if self.tag == Some(TagKind::Start) && !self.tag_name.is_empty() {
            self.dropper.event(CallbackEvent::OpenStartTag { name: &self.tag_name });
            self.last_start_tag.clear();
            std::mem::swap(&mut self.last_start_tag, &mut self.tag_name);
        }
    }

    fn flush_attribute_name(&mut self) {
        self.flush_open_start_tag();
        if !self.attr_name.is_empty() {
            self.dropper.event(CallbackEvent::AttributeName { name: &self.attr_name });
            self.attr_name.clear();
        }
    }

    fn flush_attribute(&mut self) {
        self.flush_attribute_name();
        if !self.attr_value.is_empty() {
            self.dropper.event(CallbackEvent::AttributeValue { value: &self.attr_value });
            self.attr_value.clear();
        }
    }
}

impl<F: FnMut(&str)> Emitter for TextEmitter<F> {
    type Token = std::convert::Infallible;

    fn set_last_start_tag(&mut self, last_start_tag: Option<&[u8]>) {
        self.last_start_tag.clear();
        self.last_start_tag.extend_from_slice(last_start_tag.unwrap_or_default());
    }

    fn emit_eof(&mut self) {
        self.flush_text();
    }

    fn emit_error(&mut self, _: html5gum::Error) {}

    #[inline]
    fn should_emit_errors(&mut self) -> bool {
        false
    }

    fn pop_token(&mut self) -> Option<Self::Token> {
        None
    }

    fn emit_string(&mut self, s: &[u8]) {
        self.text.extend_from_slice(s);
    }

    fn init_start_tag(&mut self) {
        self.tag_name.clear();
        self.tag = Some(TagKind::Start);
    }

    fn init_end_tag(&mut self) {
        self.tag_name.clear();
        self.tag = Some(TagKind::End);
    }

    fn init_comment(&mut self) {
        self.flush_text();
    }

    fn emit_current_tag(&mut self) -> Option<State> {
        self.flush_attribute();
        match self.tag {
            Some(TagKind::Start) => {
                self.flush_open_start_tag();
                self.dropper.event(CallbackEvent::CloseStartTag { self_closing: false });
            }
            Some(TagKind::End) => {
                self.last_start_tag.clear();
                self.dropper.event(CallbackEvent::EndTag { name: &self.tag_name });
            }
            None => {}
        }
        // raw-text elements (script, style, ...) switch the tokenizer's state as a tree
        // builder would (`CallbackEmitter::naively_switch_states(true)`); recipe 2 as one
        // with scripting off (`noscript` is markup) and `noframes` as raw text
        match (self.dropper.version, self.last_start_tag.as_slice()) {
            (2.., b"noscript") => None,
            (2.., b"noframes") => Some(State::RawText),
            (_, tag) => html5gum::naive_next_state(tag),
        }
    }

    fn emit_current_comment(&mut self) {
        self.dropper.event(CallbackEvent::Comment { value: b"" });
    }

    fn emit_current_doctype(&mut self) {}

    fn set_self_closing(&mut self) {}

    fn set_force_quirks(&mut self) {}

    fn push_tag_name(&mut self, s: &[u8]) {
        self.tag_name.extend_from_slice(s);
    }

    fn push_comment(&mut self, _: &[u8]) {}

    fn push_doctype_name(&mut self, _: &[u8]) {}

    fn init_doctype(&mut self) {
        self.flush_text();
    }

    fn init_attribute(&mut self) {
        self.flush_open_start_tag();
        self.flush_attribute();
    }

    fn push_attribute_name(&mut self, s: &[u8]) {
        self.attr_name.extend_from_slice(s);
    }

    fn push_attribute_value(&mut self, s: &[u8]) {
        self.flush_attribute_name();
        self.attr_value.extend_from_slice(s);
    }

    fn set_doctype_public_identifier(&mut self, _: &[u8]) {}

    fn set_doctype_system_identifier(&mut self, _: &[u8]) {}

    fn push_doctype_public_identifier(&mut self, _: &[u8]) {}

    fn push_doctype_system_identifier(&mut self, _: &[u8]) {}

    fn current_is_appropriate_end_tag_token(&mut self) -> bool {
        self.tag == Some(TagKind::End) && !self.last_start_tag.is_empty() && self.last_start_tag == self.tag_name
    }
}

/// Streams the visible text of the HTML read from `reader` into `sink`, in pieces, as the
/// current recipe ([`RECIPE_VERSION`]) extracts it ([`extract_text_as`]).
pub fn extract_text(reader: impl Read, sink: impl FnMut(&str)) -> Result<(), Error> {
    extract_text_as(RECIPE_VERSION, reader, sink)
}

/// Streams the visible text of the HTML read from `reader` into `sink`, in pieces, as
/// fingerprint recipe `version` extracts it (an index pins the version it was made with);
/// pieces from different text nodes come with a separating space. A version outside
/// [`RECIPE_VERSIONS`] is [`Error::InvalidOptions`].
/// The reader's own refusals (strict-mode UTF-8, a binary document: the UTF-8 stream's)
/// come back with their type.
pub fn extract_text_as(version: u32, reader: impl Read, sink: impl FnMut(&str)) -> Result<(), Error> {
    if !RECIPE_VERSIONS.contains(&version) {
        return Err(Error::InvalidOptions(format!("fingerprint recipe version {version} (known: {RECIPE_VERSIONS:?})")));
    }
    let emitter = TextEmitter::new(sink, version);
    // the emitter emits no tokens (it streams text to the sink): an item is an error, and
    // the stream's refusals travel through the tokenizer as io::Error(InvalidData)
    if let Some(Err(e)) = Tokenizer::new_with_emitter(IoReader::new(reader), emitter).next() {
        return Err(match e.get_ref().and_then(|i| i.downcast_ref::<Error>()) {
            Some(Error::InvalidUtf8 { offset }) => Error::InvalidUtf8 { offset: *offset },
            Some(Error::BinaryDocument { offset }) => Error::BinaryDocument { offset: *offset },
            _ => Error::from(e),
        });
    }
    Ok(())
}

/// The visible text of an HTML string as the current recipe extracts it (convenience; pieces
/// joined by single spaces).
pub fn visible_text(html: &str) -> String {
    visible_text_as(RECIPE_VERSION, html)
}

/// The visible text of an HTML string as fingerprint recipe `version` extracts it (empty for
/// an unknown version; pieces joined by single spaces).
pub fn visible_text_as(version: u32, html: &str) -> String {
    let mut out = String::new();
    // reading from a byte slice cannot fail
    let _ = extract_text_as(version, html.as_bytes(), |piece| out.push_str(piece));
    out
}

/// Fingerprints the visible text of the HTML read from `reader`, streaming, extracted as
/// `fp`'s recipe version says.
pub fn fingerprint_html_reader(fp: &mut Fingerprinter, reader: impl Read, utf8: InvalidUtf8) -> Result<Outcome, Error> {
    let mut stream = Utf8Stream::new(reader, utf8);
    let version = fp.options().version;
    let mut session = fp.session();
    extract_text_as(version, &mut stream, |piece| session.push(piece))?;
    Ok(Outcome { fingerprint: session.finish()?, replaced_utf8: stream.replaced() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use html5gum::emitters::callback::CallbackEmitter;
    use html5gum::Span;
    use proptest::prelude::*;

    /// The definition: `html5gum`'s `CallbackEmitter` with naive state switching, every
    /// event through the [`Dropper`], visible text taken lossily.
    fn reference_text(html: &[u8], version: u32) -> String {
        let mut out = String::new();
        let mut dropper = Dropper::new(version);
        let mut emitter = CallbackEmitter::new(|event: CallbackEvent<'_>, _: Span<()>| -> Option<()> {
            if let Some(text) = dropper.event(event) {
                if !dropper.glued {
                    out.push(' ');
                }
                out.push_str(&String::from_utf8_lossy(text));
            }
            None
        });
        emitter.naively_switch_states(true);
        for item in Tokenizer::new_with_emitter(IoReader::new(html), emitter) {
            item.unwrap();
        }
        out
    }

    fn extracted(html: &[u8], version: u32) -> String {
        let mut out = String::new();
        extract_text_as(version, html, |p| out.push_str(p)).unwrap();
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// The text emitter gives the visible text of the callback emitter, on tag soup made
        /// of the pieces where the two could differ, in both recipes (no `noscript` or
        /// `noframes`: recipe 2 switches the tokenizer's state for them unlike the naive rule).
        #[test]
        fn text_emitter_matches_the_callback_emitter(pieces in proptest::collection::vec(
            prop_oneof![
                Just("<"), Just(">"), Just("</"), Just("/>"), Just("<!--"), Just("-->"),
                Just("<!DOCTYPE html>"), Just("<![CDATA["), Just("]]>"), Just("&amp;"),
                Just("&lt;"), Just("&#233;"), Just("&nbsp"), Just("&"), Just("="), Just("\""),
                Just("'"), Just(" "), Just("\n"), Just("p"), Just("nav"), Just("script"),
                Just("style"), Just("title"), Just("textarea"), Just("plaintext"), Just("svg"),
                Just("div"), Just("br"), Just("role"), Just("navigation"), Just("NAVIGATION"),
                Just("class"), Just("breadcrumbs x"), Just("docnav"), Just("word"), Just("é"),
                Just("中文"), Just("\u{0}"), Just("<p>"), Just("</p>"), Just("<nav>"),
                Just("</nav>"), Just("<div role=navigation>"), Just("<div class=\"a navheader\">"),
                Just("</div>"), Just("<script>"), Just("</script>"), Just("<style>"),
                Just("</style>"), Just("<title>"), Just("</title>"), Just("<br>"), Just("<br/>"),
                Just("<html>"), Just("<head>"), Just("</head>"), Just("<body>"), Just("</body>"),
                Just("<meta charset=utf-8>"), Just("<link rel=x>"), Just("<template>"),
            ],
            0..80,
        )) {
            let html = pieces.concat();
            for version in RECIPE_VERSIONS {
                prop_assert_eq!(extracted(html.as_bytes(), version), reference_text(html.as_bytes(), version));
            }
        }
    }

    #[test]
    fn text_emitter_matches_the_callback_emitter_on_the_corpus() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/corpus/pages");
        for entry in std::fs::read_dir(dir).unwrap() {
            let bytes = std::fs::read(entry.unwrap().path()).unwrap();
            for version in RECIPE_VERSIONS {
                assert_eq!(extracted(&bytes, version), reference_text(&bytes, version));
            }
        }
    }

    fn words(html: &str) -> Vec<String> {
        // split_whitespace splits at no-break spaces too
        visible_text(html).split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn drops_invisible_and_boilerplate() {
        let html = r#"<!DOCTYPE html><html><head><title>T</title><style>p{}</style>
            <script>if (a < b) { document.write("<p>x</p>") }</script></head>
            <body><header>Top</header><nav><ul><li>A<li>B</ul></nav>
            <div role="navigation">Menu</div><div class="x breadcrumbs">Crumbs</div>
            <p>Hello&nbsp;w&ouml;rld &amp; <b>b</b>old<!-- hidden --></p><br><img src=x>
            <footer>Bottom</footer><p>End</p></body></html>"#;
        assert_eq!(words(html), ["Hello", "wörld", "&", "b", "old", "End"]);
    }

    #[test]
    fn unclosed_drop_drops_the_rest() {
        assert_eq!(words("<p>a</p><nav><p>b"), ["a"]);
        assert_eq!(words("<p>a</p><footer><p>b</p></footer>c"), ["a", "c"]);
    }
}
