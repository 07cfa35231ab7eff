//! `simdex insert DIR -` at the end of a pipe that stays open: records are acknowledged as they
//! arrive (a line or record split across writes waits for its end), acknowledged records
//! are visible to read-only opens at once and survive kill -9; a bad record mid-stream is
//! named and what came before it is kept. Text and binary, with and without ids.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::pairs;
use common::streaming::StreamingAdd;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_simdex")).args(args).stdin(Stdio::null()).output().expect("run simdex")
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "exit {:?}\nstdout: {}\nstderr: {}", o.status, String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[derive(Clone, Copy)]
enum Format {
    Text,
    Binary,
}

impl Format {
    fn args(self, ids: bool) -> Vec<&'static str> {
        match (self, ids) {
            (Format::Text, _) => vec![],
            (Format::Binary, false) => vec!["--binary"],
            (Format::Binary, true) => vec!["--binary", "--with-ids"],
        }
    }

    /// The encoding of each pair (the id only when `ids`).
    fn encode(self, data: &[(u64, u64)], ids: bool) -> Vec<Vec<u8>> {
        data.iter()
            .map(|&(fp, id)| match (self, ids) {
                (Format::Text, true) => format!("{fp:016x}\t{id}\n").into_bytes(),
                (Format::Text, false) => format!("{fp:016x}\n").into_bytes(),
                (Format::Binary, true) => [fp.to_le_bytes(), id.to_le_bytes()].concat(),
                (Format::Binary, false) => fp.to_le_bytes().to_vec(),
            })
            .collect()
    }
}

/// Every live pair of the index, read back by a read-only query of each fingerprint.
fn stored(idx: &Path, fps: &[u64]) -> BTreeSet<(u64, u64)> {
    let queries = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(queries.path(), fps.iter().map(|f| format!("{f:016x}\n")).collect::<String>()).unwrap();
    ok(&run(&["query", p(idx), "-k", "0", "--input", p(queries.path())]))
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (u64::from_str_radix(f[1], 16).unwrap(), f[3].parse().unwrap())
        })
        .collect()
}

/// Fingerprints a read-only open of `idx` counts (segments and logs: the logs replay into
/// the active memtable and, a log or 2^20 operations each, frozen ones; this stream has no
/// deletes, so the frozen ones' operations are inserts).
fn visible(idx: &Path) -> u64 {
    let stats: serde_json::Value = serde_json::from_str(&ok(&run(&["stats", p(idx), "--json"]))).unwrap();
    stats["segment_fingerprints"].as_u64().unwrap() + stats["memtable"]["inserts"].as_u64().unwrap() + stats["frozen"]["operations"].as_u64().unwrap()
}

/// Streams `data` through an open pipe in bursts that cut records anywhere, waits after
/// each burst until every complete record is acknowledged (and checks a read-only open
/// sees them), then kills the writer with SIGKILL: every acknowledged pair must be in the
/// index, and nothing else.
fn acknowledged_records_survive_kill_9(format: Format, ids: bool) {
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("idx");
    let data = pairs(700, 9);
    let records = format.encode(&data, ids);
    let bytes: Vec<u8> = records.concat();
    // Record i ends at ends[i].
    let ends: Vec<usize> = records.iter().scan(0, |end, r| Some(*end + r.len()).inspect(|e| *end = *e)).collect();
    let mut args = format.args(ids);
    // Small memtables: flushes (and a compaction) happen while the stream runs.
    args.extend(["--memtable-ops", "100"]);
    let mut add = StreamingAdd::spawn(&idx, &args);
    let mut sent = 0;
    for (burst, cut) in [5usize, 6, 333, 2047, 2048, 4000, 7777, bytes.len() - 3, bytes.len()].into_iter().enumerate() {
        let cut = cut.clamp(sent, bytes.len());
        add.send(&bytes[sent..cut]);
        sent = cut;
        let complete = ends.iter().take_while(|&&e| e <= sent).count() as u64;
        if complete > add.acked {
            add.wait_acked(complete);
        }
        if burst % 3 == 2 {
            assert_eq!(visible(&idx), complete, "a read-only open sees every acknowledged record at once");
        }
    }
    assert_eq!(add.acked, data.len() as u64);
    add.kill();
    // Without ids, each record's id is its sequence number (1, 2, ... in a new index).
    let want: BTreeSet<(u64, u64)> = data.iter().enumerate().map(|(i, &(fp, id))| (fp, if ids { id } else { i as u64 + 1 })).collect();
    let fps: Vec<u64> = data.iter().map(|d| d.0).collect();
    assert_eq!(stored(&idx, &fps), want);
    assert_eq!(visible(&idx), data.len() as u64, "nothing but the acknowledged records");
    ok(&run(&["verify", p(&idx)]));
}

#[test]
fn text_with_ids_from_an_open_pipe_is_acknowledged_as_it_comes_and_survives_kill_9() {
    acknowledged_records_survive_kill_9(Format::Text, true);
}

#[test]
fn text_without_ids_from_an_open_pipe_is_acknowledged_as_it_comes_and_survives_kill_9() {
    acknowledged_records_survive_kill_9(Format::Text, false);
}

#[test]
fn binary_with_ids_from_an_open_pipe_is_acknowledged_as_it_comes_and_survives_kill_9() {
    acknowledged_records_survive_kill_9(Format::Binary, true);
}

#[test]
fn binary_without_ids_from_an_open_pipe_is_acknowledged_as_it_comes_and_survives_kill_9() {
    acknowledged_records_survive_kill_9(Format::Binary, false);
}

#[test]
fn a_bad_line_mid_stream_is_named_and_the_records_before_it_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("idx");
    let data = pairs(40, 3);
    let lines = Format::Text.encode(&data, true);
    let mut add = StreamingAdd::spawn(&idx, &[]);
    add.send(&lines[..20].concat());
    add.wait_acked(20);
    // Five more good lines, a bad one (line 26), and good lines after it.
    let mut rest = lines[20..25].concat();
    rest.extend_from_slice(b"0123456789abcdeZ\t7\n");
    rest.extend_from_slice(&lines[25..].concat());
    add.send(&rest);
    let (code, stderr) = add.finish();
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("<stdin>: line 26: fingerprint \"0123456789abcdeZ\""), "{stderr}");
    assert!(stderr.contains("25 records were acknowledged before it"), "{stderr}");
    assert!(stderr.contains("through line 25"), "{stderr}");
    let fps: Vec<u64> = data.iter().map(|d| d.0).collect();
    assert_eq!(stored(&idx, &fps), data[..25].iter().copied().collect());
}

#[test]
fn a_binary_stream_that_ends_inside_a_record_names_the_offset_and_keeps_the_whole_records() {
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("idx");
    let data = pairs(3, 5);
    let mut bytes = Format::Binary.encode(&data, true).concat();
    bytes.extend_from_slice(&[1, 2, 3, 4, 5]);
    let mut add = StreamingAdd::spawn(&idx, &["--binary", "--with-ids"]);
    add.send(&bytes);
    let (code, stderr) = add.finish();
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("truncated at byte offset 48"), "{stderr}");
    assert!(stderr.contains("3 records were acknowledged before it"), "{stderr}");
    let fps: Vec<u64> = data.iter().map(|d| d.0).collect();
    assert_eq!(stored(&idx, &fps), data.iter().copied().collect());
}
