//! Documents from the command line's inputs: files, folders (walked recursively, in name
//! order), `-` for standard input, read by the library (`simdex_fingerprint::document`) as
//! text, HTML or JSON lines, by `--format` or by extension. A file's document id is its path,
//! escaped ([`escape_name`]) so that any name prints on one line and reads back.

use anyhow::Context;
use clap::ValueEnum;
use indicatif::ProgressBar;
use simdex_fingerprint::corpus::ContentHash;
use simdex_fingerprint::document::{self, Document, Documents, IdfLearner, InvalidUtf8};
use simdex_fingerprint::{Fingerprinter, IdfTable};
use std::io::Read;
use std::path::{Path, PathBuf};

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

/// A document of the first of two passes, kept for the second: its id, content hash and
/// text (or why it has none).
pub struct KeptDoc {
    pub id: String,
    pub content: String,
    pub text: Result<String, String>,
}

/// What one input file gave the first pass, in the order [`for_each_doc`] reported it.
pub enum Kept {
    Doc(KeptDoc),
    Skip(Skip),
}

/// The documents of every input, kept by [`learn_idf_keeping_text`] for a second pass.
pub struct KeptCorpus {
    files: Vec<Vec<Kept>>,
}

impl KeptCorpus {
    /// Replays the kept documents as [`for_each_doc`] reads the files: `each` for every
    /// document (a reason it returns goes to `skip` after the rest of its file), `skip`
    /// for what was not a document, `bar.inc(1)` after each file.
    pub fn for_each_doc(self, bar: &ProgressBar, mut each: impl FnMut(KeptDoc) -> anyhow::Result<Option<String>>, mut skip: impl FnMut(Skip)) -> anyhow::Result<()> {
        for file in self.files {
            let mut failed = Vec::new();
            for item in file {
                match item {
                    Kept::Doc(doc) => {
                        let id = doc.id.clone();
                        if let Some(reason) = each(doc)? {
                            failed.push(Skip { id, reason });
                        }
                    }
                    Kept::Skip(s) => skip(s),
                }
            }
            failed.into_iter().for_each(&mut skip);
            bar.inc(1);
        }
        Ok(())
    }
}

/// [`learn_idf`], keeping every document's text and content hash for a second pass while
/// they take at most `budget` bytes (`None` beyond it: the second pass reads the inputs
/// again). Saves the second pass the HTML extraction.
pub fn learn_idf_keeping_text(fp: &mut Fingerprinter, files: &[PathBuf], read: &ReadArgs, bar: &ProgressBar, budget: usize) -> anyhow::Result<(IdfTable, Option<KeptCorpus>)> {
    let utf8 = read.invalid_utf8();
    let mut learner = IdfLearner::new(fp, utf8);
    let mut kept = Some(KeptCorpus { files: Vec::new() });
    let mut bytes = 0usize;
    for path in files {
        let mut file = Vec::new();
        let mut skips = Vec::new();
        for_each_doc(
            std::slice::from_ref(path),
            read,
            bar,
            |doc| {
                let mut doc = doc.map_content(ContentHash::new);
                let text = doc.text(utf8);
                if let Ok(text) = &text {
                    learner.add_text(text);
                }
                let content = doc.content.finish()?;
                if kept.is_some() {
                    let text = text.map_err(|e| e.to_string());
                    bytes += doc.id.len() + text.as_ref().map_or_else(String::len, String::len) + 64;
                    file.push(Kept::Doc(KeptDoc { id: doc.id, content, text }));
                }
                Ok(None)
            },
            |s| skips.push(s),
        )?;
        if bytes > budget {
            kept = None;
        }
        if let Some(k) = kept.as_mut() {
            // `each` gives up on nothing here, so the file's skips are records that were
            // not documents; where they sit among its documents does not matter: the
            // replay reports them, as `for_each_doc` does, before the documents the second
            // pass gives up on, which go to `skip` at the end of the file.
            file.extend(skips.into_iter().map(Kept::Skip));
            k.files.push(file);
        }
    }
    Ok((learner.finish(), kept))
}
