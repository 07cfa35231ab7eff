//! Issue 11 end to end: queries above the design's k (multi-probe) against brute force,
//! `plan --for-design` and `dedup --pairs` (confirmed by sketches). `tune` and the pictures
//! have files of their own (cli_tune.rs, cli_plots.rs).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_simdex")).args(args).output().expect("run simdex")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn ok(o: &Output) {
    assert!(o.status.success(), "exit {:?}\nstdout: {}\nstderr: {}", o.status, stdout(o), String::from_utf8_lossy(&o.stderr));
}

fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

const PAGES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/corpus/pages");

#[test]
fn query_above_the_design_k_equals_brute_force() {
    let dir = tempfile::tempdir().unwrap();
    let mut x = 7u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let centers: Vec<u64> = (0..50).map(|_| next()).collect();
    let mut fps: Vec<u64> = (0..20_000).map(|_| next()).collect();
    for (i, &c) in centers.iter().enumerate() {
        for d in 0..10u32 {
            let mut f = c;
            for b in 0..d {
                f ^= 1 << ((i as u32 * 7 + b * 13) % 64);
            }
            fps.push(f);
        }
    }
    let input = dir.path().join("fp.txt");
    std::fs::write(&input, fps.iter().map(|f| format!("{f:016x}\n")).collect::<String>()).unwrap();
    let seg = dir.path().join("s.sdx");
    ok(&run(&["build", "--out", p(&seg), p(&input)]));
    let queries = dir.path().join("q.txt");
    std::fs::write(&queries, centers.iter().map(|f| format!("{f:016x}\n")).collect::<String>()).unwrap();
    for k in [4u32, 6, 8] {
        let o = run(&["query", p(&seg), "-k", &k.to_string(), "--input", p(&queries)]);
        ok(&o);
        let got: BTreeSet<String> = stdout(&o).lines().map(str::to_owned).collect();
        let want: BTreeSet<String> =
            centers.iter().flat_map(|&q| fps.iter().filter(move |&&f| (f ^ q).count_ones() <= k).map(move |&f| format!("{q:016x}\t{f:016x}\t{}", (f ^ q).count_ones()))).collect();
        assert_eq!(got, want, "k = {k}");
    }
}

#[test]
fn plan_for_design_explains_the_cost_of_each_k() {
    let o = run(&["plan", "--count", "10000000", "-k", "6", "--for-design", "3"]);
    ok(&o);
    let out = stdout(&o);
    assert!(out.contains("4 tables (4 blocks)"), "{out}");
    let row6 = out.lines().find(|l| l.trim_start().starts_with("6 ")).expect("a row for k = 6");
    assert!(row6.contains("multi-probe") && row6.contains(" 52 ") && row6.contains("1,1,1,0"), "{row6}");
    let o = run(&["plan", "--count", "100", "-k", "8", "--for-design", "3", "--json"]);
    ok(&o);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["per_k"][8]["method"], "scan", "100 entries: a scan is cheaper than 188 probes");
}

#[test]
fn dedup_pairs_lists_every_confirmed_pair_with_ids_as_given() {
    let dir = tempfile::tempdir().unwrap();
    let pairs = dir.path().join("pairs.tsv");
    let report = dir.path().join("report.jsonl");
    ok(&run(&["dedup", PAGES, "--pairs", p(&pairs), "--report", p(&report)]));
    let text = std::fs::read_to_string(&pairs).unwrap();
    let mut exact_pairs = 0;
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f.len(), 4, "{line}");
        assert!(f[0].starts_with(PAGES) && f[1].starts_with(PAGES), "ids are the input paths: {line}");
        let distance: u32 = f[2].parse().unwrap();
        let similarity: f64 = f[3].parse().unwrap();
        assert!(distance <= 8 && similarity >= 0.9, "{line}");
        exact_pairs += usize::from(distance == 0 && f[3] == "1.0000");
    }
    // Every pair of an exact-duplicate group is listed.
    let groups: Vec<serde_json::Value> =
        std::fs::read_to_string(&report).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).filter(|v: &serde_json::Value| v["kind"] == "exact").collect();
    let in_groups: usize = groups.iter().map(|g| g["size"].as_u64().unwrap() as usize).map(|n| n * (n - 1) / 2).sum();
    assert!(in_groups > 0 && exact_pairs >= in_groups, "{exact_pairs} exact pairs listed, {in_groups} in groups");
    // Without confirmation at k = 3, every line has a distance of at most 3.
    let o = run(&["dedup", PAGES, "--no-verify", "--pairs", p(&pairs)]);
    ok(&o);
    assert!(std::fs::read_to_string(&pairs).unwrap().lines().all(|l| l.split('\t').nth(2).unwrap().parse::<u32>().unwrap() <= 3));
    // `--no-confirm` is the flag's name; `--no-verify` (above) its old one, still accepted
    // with a warning that names the new one.
    let warned = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(warned.contains("warning: dedup --no-verify is deprecated: use --no-confirm"), "{warned}");
    let unconfirmed = std::fs::read_to_string(&pairs).unwrap();
    let o = run(&["dedup", PAGES, "--no-confirm", "--pairs", p(&pairs)]);
    ok(&o);
    assert!(!String::from_utf8_lossy(&o.stderr).contains("deprecated"));
    assert_eq!(std::fs::read_to_string(&pairs).unwrap(), unconfirmed);
    // the same for --verify-threshold (--confirm-threshold), and the old names are not in --help
    let strict = dir.path().join("strict.tsv");
    let o = run(&["dedup", PAGES, "--verify-threshold", "0.99", "--pairs", p(&strict)]);
    ok(&o);
    assert!(String::from_utf8_lossy(&o.stderr).contains("warning: dedup --verify-threshold is deprecated: use --confirm-threshold"), "{}", String::from_utf8_lossy(&o.stderr));
    let named = std::fs::read_to_string(&strict).unwrap();
    ok(&run(&["dedup", PAGES, "--confirm-threshold", "0.99", "--pairs", p(&strict)]));
    assert_eq!(std::fs::read_to_string(&strict).unwrap(), named);
    assert!(named.lines().all(|l| l.split('\t').nth(3).unwrap().parse::<f64>().unwrap() >= 0.99), "{named}");
    assert!(!run(&["dedup", PAGES, "--verify-threshold", "0.99", "--confirm-threshold", "0.9"]).status.success());
    let help = stdout(&run(&["dedup", "--help"]));
    assert!(help.contains("--no-confirm") && !help.contains("--no-verify") && !help.contains("--verify-threshold"), "{help}");
}

#[test]
fn dedup_index_stores_sketches_and_confirms_by_them_next_time() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    let o = run(&["dedup", PAGES, "--index", p(&index)]);
    ok(&o);
    assert!(!String::from_utf8_lossy(&o.stderr).contains("no sketches"), "{}", String::from_utf8_lossy(&o.stderr));
    // The segment the run left has a sketch column of the library's recipe.
    let seg = std::fs::read_dir(&index).unwrap().map(|e| e.unwrap().path()).find(|p| p.extension().is_some_and(|x| x == "sdx")).unwrap();
    let segment = simdex::Segment::open(&seg).unwrap();
    let default = simdex_fingerprint::sketch::SketchOptions::default();
    assert_eq!(segment.sketch_layout(), Some((64, default.scheme())));
    let inspect = run(&["inspect", p(&seg)]);
    ok(&inspect);
    assert!(String::from_utf8_lossy(&inspect.stdout).contains("64-byte sketches"), "{}", String::from_utf8_lossy(&inspect.stdout));
    let stats: serde_json::Value = serde_json::from_slice(&run(&["stats", p(&index), "--json"]).stdout).unwrap();
    assert_eq!((stats["sketch_bytes"].as_u64(), stats["sketch_scheme"].as_str()), (Some(64), Some("4d48020100020000")), "{stats}");
    // Second run: every document is found, confirmed against its own stored sketch.
    let report = dir.path().join("r.jsonl");
    ok(&run(&["dedup", PAGES, "--index", p(&index), "--report", p(&report)]));
    let indexed: Vec<serde_json::Value> =
        std::fs::read_to_string(&report).unwrap().lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()).filter(|v| v["kind"] == "indexed").collect();
    assert!(!indexed.is_empty());
    for v in &indexed {
        let own = v["index_doc_id"].clone();
        assert!(v["matches"].as_array().unwrap().iter().any(|m| m["index_doc_id"] == own && m["similarity"] == 1.0), "{v}");
    }
}

#[test]
fn dedup_says_that_an_index_without_sketches_is_checked_by_fingerprint_alone() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    // An index made of bare fingerprints stores no sketches.
    let fps = dir.path().join("fps.txt");
    std::fs::write(&fps, "0123456789abcdef\n").unwrap();
    ok(&run(&["insert", p(&index), p(&fps)]));
    let o = run(&["dedup", PAGES, "--index", p(&index)]);
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("the index holds no sketches") && err.contains("k = 3"), "{err}");
}

#[test]
fn dedup_answers_the_same_whether_the_idf_pass_keeps_the_text_or_not() {
    let dir = tempfile::tempdir().unwrap();
    // Besides the pages: a JSON-lines file with a document, a line that is not one, an
    // empty document (no fingerprint: skipped at the end of its file) and a near copy.
    let jsonl = dir.path().join("more.jsonl");
    let page = std::fs::read_to_string(Path::new(PAGES).join("en-049.html")).unwrap();
    let record = |id: &str, text: &str| serde_json::json!({"id": id, "text": text}).to_string();
    let lines = [record("a", &page), "{not json".to_string(), record("empty", "  "), record("b", &page.replace("the", "a")), record("c", &page)];
    std::fs::write(&jsonl, lines.join("\n") + "\n").unwrap();
    let outputs = |extra: &[&str]| {
        let (report, pairs) = (dir.path().join("r.jsonl"), dir.path().join("p.tsv"));
        let mut args = vec!["dedup", PAGES, p(&jsonl), "--report", p(&report), "--pairs", p(&pairs)];
        args.extend_from_slice(extra);
        let o = run(&args);
        ok(&o);
        (o.stdout, std::fs::read(&report).unwrap(), std::fs::read(&pairs).unwrap())
    };
    let kept = outputs(&[]);
    let report = String::from_utf8_lossy(&kept.1);
    let skipped: Vec<&str> = report.lines().filter(|l| l.contains("\"kind\":\"skipped\"")).collect();
    assert!(skipped.len() == 2 && skipped[0].contains("line 2: invalid JSON") && skipped[1].contains("\"empty\""), "{skipped:?}");
    assert!(kept == outputs(&["--keep-text-bytes", "0"]), "reading the inputs again gives the same answers");
    assert!(kept == outputs(&["--keep-text-bytes", "200000"]), "a budget exceeded part-way gives the same answers");
}

#[test]
fn dedup_summary_counts_what_it_wrote() {
    // The bundled corpus and a JSON-lines file with an exact copy, a document too short to
    // fingerprint and a line that is no document: the summary's counts add up, and match
    // the pairs file line for line and the report's groups (the oracles).
    let dir = tempfile::tempdir().unwrap();
    let words: Vec<String> = (0..300).map(|i| format!("w{}", (i * 7919) % 1009)).collect();
    let text = words.join(" ");
    let jsonl = dir.path().join("extra.jsonl");
    let lines = [
        serde_json::json!({"id": "a", "text": text}).to_string(),
        serde_json::json!({"id": "b", "text": text}).to_string(),
        serde_json::json!({"id": "short", "text": "two words"}).to_string(),
        "this line is no JSON".to_owned(),
    ];
    std::fs::write(&jsonl, lines.join("\n") + "\n").unwrap();
    let (pairs, report) = (dir.path().join("pairs.tsv"), dir.path().join("report.jsonl"));
    let o = run(&["dedup", PAGES, p(&jsonl), "--pairs", p(&pairs), "--report", p(&report)]);
    ok(&o);
    let out = stdout(&o);
    let number_after = |prefix: &str| -> u64 {
        let at = out.find(prefix).unwrap_or_else(|| panic!("no {prefix:?} in {out}")) + prefix.len();
        out[at..].split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap_or_else(|_| panic!("no number after {prefix:?} in {out}"))
    };
    let line = |start: &str| out.lines().find(|l| l.starts_with(start)).unwrap_or_else(|| panic!("no {start:?} line in {out}")).to_owned();
    let records: Vec<serde_json::Value> = std::fs::read_to_string(&report).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let skipped = records.iter().filter(|v| v["kind"] == "skipped").count() as u64;
    let exact: u64 = records.iter().filter(|v| v["kind"] == "exact").map(|g| g["size"].as_u64().unwrap()).map(|n| n * (n - 1) / 2).sum();
    fn files(dir: &Path) -> u64 {
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).map(|p| if p.is_dir() { files(&p) } else { 1 }).sum()
    }
    // documents: every record once, fingerprinted or skipped (the short one and the bad line)
    let documents = line("documents: ");
    let (total, fingerprinted) = (number_after("documents: "), number_after("documents: ") - skipped);
    assert_eq!(total, files(Path::new(PAGES)) + lines.len() as u64, "{documents}");
    assert_eq!(documents, format!("documents: {total} ({fingerprinted} fingerprinted, {skipped} skipped)"));
    assert!(skipped >= 2, "{documents}");
    // pairs: exact + near = the file's lines; exact = the pairs of the report's groups
    let written = line("pairs written to ");
    let lines_written = std::fs::read_to_string(&pairs).unwrap().lines().count() as u64;
    assert_eq!(written, format!("pairs written to {}: {lines_written} ({exact} exact, {} near)", p(&pairs), lines_written - exact));
    assert!(line("exact duplicates: ").ends_with(&format!(", {exact} pairs")), "{out}");
    let near_line = line("near-duplicate clusters");
    assert!(near_line.ends_with(&format!(" {} pairs", lines_written - exact)) || near_line.contains(&format!(" {} pairs (", lines_written - exact)), "{out}");
    assert!(exact > 0 && lines_written > exact, "both kinds present: {out}");
}
