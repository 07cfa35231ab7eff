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
    run(&["insert", p(&idx), p(&stored)]);
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

fn fingerprints_with_ids(text: &str) -> Vec<(u64, u64)> {
    text.lines()
        .map(|l| {
            let (fp, id) = l.split_once('\t').unwrap();
            (u64::from_str_radix(fp, 16).unwrap(), id.parse().unwrap())
        })
        .collect()
}

#[test]
fn bench_query_verified_confirms_exactly_the_near_copies_of_their_own_document() {
    let dir = tempfile::tempdir().unwrap();
    let stored = dir.path().join("stored.txt");
    let queries = dir.path().join("queries.txt");
    let plain_queries = dir.path().join("plain.txt");
    std::fs::write(&stored, run(&["bench", "generate", "--count", "3000", "--seed", "7", "--with-ids"]).stdout).unwrap();
    let mut q = run(&["bench", "generate", "--count", "150", "--near", p(&stored), "--flips", "3", "--seed", "8", "--with-ids"]).stdout;
    q.extend(run(&["bench", "generate", "--count", "150", "--seed", "9", "--with-ids"]).stdout);
    std::fs::write(&queries, &q).unwrap();
    std::fs::write(&plain_queries, run(&["bench", "generate", "--count", "150", "--near", p(&stored), "--flips", "3", "--seed", "8"]).stdout).unwrap();
    let idx = dir.path().join("sketched");
    run(&["bench", "index", p(&idx), "--input", p(&stored)]);
    // The oracle, by brute force: a query is confirmed by a stored pair only when the pair is
    // its own document (the same id, so the same synthetic sketch): within k, and (band
    // candidates, the default) at any distance, since equal sketches share every band.
    let s = fingerprints_with_ids(&std::fs::read_to_string(&stored).unwrap());
    let qs = fingerprints_with_ids(&String::from_utf8(q).unwrap());
    let own_anywhere = qs.iter().map(|&(_, id)| s.iter().filter(|&&(_, i)| i == id).count() as u64).sum::<u64>();
    for k in [3u32, 8] {
        let own = qs.iter().map(|&(fp, id)| s.iter().filter(|&&(f, i)| i == id && (f ^ fp).count_ones() <= k).count() as u64).sum::<u64>();
        let near = qs.iter().map(|&(fp, _)| s.iter().filter(|&&(f, _)| (f ^ fp).count_ones() <= k).count() as u64).sum::<u64>();
        assert!(own >= 150 && near >= own && own_anywhere > own, "k = {k}: {own} {near} {own_anywhere}");
        let ks = k.to_string();
        for (extra, want) in [(vec![], own_anywhere), (vec!["--threads", "2"], own_anywhere), (vec!["--no-band-candidates"], own)] {
            let mut args = vec!["bench", "query", p(&idx), "--input", p(&queries), "-k", &ks, "--confirmed", "--json"];
            args.extend(extra.iter().copied());
            let report: serde_json::Value = serde_json::from_slice(&run(&args).stdout).unwrap();
            assert_eq!(report["matches"].as_u64(), Some(want), "{args:?}: {report}");
            assert_eq!(report["confirmed"].as_f64(), Some(0.9), "{report}");
        }
        let plain: serde_json::Value = serde_json::from_slice(&run(&["bench", "query", p(&idx), "--input", p(&queries), "-k", &ks, "--json"]).stdout).unwrap();
        assert_eq!(plain["matches"].as_u64(), Some(near), "{plain}");
        // Queries without ids carry sketches of no stored document: nothing is confirmed.
        let none: serde_json::Value = serde_json::from_slice(&run(&["bench", "query", p(&idx), "--input", p(&plain_queries), "-k", &ks, "--verified", "--json"]).stdout).unwrap();
        assert_eq!(none["matches"].as_u64(), Some(0), "{none}");
    }
    // Refusals: an existing directory, an index without sketches, a segment file.
    let fail = |args: &[&str], says: &str| {
        let o = Command::new(env!("CARGO_BIN_EXE_simdex")).args(args).stdin(Stdio::null()).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    };
    fail(&["bench", "index", p(&idx), "--input", p(&stored)], "already exists");
    let bare = dir.path().join("bare");
    run(&["insert", p(&bare), p(&stored)]);
    fail(&["bench", "query", p(&bare), "--input", p(&queries), "--verified"], "stores sketches");
    let seg = dir.path().join("s.sdx");
    run(&["build", "--out", p(&seg), p(&stored)]);
    fail(&["bench", "query", p(&seg), "--input", p(&queries), "--verified"], "index directory");
}
