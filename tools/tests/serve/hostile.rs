//! Malformed and hostile clients: each bad request gets its 4xx (never a 2xx, a 5xx or a
//! hang), slow and idle clients are cut off by the timeouts or simply held, and meanwhile
//! another client is served at once.

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{assert_served, is_disconnect, le, Client, Rng, Server};

/// A server with small limits: 1 s for a head, 1 s for a body, 1 MiB bodies.
fn strict_server(dir: &tempfile::TempDir) -> Server {
    Server::start(&dir.path().join("idx"), &["--header-timeout", "1", "--body-timeout", "1", "--max-body-mib", "1"])
}

const SERVED: Duration = Duration::from_secs(2);

/// A request (method, path, media type, body) and the status and error kind it must get.
type Case<'a> = (&'a str, &'a str, Option<&'a str>, &'a [u8], u16, &'a str);

#[test]
fn malformed_requests_get_their_4xx_and_others_stay_served() {
    let dir = tempfile::tempdir().unwrap();
    let server = strict_server(&dir);
    let json = Some("application/json");
    let bin = Some("application/octet-stream");
    #[rustfmt::skip]
    let cases: &[Case] = &[
        // malformed JSON
        ("POST", "/v1/query", json, br#"{"fp": 1,"#, 400, "bad_request"),
        ("POST", "/v1/query", json, b"fp=1", 400, "bad_request"),
        ("POST", "/v1/query", json, b"\xff\xfe{}", 400, "bad_request"),
        ("POST", "/v1/query", None, br#"{"fp": 1}{"fp": 2}"#, 400, "bad_request"),
        // wrong types
        ("POST", "/v1/query", json, br#"{"fp": "12"}"#, 400, "bad_request"),
        ("POST", "/v1/query", json, br#"{"fp": -1}"#, 400, "bad_request"),
        ("POST", "/v1/query", json, br#"{"fp": 1.5}"#, 400, "bad_request"),
        ("POST", "/v1/query", json, br#"{"fp": 18446744073709551616}"#, 400, "bad_request"),
        ("POST", "/v1/query", json, br#"{"fp": 1, "k": -3}"#, 400, "bad_request"),
        ("POST", "/v1/query", json, br#"[1]"#, 400, "bad_request"),
        ("POST", "/v1/find_or_insert", json, br#"{"fp": 1, "doc_id": null}"#, 400, "bad_request"),
        ("POST", "/v1/query_many", json, br#"{"fps": 5}"#, 400, "bad_request"),
        ("POST", "/v1/query_many", json, br#"{"fps": [1, "2"]}"#, 400, "bad_request"),
        ("POST", "/v1/find_or_insert_document", json, br#"{"doc": "text", "doc_id": 1}"#, 400, "bad_request"),
        // unknown, missing, surplus and contradictory fields
        ("POST", "/v1/query", json, br#"{"fp": 1, "colour": 2}"#, 400, "bad_request"),
        ("POST", "/v1/query", json, br#"{"fp": 1, "doc_id": 2}"#, 400, "bad_request"),
        ("POST", "/v1/query", json, b"", 400, "bad_request"),
        ("POST", "/v1/find_or_insert", json, br#"{"fp": 1}"#, 400, "bad_request"),
        ("POST", "/v1/insert", json, br#"{"fp": 1, "doc_id": 2, "k": 3}"#, 400, "bad_request"),
        ("POST", "/v1/find_or_insert_many", json, br#"{"fps": [1, 2], "doc_ids": [1]}"#, 400, "bad_request"),
        ("POST", "/v1/stats", json, br#"{"verbose": true}"#, 400, "bad_request"),
        ("POST", "/v1/insert_document", json, br#"{"doc": {"text": "a", "html": "b"}, "doc_id": 1}"#, 400, "bad_request"),
        ("POST", "/v1/insert_document", json, br#"{"doc": {"text_base64": "!!"}, "doc_id": 1}"#, 400, "bad_request"),
        ("POST", "/v1/query", json.map(|_| "application/json; charset=utf-8"), br#"{"fp": 1, "z": 0}"#, 400, "bad_request"),
        // arguments in the wrong place, wrong media types
        ("POST", "/v1/query?k=3", json, br#"{"fp": 1}"#, 400, "bad_request"),
        ("POST", "/v1/query_many?k=x", bin, &[0; 8], 400, "bad_request"),
        ("POST", "/v1/query_many?k=1&fp=2", bin, &[0; 8], 400, "bad_request"),
        ("POST", "/v1/insert_many?k=1", bin, &[0; 16], 400, "bad_request"),
        ("POST", "/v1/query", Some("text/plain"), br#"{"fp": 1}"#, 415, "unsupported_media_type"),
        ("POST", "/v1/insert", bin, &[0; 16], 415, "unsupported_media_type"),
        // unknown paths
        ("GET", "/", None, b"", 404, "not_found"),
        ("POST", "/v1/", json, b"{}", 404, "not_found"),
        ("POST", "/v1/nope", json, b"{}", 404, "not_found"),
        ("POST", "/v1/Query", json, br#"{"fp": 1}"#, 404, "not_found"),
        ("POST", "/v1/query/", json, br#"{"fp": 1}"#, 404, "not_found"),
        ("POST", "/v2/query", json, br#"{"fp": 1}"#, 404, "not_found"),
        ("POST", "/v1/../v1/query", json, br#"{"fp": 1}"#, 404, "not_found"),
        // wrong methods
        ("GET", "/v1/query", None, b"", 405, "method_not_allowed"),
        ("PUT", "/v1/insert", json, br#"{"fp": 1, "doc_id": 2}"#, 405, "method_not_allowed"),
        ("DELETE", "/v1/insert", None, b"", 405, "method_not_allowed"),
        ("GET", "/v1/compact", None, b"", 405, "method_not_allowed"),
        ("POST", "/metrics", None, b"", 405, "method_not_allowed"),
    ];
    for &(method, path, content_type, body, status, kind) in cases {
        let what = format!("{method} {path} {:?}", String::from_utf8_lossy(body));
        let mut c = server.client();
        let r = c.send(method, path, content_type, body).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!((r.status, r.error_kind().as_str()), (status, kind), "{what}: {}", r.text());
        assert_eq!(r.header("content-type"), Some("application/json"), "{what}");
        if status == 405 {
            assert!(r.header("allow").is_some(), "{what}: a 405 says what is allowed");
        }
        // The connection serves on after an error of a request whose body was read.
        if status == 400 {
            assert_eq!(c.post("/v1/query", &json!({"fp": 1})).status, 200, "{what}: the same connection after the 400");
        }
        assert_served(server.addr, SERVED);
    }
    // Nothing of the above wrote anything.
    let stats = server.client().ok("stats", json!({}));
    assert_eq!(stats["last_seq"], 0, "{stats}");
    // GET works for the calls that take no argument.
    assert_eq!(server.client().get("/v1/stats").status, 200);
}

#[test]
fn a_body_left_unread_is_never_taken_for_a_request_and_pipelined_requests_answer_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let server = strict_server(&dir);
    // Refused before its body is read (404, 405, 413 declared): the body, a whole request
    // itself, is skipped or the connection closed; it is never run.
    let inner = "POST /v1/insert HTTP/1.1\r\nHost: x\r\nContent-Length: 22\r\n\r\n{\"fp\": 1, \"doc_id\": 2}";
    for head in ["POST /v1/nope", "GET /v1/insert", "POST /v1/insert"] {
        let limit = if head == "POST /v1/insert" { (1 << 20) + 1 } else { inner.len() };
        let mut c = server.client();
        c.stream().set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        c.raw(format!("{head} HTTP/1.1\r\nHost: x\r\nContent-Length: {limit}\r\n\r\n{inner}").as_bytes()).unwrap();
        let r = c.read_response().unwrap();
        assert!([404, 405, 413].contains(&r.status), "{head}: {} {}", r.status, r.text());
        match c.read_response() {
            Ok(r) => panic!("{head}: the body was answered as a request: {} {}", r.status, r.text()),
            Err(e) => assert!(is_disconnect(&e) || e.kind() == std::io::ErrorKind::WouldBlock, "{head}: {e}"),
        }
    }
    assert_eq!(server.client().ok("stats", json!({}))["last_seq"], 0, "no body was run as a request");
    // Three requests in one write come back as three answers, in order.
    let mut c = server.client();
    let add = |fp: u64| {
        format!("POST /v1/insert HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{}", json!({"fp": fp, "doc_id": fp}).to_string().len(), json!({"fp": fp, "doc_id": fp}))
    };
    c.raw(format!("{}{}GET /v1/stats HTTP/1.1\r\nHost: x\r\n\r\n", add(10), add(11)).as_bytes()).unwrap();
    assert_eq!(c.read_response().unwrap().json(), json!({"seq": 1}));
    assert_eq!(c.read_response().unwrap().json(), json!({"seq": 2}));
    assert_eq!(c.read_response().unwrap().json()["last_seq"], 2);
}

/// Writes as much of `bytes` as the server takes within 2 s (it may stop reading, or
/// close, once it has answered).
fn write_what_goes(c: &mut Client, bytes: &[u8]) {
    c.stream().set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    for chunk in bytes.chunks(64 << 10) {
        if c.raw(chunk).is_err() {
            return;
        }
    }
}

#[test]
fn bodies_over_the_limit_get_413_declared_or_chunked() {
    let dir = tempfile::tempdir().unwrap();
    let server = strict_server(&dir);
    let max = 1 << 20;
    // Exactly the limit is fine: a binary query_many of 1 MiB.
    let fps: Vec<u64> = (0..max as u64 / 8).collect();
    let mut c = server.client();
    assert_eq!(c.binary("query_many", "?k=0", &fps).len(), 16);
    // One u64 more, declared by Content-Length: refused from the head.
    let over = le(&(0..max as u64 / 8 + 1).collect::<Vec<u64>>());
    let mut c = server.client();
    c.raw(format!("POST /v1/query_many HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\n\r\n", over.len()).as_bytes()).unwrap();
    write_what_goes(&mut c, &over);
    c.read_response().unwrap().assert_error(413, "too_large");
    assert_served(server.addr, SERVED);
    // A declared length far over the limit, with no body sent at all.
    let mut c = server.client();
    c.raw(b"POST /v1/query_many HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: 1000000000000\r\n\r\n").unwrap();
    c.read_response().unwrap().assert_error(413, "too_large");
    // Chunked, with no length declared: refused once the limit is passed.
    let mut chunked = Vec::new();
    for part in over.chunks(100_000) {
        chunked.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
        chunked.extend_from_slice(part);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let mut c = server.client();
    c.raw(b"POST /v1/query_many HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n").unwrap();
    write_what_goes(&mut c, &chunked);
    c.read_response().unwrap().assert_error(413, "too_large");
    assert_served(server.addr, SERVED);
    // A chunked JSON body under the limit is read whole.
    let mut c = server.client();
    c.raw(b"POST /v1/insert HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"fp\"\r\n12\r\n: 9, \"doc_id\": 10}\r\n0\r\n\r\n").unwrap();
    let r = c.read_response().unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(server.client().ok("query", json!({"fp": 9, "k": 0})), json!({"matches": [[9, 0, 10]]}));
}

/// Waits for the server to close `c` (EOF or reset; a timeout fails); returns when it did.
fn closed_after(c: &mut Client, start: Instant, allowed: &[u16]) -> Duration {
    c.stream().set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    match c.read_response() {
        Ok(r) => {
            assert!(allowed.contains(&r.status), "closed, not answered {}: {}", r.status, r.text());
            assert!(c.read_response().is_err_and(|e| is_disconnect(&e)), "closed after the {}", r.status);
        }
        Err(e) => assert!(is_disconnect(&e), "the server closes the connection, the client does not time out: {e}"),
    }
    start.elapsed()
}

#[test]
fn a_slowloris_head_is_cut_off_after_the_header_timeout_while_others_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let server = strict_server(&dir);
    // Half a head, then nothing.
    let start = Instant::now();
    let mut stalled = server.client();
    stalled.raw(b"POST /v1/query HTTP/1.1\r\nHost: x\r\nContent-Le").unwrap();
    // A head sent one byte every 100 ms: the timeout is for the whole head, not between bytes.
    let mut drip = server.client();
    let dripping = std::thread::spawn(move || {
        let start = Instant::now();
        for b in b"POST /v1/query HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n".iter().cycle().take(200) {
            if drip.raw(&[*b]).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        closed_after(&mut drip, start, &[408])
    });
    for _ in 0..5 {
        assert_served(server.addr, SERVED);
    }
    let took = closed_after(&mut stalled, start, &[408]);
    assert!(took > Duration::from_millis(800) && took < Duration::from_secs(4), "half a head is cut off after --header-timeout 1, not {took:?}");
    let took = dripping.join().unwrap();
    assert!(took < Duration::from_secs(4), "a dripped head is cut off after --header-timeout 1, not {took:?}");
    assert_served(server.addr, SERVED);
}

#[test]
fn a_stalled_body_gets_408_after_the_body_timeout_while_others_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let server = strict_server(&dir);
    let start = Instant::now();
    let mut stalled = server.client();
    stalled.raw(b"POST /v1/insert HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"fp\": 1,").unwrap();
    let mut chunked = server.client();
    chunked.raw(b"POST /v1/insert HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"fp").unwrap();
    for _ in 0..5 {
        assert_served(server.addr, SERVED);
    }
    for c in [&mut stalled, &mut chunked] {
        let r = c.read_response().expect("a stalled body is answered");
        r.assert_error(408, "timeout");
        let took = start.elapsed();
        assert!(took > Duration::from_millis(800) && took < Duration::from_secs(4), "408 after --body-timeout 1, not {took:?}");
    }
    assert_eq!(server.client().ok("stats", json!({}))["last_seq"], 0, "the stalled writes wrote nothing");
    let metrics = server.client().get("/metrics").text();
    assert!(metrics.contains("\nsimdex_errors_total{op=\"insert\",status=\"408\"} 2\n"), "/metrics counts the 408s:\n{metrics}");
    assert_served(server.addr, SERVED);
}

#[test]
fn garbage_that_is_not_http_is_refused_or_dropped_never_served() {
    let dir = tempfile::tempdir().unwrap();
    let server = strict_server(&dir);
    let mut rng = Rng(99);
    let random: Vec<u8> = (0..4096).map(|_| rng.next() as u8).collect();
    // (the server bounds a connection's head buffer near 64 KiB, hyper's last read beyond it
    // included: a 1 MB head is well over it)
    let long_header = format!("GET /health HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(1 << 20));
    let long_path = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(100_000));
    let many_headers = format!("GET /health HTTP/1.1\r\n{}\r\n", (0..500).map(|i| format!("X-{i}: y\r\n")).collect::<String>());
    let garbage: Vec<(&str, Vec<u8>)> = vec![
        ("random bytes", random),
        ("NULs", vec![0; 10_000]),
        ("blank lines", b"\r\n\r\n\r\n\r\n".to_vec()),
        ("no version", b"GET /health\r\n\r\n".to_vec()),
        ("HTTP/9.9", b"GET /health HTTP/9.9\r\n\r\n".to_vec()),
        ("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec()),
        ("TLS hello", vec![0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03]),
        ("header without colon", b"GET /health HTTP/1.1\r\nHost x\r\n\r\n".to_vec()),
        ("bad method", b"G\x01T /health HTTP/1.1\r\n\r\n".to_vec()),
        ("bad Content-Length", b"POST /v1/insert HTTP/1.1\r\nContent-Length: abc\r\n\r\n{}".to_vec()),
        ("negative Content-Length", b"POST /v1/insert HTTP/1.1\r\nContent-Length: -5\r\n\r\n{}".to_vec()),
        ("two Content-Lengths", b"POST /v1/insert HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 30\r\n\r\n{}".to_vec()),
        ("bad chunk size", b"POST /v1/insert HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n".to_vec()),
        ("1 MB header", long_header.into_bytes()),
        ("100 KB path", long_path.into_bytes()),
        ("500 headers", many_headers.into_bytes()),
    ];
    for (what, bytes) in garbage {
        let mut c = server.client();
        let start = Instant::now();
        let _ = c.raw(&bytes);
        c.stream().set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        match c.read_response() {
            Ok(r) => assert!((400..500).contains(&r.status) || r.status == 505, "{what}: answered {} {}", r.status, r.text()),
            Err(e) => assert!(is_disconnect(&e), "{what}: the connection is closed within 5 s, not left hanging: {e}"),
        }
        assert!(start.elapsed() < Duration::from_secs(4), "{what}: took {:?}", start.elapsed());
        assert_served(server.addr, SERVED);
    }
    assert_eq!(server.client().ok("stats", json!({}))["last_seq"], 0, "no garbage wrote anything");
}

#[test]
fn ten_thousand_idle_connections_do_not_stop_a_new_one_being_served() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("idx"), &["--header-timeout", "60"]);
    // Opened 250 at a time, each lot once the server has accepted the one before (its gauge
    // counts them): a lot over its listen backlog (1,024) would make the kernel drop
    // handshakes, which the client retries after a second.
    let started = Instant::now();
    let mut idle = Vec::with_capacity(10_000);
    while idle.len() < 10_000 {
        for _ in 0..250 {
            idle.push(TcpStream::connect(server.addr).unwrap_or_else(|e| panic!("connection {}: {e}", idle.len())));
        }
        while server.metric("simdex_connections") < idle.len() as f64 {
            assert!(started.elapsed() < Duration::from_secs(60), "{} of {} connections accepted after 60 s", server.metric("simdex_connections"), idle.len());
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    for _ in 0..3 {
        assert_served(server.addr, SERVED);
    }
    // A few of the idle ones are served too, then left idle again.
    for s in idle.iter_mut().step_by(2_500) {
        s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut c = Client::from_stream(s.try_clone().unwrap());
        assert_eq!(c.read_response().unwrap().status, 200);
    }
    drop(idle);
    let started = Instant::now();
    while server.metric("simdex_connections") > 1.0 {
        assert!(started.elapsed() < Duration::from_secs(10), "{} connections still counted 10 s after the clients closed them", server.metric("simdex_connections"));
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_served(server.addr, SERVED);
}

#[test]
fn connections_over_max_connections_get_503_and_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("idx"), &["--max-connections", "4"]);
    let held: Vec<Client> = (0..4).map(|_| server.client()).collect();
    // The fifth is answered 503 at once and closed, before it sends anything.
    let mut refused = Vec::new();
    for _ in 0..3 {
        let mut c = server.client();
        let r = c.read_response().expect("an answer before any request");
        r.assert_error(503, "too_many_connections");
        assert!(r.header("retry-after").is_some());
        assert!(c.read_response().is_err_and(|e| is_disconnect(&e)), "and the connection closed");
        refused.push(c);
    }
    drop(held);
    // Once they are gone, connections are served again (the gauge falls as they close).
    let started = Instant::now();
    loop {
        let mut c = server.client();
        match c.send("POST", "/v1/query", None, br#"{"fp": 1}"#) {
            Ok(r) if r.status == 200 => break,
            Ok(r) => r.assert_error(503, "too_many_connections"),
            Err(e) => assert!(is_disconnect(&e), "{e}"),
        }
        assert!(started.elapsed() < Duration::from_secs(5), "not served again 5 s after the held connections closed");
        std::thread::sleep(Duration::from_millis(20));
    }
}
