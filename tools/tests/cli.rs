//! The `simdex` binary as a user runs it: every subcommand, good and bad input, exit codes.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn simdex() -> Command {
    Command::new(env!("CARGO_BIN_EXE_simdex"))
}

fn run(args: &[&str]) -> Output {
    simdex().args(args).output().expect("run simdex")
}

fn run_stdin(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = simdex().args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn ok(o: &Output) {
    assert!(o.status.success(), "exit {:?}\nstdout: {}\nstderr: {}", o.status, stdout(o), stderr(o));
}

/// Deterministic fingerprints, the first one repeated, with ids.
fn sample() -> Vec<(u64, u64)> {
    let mut x = 42u64;
    let mut v: Vec<(u64, u64)> = (0..3000u64)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x, i)
        })
        .collect();
    v.push((v[0].0, 9999));
    v
}

fn write_text(dir: &Path, data: &[(u64, u64)], ids: bool) -> PathBuf {
    let path = dir.join(if ids { "fp_ids.txt" } else { "fp.txt" });
    let mut s = String::new();
    for (fp, id) in data {
        if ids {
            s.push_str(&format!("{fp:016x}\t{id}\n"));
        } else {
            s.push_str(&format!("{fp:016x}\n"));
        }
    }
    std::fs::write(&path, s).unwrap();
    path
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn build_query_dump_verify_inspect_roundtrip() {
    let dir = tempfile::tempdir().unwrap();
    let data = sample();
    let input = write_text(dir.path(), &data, true);
    let seg = dir.path().join("s.sdx");
    ok(&run(&["build", "--out", p(&seg), p(&input)]));

    // dump: every (fingerprint, id) in ascending order, in build's input format.
    let dumped = stdout(&run(&["dump", p(&seg)]));
    let mut want: Vec<(u64, u64)> = data.clone();
    want.sort_unstable();
    let want_text: String = want.iter().map(|(f, i)| format!("{f:016x}\t{i}\n")).collect();
    assert_eq!(dumped, want_text);

    // query: one line per match, the duplicate fingerprint gives both ids.
    let q = format!("{:016x}", data[0].0);
    let o = run(&["query", p(&seg), "-k", "3", &q]);
    ok(&o);
    assert_eq!(stdout(&o), format!("{q}\t{q}\t0\t0\n{q}\t{q}\t0\t9999\n"));
    // A query 2 bits away finds the same entries at distance 2; a far one finds nothing.
    let near = format!("{:016x}", data[0].0 ^ 0b101);
    assert_eq!(stdout(&run(&["query", p(&seg), &near])).lines().count(), 2);
    assert!(stdout(&run(&["query", p(&seg), "-k", "0", &near])).is_empty());

    // query --input with the same file: every query finds at least itself.
    let o = run(&["query", p(&seg), "-k", "0", "--input", p(&input)]);
    ok(&o);
    assert!(stdout(&o).lines().count() >= data.len());

    let o = run(&["verify", p(&seg)]);
    ok(&o);
    assert!(stdout(&o).contains("ok"));

    let o = run(&["inspect", p(&seg), "--json"]);
    ok(&o);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["count"], data.len() as u64);
    assert_eq!(v["file_bytes"], std::fs::metadata(&seg).unwrap().len());
    let tables = v["tables"].as_array().unwrap();
    assert_eq!(tables.len(), 4);
    for t in tables {
        assert_eq!(t["entries"], data.len() as u64);
        assert!(t["blocks"].as_u64().unwrap() > 1);
        assert_eq!(t["prefix_bits"], 16);
        let blocks = t["bits_per_entry_blocks"].as_f64().unwrap();
        let total = t["bits_per_entry_total"].as_f64().unwrap();
        assert!(blocks > 40.0 && total > blocks && total < 70.0, "{blocks} {total}");
        // The histogram covers every successive pair.
        let h: u64 = t["h_histogram"].as_object().unwrap().values().map(|c| c.as_u64().unwrap()).sum();
        assert_eq!(h, data.len() as u64 - 1);
    }
    let text = stdout(&run(&["inspect", p(&seg)]));
    assert!(text.contains("histogram of h") && text.contains("code lengths"));
}

#[test]
fn binary_input_stdin_and_delta_codec() {
    let dir = tempfile::tempdir().unwrap();
    let data = sample();
    let mut bin = Vec::new();
    for (fp, id) in &data {
        bin.extend_from_slice(&fp.to_le_bytes());
        bin.extend_from_slice(&id.to_le_bytes());
    }
    let seg = dir.path().join("b.sdx");
    ok(&run_stdin(&["build", "--out", p(&seg), "--binary", "--with-ids", "--codec", "delta", "-"], &bin));
    let v: serde_json::Value = serde_json::from_str(&stdout(&run(&["inspect", p(&seg), "--json", "--no-histogram"]))).unwrap();
    assert_eq!(v["tables"][0]["codec"], "delta");
    assert_eq!(v["count"], data.len() as u64);
    let q = format!("{:016x}", data[5].0);
    assert_eq!(stdout(&run(&["query", p(&seg), "-k", "0", &q])), format!("{q}\t{q}\t0\t5\n"));
    // Binary queries.
    let qfile = dir.path().join("q.bin");
    std::fs::write(&qfile, data[5].0.to_le_bytes()).unwrap();
    assert_eq!(stdout(&run(&["query", p(&seg), "-k", "0", "--input", p(&qfile), "--binary"])), format!("{q}\t{q}\t0\t5\n"));
}

#[test]
fn dump_of_one_table_shows_permuted_and_original() {
    let dir = tempfile::tempdir().unwrap();
    let data = sample();
    let input = write_text(dir.path(), &data, false);
    let seg = dir.path().join("s.sdx");
    ok(&run(&["build", "--out", p(&seg), "--tables", "4", p(&input)]));
    let out = stdout(&run(&["dump", p(&seg), "--table", "2"]));
    let mut originals: Vec<u64> = out.lines().map(|l| u64::from_str_radix(l.split('\t').nth(1).unwrap(), 16).unwrap()).collect();
    let permuted: Vec<u64> = out.lines().map(|l| u64::from_str_radix(l.split('\t').next().unwrap(), 16).unwrap()).collect();
    assert!(permuted.windows(2).all(|w| w[0] <= w[1]), "table entries are sorted");
    originals.sort_unstable();
    let mut want: Vec<u64> = data.iter().map(|d| d.0).collect();
    want.sort_unstable();
    assert_eq!(originals, want);
    let o = run(&["dump", p(&seg), "--table", "9"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--table 9"));
}

#[test]
fn plan_reproduces_the_papers_16_table_design() {
    let o = run(&["plan", "--count", "17179869184", "-k", "3", "--tables", "16", "--json"]);
    ok(&o);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["chosen"]["tables"], 16);
    assert!(v["chosen"]["prefix_bits"].as_array().unwrap().iter().all(|p| p == 28));
    assert_eq!(v["chosen"]["max_candidates"], 64.0);
    let text = stdout(&run(&["plan", "--count", "10000000"]));
    assert!(text.contains("4 tables"), "{text}");
    let o = run(&["plan", "--count", "1000", "--tables", "7"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("exactly 7 tables"), "{}", stderr(&o));
}

#[test]
fn bench_query_reports_latency() {
    let dir = tempfile::tempdir().unwrap();
    let stored = dir.path().join("stored.txt");
    std::fs::write(&stored, stdout(&run(&["bench", "generate", "-n", "5000"]))).unwrap();
    let queries = dir.path().join("queries.txt");
    std::fs::write(&queries, stdout(&run(&["bench", "generate", "-n", "200", "--near", p(&stored), "--flips", "3"]))).unwrap();
    let seg = dir.path().join("s.sdx");
    ok(&run(&["build", "--out", p(&seg), p(&stored)]));
    let o = run(&["bench", "query", p(&seg), "--input", p(&queries), "--json"]);
    ok(&o);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["queries"], 200);
    // Every query is a 3-bit-flipped copy of a stored fingerprint: each matches it.
    assert!(v["matches"].as_u64().unwrap() >= 200);
    for f in ["queries_per_second", "mean_us", "p50_us", "p99_us"] {
        assert!(v[f].as_f64().unwrap() > 0.0, "{f}");
    }
}

#[test]
fn bad_input_is_named_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let seg = dir.path().join("s.sdx");
    let cases: [(&str, &[u8], &str); 5] = [
        ("nonhex.txt", b"0123456789abcdef\n0123456789abcdeg\n", "line 2"),
        ("short.txt", b"0123456789abcde\n", "15 characters"),
        ("badid.txt", b"0123456789abcdef\tx\n", "document id"),
        ("mixed.txt", b"0123456789abcdef\t1\n0123456789abcdef\n", "line 2 has no document id"),
        ("utf8.txt", b"\xff\xfe\n", "UTF-8"),
    ];
    for (name, content, needle) in cases {
        let f = dir.path().join(name);
        std::fs::write(&f, content).unwrap();
        let o = run(&["build", "--out", p(&seg), p(&f)]);
        assert_eq!(o.status.code(), Some(2), "{name}");
        let err = stderr(&o);
        assert!(err.contains(name) && err.contains(needle), "{name}: {err}");
    }
    // A truncated binary input names the offset.
    let f = dir.path().join("trunc.bin");
    std::fs::write(&f, [0u8; 12]).unwrap();
    let o = run(&["build", "--out", p(&seg), "--binary", p(&f)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("byte offset 8"), "{}", stderr(&o));
    // Missing input file.
    let o = run(&["build", "--out", p(&seg), "/nonexistent/x.txt"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("/nonexistent/x.txt"));
    // Query arguments are checked too.
    let good = dir.path().join("good.txt");
    std::fs::write(&good, b"0123456789abcdef\n").unwrap();
    ok(&run(&["build", "--out", p(&seg), p(&good)]));
    let o = run(&["query", p(&seg), "xyz"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("argument 1"));
    // k above the design's: answered up to 8 (multi-probe), refused above unless a full scan.
    let o = run(&["query", p(&seg), "-k", "5", "0123456789abcdef"]);
    ok(&o);
    assert_eq!(stdout(&o), "0123456789abcdef\t0123456789abcdef\t0\n");
    let o = run(&["query", p(&seg), "-k", "9", "0123456789abcdef"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("full scan"), "{}", stderr(&o));
    let o = run(&["query", p(&seg), "-k", "9", "--full-scan", "0123456789abcdef"]);
    ok(&o);
    assert_eq!(stdout(&o), "0123456789abcdef\t0123456789abcdef\t0\n");
    // Unknown flag.
    assert_eq!(run(&["build", "--frobnicate"]).status.code(), Some(2));
}

#[test]
fn damaged_or_foreign_files_are_refused_by_every_reader() {
    let dir = tempfile::tempdir().unwrap();
    let data = sample();
    let input = write_text(dir.path(), &data, true);
    let seg = dir.path().join("s.sdx");
    ok(&run(&["build", "--out", p(&seg), p(&input)]));
    let bytes = std::fs::read(&seg).unwrap();

    // Not a segment.
    let foreign = dir.path().join("foreign.sdx");
    std::fs::write(&foreign, b"hello world, this is not an index").unwrap();
    for cmd in ["inspect", "dump"] {
        let o = run(&[cmd, p(&foreign)]);
        assert_eq!(o.status.code(), Some(2), "{cmd}");
        assert!(stderr(&o).contains("not a simdex segment"), "{cmd}: {}", stderr(&o));
    }
    let o = run(&["verify", p(&foreign)]);
    assert_eq!(o.status.code(), Some(1));

    // Truncated.
    let cut = dir.path().join("cut.sdx");
    std::fs::write(&cut, &bytes[..bytes.len() - 100]).unwrap();
    let o = run(&["query", p(&cut), "0123456789abcdef"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cut.sdx") && stderr(&o).contains("cut short"), "{}", stderr(&o));

    // One flipped bit inside table 1's second block: verify names table, block and offset.
    let v: serde_json::Value = serde_json::from_str(&stdout(&run(&["inspect", p(&seg), "--json", "--no-histogram"]))).unwrap();
    assert_eq!(v["tables"][1]["table"], 1);
    let flipped = dir.path().join("flipped.sdx");
    let mut damaged = bytes.clone();
    // Header (1024) + table 0 (head 1024, blocks, index 14 each, padding) ... find table 1
    // through verify's own report instead of recomputing the layout here.
    let blocks0 = v["tables"][0]["blocks"].as_u64().unwrap();
    let table1_head = (1024 + 1024 + blocks0 * 1024 + blocks0 * 14).div_ceil(1024) * 1024;
    let at = (table1_head + 1024 + 1024 + 100) as usize;
    damaged[at] ^= 0x10;
    std::fs::write(&flipped, &damaged).unwrap();
    let o = run(&["verify", p(&flipped)]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(out.contains("table 1, block 1") && out.contains(&format!("byte offset {}", at - 100)), "{out}");
    let o = run(&["verify", p(&flipped), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["clean"], false);
    assert_eq!(v["problems"][0]["table"], 1);
    assert_eq!(v["problems"][0]["block"], 1);
    // dump of table 1 reaches the damaged block and stops with an error naming it.
    let o = run(&["dump", p(&flipped), "--table", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("table 1, block 1"), "{}", stderr(&o));
}

#[test]
fn batch_cluster_and_split_agree_with_query() {
    let dir = tempfile::tempdir().unwrap();
    let stored = dir.path().join("stored.txt");
    std::fs::write(&stored, stdout(&run(&["bench", "generate", "-n", "20000", "--clusters", "300", "--cluster-size", "4", "--flips", "2", "--with-ids"]))).unwrap();
    let src = dir.path().join("src.txt");
    let first: String = std::fs::read_to_string(&stored).unwrap().lines().take(500).map(|l| format!("{}\n", l.split('\t').next().unwrap())).collect();
    std::fs::write(&src, first).unwrap();
    let queries = dir.path().join("q.txt");
    std::fs::write(&queries, stdout(&run(&["bench", "generate", "-n", "500", "--near", p(&src), "--flips", "1"]))).unwrap();
    let seg = dir.path().join("s.sdx");
    ok(&run(&["build", "--out", p(&seg), p(&stored)]));

    // batch == query over the same queries, sorted by query (query sorts per query).
    let o = run(&["batch", p(&seg), "--queries", p(&queries)]);
    ok(&o);
    let batch = stdout(&o);
    // `query` prints per query line (a repeated query twice); batch takes each query once.
    let mut b: Vec<String> = stdout(&run(&["query", p(&seg), "--input", p(&queries)])).lines().map(String::from).collect();
    b.sort();
    b.dedup();
    let mut a: Vec<String> = batch.lines().map(String::from).collect();
    assert!(a.len() >= 500);
    let unsorted = a.clone();
    a.sort();
    assert_eq!(a, b);
    // Sorted by query (hex of fixed width sorts as the number), then as `query` sorts.
    let keys: Vec<&str> = unsorted.iter().map(|l| l.split('\t').next().unwrap()).collect();
    assert!(keys.windows(2).all(|w| w[0] <= w[1]));

    // split into 3 chunks: batch over the chunks gives the same lines.
    let chunks = dir.path().join("chunks");
    ok(&run(&["split", p(&seg), "--parts", "3", "--out", p(&chunks)]));
    let listing: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(chunks.join("parts.json")).unwrap()).unwrap();
    assert_eq!(listing["parts"].as_array().unwrap().len(), 3);
    let mut from_chunks: Vec<String> = Vec::new();
    for i in 0..3 {
        let c = chunks.join(format!("part-{i:05}.sdx"));
        from_chunks.extend(stdout(&run(&["batch", p(&c), "--queries", p(&queries)])).lines().map(String::from));
    }
    from_chunks.sort();
    assert_eq!(from_chunks, a);

    // cluster: every planted cluster member appears in some cluster of size >= 2.
    let o = run(&["cluster", p(&seg), "-k", "3"]);
    ok(&o);
    let clusters: Vec<serde_json::Value> = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(clusters.len() >= 250, "{}", clusters.len());
    assert!(clusters.iter().all(|c| c["size"].as_u64().unwrap() >= 2));
    assert!(stderr(&o).contains("cluster sizes"));
    // Bad arguments.
    assert_eq!(run(&["split", p(&seg), "--parts", "0", "--out", p(&chunks)]).status.code(), Some(2));
    assert_eq!(run(&["batch", p(&seg), "--queries", "/nonexistent"]).status.code(), Some(2));
    let o = run(&["cluster", p(&seg), "-k", "9"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("k = 9"), "{}", stderr(&o));

    // cluster --pairs: every pair within k once, sorted, as python -m simdex.spark cluster
    // writes them (a brute-force oracle over the stored fingerprints)
    let pairs_file = dir.path().join("pairs.tsv");
    ok(&run(&["cluster", p(&seg), "-k", "3", "--pairs", p(&pairs_file), "-o", p(&dir.path().join("c.jsonl"))]));
    let mut fps: Vec<u64> = std::fs::read_to_string(&stored).unwrap().lines().map(|l| u64::from_str_radix(&l[..16], 16).unwrap()).collect();
    fps.sort_unstable();
    fps.dedup();
    let mut want = String::new();
    for (i, &a) in fps.iter().enumerate() {
        for &b in &fps[i + 1..] {
            if (a ^ b).count_ones() <= 3 {
                want.push_str(&format!("{a:016x}\t{b:016x}\t{}\n", (a ^ b).count_ones()));
            }
        }
    }
    assert!(want.lines().count() >= 250);
    assert_eq!(std::fs::read_to_string(&pairs_file).unwrap(), want);
    let o = run(&["cluster", p(&seg), "--pairs", p(&dir.path().join("no/such/folder.tsv"))]);
    assert_ne!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("no/such/folder.tsv"), "{}", stderr(&o));
}

#[test]
fn batch_cluster_and_split_read_index_directories() {
    let dir = tempfile::tempdir().unwrap();
    let stored = dir.path().join("stored.txt");
    std::fs::write(&stored, stdout(&run(&["bench", "generate", "-n", "5000", "--clusters", "100", "--cluster-size", "4", "--flips", "2", "--with-ids"]))).unwrap();
    let lines: Vec<String> = std::fs::read_to_string(&stored).unwrap().lines().map(String::from).collect();
    // The index gets the pairs in two inserts (two batches of writes) and one delete; the
    // second by `add`, the command's name before issue 35, which must do the same.
    let (first, second) = lines.split_at(3000);
    let part1 = dir.path().join("part1.txt");
    let part2 = dir.path().join("part2.txt");
    std::fs::write(&part1, first.join("\n") + "\n").unwrap();
    std::fs::write(&part2, second.join("\n") + "\n").unwrap();
    let index = dir.path().join("index");
    ok(&run(&["insert", p(&index), p(&part1)]));
    ok(&run(&["compact", p(&index)]));
    ok(&run(&["add", p(&index), p(&part2)]));
    let deleted = dir.path().join("deleted.txt");
    std::fs::write(&deleted, format!("{}\n", lines[1])).unwrap();
    ok(&run(&["delete", p(&index), p(&deleted)]));
    // The same live pairs as one segment.
    let live = dir.path().join("live.txt");
    let live_lines: Vec<&String> = lines.iter().filter(|l| *l != &lines[1]).collect();
    std::fs::write(&live, live_lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    let seg = dir.path().join("live.sdx");
    ok(&run(&["build", "--out", p(&seg), p(&live)]));

    let src = dir.path().join("src.txt");
    std::fs::write(&src, lines.iter().take(300).map(|l| format!("{}\n", l.split('\t').next().unwrap())).collect::<String>()).unwrap();
    let queries = dir.path().join("q.txt");
    std::fs::write(&queries, stdout(&run(&["bench", "generate", "-n", "300", "--near", p(&src), "--flips", "1"]))).unwrap();

    let from_dir = run(&["batch", p(&index), "--queries", p(&queries)]);
    ok(&from_dir);
    let from_seg = run(&["batch", p(&seg), "--queries", p(&queries)]);
    ok(&from_seg);
    assert!(stdout(&from_seg).lines().count() >= 290);
    assert_eq!(stdout(&from_dir), stdout(&from_seg));
    // The deleted pair is never reported.
    let deleted_id = lines[1].split('\t').nth(1).unwrap();
    assert!(!stdout(&from_dir).lines().any(|l| l.split('\t').nth(3) == Some(deleted_id)));

    assert_eq!(stdout(&run(&["cluster", p(&index)])), stdout(&run(&["cluster", p(&seg)])));
    let chunks = dir.path().join("chunks");
    ok(&run(&["split", p(&index), "--parts", "2", "--out", p(&chunks)]));
    let mut dumped: Vec<String> = Vec::new();
    for i in 0..2 {
        dumped.extend(stdout(&run(&["dump", p(&chunks.join(format!("part-{i:05}.sdx")))])).lines().map(String::from));
    }
    let mut want: Vec<String> = stdout(&run(&["dump", p(&seg)])).lines().map(String::from).collect();
    dumped.sort();
    want.sort();
    assert_eq!(dumped, want);
}

#[test]
fn dedup_adds_the_corpus_to_an_index_and_finds_it_there_next_time() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/corpus/pages");
    let index = dir.path().join("index");
    let report1 = dir.path().join("r1.jsonl");
    let o = run(&["dedup", corpus, "--index", p(&index), "--report", p(&report1)]);
    ok(&o);
    assert!(stdout(&o).contains("0 documents had near-duplicates stored before this run; 319 documents inserted"), "{}", stdout(&o));
    let stats: serde_json::Value = serde_json::from_str(&stdout(&run(&["stats", p(&index), "--json"]))).unwrap();
    assert_eq!(stats["last_seq"], 319, "{stats}");
    assert_eq!(stats["memtable"]["inserts"].as_u64().unwrap() + stats["segment_fingerprints"].as_u64().unwrap(), 319, "{stats}");
    // Second run: every document is already there (at distance 0, under its own id).
    let report2 = dir.path().join("r2.jsonl");
    let o = run(&["dedup", corpus, "--index", p(&index), "--report", p(&report2)]);
    ok(&o);
    assert!(stdout(&o).contains("319 documents had near-duplicates stored before this run"), "{}", stdout(&o));
    let indexed: Vec<serde_json::Value> =
        std::fs::read_to_string(&report2).unwrap().lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()).filter(|v| v["kind"] == "indexed").collect();
    assert_eq!(indexed.len(), 319);
    for v in &indexed {
        let own = v["index_doc_id"].clone();
        assert!(v["matches"].as_array().unwrap().iter().any(|m| m["index_doc_id"] == own && m["distance"] == 0), "{v}");
    }
}

/// A reader that stops early (`simdex plan ... | head -1`) closes the pipe: every reporting
/// subcommand then ends quietly with exit 0, never with a panic or an error message.
#[test]
fn a_closed_output_pipe_ends_every_command_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_text(dir.path(), &sample(), true);
    let seg = dir.path().join("s.sdx");
    ok(&run(&["build", "--out", p(&seg), p(&input)]));
    let idx = dir.path().join("idx");
    ok(&run(&["insert", p(&idx), p(&input)]));
    let commands: Vec<Vec<&str>> = vec![
        vec!["plan", "--count", "1000000"],
        vec!["inspect", p(&seg)],
        vec!["inspect", "--json", p(&seg)],
        vec!["verify", p(&seg)],
        vec!["dump", p(&seg)],
        vec!["query", p(&seg), "--input", p(&input)],
        vec!["batch", p(&seg), "--queries", p(&input)],
        vec!["cluster", p(&seg)],
        vec!["stats", p(&idx)],
        vec!["dump-log", p(&idx)],
        vec!["bench", "generate", "--count", "100000"],
        vec!["fingerprint", "fixtures/corpus/pages"],
    ];
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    for args in commands {
        let mut child = simdex().args(&args).current_dir(root).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        drop(child.stdout.take()); // the reader is gone before the first line
        let out = child.wait_with_output().unwrap();
        let err = stderr(&out);
        assert!(!err.contains("panicked"), "simdex {args:?} panicked on a closed pipe:\n{err}");
        assert!(out.status.success(), "simdex {args:?}: exit {:?}\n{err}", out.status);
    }
}

/// The index pins the recipe of its first run (issue 10): a second run over a larger corpus
/// would learn another IDF table, and byte-identical pages would get fingerprints bits apart.
#[test]
fn dedup_index_pins_its_recipe_so_identical_pages_match_on_a_later_run() {
    let dir = tempfile::tempdir().unwrap();
    let pages = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/corpus/pages"));
    let mut names: Vec<String> = std::fs::read_dir(pages).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    let (first, second) = (dir.path().join("first"), dir.path().join("second"));
    std::fs::create_dir_all(&first).unwrap();
    std::fs::create_dir_all(&second).unwrap();
    // the first crawl: 23 pages; the second: those again and 60 others
    for (i, name) in names.iter().step_by(4).take(83).enumerate() {
        if i < 23 {
            std::fs::copy(pages.join(name), first.join(name)).unwrap();
        }
        std::fs::copy(pages.join(name), second.join(name)).unwrap();
    }
    let index = dir.path().join("index");
    let o = run(&["dedup", p(&first), "--index", p(&index)]);
    ok(&o);
    assert!(stdout(&o).contains("23 documents inserted"), "{}", stdout(&o));
    assert!(index.join("RECIPE").exists());
    let report = dir.path().join("r2.jsonl");
    let o = run(&["dedup", p(&second), "--index", p(&index), "--report", p(&report)]);
    ok(&o);
    let indexed: Vec<serde_json::Value> =
        std::fs::read_to_string(&report).unwrap().lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()).filter(|v| v["kind"] == "indexed").collect();
    let first_names: Vec<String> = std::fs::read_dir(&first).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    for name in &first_names {
        let record = indexed.iter().find(|v| v["member"].as_str().unwrap().ends_with(&format!("/{name}")));
        let record = record.unwrap_or_else(|| panic!("{name} was reported new on the second run"));
        assert!(record["matches"].as_array().unwrap().iter().any(|m| m["distance"] == 0 && m["fingerprint"] == record["fingerprint"]), "{record}");
    }
    // asking for another recipe is refused, naming both
    let o = run(&["dedup", p(&second), "--index", p(&index), "--no-idf"]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("the index's fingerprint recipe is `simdex-fp/2 features=w2") && e.contains("idf=-") && e.contains("was given"), "{e}");
    let o = run(&["dedup", p(&second), "--index", p(&index), "--features", "w3"]);
    assert!(!o.status.success() && stderr(&o).contains("features=w3"), "{}", stderr(&o));
    // re-learning is explicit, and says what it costs
    let before = std::fs::read(index.join("RECIPE")).unwrap();
    let o = run(&["dedup", p(&second), "--index", p(&index), "--relearn-idf"]);
    ok(&o);
    assert!(stderr(&o).contains("not comparable"), "{}", stderr(&o));
    assert_ne!(std::fs::read(index.join("RECIPE")).unwrap(), before);
}

/// Issue 10, ids end to end: `fingerprint --for-index` writes what `add` reads, with ids
/// hashed from names and the names written out; `query` and `batch` echo the queries' ids;
/// `--json` gives a record for a query without matches.
#[test]
fn document_ids_flow_from_fingerprint_through_add_to_query_and_batch() {
    let dir = tempfile::tempdir().unwrap();
    let pages = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/corpus/pages");
    let (fps, names, index) = (dir.path().join("fps.tsv"), dir.path().join("names.tsv"), dir.path().join("index"));
    let o = run(&["fingerprint", pages, "--for-index", p(&names)]);
    ok(&o);
    std::fs::write(&fps, &o.stdout).unwrap();
    let rows: Vec<(String, u64)> = stdout(&o).lines().map(|l| l.split_once('\t').unwrap()).map(|(f, i)| (f.to_owned(), i.parse().unwrap())).collect();
    let names: std::collections::HashMap<u64, String> =
        std::fs::read_to_string(&names).unwrap().lines().map(|l| l.split_once('\t').unwrap()).map(|(i, n)| (i.parse().unwrap(), n.to_owned())).collect();
    assert!(rows.len() > 300 && names.len() == rows.len());
    // the ids are the names' hashes, as the other CLI paths and Python make them
    let plain = stdout(&run(&["fingerprint", pages]));
    for line in plain.lines() {
        let (name, f) = line.rsplit_once('\t').unwrap();
        assert!(rows.iter().any(|(g, id)| g == f && names[id] == name), "{line}");
    }
    ok(&run(&["insert", p(&index), p(&fps)]));
    // every query finds its own document at distance 0, and its line starts with its id
    let out = stdout(&run(&["query", p(&index), "-k", "3", "--input", p(&fps)]));
    for (f, id) in &rows {
        assert!(out.lines().any(|l| l == format!("{id}\t{f}\t{f}\t0\t{id}")), "{f} {id}");
    }
    let batch = stdout(&run(&["batch", p(&index), "--queries", p(&fps), "-k", "3"]));
    let mut a: Vec<&str> = out.lines().collect();
    let mut b: Vec<&str> = batch.lines().collect();
    a.sort();
    a.dedup();
    b.sort();
    b.dedup();
    assert_eq!(a, b);
    // a query without matches still gets a JSON record, with its id
    let lonely = dir.path().join("lonely.tsv");
    std::fs::write(&lonely, "0000000000000000\t77\n").unwrap();
    for cmd in [vec!["query", p(&index), "--json", "--input", p(&lonely)], vec!["batch", p(&index), "--json", "--queries", p(&lonely)]] {
        let v: serde_json::Value = serde_json::from_str(stdout(&run(&cmd)).trim()).unwrap();
        assert_eq!(v, serde_json::json!({"query": "0000000000000000", "query_id": 77, "match": null, "distance": null, "doc_id": null}), "{cmd:?}");
    }
}

/// `batch --match-memory` and `cluster --pair-memory` small enough to spill many runs print
/// exactly what they print in memory, leave the spill directory empty, and name a spill
/// directory they cannot use.
#[test]
fn batch_and_cluster_spill_to_disk_with_the_same_output() {
    let dir = tempfile::tempdir().unwrap();
    let stored = dir.path().join("stored.txt");
    std::fs::write(&stored, stdout(&run(&["bench", "generate", "-n", "5000", "--clusters", "100", "--cluster-size", "12", "--flips", "2", "--with-ids"]))).unwrap();
    let queries = dir.path().join("q.txt");
    std::fs::write(&queries, stdout(&run(&["bench", "generate", "-n", "600", "--near", p(&stored), "--flips", "1"]))).unwrap();
    let seg = dir.path().join("s.sdx");
    ok(&run(&["build", "--out", p(&seg), p(&stored)]));
    let spill = dir.path().join("spill");
    std::fs::create_dir(&spill).unwrap();

    for json in [false, true] {
        let mut plain = vec!["batch", p(&seg), "--queries", p(&queries), "-k", "4"];
        if json {
            plain.push("--json");
        }
        let want = run(&plain);
        ok(&want);
        assert!(stdout(&want).lines().count() > 600);
        let mut small = plain.clone();
        small.extend(["--match-memory", "1K", "--spill-dir", p(&spill)]);
        let got = run(&small);
        ok(&got);
        assert_eq!(stdout(&got), stdout(&want));
        assert_eq!(std::fs::read_dir(&spill).unwrap().count(), 0);
    }
    let want = run(&["cluster", p(&seg), "-k", "3"]);
    ok(&want);
    assert!(stdout(&want).lines().count() >= 90);
    let got = run(&["cluster", p(&seg), "-k", "3", "--pair-memory", "2K", "--spill-dir", p(&spill)]);
    ok(&got);
    assert_eq!(stdout(&got), stdout(&want));
    assert_eq!(std::fs::read_dir(&spill).unwrap().count(), 0);

    // A spill directory under a regular file; a budget that is not a byte count.
    let o = run(&["cluster", p(&seg), "--pair-memory", "64", "--spill-dir", p(&stored)]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains(p(&stored)) && stderr(&o).contains("spill"), "{}", stderr(&o));
    let o = run(&["batch", p(&seg), "--queries", p(&queries), "--match-memory", "64", "--spill-dir", p(&stored)]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains(p(&stored)), "{}", stderr(&o));
    let o = run(&["batch", p(&seg), "--queries", p(&queries), "--match-memory", "lots"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not a byte count"), "{}", stderr(&o));
}
