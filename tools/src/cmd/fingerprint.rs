//! `simdex fingerprint`: print `id<TAB>16 hex digits` for every document.
//!
//! Per-document problems (empty documents, invalid UTF-8 under `--strict`, bad JSON lines) are
//! reported on stderr and the document is skipped; the exit code is then 1. Unreadable inputs
//! stop the run (exit 2).

use crate::corpus::{self, Doc, Format, Kind, Skip};
use crate::recipe::RecipeArgs;
use anyhow::Context;
use clap::Args as ClapArgs;
use simdex::fingerprint::input::{fingerprint_text_reader, Outcome, Utf8Stream};
use simdex::fingerprint::{html, Fingerprinter, IdfBuilder};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// Fingerprint documents: prints `id<TAB>fingerprint` (16 hex digits) per document
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// Files, folders (walked recursively) or `-` for standard input
    #[arg(default_value = "-")]
    pub inputs: Vec<PathBuf>,
    /// Input format
    #[arg(long, value_enum, default_value = "auto")]
    pub format: Format,
    /// Refuse documents with invalid UTF-8 instead of replacing the bad bytes
    #[arg(long)]
    pub strict: bool,
    /// Print JSON lines with the word count and warnings instead of `id<TAB>hex`
    #[arg(long)]
    pub json: bool,
    /// First learn an IDF table from the inputs and save it to FILE, then fingerprint with it
    #[arg(long, value_name = "FILE")]
    pub learn_idf: Option<PathBuf>,
    #[command(flatten)]
    pub recipe: RecipeArgs,
}

/// Fingerprints one document (streaming); the outcome or the reason it was skipped.
/// `content` is `doc.content`, or a reader wrapping it.
pub fn fingerprint_doc(
    fp: &mut Fingerprinter,
    doc: &Doc,
    content: impl Read,
    strict: bool,
) -> Result<Outcome, String> {
    let result = match doc.kind {
        Kind::Text => fingerprint_text_reader(fp, content, strict),
        Kind::Html => html::fingerprint_html_reader(fp, content, strict),
    };
    result
        .map(|o| Outcome {
            replaced_utf8: o.replaced_utf8 + doc.replaced_utf8,
            ..o
        })
        .map_err(|e| e.to_string())
}

/// Learns an IDF table from every document of `files` with `fp`'s feature recipe.
pub fn learn_idf(
    fp: &mut Fingerprinter,
    files: &[PathBuf],
    format: Format,
    strict: bool,
) -> anyhow::Result<simdex::fingerprint::IdfTable> {
    let mut builder = IdfBuilder::new(fp.options().feature_recipe());
    for path in files {
        corpus::for_each_doc(
            path,
            format,
            strict,
            |mut doc| {
                // the same text the fingerprint pass sees: repaired UTF-8, visible HTML text
                let mut text = String::new();
                let mut stream = Utf8Stream::new(&mut doc.content, strict);
                let read = match doc.kind {
                    Kind::Text => (|| {
                        while let Some(block) = stream.next_block()? {
                            text.push_str(block);
                        }
                        Ok(())
                    })(),
                    Kind::Html => html::extract_text(&mut stream, |p| text.push_str(p)),
                };
                if read.is_ok() {
                    builder.add_document(&fp.distinct_features(&text));
                }
                Ok(())
            },
            |_| {},
        )?;
    }
    Ok(builder.build(1))
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let files = corpus::expand(&args.inputs)?;
    let mut fp = args.recipe.fingerprinter()?;
    if let Some(out) = &args.learn_idf {
        args.recipe.check_no_idf("--learn-idf")?;
        if files.iter().any(|f| f.as_os_str() == "-") {
            anyhow::bail!("--learn-idf reads the inputs twice, so it cannot read standard input");
        }
        let table = learn_idf(&mut fp, &files, args.format, args.strict)?;
        table
            .save(out)
            .with_context(|| format!("cannot write {}", out.display()))?;
        eprintln!(
            "learned IDF weights of {} features from {} documents into {}",
            table.len(),
            table.documents(),
            out.display()
        );
        fp = fp.with_idf(std::sync::Arc::new(table))?;
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut skipped = 0u64;
    let short_words = fp.options().short_words;
    for path in &files {
        let mut report_skip = |s: Skip| {
            skipped += 1;
            eprintln!("simdex: warning: {}: skipped: {}", s.id, s.reason);
        };
        let mut failed = Vec::new();
        corpus::for_each_doc(
            path,
            args.format,
            args.strict,
            |mut doc| {
                let id = doc.id.clone();
                let content = std::mem::replace(&mut doc.content, Box::new(std::io::empty()));
                match fingerprint_doc(&mut fp, &doc, content, args.strict) {
                    Ok(o) => {
                        let f = o.fingerprint;
                        if o.replaced_utf8 > 0 {
                            eprintln!(
                                "simdex: warning: {id}: {} invalid UTF-8 sequences replaced",
                                o.replaced_utf8
                            );
                        }
                        if f.short {
                            eprintln!("simdex: warning: {id}: short document ({} words < {short_words}): its fingerprint is unreliable", f.words);
                        }
                        if args.json {
                            let line = serde_json::json!({
                                "id": id, "fingerprint": format!("{:016x}", f.value), "words": f.words,
                                "short": f.short, "replaced_utf8": o.replaced_utf8,
                            });
                            writeln!(out, "{line}")?;
                        } else {
                            writeln!(out, "{id}\t{:016x}", f.value)?;
                        }
                    }
                    Err(reason) => failed.push(Skip { id, reason }),
                }
                Ok(())
            },
            &mut report_skip,
        )?;
        failed.into_iter().for_each(&mut report_skip);
    }
    out.flush()?;
    Ok(if skipped > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
