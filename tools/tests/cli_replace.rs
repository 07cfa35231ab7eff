//! `simdex replace`: pages re-crawled as (fingerprint, id) pairs replace what each id held,
//! and the process killed (SIGKILL) at spread-out instants of a real run leaves every id with
//! its old fingerprint or its new one, never both or neither; a rerun finishes the job. The
//! oracle: the pairs written, read back through the library.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use simdex::{Index, IndexOptions};

fn run(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_simdex")).args(args).stdin(Stdio::null()).output().expect("run simdex")
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// id -> the fingerprints stored under it.
fn held(idx: &Path) -> BTreeMap<u64, Vec<u64>> {
    let index = Index::open_read_only(idx, IndexOptions::default()).unwrap();
    let mut out: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for e in index.live_entries().unwrap() {
        out.entry(e.doc_id).or_default().push(e.fingerprint);
    }
    out
}

/// The index's log files and their sizes.
fn logs(idx: &Path) -> BTreeMap<String, u64> {
    let names = std::fs::read_dir(idx).unwrap().filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned());
    names.filter(|n| n.starts_with("log-")).map(|n| (n.clone(), std::fs::metadata(idx.join(&n)).map_or(0, |m| m.len()))).collect()
}

/// True once `grown` bytes were appended to the logs since `before` (a log that went, flushed
/// away, counts nothing; a new one all its bytes).
fn progressed(before: &BTreeMap<String, u64>, now: &BTreeMap<String, u64>, grown: u64) -> bool {
    now.iter().map(|(name, &len)| len.saturating_sub(before.get(name).copied().unwrap_or(0))).sum::<u64>() >= grown
}

fn pairs_file(path: &Path, pairs: &[(u64, u64)]) {
    std::fs::write(path, pairs.iter().map(|(fp, id)| format!("{fp:016x}\t{id}\n")).collect::<String>()).unwrap();
}

#[test]
fn a_killed_replace_leaves_each_id_its_old_or_new_fingerprint_and_a_rerun_finishes() {
    const IDS: u64 = 60_000;
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("idx");
    let fp = |id: u64, v: u64| (id.wrapping_add(1) ^ (v << 40)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let old: Vec<(u64, u64)> = (0..IDS).map(|id| (fp(id, 0), id)).collect();
    pairs_file(&dir.path().join("old.txt"), &old);
    let out = run(&["insert", p(&idx), p(&dir.path().join("old.txt"))]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut killed = 0;
    for (round, grown) in [16u64 << 10, 64 << 10, 128 << 10, 256 << 10, 512 << 10].into_iter().enumerate() {
        let v = round as u64 + 1;
        let new: Vec<(u64, u64)> = (0..IDS).map(|id| (fp(id, v), id)).collect();
        let file = dir.path().join(format!("v{v}.txt"));
        pairs_file(&file, &new);
        let before = logs(&idx);
        let mut child = Command::new(env!("CARGO_BIN_EXE_simdex")).args(["replace", p(&idx), p(&file)]).stdin(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        // kill once the run has written `grown` bytes of log records (or flushed): progress,
        // not a duration, so a slow machine kills it as far into its work as a fast one
        let started = Instant::now();
        while child.try_wait().unwrap().is_none() && !progressed(&before, &logs(&idx), grown) {
            assert!(started.elapsed() < Duration::from_secs(900), "round {v}: no progress in 900 s (a hang)");
            std::thread::sleep(Duration::from_millis(1));
        }
        killed += u32::from(child.try_wait().unwrap().is_none());
        let _ = child.kill();
        child.wait().unwrap();
        // every id: exactly one fingerprint, of the last whole round or of this one
        let after = held(&idx);
        assert_eq!(after.len() as u64, IDS, "round {v}: every id is held");
        let mut moved = 0;
        for (id, fps) in &after {
            assert!(fps == &vec![fp(*id, v - 1)] || fps == &vec![fp(*id, v)], "round {v} (killed after {grown} log bytes): id {id} holds {fps:x?}");
            moved += u64::from(fps == &vec![fp(*id, v)]);
        }
        // the rerun finishes: every id holds this round's fingerprint, once
        let again = run(&["replace", p(&idx), p(&file)]);
        assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
        let said = String::from_utf8_lossy(&again.stderr);
        assert!(said.contains(&format!("{} ids changed", IDS - moved)) && said.contains(&format!("{moved} already held that fingerprint")), "{said}");
        let after = held(&idx);
        assert!(after.iter().all(|(id, fps)| fps == &vec![fp(*id, v)]), "round {v}: the rerun left an id without its new fingerprint");
    }
    // each kill came a few percent into a run of 60 000 replaces (>= 2 MB of log records)
    assert!(killed >= 1, "no kill landed while replace ran");
    assert!(run(&["verify", p(&idx)]).status.success());
}
