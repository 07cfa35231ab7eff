//! `simdex tune` (issue 24, item 1): its figures against an independent oracle on a corpus
//! built with known near-duplicates, the recommendation (supported k only, the cheapest within
//! the margin, each front's setting), the bootstrap interval, the weak and the empty estimate,
//! and its text on the bundled corpus against a golden file.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::process::{Command, Output};

fn run_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_simdex")).current_dir(dir).args(args).output().expect("run simdex")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "exit {:?}\nstdout: {}\nstderr: {}", o.status, stdout(o), String::from_utf8_lossy(&o.stderr));
    stdout(o)
}

const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// A corpus of `bases` documents of 150 random words, and a near copy of each of the first
/// `copies` with one or two words replaced (Jaccard of 3-shingles about 0.96 or 0.92):
/// written to `dir/doc-N.txt`, returned as texts by file name.
fn corpus(dir: &Path, bases: usize, copies: usize) -> Vec<(String, String)> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut word = || (0..6).map(|_| char::from(b'a' + (next() % 26) as u8)).collect::<String>();
    let mut docs: Vec<Vec<String>> = (0..bases).map(|_| (0..150).map(|_| word()).collect()).collect();
    for i in 0..copies {
        let mut copy = docs[i].clone();
        for j in 0..=(i % 2) {
            copy[20 + 60 * j] = word();
        }
        docs.push(copy);
    }
    docs.iter()
        .enumerate()
        .map(|(i, words)| {
            let (name, text) = (format!("doc-{i:03}.txt"), words.join(" "));
            std::fs::write(dir.join(&name), &text).unwrap();
            (name, text)
        })
        .collect()
}

/// The oracle's ground truth: pairs of file names whose word 3-shingle sets (words split at
/// spaces) have a Jaccard similarity of at least 0.9.
fn true_pairs(docs: &[(String, String)]) -> BTreeSet<(String, String)> {
    let sets: Vec<BTreeSet<String>> = docs.iter().map(|(_, t)| t.split(' ').collect::<Vec<_>>().windows(3).map(|w| w.join(" ")).collect()).collect();
    let mut out = BTreeSet::new();
    for i in 0..docs.len() {
        for j in i + 1..docs.len() {
            let common = sets[i].intersection(&sets[j]).count();
            if common as f64 / (sets[i].len() + sets[j].len() - common) as f64 >= 0.9 {
                out.insert((docs[i].0.clone(), docs[j].0.clone()));
            }
        }
    }
    out
}

/// Fingerprints by file name, from `simdex fingerprint` (no IDF weights, as `tune --no-idf`).
fn fingerprints(dir: &Path) -> HashMap<String, u64> {
    let out = ok(&run_in(dir, &["fingerprint", "."]));
    out.lines()
        .map(|l| {
            let (id, fp) = l.split_once('\t').unwrap();
            (Path::new(id).file_name().unwrap().to_string_lossy().into_owned(), u64::from_str_radix(fp, 16).unwrap())
        })
        .collect()
}

#[test]
fn tune_figures_and_recommendation_equal_the_oracle() {
    let dir = tempfile::tempdir().unwrap();
    let docs = corpus(dir.path(), 70, 60);
    let truth = true_pairs(&docs);
    assert_eq!(truth.len(), 60, "each copy and its base, nothing else");
    let fps = fingerprints(dir.path());
    // the oracle's precision, recall and F1 of "within k bits" for k = 0..=8
    let mut oracle = Vec::new();
    for k in 0..=8u32 {
        let mut reported = 0u64;
        let mut tp = 0u64;
        for i in 0..docs.len() {
            for j in i + 1..docs.len() {
                if (fps[&docs[i].0] ^ fps[&docs[j].0]).count_ones() <= k {
                    reported += 1;
                    tp += u64::from(truth.contains(&(docs[i].0.clone(), docs[j].0.clone())));
                }
            }
        }
        let (p, r) = (if reported == 0 { 1.0 } else { tp as f64 / reported as f64 }, tp as f64 / 60.0);
        oracle.push((reported, p, r, if p + r == 0.0 { 0.0 } else { 2.0 * p * r / (p + r) }));
    }
    assert!(oracle.iter().all(|o| o.1 == 1.0), "random documents are far apart: no false pair within 8 bits");
    let v: serde_json::Value = serde_json::from_str(&ok(&run_in(dir.path(), &["tune", ".", "--no-idf", "--json"]))).unwrap();
    assert_eq!(v["true_pairs"], 60);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 9, "k = 0..=8, what an index supports");
    for (k, (row, o)) in rows.iter().zip(&oracle).enumerate() {
        let f = &row["fingerprint"];
        assert_eq!((f["k"].as_u64(), f["reported"].as_u64()), (Some(k as u64), Some(o.0)), "{row}");
        assert!((f["precision"].as_f64().unwrap() - o.1).abs() < 1e-12 && (f["recall"].as_f64().unwrap() - o.2).abs() < 1e-12, "k = {k}: {row} vs {o:?}");
    }
    let best = oracle.iter().map(|o| o.3).fold(0.0, f64::max);
    let k_star = oracle.iter().position(|o| o.3 >= best - 0.01).unwrap() as u64;
    assert!(k_star > 0, "the copies' distances are spread, so the choice is not trivial: {oracle:?}");
    let rec = &v["recommended"];
    assert_eq!((rec["k"].as_u64(), rec["confirm_threshold"].as_f64()), (Some(k_star), None), "{rec}");
    assert_eq!(rec["fronts"]["cli"], format!("simdex dedup . --no-idf -k {k_star} --no-confirm"));
    // beyond k = 3 fingerprints alone decide only when the document call asks (confirm=False,
    // SIMDEX_CONFIRM = False): the recommendation says so, so it runs as stated
    let python = rec["fronts"]["python"].as_str().unwrap();
    assert!(python.starts_with(&format!("simdex.Index(\"crawl.simdex\", k={k_star}, sketches=False)")), "{python}");
    assert_eq!(python.contains(&format!("find_or_insert_document(page, doc_id, k={k_star}, confirm=False)")), k_star > 3, "{python}");
    assert_eq!(rec["fronts"]["scrapy"].as_str().unwrap().contains("SIMDEX_CONFIRM = False"), k_star > 3, "{rec}");
    assert_eq!(rec["notes"].as_array().unwrap().len(), 0, "--no-idf and the default recipe: what Python and Scrapy use");
    assert_eq!((v["margin"].as_f64(), v["weak"].as_bool()), (Some(0.01), Some(false)));
    // the interval holds the estimate, and the same seed gives the same interval
    let f1 = rec["f1"].as_f64().unwrap();
    let (low, high) = (rec["interval"]["f1"][0].as_f64().unwrap(), rec["interval"]["f1"][1].as_f64().unwrap());
    assert!(low <= f1 && f1 <= high && high <= 1.0, "{rec}");
    let again: serde_json::Value = serde_json::from_str(&ok(&run_in(dir.path(), &["tune", ".", "--no-idf", "--json"]))).unwrap();
    assert_eq!(again["recommended"]["interval"], rec["interval"]);
    // k = 0 confirmed at 0.90 is the index's check: `dedup --index -k 0` (a second run
    // checks every document against the first's index) answers exactly the pairs tune counts,
    // band candidates beyond k included
    let confirmed0 = index_check_pairs(dir.path(), 0);
    let tp = confirmed0.intersection(&truth).count() as u64;
    let (p0, r0) = (if confirmed0.is_empty() { 1.0 } else { tp as f64 / confirmed0.len() as f64 }, tp as f64 / 60.0);
    let f0 = if p0 + r0 == 0.0 { 0.0 } else { 2.0 * p0 * r0 / (p0 + r0) };
    let c = &rows[0]["confirmed"];
    assert_eq!((c["confirm_threshold"].as_f64(), c["reported"].as_u64()), (Some(0.9), Some(confirmed0.len() as u64)), "{c}");
    assert!((c["precision"].as_f64().unwrap() - p0).abs() < 1e-12 && (c["recall"].as_f64().unwrap() - r0).abs() < 1e-12, "{c} vs {p0} {r0}");
    assert!(confirmed0.len() > oracle[0].0 as usize + 10, "band candidates find copies beyond k = 0: {} against {}", confirmed0.len(), oracle[0].0);
    // a wider margin never recommends a costlier setting: within 0.2 of the best, the
    // cheapest is fingerprints alone within the design's k = 3, else k = 0 confirmed (the
    // next in the cost order: a confirmed check runs a design-k query and band lookups)
    let wide: serde_json::Value = serde_json::from_str(&ok(&run_in(dir.path(), &["tune", ".", "--no-idf", "--json", "--margin", "0.2"]))).unwrap();
    let want = match oracle[..=3].iter().position(|o| o.3 >= best - 0.2) {
        Some(k) => (Some(k as u64), None),
        None => {
            assert!(f0 >= best - 0.2, "this corpus: k = 0 confirmed is within 0.2 of the best ({f0} vs {best})");
            (Some(0), Some(0.9))
        }
    };
    assert_eq!((wide["recommended"]["k"].as_u64(), wide["recommended"]["confirm_threshold"].as_f64()), want, "{}", wide["recommended"]);
    // `simdex dedup`'s own figures (its rule: band candidates, the second look) are what
    // running it gives, at every k: the oracle scores `dedup --pairs` against the truth
    let dedup_rows = v["dedup"]["rows"].as_array().unwrap();
    let dedup_f1: Vec<f64> = [0u32, 3, 8]
        .iter()
        .map(|&k| {
            let (got, f1) = dedup_pairs_f1(dir.path(), &["-k", &k.to_string()], &truth);
            let row = &dedup_rows[k as usize];
            assert_eq!(row["reported"].as_u64(), Some(got), "k = {k}: {row}");
            assert!((row["f1"].as_f64().unwrap() - f1).abs() < 1e-12, "k = {k}: {row} vs the oracle's {f1}");
            f1
        })
        .collect();
    // a recommendation confirmed by sketch is the index's check (Python, Scrapy); the CLI line
    // asks dedup for the same k and quotes dedup's own F1 there, the F1 that command gives
    // (this corpus: the wide margin recommends k = 0 confirmed)
    assert_eq!(want.1, Some(0.9), "{want:?}");
    let cli = wide["recommended"]["fronts"]["cli"].as_str().unwrap();
    assert!(cli.starts_with("simdex dedup . --no-idf -k 0   (dedup's own rule") && cli.contains(&format!("F1 {:.3};", dedup_f1[0])), "{cli}");
}

/// `simdex dedup . --no-idf ARGS --pairs FILE` in `corpus`: the pairs it reports (of file
/// names) and their F1 against `truth`.
fn dedup_pairs_f1(corpus: &Path, args: &[&str], truth: &BTreeSet<(String, String)>) -> (u64, f64) {
    let work = tempfile::tempdir().unwrap();
    let pairs = work.path().join("pairs.tsv");
    let mut all = vec!["dedup", ".", "--no-idf", "--pairs", pairs.to_str().unwrap()];
    all.extend_from_slice(args);
    ok(&run_in(corpus, &all));
    let name = |s: &str| Path::new(s).file_name().unwrap().to_string_lossy().into_owned();
    let got: BTreeSet<(String, String)> = std::fs::read_to_string(&pairs)
        .unwrap()
        .lines()
        .map(|l| {
            let mut f = l.split('\t');
            let (a, b) = (name(f.next().unwrap()), name(f.next().unwrap()));
            if a < b {
                (a, b)
            } else {
                (b, a)
            }
        })
        .collect();
    let tp = got.intersection(truth).count() as f64;
    let (p, r) = (if got.is_empty() { 1.0 } else { tp / got.len() as f64 }, tp / truth.len() as f64);
    (got.len() as u64, if p + r == 0.0 { 0.0 } else { 2.0 * p * r / (p + r) })
}

/// The pairs of file names in a `dedup --index --report` file (a document and a stored one
/// it matches, itself left out).
fn pairs_of_report(report: &str) -> BTreeSet<(String, String)> {
    let records: Vec<serde_json::Value> = report.lines().map(|l| serde_json::from_str(l).unwrap()).filter(|r: &serde_json::Value| r["kind"] == "indexed").collect();
    let name = |v: &serde_json::Value| Path::new(v.as_str().unwrap()).file_name().unwrap().to_string_lossy().into_owned();
    let by_id: HashMap<u64, String> = records.iter().map(|r| (r["index_doc_id"].as_u64().unwrap(), name(&r["member"]))).collect();
    let mut out = BTreeSet::new();
    for r in &records {
        for m in r["matches"].as_array().unwrap() {
            let (a, b) = (name(&r["member"]), by_id[&m["index_doc_id"].as_u64().unwrap()].clone());
            if a != b {
                out.insert(if a < b { (a, b) } else { (b, a) });
            }
        }
    }
    out
}

/// The pairs of file names the index's confirmed check answers at `k` (0.90, the library's
/// defaults): `dedup --no-idf --index` adds the corpus to a new index, and a second run
/// reports, for each document, the stored ones it matches.
fn index_check_pairs(corpus: &Path, k: u32) -> BTreeSet<(String, String)> {
    let work = tempfile::tempdir().unwrap();
    let idx = work.path().join("idx");
    let report = work.path().join("report.jsonl");
    let (idx_s, report_s, k_s) = (idx.to_str().unwrap(), report.to_str().unwrap(), k.to_string());
    ok(&run_in(corpus, &["dedup", ".", "--no-idf", "-k", &k_s, "--index", idx_s]));
    ok(&run_in(corpus, &["dedup", ".", "--no-idf", "-k", &k_s, "--index", idx_s, "--report", report_s]));
    pairs_of_report(&std::fs::read_to_string(&report).unwrap())
}

#[test]
fn tune_on_a_small_corpus_says_the_estimate_is_weak_and_still_advises() {
    let dir = tempfile::tempdir().unwrap();
    corpus(dir.path(), 20, 5);
    let out = ok(&run_in(dir.path(), &["tune", ".", "--no-idf"]));
    assert!(out.contains("\nWEAK ESTIMATE: it rests on 5 true pairs (fewer than 50); every document of the corpus (25) was sampled: only a larger corpus adds pairs\n"), "{out}");
    assert!(out.contains("\nrecommended: ") && out.contains("\n  CLI:    simdex dedup . --no-idf -k "), "{out}");
    let out = ok(&run_in(dir.path(), &["tune", ".", "--no-idf", "--sample", "10"]));
    assert!(out.contains("10 of 25 documents were sampled: --sample 0 (all) or a larger --sample adds pairs"), "{out}");
}

#[test]
fn tune_without_a_single_true_pair_recommends_nothing_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    corpus(dir.path(), 3, 0);
    let o = run_in(dir.path(), &["tune", "."]);
    let out = ok(&o);
    assert!(
        out.contains("no recommendation: no two of the 3 fingerprinted documents have a Jaccard similarity of 0.9 or more, so recall cannot be measured (every document of the corpus (3) was sampled: only a larger corpus adds pairs); the defaults stand"),
        "{out}"
    );
    let v: serde_json::Value = serde_json::from_str(&ok(&run_in(dir.path(), &["tune", ".", "--json"]))).unwrap();
    assert!(v["recommended"].is_null() && v["weak"] == true, "{v}");
}

/// The whole text on the bundled corpus, against `tools/tests/golden/tune-pages.txt`
/// (`SIMDEX_BLESS=1` rewrites it; read the diff before committing one).
#[test]
fn tune_text_on_the_bundled_corpus_is_the_golden_one() {
    let out = ok(&run_in(Path::new(REPO), &["tune", "fixtures/corpus/pages"]));
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/tune-pages.txt");
    if std::env::var_os("SIMDEX_BLESS").is_some() {
        std::fs::write(&golden, &out).unwrap();
    }
    assert_eq!(out, std::fs::read_to_string(&golden).unwrap());
    // what the issue asked of it, independently of the golden file
    assert!(out.contains("recommended: fingerprints only, k = 3, the cheapest setting within 0.01 of the best F1"), "{out}");
    assert!(!out.lines().any(|l| l.trim_start().starts_with("9 ") || l.trim_start().starts_with("10 ")), "no row above k = 8");
}
