//! Nobody in who does not belong: a server reachable from other machines needs a real
//! token, and then every request but `/health` carries it; a read-only server never writes
//! and sees what the writing server adds within its refresh period.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{output_within, rows, simdex, Client, Server};

const TOKEN: &str = "s3cr3t-t0ken-0123456789abcdef";

#[test]
fn listening_beyond_loopback_needs_a_token_file_with_a_real_token() {
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("idx");
    let refused = |args: &[&str]| {
        let mut c = simdex();
        c.arg("serve").arg(&idx).args(args);
        let (status, stdout, stderr) = output_within(c, Duration::from_secs(20)).unwrap_or_else(|| panic!("simdex serve {args:?} was not refused: it kept running"));
        assert!(!status.success(), "simdex serve {args:?} exits non-zero");
        assert!(!stdout.contains("listening"), "simdex serve {args:?} never listened: {stdout}");
        stderr
    };
    for addr in ["0.0.0.0:0", "[::]:0"] {
        let stderr = refused(&["--listen", addr]);
        assert!(stderr.contains(addr) && stderr.contains("--token-file"), "the refusal names {addr} and --token-file: {stderr}");
    }
    let short = dir.path().join("short");
    std::fs::write(&short, "fifteen-chars-x\n").unwrap();
    let stderr = refused(&["--listen", "0.0.0.0:0", "--token-file", short.to_str().unwrap()]);
    assert!(stderr.contains("at least 16") && stderr.contains(short.to_str().unwrap()), "{stderr}");
    let stderr = refused(&["--listen", "127.0.0.1:0", "--token-file", short.to_str().unwrap()]);
    assert!(stderr.contains("at least 16"), "a short token is refused on loopback too: {stderr}");
    let missing = dir.path().join("missing");
    let stderr = refused(&["--listen", "0.0.0.0:0", "--token-file", missing.to_str().unwrap()]);
    assert!(stderr.contains(missing.to_str().unwrap()), "{stderr}");
    assert!(!idx.exists(), "a refused server creates no index");
}

#[test]
fn with_a_token_every_request_but_health_must_carry_it() {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let server = Server::start(&dir.path().join("idx"), &["--listen", "0.0.0.0:0", "--token-file", token_file.to_str().unwrap()]);
    let unauthorized = |c: &mut Client, method: &str, path: &str| {
        let r = c.send(method, path, Some("application/json"), br#"{"fp": 1, "doc_id": 2}"#).unwrap();
        r.assert_error(401, "unauthorized");
        assert_eq!(r.header("www-authenticate"), Some("Bearer"), "{method} {path}");
    };
    for token in [None, Some("wrong-t0ken-0123456789abcdef"), Some(&TOKEN[..TOKEN.len() - 1]), Some("")] {
        let mut c = server.client();
        c.token = token.map(str::to_owned);
        for (method, path) in [("POST", "/v1/insert"), ("POST", "/v1/query"), ("GET", "/metrics"), ("GET", "/v1/stats"), ("POST", "/v1/nope")] {
            unauthorized(&mut c, method, path);
        }
        // the scheme is "Bearer", exactly
        let r = c.send("POST", "/v1/query", None, br#"{"fp": 1}"#).unwrap();
        assert_eq!(r.status, 401);
    }
    let mut raw = server.client();
    raw.raw(format!("POST /v1/query HTTP/1.1\r\nHost: x\r\nAuthorization: bearer {TOKEN}\r\nContent-Length: 9\r\n\r\n{{\"fp\": 1}}").as_bytes()).unwrap();
    raw.read_response().unwrap().assert_error(401, "unauthorized");
    let mut raw = server.client();
    raw.raw(format!("POST /v1/query HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {TOKEN}\r\nContent-Length: 9\r\n\r\n{{\"fp\": 1}}").as_bytes()).unwrap();
    raw.read_response().unwrap().assert_error(401, "unauthorized");

    // /health needs no token (load balancers probe it).
    assert_eq!(server.client().get("/health").status, 200);
    // The right token goes through.
    let mut c = server.client();
    c.token = Some(TOKEN.to_owned());
    assert_eq!(c.ok("insert", json!({"fp": 1, "doc_id": 2})), json!({"seq": 1}));
    assert_eq!(rows(&c.ok("query", json!({"fp": 1, "k": 0}))["matches"]), vec![(1, 0, Some(2))]);
    let m = c.get("/metrics");
    assert_eq!(m.status, 200);
    assert!(m.text().contains("simdex_requests_total{op=\"insert\"} 1\n"), "{}", m.text());
    assert_eq!(c.get("/health").status, 200, "/health with a token is fine too");
    // Nothing refused wrote anything.
    assert_eq!(c.ok("stats", json!({}))["last_seq"], 1);
}

#[test]
fn a_read_only_server_sees_the_writers_inserts_within_refresh_and_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("idx");
    let writer = Server::start(&idx, &[]);
    let mut w = writer.client();
    assert_eq!(w.ok("insert", json!({"fp": 100, "doc_id": 1}))["seq"], 1);
    let reader = Server::start(&idx, &["--read-only", "--refresh", "0.2"]);
    let mut r = reader.client();
    assert_eq!(rows(&r.ok("query", json!({"fp": 100, "k": 0}))["matches"]), vec![(100, 0, Some(1))], "what was written before it opened");
    assert_eq!(r.ok("info", json!({}))["read_only"], true);

    // New inserts through the writer, a batch then a single add, show within the refresh
    // period; once the single add shows, so does the whole batch before it.
    for round in 0..3u64 {
        let fp = 0xabc0_0000 + round;
        let batch: Vec<u64> = (0..50).map(|i| fp + ((i + 1) << 40)).collect();
        let ids: Vec<u64> = batch.iter().map(|f| f % 1_000_000 + 7).collect();
        w.ok("insert_many", json!({"fps": batch, "doc_ids": ids}));
        w.ok("insert", json!({"fp": fp, "doc_id": round + 10}));
        let written = Instant::now();
        loop {
            if !rows(&r.ok("query", json!({"fp": fp, "k": 0}))["matches"]).is_empty() {
                let found = r.ok("query_many", json!({"fps": batch, "k": 0}))["matches"].as_array().unwrap().iter().filter(|m| m.as_array().unwrap().len() == 1).count();
                assert_eq!(found, batch.len(), "round {round}: a refresh shows every write before the one it shows");
                break;
            }
            assert!(written.elapsed() < Duration::from_secs(3), "round {round}: a write is not seen 3 s after it (--refresh 0.2)");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    // Every write is refused with 403 read_only, in JSON and binary, and nothing is written.
    let bin = Some("application/octet-stream");
    #[rustfmt::skip]
    let writes: &[(&str, Option<&str>, &[u8])] = &[
        ("/v1/insert", None, br#"{"fp": 5, "doc_id": 5}"#),
        ("/v1/delete", None, br#"{"fp": 100, "doc_id": 1}"#),
        ("/v1/find_or_insert", None, br#"{"fp": 6, "doc_id": 6}"#),
        ("/v1/insert_many", None, br#"{"fps": [7], "doc_ids": [7]}"#),
        ("/v1/delete_many", None, br#"{"fps": [100], "doc_ids": [1]}"#),
        ("/v1/find_or_insert_many", None, br#"{"fps": [8], "doc_ids": [8]}"#),
        ("/v1/insert_document", None, br#"{"doc": {"text": "some words to store"}, "doc_id": 9}"#),
        ("/v1/find_or_insert_document", None, br#"{"doc": {"text": "some words to store"}, "doc_id": 9}"#),
        ("/v1/find_or_insert_documents", None, br#"{"docs": [{"text": "some words"}], "doc_ids": [9]}"#),
        ("/v1/flush", None, b"{}"),
        ("/v1/compact", None, b""),
    ];
    for &(path, content_type, body) in writes {
        let resp = r.send("POST", path, content_type, body).unwrap();
        resp.assert_error(403, "read_only");
    }
    let resp = r.send("POST", "/v1/insert_many", bin, &crate::support::le(&[11, 12])).unwrap();
    resp.assert_error(403, "read_only");
    let resp = r.send("POST", "/v1/find_or_insert_many", bin, &crate::support::le(&[11, 12])).unwrap();
    resp.assert_error(403, "read_only");
    // Reads work, the writer's index is untouched.
    assert_eq!(rows(&r.ok("query", json!({"fp": 100, "k": 0}))["matches"]), vec![(100, 0, Some(1))]);
    assert_eq!(w.ok("query_many", json!({"fps": [5, 6, 7, 8, 11], "k": 0}))["matches"], json!([[], [], [], [], []]));
    assert_eq!(w.ok("stats", json!({}))["last_seq"], 1 + 3 * 51);

    // The writer flushes and compacts under the reader's feet (files it read go away): the
    // reader's refreshes follow, and its answers stay whole.
    let all: Vec<u64> = (0..3u64).flat_map(|round| (0..=50).map(move |i| 0xabc0_0000 + round + (i << 40))).chain([100]).collect();
    for (marker, step) in [(0x77u64, "flush"), (0x7777_0000, "compact")] {
        w.ok(step, json!({}));
        w.ok("insert", json!({"fp": marker, "doc_id": marker}));
        let written = Instant::now();
        while rows(&r.ok("query", json!({"fp": marker, "k": 0}))["matches"]).is_empty() {
            assert!(written.elapsed() < Duration::from_secs(3), "after {step}: a write is not seen 3 s after it");
            std::thread::sleep(Duration::from_millis(20));
        }
        let found = r.ok("query_many", json!({"fps": all, "k": 0}))["matches"].as_array().unwrap().iter().filter(|m| m.as_array().unwrap().len() == 1).count();
        assert_eq!(found, all.len(), "after {step}: every pair is still seen by the reader");
    }
}
