//! Documents from the command line's inputs: files, folders (walked recursively, in name
//! order), `-` for standard input, read by the library (`simdex_fingerprint::document`) as
//! text, HTML or JSON lines, by `--format` or by extension. A file's document id is its path,
//! escaped ([`escape_name`]) so that any name prints on one line and reads back.

use anyhow::Context;
use clap::ValueEnum;
use indicatif::ProgressBar;
use simdex_fingerprint::corpus::ContentHash;
use simdex_fingerprint::document::{self, Document, DocumentKind, Documents, IdfLearner, InvalidUtf8};
use simdex_fingerprint::sketch::Sketcher;
use simdex_fingerprint::JsonDoc;
use simdex_fingerprint::{Fingerprinter, IdfTable};
use std::collections::HashMap;
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// by extension: .html/.htm as HTML, .jsonl/.ndjson as JSON lines, anything else as text
    Auto,
    Text,
    Html,
    Jsonl,
}

/// How documents are read (`--format`, `--strict`).
#[derive(Debug, clap::Args)]
pub struct ReadArgs {
    /// Input format
    #[arg(long, value_enum, default_value = "auto")]
    pub format: Format,
    /// Refuse documents with invalid UTF-8 instead of replacing the bad bytes
    #[arg(long)]
    pub strict: bool,
}

impl ReadArgs {
    /// What to do with invalid UTF-8.
    pub fn invalid_utf8(&self) -> InvalidUtf8 {
        if self.strict {
            InvalidUtf8::Refuse
        } else {
            InvalidUtf8::Replace
        }
    }

    /// The flags that ask for these settings again (none for the defaults).
    pub fn flags(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.format != Format::Auto {
            out.extend(["--format".to_owned(), crate::value_parsers::value_name(self.format)]);
        }
        if self.strict {
            out.push("--strict".to_owned());
        }
        out
    }

    /// The format of the input `path`.
    fn format_of(&self, path: &Path) -> document::Format {
        match self.format {
            Format::Auto => document::Format::of_path(path),
            Format::Text => document::Format::Text,
            Format::Html => document::Format::Html,
            Format::Jsonl => document::Format::JsonLines,
        }
    }
}

/// A problem with one document that does not stop the run (reported, document skipped).
pub struct Skip {
    pub id: String,
    pub reason: String,
}

/// The input files in order: each argument, folders expanded.
pub fn expand(inputs: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for input in inputs {
        if input.as_os_str() == "-" {
            out.push(input.clone());
            continue;
        }
        let meta = std::fs::metadata(input).with_context(|| format!("cannot read {}", input.display()))?;
        if meta.is_dir() {
            walk(input, &mut out).with_context(|| format!("cannot list {}", input.display()))?;
        } else {
            out.push(input.clone());
        }
    }
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out)?;
        } else if p.file_name().is_some_and(|n| !n.to_string_lossy().starts_with('.')) {
            out.push(p);
        }
    }
    Ok(())
}

/// How file names are printed (document ids, the `--help` of the commands that print them):
/// the one place the escaping is described.
pub const NAME_ESCAPING: &str = "File names are printed escaped, so that every name fits on one line and reads back exactly: a backslash as \\\\, tab, newline and carriage return as \\t \\n \\r, other control characters and bytes that are not UTF-8 as \\xHH; everything else as it is. `printf '%b' NAME` in bash, or Python's `codecs.escape_decode(NAME.encode())[0]`, gives back the name's bytes.";

/// A `--help` ending: how names are escaped, then `examples`.
pub fn with_name_escaping(examples: &str) -> String {
    format!("{NAME_ESCAPING}\n\n{examples}")
}

/// A path as printed: the escaping of [`NAME_ESCAPING`]. The identity on names of printable
/// UTF-8 without a backslash (nearly all of them).
pub fn escape_name(path: &Path) -> String {
    use std::fmt::Write;
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for chunk in path.as_os_str().as_bytes().utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                c if c.is_ascii_control() => {
                    let _ = write!(out, "\\x{:02x}", c as u32);
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

/// Calls `each` with every document of `files`, in order, and `bar.inc(1)` after each file.
/// A JSON line that is not a document goes to `skip` at once; a document `each` gives up on
/// (it returns the reason) goes to `skip` after the rest of its file. Inputs that cannot be
/// read stop the run.
pub fn for_each_doc(
    files: &[PathBuf],
    read: &ReadArgs,
    bar: &ProgressBar,
    mut each: impl FnMut(Document<Box<dyn Read>>) -> anyhow::Result<Option<String>>,
    mut skip: impl FnMut(Skip),
) -> anyhow::Result<()> {
    for path in files {
        let stdin = path.as_os_str() == "-";
        let name = if stdin { "-".to_owned() } else { escape_name(path) };
        let input: Box<dyn Read> = if stdin { Box::new(std::io::stdin()) } else { Box::new(std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?) };
        let mut failed = Vec::new();
        for doc in Documents::new(input, name.clone(), read.format_of(path), read.invalid_utf8()) {
            match doc {
                Ok(doc) => {
                    let id = doc.id.clone();
                    if let Some(reason) = each(doc)? {
                        failed.push(Skip { id, reason });
                    }
                }
                Err(simdex_fingerprint::Error::Io(e)) => return Err(e).with_context(|| format!("cannot read {name}")),
                Err(e) => skip(Skip { id: name.clone(), reason: e.to_string() }),
            }
        }
        failed.into_iter().for_each(&mut skip);
        bar.inc(1);
    }
    Ok(())
}

/// Where a document of the inputs is, to read it again alone ([`read_again`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    /// Its input, by its place in the list of inputs.
    pub file: u32,
    /// A JSON-lines record: its line number (1-based), the line's byte offset and length
    /// (line end included); `None`: the whole input is the document.
    pub line: Option<(u64, u64, u64)>,
}

/// A piece of the inputs, in order, as [`for_each_doc_parallel`] hands them to its workers.
enum Piece {
    /// A text or HTML input (`-`: standard input), read whole by a worker.
    File { path: PathBuf, name: String, kind: DocumentKind, file: u32 },
    /// One line of a JSON-lines input, parsed by a worker: line number, byte offset, bytes.
    Line { name: Arc<str>, file: u32, line: u64, offset: u64, bytes: Vec<u8> },
    /// The end of an input.
    EndOfFile,
    /// An input that cannot be read: stops the run.
    Failed(anyhow::Error),
}

/// What a worker made of a [`Piece`].
enum Outcome<W> {
    Doc {
        id: String,
        at: Location,
        work: W,
    },
    Skip(Skip),
    /// A blank line.
    Nothing,
    EndOfFile,
    Failed(anyhow::Error),
}

/// Pieces handed to a worker at once, and the bytes of lines that end a batch early.
const BATCH_PIECES: usize = 64;
const BATCH_BYTES: usize = 1 << 20;

/// [`for_each_doc`] on `threads` threads: each worker thread reads documents with a `work`
/// function of its own (made by `worker`), and `each` gets the documents' results (with
/// where each is, to read it again) on the calling thread in the inputs' order, with `skip`
/// and `bar` called exactly as [`for_each_doc`] calls them.
pub fn for_each_doc_parallel<F, W>(
    files: &[PathBuf],
    read: &ReadArgs,
    bar: &ProgressBar,
    threads: usize,
    worker: impl Fn() -> F + Sync,
    mut each: impl FnMut(String, Location, W) -> anyhow::Result<Option<String>>,
    mut skip: impl FnMut(Skip),
) -> anyhow::Result<()>
where
    F: FnMut(Document<Content>) -> anyhow::Result<W> + Send,
    W: Send,
{
    let utf8 = read.invalid_utf8();
    let mut failed: Vec<Skip> = Vec::new();
    crate::ordered::run(
        threads,
        |send| produce_pieces(files, read, send),
        worker,
        |work, pieces: Vec<Piece>| pieces.into_iter().map(|p| read_piece(p, utf8, work)).collect::<Vec<_>>(),
        |outcomes| {
            for outcome in outcomes {
                match outcome {
                    Outcome::Doc { id, at, work } => {
                        if let Some(reason) = each(id.clone(), at, work)? {
                            failed.push(Skip { id, reason });
                        }
                    }
                    Outcome::Skip(s) => skip(s),
                    Outcome::Nothing => {}
                    Outcome::EndOfFile => {
                        failed.drain(..).for_each(&mut skip);
                        bar.inc(1);
                    }
                    Outcome::Failed(e) => return Err(e),
                }
            }
            Ok(())
        },
    )
    .map(drop)
}

/// Hands out the pieces of `files` in batches, until `send` says stop.
fn produce_pieces(files: &[PathBuf], read: &ReadArgs, send: &mut dyn FnMut(Vec<Piece>) -> bool) {
    let mut batch: Vec<Piece> = Vec::new();
    let mut bytes = 0;
    let mut push = |piece: Piece, batch: &mut Vec<Piece>, flush: bool| -> bool {
        if let Piece::Line { bytes: b, .. } = &piece {
            bytes += b.len();
        }
        batch.push(piece);
        if flush || batch.len() >= BATCH_PIECES || bytes >= BATCH_BYTES {
            bytes = 0;
            return send(std::mem::take(batch));
        }
        true
    };
    for (file, path) in (0u32..).zip(files) {
        let stdin = path.as_os_str() == "-";
        let name = if stdin { "-".to_owned() } else { escape_name(path) };
        let kind = match read.format_of(path) {
            document::Format::JsonLines => None,
            document::Format::Text => Some(DocumentKind::Text),
            document::Format::Html => Some(DocumentKind::Html),
        };
        if let Some(kind) = kind {
            if !push(Piece::File { path: path.clone(), name, kind, file }, &mut batch, false) || !push(Piece::EndOfFile, &mut batch, false) {
                return;
            }
            continue;
        }
        let input: Box<dyn Read> = if stdin {
            Box::new(std::io::stdin())
        } else {
            match std::fs::File::open(path) {
                Ok(f) => Box::new(f),
                Err(e) => {
                    push(Piece::Failed(anyhow::Error::new(e).context(format!("cannot open {}", path.display()))), &mut batch, true);
                    return;
                }
            }
        };
        let mut input = std::io::BufReader::with_capacity(1 << 16, input);
        let name: Arc<str> = name.into();
        let (mut line, mut offset) = (0, 0u64);
        loop {
            let mut bytes = Vec::new();
            let at = offset;
            match input.read_until(b'\n', &mut bytes) {
                Ok(0) => break,
                Ok(n) => offset += n as u64,
                Err(e) => {
                    push(Piece::Failed(anyhow::Error::new(e).context(format!("cannot read {name}"))), &mut batch, true);
                    return;
                }
            }
            line += 1;
            if !push(Piece::Line { name: Arc::clone(&name), file, line, offset: at, bytes }, &mut batch, false) {
                return;
            }
        }
        if !push(Piece::EndOfFile, &mut batch, false) {
            return;
        }
    }
    if !batch.is_empty() {
        send(batch);
    }
}

/// A worker's reading of one piece.
fn read_piece<W>(piece: Piece, utf8: InvalidUtf8, work: &mut impl FnMut(Document<Content>) -> anyhow::Result<W>) -> Outcome<W> {
    let (doc, at) = match piece {
        Piece::EndOfFile => return Outcome::EndOfFile,
        Piece::Failed(e) => return Outcome::Failed(e),
        Piece::File { path, name, kind, file } => {
            let content: Box<dyn Read> = if path.as_os_str() == "-" {
                Box::new(std::io::stdin())
            } else {
                match std::fs::File::open(&path) {
                    Ok(f) => Box::new(f),
                    Err(e) => return Outcome::Failed(anyhow::Error::new(e).context(format!("cannot open {}", path.display()))),
                }
            };
            (Document { id: name, kind, content: Content::Stream(content), replaced_utf8: 0 }, Location { file, line: None })
        }
        Piece::Line { name, file, line, offset, bytes } => match (bytes.len() as u64, JsonDoc::from_owned_line(bytes, line, utf8)) {
            (_, None) => return Outcome::Nothing,
            (len, Some(Ok(doc))) => (Content::of_record(doc), Location { file, line: Some((line, offset, len)) }),
            (_, Some(Err(e))) => return Outcome::Skip(Skip { id: name.to_string(), reason: e.to_string() }),
        },
    };
    let id = doc.id.clone();
    match work(doc) {
        Ok(work) => Outcome::Doc { id, at, work },
        Err(e) => Outcome::Failed(e),
    }
}

/// A document's content as the workers of [`for_each_doc_parallel`] get it: the text of a
/// JSON-lines record, in memory already (read by [`text_and_content_hash`] without a copy),
/// or a stream (a file, an HTML body).
pub enum Content {
    Text(std::io::Cursor<String>),
    Stream(Box<dyn Read>),
}

impl Content {
    /// The document of a JSON-lines record.
    fn of_record(r: JsonDoc) -> Document<Content> {
        let (kind, content) = match r.body {
            simdex_fingerprint::Body::Text(t) => (DocumentKind::Text, Content::Text(std::io::Cursor::new(t))),
            simdex_fingerprint::Body::Html(h) => (DocumentKind::Html, Content::Stream(Box::new(std::io::Cursor::new(h.into_bytes())))),
        };
        Document { id: r.id, kind, content, replaced_utf8: r.replaced_utf8 }
    }
}

impl Read for Content {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Content::Text(t) => t.read(buf),
            Content::Stream(r) => r.read(buf),
        }
    }
}

/// The whole text of `doc` as fingerprint recipe `version` takes it ([`Document::text_as`]:
/// its error, for one without) and its content hash ([`ContentHash`]: of every byte of its
/// content). A record's text in memory is taken
/// as it is (the library's rules for text in memory, [`Document::text_in_memory`]).
pub fn text_and_content_hash(doc: Document<Content>, utf8: InvalidUtf8, version: u32) -> anyhow::Result<(Result<String, simdex_fingerprint::Error>, String)> {
    match doc.content {
        Content::Text(t) if doc.kind == DocumentKind::Text && t.position() == 0 => {
            let t = t.into_inner();
            let content = ContentHash::of_bytes(t.as_bytes());
            let mut read = Document { id: String::new(), kind: DocumentKind::Text, content: t.as_bytes(), replaced_utf8: 0 };
            let text = match read.text_in_memory(utf8, version) {
                Ok(std::borrow::Cow::Borrowed(_)) => Ok(None),
                Ok(std::borrow::Cow::Owned(changed)) => Ok(Some(changed)),
                Err(e) => Err(e),
            };
            Ok((text.map(|changed| changed.unwrap_or(t)), content))
        }
        content => {
            let mut doc = Document { id: doc.id, kind: doc.kind, content: ContentHash::new(content), replaced_utf8: doc.replaced_utf8 };
            let text = doc.text_as(utf8, version);
            Ok((text, doc.content.finish()?))
        }
    }
}

/// The document at `at` of `files` (as [`for_each_doc_parallel`] located it), read again
/// alone: a JSON-lines record by its line's offset, a text or HTML input whole.
pub fn read_again(files: &[PathBuf], read: &ReadArgs, at: Location) -> anyhow::Result<Document<Box<dyn Read>>> {
    use std::io::{Seek, SeekFrom};
    let path = files.get(at.file as usize).with_context(|| format!("no input number {}", at.file))?;
    let mut input = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let name = escape_name(path);
    let Some((line, offset, len)) = at.line else {
        let kind = match read.format_of(path) {
            document::Format::Html => DocumentKind::Html,
            _ => DocumentKind::Text,
        };
        return Ok(Document { id: name, kind, content: Box::new(input), replaced_utf8: 0 });
    };
    let mut bytes = vec![0; usize::try_from(len)?];
    input.seek(SeekFrom::Start(offset)).and_then(|_| input.read_exact(&mut bytes)).with_context(|| format!("cannot read line {line} of {name} again"))?;
    match JsonDoc::from_line(&bytes, line, read.invalid_utf8()) {
        Some(Ok(doc)) => Ok(Document::from(doc)),
        Some(Err(e)) => Err(anyhow::Error::new(e).context(format!("reading {name} again"))),
        None => anyhow::bail!("line {line} of {name} is blank now: the inputs changed during the run"),
    }
}

/// The shingle sets (`sketcher`'s, [`Sketcher::shingles`]) of the documents `wanted` (their
/// places in `locations`), each read again alone ([`read_again`]), on `threads` threads,
/// `bar.inc(1)` after each; a document without text has none.
#[allow(clippy::too_many_arguments)]
pub fn shingles_again(
    files: &[PathBuf],
    read: &ReadArgs,
    locations: &[Location],
    wanted: &[u32],
    sketcher: &Sketcher,
    version: u32,
    threads: usize,
    bar: &ProgressBar,
) -> anyhow::Result<HashMap<u32, Vec<u64>>> {
    let utf8 = read.invalid_utf8();
    type Sets = Vec<(u32, Vec<u64>)>;
    let read_some = |wanted: &[u32]| -> anyhow::Result<Sets> {
        let mut sketcher = sketcher.clone();
        let mut sets = Vec::with_capacity(wanted.len());
        for &i in wanted {
            let at = *locations.get(i as usize).context("a document the first pass did not locate")?;
            if let Ok(text) = read_again(files, read, at)?.text_as(utf8, version) {
                sets.push((i, sketcher.shingles(&text).to_vec()));
            }
            bar.inc(1);
        }
        Ok(sets)
    };
    let read_some = &read_some;
    let per_thread = wanted.len().div_ceil(threads.max(1)).max(1);
    let parts: Vec<anyhow::Result<Sets>> = std::thread::scope(|s| {
        let handles: Vec<_> = wanted.chunks(per_thread).map(|w| s.spawn(move || read_some(w))).collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
    });
    let mut sets = HashMap::with_capacity(wanted.len());
    for part in parts {
        sets.extend(part?);
    }
    Ok(sets)
}

/// Learns an IDF table from every document of `files` with `fp`'s feature recipe.
pub fn learn_idf(fp: &mut Fingerprinter, files: &[PathBuf], read: &ReadArgs, bar: &ProgressBar) -> anyhow::Result<IdfTable> {
    let mut learner = IdfLearner::new(fp, read.invalid_utf8());
    for_each_doc(
        files,
        read,
        bar,
        |doc| {
            learner.add(doc);
            Ok(None)
        },
        |_| {},
    )?;
    Ok(learner.finish())
}
