//! `simdex bench query` on a segment file and on an index directory, from one thread or
//! several sharing the open index.

use std::path::Path;
use std::process::{Command, Output, Stdio};

fn run(args: &[&str]) -> Output {
    let o = Command::new(env!("CARGO_BIN_EXE_simdex")).args(args).stdin(Stdio::null()).output().expect("run simdex");
    assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    o
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn bench_query_on_an_index_directory_counts_what_query_finds() {
    let dir = tempfile::tempdir().unwrap();
    let stored = dir.path().join("stored.txt");
    let queries = dir.path().join("queries.txt");
    std::fs::write(&stored, run(&["bench", "generate", "--count", "3000", "--seed", "7"]).stdout).unwrap();
    std::fs::write(&queries, run(&["bench", "generate", "--count", "200", "--near", p(&stored), "--flips", "2", "--seed", "8"]).stdout).unwrap();
    let idx = dir.path().join("idx");
    run(&["add", p(&idx), p(&stored)]);
    let seg = dir.path().join("s.sdx");
    run(&["build", "--out", p(&seg), p(&stored)]);
    // The oracle: the matches `simdex query` prints for the same queries, one a line.
    let expected = String::from_utf8(run(&["query", p(&idx), "-k", "3", "--input", p(&queries)]).stdout).unwrap().lines().count() as u64;
    assert!(expected >= 200, "near queries find their originals: {expected}");
    let threads: Vec<&str> = vec!["--threads", "3", "--rounds", "2"];
    for (target, extra) in [(p(&idx), vec![]), (p(&idx), vec!["--no-warmup"]), (p(&seg), vec![]), (p(&idx), threads.clone()), (p(&seg), threads.clone())] {
        let mut args = vec!["bench", "query", target, "--input", p(&queries), "-k", "3", "--json"];
        args.extend(extra.iter().copied());
        let report: serde_json::Value = serde_json::from_slice(&run(&args).stdout).unwrap();
        // --threads 3 --rounds 2: every query twice, shared between three threads
        let rounds = if extra.contains(&"--rounds") { 2 } else { 1 };
        assert_eq!(report["queries"], 200 * rounds, "{report}");
        assert_eq!(report["matches"].as_u64(), Some(expected * rounds), "{args:?}: {report}");
        assert_eq!(report["threads"], if extra.contains(&"--threads") { 3 } else { 1 }, "{report}");
        for field in ["p50_us", "p99_us", "mean_us", "qps"] {
            assert!(report[field].as_f64().is_some_and(|v| v > 0.0), "{field} in {report}");
        }
        assert_eq!(report["warmup"], !extra.contains(&"--no-warmup"));
    }
}
