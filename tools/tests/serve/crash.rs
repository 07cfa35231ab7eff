//! The server's end: killed with SIGKILL under load it loses no acknowledged write (with
//! the default `group` durability and with `sync`) and its clients see a broken connection,
//! not a hang; stopped with SIGTERM it finishes the request in flight, exits 0 at once and
//! leaves a directory that opens at once.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{binary_items, is_disconnect, le, rows, simdex, stored_pairs, Client, Rng, Server};

/// What one loading client saw: the pairs acknowledged, and how its last request ended.
struct Load {
    acknowledged: Vec<(u64, u64)>,
    last_error: std::io::Error,
    /// From the kill to that error.
    after_kill: Duration,
}

/// One client's load until its connection breaks: find_or_insert, add and add_many of
/// random fingerprints (ids unique to the client), recording each acknowledged pair.
fn load(mut client: Client, seed: u64, acked: Arc<AtomicUsize>, killed_at: Arc<Mutex<Option<Instant>>>) -> Load {
    let mut rng = Rng(seed);
    let mut acknowledged = Vec::new();
    let mut next_id = seed * 1_000_000_000;
    loop {
        let fp = rng.next();
        next_id += 1;
        let outcome = match rng.next() % 3 {
            0 => client.send("POST", "/v1/find_or_insert", Some("application/json"), json!({"fp": fp, "doc_id": next_id}).to_string().as_bytes()).map(|r| {
                assert_eq!(r.status, 200, "{}", r.text());
                // random fingerprints are not near-duplicates of one another (k = 3)
                assert!(rows(&r.json()["matches"]).is_empty(), "{fp:016x} found {}", r.text());
                vec![(fp, next_id)]
            }),
            1 => client.send("POST", "/v1/insert", Some("application/json"), json!({"fp": fp, "doc_id": next_id}).to_string().as_bytes()).map(|r| {
                assert_eq!(r.status, 200, "{}", r.text());
                vec![(fp, next_id)]
            }),
            _ => {
                let fps: Vec<u64> = (0..20).map(|_| rng.next()).collect();
                let ids: Vec<u64> = (0..20).map(|i| next_id + 1 + i).collect();
                next_id += 20;
                client.send("POST", "/v1/insert_many", Some("application/octet-stream"), &le(&[&fps[..], &ids].concat())).map(|r| {
                    assert_eq!(r.status, 200, "{}", r.text());
                    fps.into_iter().zip(ids).collect()
                })
            }
        };
        match outcome {
            Ok(pairs) => {
                acked.fetch_add(pairs.len(), Ordering::SeqCst);
                acknowledged.extend(pairs);
            }
            Err(e) => {
                let after_kill = killed_at.lock().unwrap().map_or(Duration::MAX, |t| t.elapsed());
                return Load { acknowledged, last_error: e, after_kill };
            }
        }
    }
}

fn kill_under_load_loses_nothing_acknowledged(durability: &str) {
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("idx");
    let mut server = Server::start(&idx, &["--durability", durability]);
    let acked = Arc::new(AtomicUsize::new(0));
    let killed_at = Arc::new(Mutex::new(None));
    let clients: Vec<_> = (1..=4u64)
        .map(|seed| {
            let client = server.client();
            let (acked, killed_at) = (Arc::clone(&acked), Arc::clone(&killed_at));
            std::thread::spawn(move || load(client, seed, acked, killed_at))
        })
        .collect();
    // Kill once the clients have had a good number of writes acknowledged.
    let started = Instant::now();
    while acked.load(Ordering::SeqCst) < 20_000 {
        assert!(started.elapsed() < Duration::from_secs(30), "only {} writes acknowledged in 30 s", acked.load(Ordering::SeqCst));
        assert!(clients.iter().all(|c| !c.is_finished()), "a client stopped before the kill: {}", server.log());
        std::thread::sleep(Duration::from_millis(2));
    }
    *killed_at.lock().unwrap() = Some(Instant::now());
    server.kill9();
    let loads: Vec<Load> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    for (n, l) in loads.iter().enumerate() {
        assert!(is_disconnect(&l.last_error), "client {n}: the kill breaks the connection ({:?}: {}), it does not time out", l.last_error.kind(), l.last_error);
        assert!(l.after_kill < Duration::from_secs(3), "client {n} noticed the kill after {:?}", l.after_kill);
    }
    let acknowledged: BTreeSet<(u64, u64)> = loads.iter().flat_map(|l| l.acknowledged.iter().copied()).collect();
    assert!(acknowledged.len() >= 20_000);

    let server = Server::start(&idx, &["--durability", durability]);
    let fps: Vec<u64> = acknowledged.iter().map(|p| p.0).collect();
    let stored = stored_pairs(&mut server.client(), &fps);
    let lost: Vec<&(u64, u64)> = acknowledged.difference(&stored).collect();
    assert!(lost.is_empty(), "--durability {durability}: {} of {} acknowledged pairs lost after kill -9, e.g. {:?}", lost.len(), acknowledged.len(), &lost[..lost.len().min(5)]);
}

#[test]
fn kill_9_under_load_loses_no_acknowledged_write_group() {
    kill_under_load_loses_nothing_acknowledged("group");
}

#[test]
fn kill_9_under_load_loses_no_acknowledged_write_sync() {
    kill_under_load_loses_nothing_acknowledged("sync");
}

#[test]
fn sigterm_finishes_the_request_in_flight_and_exits_0_leaving_the_directory_openable() {
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("idx");
    // a long head timeout: only the shutdown may close the idle connection below
    let mut server = Server::start(&idx, &["--header-timeout", "60"]);
    let mut rng = Rng(7);
    // One batch large enough to be in flight for a while (item by item in the server).
    let n = 150_000;
    let fps: Vec<u64> = (0..n).map(|_| rng.next()).collect();
    let ids: Vec<u64> = (1..=n).collect();
    let body = le(&[&fps[..], &ids].concat());
    let mut slow = server.client();
    slow.stream().set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let finished = Arc::clone(&done);
    let request = std::thread::spawn(move || {
        let r = slow.send("POST", "/v1/find_or_insert_many", Some("application/octet-stream"), &body);
        finished.store(true, Ordering::SeqCst);
        r
    });
    // An idle keep-alive connection must not hold the shutdown up.
    let mut idle = server.client();
    assert_eq!(idle.get("/health").status, 200);
    let started = Instant::now();
    while server.metric("simdex_in_flight_requests") < 1.0 {
        assert!(!done.load(Ordering::SeqCst), "the batch finished before it was seen in flight: make it larger");
        assert!(started.elapsed() < Duration::from_secs(30), "the batch never showed in flight");
        std::thread::sleep(Duration::from_millis(2));
    }
    server.terminate();
    // It stops accepting: soon a new connection is refused (until then one may be served).
    let terminated = Instant::now();
    loop {
        match Client::connect(server.addr).and_then(|mut c| c.send("POST", "/v1/query", None, br#"{"fp": 1}"#)) {
            Ok(r) => assert!(r.status == 200 || r.error_kind() == "stopping", "{}", r.text()),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => break,
            Err(e) => assert!(is_disconnect(&e), "{e}"),
        }
        assert!(terminated.elapsed() < Duration::from_secs(5), "still accepting 5 s after SIGTERM");
        std::thread::sleep(Duration::from_millis(5));
    }
    let r = request.join().unwrap().expect("the request in flight is answered");
    assert_eq!(r.status, 200, "{}", r.text());
    let answer = binary_items(&r.body);
    assert_eq!(answer.len(), n as usize);
    assert!(answer.iter().all(Vec::is_empty), "every random fingerprint was inserted");
    let answered = Instant::now();
    let status = server.exit_within(Duration::from_secs(5)).unwrap_or_else(|| panic!("still running 5 s after its last answer: {}", server.log()));
    assert!(status.success(), "exit {status} after SIGTERM: {}", server.log());
    assert!(answered.elapsed() < Duration::from_secs(5));
    assert!(idle.read_response().is_err_and(|e| is_disconnect(&e)), "the idle connection is closed, unanswered");

    // The directory opens at once (no lock left behind) and holds the whole batch.
    let out = simdex().args(["stats", "--json"]).arg(&idx).output().unwrap();
    assert!(out.status.success(), "simdex stats after shutdown: {}", String::from_utf8_lossy(&out.stderr));
    let again = Server::start(&idx, &[]);
    let stored = stored_pairs(&mut again.client(), &fps);
    assert_eq!(stored, fps.iter().copied().zip(ids).collect::<BTreeSet<_>>(), "the batch answered before the exit is stored");
}

#[test]
fn sigterm_is_not_held_up_by_a_stalled_upload_or_a_half_sent_head() {
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("idx");
    // long timeouts: only the shutdown may end these clients
    let mut server = Server::start(&idx, &["--header-timeout", "60", "--body-timeout", "60"]);
    let mut body = server.client();
    body.raw(b"POST /v1/insert HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"fp\": 1,").unwrap();
    let mut head = server.client();
    head.raw(b"POST /v1/insert HTTP/1.1\r\nHost: x\r\nContent-Le").unwrap();
    // (a request before, on a third connection, shows both were accepted and read)
    assert_eq!(server.client().get("/health").status, 200);
    server.terminate();
    let terminated = Instant::now();
    let r = body.read_response().expect("the stalled upload is answered");
    r.assert_error(503, "stopping");
    assert!(r.header("retry-after").is_some());
    assert!(head.read_response().is_err_and(|e| is_disconnect(&e)), "the half-sent head is closed");
    let status = server.exit_within(Duration::from_secs(5)).unwrap_or_else(|| panic!("still running 5 s after SIGTERM: {}", server.log()));
    assert!(status.success(), "{status}: {}", server.log());
    assert!(terminated.elapsed() < Duration::from_secs(5));
    let again = Server::start(&idx, &[]);
    assert_eq!(again.client().ok("stats", json!({}))["last_seq"], 0, "the refused upload wrote nothing");
}
