//! Documents from the command line's inputs: files, folders (walked recursively, in name
//! order), `-` for standard input; text, HTML or JSON lines, by `--format` or by extension.

use anyhow::{bail, Context};
use clap::ValueEnum;
use simdex::fingerprint::input::{Body, JsonLines};
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// by extension: .html/.htm as HTML, .jsonl/.ndjson as JSON lines, anything else as text
    Auto,
    Text,
    Html,
    Jsonl,
}

/// How a document's bytes are to be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Text,
    Html,
}

/// One document, ready to be read once.
pub struct Doc {
    pub id: String,
    pub kind: Kind,
    pub content: Box<dyn Read>,
    /// invalid UTF-8 sequences already replaced while reading its JSON line
    pub replaced_utf8: u64,
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
        let meta =
            std::fs::metadata(input).with_context(|| format!("cannot read {}", input.display()))?;
        if meta.is_dir() {
            walk(input, &mut out).with_context(|| format!("cannot list {}", input.display()))?;
        } else {
            out.push(input.clone());
        }
    }
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out)?;
        } else if p
            .file_name()
            .is_some_and(|n| !n.to_string_lossy().starts_with('.'))
        {
            out.push(p);
        }
    }
    Ok(())
}

fn format_of(path: &Path, format: Format) -> Format {
    if format != Format::Auto {
        return format;
    }
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("html" | "htm" | "xhtml") => Format::Html,
        Some("jsonl" | "ndjson") => Format::Jsonl,
        _ => Format::Text,
    }
}

/// Calls `each` with every document of `path` (one, or one per JSON line); JSON-line problems
/// go to `skip`. Fatal errors (unreadable files) stop the run.
pub fn for_each_doc(
    path: &Path,
    format: Format,
    strict: bool,
    mut each: impl FnMut(Doc) -> anyhow::Result<()>,
    mut skip: impl FnMut(Skip),
) -> anyhow::Result<()> {
    let stdin = path.as_os_str() == "-";
    let name = if stdin {
        "-".to_owned()
    } else {
        path.display().to_string()
    };
    let open = || -> anyhow::Result<Box<dyn Read>> {
        if stdin {
            Ok(Box::new(std::io::stdin()))
        } else {
            let f = std::fs::File::open(path)
                .with_context(|| format!("cannot open {}", path.display()))?;
            Ok(Box::new(f))
        }
    };
    match format_of(path, format) {
        Format::Auto => bail!("internal: unresolved format"),
        Format::Text => each(Doc {
            id: name,
            kind: Kind::Text,
            content: open()?,
            replaced_utf8: 0,
        }),
        Format::Html => each(Doc {
            id: name,
            kind: Kind::Html,
            content: open()?,
            replaced_utf8: 0,
        }),
        Format::Jsonl => {
            for item in JsonLines::new(BufReader::new(open()?), strict) {
                match item {
                    Ok(doc) => {
                        let (kind, body) = match doc.body {
                            Body::Text(t) => (Kind::Text, t),
                            Body::Html(h) => (Kind::Html, h),
                        };
                        each(Doc {
                            id: doc.id,
                            kind,
                            content: Box::new(std::io::Cursor::new(body.into_bytes())),
                            replaced_utf8: doc.replaced_utf8,
                        })?;
                    }
                    Err(simdex::fingerprint::Error::Io(e)) => {
                        return Err(e).with_context(|| format!("cannot read {name}"))
                    }
                    Err(e) => skip(Skip {
                        id: name.clone(),
                        reason: e.to_string(),
                    }),
                }
            }
            Ok(())
        }
    }
}

/// A reader that also hashes what passes through (for exact-duplicate detection): 128 bits
/// from two SipHash states with different keys. Not persisted.
pub struct HashingReader<R> {
    inner: R,
    a: std::hash::DefaultHasher,
    b: std::hash::DefaultHasher,
}

impl<R: Read> HashingReader<R> {
    pub fn new(inner: R) -> Self {
        use std::hash::Hasher;
        let a = std::hash::DefaultHasher::new();
        let mut b = std::hash::DefaultHasher::new();
        b.write_u64(0x5157_4c44_4f43_5321);
        HashingReader { inner, a, b }
    }

    /// The content hash of everything read so far, as 32 hex digits.
    pub fn hex(&self) -> String {
        use std::hash::Hasher;
        format!("{:016x}{:016x}", self.a.finish(), self.b.finish())
    }
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::hash::Hasher;
        let n = self.inner.read(buf)?;
        self.a.write(&buf[..n]);
        self.b.write(&buf[..n]);
        Ok(n)
    }
}
