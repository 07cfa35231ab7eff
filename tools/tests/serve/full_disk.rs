//! A real full disk (a small tmpfs the test mounts; skipped with a message where mounting
//! is not allowed): the write that meets it is answered 507 `no_space` (or 503 `recovering`)
//! with `Retry-After`, never a hang or a crash; `/health` keeps answering; once space is
//! back writes succeed again within seconds, and every write acknowledged before is there,
//! also after a restart.

use std::collections::BTreeSet;
use std::io::Write;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{le, stored_pairs, Client, Response, Rng, Server};
use crate::tmpfs::Tmpfs;

/// One write of a few random pairs, alternating the forms; the pairs when acknowledged.
fn write(c: &mut Client, rng: &mut Rng, n: usize) -> Result<Vec<(u64, u64)>, Response> {
    let fps: Vec<u64> = (0..n).map(|_| rng.next()).collect();
    let ids: Vec<u64> = (0..n).map(|_| rng.next() >> 1).collect();
    let r = match rng.next() % 3 {
        0 => c.send("POST", "/v1/insert_many", Some("application/octet-stream"), &le(&[&fps[..], &ids].concat())),
        1 => c.send("POST", "/v1/insert_many", Some("application/json"), json!({"fps": fps, "doc_ids": ids}).to_string().as_bytes()),
        _ => c.send("POST", "/v1/find_or_insert_many", Some("application/octet-stream"), &le(&[&fps[..], &ids].concat())),
    }
    .expect("the server answers; it does not hang up or hang");
    if r.status == 200 {
        Ok(fps.into_iter().zip(ids).collect())
    } else {
        Err(r)
    }
}

/// A refusal for want of space: 507 `no_space`, or 503 `recovering` while the server
/// reopens the index after a failed write; with `Retry-After` seconds.
fn assert_out_of_space(r: &Response) {
    let kind = r.error_kind();
    assert!((r.status, kind.as_str()) == (507, "no_space") || (r.status, kind.as_str()) == (503, "recovering"), "{} {}", r.status, r.text());
    let retry: u32 = r.header("retry-after").unwrap_or_else(|| panic!("{} without Retry-After", r.status)).parse().unwrap();
    assert!((1..=60).contains(&retry), "Retry-After {retry}");
}

/// Fills the file system of `path` until it refuses another byte.
fn fill(path: &std::path::Path) -> std::fs::File {
    let mut f = std::fs::File::create(path).unwrap();
    for size in [1 << 20, 4096, 1] {
        let chunk = vec![0xa5u8; size];
        loop {
            match f.write_all(&chunk) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(28) => break,
                Err(e) => panic!("filling the disk: {e}"),
            }
        }
    }
    f
}

#[test]
fn a_full_disk_answers_507_with_retry_after_and_loses_nothing_acknowledged() {
    let Some(disk) = Tmpfs::mount_or_skip(16 << 20) else { return };
    let idx = disk.path().join("idx");
    let mut server = Server::start(&idx, &[]);
    let mut c = server.client();
    let mut rng = Rng(16);
    let mut acknowledged = BTreeSet::new();
    for _ in 0..20 {
        acknowledged.extend(write(&mut c, &mut rng, 50).unwrap_or_else(|r| panic!("before the disk fills: {} {}", r.status, r.text())));
    }

    let filler = disk.path().join("filler");
    let file = fill(&filler);
    // Write until the server meets the full disk (it may have had a little room left).
    let started = Instant::now();
    let refusal = loop {
        match write(&mut c, &mut rng, 50) {
            Ok(pairs) => acknowledged.extend(pairs),
            Err(r) => break r,
        }
        assert!(started.elapsed() < Duration::from_secs(30), "30 s of writes on a full disk, all acknowledged");
    };
    // the write that meets the full disk says so; later ones may find the server reopening
    refusal.assert_error(507, "no_space");
    assert!(refusal.text().contains("No space left on device"), "{}", refusal.text());
    assert_out_of_space(&refusal);
    // It keeps answering: /health, further writes (refused the same way, or stored if the
    // server freed room of its own), and reads unless it is reopening the index.
    for _ in 0..10 {
        let h = server.client().get("/health");
        assert!(h.status == 200 || h.json()["status"] == "recovering", "{} {}", h.status, h.text());
        match write(&mut c, &mut rng, 50) {
            Ok(pairs) => acknowledged.extend(pairs),
            Err(r) => assert_out_of_space(&r),
        }
        let q = c.post("/v1/query", &json!({"fp": 1}));
        assert!(q.status == 200 || q.error_kind() == "recovering", "{} {}", q.status, q.text());
    }
    assert!(server.exit_within(Duration::ZERO).is_none(), "the server is still running: {}", server.log());

    // Space is back: writes succeed again within a few seconds.
    drop(file);
    std::fs::remove_file(&filler).unwrap();
    let freed = Instant::now();
    loop {
        match write(&mut c, &mut rng, 50) {
            Ok(pairs) => {
                acknowledged.extend(pairs);
                break;
            }
            Err(r) => assert_out_of_space(&r),
        }
        assert!(freed.elapsed() < Duration::from_secs(10), "writes still refused 10 s after space came back: {}", server.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    for _ in 0..10 {
        acknowledged.extend(write(&mut c, &mut rng, 50).unwrap_or_else(|r| panic!("once space is back: {} {}", r.status, r.text())));
    }
    assert_eq!(server.client().get("/health").status, 200);
    let metrics = server.client().get("/metrics").text();
    assert!(metrics.lines().any(|l| l.starts_with("simdex_errors_total{") && l.contains("status=\"507\"")), "/metrics counts the 507s:\n{metrics}");
    assert!(!metrics.contains("status=\"other\""), "{metrics}");

    let fps: Vec<u64> = acknowledged.iter().map(|p| p.0).collect();
    let lost = |stored: &BTreeSet<(u64, u64)>| acknowledged.difference(stored).count();
    assert_eq!(lost(&stored_pairs(&mut c, &fps)), 0, "acknowledged pairs lost across the full disk");
    server.terminate();
    let status = server.exit_within(Duration::from_secs(10)).expect("exits after SIGTERM");
    assert!(status.success(), "{status}: {}", server.log());
    let server = Server::start(&idx, &[]);
    assert_eq!(lost(&stored_pairs(&mut server.client(), &fps)), 0, "acknowledged pairs lost after a restart");
}

/// `n` random pairs.
fn pairs(rng: &mut Rng, n: usize) -> (Vec<u64>, Vec<u64>) {
    ((0..n).map(|_| rng.next()).collect(), (0..n).map(|_| rng.next() >> 1).collect())
}

#[test]
fn a_full_disk_is_a_read_only_mode_queries_and_health_answer_over_a_large_log_without_a_reopen() {
    let Some(disk) = Tmpfs::mount_or_skip(48 << 20) else { return };
    let idx = disk.path().join("idx");
    let server = Server::start(&idx, &[]);
    let mut c = server.client();
    let mut rng = Rng(392);
    // the reviewer's log: 392,000 operations, all still in the log (a memtable holds 2^20)
    let mut stored = Vec::new();
    for _ in 0..8 {
        let (fps, ids) = pairs(&mut rng, 49_000);
        c.binary("insert_many", "", &[&fps[..], &ids].concat());
        stored.extend(fps.into_iter().zip(ids));
    }
    let stats = c.ok("stats", json!({}));
    assert_eq!(stats["memtable_inserts"], 392_000, "{stats}");
    assert!(stats["log_bytes"].as_u64().unwrap() > 6_000_000, "{stats}");

    let filler = disk.path().join("filler");
    let file = fill(&filler);
    // a writer sending a batch after every 5 queries: every query answers, every write 507
    let mut acknowledged: BTreeSet<(u64, u64)> = stored.iter().copied().collect();
    let (mut refused, mut queries) = (0, 0);
    for round in 0..50 {
        for q in 0..5 {
            let (fp, id) = stored[(round * 5 + q) * 1543 % stored.len()];
            let r = c.post("/v1/query", &json!({"fp": fp, "k": 0}));
            assert_eq!(r.status, 200, "round {round}: a query on a full disk: {}", r.text());
            assert_eq!(crate::support::rows(&r.json()["matches"]), vec![(fp, 0, Some(id))]);
            queries += 1;
        }
        match write(&mut c, &mut rng, 200) {
            Ok(p) => acknowledged.extend(p),
            Err(r) => {
                r.assert_error(507, "no_space");
                assert_eq!(r.header("retry-after"), Some("5"));
                refused += 1;
                let h = server.client().get("/health");
                assert_eq!((h.status, &h.json()["status"], &h.json()["no_space"]), (200, &json!("ready"), &json!(true)), "{}", h.text());
            }
        }
    }
    assert_eq!(queries, 250);
    assert!(refused >= 45, "writes on a full disk are refused ({refused} of 50)");
    assert_eq!(server.metric("simdex_index_reopens_total"), 0.0, "no reopen for a full disk: {}", server.log());
    assert!(!server.log().contains("recovering"), "{}", server.log());

    // space is back: writes resume on the same open index
    drop(file);
    std::fs::remove_file(&filler).unwrap();
    acknowledged.extend(write(&mut c, &mut rng, 200).unwrap_or_else(|r| panic!("once space is back: {} {}", r.status, r.text())));
    let h = server.client().get("/health");
    assert_eq!(h.json()["no_space"], json!(false), "{}", h.text());
    let fps: Vec<u64> = acknowledged.iter().map(|p| p.0).collect();
    assert!(acknowledged.is_subset(&stored_pairs(&mut c, &fps)), "acknowledged pairs lost across the full disk");
}

#[test]
fn a_batch_meeting_a_full_disk_is_stored_whole_or_as_the_prefix_its_answer_reports() {
    let Some(disk) = Tmpfs::mount_or_skip(8 << 20) else { return };
    let server = Server::start(&disk.path().join("idx"), &[]);
    let mut c = server.client();
    let mut rng = Rng(5);
    let filler = disk.path().join("filler");
    let file = fill(&filler);
    // a few pages of room: a batch of single inserts meets the full disk part-way
    file.set_len(file.metadata().unwrap().len() - 3 * 4096).unwrap();
    let mut partial = 0;
    for _ in 0..20 {
        let (fps, ids) = pairs(&mut rng, 2000);
        let r = c.send("POST", "/v1/find_or_insert_many", Some("application/octet-stream"), &le(&[&fps[..], &ids].concat())).unwrap();
        let stored = stored_pairs(&mut c, &fps);
        if r.status == 200 {
            assert_eq!(stored.len(), fps.len());
            continue;
        }
        r.assert_error(507, "no_space");
        let v = r.json();
        let done = v["error"]["done"].as_u64().unwrap_or_else(|| panic!("a 507 of a batch says how many items were done: {v}")) as usize;
        let expected: BTreeSet<(u64, u64)> = fps[..done].iter().copied().zip(ids[..done].iter().copied()).collect();
        assert_eq!(stored, expected, "exactly the {done} items the answer reports are stored");
        if done > 0 {
            partial += 1;
            let matches = v["error"]["matches"].as_array().unwrap_or_else(|| panic!("the done items' answers: {v}"));
            assert_eq!(matches.len(), done);
            assert!(matches.iter().all(|m| m.as_array().is_some_and(Vec::is_empty)), "new random pairs were inserted: {v}");
        }
        // one log record per call: add_many and delete_many are whole or nothing
        let (fps, ids) = pairs(&mut rng, 500);
        let r = c.send("POST", "/v1/insert_many", Some("application/octet-stream"), &le(&[&fps[..], &ids].concat())).unwrap();
        let stored = stored_pairs(&mut c, &fps);
        match r.status {
            200 => assert_eq!(stored.len(), 500),
            _ => {
                r.assert_error(507, "no_space");
                assert!(stored.is_empty(), "a refused add_many stored {} of 500", stored.len());
                assert!(r.json()["error"].get("done").is_none(), "{}", r.text());
            }
        }
    }
    assert!(partial >= 1, "no batch met the full disk part-way: the test proves nothing");
}

#[test]
fn many_documents_meeting_a_full_disk_report_the_prefix_that_was_stored() {
    let Some(disk) = Tmpfs::mount_or_skip(8 << 20) else { return };
    let server = Server::start(&disk.path().join("idx"), &[]);
    let mut c = server.client();
    let mut rng = Rng(11);
    let file = fill(&disk.path().join("filler"));
    file.set_len(file.metadata().unwrap().len() - 3 * 4096).unwrap();
    let mut partial = 0;
    for round in 0..20u64 {
        // distinct random pages: every one is new, so every one done is stored
        let docs: Vec<serde_json::Value> = (0..300).map(|_| json!({"text": (0..60).map(|_| format!("w{}", rng.next() % 100_000)).collect::<Vec<_>>().join(" ")})).collect();
        let ids: Vec<u64> = (0..docs.len() as u64).map(|i| round * 1_000_000 + i).collect();
        let fps: Vec<u64> = c.ok("fingerprint_documents", json!({"docs": docs}))["fingerprints"].as_array().unwrap().iter().map(|f| f.as_u64().unwrap()).collect();
        let r = c.post("/v1/find_or_insert_documents", &json!({"docs": docs, "doc_ids": ids}));
        let stored = stored_pairs(&mut c, &fps);
        if r.status == 200 {
            assert_eq!(stored.len(), docs.len());
            continue;
        }
        r.assert_error(507, "no_space");
        let v = r.json();
        let done = v["error"]["done"].as_u64().unwrap_or_else(|| panic!("a 507 of many documents says how many were done: {v}")) as usize;
        let results = v["error"]["results"].as_array().unwrap_or_else(|| panic!("the done documents' results: {v}"));
        assert_eq!(results.len(), done);
        let expected: BTreeSet<(u64, u64)> = fps[..done].iter().copied().zip(ids[..done].iter().copied()).collect();
        assert_eq!(stored, expected, "exactly the {done} documents the answer reports are stored");
        for (i, r) in results.iter().enumerate() {
            assert_eq!(r["fingerprint"].as_u64(), Some(fps[i]), "result {i}: {r}");
            assert_eq!(r["matches"], json!([]), "a new page was inserted: {r}");
        }
        partial += usize::from(done > 0);
    }
    assert!(partial >= 1, "no call met the full disk part-way: the test proves nothing");
}
