use proptest::prelude::*;

use super::*;

fn post(op: Op, body: &str) -> Result<Request, ApiError> {
    decode(op, Some("application/json"), None, body.as_bytes())
}

#[test]
fn json_requests_decode_to_their_operations() {
    assert_eq!(post(Op::Query, r#"{"fp": 18446744073709551615, "k": 5}"#), Ok(Request::Query { fp: u64::MAX, k: Some(5) }));
    assert_eq!(post(Op::FindOrInsert, r#"{"fp": 1, "doc_id": 2}"#), Ok(Request::FindOrInsert { fp: 1, doc_id: 2, k: None }));
    assert_eq!(post(Op::InsertMany, r#"{"fps": [1, 2]}"#), Ok(Request::InsertMany { fps: vec![1, 2], doc_ids: None }));
    assert_eq!(post(Op::Stats, ""), Ok(Request::Stats));
    let doc = post(Op::FindOrInsertDocument, r#"{"doc": {"html_base64": "PHA+aGk8L3A+"}, "doc_id": 7, "k": 8, "confirm": false}"#).unwrap();
    assert_eq!(
        doc,
        Request::FindOrInsertDocument {
            doc: Doc { bytes: b"<p>hi</p>".to_vec(), html: true },
            doc_id: 7,
            options: DocOptions { k: Some(8), min_words: None, confirm: Some(false) }
        }
    );
}

#[test]
fn bad_requests_are_400_and_say_what_is_wrong() {
    let cases = [
        (Op::Query, "{", "request body"),
        (Op::Query, r#"{"fp": -1}"#, "invalid value"),
        (Op::Query, r#"{"fp": "12"}"#, "invalid type"),
        (Op::Query, r#"{"fp": 1.5}"#, "invalid type"),
        (Op::Query, r#"{"fp": 18446744073709551616}"#, "request body"),
        (Op::Query, r#"{"fp": 1, "doc_id": 2}"#, "takes no field \"doc_id\""),
        (Op::Query, r#"{"fp": 1, "colour": 2}"#, "unknown field"),
        (Op::FindOrInsert, r#"{"fp": 1}"#, "missing field \"doc_id\""),
        (Op::FindOrInsertMany, r#"{"fps": [1, 2], "doc_ids": [1]}"#, "differ in length"),
        (Op::InsertDocument, r#"{"doc": {"text": "a", "html": "b"}, "doc_id": 1}"#, "exactly one"),
        (Op::InsertDocument, r#"{"doc": {"html_base64": "!!"}, "doc_id": 1}"#, "not base64"),
        (Op::FingerprintDocument, r#"{"doc": {"text": "a"}, "k": 3}"#, "takes no k"),
    ];
    for (op, body, says) in cases {
        let e = post(op, body).unwrap_err();
        assert_eq!(e.status, 400, "{body}: {e:?}");
        assert!(e.message.contains(says), "{body}: {}", e.message);
    }
}

#[test]
fn the_binary_form_is_fingerprints_then_ids() {
    let body: Vec<u8> = [1u64, 2, 10, 20].iter().flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(decode(Op::FindOrInsertMany, Some(BINARY), Some("k=6"), &body), Ok(Request::FindOrInsertMany { fps: vec![1, 2], doc_ids: vec![10, 20], k: Some(6), binary: true }));
    assert_eq!(decode(Op::QueryMany, Some(BINARY), None, &body).map(|r| r.items()), Ok(4));
    assert_eq!(decode(Op::QueryMany, Some(BINARY), None, &body[..7]).unwrap_err().status, 400);
    assert_eq!(decode(Op::FindOrInsertMany, Some(BINARY), None, &body[..24]).unwrap_err().status, 400);
    assert_eq!(decode(Op::QueryMany, Some(BINARY), Some("k=x"), &body).unwrap_err().status, 400);
    assert_eq!(decode(Op::Query, Some(BINARY), None, &body).unwrap_err().status, 415);
    assert_eq!(decode(Op::Query, Some("text/plain"), None, b"{}").unwrap_err().status, 415);
}

#[test]
fn paths_name_operations() {
    for op in Op::ALL {
        assert_eq!(Op::from_path(&format!("/v1/{}", op.name())), Some(op));
        assert_eq!(Op::ALL[op.index()], op);
    }
    assert_eq!(Op::from_path("/v1/"), None);
    assert_eq!(Op::from_path("/v2/query"), None);
    assert_eq!(Op::from_path("/query"), None);
    // the old names (before "insert" was the one word for a write) are the same operations
    assert_eq!(Op::from_path("/v1/add"), Some(Op::Insert));
    assert_eq!(Op::from_path("/v1/add_many"), Some(Op::InsertMany));
    assert_eq!(Op::from_path("/v1/add_document"), Some(Op::InsertDocument));
}

/// The operation names a source file or page spells between `open` and `close`.
fn named_between(text: &str, open: &str, close: char) -> std::collections::BTreeSet<String> {
    text.split(open)
        .skip(1)
        .filter_map(|rest| rest.split(close).next())
        .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        .map(String::from)
        .collect()
}

fn repository_file(path: &str) -> String {
    let at = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(path);
    std::fs::read_to_string(&at).unwrap_or_else(|e| panic!("{}: {e}", at.display()))
}

#[test]
fn the_protocol_page_documents_exactly_the_table_s_operations() {
    let page = repository_file("format-spec/protocol.md");
    // the operations table: its rows start "| `name` |" (or "| `a`, `b`, `c` |")
    let mut documented = std::collections::BTreeSet::new();
    let table = page.split("| operation | request fields | answer |").nth(1).expect("the page's operations table");
    for row in table.lines().skip(2).take_while(|l| l.starts_with('|')) {
        let first = row.split('|').nth(1).unwrap_or("");
        documented.extend(named_between(first, "`", '`'));
    }
    let table: std::collections::BTreeSet<String> = Op::ALL.iter().map(|o| o.name().to_string()).collect();
    assert_eq!(documented, table, "format-spec/protocol.md's operations table and the server's table (tools/serve/src/operations.rs)");
    // and the old names it still answers
    for op in Op::ALL {
        for old in op.old_names() {
            assert!(page.contains(&format!("`{old}`")), "{old} (now {}) is not on the page", op.name());
        }
    }
}

#[test]
fn the_python_client_calls_only_operations_the_server_answers() {
    let client = repository_file("python/simdex/client.py");
    let called = named_between(&client, "self._call(\"", '"');
    assert!(called.len() >= 15, "the client's calls were found: {called:?}");
    for name in &called {
        assert!(
            Op::from_path(&format!("/v1/{name}")).is_some_and(|op| op.name() == name),
            "python/simdex/client.py calls {name:?}, which the server's table does not name (or names under another name now)"
        );
    }
}

#[test]
fn the_table_s_traits_hold_together() {
    for op in Op::ALL {
        assert!(!(op.gettable() && op.writes()), "{op:?}: a GET never writes");
        assert!(!(op.batch() && op.documents()), "{op:?}: a fingerprint batch takes no documents");
        assert!(!(op.single() && (op.batch() || op.documents())), "{op:?}: one fingerprint is neither a batch nor a document");
    }
    // what the routes relied on before the table
    assert!(Op::Query.single() && !Op::Query.writes() && Op::Insert.writes() && Op::Insert.single());
    assert!(Op::ALL.iter().filter(|o| o.batch()).count() == 4 && Op::QueryMany.batch() && !Op::QueryMany.writes());
    assert!(Op::Info.gettable() && Op::Stats.gettable() && Op::LiveEntries.gettable() && !Op::Sync.writes() && Op::Compact.writes());
}

proptest! {
    // Decoding never panics, and whatever it refuses is a 4xx with a message.
    #[test]
    fn decoding_arbitrary_bodies_never_panics(op in 0..Op::ALL.len(), body in proptest::collection::vec(any::<u8>(), 0..200), binary in any::<bool>(), query in proptest::option::of("[a-z=0-9&]{0,12}")) {
        let op = Op::ALL[op];
        let media = if binary { BINARY } else { "application/json" };
        if let Err(e) = decode(op, Some(media), query.as_deref(), &body) {
            prop_assert!((400..500).contains(&e.status));
            prop_assert!(!e.message.is_empty());
        }
    }

    // A fingerprint batch in JSON and in the binary form decodes to the same request.
    #[test]
    fn json_and_binary_batches_agree(pairs in proptest::collection::vec((any::<u64>(), any::<u64>()), 0..50), k in proptest::option::of(0u32..12)) {
        let (fps, ids): (Vec<u64>, Vec<u64>) = pairs.into_iter().unzip();
        let json = serde_json::json!({"fps": fps, "doc_ids": ids, "k": k}).to_string();
        let from_json = decode(Op::FindOrInsertMany, None, None, json.as_bytes()).unwrap();
        let binary: Vec<u8> = fps.iter().chain(&ids).flat_map(|v| v.to_le_bytes()).collect();
        let query = k.map(|k| format!("k={k}"));
        let from_binary = decode(Op::FindOrInsertMany, Some(BINARY), query.as_deref(), &binary).unwrap();
        prop_assert_eq!(from_json, Request::FindOrInsertMany { fps: fps.clone(), doc_ids: ids.clone(), k, binary: false });
        prop_assert_eq!(from_binary, Request::FindOrInsertMany { fps, doc_ids: ids, k, binary: true });
    }
}
