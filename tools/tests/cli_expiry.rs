//! Issue 36 from the command line: an index created with `--expire-after` forgets what is
//! older than its window, read from the system clock through the C library (checked under
//! libfaketime, `apt-get install faketime`: the test says so and skips that part when it is
//! missing); bad windows are refused by name with nothing written; a directory of other
//! files is refused by `add` and `serve --check` unless asked.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::pairs;

fn simdex(faked: Option<&str>) -> Command {
    match faked {
        Some(at) => {
            let mut c = Command::new("faketime");
            c.arg("-f").arg(at).arg(env!("CARGO_BIN_EXE_simdex"));
            c
        }
        None => Command::new(env!("CARGO_BIN_EXE_simdex")),
    }
}

fn run(faked: Option<&str>, args: &[&str]) -> Output {
    simdex(faked).args(args).stdin(Stdio::null()).output().expect("run simdex")
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "exit {:?}\nstdout: {}\nstderr: {}", o.status, String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn faketime_available() -> bool {
    Command::new("faketime").arg("-f").arg("@2027-01-01 00:00:00").arg("true").status().is_ok_and(|s| s.success())
}

#[test]
fn a_window_forgets_old_fingerprints_by_the_faked_system_clock() {
    if !faketime_available() {
        eprintln!("SKIPPED: faketime is not installed (apt-get install -y faketime)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("news.idx");
    let old = pairs(500, 1);
    let new = pairs(500, 2);
    let write = |name: &str, data: &[(u64, u64)]| {
        let path = dir.path().join(name);
        std::fs::write(&path, data.iter().map(|(f, i)| format!("{f:016x}\t{i}\n")).collect::<String>()).unwrap();
        path
    };
    let (old_file, new_file) = (write("old.txt", &old), write("new.txt", &new));
    // 30 days with 3d18h slices: stored on Jan 1, still found on Jan 31, gone by Feb 4 (older
    // than 30d + 3d18h); the second batch, stored Jan 20, is found on Feb 4.
    ok(&run(Some("@2027-01-01 10:00:00"), &["insert", p(&idx), p(&old_file), "--expire-after", "30d"]));
    ok(&run(Some("@2027-01-20 10:00:00"), &["insert", p(&idx), p(&new_file)]));
    let query = |at: &str, fp: u64| ok(&run(Some(at), &["query", p(&idx), "-k", "0", &format!("{fp:016x}")]));
    assert!(!query("@2027-01-31 10:00:00", old[7].0).is_empty(), "30 days old: within the window");
    assert!(query("@2027-02-04 16:00:01", old[7].0).is_empty(), "older than 30d + 3d18h");
    assert!(!query("@2027-02-04 16:00:01", new[7].0).is_empty());
    let stats: serde_json::Value = serde_json::from_str(&ok(&run(Some("@2027-02-04 16:00:01"), &["stats", p(&idx), "--json"]))).unwrap();
    assert_eq!(stats["expiry"]["window_secs"], 30 * 86_400);
    assert_eq!(stats["expiry"]["granularity_secs"], 324_000);
    // the oldest live slice is the second batch's: slices of 3d18h from 1970 on, Jan 20 10:00
    // lies in the one from Jan 17 00:00 (5556 * 324000 s)
    assert_eq!(stats["expiry"]["oldest_live_secs"], 5556 * 324_000);
    let text = ok(&run(Some("@2027-02-04 16:00:01"), &["stats", p(&idx)]));
    assert!(text.contains("expiry: after 30d (granularity 3d18h); oldest live slice from 2027-01-17 00:00:00 UTC"), "{text}");
    let inspect = ok(&run(Some("@2027-02-04 16:00:01"), &["inspect", p(&idx)]));
    assert!(inspect.contains("expiry:          after 30d"), "{inspect}");
    // compaction drops the expired segment whole
    assert_eq!(stats["segments"].as_array().unwrap().len(), 2);
    ok(&run(Some("@2027-02-04 16:00:01"), &["compact", p(&idx)]));
    let stats: serde_json::Value = serde_json::from_str(&ok(&run(Some("@2027-02-04 16:00:01"), &["stats", p(&idx), "--json"]))).unwrap();
    assert_eq!(stats["segment_fingerprints"], 500);
    // a clock set back: nothing comes back that compaction dropped, nothing else expires
    assert!(!query("@2026-06-01 00:00:00", new[7].0).is_empty());
    // another window on the existing index is refused by name
    let o = run(Some("@2027-02-05 00:00:00"), &["insert", p(&idx), p(&new_file), "--expire-after", "7d"]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("30d"), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn bad_windows_are_refused_by_name_with_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("fps.txt");
    std::fs::write(&input, "0123456789abcdef\t1\n").unwrap();
    for bad in ["30x", "0d", "-1d"] {
        let idx = dir.path().join(format!("idx-{bad}"));
        let o = run(None, &["insert", p(&idx), p(&input), &format!("--expire-after={bad}")]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains("--expire-after") && err.contains(&format!("\"{bad}\"")), "{bad}: {err}");
        assert!(!idx.exists(), "{bad}: nothing written");
    }
}

#[test]
fn a_directory_of_other_files_is_refused_by_add_and_serve_check() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::write(home.join("notes.txt"), "mine").unwrap();
    let input = dir.path().join("fps.txt");
    std::fs::write(&input, "0123456789abcdef\t1\n").unwrap();
    let listing = || {
        let mut v: Vec<String> = std::fs::read_dir(&home).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        v.sort();
        v
    };
    for args in [vec!["insert", p(&home), p(&input)], vec!["serve", p(&home), "--listen", "127.0.0.1:0", "--check"]] {
        let o = run(None, &args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("not a simdex index") && err.contains("notes.txt") && err.contains("--create-in-nonempty"), "{err}");
        assert_eq!(listing(), vec!["notes.txt"], "{args:?} wrote nothing");
    }
    ok(&run(None, &["insert", p(&home), p(&input), "--create-in-nonempty"]));
    assert!(listing().contains(&"MANIFEST".to_string()));
    ok(&run(None, &["serve", p(&home), "--listen", "127.0.0.1:0", "--check"]));
}
