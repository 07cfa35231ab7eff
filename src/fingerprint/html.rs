//! Visible text of HTML pages (cargo feature `html`), streamed through the WHATWG tokenizer of
//! `html5gum`, with entities decoded by the tokenizer.
//!
//! Dropped with everything inside them: `head`-only text (`title`), `script`, `style`,
//! `noscript`, `template`, `svg`, `iframe`, `form`, `button`, `nav`, `header`, `footer`,
//! elements with `role="navigation"` and navigation bars by class (`navheader`, `navfooter`,
//! `docnav`, `breadcrumb`, `breadcrumbs`); comments and doctypes. Every tag separates words
//! (as a space would), so text pieces never glue together.
//!
//! A tokenizer, not a tree builder: a dropped element ends at its matching end tag, and end
//! tags close whatever opened after them (implied end tags); void elements never open.

use super::input::{Outcome, Utf8Stream};
use super::{Error, Fingerprinter};
use html5gum::emitters::callback::{CallbackEmitter, CallbackEvent};
use html5gum::{IoReader, Span, Tokenizer};
use std::io::Read;

const DROP_TAGS: &[&[u8]] = &[
    b"title",
    b"script",
    b"style",
    b"noscript",
    b"template",
    b"svg",
    b"iframe",
    b"form",
    b"button",
    b"nav",
    b"header",
    b"footer",
];
const DROP_CLASSES: &[&[u8]] = &[
    b"navheader",
    b"navfooter",
    b"docnav",
    b"breadcrumb",
    b"breadcrumbs",
];
const VOID_TAGS: &[&[u8]] = &[
    b"area", b"base", b"br", b"col", b"embed", b"hr", b"img", b"input", b"link", b"meta", b"param",
    b"source", b"track", b"wbr",
];

/// Tracks which elements are being dropped while the tokenizer streams events.
#[derive(Debug, Default)]
struct Dropper {
    /// open elements since the outermost dropped one (empty: text is visible)
    open: Vec<Vec<u8>>,
    tag: Vec<u8>,
    attr: Vec<u8>,
    boilerplate: bool,
}

impl Dropper {
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
                    b"class" => value
                        .split(|b| b.is_ascii_whitespace())
                        .any(|c| DROP_CLASSES.contains(&c)),
                    _ => false,
                };
            }
            CallbackEvent::CloseStartTag { .. } => {
                let tag = self.tag.as_slice();
                if VOID_TAGS.contains(&tag) {
                    return None;
                }
                if !self.open.is_empty() || self.boilerplate || DROP_TAGS.contains(&tag) {
                    self.open.push(self.tag.clone());
                }
            }
            CallbackEvent::EndTag { name } => {
                if let Some(i) = self.open.iter().rposition(|t| t.as_slice() == name) {
                    self.open.truncate(i);
                }
            }
            CallbackEvent::String { value } if self.open.is_empty() => return Some(value),
            _ => {}
        }
        None
    }
}

/// Streams the visible text of the HTML read from `reader` into `sink`, in pieces; pieces
/// from different text nodes come with a separating space.
pub fn extract_text(reader: impl Read, mut sink: impl FnMut(&str)) -> Result<(), Error> {
    let mut dropper = Dropper::default();
    let mut emitter = CallbackEmitter::new(|event: CallbackEvent<'_>, _: Span<()>| -> Option<()> {
        if let Some(text) = dropper.event(event) {
            sink(" ");
            sink(&String::from_utf8_lossy(text));
        }
        None
    });
    // raw-text elements (script, style, ...) switch the tokenizer's state as a tree builder would
    emitter.naively_switch_states(true);
    for item in Tokenizer::new_with_emitter(IoReader::new(reader), emitter) {
        item?;
    }
    Ok(())
}

/// The visible text of an HTML string (convenience; pieces joined by single spaces).
pub fn visible_text(html: &str) -> String {
    let mut out = String::new();
    // reading from a byte slice cannot fail
    let _ = extract_text(html.as_bytes(), |piece| out.push_str(piece));
    out
}

/// Fingerprints the visible text of the HTML read from `reader`, streaming.
pub fn fingerprint_html_reader(
    fp: &mut Fingerprinter,
    reader: impl Read,
    strict: bool,
) -> Result<Outcome, Error> {
    let mut stream = Utf8Stream::new(reader, strict);
    let mut session = fp.session();
    let result = extract_text(&mut stream, |piece| session.push(piece));
    if let Err(Error::Io(e)) = &result {
        // strict-mode UTF-8 errors travel through the tokenizer as io::Error(InvalidData)
        if let Some(Error::InvalidUtf8 { offset }) =
            e.get_ref().and_then(|i| i.downcast_ref::<Error>())
        {
            return Err(Error::InvalidUtf8 { offset: *offset });
        }
    }
    result?;
    Ok(Outcome {
        fingerprint: session.finish()?,
        replaced_utf8: stream.replaced(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(html: &str) -> Vec<String> {
        // split_whitespace splits at no-break spaces too
        visible_text(html)
            .split_whitespace()
            .map(str::to_owned)
            .collect()
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
