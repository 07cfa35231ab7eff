//! What clients can make the server hold, bounded by its configuration (issue 37's review):
//! memory (a request's share of `--max-memory-mib` and of `--max-in-flight` is taken before
//! its body is read, measured as the server's peak resident memory), descriptors (the soft
//! limit raised, a reserve kept for the index: idle connections over the budget are
//! refused, never the writer), idle connections closed after `--header-timeout`, the
//! in-flight gauge when clients go away mid-request, and the listen backlog.

use std::io::Read;
use std::net::TcpStream;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{le, Client, Held, Rng, Server};

/// A JSON body of `n` fingerprints of one digit (2 bytes each, 8 once decoded), with a field
/// no call takes at its end: the server reads and decodes all of it, then answers 400.
fn zeros_json(n: usize) -> Vec<u8> {
    let mut b = Vec::with_capacity(2 * n + 32);
    b.extend_from_slice(b"{\"fps\":[");
    for i in 0..n {
        if i > 0 {
            b.push(b',');
        }
        b.push(b'0');
    }
    b.extend_from_slice(b"],\"unknown\":1}");
    b
}

/// Four clients send `body` to `op` at once, again while refused (503, the body drained),
/// to a server whose budget holds one such request and a half; the server's peak resident
/// memory grows by no more than the stated bound: the budget plus 80 KiB per connection.
/// A fifth request of the same size holds one share of the budget (its body not all sent)
/// until each of the four has been refused once, so that refusals happen whatever the
/// scheduling; then every one is served in the end.
fn four_at_once_stay_within_the_budget(op: &str, body: Vec<u8>, document: bool, answer: u16) {
    let dir = tempfile::tempdir().unwrap();
    let charge = simdex_serve::charge(body.len(), document);
    let budget_mib = (charge + charge / 2) >> 20;
    // long timeouts: the held request and the waiting clients wait for the test, not a clock
    let server = Server::start(&dir.path().join("idx"), &["--max-memory-mib", &budget_mib.to_string(), "--max-in-flight", "8", "--body-timeout", "600", "--header-timeout", "600"]);
    // warm: the index open and a request served, so the baseline holds what every request needs
    server.client().ok("query", json!({"fp": 1}));
    let before_kb = server.status_kb("VmRSS");
    let size = body.len();
    let path = format!("/v1/{op}");
    // distinct document ids, so that each document call stores its own
    let numbered = |n: u64| -> Vec<u8> {
        if document {
            String::from_utf8_lossy(&body).replace("\"doc_id\":0", &format!("\"doc_id\":{n}")).into_bytes()
        } else {
            body.clone()
        }
    };
    let held = Held::start(&server, &path, "application/json", &numbered(4));
    // the four start together, and the held request is let go once each was refused once
    let start = Arc::new(Barrier::new(4));
    let refused_once = Arc::new(Barrier::new(5));
    let clients: Vec<_> = (0..4u64)
        .map(|n| {
            let (body, start, refused_once, mut c, path) = (numbered(n), Arc::clone(&start), Arc::clone(&refused_once), server.client(), path.clone());
            c.stream().set_read_timeout(Some(Duration::from_secs(600))).unwrap();
            c.stream().set_write_timeout(Some(Duration::from_secs(600))).unwrap();
            std::thread::spawn(move || {
                start.wait();
                let mut statuses = Vec::new();
                let started = Instant::now();
                loop {
                    let r = c.send("POST", &path, Some("application/json"), &body).unwrap();
                    statuses.push(r.status);
                    if statuses.len() == 1 {
                        r.assert_error(503, "overloaded");
                        refused_once.wait();
                    } else if r.status != 503 {
                        assert_eq!(r.status, answer, "{}", r.text());
                        break;
                    } else {
                        r.assert_error(503, "overloaded");
                    }
                    assert!(started.elapsed() < Duration::from_secs(600), "never served: {statuses:?}");
                    std::thread::sleep(Duration::from_millis(20));
                }
                statuses
            })
        })
        .collect();
    refused_once.wait();
    let r = held.finish();
    assert_eq!(r.status, answer, "the held request is worked on: {}", r.text());
    let statuses: Vec<Vec<u16>> = clients.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(statuses.iter().all(|s| s.last() == Some(&answer)), "every body was read and worked on in the end: {statuses:?}");
    assert!(statuses.iter().all(|s| s[0] == 503), "the budget refused each while another was held: {statuses:?}");
    let peak_kb = server.status_kb("VmHWM");
    let grown = usize::try_from(peak_kb.saturating_sub(before_kb) << 10).unwrap();
    let bound = (budget_mib << 20) + 5 * (80 << 10);
    eprintln!("{op}: 4 x {} MiB bodies, budget {budget_mib} MiB: resident {before_kb} kB before, peak {peak_kb} kB (+{} MiB), bound +{} MiB", size >> 20, grown >> 20, bound >> 20);
    assert!(grown <= bound, "peak resident memory grew by {} MiB, over the stated bound of {} MiB", grown >> 20, bound >> 20);
    assert_eq!(server.metric("simdex_in_flight_requests"), 0.0);
}

#[test]
fn concurrent_large_bodies_stay_within_the_memory_budget_measured_as_peak_resident_memory() {
    // the reviewer's case, at a quarter of the size: four 15 MiB JSON bodies of zeros
    four_at_once_stay_within_the_budget("query_many", zeros_json(15 << 19), false, 400);
}

#[test]
fn concurrent_large_documents_stay_within_the_memory_budget_measured_as_peak_resident_memory() {
    // a large page each, of many distinct short words (the text pipeline's worst measured)
    let mut rng = Rng(9);
    let text: Vec<String> = (0..600_000).map(|_| format!("x{}", rng.next() % 1_000_000)).collect();
    let body = json!({"doc": {"text": text.join(" ")}, "doc_id": 0}).to_string().into_bytes();
    four_at_once_stay_within_the_budget("find_or_insert_document", body, true, 200);
}

#[test]
fn under_a_low_descriptor_limit_idle_connections_are_refused_never_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("idx");
    // the soft limit is raised to the hard one at start
    let server = Server::start_under(&idx, &["--header-timeout", "30"], Some((128, 256)));
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", server.pid())).unwrap();
    let nofile = limits.lines().find(|l| l.starts_with("Max open files")).unwrap().split_whitespace().skip(3).take(2).collect::<Vec<_>>();
    assert_eq!(nofile, ["256", "256"], "soft limit raised to the hard one: {limits}");
    let log = server.log_with("\"listening\"");
    assert!(log.contains("\"descriptor_limit\":256") && log.contains("\"descriptor_limit_raised_from\":128"), "{log}");
    let allowed = 256 - simdex_serve::INDEX_RESERVE as usize - simdex_serve::SERVER_OWN as usize;
    assert!(log.contains(&format!("\"max_connections\":{allowed}")), "{log}");

    let mut writer = server.client();
    let mut rng = Rng(37);
    // 371 idle connections (the reviewer's count under ulimit -n 256)
    let mut idle: Vec<TcpStream> = Vec::new();
    let mut refused = 0;
    for _ in 0..371 {
        let s = TcpStream::connect(server.addr).unwrap();
        idle.push(s);
    }
    // the refused ones are answered 503 and closed; the others wait, served but idle
    std::thread::sleep(Duration::from_millis(500));
    for s in &mut idle {
        s.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 512];
        match s.read(&mut buf) {
            Ok(n) => {
                let text = String::from_utf8_lossy(&buf[..n]);
                assert!(text.starts_with("HTTP/1.1 503") && text.contains("too_many_connections"), "{text}");
                refused += 1;
            }
            Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock, "{e}"),
        }
    }
    assert_eq!(refused, 371 + 1 - allowed, "every connection over {allowed} is refused, none under");
    // the writer goes on: writes, a flush (new files), a compaction, stats
    let mut stored = Vec::new();
    for round in 0..5 {
        let fps: Vec<u64> = (0..2000).map(|_| rng.next()).collect();
        let ids: Vec<u64> = (0..2000).map(|i| round * 10_000 + i).collect();
        let r = writer.send("POST", "/v1/insert_many", Some("application/octet-stream"), &le(&[&fps[..], &ids].concat())).unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
        writer.ok("flush", json!({}));
        stored.extend(fps);
    }
    writer.ok("compact", json!({}));
    let stats = writer.ok("stats", json!({}));
    assert_eq!(stats["segment_fingerprints"], 10_000, "{stats}");
    assert_eq!(stats["segments"], 1, "{stats}");
    assert!(stats["maintenance_error"].is_null(), "{stats}");
    assert_eq!(writer.get("/health").status, 200);
    // once the idle ones close, new clients are served again
    drop(idle);
    let started = Instant::now();
    loop {
        match Client::connect(server.addr).map(|mut c| c.post("/v1/query", &json!({"fp": stored[0], "k": 0}))) {
            Ok(r) if r.status == 200 => break,
            _ => assert!(started.elapsed() < Duration::from_secs(10), "no new client served 10 s after the idle ones closed"),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(server.metric("simdex_refused_connections_total") >= refused as f64);
}

#[test]
fn a_connection_that_sends_nothing_is_closed_after_the_header_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("idx"), &["--header-timeout", "1"]);
    let started = Instant::now();
    let mut silent = TcpStream::connect(server.addr).unwrap();
    silent.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 64];
    let n = silent.read(&mut buf).unwrap_or(0);
    let waited = started.elapsed();
    assert_eq!(n, 0, "closed without an answer: {:?}", String::from_utf8_lossy(&buf[..n]));
    assert!(waited >= Duration::from_millis(900) && waited < Duration::from_secs(5), "closed after {waited:?}");
    // and so is a kept-alive one that goes quiet after a request; answers say how long
    let mut c = server.client();
    let r = c.post("/v1/query", &json!({"fp": 1}));
    assert_eq!(r.header("keep-alive"), Some("timeout=1"));
    std::thread::sleep(Duration::from_millis(1500));
    assert!(c.send("POST", "/v1/query", Some("application/json"), b"{\"fp\": 1}").is_err(), "the idle connection was closed");
}

#[test]
fn the_in_flight_gauge_comes_back_to_zero_when_clients_go_away_mid_request() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("idx"), &[]);
    let mut rng = Rng(6);
    let n = 100_000u64;
    let body = le(&[(0..n).map(|_| rng.next()).collect::<Vec<_>>(), (0..n).collect()].concat());
    for _ in 0..3 {
        let mut c = server.client();
        let head = format!("POST /v1/find_or_insert_many HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\n\r\n", body.len());
        c.raw(&[head.as_bytes(), &body].concat()).unwrap();
        // gone before the answer
        let started = Instant::now();
        while server.metric("simdex_in_flight_requests") < 1.0 && started.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(c);
    }
    let started = Instant::now();
    while server.metric("simdex_in_flight_requests") != 0.0 {
        assert!(started.elapsed() < Duration::from_secs(30), "{} requests still counted in flight", server.metric("simdex_in_flight_requests"));
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_listen_backlog_is_the_systems_somaxconn() {
    let Ok(somaxconn) = std::fs::read_to_string("/proc/sys/net/core/somaxconn") else {
        eprintln!("skipped: no /proc/sys/net/core/somaxconn");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("idx"), &[]);
    let log = server.log_with("\"listening\"");
    assert!(log.contains(&format!("\"backlog\":{}", somaxconn.trim())), "{log}");
    // the kernel's view: a listening socket's Send-Q is its backlog
    let Ok(out) = std::process::Command::new("ss").args(["-Hltn", &format!("sport = :{}", server.addr.port())]).output() else {
        eprintln!("skipped the kernel's view: no ss");
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let send_q = text.split_whitespace().nth(2).unwrap_or_else(|| panic!("ss: {text:?}"));
    assert_eq!(send_q, somaxconn.trim(), "{text}");
}
