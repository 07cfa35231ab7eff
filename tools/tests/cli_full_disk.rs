//! `simdex insert` on a real full disk (a tmpfs the test mounts; skipped with a message where
//! mounting is not allowed): the add that meets the full disk exits non-zero naming the file,
//! later adds on the still-full disk do not pile up logs, no temporary file stays, and once
//! the disk grows every fingerprint of every acknowledged add is found.

#[path = "../../tests/it/tmpfs.rs"]
mod tmpfs;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn simdex(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_simdex")).args(args).output().expect("run simdex")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn names_in(dir: &Path, pred: impl Fn(&str) -> bool) -> Vec<String> {
    std::fs::read_dir(dir).expect("list").map(|e| e.expect("entry").file_name().to_string_lossy().into_owned()).filter(|n| pred(n)).collect()
}

#[test]
fn add_on_a_full_disk_fails_by_name_piles_up_no_logs_and_loses_nothing_acknowledged() {
    // Room for the first memtable's log (1,048,576 operations) but not for its segment too.
    let Some(disk) = tmpfs::Tmpfs::mount_or_skip(40 << 20) else { return };
    let inputs = tempfile::tempdir().expect("temp dir");
    let idx = disk.path().join("idx");
    // Without --no-space-check, add sees at once that a memtable's log and segment do not
    // fit, says so, and creates nothing.
    let probe = inputs.path().join("probe.txt");
    std::fs::write(&probe, "0123456789abcdef\n").expect("write input");
    let out = simdex(&["add".as_ref(), idx.as_os_str(), probe.as_os_str()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("MiB free") && err.contains("free space first"), "{err}");
    assert!(!idx.exists(), "a refused add creates nothing");
    // The rest runs into the full disk on purpose.
    let mut acknowledged: Vec<PathBuf> = Vec::new();
    let mut failures = Vec::new();
    let mut logs_after_failures = Vec::new();
    for n in 1..=12u32 {
        let input = inputs.path().join(format!("b{n}.txt"));
        let out = simdex(&["bench".as_ref(), "generate".as_ref(), "--count".as_ref(), "250000".as_ref(), "--seed".as_ref(), n.to_string().as_ref()]);
        std::fs::write(&input, &out.stdout).expect("write input");
        let out = simdex(&["add".as_ref(), "--no-space-check".as_ref(), idx.as_os_str(), input.as_os_str()]);
        if out.status.success() {
            assert!(failures.is_empty(), "add {n} succeeded on the full disk after a failure: {}", text(&out.stderr));
            acknowledged.push(input);
        } else {
            let stderr = text(&out.stderr);
            assert!(stderr.contains("No space left on device"), "add {n}: the cause is named: {stderr}");
            assert!(stderr.contains(&idx.display().to_string()), "add {n}: the file is named: {stderr}");
            failures.push(n);
            logs_after_failures.push(names_in(&idx, |n| n.starts_with("log-")).len());
        }
    }
    assert!(failures.len() >= 3, "the disk filled, and later adds met it too: failures at adds {failures:?}");
    // The log of the memtable whose flush failed and the active one; never one more per add.
    assert!(logs_after_failures.iter().all(|&n| n <= 2), "logs after each failed add: {logs_after_failures:?}");
    assert_eq!(names_in(&idx, |n| n.ends_with(".tmp")), Vec::<String>::new(), "no temporary file stays");

    // Space is back: the next add works, and every acknowledged fingerprint is there.
    disk.resize(512 << 20);
    let last = inputs.path().join("b-last.txt");
    let out = simdex(&["bench".as_ref(), "generate".as_ref(), "--count".as_ref(), "1000".as_ref(), "--seed".as_ref(), "99".as_ref()]);
    std::fs::write(&last, &out.stdout).expect("write input");
    let out = simdex(&["add".as_ref(), "--no-space-check".as_ref(), idx.as_os_str(), last.as_os_str()]);
    assert!(out.status.success(), "add once space is back: {}", text(&out.stderr));
    acknowledged.push(last);
    for input in &acknowledged {
        let want: BTreeSet<String> = std::fs::read_to_string(input).expect("input").lines().map(|l| l.trim().to_owned()).collect();
        let out = simdex(&["query".as_ref(), idx.as_os_str(), "-k".as_ref(), "0".as_ref(), "--input".as_ref(), input.as_os_str()]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let found: BTreeSet<String> = text(&out.stdout).lines().filter_map(|l| l.split('\t').next()).map(str::to_owned).collect();
        assert_eq!(found.len(), want.len(), "{}: every acknowledged fingerprint is found", input.display());
        assert!(found == want, "{}: every acknowledged fingerprint is found", input.display());
    }
    eprintln!("full disk: {} adds acknowledged before it filled, failures at adds {failures:?}, logs after each failure {logs_after_failures:?}", acknowledged.len() - 1);
}
