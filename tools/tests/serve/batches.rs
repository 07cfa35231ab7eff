//! Writes from many clients and in batches: `find_or_insert` is atomic across connections
//! (one winner per fingerprint, every loser sees exactly the winner), and a batch answers as
//! its items would one by one, in order, JSON or binary, as a brute-force scan predicts.

use std::collections::BTreeSet;
use std::sync::{Arc, Barrier};

use serde_json::json;

use crate::support::{binary_items, brute, items, le, rows, stored_pairs, Client, Rng, Row, Server};

const CLIENTS: u64 = 8;

/// `n` random fingerprints, pairwise more than `k` bits apart (so that each is its own
/// near-duplicate class and the expected answers are exact).
fn far_apart(rng: &mut Rng, n: usize, k: u32) -> Vec<u64> {
    let mut fps: Vec<u64> = Vec::with_capacity(n);
    while fps.len() < n {
        let fp = rng.next();
        if fps.iter().all(|&f| (f ^ fp).count_ones() > k) {
            fps.push(fp);
        }
    }
    fps
}

/// Runs `send(client, t)` on `CLIENTS` threads, each with its own keep-alive connection,
/// released together; returns each thread's answer for each fingerprint.
fn race(server: &Server, send: impl Fn(&mut Client, u64) -> Vec<Vec<Row>> + Send + Sync + 'static) -> Vec<Vec<Vec<Row>>> {
    let barrier = Arc::new(Barrier::new(CLIENTS as usize));
    let send = Arc::new(send);
    let threads: Vec<_> = (0..CLIENTS)
        .map(|t| {
            let mut client = server.client();
            let (barrier, send) = (Arc::clone(&barrier), Arc::clone(&send));
            std::thread::spawn(move || {
                barrier.wait();
                send(&mut client, t)
            })
        })
        .collect();
    threads.into_iter().map(|h| h.join().unwrap()).collect()
}

/// Exactly one client inserted each fingerprint, every other one found exactly that pair,
/// and the index holds exactly that pair.
fn assert_one_winner(server: &Server, fps: &[u64], answers: &[Vec<Vec<Row>>], id: impl Fn(u64, usize) -> u64) {
    let mut winners = Vec::new();
    for (i, &fp) in fps.iter().enumerate() {
        let inserted: Vec<u64> = (0..CLIENTS).filter(|&t| answers[t as usize][i].is_empty()).collect();
        assert_eq!(inserted.len(), 1, "fingerprint {i} ({fp:016x}) was inserted by clients {inserted:?}");
        let winner = (fp, id(inserted[0], i));
        for t in 0..CLIENTS {
            if t != inserted[0] {
                assert_eq!(answers[t as usize][i], vec![(fp, 0, Some(winner.1))], "client {t} on fingerprint {i}: it finds the winner's pair, only");
            }
        }
        winners.push(winner);
    }
    let want: BTreeSet<(u64, u64)> = winners.into_iter().collect();
    assert_eq!(stored_pairs(&mut server.client(), fps), want, "the index holds one pair per fingerprint, the winner's");
}

#[test]
fn find_or_insert_is_atomic_across_clients() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("idx"), &[]);
    let mut rng = Rng(21);
    let fps = Arc::new(far_apart(&mut rng, 400, 3));
    let (single, batched) = (fps[..200].to_vec(), fps[200..].to_vec());

    // One request per fingerprint, all clients in the same order: they collide on each.
    let ids = |t: u64, i: usize| t * 1_000_000 + i as u64;
    let mine = single.clone();
    let answers = race(&server, move |c, t| mine.iter().enumerate().map(|(i, &fp)| rows(&c.ok("find_or_insert", json!({"fp": fp, "doc_id": ids(t, i)}))["matches"])).collect());
    assert_one_winner(&server, &single, &answers, ids);

    // The same through batches of 25, half the clients in JSON and half in binary.
    let ids = |t: u64, i: usize| 500_000_000 + t * 1_000_000 + i as u64;
    let mine = batched.clone();
    let answers = race(&server, move |c, t| {
        let mut out = Vec::new();
        for (n, part) in mine.chunks(25).enumerate() {
            let doc_ids: Vec<u64> = (0..part.len()).map(|j| ids(t, n * 25 + j)).collect();
            out.extend(if t % 2 == 0 {
                items(&c.ok("find_or_insert_many", json!({"fps": part, "doc_ids": doc_ids})))
            } else {
                binary_items(&c.binary("find_or_insert_many", "", &[part, &doc_ids].concat()))
            });
        }
        out
    });
    assert_one_winner(&server, &batched, &answers, ids);
}

/// Input with repeats, near-duplicates (1 to 3 bits off an earlier fingerprint, within the
/// default k = 3) and far ones (4 bits off: not matches), each with its own id.
fn tricky_input(rng: &mut Rng, n: usize) -> (Vec<u64>, Vec<u64>) {
    let mut fps: Vec<u64> = Vec::with_capacity(n);
    for i in 0..n {
        let earlier = |rng: &mut Rng, fps: &[u64]| fps[(rng.next() % fps.len() as u64) as usize];
        let fp = match (i, rng.next() % 6) {
            (0, _) | (_, 0 | 1) => rng.next(),
            (_, 2) => earlier(rng, &fps),
            (_, 3) => {
                let e = earlier(rng, &fps);
                let bits = 1 + (rng.next() % 3) as u32;
                rng.flip(e, bits)
            }
            (_, 4) => {
                let e = earlier(rng, &fps);
                rng.flip(e, 4)
            }
            _ => fps[i - 1],
        };
        fps.push(fp);
    }
    (fps, (0..n as u64).map(|i| 7_000 + i).collect())
}

/// What `find_or_insert` of each item in turn answers, by brute force; and what is stored.
fn oracle(fps: &[u64], ids: &[u64], k: u32) -> (Vec<Vec<Row>>, BTreeSet<(u64, u64)>) {
    let mut stored = BTreeSet::new();
    let answers = fps
        .iter()
        .zip(ids)
        .map(|(&fp, &id)| {
            let found = brute(&stored, fp, k);
            if found.is_empty() {
                stored.insert((fp, id));
            }
            found
        })
        .collect();
    (answers, stored)
}

#[test]
fn a_batch_answers_as_its_items_one_by_one_in_order() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let servers: Vec<Server> = dirs.iter().map(|d| Server::start(&d.path().join("idx"), &[])).collect();
    let mut rng = Rng(2);
    let (fps, ids) = tricky_input(&mut rng, 600);
    let (want, stored) = oracle(&fps, &ids, 3);
    assert!(want.iter().filter(|m| !m.is_empty()).count() > 200, "the input has many near-duplicates");
    assert!(want.iter().any(|m| m.len() > 1), "some items match several stored pairs");

    let mut one_by_one = servers[0].client();
    let single: Vec<Vec<Row>> = fps.iter().zip(&ids).map(|(&fp, &id)| rows(&one_by_one.ok("find_or_insert", json!({"fp": fp, "doc_id": id}))["matches"])).collect();
    // Batches cut at odd places, so that a repeat's first sight may be in an earlier batch.
    let cuts = [0, 1, 97, 350, 351, 600];
    let mut json_batched = Vec::new();
    let mut binary_batched = Vec::new();
    let (mut json_client, mut binary_client) = (servers[1].client(), servers[2].client());
    for w in cuts.windows(2) {
        let (f, i) = (&fps[w[0]..w[1]], &ids[w[0]..w[1]]);
        json_batched.extend(items(&json_client.ok("find_or_insert_many", json!({"fps": f, "doc_ids": i, "k": 3}))));
        binary_batched.extend(binary_items(&binary_client.binary("find_or_insert_many", "?k=3", &[f, i].concat())));
    }
    for (name, got) in [("one by one", &single), ("JSON batches", &json_batched), ("binary batches", &binary_batched)] {
        assert_eq!(got.len(), want.len(), "{name}: one answer per item");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "{name}: item {i} ({:016x})", fps[i]);
        }
    }
    let all: Vec<u64> = fps.iter().copied().collect::<BTreeSet<u64>>().into_iter().collect();
    for server in &servers {
        assert_eq!(stored_pairs(&mut server.client(), &all), stored, "the same pairs are stored");
    }

    // query_many against the brute-force scan: stored fingerprints, near and far ones, random.
    let mut queries: Vec<u64> = fps.iter().step_by(3).copied().collect();
    queries.extend(fps.iter().step_by(5).map(|&f| rng.flip(f, 2)));
    queries.extend(fps.iter().step_by(7).map(|&f| rng.flip(f, 4)));
    queries.extend((0..50).map(|_| rng.next()));
    let mut c = servers[1].client();
    for k in [0, 1, 3] {
        let want: Vec<Vec<Row>> = queries.iter().map(|&q| brute(&stored, q, k)).collect();
        assert!(want.iter().filter(|m| !m.is_empty()).count() > queries.len() / 3, "k = {k}: many queries match");
        assert_eq!(items(&c.ok("query_many", json!({"fps": queries, "k": k}))), want, "JSON query_many, k = {k}");
        assert_eq!(binary_items(&c.binary("query_many", &format!("?k={k}"), &queries)), want, "binary query_many, k = {k}");
        for (&q, w) in queries.iter().zip(&want).step_by(11) {
            assert_eq!(&rows(&c.ok("query", json!({"fp": q, "k": k}))["matches"]), w, "query {q:016x}, k = {k}");
        }
    }
    // Without k, the index's own k (3).
    assert_eq!(items(&c.ok("query_many", json!({"fps": queries}))), queries.iter().map(|&q| brute(&stored, q, 3)).collect::<Vec<_>>());
    // Deletes, batched (JSON on one server, binary on the other) and single, then a flush
    // and a compaction: the answers follow the brute-force scan of what is left.
    let doomed: Vec<(u64, u64)> = stored.iter().copied().step_by(3).collect();
    let (fps_d, ids_d): (Vec<u64>, Vec<u64>) = doomed.iter().copied().unzip();
    let mut b = servers[2].client();
    assert_eq!(c.ok("delete_many", json!({"fps": fps_d[1..], "doc_ids": ids_d[1..]}))["count"], doomed.len() - 1);
    b.binary("delete_many", "", &[&fps_d[1..], &ids_d[1..]].concat());
    for client in [&mut c, &mut b] {
        client.ok("delete", json!({"fp": fps_d[0], "doc_id": ids_d[0]}));
    }
    let left: BTreeSet<(u64, u64)> = stored.difference(&doomed.iter().copied().collect()).copied().collect();
    for (name, client) in [("JSON", &mut c), ("binary", &mut b)] {
        for step in ["deleted", "flush", "compact"] {
            if step != "deleted" {
                client.ok(step, json!({}));
            }
            let want: Vec<Vec<Row>> = queries.iter().map(|&q| brute(&left, q, 3)).collect();
            assert_eq!(items(&client.ok("query_many", json!({"fps": queries, "k": 3}))), want, "{name} deletes, after {step}");
        }
    }
    // Without ids, a batch's pairs take their sequence numbers as ids.
    let seq = c.ok("stats", json!({}))["last_seq"].as_u64().unwrap();
    let fresh = [0x5555_0000_0000_0001u64, 0x6666_0000_0000_0002];
    assert_eq!(c.ok("insert_many", json!({"fps": fresh})), json!({"count": 2, "seq": seq + 2}));
    assert_eq!(items(&c.ok("query_many", json!({"fps": fresh, "k": 0}))), vec![vec![(fresh[0], 0, Some(seq + 1))], vec![(fresh[1], 0, Some(seq + 2))]]);
    // The binary form needs a whole number of u64s; a binary find_or_insert_many an even one.
    let r = c.send("POST", "/v1/query_many", Some("application/octet-stream"), &le(&[1, 2])[..13]).unwrap();
    r.assert_error(400, "bad_request");
    let r = c.send("POST", "/v1/find_or_insert_many", Some("application/octet-stream"), &le(&[1, 2, 3])).unwrap();
    r.assert_error(400, "bad_request");
}

/// `n` documents of made-up words: new ones, exact repeats, near-duplicates (one word of a
/// hundred changed), and empty ones (refused item by item).
fn documents(rng: &mut Rng, n: usize) -> Vec<String> {
    let mut docs: Vec<String> = Vec::with_capacity(n);
    for i in 0..n {
        let earlier = |rng: &mut Rng, docs: &[String]| docs[(rng.next() % docs.len() as u64) as usize].clone();
        let doc = match (i, rng.next() % 5) {
            (0, _) | (_, 0 | 1) => (0..100).map(|_| format!("w{}", rng.next() % 5_000)).collect::<Vec<_>>().join(" "),
            (_, 2) => earlier(rng, &docs),
            (_, 3) => {
                let mut words: Vec<String> = earlier(rng, &docs).split(' ').map(str::to_owned).collect();
                let at = (rng.next() % words.len() as u64) as usize;
                words[at] = format!("changed{i}");
                words.join(" ")
            }
            _ if i % 10 == 4 => String::new(),
            _ => (0..100).map(|_| format!("w{}", rng.next() % 5_000)).collect::<Vec<_>>().join(" "),
        };
        docs.push(doc);
    }
    docs
}

#[test]
fn a_document_batch_answers_as_its_documents_one_by_one() {
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let servers: Vec<Server> = dirs.iter().map(|d| Server::start(&d.path().join("idx"), &[])).collect();
    let docs = documents(&mut Rng(8), 120);
    let ids: Vec<u64> = (1..=docs.len() as u64).collect();
    let as_json: Vec<serde_json::Value> = docs.iter().map(|d| json!({"text": d})).collect();

    let mut one = servers[0].client();
    let single: Vec<serde_json::Value> = as_json
        .iter()
        .zip(&ids)
        .map(|(d, id)| {
            let r = one.post("/v1/find_or_insert_document", &json!({"doc": d, "doc_id": id}));
            match r.status {
                200 => r.json(),
                _ => json!({"error": {"kind": r.error_kind()}}),
            }
        })
        .collect();
    let mut batch = servers[1].client();
    let mut batched = Vec::new();
    for (d, i) in as_json.chunks(50).zip(ids.chunks(50)) {
        let answer = batch.ok("find_or_insert_documents", json!({"docs": d, "doc_ids": i}));
        batched.extend(answer["results"].as_array().unwrap().iter().map(|r| match r.get("error") {
            Some(e) => json!({"error": {"kind": e["kind"]}}),
            None => r.clone(),
        }));
    }
    assert_eq!(batched.len(), single.len());
    for (i, (b, s)) in batched.iter().zip(&single).enumerate() {
        assert_eq!(b, s, "document {i}: batch and one by one differ");
    }
    let found = single.iter().filter(|a| a["matches"].as_array().is_some_and(|m| !m.is_empty())).count();
    let refused = single.iter().filter(|a| a.get("error").is_some()).count();
    assert!(found > 30 && refused > 0, "the input has {found} duplicates and {refused} refusals");
    // An exact repeat is found; of a document that was stored, it finds that one, at distance 0.
    for (i, d) in docs.iter().enumerate() {
        if let Some(first) = docs[..i].iter().position(|e| e == d && !e.is_empty()) {
            let m = single[i]["matches"].as_array().unwrap();
            let stored = single[first]["matches"].as_array().unwrap().is_empty();
            assert!(!m.is_empty() && (!stored || m.iter().any(|m| m[1] == 0 && m[2] == json!(ids[first]))), "document {i} repeats {first}: {}", single[i]);
        }
    }
    // fingerprint_documents equals fingerprint_document of each, and the answers' fingerprints.
    let some: Vec<serde_json::Value> = as_json.iter().zip(&docs).filter(|(_, d)| !d.is_empty()).map(|(j, _)| j.clone()).take(40).collect();
    let fps = batch.ok("fingerprint_documents", json!({"docs": some}))["fingerprints"].clone();
    let each: Vec<serde_json::Value> = some.iter().map(|d| one.ok("fingerprint_document", json!({"doc": d}))["fingerprint"].clone()).collect();
    assert_eq!(fps, serde_json::Value::Array(each));
}

#[test]
fn the_old_add_paths_are_the_same_operations() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("idx"), &[]);
    let mut c = server.client();
    assert_eq!(c.ok("add", json!({"fp": 1, "doc_id": 2})), json!({"seq": 1}));
    assert_eq!(c.ok("add_many", json!({"fps": [3, 4], "doc_ids": [5, 6]})), json!({"count": 2, "seq": 3}));
    assert_eq!(stored_pairs(&mut c, &[1, 3, 4]), [(1, 2), (3, 5), (4, 6)].into_iter().collect());
    let m = c.send("GET", "/metrics", None, b"").unwrap();
    assert!(m.text().contains("simdex_requests_total{op=\"insert\"} 1\n"), "counted under the new name: {}", m.text());
}
