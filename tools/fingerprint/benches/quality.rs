//! Fingerprint quality on a real corpus, as in Figure 1 of Manku et al.: precision and recall of
//! "Hamming distance <= k" (k = 0..10) against near-duplicate pairs defined independently of
//! any fingerprint: exact Jaccard similarity >= 0.9 of the documents' word 3-shingle sets.
//!
//!     cargo bench -p simdex-fingerprint --bench quality -- [--sample N] [--seed S] [--root DIR]... [--manifest TSV]
//!                                                           [--configs a,b,..] [--write-fp DIR] [--dump-k K --dump FILE]
//!                                                           [--docs DOCS.jsonl] [--write-docs FILE]
//!
//! Documents: the HTML pages under every `~/.rustup/toolchains/*/share/doc/rust/html` (or the
//! `--root`s), sampled by groups as `shared/eval/extract.py` does (copies of one page across
//! toolchains, and std/core/alloc copies, are kept or dropped together), visible text by
//! `simdex_fingerprint::extract_text`, pages under 20 words dropped. `--manifest id<TAB>path` takes a
//! fixed list instead (e.g. the harness's `manifest.tsv`, for the cross-check); `--docs` takes
//! the texts of a `docs.jsonl` (`id`, `text`: the harness's extraction) instead of any HTML.
//! `--write-docs FILE` writes, per document, `{"id", "text", "sketch"}` (the text as read, the
//! hex of its default sketch) and stops: `benches/extraction_bias.py` compares two such files
//! (simdex's extraction against the harness's) and the estimate against exact Jaccard.
//!
//! Ground truth: 3-shingles of the recipe's words (NFKC, lowercase, UAX #29, nothing dropped or
//! folded), exact all-pairs similarity join by prefix filtering (no pair >= 0.9 can be missed:
//! two sets reach the threshold only if their prefixes in a global rare-first order intersect).
//! Without arguments on a machine without the docs, it says so and exits 0.

// A bench may unwrap and index: a panic there is a failed run (the crate's lint policy is
// for the library).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use simdex_fingerprint::idf::idf_weight;
use simdex_fingerprint::sketch::{SketchOptions, Sketcher};
use simdex_fingerprint::{extract_text, hash, tokenize::Tokenizer, CjkSegmenter, FeatureKind, FingerprintOptions, Fingerprinter, IdfBuilder, Language, TfMode};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const KMAX: usize = 10;
const MIN_WORDS: usize = 20;

struct Args {
    sample: usize,
    seed: u64,
    roots: Vec<PathBuf>,
    manifest: Option<PathBuf>,
    configs: Option<Vec<String>>,
    write_fp: Option<PathBuf>,
    dump_k: u32,
    dump: Option<PathBuf>,
    docs: Option<PathBuf>,
    write_docs: Option<PathBuf>,
}

fn parse_args() -> Args {
    let mut a = Args { sample: 20_000, seed: 1, roots: Vec::new(), manifest: None, configs: None, write_fp: None, dump_k: 3, dump: None, docs: None, write_docs: None };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| die(&format!("{arg} needs a value")));
        match arg.as_str() {
            "--sample" => a.sample = val().parse().unwrap_or_else(|_| die("bad --sample")),
            "--seed" => a.seed = val().parse().unwrap_or_else(|_| die("bad --seed")),
            "--root" => a.roots.push(val().into()),
            "--manifest" => a.manifest = Some(val().into()),
            "--configs" => a.configs = Some(val().split(',').map(str::to_owned).collect()),
            "--write-fp" => a.write_fp = Some(val().into()),
            "--dump-k" => a.dump_k = val().parse().unwrap_or_else(|_| die("bad --dump-k")),
            "--dump" => a.dump = Some(val().into()),
            "--docs" => a.docs = Some(val().into()),
            "--write-docs" => a.write_docs = Some(val().into()),
            "--bench" => {} // added by `cargo bench`
            other => die(&format!("unknown argument {other}")),
        }
    }
    a
}

fn die(msg: &str) -> ! {
    eprintln!("quality: {msg}");
    std::process::exit(2)
}

/// A small deterministic generator (splitmix64) for the sample order.
struct SplitMix(u64);
impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        hash::fmix64(self.0)
    }
}

fn rustup_roots() -> Vec<(String, PathBuf)> {
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
    let mut roots = Vec::new();
    let mut seen = Vec::new();
    let Ok(entries) = std::fs::read_dir(home.join(".rustup/toolchains")) else {
        return roots;
    };
    let mut dirs: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    dirs.sort();
    for d in dirs {
        let html = d.join("share/doc/rust/html");
        let Ok(real) = std::fs::canonicalize(&html) else {
            continue;
        };
        if seen.contains(&real) {
            continue;
        }
        seen.push(real.clone());
        let name = d.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let label = name.split('-').next().unwrap_or("").to_owned();
        roots.push((label, real));
    }
    roots
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|x| x == "html" || x == "htm") {
            out.push(p);
        }
    }
}

struct Doc {
    id: String,
    text: String,
}

fn extract(path: &Path) -> String {
    let mut text = String::new();
    let read = std::fs::File::open(path).map_err(simdex_fingerprint::Error::from).and_then(|f| extract_text(std::io::BufReader::new(f), |p| text.push_str(p)));
    if let Err(e) = read {
        eprintln!("quality: skipping {}: {e}", path.display());
    }
    text
}

fn word_count(tok: &mut Tokenizer, text: &str) -> usize {
    let mut n = 0;
    tok.words(text, |_| n += 1);
    n
}

/// The documents: a manifest, or a grouped random sample of the roots.
fn load_docs(a: &Args) -> Vec<Doc> {
    let mut tok = Tokenizer::new(CjkSegmenter::Chars).unwrap_or_else(|e| die(&e.to_string()));
    if let Some(path) = &a.docs {
        let list = std::fs::read_to_string(path).unwrap_or_else(|e| die(&format!("{}: {e}", path.display())));
        return list
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| die(&format!("{}: {e}", path.display())));
                let field = |k: &str| v[k].as_str().unwrap_or_else(|| die(&format!("{}: a line without {k}", path.display()))).to_owned();
                Doc { id: field("id"), text: field("text") }
            })
            .collect();
    }
    if let Some(m) = &a.manifest {
        let list = std::fs::read_to_string(m).unwrap_or_else(|e| die(&format!("{}: {e}", m.display())));
        let items: Vec<(String, PathBuf)> = list.lines().filter_map(|l| l.split_once('\t')).map(|(id, p)| (id.to_owned(), PathBuf::from(p))).collect();
        return par_map(&items, |(id, p)| Doc { id: id.clone(), text: extract(p) });
    }
    let roots: Vec<(String, PathBuf)> =
        if a.roots.is_empty() { rustup_roots() } else { a.roots.iter().map(|r| (r.file_name().map_or("root".into(), |n| n.to_string_lossy().into_owned()), r.clone())).collect() };
    let mut groups: HashMap<String, Vec<(String, PathBuf)>> = HashMap::new();
    for (label, root) in &roots {
        let mut files = Vec::new();
        walk(root, &mut files);
        for f in files {
            let rel = f.strip_prefix(root).unwrap_or(&f).to_string_lossy().into_owned();
            if rel.contains(char::is_whitespace) {
                continue;
            }
            let key = ["std/", "core/", "alloc/"].iter().find_map(|p| rel.strip_prefix(p)).unwrap_or(&rel).to_owned();
            groups.entry(key).or_default().push((format!("{label}/{rel}"), f));
        }
    }
    let mut keys: Vec<String> = groups.keys().cloned().collect();
    keys.sort();
    let mut rng = SplitMix(a.seed);
    for i in (1..keys.len()).rev() {
        keys.swap(i, (rng.next() % (i as u64 + 1)) as usize);
    }
    let mut docs = Vec::new();
    for chunk in keys.chunks(256) {
        let items: Vec<(String, PathBuf)> = chunk.iter().flat_map(|k| groups[k].clone()).collect();
        for d in par_map(&items, |(id, p)| Doc { id: id.clone(), text: extract(p) }) {
            if word_count(&mut tok, &d.text) >= MIN_WORDS {
                docs.push(d);
            }
        }
        if a.sample > 0 && docs.len() >= a.sample {
            break;
        }
    }
    docs.sort_by(|x, y| x.id.cmp(&y.id));
    docs
}

/// Maps `f` over `items` on all cores, keeping the order.
fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(items.len().max(1));
    let chunk = items.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = items.chunks(chunk).map(|c| s.spawn(|| c.iter().map(&f).collect::<Vec<R>>())).collect();
        handles.into_iter().flat_map(|h| h.join().unwrap_or_else(|_| die("worker panicked"))).collect()
    })
}

/// Word 3-shingle sets, sorted and distinct.
fn shingle_sets(docs: &[Doc]) -> Vec<Vec<u64>> {
    par_map(docs, |d| {
        let mut tok = Tokenizer::new(CjkSegmenter::Chars).unwrap_or_else(|e| die(&e.to_string()));
        let mut words = Vec::new();
        let mut buf = String::new();
        tok.words(&d.text, |t| words.push(hash::sfh64(hash::seed::WORD, t.normalized(&mut buf).as_bytes())));
        let mut s: Vec<u64> = words.windows(3).map(|w| hash::combine(hash::combine(w[0], w[1]), w[2])).collect();
        s.sort_unstable();
        s.dedup();
        s
    })
}

fn intersection(a: &[u32], b: &[u32]) -> usize {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                n += 1;
                i += 1;
                j += 1;
            }
        }
    }
    n
}

/// Every pair with Jaccard >= 0.9 (and, for the "borderline" column, >= 0.8), exactly:
/// prefix filtering over a rare-first global order, then a merge to verify.
/// A pair of documents with Jaccard >= 0.8 (`a < b`).
struct Pair {
    a: u32,
    b: u32,
    jaccard: f64,
    /// Jaccard >= 0.9, decided on the integers
    near: bool,
}

fn similar_pairs(sets: &[Vec<u64>]) -> Vec<Pair> {
    // global order: by document frequency, rarest first
    let mut df: HashMap<u64, u32> = HashMap::new();
    for s in sets {
        for &h in s {
            *df.entry(h).or_insert(0) += 1;
        }
    }
    let mut order: Vec<(u32, u64)> = df.iter().map(|(&h, &n)| (n, h)).collect();
    order.sort_unstable();
    let rank: HashMap<u64, u32> = order.iter().enumerate().map(|(r, &(_, h))| (h, r as u32)).collect();
    let ranked: Vec<Vec<u32>> = sets
        .iter()
        .map(|s| {
            let mut r: Vec<u32> = s.iter().map(|h| rank[h]).collect();
            r.sort_unstable();
            r
        })
        .collect();
    // threshold 0.8 so that borderline pairs are found too: 10 * inter >= 8 * union
    let (num, den) = (8usize, 10usize);
    let mut by_size: Vec<usize> = (0..sets.len()).filter(|&i| !ranked[i].is_empty()).collect();
    by_size.sort_by_key(|&i| (ranked[i].len(), i));
    let mut index: HashMap<u32, Vec<usize>> = HashMap::new();
    let mut pairs = Vec::new();
    let mut seen = vec![usize::MAX; sets.len()];
    for &x in &by_size {
        let rx = &ranked[x];
        let n = rx.len();
        let prefix = n - (num * n).div_ceil(den) + 1;
        for &t in &rx[..prefix] {
            if let Some(list) = index.get(&t) {
                for &y in list {
                    if seen[y] == x {
                        continue;
                    }
                    seen[y] = x;
                    let ry = &ranked[y];
                    if den * ry.len() < num * n {
                        continue; // size filter
                    }
                    let inter = intersection(rx, ry);
                    let union = n + ry.len() - inter;
                    if den * inter >= num * union {
                        pairs.push(Pair { a: x.min(y) as u32, b: x.max(y) as u32, jaccard: inter as f64 / union as f64, near: 10 * inter >= 9 * union });
                    }
                }
            }
        }
        for &t in &rx[..prefix] {
            index.entry(t).or_default().push(x);
        }
    }
    pairs.sort_by_key(|p| (p.a, p.b));
    pairs
}

/// A named configuration: `+`-separated parts, each a feature kind (`w`, `w3`, `c5`), a TF
/// mode (`tf`, `logtf`, `binary`), or `idf` (a table learned on the sample; `idf^P` raises its weights to the power P, `idf~C` adds C to them), `fold` (digits),
/// `stop` (English stop words), `stem` (English stemmer); `default` is the crate's default.
fn config(name: &str) -> Option<(FingerprintOptions, Option<(f64, f64)>)> {
    if name == "default" {
        return Some((FingerprintOptions::default(), None));
    }
    let mut o = FingerprintOptions::default().with_features(Vec::new()).with_fold_digits(false).with_tf(TfMode::Raw);
    let mut idf = None;
    for part in name.split('+') {
        match (FeatureKind::parse(part), part) {
            (Some(k), _) => o.features.push(k),
            (None, "idf") => idf = Some((1.0, 0.0)),
            (None, p) if p.starts_with("idf^") => idf = Some((p[4..].parse().ok()?, 0.0)),
            (None, p) if p.starts_with("idf~") => idf = Some((1.0, p[4..].parse().ok()?)),
            (None, "fold") => o.fold_digits = true,
            (None, "stop") => o.stop_words = vec![Language::English],
            (None, "stem") => o.stemming = Some(Language::English),
            (None, p) => o.tf = TfMode::parse(p)?,
        }
    }
    Some((o, idf))
}

const DEFAULT_CONFIGS: &[&str] = &[
    "default",
    "w+tf",
    "w+tf+stop",
    "w+logtf+stop",
    "w+tf+idf",
    "w+logtf+idf",
    "w2+tf",
    "w2+logtf",
    "w3+binary",
    "w3+tf",
    "w4+binary",
    "w5+binary",
    "c5+tf",
    "w2+binary+stop",
    "w2+binary+stem",
    "w2+binary+fold",
    "w2+binary+idf",
    "w2+logtf+idf",
    "w2+tf+idf",
    "w3+binary+idf",
    "w3+tf+idf",
    "w+w2+logtf+idf",
    "c6+logtf+idf",
    "w2+binary+idf+fold",
    "w2+binary+idf^0.5",
    "w2+binary+idf^2",
    "w2+binary+idf~1",
];

struct Score {
    reported: [u64; KMAX + 1],
    tp: [u64; KMAX + 1],
    border: [u64; KMAX + 1],
}

fn score(fps: &[u64], pairs: &[Pair]) -> Score {
    let mut s = Score { reported: [0; KMAX + 1], tp: [0; KMAX + 1], border: [0; KMAX + 1] };
    let n = fps.len();
    let hist = {
        let rows: Vec<usize> = (0..n).collect();
        let parts = par_map(&rows.chunks(64).collect::<Vec<_>>(), |rows| {
            let mut h = [0u64; KMAX + 1];
            for &i in *rows {
                let fi = fps[i];
                for &fj in &fps[i + 1..] {
                    let d = (fi ^ fj).count_ones() as usize;
                    if d <= KMAX {
                        h[d] += 1;
                    }
                }
            }
            h
        });
        parts.iter().fold([0u64; KMAX + 1], |mut acc, h| {
            acc.iter_mut().zip(h).for_each(|(a, b)| *a += b);
            acc
        })
    };
    for p in pairs {
        let d = (fps[p.a as usize] ^ fps[p.b as usize]).count_ones() as usize;
        if d <= KMAX {
            if p.near {
                s.tp[d] += 1;
            } else {
                s.border[d] += 1;
            }
        }
    }
    let mut acc = (0, 0, 0);
    for (k, reported) in hist.iter().enumerate() {
        acc = (acc.0 + reported, acc.1 + s.tp[k], acc.2 + s.border[k]);
        (s.reported[k], s.tp[k], s.border[k]) = acc;
    }
    s
}

/// Each document's id, text and default sketch (hex), one JSON object a line.
fn write_docs(path: &Path, docs: &[Doc]) {
    let lines = par_map(docs, |d| {
        let mut sketcher = Sketcher::new(SketchOptions::default()).unwrap_or_else(|e| die(&e.to_string()));
        let hex: String = sketcher.sketch(&d.text).as_bytes().iter().map(|b| format!("{b:02x}")).collect();
        serde_json::json!({"id": d.id, "text": d.text, "sketch": hex}).to_string() + "\n"
    });
    std::fs::write(path, lines.concat()).unwrap_or_else(|e| die(&format!("{}: {e}", path.display())));
}

fn main() {
    let a = parse_args();
    if a.manifest.is_none() && a.docs.is_none() && a.roots.is_empty() && rustup_roots().is_empty() {
        println!("quality: no rustup toolchain docs found; nothing to measure");
        return;
    }
    let t0 = std::time::Instant::now();
    let docs = load_docs(&a);
    eprintln!("{} documents loaded in {:.0?}", docs.len(), t0.elapsed());
    if let Some(path) = &a.write_docs {
        write_docs(path, &docs);
        return;
    }
    let sets = shingle_sets(&docs);
    let pairs = similar_pairs(&sets);
    let n_true = pairs.iter().filter(|p| p.near).count() as u64;
    let n_ident = pairs.iter().filter(|p| p.jaccard >= 1.0).count();
    println!(
        "docs {}; pairs {}; true near-duplicate pairs (Jaccard >= 0.9) {n_true}, of which {n_ident} identical; borderline (0.8..0.9) {}; ground truth in {:.0?}",
        docs.len(),
        docs.len() * (docs.len() - 1) / 2,
        pairs.len() as u64 - n_true,
        t0.elapsed()
    );
    let names: Vec<String> = a.configs.clone().unwrap_or_else(|| DEFAULT_CONFIGS.iter().map(|s| s.to_string()).collect());
    let mut summary = Vec::new();
    for name in &names {
        let Some((opts, idf)) = config(name) else { die(&format!("unknown config {name}")) };
        let t = std::time::Instant::now();
        let mut fp = Fingerprinter::new(opts.clone()).unwrap_or_else(|e| die(&e.to_string()));
        if let Some((power, offset)) = idf {
            let feats = par_map(&docs, |d| fp.clone().distinct_features(&d.text));
            let mut b = IdfBuilder::new(opts.feature_recipe());
            feats.iter().for_each(|f| b.add_document(f));
            let table = b.build_with(1, |n, df| 1000.0 * ((f64::from(idf_weight(n, df)) / 1000.0).powf(power) + offset));
            fp = fp.with_idf(Arc::new(table)).unwrap_or_else(|e| die(&e.to_string()));
        }
        let fps: Vec<u64> = par_map(&docs, |d| {
            // documents under min_words get a fingerprint of their own (never 0-matches-all):
            // the sample keeps only documents of >= 20 words, so this does not happen
            fp.clone().fingerprint(&d.text).map_or(hash::sfh64(1, d.id.as_bytes()), |f| f.value)
        });
        let s = score(&fps, &pairs);
        println!("\n## {name}   (recipe: {}; {:.1?})", fp.recipe(), t.elapsed());
        println!("{:>3} {:>11} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7} {:>10}", "k", "reported", "TP", "FP", "FN", "precision", "recall", "F1", "borderline");
        for k in 0..=KMAX {
            let (r, tp) = (s.reported[k], s.tp[k]);
            let p = if r > 0 { tp as f64 / r as f64 } else { 0.0 };
            let rc = tp as f64 / n_true.max(1) as f64;
            let f1 = if p + rc > 0.0 { 2.0 * p * rc / (p + rc) } else { 0.0 };
            println!("{k:>3} {r:>11} {tp:>9} {:>9} {:>9} {p:>9.4} {rc:>7.4} {f1:>7.4} {:>10}", r - tp, n_true - tp, s.border[k]);
            if k == 3 {
                summary.push((name.clone(), p, rc, f1));
            }
        }
        if let Some(dir) = &a.write_fp {
            let _ = std::fs::create_dir_all(dir);
            let body: String = docs.iter().zip(&fps).map(|(d, f)| format!("{}\t{f:016x}\n", d.id)).collect();
            let path = dir.join(format!("{name}.tsv"));
            std::fs::write(&path, body).unwrap_or_else(|e| die(&format!("{}: {e}", path.display())));
        }
        if let (Some(path), true) = (&a.dump, names.len() == 1) {
            dump(path, a.dump_k, &docs, &fps, &pairs);
        }
    }
    println!("\n## Summary at k = 3\n\n| config | precision | recall | F1 |\n| --- | --- | --- | --- |");
    for (name, p, r, f1) in summary {
        println!("| {name} | {p:.3} | {r:.3} | {f1:.3} |");
    }
}

/// False positives and negatives at distance `k`, for error analysis.
fn dump(path: &Path, k: u32, docs: &[Doc], fps: &[u64], pairs: &[Pair]) {
    let jac: HashMap<(u32, u32), &Pair> = pairs.iter().map(|p| ((p.a, p.b), p)).collect();
    let mut out = String::from("kind\tid_a\tid_b\thamming\tjaccard\n");
    for i in 0..fps.len() {
        for j in i + 1..fps.len() {
            let d = (fps[i] ^ fps[j]).count_ones();
            if d <= k {
                let p = jac.get(&(i as u32, j as u32));
                if !p.is_some_and(|p| p.near) {
                    let js = p.map_or("<0.8".to_owned(), |p| format!("{:.4}", p.jaccard));
                    out.push_str(&format!("FP\t{}\t{}\t{d}\t{js}\n", docs[i].id, docs[j].id));
                }
            }
        }
    }
    for p in pairs {
        let d = (fps[p.a as usize] ^ fps[p.b as usize]).count_ones();
        if p.near && d > k {
            out.push_str(&format!("FN\t{}\t{}\t{d}\t{:.4}\n", docs[p.a as usize].id, docs[p.b as usize].id, p.jaccard));
        }
    }
    std::fs::write(path, out).unwrap_or_else(|e| die(&format!("{}: {e}", path.display())));
    eprintln!("false positives/negatives at k={k} written to {}", path.display());
}
