//! `simdex dedup`: exact duplicates by content hash, then near-duplicates within Hamming
//! distance k among the remaining documents, grouped into clusters by union-find.
//!
//! The decision is the text crate's corpus dedup (`simdex_fingerprint::corpus`, which
//! `python -m simdex.spark dedup` shares: the k limit, the content hash, exact groups, near
//! links by the library's self-join of the fingerprints, the pairs and report files); this
//! front reads the inputs, checks an index and prints the summary.
//!
//! By default every candidate pair (fingerprints within k, or sketches sharing a band) is
//! confirmed: kept only when the documents' sketches (`simdex_fingerprint::sketch`, computed
//! in memory) estimate a resemblance of at least `--confirm-threshold`, and, when the
//! estimate is within the sketch's noise of it, when the exact Jaccard of the two
//! documents' shingle sets is (the second look: the sets are kept in memory within
//! `--keep-text-bytes`, else the inputs are read again for the documents it needs). See
//! `benches/QUALITY.md` for what each step does to F1.
//!
//! `--pairs FILE` writes every near-duplicate pair of documents (exact copies included),
//! one a line: `id_a<TAB>id_b<TAB>distance<TAB>estimated_similarity`.
//!
//! Output: a JSON-lines report (`--report FILE`, or stdout with `--json`) and a readable
//! summary (stdout, or stderr with `--json`).

use crate::corpus::{self, ReadArgs};
use crate::progress;
use crate::recipe_args::RecipeArgs;
use anyhow::{bail, Context};
use clap::Args as ClapArgs;
use serde_json::json;
use simdex_fingerprint::corpus::{ContentHash, CorpusDedup, CorpusDoc, CorpusOptions};
use simdex_fingerprint::document::{Document, InvalidUtf8};
use simdex_fingerprint::sketch::{jaccard, Sketch, SketchOptions, Sketcher};
use simdex_fingerprint::{DocumentFeatures, Fingerprinter, IdfBuilder, Vocabulary};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// What `--help` ends with.
const EXAMPLES: &str = "Examples:\n  simdex dedup corpus/\n  simdex dedup corpus/ --report report.jsonl --pairs pairs.tsv\n  simdex dedup corpus/ --index crawl.idx";

/// Find exact and near-duplicate documents and group them into clusters
#[derive(Debug, ClapArgs)]
#[command(after_help = EXAMPLES, after_long_help = crate::corpus::with_name_escaping(EXAMPLES))]
pub struct Args {
    /// Files, folders (walked recursively) or `-` for standard input
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// Near-duplicates differ in at most K bits [default: 8 confirmed by sketch, 3 with --no-confirm]
    #[arg(short, long)]
    pub k: Option<u32>,
    /// Report pairs within k by their fingerprints alone, without confirming them by sketch
    #[arg(long)]
    pub no_confirm: bool,
    /// The old name of --no-confirm: still accepted, with a warning.
    #[arg(long, hide = true)]
    pub no_verify: bool,
    /// Keep a pair within k only when its sketches estimate a resemblance (Jaccard of word
    /// 3-shingles) of at least this
    #[arg(long, default_value_t = DEFAULT_CONFIRM_THRESHOLD, value_parser = crate::value_parsers::fraction, conflicts_with_all = ["no_confirm", "no_verify"])]
    pub confirm_threshold: f64,
    /// The old name of --confirm-threshold: still accepted, with a warning.
    #[arg(long, hide = true, value_parser = crate::value_parsers::fraction, conflicts_with_all = ["no_confirm", "no_verify", "confirm_threshold"])]
    pub verify_threshold: Option<f64>,
    /// Decide by the sketch estimate alone, also where it is within the sketch's noise of the
    /// threshold (by default those pairs get a second look: the exact Jaccard of their word
    /// 3-shingle sets)
    #[arg(long, conflicts_with_all = ["no_confirm", "no_verify"])]
    pub no_second_look: bool,
    /// Take as candidates only the pairs whose fingerprints are within k (by default pairs
    /// whose sketches share a band are candidates too, whatever their distance; also in the
    /// check against --index)
    #[arg(long, conflicts_with_all = ["no_confirm", "no_verify"])]
    pub no_band_candidates: bool,
    /// Write every near-duplicate pair of documents to FILE, one a line:
    /// id_a<TAB>id_b<TAB>distance<TAB>estimated_similarity
    #[arg(long, value_name = "FILE")]
    pub pairs: Option<PathBuf>,
    #[command(flatten)]
    pub read: ReadArgs,
    /// Do not learn IDF weights from the inputs (by default dedup reads them twice: once to
    /// learn document frequencies, once to fingerprint with TF-IDF weights)
    #[arg(long)]
    pub no_idf: bool,
    /// With --index: learn the IDF table again from these inputs and re-pin the index's
    /// recipe with it. Costly: fingerprints stored before were made with the old table and
    /// are not comparable with new ones (identical pages may no longer match), so use it
    /// only on an index you are about to refill.
    #[arg(long, requires = "index", conflicts_with_all = ["no_idf", "idf"])]
    pub relearn_idf: bool,
    /// What the first pass keeps in memory for the later ones, in bytes, with the IDF counts
    /// it learns: each document's shingle set for the second look (dropped first beyond it:
    /// the documents it needs are read again) and its features for the fingerprint pass
    /// (dropped next: the inputs are read again)
    #[arg(long, value_name = "BYTES", default_value_t = 512 << 20, hide_short_help = true)]
    pub keep_text_bytes: usize,
    /// Write the JSON-lines report to FILE
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Write the JSON-lines report to stdout (the summary goes to stderr)
    #[arg(long)]
    pub json: bool,
    /// Members listed per cluster in the summary
    #[arg(long, default_value_t = 10)]
    pub show: usize,
    /// Also check every document against the persistent index DIR (created if missing) and
    /// add the corpus to it. Document ids in the index are `sfh64(0, id)`, the recipe's
    /// 64-bit hash of the document id string (listed in the report as `index_doc_id`).
    /// The index pins the fingerprint recipe of its first run (options and IDF table, in its
    /// RECIPE file); later runs reuse it, so identical pages get identical fingerprints, and
    /// recipe flags that ask for another recipe are refused.
    #[arg(long, value_name = "DIR")]
    pub index: Option<PathBuf>,
    /// With --index: create it even in a directory that holds other files (refused by default).
    #[arg(long, requires = "index")]
    pub create_in_nonempty: bool,
    #[command(flatten)]
    pub recipe: RecipeArgs,
    /// Threads reading and comparing documents [default: one per core]; the results do not
    /// depend on it
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
}

// The confirmed mode's threshold default (the library's document calls decide the same).
use simdex_fingerprint::{DEFAULT_MIN_SIMILARITY as DEFAULT_CONFIRM_THRESHOLD, DEFAULT_UNCONFIRMED_K};

/// What the fingerprint pass read.
struct Corpus {
    docs: Vec<CorpusDoc>,
    /// Documents without a fingerprint, and why: `(id, reason)`.
    skipped: Vec<(String, String)>,
    /// The fingerprint recipe's descriptor.
    recipe: String,
    /// Every document's shingles as scanned (text order, repeats; empty without a sketch),
    /// when the run confirms and they fitted `--keep-text-bytes`; `None` beyond it.
    sets: Option<Vec<Vec<u64>>>,
    /// Where each document is, to read again those the second look needs.
    locations: Vec<corpus::Location>,
}

/// The second look: the exact Jaccard of the pairs whose estimate is within the sketch's noise of the threshold,
/// from the shingle sets kept by the read pass or, beyond its budget, of the documents it needs, read again on
/// `threads` threads. Returns (pairs decided, of which changed side), `None` when there was none to take.
fn second_look(
    args: &Args,
    files: &[PathBuf],
    corpus: &Corpus,
    found: &mut CorpusDedup,
    options: SketchOptions,
    version: u32,
    threads: usize,
) -> anyhow::Result<Option<(usize, usize)>> {
    let wanted = found.undecided_docs();
    if wanted.is_empty() {
        return Ok(None);
    }
    if let Some(sets) = &corpus.sets {
        // kept as scanned (text order, repeats): the wanted documents' sets made here
        let set = |s: &Vec<u64>| s.iter().copied().collect::<BTreeSet<u64>>().into_iter().collect::<Vec<u64>>();
        let sets: HashMap<u32, Vec<u64>> = wanted.iter().filter_map(|&i| Some((i, set(sets.get(i as usize).filter(|s| !s.is_empty())?)))).collect();
        return Ok(Some(found.settle(&corpus.docs, |a, b| Some(jaccard(sets.get(&a)?, sets.get(&b)?)))));
    }
    if files.iter().any(|f| f.as_os_str() == "-") {
        eprintln!("note: no second look by exact Jaccard: the shingle sets did not fit --keep-text-bytes and standard input cannot be read again");
        return Ok(None);
    }
    // read again the wanted documents alone, where the first pass found them
    let bar = progress::steps(wanted.len() as u64, "second look");
    let sets = corpus::shingles_again(files, &args.read, &corpus.locations, &wanted, &Sketcher::new(options)?, version, threads, &bar)?;
    bar.finish_and_clear();
    Ok(Some(found.settle(&corpus.docs, |a, b| Some(jaccard(sets.get(&a)?, sets.get(&b)?)))))
}

/// The flags' names before "confirm" was the one word for the sketch check: the same
/// meaning, a warning that names the new flag.
fn old_names(args: &mut Args) {
    if args.no_verify {
        eprintln!("simdex: warning: dedup --no-verify is deprecated: use --no-confirm (the same flag)");
        args.no_confirm = true;
    }
    if let Some(t) = args.verify_threshold.take() {
        eprintln!("simdex: warning: dedup --verify-threshold is deprecated: use --confirm-threshold (the same flag)");
        args.confirm_threshold = t;
    }
}

pub fn run(mut args: Args) -> anyhow::Result<ExitCode> {
    old_names(&mut args);
    let options = CorpusOptions::new(args.k, !args.no_confirm, Some(args.confirm_threshold))?.with_band_candidates(!args.no_band_candidates).with_second_look(!args.no_second_look);
    let (k, confirm) = (options.k, options.confirm);
    args.k = Some(k);
    let files = corpus::expand(&args.inputs)?;
    let index = match &args.index {
        Some(dir) => Some(
            // The default design (k = 3) answers any k up to 8 by multi-probe. A new index
            // stores the documents' sketches when the run confirms (an existing one keeps
            // what it was created with).
            simdex_fingerprint::DocumentIndex::open(
                dir,
                simdex::IndexOptions::default().with_sketches(confirm.map(|_| SketchOptions::default().column())).with_create_in_nonempty(args.create_in_nonempty),
            )
            .with_context(|| format!("opening index {}", dir.display()))?,
        ),
        None => None,
    };
    let pinned = match &index {
        Some(index) if !args.relearn_idf => args.recipe.for_index(index, args.no_idf)?,
        _ => None,
    };
    let threads = args.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
    // IDF weights are learned from the inputs (a first pass over them) unless the index's
    // pinned recipe, --no-idf or --idf FILE says otherwise
    let (fp, learn) = match pinned {
        Some(fp) => (fp, false),
        None => (args.recipe.fingerprinter()?, !args.no_idf && args.recipe.idf.is_none()),
    };
    if learn && files.iter().any(|f| f.as_os_str() == "-") {
        bail!("dedup learns IDF weights by reading the inputs twice, so it cannot read standard input; give --no-idf or --idf FILE");
    }
    // an index keeps the sketch recipe it was created with (an older one included)
    let sketch_options = index.as_ref().and_then(|i| i.sketch_options()).unwrap_or_default();
    let mut times = progress::PassTimes::from_env();
    let mut pass = first_pass(&args, &files, &fp, learn, sketch_options, threads)?;
    times.pass("first (read, IDF counts, sketches)");
    let kept =
        |p: &FirstPass| (p.features.iter().flatten().flatten().map(DocumentFeatures::heap_bytes).sum::<usize>(), p.sets.iter().flatten().map(|s| set_bytes(s)).sum::<usize>());
    times.note(|| format!("kept (features, shingle sets): {:?} bytes", kept(&pass)));
    let fp = with_learned_idf(fp, &mut pass, threads, &times)?;
    times.pass("IDF table");
    if let Some(index) = &index {
        let recipe = simdex_fingerprint::Recipe::of(&fp);
        if args.relearn_idf {
            if index.recipe().is_some_and(|r| *r != recipe) {
                eprintln!(
                    "warning: re-pinned the fingerprint recipe of {}: fingerprints stored before were made with the old one and are not comparable with new ones",
                    index.dir().display()
                );
            }
            index.replace_recipe(recipe)?;
        } else {
            index.pin_recipe(recipe)?;
        }
    }
    if learn {
        fingerprint_pass(&args, &files, &fp, &mut pass, threads)?;
        crate::memory::give_back_freed(); // the pages of the kept features, dropped by now
        times.pass("fingerprints");
    }
    let corpus = Corpus { docs: pass.docs, skipped: pass.skipped, recipe: fp.recipe(), sets: pass.sets, locations: pass.locations };
    let mut found = CorpusDedup::new(&corpus.docs, &options, threads)?;
    times.pass("pair search");
    let second_look = second_look(&args, &files, &corpus, &mut found, sketch_options, fp.options().version, threads)?;
    times.pass("second look");
    if let Some(path) = &args.pairs {
        let write = || -> std::io::Result<()> {
            let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
            found.write_pairs(&mut out, &corpus.docs)?;
            out.flush()
        };
        write().with_context(|| format!("cannot write {}", path.display()))?;
    }
    let mut report: Box<dyn Write> = match (&args.report, args.json) {
        (Some(p), _) => Box::new(std::io::BufWriter::new(std::fs::File::create(p).with_context(|| format!("cannot create {}", p.display()))?)),
        (None, true) => Box::new(std::io::BufWriter::new(std::io::stdout())),
        (None, false) => Box::new(std::io::sink()),
    };
    found.write_report(&mut report, &corpus.docs, &corpus.skipped)?;
    times.pass("pairs and report");
    let indexed = match index {
        Some(index) => {
            // An index created without sketches (or with another kind) cannot confirm: its
            // matches are by fingerprint alone, at the unconfirmed distance.
            let confirm = confirm.filter(|_| index.sketch_options() == Some(sketch_options));
            let check = match confirm {
                Some(min_similarity) => simdex::ConfirmOptions::default()
                    .with_k(k)
                    .with_min_similarity(min_similarity)
                    .with_unsketched_k(k.min(DEFAULT_UNCONFIRMED_K))
                    .with_band_candidates(!args.no_band_candidates),
                None => simdex::ConfirmOptions::default().with_k(k.min(DEFAULT_UNCONFIRMED_K)).with_min_similarity(0.0).with_unsketched_k(k.min(DEFAULT_UNCONFIRMED_K)),
            };
            if confirm.is_none() && !args.no_confirm {
                eprintln!(
                    "note: the index holds no sketches of this recipe (it was created without them), so documents are checked against it by fingerprint alone (k = {}), not confirmed",
                    check.k
                );
            }
            Some(check_and_add(index.into_inner(), &corpus.docs, confirm.map(|_| check), check.k, &mut report)?)
        }
        None => None,
    };
    report.flush()?;
    let mut summary: Box<dyn Write> = if args.json { Box::new(std::io::stderr()) } else { Box::new(std::io::stdout()) };
    write_summary(&mut summary, &args, &corpus, &found, indexed, second_look)?;
    Ok(ExitCode::SUCCESS)
}

/// `fp` with the IDF weights the first pass learned, when it learned them, and the kept
/// features' vocabulary with their weights.
fn with_learned_idf(fp: Fingerprinter, pass: &mut FirstPass, threads: usize, times: &progress::PassTimes) -> anyhow::Result<Fingerprinter> {
    let Some(idf) = pass.idf.take() else { return Ok(fp) };
    let (table, vocabulary) = idf.build_keeping_vocabulary(1);
    times.note(|| format!("IDF table: {} features", table.len()));
    let fp = fp.with_idf(std::sync::Arc::new(table))?;
    // the table's id (the recipe's, a CRC of its sorted entries) made on another thread
    // while this one looks up the vocabulary's weights
    std::thread::scope(|s| {
        let id = (threads > 1).then(|| s.spawn(|| fp.recipe()));
        pass.vocabulary = fp.vocabulary(vocabulary.unwrap_or_default());
        // (its panic, should it panic, is the recipe's next call's)
        let _ = id.map(|id| id.join());
    });
    Ok(fp)
}

/// What the document passes make of one document.
struct Analysed {
    content: String,
    /// Its features (a run that learns IDF weights: fingerprinted once the table is
    /// learned) or its fingerprint and whether it is short, or why it has none.
    made: Result<Made, String>,
    sketch: Option<Sketch>,
    /// Its shingle set, for the second look (a run that takes one).
    set: Option<Vec<u64>>,
}

enum Made {
    Features(DocumentFeatures),
    Fingerprint(u64, bool),
}

/// Reads one document on a worker: its content hash, and its features (`learn`) or
/// fingerprint, and its sketch (with a sketcher) and shingle set (`keep_set`). The text is
/// read whole when it is needed twice (features for IDF weights, a sketch); otherwise the
/// fingerprint streams.
fn analyse(fp: &mut Fingerprinter, sketcher: Option<&mut Sketcher>, learn: bool, keep_set: bool, utf8: InvalidUtf8, doc: Document<corpus::Content>) -> anyhow::Result<Analysed> {
    if !learn && sketcher.is_none() {
        let mut doc = doc.map_content(ContentHash::new);
        let made = doc.fingerprint(fp, utf8).map(|o| Made::Fingerprint(o.fingerprint.value, o.fingerprint.short)).map_err(|e| e.to_string());
        // hash the whole content even where the fingerprinter stopped early
        let content = doc.content.finish()?;
        return Ok(Analysed { content, made, sketch: None, set: None });
    }
    let (text, content) = corpus::text_and_content_hash(doc, utf8, fp.options().version)?;
    let (made, sketch, set) = match text {
        Ok(text) => {
            let features = |fp: &mut Fingerprinter, features: DocumentFeatures| fp.check_features(&features).map(|()| Made::Features(features));
            // the features or fingerprint and the sketch, in one scan of the text
            let (made, sketch) = match (learn, sketcher) {
                (true, Some(sketcher)) => {
                    let (f, sketch) = fp.document_features_and_sketch(&text, sketcher);
                    (features(fp, f), Some((sketch, sketcher)))
                }
                (false, Some(sketcher)) => {
                    let (f, sketch) = fp.fingerprint_and_sketch(&text, sketcher);
                    (f.map(|f| Made::Fingerprint(f.value, f.short)), Some((sketch, sketcher)))
                }
                (true, None) => {
                    let f = fp.document_features(&text);
                    (features(fp, f), None)
                }
                (false, None) => (fp.fingerprint(&text).map(|f| Made::Fingerprint(f.value, f.short)), None),
            };
            let set = sketch.as_ref().filter(|_| keep_set).map(|(_, s)| s.last_scan().to_vec());
            (made.map_err(|e| e.to_string()), sketch.map(|(s, _)| s), set)
        }
        Err(e) => (Err(e.to_string()), None, None),
    };
    Ok(Analysed { content, made, sketch, set })
}

/// Bytes a kept shingle set takes.
fn set_bytes(set: &[u64]) -> usize {
    set.len() * 8 + std::mem::size_of::<Vec<u64>>()
}

/// The first pass over the inputs on `threads` threads: every document read once (content
/// hash, features or fingerprint, sketch of recipe `sketch_options`, shingle set), IDF
/// weights counted when `learn`. What the later passes need is kept while it takes at most
/// `--keep-text-bytes` in all: the documents' shingle sets for the second look (dropped
/// first beyond it: it then reads again the documents it needs) and their features for the
/// fingerprint pass, by their numbers in the IDF builder's vocabulary (dropped next: that
/// pass then reads and tokenizes the inputs again).
fn first_pass(args: &Args, files: &[PathBuf], fp: &Fingerprinter, learn: bool, sketch_options: SketchOptions, threads: usize) -> anyhow::Result<FirstPass> {
    let bar = progress::steps(files.len() as u64, if learn { "learning IDF" } else { "fingerprinting" });
    let utf8 = args.read.invalid_utf8();
    let sketcher = (!args.no_confirm).then(|| Sketcher::new(sketch_options)).transpose()?;
    let keep_sets = !args.no_confirm && !args.no_second_look;
    let mut pass = FirstPass {
        docs: Vec::new(),
        features: learn.then(Vec::new),
        sets: keep_sets.then(Vec::new),
        skipped: Vec::new(),
        idf: learn.then(|| IdfBuilder::numbering(fp.options().feature_recipe())),
        vocabulary: Vocabulary::default(),
        locations: Vec::new(),
    };
    let (mut features_bytes, mut sets_bytes) = (0usize, 0usize);
    // the workers make shingle sets to keep only while the sets are kept
    let making_sets = std::sync::atomic::AtomicBool::new(keep_sets);
    let worker = || {
        let (mut fp, mut sketcher, making_sets) = (fp.clone(), sketcher.clone(), &making_sets);
        move |doc| analyse(&mut fp, sketcher.as_mut(), learn, making_sets.load(std::sync::atomic::Ordering::Relaxed), utf8, doc)
    };
    corpus::for_each_doc_parallel(
        files,
        &args.read,
        &bar,
        threads,
        worker,
        |id, at, a| {
            pass.locations.push(at);
            let (fingerprint, short, mut features, failed) = match a.made {
                Ok(Made::Fingerprint(value, short)) => (Some(value), short, None, None),
                Ok(Made::Features(f)) => (None, false, Some(f), None),
                Err(e) => (None, true, None, Some(e)),
            };
            // beyond the budget, with this document and the IDF counts at their largest while they count it (a growth holds
            // old and new tables): the shingle sets go first (the second look reads again those it needs), then the features
            let coming = features.as_ref().map_or(0, DocumentFeatures::heap_bytes) + a.set.as_ref().map_or(0, |s| set_bytes(s));
            let counting = pass.idf.as_ref().map_or(0, |idf| idf.heap_bytes_counting(features.as_ref().map_or(0, |f| f.distinct().len())));
            if features_bytes + sets_bytes + coming + counting > args.keep_text_bytes {
                if let Some(sets) = pass.sets.take() {
                    making_sets.store(false, std::sync::atomic::Ordering::Relaxed);
                    (sets_bytes, ()) = (0, crate::memory::free(sets));
                } else if let Some(features) = pass.features.take() {
                    (features_bytes, ()) = (0, crate::memory::free(features));
                }
            }
            // the kept features by their numbers in the IDF builder's vocabulary (4 bytes a
            // feature); should it stop numbering, those kept cannot be resolved: dropped
            if let (Some(idf), Some(f)) = (pass.idf.as_mut(), features.as_mut()) {
                if pass.features.is_some() {
                    if !f.add_to(idf) {
                        (pass.features, features_bytes) = (None, 0);
                    }
                } else {
                    idf.add_document(f.distinct());
                }
            }
            if let Some(kept) = pass.features.as_mut() {
                features_bytes += features.as_ref().map_or(0, DocumentFeatures::heap_bytes);
                kept.push(features);
            }
            if let Some(kept) = pass.sets.as_mut() {
                let set = a.set.unwrap_or_default();
                sets_bytes += set_bytes(&set);
                kept.push(set);
            }
            pass.docs.push(CorpusDoc { content: a.content, id, fingerprint, sketch: a.sketch, short });
            Ok(failed)
        },
        |s| pass.skipped.push((s.id, s.reason)),
    )?;
    bar.finish_and_clear();
    Ok(pass)
}

/// What the first pass found.
struct FirstPass {
    /// Every document, its fingerprint still missing in a run that learns IDF weights.
    docs: Vec<CorpusDoc>,
    /// Each document's features (`None` for one without), in a run that learns IDF weights,
    /// while within the budget.
    features: Option<Vec<Option<DocumentFeatures>>>,
    /// Each document's shingles as scanned (`Corpus::sets`), while within the budget.
    sets: Option<Vec<Vec<u64>>>,
    skipped: Vec<(String, String)>,
    /// The document frequencies counted (a run that learns IDF weights), numbering the features kept.
    idf: Option<IdfBuilder>,
    /// The kept features' hashes and IDF weights by number, once the weights are learned.
    vocabulary: Vocabulary,
    /// Where each document is (`docs`' order).
    locations: Vec<corpus::Location>,
}

/// The fingerprints of the documents the first pass left without one, made with `fp` (which
/// has the learned IDF weights): from their kept features, on `threads` threads, or by reading
/// the inputs again.
fn fingerprint_pass(args: &Args, files: &[PathBuf], fp: &Fingerprinter, pass: &mut FirstPass, threads: usize) -> anyhow::Result<()> {
    let bar = progress::steps(files.len() as u64, "fingerprinting");
    match pass.features.take() {
        Some(features) => {
            let per_thread = pass.docs.len().div_ceil(threads.max(1)).max(1);
            let vocabulary = &pass.vocabulary;
            std::thread::scope(|s| {
                for (docs, features) in pass.docs.chunks_mut(per_thread).zip(features.chunks(per_thread)) {
                    let mut fp = fp.clone();
                    s.spawn(move || {
                        for (d, f) in docs.iter_mut().zip(features) {
                            if let Some(f) = f.as_ref().and_then(|f| fp.fingerprint_numbered(f, vocabulary).ok()) {
                                (d.fingerprint, d.short) = (Some(f.value), f.short);
                            }
                        }
                    });
                }
            });
        }
        None => {
            let utf8 = args.read.invalid_utf8();
            let mut next = 0;
            let docs = &mut pass.docs;
            let worker = || {
                let mut fp = fp.clone();
                move |mut doc: Document<corpus::Content>| Ok(doc.fingerprint(&mut fp, utf8).ok().map(|o| (o.fingerprint.value, o.fingerprint.short)))
            };
            corpus::for_each_doc_parallel(
                files,
                &args.read,
                &bar,
                threads,
                worker,
                |_, _, made| {
                    let Some(d) = docs.get_mut(next) else { bail!("the inputs changed between the two passes over them: more documents the second time") };
                    next += 1;
                    if let Some((value, short)) = made {
                        (d.fingerprint, d.short) = (Some(value), short);
                    }
                    Ok(None)
                },
                |_| {},
            )?;
            if next != docs.len() {
                bail!("the inputs changed between the two passes over them: {next} documents the second time, {} the first", docs.len());
            }
        }
    }
    bar.finish_and_clear();
    Ok(())
}

/// The readable summary: counts, the size histogram, then the largest near-duplicate
/// clusters and exact-duplicate groups, `--show` members each.
fn write_summary(
    summary: &mut dyn Write,
    args: &Args,
    corpus: &Corpus,
    found: &CorpusDedup,
    indexed: Option<(usize, usize)>,
    second_look: Option<(usize, usize)>,
) -> anyhow::Result<()> {
    let docs = &corpus.docs;
    let (exact, near) = (&found.exact, &found.clusters);
    let in_exact: usize = exact.iter().map(|g| g.len()).sum();
    let in_near: usize = near.iter().map(|c| c.len()).sum();
    // a document without a fingerprint is skipped too (its reason listed); a record that is
    // no document (a bad JSON line) is only skipped: every one counted once
    let fingerprinted = docs.iter().filter(|d| d.fingerprint.is_some()).count();
    let unreadable = corpus.skipped.len().saturating_sub(docs.len() - fingerprinted);
    writeln!(summary, "documents: {} ({fingerprinted} fingerprinted, {} skipped)", docs.len() + unreadable, corpus.skipped.len())?;
    writeln!(summary, "recipe: {}", corpus.recipe)?;
    if let (Some(dir), Some((known, added))) = (&args.index, indexed) {
        writeln!(summary, "index {}: {known} documents had near-duplicates stored before this run; {added} documents inserted (durable)", dir.display())?;
    }
    let (exact_pairs, near_pairs) = found.pair_counts();
    writeln!(summary, "exact duplicates: {} groups, {} documents ({} redundant copies), {exact_pairs} pairs", exact.len(), in_exact, in_exact - exact.len())?;
    let confirmed = if args.no_confirm { String::new() } else { format!(", confirmed: sketch resemblance >= {}", args.confirm_threshold) };
    let links = found.links.len() as u64;
    // a link between two contents stands for every pair of their exact copies
    let copies = if near_pairs > links { format!(" ({links} between distinct contents, {} more between their exact copies)", near_pairs - links) } else { String::new() };
    writeln!(summary, "near-duplicate clusters (k = {}{confirmed}): {} clusters, {} documents, {near_pairs} pairs{copies}", args.k.unwrap_or_default(), near.len(), in_near)?;
    let beyond = found.links.iter().filter(|l| l.distance > args.k.unwrap_or_default()).count();
    if beyond > 0 {
        writeln!(summary, "  of them {beyond} beyond k, found because their sketches share a band")?;
    }
    if let Some(path) = &args.pairs {
        writeln!(summary, "pairs written to {}: {} ({exact_pairs} exact, {near_pairs} near)", path.display(), exact_pairs + near_pairs)?;
    }
    if let Some((decided, changed)) = second_look {
        writeln!(summary, "second look (exact Jaccard) at {decided} pairs estimated within the sketch's noise of the threshold: {changed} changed side")?;
    }
    let mut sizes: BTreeMap<usize, usize> = BTreeMap::new();
    near.iter().for_each(|c| *sizes.entry(c.len()).or_default() += 1);
    if !sizes.is_empty() {
        let hist: Vec<String> = sizes.iter().rev().map(|(s, n)| format!("{n}x{s}")).collect();
        writeln!(summary, "cluster sizes (count x size): {}", hist.join(", "))?;
    }
    // the largest near-duplicate clusters, then the largest exact-duplicate groups
    let listed =
        (near.iter().take(args.show).map(|c| ("near-duplicate cluster", c)).enumerate()).chain(exact.iter().take(args.show).map(|g| ("exact-duplicate group", g)).enumerate());
    for (n, (what, c)) in listed {
        writeln!(summary, "\n{what} {} ({} documents):", n + 1, c.len())?;
        for &i in c.iter().take(args.show) {
            let d = &docs[i as usize];
            writeln!(summary, "  {}  {}{}", d.fingerprint.map_or("-".repeat(16), |f| format!("{f:016x}")), d.id, if d.short { "  (short)" } else { "" })?;
        }
        if c.len() > args.show {
            writeln!(summary, "  ... and {} more", c.len() - args.show)?;
        }
    }
    for (id, reason) in corpus.skipped.iter().take(args.show) {
        writeln!(summary, "skipped {id}: {reason}")?;
    }
    let left_out = LeftOut::of(near, exact, corpus.skipped.len(), args.show);
    if let Some(line) = left_out.line() {
        let everything = match (&args.report, args.json) {
            (Some(file), _) => format!("the report in {} lists every one", file.display()),
            (None, true) => "the JSON-lines report on stdout lists every one".to_owned(),
            (None, false) => "--report FILE writes every one as JSON lines".to_owned(),
        };
        writeln!(summary, "\n{line} (--show N lists more; {everything})")?;
    }
    Ok(())
}

/// What the summary leaves out when it shows `--show` groups and members of each.
#[derive(Debug, Default, PartialEq, Eq)]
struct LeftOut {
    /// Near-duplicate clusters not listed, and their documents.
    near_clusters: usize,
    near_members: usize,
    /// Exact-duplicate groups not listed, and their documents.
    exact_groups: usize,
    exact_members: usize,
    /// Documents of listed clusters and groups cut by "... and N more".
    cut_members: usize,
    /// Skipped documents not listed.
    skipped: usize,
}

impl LeftOut {
    fn of(near: &[Vec<u32>], exact: &[Vec<u32>], skipped: usize, show: usize) -> LeftOut {
        let unlisted = |groups: &[Vec<u32>]| (groups.len().saturating_sub(show), groups.iter().skip(show).map(Vec::len).sum::<usize>());
        let cut = |groups: &[Vec<u32>]| groups.iter().take(show).map(|g| g.len().saturating_sub(show)).sum::<usize>();
        let (near_clusters, near_members) = unlisted(near);
        let (exact_groups, exact_members) = unlisted(exact);
        LeftOut { near_clusters, near_members, exact_groups, exact_members, cut_members: cut(near) + cut(exact), skipped: skipped.saturating_sub(show) }
    }

    /// The summary's last line, when anything was left out.
    fn line(&self) -> Option<String> {
        let mut parts = Vec::new();
        if self.near_clusters > 0 {
            parts.push(format!("{} near-duplicate clusters ({} documents)", self.near_clusters, self.near_members));
        }
        if self.exact_groups > 0 {
            parts.push(format!("{} exact-duplicate groups ({} documents)", self.exact_groups, self.exact_members));
        }
        if self.cut_members > 0 {
            parts.push(format!("{} more members of the groups listed", self.cut_members));
        }
        if self.skipped > 0 {
            parts.push(format!("{} more skipped documents", self.skipped));
        }
        (!parts.is_empty()).then(|| format!("not listed above: {}", parts.join(", ")))
    }
}

/// The index's document id for a document id string.
fn index_doc_id(id: &str) -> u64 {
    simdex_fingerprint::doc_id(id)
}

/// Checks every document against the index (confirmed by sketch with `confirm`, else by
/// fingerprint within `k`), reports those already there, then adds them all (with their
/// sketches, in an index that stores them). Returns (documents found, documents inserted).
fn check_and_add(index: simdex::Index, docs: &[CorpusDoc], confirm: Option<simdex::ConfirmOptions>, k: u32, report: &mut dyn Write) -> anyhow::Result<(usize, usize)> {
    if k > simdex::plan::MAX_K.max(index.k()) {
        bail!("-k {k} is above what the index answers (k = {}, or up to {} by multi-probe) ({})", index.k(), simdex::plan::MAX_K, index.dir().display());
    }
    let mut known = 0;
    let mut pairs = Vec::new();
    let mut sketched: Vec<simdex::Entry> = Vec::new();
    let mut sketches: Vec<u8> = Vec::new();
    let mut matches = Vec::new();
    for d in docs {
        let Some(fp) = d.fingerprint else { continue };
        let sketch = d.sketch.as_ref().filter(|_| index.sketches().is_some());
        let found: Vec<serde_json::Value> = match (confirm, sketch) {
            (Some(options), Some(sketch)) => index
                .query_confirmed(fp, sketch.as_bytes(), &options)?
                .iter()
                .map(|v| json!({"fingerprint": format!("{:016x}", v.fingerprint), "index_doc_id": v.doc_id, "distance": v.distance, "similarity": v.similarity}))
                .collect(),
            _ => {
                index.query_into(fp, &simdex::QueryOptions::within(k), &mut matches)?;
                matches.iter().map(|m| json!({"fingerprint": format!("{:016x}", m.fingerprint), "index_doc_id": m.doc_id, "distance": m.distance})).collect()
            }
        };
        if !found.is_empty() {
            known += 1;
            writeln!(report, "{}", json!({"kind": "indexed", "member": d.id, "index_doc_id": index_doc_id(&d.id), "fingerprint": format!("{fp:016x}"), "matches": found}))?;
        }
        match sketch {
            Some(s) => {
                sketched.push(simdex::Entry::new(fp, index_doc_id(&d.id)));
                sketches.extend_from_slice(s.as_bytes());
            }
            None => pairs.push(simdex::Entry::new(fp, index_doc_id(&d.id))),
        }
    }
    let added = pairs.len() + sketched.len();
    if !sketched.is_empty() {
        index.insert_many_sketched(&sketched, &sketches)?;
    }
    index.insert_many(&pairs)?;
    index.sync()?;
    index.close()?;
    Ok((known, added))
}
