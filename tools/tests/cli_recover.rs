//! `simdex verify DIR` and `simdex recover` on damaged segments, as an operator runs them:
//! verify prints no "ok" for a damaged file and says what recover can rebuild; recover then
//! rebuilds exactly that.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_simdex")).args(args).stdin(Stdio::null()).output().expect("run simdex")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "exit {:?}\nstdout: {}\nstderr: {}", o.status, stdout(o), String::from_utf8_lossy(&o.stderr));
    stdout(o)
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// An index of 3000 (fingerprint, id) pairs compacted into one segment; returns its path.
fn compacted_index(dir: &Path) -> (PathBuf, PathBuf) {
    let idx = dir.join("idx");
    let mut x = 99u64;
    let mut text = String::new();
    for i in 0..3000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        text.push_str(&format!("{x:016x}\t{}\n", 100 + i));
    }
    let input = dir.join("pairs.txt");
    std::fs::write(&input, text).unwrap();
    ok(&run(&["insert", p(&idx), p(&input)]));
    ok(&run(&["compact", p(&idx)]));
    let seg = std::fs::read_dir(&idx).unwrap().map(|e| e.unwrap().path()).find(|p| p.extension().is_some_and(|e| e == "sdx")).unwrap();
    (idx, seg)
}

#[test]
fn verify_says_what_recover_rebuilds_and_recover_rebuilds_it() {
    // (what, byte to flip: from the end when negative)
    for (what, at) in [("footer", -20i64), ("a block of table 0", 1024 + 1024 + 300)] {
        let dir = tempfile::tempdir().unwrap();
        let (idx, seg) = compacted_index(dir.path());
        let name = seg.file_name().unwrap().to_str().unwrap().to_string();
        let mut bytes = std::fs::read(&seg).unwrap();
        let at = if at < 0 { (bytes.len() as i64 + at) as usize } else { at as usize };
        bytes[at] ^= 0x10;
        std::fs::write(&seg, &bytes).unwrap();

        let out = run(&["verify", p(&idx)]);
        let text = stdout(&out);
        assert_eq!(out.status.code(), Some(1), "{what}: {text}");
        assert!(!text.lines().any(|l| l.contains(&name) && l.contains(": ok")), "{what}: no ok for the damaged file: {text}");
        assert!(text.contains(&format!("{name}: DAMAGED; `simdex recover` can rebuild 3000 of 3000 fingerprints")) && text.contains("with every document id"), "{what}: {text}");
        assert!(text.contains("simdex recover"), "{text}");

        let fixed = dir.path().join("fixed");
        let report = ok(&run(&["recover", p(&idx), "--out", p(&fixed), "--json"]));
        let report: serde_json::Value = serde_json::from_str(&report).unwrap();
        assert_eq!(report["segment_entries_lost"], 0, "{what}: {report}");
        assert_eq!(report["live_pairs"], 3000, "{what}: {report}");
        assert!(report["lost"].as_array().unwrap().is_empty(), "{what}: {report}");
        ok(&run(&["verify", p(&fixed)]));
        let a = ok(&run(&["dump", p(&seg_of(&fixed))]));
        assert_eq!(a.lines().filter(|l| !l.is_empty()).count(), 3000, "{what}");
    }
}

fn seg_of(idx: &Path) -> PathBuf {
    std::fs::read_dir(idx).unwrap().map(|e| e.unwrap().path()).find(|p| p.extension().is_some_and(|e| e == "sdx")).unwrap()
}

/// One flipped bit in a document-id page, as the fault review found it: recover prints one
/// LOST line for the page (not one per entry), counts the entries whose ids were lost and
/// that then merged (one page stored under 4 ids: equal fingerprints), and its summary adds
/// up to what went in. Verify prints each file's path joined to DIR, even given `DIR/`.
#[test]
fn recover_names_a_damaged_id_page_once_and_its_summary_adds_up() {
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("idx");
    let text: String = (0..1000u64).map(|i| format!("{:016x}\t{}\n", (i / 4 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15), 1000 + i)).collect();
    let input = dir.path().join("pairs.txt");
    std::fs::write(&input, text).unwrap();
    // (insert's batches of records are "synced groups", not the library's group commit)
    let inserted: serde_json::Value = serde_json::from_str(&ok(&run(&["insert", p(&idx), p(&input), "--json"]))).unwrap();
    assert!(inserted["synced_groups"].as_u64().is_some_and(|n| n >= 1) && inserted.get("group_commits").is_none(), "{inserted}");
    ok(&run(&["compact", p(&idx)]));
    let seg = seg_of(&idx);
    let mut bytes = std::fs::read(&seg).unwrap();
    // the id column's head, from the version-2 footer and directory (format-spec/segment.md)
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
    let dir_at = u64_at(bytes.len() - 32);
    let tables = u16::from_le_bytes(bytes[dir_at + 16..dir_at + 18].try_into().unwrap()) as usize;
    let ids_head = u64_at(dir_at + 24 + 40 * tables);
    // id page 1: entries 127..254
    bytes[ids_head + 1024 + 1024 + 40] ^= 0x01;
    std::fs::write(&seg, &bytes).unwrap();

    let listed = stdout(&run(&["verify", &format!("{}/", p(&idx))]));
    assert!(!listed.contains("//"), "paths are joined: {listed}");
    assert!(listed.contains("DAMAGED; `simdex recover` can rebuild 1000 of 1000 fingerprints (from tables 0, 1, 2, 3); 127 document ids are lost"), "{listed}");

    let fixed = dir.path().join("fixed");
    let text = ok(&run(&["recover", p(&idx), "--out", p(&fixed)]));
    let lost: Vec<&str> = text.lines().filter(|l| l.starts_with("LOST")).collect();
    assert_eq!(lost.len(), 2, "the page and the merge, one line each: {text}");
    assert!(lost.iter().all(|l| l.len() < 300), "{text}");
    assert!(lost[0].contains("the document ids of 127 entries (127..=253)"), "{text}");
    // 127 entries of 4 ids a fingerprint: 32 or 33 fingerprints, the rest merged
    let json: serde_json::Value = serde_json::from_str(&ok(&run(&["recover", p(&idx), "--out", p(&dir.path().join("again")), "--json"]))).unwrap();
    let n = |k: &str| json[k].as_u64().unwrap();
    assert_eq!((n("segment_entries"), n("segment_entries_lost"), n("document_ids_lost")), (1000, 0, 127), "{json}");
    assert!((94..=95).contains(&n("merged")), "{json}");
    assert_eq!(n("segment_entries") + n("log_inserts"), n("live_pairs") + n("pairs_deleted") + n("copies") + n("merged"), "{json}");
    assert!(text.contains(&format!("1000 pairs read (1000 segment entries, 0 logged inserts): 0 deleted, 0 copies of a pair read twice, {} merged", n("merged"))), "{text}");
    assert!(text.contains(&format!("{} live pairs written to", n("live_pairs"))), "{text}");
    let dumped = ok(&run(&["dump", p(&seg_of(&fixed))]));
    assert_eq!(dumped.lines().filter(|l| !l.is_empty()).count() as u64, n("live_pairs"));
}
