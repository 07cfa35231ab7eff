//! Where a page's body begins, as recipe 2 extracts text: the insertion modes an HTML5 tree
//! builder goes through before `<body>` (WHATWG HTML, "tree construction", with scripting
//! off, as the ground truth's parser builds the tree), reduced to what decides whether text
//! is visible.
//!
//! Text in the head is not the page's text, but the head ends at the first token a head may
//! not hold: text (not whitespace), or a start tag of the body's, even inside a head
//! `<noscript>` (scripting off, a head `noscript` may hold only `link`, `meta`, `style` and
//! the like). From there everything is the body's: the text that broke the head, and a later
//! `<title>`, which in the body is ordinary visible text.
//!
//! The elements the head keeps with their content (`title`, `style`, `script`, `noframes`,
//! `template`) are reported as [`Step::Hidden`]: the caller drops them with their content,
//! so that their text and tags never reach these rules. Comments and doctypes change nothing.

/// Elements a head holds without content.
const HEAD_VOID: &[&[u8]] = &[b"base", b"basefont", b"bgsound", b"link", b"meta"];
/// Elements a head holds with their content (raw text, or a template's contents).
const HEAD_HIDDEN: &[&[u8]] = &[b"title", b"style", b"script", b"noframes", b"template"];

/// The tree builder's insertion mode, as far as it matters here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Mode {
    /// "initial", "before html" and "before head": nothing yet
    #[default]
    BeforeHead,
    InHead,
    /// "in head noscript": a `<noscript>` in the head (scripting off)
    InHeadNoscript,
    AfterHead,
    /// the body (and everything after it: text after `</body>` or `</html>` is the body's)
    InBody,
}

/// What a token before the body is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// The head's, or ignored: no text, nothing to drop.
    Head,
    /// A head element kept with its content (a start tag): drop it until its end tag.
    Hidden,
    /// The body's: the mode is now [`Mode::InBody`]; handle the token as body content.
    Body,
}

fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0c' | b'\r')
}

impl Mode {
    /// A run of text outside any hidden element.
    pub(super) fn text(&mut self, text: &[u8]) -> Step {
        if *self == Mode::InBody || text.iter().any(|&b| !is_whitespace(b)) {
            *self = Mode::InBody;
            Step::Body
        } else {
            Step::Head
        }
    }

    /// A start tag outside any hidden element.
    pub(super) fn start_tag(&mut self, tag: &[u8]) -> Step {
        loop {
            match *self {
                Mode::InBody => return Step::Body,
                Mode::BeforeHead => {
                    if tag == b"html" {
                        return Step::Head;
                    }
                    // a head begins, implied by anything but `<html>`
                    *self = Mode::InHead;
                    if tag == b"head" {
                        return Step::Head;
                    }
                }
                Mode::InHeadNoscript => match tag {
                    b"html" | b"head" | b"noscript" | b"basefont" | b"bgsound" | b"link" | b"meta" => return Step::Head,
                    b"noframes" | b"style" => return Step::Hidden,
                    // anything else closes the head's noscript and is looked at again in the head
                    _ => *self = Mode::InHead,
                },
                // after the head, head elements still go into the head
                Mode::InHead | Mode::AfterHead => {
                    if HEAD_VOID.contains(&tag) || tag == b"html" || tag == b"head" {
                        return Step::Head;
                    }
                    if HEAD_HIDDEN.contains(&tag) {
                        return Step::Hidden;
                    }
                    if *self == Mode::InHead && tag == b"noscript" {
                        *self = Mode::InHeadNoscript;
                        return Step::Head;
                    }
                    // anything else ends the head (the body begins, implied)
                    *self = Mode::InBody;
                    return Step::Body;
                }
            }
        }
    }

    /// An end tag outside any hidden element.
    pub(super) fn end_tag(&mut self, tag: &[u8]) -> Step {
        loop {
            match (*self, tag) {
                (Mode::InBody, _) => return Step::Body,
                (Mode::BeforeHead, b"head" | b"body" | b"html" | b"br") => *self = Mode::InHead,
                (Mode::InHead, b"head") => {
                    *self = Mode::AfterHead;
                    return Step::Head;
                }
                (Mode::InHead, b"body" | b"html" | b"br") => *self = Mode::AfterHead,
                (Mode::InHeadNoscript, b"noscript") => {
                    *self = Mode::InHead;
                    return Step::Head;
                }
                (Mode::InHeadNoscript, b"br") => *self = Mode::InHead,
                (Mode::AfterHead, b"body" | b"html" | b"br") => {
                    *self = Mode::InBody;
                    return Step::Body;
                }
                // every other end tag is ignored before the body
                _ => return Step::Head,
            }
        }
    }
}
