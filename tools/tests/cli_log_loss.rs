//! Issue 23, item 1, as an operator meets it: an index whose newest log was cut at a record
//! boundary (a bad copy, a restore) is reported by `verify` (non-zero), refused by `query`
//! and `add` with the count, salvaged by `recover` with the exact count, and opened past by
//! `add --log-recovery point-in-time`, whose new document ids never repeat a lost one.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use simdex::{Index, IndexOptions};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_simdex")).args(args).stdin(Stdio::null()).output().expect("run simdex")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// One insert record: 24 header bytes, one 16-byte pair, 4 end bytes (`format-spec/log.md`).
const RECORD: u64 = 44;
const HEADER: u64 = 32;

#[test]
fn a_log_cut_at_a_record_boundary_is_never_silent() {
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("idx");
    // 1000 acknowledged inserts left in the log by a writer that closed without flushing.
    let index = Index::open(&idx, IndexOptions::default().with_flush_on_close(false).with_background(false)).unwrap();
    for i in 1..=1000u64 {
        index.insert(i.wrapping_mul(0x9e37_79b9_7f4a_7c15), i).unwrap();
    }
    index.close().unwrap();
    let log = std::fs::read_dir(&idx).unwrap().map(|e| e.unwrap().path()).find(|p| p.extension().is_some_and(|e| e == "wal")).unwrap();
    assert_eq!(std::fs::metadata(&log).unwrap().len(), HEADER + 1000 * RECORD);
    // `truncate -s` to the end of record 700.
    std::fs::OpenOptions::new().write(true).open(&log).unwrap().set_len(HEADER + 700 * RECORD).unwrap();

    let verify = run(&["verify", p(&idx)]);
    assert!(!verify.status.success(), "{}", text(&verify));
    assert!(text(&verify).contains("300 acknowledged operations (sequence numbers 701..=1000) are lost"), "{}", text(&verify));

    let query = run(&["query", p(&idx), "00000000000000ff"]);
    assert!(!query.status.success() && text(&query).contains("300 acknowledged operations in all"), "{}", text(&query));

    let more = dir.path().join("more.txt");
    std::fs::write(&more, "00000000000000ff\n").unwrap();
    let refused = run(&["insert", p(&idx), p(&more)]);
    assert!(!refused.status.success() && text(&refused).contains("--log-recovery point-in-time"), "{}", text(&refused));

    let out = dir.path().join("rec");
    let recover = run(&["recover", p(&idx), "--out", p(&out), "--json"]);
    assert!(recover.status.success(), "{}", text(&recover));
    let report: serde_json::Value = serde_json::from_slice(&recover.stdout).unwrap();
    assert_eq!(
        (report["log_operations"].as_u64(), report["log_operations_lost"].as_u64(), report["log_operations_possibly_lost"].as_u64()),
        (Some(700), Some(300), Some(0)),
        "{report}"
    );

    // Opened past the loss: the new document (no id given) gets an id no lost one had.
    let added = run(&["insert", p(&idx), p(&more), "--log-recovery", "point-in-time", "--json"]);
    assert!(added.status.success(), "{}", text(&added));
    assert!(String::from_utf8_lossy(&added.stderr).contains("300 acknowledged operations"), "{}", text(&added));
    let summary: serde_json::Value = serde_json::from_slice(&added.stdout).unwrap();
    assert_eq!(summary["first_seq"].as_u64(), Some(1001), "{summary}");
    // ... and the index is whole again.
    let verify = run(&["verify", p(&idx)]);
    assert!(verify.status.success(), "{}", text(&verify));
    let reader = Index::open_read_only(&idx, IndexOptions::default()).unwrap();
    let ids: Vec<u64> = reader.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>().into_iter().map(|(_, id)| id).collect();
    assert_eq!(ids.len(), 701);
    assert_eq!(ids.iter().filter(|&&id| id > 700).copied().collect::<Vec<_>>(), vec![1001]);
}
