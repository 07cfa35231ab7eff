//! The `simdex` binary end to end: `fingerprint` and `dedup` on files, standard input and the
//! bundled corpus (fixtures/corpus/pages, written by tools/gen-corpus.py with PLANTED.tsv).

use std::collections::{BTreeSet, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn simdex(args: &[&str], stdin: &[u8]) -> Output {
    let mut child =
        Command::new(env!("CARGO_BIN_EXE_simdex")).args(args).current_dir(root()).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("run simdex");
    // a process that fails before reading its input closes the pipe: not an error here
    let _ = child.stdin.take().expect("stdin").write_all(stdin);
    child.wait_with_output().expect("wait for simdex")
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// An index an older build made pins fingerprint recipe 1 (its `RECIPE` file): `dedup --index`
/// extends it with recipe 1's text of HTML (a head `noscript`'s words dropped), with recipe
/// flags too (no flag names the version), and a new index gets recipe 2's.
#[test]
fn dedup_index_keeps_the_recipe_version_its_index_pinned() {
    use simdex_fingerprint::{visible_text_as, FingerprintOptions, Fingerprinter, Recipe};
    let dir = tempfile::tempdir().expect("tempdir");
    let page = "fixtures/corpus/pages/en-040.html";
    let html = std::fs::read_to_string(root().join(page)).expect("fixture");
    let (old, new) = (dir.path().join("old"), dir.path().join("new"));
    let index = simdex_fingerprint::DocumentIndex::open(&old, simdex::IndexOptions::default()).expect("index");
    index.pin_recipe(Recipe::new(FingerprintOptions::default().with_version(1), None).expect("recipe")).expect("pin");
    index.close().expect("close");
    let fps: Vec<u64> = [1, 2]
        .iter()
        .map(|&v| Fingerprinter::new(FingerprintOptions::default().with_version(v)).expect("fp").fingerprint(&visible_text_as(v, &html)).expect("words").value)
        .collect();
    assert_ne!(fps[0], fps[1]);
    for (version, dir, fp) in [(1, &old, fps[0]), (2, &new, fps[1])] {
        // the second run finds the page the first stored, and reports both fingerprints
        let report = dir.with_extension("jsonl");
        for _ in 0..2 {
            let out = simdex(&["dedup", page, "--index", dir.to_str().expect("path"), "--no-idf", "--report", report.to_str().expect("path")], b"");
            assert!(out.status.success() && text(&out.stdout).contains(&format!("recipe: simdex-fp/{version} ")), "recipe {version}: {}", text(&out.stderr));
        }
        let report = std::fs::read_to_string(&report).expect("report");
        assert_eq!(report.matches(&format!("\"fingerprint\":\"{fp:016x}\"")).count(), 2, "recipe {version}: {report}");
    }
}

#[test]
fn fingerprint_prints_id_tab_hex() {
    let out = simdex(&["fingerprint", "fixtures/corpus/pages/en-000.html", "fixtures/corpus/pages/ru-001.html"], b"");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2);
    for (line, id) in lines.iter().zip(["fixtures/corpus/pages/en-000.html", "fixtures/corpus/pages/ru-001.html"]) {
        let (got_id, hex) = line.split_once('\t').expect("a tab");
        assert_eq!(got_id, id);
        assert!(hex.len() == 16 && u64::from_str_radix(hex, 16).is_ok(), "{hex}");
    }
}

#[test]
fn html_text_and_stdin_agree() {
    // the same article as HTML (in a template) and as plain text: the same words; en-040's
    // head has `<noscript>Enable scripts</noscript>`, which an HTML5 parser with scripting off
    // (the recipe's, and the ground truth's) puts in the body: visible text before the article
    let hex = |o: &Output| text(&o.stdout).split('\t').nth(1).map(|h| h.trim().to_owned());
    for (page, before) in [("ru-020", ""), ("en-040", "Enable scripts\n")] {
        let html = simdex(&["fingerprint", &format!("fixtures/corpus/pages/{page}.html")], b"");
        let plain = std::fs::read(root().join(format!("fixtures/corpus/pages/{page}-plain.txt"))).expect("fixture");
        let stdin = simdex(&["fingerprint", "-"], &[before.as_bytes(), &plain].concat());
        assert_eq!(hex(&html), hex(&stdin), "{page}");
        assert_eq!(text(&stdin.stdout).split('\t').next(), Some("-"));
    }
}

#[test]
fn bad_inputs_fail_with_a_clear_message() {
    let out = simdex(&["fingerprint", "no/such/file.txt"], b"");
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("cannot read no/such/file.txt"), "{}", text(&out.stderr));

    let out = simdex(&["fingerprint", "--no-such-flag"], b"");
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--no-such-flag"));

    let out = simdex(&["fingerprint", "--features", "w99"], b"x y z");
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("unknown feature kind `w99`"), "{}", text(&out.stderr));

    let out = simdex(&["dedup", "-k", "99", "fixtures/corpus/pages"], b"");
    assert_eq!(out.status.code(), Some(2));
    // one k limit and one message for every front (the document calls', which
    // python -m simdex.spark dedup prints too); 8 is answered
    let out = simdex(&["dedup", "-k", "9", "fixtures/corpus/pages"], b"");
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("k = 9: document near-duplicates are found within at most k = 8 bits"), "{}", text(&out.stderr));
    assert!(simdex(&["dedup", "-k", "8", "fixtures/corpus/pages"], b"").status.success());
}

#[test]
fn jsonl_errors_name_lines_and_skip_documents() {
    let input = b"{\"id\": \"a\", \"text\": \"one two three four\"}\n{\"id\": \"b\"}\nnot json\n{\"id\": 7, \"html\": \"<p>five six seven</p><script>x y z</script>\"}\n{\"id\": \"e\", \"text\": \"  \"}\n";
    let out = simdex(&["fingerprint", "--format", "jsonl", "--json", "-"], input);
    assert_eq!(out.status.code(), Some(1), "skipped documents make exit code 1");
    let stderr = text(&out.stderr);
    assert!(stderr.contains("line 2: missing \"text\" or \"html\""), "{stderr}");
    assert!(stderr.contains("line 3: invalid JSON"), "{stderr}");
    assert!(stderr.contains("e: skipped: document is empty"), "{stderr}");
    let ids: Vec<String> = text(&out.stdout).lines().map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json")["id"].as_str().unwrap_or("").to_owned()).collect();
    assert_eq!(ids, ["a", "7"]);
}

#[test]
fn strict_refuses_invalid_utf8_and_lenient_counts_it() {
    let doc = b"valid words before \xff\xfe and after the bad bytes here";
    let out = simdex(&["fingerprint", "--strict", "-"], doc);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("invalid UTF-8 at byte offset 19"), "{}", text(&out.stderr));
    let out = simdex(&["fingerprint", "--json", "-"], doc);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["replaced_utf8"], 2);
    assert!(text(&out.stderr).contains("2 invalid UTF-8 sequences replaced"));
}

/// Planted groups of the bundled corpus: (kind, group) -> member paths.
fn planted() -> HashMap<(String, String), BTreeSet<String>> {
    let tsv = std::fs::read_to_string(root().join("fixtures/corpus/PLANTED.tsv")).expect("PLANTED.tsv");
    let mut groups: HashMap<(String, String), BTreeSet<String>> = HashMap::new();
    for line in tsv.lines().skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        groups.entry((f[0].to_owned(), f[1].to_owned())).or_default().insert(format!("fixtures/corpus/pages/{}", f[2]));
    }
    groups
}

fn dedup_report(k: &str) -> Vec<(String, BTreeSet<String>)> {
    let out = simdex(&["dedup", "fixtures/corpus/pages", "-k", k, "--json"], b"");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("exact duplicates:"), "summary on stderr with --json");
    text(&out.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("json line");
            let members = v["members"].as_array().expect("members").iter().map(|m| m.as_str().unwrap_or("").to_owned()).collect();
            (v["kind"].as_str().unwrap_or("").to_owned(), members)
        })
        .collect()
}

#[test]
fn dedup_finds_the_planted_clusters() {
    let planted = planted();
    assert!(planted.len() >= 40, "the corpus plants exact and near groups");
    for k in ["3", "5"] {
        let report = dedup_report(k);
        // precision: every reported group lies inside one planted group
        for (kind, members) in &report {
            assert!(planted.values().any(|p| members.is_subset(p)), "k={k}: reported {kind} group {members:?} mixes unrelated documents");
        }
        // recall: every planted group is inside one reported group; one-word edits of long
        // pages may land a little over k = 3 (simhash noise), so they are required at k = 5
        for ((kind, group), members) in &planted {
            if k == "3" && group.ends_with("-edit") {
                continue;
            }
            let want = if kind == "exact" { "exact" } else { "near" };
            assert!(report.iter().any(|(rk, m)| members.is_subset(m) && (rk == want || kind == "near")), "k={k}: planted {kind} group {group} {members:?} not found");
        }
    }
}

#[test]
fn learned_idf_table_is_saved_and_reused() {
    let dir = std::env::temp_dir().join(format!("simdex-cli-idf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let table = dir.join("idf.simdex");
    let table_arg = table.to_string_lossy().into_owned();
    let pages = ["fixtures/corpus/pages/en-000.html", "fixtures/corpus/pages/en-001.html", "fixtures/corpus/pages/ru-000.html"];
    let mut args = vec!["fingerprint", "--learn-idf", &table_arg];
    args.extend(pages);
    let learned = simdex(&args, b"");
    assert!(learned.status.success(), "{}", text(&learned.stderr));
    assert!(text(&learned.stderr).contains("from 3 documents"), "{}", text(&learned.stderr));
    let mut args = vec!["fingerprint", "--idf", &table_arg];
    args.extend(pages);
    let reused = simdex(&args, b"");
    assert!(reused.status.success(), "{}", text(&reused.stderr));
    assert_eq!(text(&learned.stdout), text(&reused.stdout), "same table, same fingerprints");
    let plain = simdex(&["fingerprint", pages[0], pages[1], pages[2]], b"");
    assert_ne!(text(&plain.stdout), text(&reused.stdout), "IDF weights change fingerprints");
    // a table learned with other features is refused
    let out = simdex(&["fingerprint", "--idf", &table_arg, "--features", "w3", pages[0]], b"");
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("IDF table was learned with features"), "{}", text(&out.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs simdex with arguments that need not be UTF-8.
fn simdex_os(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_simdex")).args(args).current_dir(root()).stdin(Stdio::null()).output().expect("run simdex")
}

/// A text of `n` distinct words (enough for a reliable fingerprint), different per `seed`.
fn words(seed: u64, n: u64) -> String {
    (0..n).map(|i| format!("w{}x{}", seed * 1000 + i, (seed * 7919 + i * 104_729) % 9973)).collect::<Vec<_>>().join(" ")
}

#[test]
fn fingerprint_refuses_binary_documents_by_name_and_goes_on() {
    let dir = tempfile::tempdir().expect("temp dir");
    let good = dir.path().join("good.txt");
    std::fs::write(&good, words(1, 60)).expect("write");
    // an executable (this very program) and a text with a NUL byte in it
    let elf = dir.path().join("program");
    std::fs::copy(env!("CARGO_BIN_EXE_simdex"), &elf).expect("copy");
    let nul = dir.path().join("nul.txt");
    std::fs::write(&nul, format!("{}\0{}", words(2, 30), words(3, 30))).expect("write");
    let also_good = dir.path().join("z-good.txt");
    std::fs::write(&also_good, words(4, 60)).expect("write");
    let out = simdex_os(&["fingerprint".as_ref(), good.as_os_str(), elf.as_os_str(), nul.as_os_str(), also_good.as_os_str()]);
    assert_eq!(out.status.code(), Some(1), "a refused document makes the exit code 1: {}", text(&out.stderr));
    let printed: Vec<String> = text(&out.stdout).lines().map(|l| l.split('\t').next().unwrap_or("").to_owned()).collect();
    assert_eq!(printed, [good.display().to_string(), also_good.display().to_string()], "the text documents are printed, in order");
    let stderr = text(&out.stderr);
    for (path, offset) in [(&elf, 7), (&nul, words(2, 30).len())] {
        let line = stderr.lines().find(|l| l.contains(&path.display().to_string())).unwrap_or_else(|| panic!("no warning names {}: {stderr}", path.display()));
        assert!(line.contains(&format!("binary document (a NUL byte at byte offset {offset})")), "{line}");
    }
    assert_eq!(stderr.lines().count(), 2, "one warning per refused document: {stderr}");
}

/// Undoes the escaping `fingerprint` and `dedup` print names with (their `--help`).
fn unescape(name: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut bytes = name.bytes();
    while let Some(b) = bytes.next() {
        if b != b'\\' {
            out.push(b);
            continue;
        }
        match bytes.next() {
            Some(b'\\') => out.push(b'\\'),
            Some(b't') => out.push(b'\t'),
            Some(b'n') => out.push(b'\n'),
            Some(b'r') => out.push(b'\r'),
            Some(b'x') => {
                let hex: String = [bytes.next(), bytes.next()].iter().map(|b| char::from(b.expect("two hex digits"))).collect();
                out.push(u8::from_str_radix(&hex, 16).expect("hex"));
            }
            other => panic!("{name}: unknown escape {other:?}"),
        }
    }
    out
}

#[test]
fn names_that_are_not_utf8_print_escaped_and_round_trip() {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let dir = tempfile::tempdir().expect("temp dir");
    let names: [&[u8]; 5] = [b"caf\xe9.txt", b"tab\there.txt", b"back\\slash\\x41.txt", b"new\nline\x01.txt", "plain-é.txt".as_bytes()];
    for (i, name) in names.iter().enumerate() {
        std::fs::write(dir.path().join(std::ffi::OsStr::from_bytes(name)), words(10 + i as u64, 60)).expect("write");
    }
    let out = simdex_os(&["fingerprint".as_ref(), dir.path().as_os_str()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = String::from_utf8(out.stdout).expect("what is printed is UTF-8");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), names.len(), "one line per document, whatever its name: {stdout}");
    let mut seen = BTreeSet::new();
    for line in lines {
        let (id, hex) = line.split_once('\t').expect("id<TAB>hex");
        assert!(!hex.contains('\t'), "{line}");
        let path = std::ffi::OsString::from_vec(unescape(id));
        let name = Path::new(&path).file_name().expect("a file name").as_bytes().to_vec();
        assert!(names.contains(&name.as_slice()), "{id} reads back as {name:?}, not one of the files");
        seen.insert(name);
        // The name read back is the file: fingerprinting it by that path gives the same line.
        let again = simdex_os(&["fingerprint".as_ref(), path.as_os_str()]);
        assert_eq!(text(&again.stdout).trim_end(), line, "{id}");
        // and bash's printf %b reads the escaped name back too
        let bash = Command::new("bash").args(["-c", "printf '%b' \"$1\"", "-", id]).output().expect("bash");
        assert_eq!(bash.stdout, path.as_bytes(), "printf %b {id}");
    }
    assert_eq!(seen.len(), names.len());
    // Names as they are for printable UTF-8 without a backslash.
    assert!(stdout.contains("plain-é.txt\t"), "{stdout}");
    // dedup prints the same escaped names.
    let out = simdex_os(&["dedup".as_ref(), dir.path().as_os_str(), "--json".as_ref()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!text(&out.stderr).contains('\u{fffd}'), "no name loses bytes: {}", text(&out.stderr));
}

#[test]
fn dedup_summary_counts_what_it_leaves_out() {
    let dir = tempfile::tempdir().expect("temp dir");
    let report = dir.path().join("report.jsonl");
    let out = simdex_os(&["dedup".as_ref(), "fixtures/corpus/pages".as_ref(), "--show".as_ref(), "2".as_ref(), "--report".as_ref(), report.as_os_str()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // The oracle: the report lists every group in the summary's order.
    let mut groups: HashMap<String, Vec<usize>> = HashMap::new();
    for line in std::fs::read_to_string(&report).expect("report").lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("json line");
        if let (Some(kind), Some(members)) = (v["kind"].as_str(), v["members"].as_array()) {
            groups.entry(kind.to_owned()).or_default().push(members.len());
        }
    }
    let (near, exact) = (&groups["near"], &groups["exact"]);
    assert!(near.len() > 2 && exact.len() > 2, "the corpus has more groups than --show 2 lists");
    let (near_left, exact_left): (usize, usize) = (near[2..].iter().sum(), exact[2..].iter().sum());
    let cut: usize = near[..2].iter().chain(&exact[..2]).map(|&n| n.saturating_sub(2)).sum();
    let summary = text(&out.stdout);
    let mut expected =
        format!("not listed above: {} near-duplicate clusters ({near_left} documents), {} exact-duplicate groups ({exact_left} documents)", near.len() - 2, exact.len() - 2);
    if cut > 0 {
        expected += &format!(", {cut} more members of the groups listed");
    }
    assert!(summary.contains(&expected), "expected {expected:?} in:\n{summary}");
    // Nothing is left out when --show covers everything: no such line.
    let out = simdex_os(&["dedup".as_ref(), "fixtures/corpus/pages".as_ref(), "--show".as_ref(), "1000".as_ref()]);
    assert!(!text(&out.stdout).contains("not listed above"), "{}", text(&out.stdout));
}
