//! The index-directory subcommands as a user runs them: add, query, delete, stats, compact,
//! verify, dump-log, recover; bad input and damaged files.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::pairs;

fn simdex() -> Command {
    Command::new(env!("CARGO_BIN_EXE_simdex"))
}

fn run(args: &[&str]) -> Output {
    simdex().args(args).stdin(Stdio::null()).output().expect("run simdex")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "exit {:?}\nstdout: {}\nstderr: {}", o.status, stdout(o), stderr(o));
    stdout(o)
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exit code")
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn write_pairs(dir: &Path, name: &str, data: &[(u64, u64)]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, data.iter().map(|(f, i)| format!("{f:016x}\t{i}\n")).collect::<String>()).unwrap();
    path
}

fn log_file(idx: &Path) -> PathBuf {
    std::fs::read_dir(idx).unwrap().map(|e| e.unwrap().path()).find(|p| p.extension().is_some_and(|e| e == "wal")).unwrap()
}

#[test]
fn add_query_delete_compact_stats_verify() {
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("idx");
    let a = pairs(3000, 1);
    let b = pairs(2000, 2);
    ok(&run(&["insert", p(&idx), p(&write_pairs(dir.path(), "a.txt", &a))]));

    // The same subcommand answers from a directory.
    let q = format!("{:016x}", a[10].0 ^ 1);
    assert_eq!(ok(&run(&["query", p(&idx), &q])), format!("{q}\t{:016x}\t1\t{}\n", a[10].0, a[10].1));

    ok(&run(&["delete", p(&idx), p(&write_pairs(dir.path(), "d.txt", &a[10..11]))]));
    assert_eq!(ok(&run(&["query", p(&idx), &q])), "");
    ok(&run(&["insert", p(&idx), p(&write_pairs(dir.path(), "b.txt", &b))]));
    assert_eq!(ok(&run(&["query", p(&idx), &q])), "");

    // Each command flushed its memtable when it closed the index, and the logs hold nothing
    // to replay. Merges run in the background while an index is open, never in a close:
    // the second add's flush joins the first segment when its maintenance got to it (the
    // small tiers absorb it, and that merge of every live segment applies the delete's
    // tombstone file and drops it), else it waits for the next writer's.
    let stats: serde_json::Value = serde_json::from_str(&ok(&run(&["stats", p(&idx), "--json"]))).unwrap();
    assert_eq!(stats["memtable"]["inserts"], 0);
    assert_eq!(stats["memtable"]["deletes"], 0);
    let merged = stats["segments"].as_array().unwrap().len() == 1;
    if merged {
        assert_eq!(stats["segment_fingerprints"], 4999);
        assert_eq!((stats["tombstone_files"].as_u64(), stats["tombstones"].as_u64()), (Some(0), Some(0)));
    } else {
        assert_eq!(stats["segments"].as_array().unwrap().len(), 2, "{stats}");
        assert_eq!(stats["segment_fingerprints"], 5000, "the deleted pair stays in its segment, hidden by the tombstone file");
        assert_eq!((stats["tombstone_files"].as_u64(), stats["tombstones"].as_u64()), (Some(1), Some(1)));
    }
    assert!(stats["logs"].as_array().unwrap().iter().all(|l| l["operations"] == 0), "{stats}");

    let out = run(&["compact", p(&idx)]);
    ok(&out);
    let stats: serde_json::Value = serde_json::from_str(&ok(&run(&["stats", p(&idx), "--json"]))).unwrap();
    assert_eq!(stats["segments"].as_array().unwrap().len(), 1);
    assert_eq!(stats["segment_fingerprints"], 4999);
    assert_eq!(stats["tombstone_files"], 0);
    assert_eq!(ok(&run(&["query", p(&idx), &q])), "");
    let q2 = format!("{:016x}", b[5].0);
    assert!(ok(&run(&["query", p(&idx), "--json", &q2])).contains(&format!("\"doc_id\":{}", b[5].1)));

    let v = ok(&run(&["verify", p(&idx)]));
    assert!(v.contains("ok (4 files checked)") && v.contains(".sdi: ok (document ids of segment"), "{v}");
}

/// Each `simdex delete` now ends in a tombstone file of its own (close flushes), whose
/// sequence number is newer than every segment's when nothing was added after it. A full
/// compaction applies it, and then drops it: a merge of every live segment has applied
/// every tombstone file there was (`install` in src/engine/flush.rs), so none outlives it.
#[test]
fn compact_drops_a_tombstone_file_newer_than_every_segment() {
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("idx");
    let a = pairs(3000, 1);
    ok(&run(&["insert", p(&idx), p(&write_pairs(dir.path(), "a.txt", &a))]));
    ok(&run(&["delete", p(&idx), p(&write_pairs(dir.path(), "d.txt", &a[10..11]))]));
    ok(&run(&["compact", p(&idx)]));
    let stats: serde_json::Value = serde_json::from_str(&ok(&run(&["stats", p(&idx), "--json"]))).unwrap();
    assert_eq!(stats["segment_fingerprints"], 2999);
    assert_eq!(stats["tombstone_files"], 0);
}

#[test]
fn add_without_ids_numbers_them_and_bad_input_names_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("idx");
    let input = dir.path().join("fp.txt");
    std::fs::write(&input, "0123456789abcdef\nfedcba9876543210\n").unwrap();
    ok(&run(&["insert", p(&idx), p(&input)]));
    assert_eq!(ok(&run(&["query", p(&idx), "-k", "0", "fedcba9876543210"])), "fedcba9876543210\tfedcba9876543210\t0\t2\n");

    std::fs::write(&input, "0123456789abcdef\nnot-a-fingerprint\n").unwrap();
    let out = run(&["insert", p(&idx), p(&input)]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("line 2"), "{}", stderr(&out));

    let out = run(&["delete", p(&idx), p(&dir.path().join("missing.txt"))]);
    assert_eq!(code(&out), 2);
    std::fs::write(&input, "0123456789abcdef\n").unwrap();
    let out = run(&["delete", p(&idx), p(&input)]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("pairs"), "{}", stderr(&out));

    let out = run(&["stats", p(&dir.path().join("nothing"))]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("no simdex index"), "{}", stderr(&out));
    // Up to k = 8 an index answers (multi-probe); above, only with a full scan.
    let out = run(&["query", p(&idx), "-k", "5", "0123456789abcdef"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = run(&["query", p(&idx), "-k", "9", "0123456789abcdef"]);
    assert_eq!(code(&out), 2);
}

#[test]
fn damaged_log_is_reported_by_verify_and_dump_log_and_recover_salvages_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("idx");
    // A writer killed while its pipe was open leaves its acknowledged records in the log:
    // three synced groups (each burst fits one atomic pipe write, so one read) of 150
    // operations each.
    let mut add = common::streaming::StreamingAdd::spawn(&idx, &[]);
    for seed in 1..=3 {
        add.send(pairs(150, seed).iter().map(|(f, i)| format!("{f:016x}\t{i}\n")).collect::<String>().as_bytes());
        add.wait_acked(150 * seed);
    }
    add.kill();
    let log = log_file(&idx);
    let dump = ok(&run(&["dump-log", p(&idx)]));
    assert_eq!(dump.lines().filter(|l| l.contains(" insert 150")).count(), 3, "{dump}");

    // Damage the middle record's payload.
    let mut bytes = std::fs::read(&log).unwrap();
    let middle = 32 + (bytes.len() - 32) / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&log, &bytes).unwrap();

    let out = run(&["verify", p(&idx)]);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    assert!(stdout(&out).contains("checksum mismatch"), "{}", stdout(&out));
    let out = run(&["query", p(&idx), "0123456789abcdef"]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("simdex recover"), "{}", stderr(&out));
    let out = run(&["dump-log", p(&idx)]);
    assert_eq!(code(&out), 1);
    assert!(stdout(&out).contains("DAMAGE"), "{}", stdout(&out));

    let fixed = dir.path().join("fixed");
    let report = ok(&run(&["recover", p(&idx), "--out", p(&fixed)]));
    assert!(report.contains("LOST"), "{report}");
    assert!(report.contains("150 log operations"), "{report}");
    assert!(report.contains("300 live pairs"), "{report}");
    let stats: serde_json::Value = serde_json::from_str(&ok(&run(&["stats", p(&fixed), "--json"]))).unwrap();
    assert_eq!(stats["segment_fingerprints"], 300);
    ok(&run(&["verify", p(&fixed)]));
}

#[test]
fn verify_names_a_damaged_segment_and_leaves_unknown_files_alone() {
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("idx");
    ok(&run(&["insert", p(&idx), p(&write_pairs(dir.path(), "a.txt", &pairs(3000, 4)))]));
    ok(&run(&["compact", p(&idx)]));
    std::fs::write(idx.join("README.txt"), "mine").unwrap();
    let out = ok(&run(&["verify", p(&idx)]));
    assert!(out.contains("README.txt: not a simdex file"), "{out}");
    let seg = std::fs::read_dir(&idx).unwrap().map(|e| e.unwrap().path()).find(|p| p.extension().is_some_and(|e| e == "sdx")).unwrap();
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[5000] ^= 1;
    std::fs::write(&seg, &bytes).unwrap();
    let out = run(&["verify", p(&idx), "--json"]);
    assert_eq!(code(&out), 1);
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["clean"], false);
    assert!(v["problems"][0]["file"].as_str().unwrap().starts_with("seg-"), "{v}");
    assert!(idx.join("README.txt").exists());
}

/// `inspect` on an index directory shows every live segment, the memtable and the logs
/// (issue 24, item 2): checked against `stats --json` and the input's count.
#[test]
fn inspect_on_an_index_directory_shows_every_live_segment_and_the_memtable() {
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("idx");
    // a segment (the first 3,000, compacted), then a burst of 1,500 that a bounded close may
    // leave in its log (replayed as a frozen memtable by a later open) or flush: either way
    // every fingerprint must be shown somewhere, and there is a segment to plot
    let data = pairs(4500, 7);
    let first = write_pairs(dir.path(), "first.txt", &data[..3000]);
    ok(&run(&["insert", p(&idx), p(&first), "--memtable-ops", "1000"]));
    // compact's summary counts what the logs held (replayed as frozen memtables) as memtable
    // operations: with the segments' entries, all 3,000
    let before: serde_json::Value = serde_json::from_str(&ok(&run(&["stats", p(&idx), "--json"]))).unwrap();
    let in_segments: u64 = before["segments"].as_array().unwrap().iter().map(|s| s["entries"].as_u64().unwrap()).sum();
    let out = run(&["compact", p(&idx)]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let summary = String::from_utf8_lossy(&out.stderr).into_owned();
    let ops: u64 = summary.split(" + ").nth(1).and_then(|r| r.split(' ').next()).and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{summary}"));
    assert_eq!(in_segments + ops, 3000, "{summary}");
    let burst = write_pairs(dir.path(), "burst.txt", &data[3000..]);
    ok(&run(&["insert", p(&idx), p(&burst), "--memtable-ops", "1000"]));
    let stats: serde_json::Value = serde_json::from_str(&ok(&run(&["stats", p(&idx), "--json"]))).unwrap();
    let svg = dir.path().join("h.svg");
    let report: serde_json::Value = serde_json::from_str(&ok(&run(&["inspect", p(&idx), "--json", "--plot", p(&svg)]))).unwrap();
    let segments = report["segments"].as_array().unwrap();
    assert_eq!(segments.len(), stats["segments"].as_array().unwrap().len(), "{report}");
    let names: Vec<&str> = stats["segments"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    for s in segments {
        let file = s["file"].as_str().unwrap();
        assert!(names.iter().any(|n| file.ends_with(n)), "{file} is a live segment of {names:?}");
    }
    let stored: u64 = segments.iter().map(|s| s["count"].as_u64().unwrap()).sum();
    let in_memtable = report["memtable"]["inserts"].as_u64().unwrap();
    let in_frozen = report["memtable"]["frozen_ops"].as_u64().unwrap();
    assert_eq!(stored + in_memtable + in_frozen, data.len() as u64, "every fingerprint is in a segment or a memtable: {report}");
    assert_eq!(in_memtable, stats["memtable"]["inserts"].as_u64().unwrap());
    assert_eq!(in_frozen, stats["frozen"]["operations"].as_u64().unwrap());
    let picture = std::fs::read_to_string(&svg).unwrap();
    assert!(picture.contains("seg-"), "one curve per segment, labelled by its file");
    let text = ok(&run(&["inspect", p(&idx), "--no-histogram"]));
    assert!(text.contains("memtable:") && text.matches("design:").count() == segments.len(), "{text}");
}
