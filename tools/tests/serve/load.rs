//! Work in flight and what `/metrics` says of it: past `--max-in-flight` requests are
//! refused at once with 503 `overloaded` and `Retry-After` (none waits, none hangs) and
//! counted; the exposition parses as Prometheus text and counts what was sent.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use serde_json::json;

use crate::support::{le, Client, Held, Response, Rng, Server};

/// A binary find_or_insert_many of `n` random pairs: slow (item by item in the server).
fn slow_batch(rng: &mut Rng, n: u64) -> Vec<u8> {
    let fps: Vec<u64> = (0..n).map(|_| rng.next()).collect();
    let ids: Vec<u64> = (0..n).map(|_| rng.next() >> 1).collect();
    le(&[fps, ids].concat())
}

fn send_batch(c: &mut Client, body: &[u8]) -> Response {
    // generous: on a busy machine a batch may wait long for a core (a hang still fails)
    c.stream().set_read_timeout(Some(Duration::from_secs(600))).unwrap();
    c.stream().set_write_timeout(Some(Duration::from_secs(600))).unwrap();
    c.send("POST", "/v1/find_or_insert_many", Some("application/octet-stream"), body).unwrap()
}

fn assert_overloaded(r: &Response) {
    r.assert_error(503, "overloaded");
    assert_eq!(r.header("retry-after"), Some("1"));
}

#[test]
fn past_max_in_flight_requests_get_503_overloaded_at_once_and_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    // long timeouts: the held request and the idle connections wait for the test, not a clock
    let server = Server::start(&dir.path().join("idx"), &["--max-in-flight", "1", "--body-timeout", "600", "--header-timeout", "600"]);
    let mut rng = Rng(3);
    let mut overloaded = 0;

    // One request holds the only slot (its body not all sent): every request meanwhile is
    // refused, answered while the slot is still held, so none waited for it.
    let held = Held::start(&server, "/v1/query", "application/json", json!({"fp": 7}).to_string().as_bytes());
    let mut c = server.client();
    c.stream().set_read_timeout(Some(Duration::from_secs(600))).unwrap();
    let refused_while_held = 20;
    for fp in 0..refused_while_held {
        assert_overloaded(&c.post("/v1/query", &json!({"fp": fp})));
    }
    overloaded += refused_while_held;
    // /health and /metrics are not work: they answer whatever is in flight.
    assert_eq!(c.get("/health").status, 200);
    assert_eq!(server.metric("simdex_in_flight_requests"), 1.0);
    let r = held.finish();
    assert_eq!(r.status, 200, "the held request itself completes: {}", r.text());
    assert_eq!(c.post("/v1/query", &json!({"fp": 1})).status, 200, "the slot is free again");

    // Slow requests all at once from 6 clients: each is served or refused, none hangs, and
    // at least one is served (a refusal means another holds the slot, and it is served).
    let barrier = Arc::new(Barrier::new(6));
    let threads: Vec<_> = (0..6)
        .map(|_| {
            let body = slow_batch(&mut rng, 40_000);
            let mut c = server.client();
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                send_batch(&mut c, &body)
            })
        })
        .collect();
    let answers: Vec<Response> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let served = answers.iter().filter(|r| r.status == 200).count();
    for r in answers.iter().filter(|r| r.status != 200) {
        assert_overloaded(r);
    }
    assert!(served >= 1, "at least one of the concurrent batches is served");
    overloaded += (answers.len() - served) as u64;

    // /metrics counts exactly the refusals, and the 503s among the query errors.
    let text = c.get("/metrics").text();
    assert!(text.contains(&format!("\nsimdex_overloaded_total {overloaded}\n")), "simdex_overloaded_total {overloaded}:\n{text}");
    assert!(text.contains(&format!("\nsimdex_errors_total{{op=\"query\",status=\"503\"}} {refused_while_held}\n")), "{text}");
    assert!(text.contains("\nsimdex_in_flight_requests 0\n"), "{text}");
}

/// One sample of the text format: name, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

/// Parses the Prometheus text exposition format (0.0.4) strictly: `# HELP` and `# TYPE`
/// lines, and samples `name{label="value",...} value`; panics on anything else.
fn parse_prometheus(text: &str) -> (BTreeMap<String, String>, Vec<Sample>) {
    let name_ok = |n: &str| !n.is_empty() && n.chars().enumerate().all(|(i, c)| c.is_ascii_alphabetic() || c == '_' || c == ':' || (i > 0 && c.is_ascii_digit()));
    let mut types = BTreeMap::new();
    let mut samples = Vec::new();
    assert!(text.ends_with('\n'), "the exposition ends with a newline");
    for line in text.lines() {
        if let Some(comment) = line.strip_prefix("# ") {
            let mut parts = comment.splitn(3, ' ');
            let (what, name, rest) = (parts.next().unwrap(), parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            assert!(name_ok(name), "comment names a metric: {line:?}");
            match what {
                "HELP" => assert!(!rest.is_empty(), "{line:?}"),
                "TYPE" => {
                    assert!(["counter", "gauge", "histogram", "summary", "untyped"].contains(&rest), "{line:?}");
                    assert!(types.insert(name.to_owned(), rest.to_owned()).is_none(), "one TYPE per metric: {line:?}");
                }
                _ => panic!("unknown comment {line:?}"),
            }
            continue;
        }
        assert!(!line.is_empty() && !line.starts_with('#'), "blank or odd line {line:?}");
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("no value: {line:?}"));
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("value of {line:?}")),
        };
        let (name, labels) = match series.split_once('{') {
            None => (series, BTreeMap::new()),
            Some((name, rest)) => {
                let body = rest.strip_suffix('}').unwrap_or_else(|| panic!("labels of {line:?}"));
                let mut labels = BTreeMap::new();
                for pair in body.split(',').filter(|p| !p.is_empty()) {
                    let (k, v) = pair.split_once('=').unwrap_or_else(|| panic!("label {pair:?} of {line:?}"));
                    assert!(name_ok(k), "label name {k:?} of {line:?}");
                    let v = v.strip_prefix('"').and_then(|v| v.strip_suffix('"')).unwrap_or_else(|| panic!("label value {v:?} of {line:?}"));
                    assert!(!v.contains('"') && !v.contains('\\'), "{line:?}");
                    assert!(labels.insert(k.to_owned(), v.to_owned()).is_none(), "label {k} twice in {line:?}");
                }
                (name, labels)
            }
        };
        assert!(name_ok(name), "metric name {name:?}");
        let family = ["_bucket", "_sum", "_count"].iter().find_map(|s| name.strip_suffix(s).filter(|f| types.get(*f).is_some_and(|t| t == "histogram"))).unwrap_or(name);
        assert!(types.contains_key(family), "{name} has a TYPE line before its samples");
        samples.push((name.to_owned(), labels, value));
    }
    let series: BTreeSet<(&String, &BTreeMap<String, String>)> = samples.iter().map(|(n, l, _)| (n, l)).collect();
    assert_eq!(series.len(), samples.len(), "no series twice");
    (types, samples)
}

#[test]
fn metrics_parse_as_prometheus_text_and_count_requests_by_op_with_index_gauges() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("idx"), &[]);
    let mut c = server.client();
    for i in 0..7u64 {
        c.ok("insert", json!({"fp": i << 20, "doc_id": i + 1}));
    }
    for i in 0..5u64 {
        c.ok("query", json!({"fp": i << 20}));
    }
    c.ok("query_many", json!({"fps": [1, 2, 3]}));
    c.binary("insert_many", "", &[1 << 50, 2 << 50, 3 << 50, 11, 12, 13]);
    c.post("/v1/query", &json!({"fp": "bad"})).assert_error(400, "bad_request");
    c.post("/v1/nope", &json!({})).assert_error(404, "not_found");
    c.send("GET", "/v1/insert", None, b"").unwrap().assert_error(405, "method_not_allowed");
    assert_eq!(c.get("/health").status, 200);

    let r = c.get("/metrics");
    assert_eq!(r.status, 200);
    assert!(r.header("content-type").is_some_and(|t| t.starts_with("text/plain")), "{:?}", r.header("content-type"));
    let (types, samples) = parse_prometheus(&r.text());
    let value = |name: &str, labels: &[(&str, &str)]| {
        let want: BTreeMap<String, String> = labels.iter().map(|&(k, v)| (k.to_owned(), v.to_owned())).collect();
        samples.iter().find(|(n, l, _)| n == name && *l == want).map(|s| s.2).unwrap_or_else(|| panic!("no sample {name}{labels:?}"))
    };
    // Requests by operation, errors among them, and the unrouted ones.
    assert_eq!(value("simdex_requests_total", &[("op", "insert")]), 8.0, "seven answered, one refused");
    assert_eq!(value("simdex_requests_total", &[("op", "query")]), 6.0, "five answered, one refused");
    assert_eq!(value("simdex_requests_total", &[("op", "query_many")]), 1.0);
    assert_eq!(value("simdex_requests_total", &[("op", "insert_many")]), 1.0);
    assert_eq!(value("simdex_requests_total", &[("op", "compact")]), 0.0, "every op is listed, also unused ones");
    assert_eq!(value("simdex_errors_total", &[("op", "query"), ("status", "400")]), 1.0);
    assert_eq!(value("simdex_errors_total", &[("op", "insert"), ("status", "405")]), 1.0);
    assert_eq!(value("simdex_unrouted_requests_total", &[]), 1.0, "the 404");
    assert!(!samples.iter().any(|(n, l, _)| n == "simdex_errors_total" && l.get("op").is_some_and(|o| o == "insert_many")));
    // Histograms: cumulative buckets ending in +Inf, which equals _count; batch sizes.
    assert_eq!(types["simdex_request_duration_seconds"], "histogram");
    for op in ["insert", "query", "insert_many"] {
        let buckets: Vec<f64> = samples.iter().filter(|(n, l, _)| n == "simdex_request_duration_seconds_bucket" && l.get("op").is_some_and(|o| o == op)).map(|s| s.2).collect();
        assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "{op}: cumulative buckets {buckets:?}");
        let count = value("simdex_request_duration_seconds_count", &[("op", op)]);
        assert_eq!(value("simdex_request_duration_seconds_bucket", &[("op", op), ("le", "+Inf")]), count);
        assert_eq!(count, value("simdex_requests_total", &[("op", op)]));
        assert!(value("simdex_request_duration_seconds_sum", &[("op", op)]) > 0.0);
    }
    assert_eq!(value("simdex_batch_items_bucket", &[("op", "insert_many"), ("le", "1")]), 0.0);
    assert_eq!(value("simdex_batch_items_bucket", &[("op", "insert_many"), ("le", "10")]), 1.0);
    assert_eq!(value("simdex_batch_items_sum", &[("op", "query_many")]), 3.0);
    // The server's gauges and the index's.
    assert_eq!(value("simdex_connections", &[]), 1.0, "this connection");
    assert!(value("simdex_connections_total", &[]) >= 1.0);
    assert_eq!(value("simdex_in_flight_requests", &[]), 0.0);
    assert_eq!(value("simdex_overloaded_total", &[]), 0.0);
    assert_eq!(value("simdex_index_open", &[]), 1.0);
    assert_eq!(value("simdex_index_last_seq", &[]), 10.0, "7 adds and a batch of 3");
    assert_eq!(value("simdex_index_memtable_inserts", &[]), 10.0);
    assert_eq!(value("simdex_index_segments", &[]), 0.0);
    for gauge in ["simdex_index_segment_entries", "simdex_index_tombstones", "simdex_index_log_bytes", "simdex_index_flushed_seq", "simdex_index_background_error"] {
        assert_eq!(types.get(gauge).map(String::as_str), Some("gauge"), "{gauge}");
    }
    // A flush moves the inserts into a segment, and the gauges follow.
    c.ok("flush", json!({}));
    let (_, samples) = parse_prometheus(&c.get("/metrics").text());
    let after = |name: &str| samples.iter().find(|(n, l, _)| n == name && l.is_empty()).map(|s| s.2).unwrap();
    assert_eq!(after("simdex_index_segments"), 1.0);
    assert_eq!(after("simdex_index_segment_entries"), 10.0);
    assert_eq!(after("simdex_index_memtable_inserts"), 0.0);
    assert_eq!(after("simdex_index_flushed_seq"), 10.0);
    assert_eq!(after("simdex_index_flushes_total"), 1.0);
}
