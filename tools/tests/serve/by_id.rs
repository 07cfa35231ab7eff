//! Documents by id through the server: `find_or_replace_document`, `find_or_replace`,
//! `replace` and `fingerprints_of` against a model map of id -> fingerprint (a page changed
//! 100 times leaves one entry), and a server killed with SIGKILL again and again while
//! clients replace pages: every id keeps its old version or its new one, never both or
//! neither.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{Rng, Server};

fn u64s(v: &Value) -> Vec<u64> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect()
}

/// A page of 60 words unlike every other `page(n)` (its words are drawn from `n`).
fn page(n: u64) -> String {
    let mut rng = Rng(n + 1);
    (0..60).map(|_| format!("w{}", rng.next() % 50_000)).collect::<Vec<_>>().join(" ")
}

#[test]
fn a_page_changed_100_times_through_the_server_leaves_one_entry() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("idx"), &[]);
    let mut c = server.client();
    let url = 0x7777_0000_0000_0001u64;
    // a neighbour that never changes
    let other = c.ok("find_or_replace_document", json!({"doc": {"text": page(999_999)}, "doc_id": 5}));
    assert_eq!(other["outcome"], "inserted");
    let mut stored: Option<u64> = None;
    for version in 0..=100u64 {
        let answer = c.ok("find_or_replace_document", json!({"doc": {"text": page(version)}, "doc_id": url}));
        let fp = answer["fingerprint"].as_u64().unwrap();
        match stored {
            None => assert_eq!(answer["outcome"], "inserted", "{answer}"),
            Some(old) => {
                assert_eq!(answer["outcome"], "replaced", "version {version}: {answer}");
                assert_eq!(u64s(&answer["previous"]), vec![old]);
            }
        }
        stored = Some(fp);
        // fetched again unchanged: a revisit, nothing written
        let seq = c.ok("stats", json!({}))["last_seq"].as_u64().unwrap();
        let again = c.ok("find_or_replace_document", json!({"doc": {"text": page(version)}, "doc_id": url}));
        assert_eq!(again["outcome"], "unchanged", "{again}");
        assert!(again["matches"].as_array().unwrap().iter().any(|m| m[2] == json!(url)), "{again}");
        assert_eq!(c.ok("stats", json!({}))["last_seq"].as_u64().unwrap(), seq);
        assert_eq!(u64s(&c.ok("fingerprints_of", json!({"doc_id": url}))["fingerprints"]), vec![fp]);
        if version % 40 == 39 {
            c.ok("compact", json!({}));
        }
    }
    // the oracle: every live pair, from the server's own dump
    let r = c.send("POST", "/v1/live_entries", None, b"").unwrap();
    let pairs: Vec<(u64, u64)> = r.body.chunks_exact(16).map(|b| (u64::from_le_bytes(b[..8].try_into().unwrap()), u64::from_le_bytes(b[8..].try_into().unwrap()))).collect();
    assert_eq!(pairs.len(), 2, "{pairs:?}");
    assert_eq!(pairs.iter().filter(|p| p.1 == url).map(|p| p.0).collect::<Vec<_>>(), vec![stored.unwrap()]);
    // a near-duplicate of the neighbour under a new id is found, and stores nothing
    let dup = c.ok("find_or_replace_document", json!({"doc": {"text": page(999_999)}, "doc_id": 6}));
    assert_eq!((dup["outcome"].clone(), dup["matches"][0][2].clone()), (json!("found"), json!(5)), "{dup}");
    assert!(u64s(&c.ok("fingerprints_of", json!({"doc_id": 6}))["fingerprints"]).is_empty());
    // the fingerprint-level calls
    assert_eq!(c.ok("find_or_replace", json!({"fp": 12345, "doc_id": 6}))["outcome"], "inserted");
    assert_eq!(c.ok("find_or_replace", json!({"fp": 12344, "doc_id": 6}))["outcome"], "unchanged");
    let r = c.ok("replace", json!({"fp": 999, "doc_id": 6}));
    assert_eq!(u64s(&r["previous"]), vec![12345]);
    assert_eq!(u64s(&c.ok("fingerprints_of", json!({"doc_id": 6}))["fingerprints"]), vec![999]);
    // bad requests are refused by name
    let bad = c.post("/v1/replace", &json!({"fp": 1, "doc_id": 2, "k": 3}));
    bad.assert_error(400, "bad_request");
    assert_eq!(bad.json()["error"]["message"], "replace: takes no field \"k\"", "{}", bad.text());
    c.post("/v1/fingerprints_of", &json!({"fp": 1})).assert_error(400, "bad_request");
}

/// The fingerprint of version `v` of page `id`.
fn version_fp(id: u64, v: u64) -> u64 {
    Rng(id.wrapping_mul(1_000_003).wrapping_add(v) | 1).next()
}

#[test]
fn kill_9_while_clients_replace_pages_keeps_each_pages_old_or_new_version() {
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("idx");
    const PAGES: u64 = 40;
    // per page: the last version acknowledged (versions start at 0, inserted first)
    let mut acked: BTreeMap<u64, u64> = BTreeMap::new();
    {
        let server = Server::start(&idx, &[]);
        let mut c = server.client();
        for id in 0..PAGES {
            c.ok("replace", json!({"fp": version_fp(id, 0), "doc_id": id}));
            acked.insert(id, 0);
        }
    }
    for round in 0..4u64 {
        let mut server = Server::start(&idx, &[]);
        let done = Arc::new(AtomicUsize::new(0));
        // two clients, each replacing its own pages again and again
        let clients: Vec<_> = (0..2u64)
            .map(|half| {
                let mut c = server.client();
                let mut mine: BTreeMap<u64, u64> = acked.iter().filter(|(id, _)| *id % 2 == half).map(|(&id, &v)| (id, v)).collect();
                let done = Arc::clone(&done);
                std::thread::spawn(move || {
                    for turn in 0.. {
                        let id = *mine.keys().nth(turn % mine.len()).unwrap();
                        let next = mine[&id] + 1;
                        match c.send("POST", "/v1/replace", Some("application/json"), json!({"fp": version_fp(id, next), "doc_id": id}).to_string().as_bytes()) {
                            Ok(r) => {
                                assert_eq!(r.status, 200, "{}", r.text());
                                assert_eq!(u64s(&r.json()["previous"]), vec![version_fp(id, next - 1)], "page {id}");
                                mine.insert(id, next);
                                done.fetch_add(1, Ordering::SeqCst);
                            }
                            // the kill: the write in flight may or may not be stored
                            Err(_) => return mine,
                        }
                    }
                    unreachable!()
                })
            })
            .collect();
        let started = Instant::now();
        let goal = 300 + 250 * round as usize;
        while done.load(Ordering::SeqCst) < goal {
            // a guard against a hang only (the goal is progress, not a rate)
            assert!(started.elapsed() < Duration::from_secs(900), "round {round}: only {} replaces in 900 s: {}", done.load(Ordering::SeqCst), server.log());
            std::thread::sleep(Duration::from_millis(1));
        }
        server.kill9();
        for c in clients {
            acked.extend(c.join().unwrap());
        }
        // after the kill: each page holds exactly one version, the acknowledged one or the one in flight
        let server = Server::start(&idx, &[]);
        let mut c = server.client();
        for (&id, v) in acked.iter_mut() {
            let held = u64s(&c.ok("fingerprints_of", json!({"doc_id": id}))["fingerprints"]);
            if held == vec![version_fp(id, *v + 1)] {
                *v += 1;
            }
            assert_eq!(held, vec![version_fp(id, *v)], "round {round}: page {id} after kill -9 (acknowledged version {v})");
        }
        let r = c.send("POST", "/v1/live_entries", None, b"").unwrap();
        assert_eq!(r.body.len() as u64, 16 * PAGES, "round {round}: one entry a page");
    }
}
