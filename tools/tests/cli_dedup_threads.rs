//! `simdex dedup` on every core finds what one thread finds: the same pairs file, report and
//! summary, byte for byte, whatever the number of threads and whether the fingerprint pass
//! uses the features the IDF pass kept or reads the inputs again.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A corpus of many small documents in several inputs: the bundled HTML pages (planted
/// exact and near copies), and JSON lines with near copies, exact copies, a line that is not
/// JSON, a document too short to fingerprint, a binary one and invalid UTF-8.
fn corpus(dir: &Path) -> Vec<PathBuf> {
    let words: Vec<String> = (0..3000).map(|i| format!("w{}", (i * 7919 + 13) % 997)).collect();
    let mut lines = Vec::new();
    let mut seed = 7u64;
    let mut next = |n: u64| {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    let mut originals: Vec<String> = Vec::new();
    for i in 0..600 {
        let text = match i % 10 {
            // a near copy of an earlier document: a few words changed
            3 | 7 if !originals.is_empty() => {
                let mut w: Vec<&str> = originals[next(originals.len() as u64) as usize].split(' ').collect();
                for _ in 0..=next(3) {
                    let at = next(w.len() as u64) as usize;
                    w[at] = "changed";
                }
                w.join(" ")
            }
            // an exact copy
            5 if !originals.is_empty() => originals[next(originals.len() as u64) as usize].clone(),
            _ => {
                let start = next(2500) as usize;
                let t = words[start..start + 100 + next(300) as usize].join(" ");
                originals.push(t.clone());
                t
            }
        };
        lines.push(format!("{{\"id\": \"j{i}\", \"text\": \"{text}\"}}").into_bytes());
    }
    lines.insert(40, b"not json".to_vec());
    lines.insert(90, b"{\"id\": \"short\", \"text\": \"two words\"}".to_vec());
    lines.insert(91, b"{\"id\": \"binary\", \"text\": \"\\u0000\\u0001 nul\"}".to_vec());
    lines.insert(300, b"{\"id\": \"bad-utf8\", \"text\": \"w1 w2 \xff w3 w4 w5\"}".to_vec());
    lines.insert(301, b"{\"id\": \"page\", \"html\": \"<p>w1 w2 w3 w4 w5 w6</p><script>x</script>\"}".to_vec());
    let jsonl = dir.join("docs.jsonl");
    std::fs::write(&jsonl, lines.join(&b"\n"[..])).unwrap();
    let more = dir.join("more.jsonl");
    std::fs::write(&more, lines[..200].join(&b"\n"[..])).unwrap();
    vec![root().join("fixtures/corpus/pages"), jsonl, dir.join("empty.txt"), more]
}

/// stdout, the pairs file and the report of a dedup run.
fn dedup(inputs: &[PathBuf], out: &Path, extra: &[&str]) -> [Vec<u8>; 3] {
    let (pairs, report) = (out.join("pairs.tsv"), out.join("report.jsonl"));
    let o = Command::new(env!("CARGO_BIN_EXE_simdex"))
        .arg("dedup")
        .args(inputs)
        .args(["--pairs".as_ref(), pairs.as_os_str(), "--report".as_ref(), report.as_os_str()])
        .args(extra)
        .output()
        .unwrap();
    assert!(o.status.success(), "{extra:?}: {}", String::from_utf8_lossy(&o.stderr));
    [o.stdout, std::fs::read(pairs).unwrap(), std::fs::read(report).unwrap()]
}

#[test]
fn every_core_finds_what_one_thread_finds() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = corpus(dir.path());
    std::fs::write(dir.path().join("empty.txt"), "").unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    for mode in [&[][..], &["--no-confirm"], &["--no-idf"], &["--strict"], &["-k", "3"]] {
        let one = dedup(&inputs, &out, &[&["--threads", "1"], mode].concat());
        let pairs = String::from_utf8_lossy(&one[1]);
        assert!(pairs.lines().count() > 50, "{mode:?}: too few pairs to compare:\n{pairs}");
        let report = String::from_utf8_lossy(&one[2]);
        assert!(report.contains("\"kind\":\"skipped\""), "{mode:?}: {report}");
        for threads in ["2", "8"] {
            for keep in ["536870912", "0", "20000"] {
                let many = dedup(&inputs, &out, &[&["--threads", threads, "--keep-text-bytes", keep], mode].concat());
                for (what, (a, b)) in ["summary", "pairs", "report"].iter().zip(one.iter().zip(&many)) {
                    assert!(
                        a == b,
                        "{mode:?}, {threads} threads, keep {keep}: the {what} differs\none thread:\n{}\n{threads} threads:\n{}",
                        String::from_utf8_lossy(a),
                        String::from_utf8_lossy(b)
                    );
                }
            }
        }
    }
}
