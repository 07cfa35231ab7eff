//! Help that teaches (issue 24, item 4): every subcommand's one-line summary is a sentence of
//! its own, every `--help` ends with examples, and every example runs (in a scratch folder,
//! in an order where each finds the files the ones before it made). Also `dedup`'s summary
//! names the flag that lists everything, and what it says is true.

use std::path::Path;
use std::process::{Command, Output};

fn simdex_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_simdex")).current_dir(dir).args(args).output().expect("run simdex")
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "exit {:?}\nstdout: {}\nstderr: {}", o.status, String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// Compares `text` with `tools/tests/golden/NAME` (`SIMDEX_BLESS=1` rewrites it).
fn golden(name: &str, text: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
    if std::env::var_os("SIMDEX_BLESS").is_some() {
        std::fs::write(&path, text).unwrap();
    }
    assert_eq!(text, std::fs::read_to_string(&path).unwrap(), "{name} differs from the golden file");
}

/// The subcommands `simdex --help` lists, with their summaries.
fn summaries() -> Vec<(String, String)> {
    let help = ok(&simdex_in(Path::new(REPO), &["--help"]));
    let commands = help.split("Commands:\n").nth(1).unwrap().split("\n\n").next().unwrap();
    commands
        .lines()
        .map(|l| {
            let (name, summary) = l.trim().split_once(' ').unwrap();
            (name.to_owned(), summary.trim().to_owned())
        })
        .filter(|(name, _)| name != "help")
        .collect()
}

#[test]
fn every_summary_is_a_sentence_of_its_own() {
    golden("help.txt", &ok(&simdex_in(Path::new(REPO), &["--help"])));
    let all = summaries();
    assert!(all.len() >= 19, "{all:?}");
    for (i, (name, summary)) in all.iter().enumerate() {
        let first = summary.chars().next().unwrap();
        assert!(first.is_uppercase() && summary.len() <= 100 && !summary.contains("...") && !summary.ends_with('.'), "{name}: {summary:?}");
        // a flattened struct's doc or a stray comment would give two commands one summary
        assert!(all.iter().skip(i + 1).all(|(_, other)| other != summary), "{name} shares its summary: {summary:?}");
        let long = ok(&simdex_in(Path::new(REPO), &[name, "--help"]));
        assert!(long.starts_with(summary.as_str()), "{name} --help starts with its summary:\n{long}");
    }
}

/// The examples `args` (e.g. `["dedup", "--help"]`) ends with: the lines after its last
/// "Examples" heading, each a command line.
fn examples(args: &[&str]) -> Vec<String> {
    let help = ok(&simdex_in(Path::new(REPO), args));
    let (_, tail) = help.rsplit_once("\nExamples").unwrap_or_else(|| panic!("simdex {args:?} has no examples:\n{help}"));
    let lines: Vec<String> = tail.lines().skip(1).map(str::to_owned).collect();
    assert!(!lines.is_empty(), "simdex {args:?}: an empty Examples section");
    for l in &lines {
        assert!(l.starts_with("  simdex "), "simdex {args:?} ends with something other than examples: {l:?}");
    }
    lines.iter().map(|l| l.trim().to_owned()).collect()
}

/// Every subcommand (and `bench`'s), in an order where each example finds what the ones
/// before made: `corpus/` is the bundled corpus.
const SCENARIO: [&str; 24] = [
    "bench generate",
    "build",
    "plan",
    "query",
    "dump",
    "batch",
    "cluster",
    "split",
    "bench index",
    "bench query",
    "bench",
    "insert",
    "delete",
    "replace",
    "stats",
    "inspect",
    "verify",
    "dump-log",
    "compact",
    "recover",
    "fingerprint",
    "dedup",
    "tune",
    "serve",
];

#[test]
fn every_help_ends_with_examples_that_run() {
    let listed: Vec<String> = summaries().into_iter().map(|(name, _)| name).collect();
    for name in &listed {
        assert!(SCENARIO.contains(&name.as_str()), "{name} is missing from the scenario that runs the examples");
    }
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(Path::new(REPO).join("fixtures/corpus/pages"), dir.path().join("corpus")).unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_simdex")).parent().unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let run = |line: &str| {
        let o = Command::new("sh").args(["-c", line]).current_dir(dir.path()).env("PATH", &path).output().unwrap();
        assert!(o.status.success(), "the example `{line}` fails: {}", String::from_utf8_lossy(&o.stderr));
    };
    for line in examples(&["--help"]) {
        run(&line);
    }
    for entry in SCENARIO {
        let mut args: Vec<&str> = entry.split(' ').collect();
        args.push("--help");
        let long = examples(&args);
        args.pop();
        args.push("-h");
        assert_eq!(examples(&args), long, "-h and --help end alike");
        assert!(long.iter().any(|line| line.contains(&format!("simdex {entry} "))), "no example of {entry} runs it: {long:?}");
        for line in long {
            run(&line);
        }
    }
}

#[test]
fn dedup_names_the_flag_that_lists_everything_and_it_does() {
    let out = ok(&simdex_in(Path::new(REPO), &["dedup", "fixtures/corpus/pages", "--show", "2"]));
    golden("dedup-pages-show-2.txt", &out);
    assert!(out.trim_end().ends_with("(--show N lists more; --report FILE writes every one as JSON lines)"), "{out}");
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.jsonl");
    let out = ok(&simdex_in(Path::new(REPO), &["dedup", "fixtures/corpus/pages", "--show", "2", "--report", report.to_str().unwrap()]));
    assert!(out.trim_end().ends_with(&format!("(--show N lists more; the report in {} lists every one)", report.display())), "{out}");
    // what the summary counts, the report lists, every one
    let count = |prefix: &str, after: &str| -> usize {
        let line = out.lines().find(|l| l.starts_with(prefix)).unwrap();
        line.split(after).nth(1).unwrap().trim().split(' ').next().unwrap().parse().unwrap()
    };
    let (groups, clusters) = (count("exact duplicates:", ":"), count("near-duplicate clusters", "):"));
    let text = std::fs::read_to_string(&report).unwrap();
    let kinds: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(kinds.iter().filter(|v| v["kind"] == "exact").count(), groups);
    assert_eq!(kinds.iter().filter(|v| v["kind"] == "near").count(), clusters);
    let err = simdex_in(Path::new(REPO), &["dedup", "fixtures/corpus/pages", "--show", "2", "--json"]);
    assert!(String::from_utf8_lossy(&err.stderr).trim_end().ends_with("the JSON-lines report on stdout lists every one)"));
}
