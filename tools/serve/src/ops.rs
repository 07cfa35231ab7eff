//! Runs a decoded [`Request`] against the index (blocking: the server runs single
//! fingerprints on the connection's thread, the rest on the blocking pool) and encodes its answer, JSON or binary, as `format-spec/protocol.md`
//! specifies; maps the library's errors onto [`ApiError`]s.

use serde_json::{json, Value};
use simdex::{query_many, Grouped};
use simdex::{FindOrInsert, FindOrReplace, Match, QueryOptions};
use simdex_fingerprint::document::DocumentKind;
use simdex_fingerprint::many::{self, DocumentAnswer};
use simdex_fingerprint::{DocumentIndex, DocumentInput, DocumentQuery};

use crate::protocol::{ApiError, Doc, DocOptions, Op, Request};

/// An answer's body.
#[derive(Debug, PartialEq, Eq)]
pub enum Reply {
    /// `application/json`.
    Json(Vec<u8>),
    /// `application/octet-stream` (the binary batch form).
    Binary(Vec<u8>),
}

fn reply(v: Value) -> Reply {
    Reply::Json(serde_json::to_vec(&v).unwrap_or_default())
}

fn row(m: &Match) -> Value {
    json!([m.fingerprint, m.distance, m.doc_id])
}

fn rows(m: &[Match]) -> Value {
    Value::Array(m.iter().map(row).collect())
}

fn doc_rows(m: &[Match]) -> Value {
    Value::Array(m.iter().map(|d| json!([d.fingerprint, d.distance, d.doc_id, d.similarity])).collect())
}

fn doc_answer(a: &DocumentAnswer) -> Value {
    json!({"fingerprint": a.fingerprint, "matches": doc_rows(&a.matches), "words": a.words})
}

/// The answer of a check-then-replace: its outcome's name (`unchanged`, `found`, `inserted`,
/// `replaced`), the matches (`rows` of them), and the fingerprints the id held before a
/// replace (empty otherwise).
fn replace_answer(found: &FindOrReplace, rows: fn(&[Match]) -> Value) -> serde_json::Map<String, Value> {
    let previous: &[u64] = match found {
        FindOrReplace::Replaced { previous, .. } => previous,
        _ => &[],
    };
    let mut answer = serde_json::Map::new();
    answer.insert("outcome".into(), json!(found.name()));
    answer.insert("matches".into(), rows(found.matches()));
    answer.insert("previous".into(), json!(previous));
    answer
}

/// The binary form of a batch's answer: item count n and match count m (u64 each), then
/// m item positions (u64), m fingerprints (u64), m document ids (u64; 0 where none) and
/// m distances (u32), all little-endian.
pub fn binary_matches(g: &Grouped) -> Vec<u8> {
    let m = g.matches();
    let c = g.columns();
    let mut out = Vec::with_capacity(16 + m * 28);
    out.extend_from_slice(&(g.len() as u64).to_le_bytes());
    out.extend_from_slice(&(m as u64).to_le_bytes());
    for column in [c.items, c.fingerprints, c.doc_ids, c.distances] {
        out.extend_from_slice(&column);
    }
    out
}

/// The JSON answer of a batch, `{"matches": [[match...] per item]}`, written directly (a
/// tree of `Value`s cost about ten times the bytes of its text per match).
pub fn matches_json(g: &Grouped) -> Vec<u8> {
    use std::io::Write as _;
    let mut out = Vec::with_capacity(16 + 3 * g.len() + 48 * g.matches());
    out.extend_from_slice(b"{\"matches\":[");
    for (i, item) in g.items().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.push(b'[');
        for (j, m) in item.iter().enumerate() {
            if j > 0 {
                out.push(b',');
            }
            let _ = match m.doc_id {
                Some(id) => write!(out, "[{},{},{id}]", m.fingerprint, m.distance),
                None => write!(out, "[{},{},null]", m.fingerprint, m.distance),
            };
        }
        out.push(b']');
    }
    out.extend_from_slice(b"]}");
    out
}

fn grouped(g: &Grouped, binary: bool) -> Reply {
    if binary {
        Reply::Binary(binary_matches(g))
    } else {
        Reply::Json(matches_json(g))
    }
}

fn input(d: &Doc) -> DocumentInput<'_> {
    DocumentInput { bytes: &d.bytes, kind: if d.html { DocumentKind::Html } else { DocumentKind::Text } }
}

/// The document query of `o`: the library's [`DocumentQuery`] and its defaults (k = 8
/// confirmed by sketch, 3 by fingerprints alone).
fn document_query(o: &DocOptions) -> DocumentQuery {
    DocumentQuery::default().with_confirm(o.confirm.unwrap_or(true)).with_k(o.k).with_min_words(o.min_words.unwrap_or(0))
}

/// `find_or_insert` of each item in order (as `simdex::find_or_insert_many`), saying
/// how far it got when an item fails (a full disk): the error carries the items done and
/// their matches, so the client knows which were stored and sends only the rest again.
fn find_or_insert_each(index: &DocumentIndex, fps: &[u64], ids: &[u64], options: &QueryOptions) -> Result<Grouped, ApiError> {
    let mut out = Grouped::with_capacity(fps.len());
    for (&fp, &id) in fps.iter().zip(ids) {
        match index.find_or_insert(fp, id, options) {
            Ok(FindOrInsert::Found(m)) => out.push_item(m),
            Ok(FindOrInsert::Inserted { .. }) => out.push_item([]),
            Err(e) => {
                let done = out.len();
                let answers = (done > 0).then(|| Value::Array(out.items().map(rows).collect()));
                return Err(index_error(e).after(done, answers));
            }
        }
    }
    Ok(out)
}

/// Runs `request` against `index`.
pub fn execute(index: &DocumentIndex, request: Request) -> Result<Reply, ApiError> {
    let within = |k: Option<u32>| QueryOptions::within(k.unwrap_or_else(|| index.k()));
    Ok(match request {
        Request::Query { fp, k } => reply(json!({"matches": rows(&index.query(fp, &within(k)).map_err(index_error)?)})),
        Request::FindOrInsert { fp, doc_id, k } => {
            let matches = match index.find_or_insert(fp, doc_id, &within(k)).map_err(index_error)? {
                FindOrInsert::Found(m) => m,
                FindOrInsert::Inserted { .. } => Vec::new(),
            };
            reply(json!({"matches": rows(&matches)}))
        }
        Request::Insert { fp, doc_id } => reply(json!({"seq": index.insert(fp, doc_id).map_err(index_error)?})),
        Request::Delete { fp, doc_id } => reply(json!({"seq": index.delete(fp, doc_id).map_err(index_error)?})),
        Request::QueryMany { fps, k, binary } => grouped(&query_many(index, &fps, &within(k)).map_err(index_error)?, binary),
        Request::FindOrInsertMany { fps, doc_ids, k, binary } => grouped(&find_or_insert_each(index, &fps, &doc_ids, &within(k))?, binary),
        Request::InsertMany { fps, doc_ids } => {
            let records: Vec<(u64, Option<u64>)> = match doc_ids {
                Some(ids) => fps.iter().zip(ids).map(|(&f, i)| (f, Some(i))).collect(),
                None => fps.iter().map(|&f| (f, None)).collect(),
            };
            let seq = index.insert_many_numbered(&records).map_err(index_error)?;
            reply(json!({"count": records.len(), "seq": seq}))
        }
        Request::DeleteMany { fps, doc_ids } => {
            let pairs: Vec<simdex::Entry> = fps.into_iter().zip(doc_ids).map(simdex::Entry::from).collect();
            let seq = index.delete_many(&pairs).map_err(index_error)?;
            reply(json!({"count": pairs.len(), "seq": seq}))
        }
        Request::FingerprintDocument { doc } => reply(json!({"fingerprint": index.fingerprint_document(input(&doc)).map_err(fp_error)?.value})),
        Request::FingerprintDocuments { docs } => {
            let inputs: Vec<DocumentInput<'_>> = docs.iter().map(input).collect();
            let fps = many::fingerprint_documents(index, &inputs).map_err(|(i, e)| {
                let err = fp_error(e);
                ApiError { message: format!("document {i}: {}", err.message), ..err }
            })?;
            reply(json!({"fingerprints": fps}))
        }
        Request::InsertDocument { doc, doc_id } => reply(json!({"fingerprint": index.insert_document(input(&doc), doc_id).map_err(fp_error)?.value})),
        Request::QueryDocument { doc, options } => {
            let (f, matches) = index.query_document(input(&doc), &document_query(&options)).map_err(fp_error)?;
            reply(doc_answer(&DocumentAnswer { fingerprint: f.value, matches, words: f.words }))
        }
        Request::FindOrInsertDocument { doc, doc_id, options } => {
            let (f, found) = index.find_or_insert_document(input(&doc), doc_id, &document_query(&options)).map_err(fp_error)?;
            reply(doc_answer(&DocumentAnswer::new(&f, found)))
        }
        Request::FindOrInsertDocuments { docs, doc_ids, options } => {
            let inputs: Vec<DocumentInput<'_>> = docs.iter().map(input).collect();
            let outcome = |o: &many::DocumentOutcome| match o {
                Ok(a) => doc_answer(a),
                Err(e) => {
                    let err = fp_error_ref(e);
                    json!({"error": {"kind": err.kind, "message": err.message}})
                }
            };
            match many::find_or_insert_documents(index, &inputs, &doc_ids, &document_query(&options)) {
                Ok(outcomes) => reply(json!({"results": outcomes.iter().map(outcome).collect::<Vec<Value>>()})),
                // stopped part-way (a full disk): the error says how far it got
                Err(s) => return Err(fp_error(s.error).after_results(s.done.iter().map(outcome).collect())),
            }
        }
        Request::FingerprintsOf { doc_id } => reply(json!({"fingerprints": index.fingerprints_of(doc_id).map_err(index_error)?})),
        Request::Replace { fp, doc_id } => {
            let r = index.replace(fp, doc_id).map_err(index_error)?;
            reply(json!({"seq": r.seq, "previous": r.previous}))
        }
        Request::FindOrReplace { fp, doc_id, k } => reply(Value::Object(replace_answer(&index.find_or_replace(fp, doc_id, &within(k)).map_err(index_error)?, rows))),
        Request::FindOrReplaceDocument { doc, doc_id, options } => {
            let (f, found) = index.find_or_replace_document(input(&doc), doc_id, &document_query(&options)).map_err(fp_error)?;
            let mut answer = replace_answer(&found, doc_rows);
            answer.insert("fingerprint".into(), json!(f.value));
            answer.insert("words".into(), json!(f.words));
            reply(Value::Object(answer))
        }
        Request::LiveEntries => {
            let pairs = index.live_entries().map_err(index_error)?;
            Reply::Binary(pairs.iter().flat_map(|e| e.fingerprint.to_le_bytes().into_iter().chain(e.doc_id.to_le_bytes())).collect())
        }
        Request::Info => reply(json!({
            "path": index.dir(),
            "k": index.k(),
            "sketches": index.sketches().is_some(),
            "recipe": index.recipe().map(|r| r.descriptor()),
            "read_only": index.stats().read_only,
            "expire_after": index.stats().expiry.map(|x| x.window().as_secs()),
            "server": concat!("simdex-serve ", env!("CARGO_PKG_VERSION")),
            "operations": Op::ALL.iter().map(|o| o.name()).collect::<Vec<_>>(),
        })),
        Request::Stats => reply(stats(index)),
        Request::Sync => {
            index.sync().map_err(index_error)?;
            reply(json!({}))
        }
        Request::Flush => {
            index.flush().map_err(index_error)?;
            reply(json!({}))
        }
        Request::Compact => {
            index.compact().map_err(index_error)?;
            reply(json!({}))
        }
    })
}

/// The index's statistics: the library's summary, under the keys every front uses.
pub fn stats(index: &DocumentIndex) -> Value {
    use simdex::StatValue;
    let value = |v: StatValue| match v {
        StatValue::Int(n) => json!(n),
        StatValue::OptionalInt(n) => json!(n),
        StatValue::Bool(b) => json!(b),
        StatValue::Text(t) => json!(t),
        StatValue::List(l) => json!(l),
        _ => Value::Null,
    };
    Value::Object(index.stats_summary().into_iter().map(|(k, v)| (k.to_string(), value(v))).collect())
}

/// The status a library error answers with.
pub fn index_error(e: simdex::Error) -> ApiError {
    index_error_ref(&e)
}

fn index_error_ref(e: &simdex::Error) -> ApiError {
    error_of_kind(e.kind(), e.chain_message())
}

/// The status and `kind` of an error kind (`simdex::ErrorKind`, the library's one list);
/// `format-spec/protocol.md` lists them.
fn error_of_kind(kind: simdex::ErrorKind, msg: String) -> ApiError {
    use simdex::ErrorKind as K;
    match kind {
        // a writer that failed (also for want of space) stays failed until reopened, and
        // "recovering" is what makes the server reopen it
        K::WriterFailed => ApiError::new(503, "recovering", msg).retry_after(1),
        K::NoSpace => ApiError::new(507, "no_space", msg).retry_after(5),
        K::InvalidArgument => ApiError::new(400, "invalid_argument", msg),
        K::ReadOnly => ApiError::new(403, "read_only", msg),
        K::Corrupt => ApiError::new(500, "corrupt", msg),
        K::RecipeMismatch => ApiError::new(409, "recipe_mismatch", msg),
        K::EmptyDocument => ApiError::new(422, "empty_document", msg),
        K::BinaryDocument => ApiError::new(422, "binary_document", msg),
        _ => ApiError::new(500, "internal", msg),
    }
}

/// The status a document call's error answers with.
pub fn fp_error(e: simdex_fingerprint::Error) -> ApiError {
    fp_error_ref(&e)
}

fn fp_error_ref(e: &simdex_fingerprint::Error) -> ApiError {
    use simdex::ErrorKind as K;
    match e {
        simdex_fingerprint::Error::Index(e) => index_error_ref(e),
        e => {
            let kind = e.kind();
            let msg = if matches!(kind, K::EmptyDocument | K::BinaryDocument) { format!("document not fingerprinted: {e}") } else { e.to_string() };
            error_of_kind(kind, msg)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_of_a_batch_is_what_serde_json_renders() {
        let mut g = Grouped::with_capacity(3);
        let m = Match::new;
        g.push_item([m(u64::MAX, 0, Some(7)), m(3, 2, None)]);
        g.push_item([]);
        g.push_item([m(0, 1, Some(u64::MAX))]);
        let tree = json!({"matches": Value::Array(g.items().map(rows).collect())});
        assert_eq!(serde_json::from_slice::<Value>(&matches_json(&g)).unwrap(), tree);
        assert_eq!(matches_json(&Grouped::with_capacity(0)), br#"{"matches":[]}"#);
    }

    fn enospc() -> simdex::Error {
        simdex::Error::io("idx/log-000000000002.wal", "write", std::io::Error::from_raw_os_error(28))
    }

    #[test]
    fn a_full_disk_is_507_and_a_writer_it_failed_is_503_recovering() {
        let e = index_error(enospc());
        assert_eq!((e.status, e.kind, e.retry_after), (507, "no_space", Some(5)), "{}", e.message);
        assert!(e.message.contains("No space left on device"), "{}", e.message);
        let e = fp_error(simdex_fingerprint::Error::Index(enospc()));
        assert_eq!((e.status, e.kind), (507, "no_space"));
        // the writer refuses writes until reopened, whatever failed it: the server must reopen
        let failed = simdex::Error::WriterFailed { dir: "idx".into(), source: Box::new(enospc()) };
        let e = index_error(failed);
        assert_eq!((e.status, e.kind, e.retry_after), (503, "recovering", Some(1)), "{}", e.message);
        assert!(e.message.contains("No space left on device"), "the cause is named: {}", e.message);
        let other = simdex::Error::io("idx/x", "write", std::io::Error::from_raw_os_error(5));
        assert_eq!(index_error(other).status, 500);
    }
}
