//! `simdex fingerprint`: print `id<TAB>16 hex digits` for every document.
//!
//! Per-document problems (empty documents, binary documents such as executables or images,
//! invalid UTF-8 under `--strict`, bad JSON lines) are reported on stderr with the document's
//! name and the document is skipped, the others go on; the exit code is then 1. Unreadable
//! inputs stop the run (exit 2). Names are printed escaped (`corpus::escape_name`).

use crate::corpus::{self, ReadArgs, Skip};
use crate::recipe_args::RecipeArgs;
use anyhow::Context;
use clap::Args as ClapArgs;
use indicatif::ProgressBar;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// What `--help` ends with.
const EXAMPLES: &str = "Examples:\n  simdex fingerprint corpus/ > fps.tsv\n  simdex fingerprint corpus/ --for-index names.tsv > for-index.tsv";

/// Fingerprint documents, printing `id<TAB>fingerprint` (16 hex digits) for each.
///
/// A document that cannot be fingerprinted (empty, binary: a NUL byte in its first 8,000
/// bytes, such as an executable, an image or UTF-16 text; invalid UTF-8 with `--strict`) gets a
/// warning naming it on stderr and is skipped; the others are printed, and the exit code is 1.
#[derive(Debug, ClapArgs)]
#[command(after_help = EXAMPLES, after_long_help = crate::corpus::with_name_escaping(EXAMPLES))]
pub struct Args {
    /// Files, folders (walked recursively) or `-` for standard input
    #[arg(default_value = "-")]
    pub inputs: Vec<PathBuf>,
    #[command(flatten)]
    pub read: ReadArgs,
    /// Print JSON lines with the word count and warnings instead of `id<TAB>hex`
    #[arg(long)]
    pub json: bool,
    /// First learn an IDF table from the inputs and save it to FILE, then fingerprint with it
    #[arg(long, value_name = "FILE")]
    pub learn_idf: Option<PathBuf>,
    /// Print what `simdex insert` and `build` read, `fingerprint<TAB>doc_id` (16 hex digits, a
    /// decimal id), the id being the 64-bit hash of the document's name (as `dedup --index`
    /// and Python's `simdex.doc_id` make it); write `doc_id<TAB>name` lines to NAMES
    #[arg(long, value_name = "NAMES", conflicts_with = "json")]
    pub for_index: Option<PathBuf>,
    #[command(flatten)]
    pub recipe: RecipeArgs,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let files = corpus::expand(&args.inputs)?;
    let mut fp = args.recipe.fingerprinter()?;
    if let Some(out) = &args.learn_idf {
        args.recipe.check_no_idf("--learn-idf")?;
        if files.iter().any(|f| f.as_os_str() == "-") {
            anyhow::bail!("--learn-idf reads the inputs twice, so it cannot read standard input");
        }
        let table = corpus::learn_idf(&mut fp, &files, &args.read, &ProgressBar::hidden())?;
        table.save(out).with_context(|| format!("cannot write {}", out.display()))?;
        eprintln!("learned IDF weights of {} features from {} documents into {}", table.len(), table.documents(), out.display());
        fp = fp.with_idf(std::sync::Arc::new(table))?;
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut names = match &args.for_index {
        Some(p) => Some(std::io::BufWriter::new(std::fs::File::create(p).with_context(|| format!("cannot create {}", p.display()))?)),
        None => None,
    };
    let mut skipped = 0u64;
    let short_words = fp.options().short_words;
    let utf8 = args.read.invalid_utf8();
    corpus::for_each_doc(
        &files,
        &args.read,
        &ProgressBar::hidden(),
        |mut doc| {
            let o = match doc.fingerprint(&mut fp, utf8) {
                Ok(o) => o,
                Err(e) => return Ok(Some(e.to_string())),
            };
            let (id, f) = (&doc.id, o.fingerprint);
            if o.replaced_utf8 > 0 {
                eprintln!("simdex: warning: {id}: {} invalid UTF-8 sequences replaced", o.replaced_utf8);
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
            } else if let Some(names) = &mut names {
                let doc_id = simdex_fingerprint::doc_id(id);
                writeln!(out, "{:016x}\t{doc_id}", f.value)?;
                writeln!(names, "{doc_id}\t{id}")?;
            } else {
                writeln!(out, "{id}\t{:016x}", f.value)?;
            }
            Ok(None)
        },
        |s: Skip| {
            skipped += 1;
            eprintln!("simdex: warning: {}: skipped: {}", s.id, s.reason);
        },
    )?;
    out.flush()?;
    if let Some(mut names) = names {
        names.flush()?;
    }
    Ok(if skipped > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS })
}
