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
