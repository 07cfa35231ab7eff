//! The wire protocol (`format-spec/protocol.md`): which operation a path names, how a
//! request body decodes into a [`Request`] (JSON, or the compact binary form of fingerprint
//! batches), and how errors map onto HTTP status codes ([`ApiError`]). Nothing here touches
//! the index or the network, so the decoding is tested (and fuzzed by a property test) alone.

use base64::Engine as _;
use serde::Deserialize;

pub use crate::operations::Op;

/// The media type of the binary batch form.
pub const BINARY: &str = "application/octet-stream";

/// A request the server refuses or fails, as the client sees it: a status code, a stable
/// `kind` and a message (body `{"error": {"kind": ..., "message": ...}}`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status code.
    pub status: u16,
    /// Stable machine-readable kind (`bad_request`, `not_found`, ...).
    pub kind: &'static str,
    /// What went wrong, for people.
    pub message: String,
    /// Seconds after which a retry may succeed (`Retry-After`), for 429, 503 and 507.
    pub retry_after: Option<u32>,
    /// A batch that stopped part-way: the items done (stored or found, as the call would
    /// have answered them) before the failure, and, for `find_or_insert_many`, their
    /// matches (`{"done": n, "matches": [...]}` beside `kind` and `message`).
    pub done: Option<(usize, Option<serde_json::Value>)>,
    /// For `find_or_insert_documents` stopped part-way: the done items' results
    /// (`{"done": n, "results": [...]}`, as in the answer). Boxed: errors are returned by
    /// value everywhere, and clippy's `result_large_err` bounds them at 128 bytes.
    pub results: Option<Box<serde_json::Value>>,
}

impl ApiError {
    /// An error without `Retry-After`.
    pub fn new(status: u16, kind: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, kind, message: message.into(), retry_after: None, done: None, results: None }
    }

    /// A 400: the request is malformed.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "bad_request", message)
    }

    /// The same, with `Retry-After: seconds`.
    pub fn retry_after(self, seconds: u32) -> Self {
        ApiError { retry_after: Some(seconds), ..self }
    }

    /// The same, for a batch that stopped after `done` items (with their answers).
    pub fn after(self, done: usize, answers: Option<serde_json::Value>) -> Self {
        ApiError { done: Some((done, answers)), ..self }
    }

    /// The same, for many documents that stopped after the items of `results`.
    pub fn after_results(self, results: Vec<serde_json::Value>) -> Self {
        ApiError { done: Some((results.len(), None)), results: Some(Box::new(serde_json::Value::Array(results))), ..self }
    }

    /// The JSON body.
    pub fn body(&self) -> Vec<u8> {
        let mut error = serde_json::Map::new();
        error.insert("kind".into(), self.kind.into());
        error.insert("message".into(), self.message.clone().into());
        if let Some((done, answers)) = &self.done {
            error.insert("done".into(), (*done).into());
            if let Some(a) = answers {
                error.insert("matches".into(), a.clone());
            }
            if let Some(r) = &self.results {
                error.insert("results".into(), (**r).clone());
            }
        }
        serde_json::to_vec(&serde_json::json!({ "error": error })).unwrap_or_default()
    }
}

/// A document as a request carries it: exactly one of the four fields.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct DocumentJson {
    text: Option<String>,
    html: Option<String>,
    text_base64: Option<String>,
    html_base64: Option<String>,
}

/// A decoded document: its bytes, and whether they are HTML.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Doc {
    /// The bytes (invalid UTF-8 is replaced when fingerprinted).
    pub bytes: Vec<u8>,
    /// HTML (fingerprinted by its visible text) rather than plain text.
    pub html: bool,
}

impl TryFrom<DocumentJson> for Doc {
    type Error = ApiError;

    fn try_from(d: DocumentJson) -> Result<Doc, ApiError> {
        let b64 =
            |s: String, field: &str| base64::engine::general_purpose::STANDARD.decode(s).map_err(|e| ApiError::bad_request(format!("document field {field:?}: not base64: {e}")));
        match (d.text, d.html, d.text_base64, d.html_base64) {
            (Some(t), None, None, None) => Ok(Doc { bytes: t.into_bytes(), html: false }),
            (None, Some(h), None, None) => Ok(Doc { bytes: h.into_bytes(), html: true }),
            (None, None, Some(t), None) => Ok(Doc { bytes: b64(t, "text_base64")?, html: false }),
            (None, None, None, Some(h)) => Ok(Doc { bytes: b64(h, "html_base64")?, html: true }),
            _ => Err(ApiError::bad_request("a document is an object with exactly one of \"text\", \"html\", \"text_base64\", \"html_base64\"")),
        }
    }
}

/// How the document calls judge a document; `None` fields take the server's defaults
/// (the library's: k = 8 confirmed by sketch, 3 unconfirmed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DocOptions {
    /// Largest distance.
    pub k: Option<u32>,
    /// Refuse shorter documents.
    pub min_words: Option<u64>,
    /// Confirm candidates by sketch (default true).
    pub confirm: Option<bool>,
}

/// A decoded request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    Query {
        fp: u64,
        k: Option<u32>,
    },
    FindOrInsert {
        fp: u64,
        doc_id: u64,
        k: Option<u32>,
    },
    Insert {
        fp: u64,
        doc_id: u64,
    },
    Delete {
        fp: u64,
        doc_id: u64,
    },
    /// `binary`: answer in the binary form.
    QueryMany {
        fps: Vec<u64>,
        k: Option<u32>,
        binary: bool,
    },
    FindOrInsertMany {
        fps: Vec<u64>,
        doc_ids: Vec<u64>,
        k: Option<u32>,
        binary: bool,
    },
    /// Without ids, each fingerprint's id is its insert's sequence number.
    InsertMany {
        fps: Vec<u64>,
        doc_ids: Option<Vec<u64>>,
    },
    DeleteMany {
        fps: Vec<u64>,
        doc_ids: Vec<u64>,
    },
    FingerprintDocument {
        doc: Doc,
    },
    FingerprintDocuments {
        docs: Vec<Doc>,
    },
    InsertDocument {
        doc: Doc,
        doc_id: u64,
    },
    QueryDocument {
        doc: Doc,
        options: DocOptions,
    },
    FindOrInsertDocument {
        doc: Doc,
        doc_id: u64,
        options: DocOptions,
    },
    FindOrInsertDocuments {
        docs: Vec<Doc>,
        doc_ids: Vec<u64>,
        options: DocOptions,
    },
    FingerprintsOf {
        doc_id: u64,
    },
    Replace {
        fp: u64,
        doc_id: u64,
    },
    FindOrReplace {
        fp: u64,
        doc_id: u64,
        k: Option<u32>,
    },
    FindOrReplaceDocument {
        doc: Doc,
        doc_id: u64,
        options: DocOptions,
    },
    LiveEntries,
    Info,
    Stats,
    Sync,
    Flush,
    Compact,
}

impl Request {
    /// Items in the request (1 for single calls): the batch-size metric.
    pub fn items(&self) -> usize {
        match self {
            Request::QueryMany { fps, .. } | Request::FindOrInsertMany { fps, .. } | Request::InsertMany { fps, .. } | Request::DeleteMany { fps, .. } => fps.len(),
            Request::FingerprintDocuments { docs } | Request::FindOrInsertDocuments { docs, .. } => docs.len(),
            _ => 1,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FpJson {
    fp: u64,
    doc_id: Option<u64>,
    k: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IdJson {
    doc_id: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ManyJson {
    fps: Vec<u64>,
    doc_ids: Option<Vec<u64>>,
    k: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DocJson {
    doc: Option<DocumentJson>,
    docs: Option<Vec<DocumentJson>>,
    doc_id: Option<u64>,
    doc_ids: Option<Vec<u64>>,
    k: Option<u32>,
    min_words: Option<u64>,
    confirm: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

fn json<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, ApiError> {
    let body = if body.iter().all(u8::is_ascii_whitespace) { b"{}".as_slice() } else { body };
    serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("request body: {e}")))
}

fn required<T>(v: Option<T>, field: &str, op: Op) -> Result<T, ApiError> {
    v.ok_or_else(|| ApiError::bad_request(format!("{}: missing field {field:?}", op.name())))
}

fn refuse<T>(v: &Option<T>, field: &str, op: Op) -> Result<(), ApiError> {
    match v {
        Some(_) => Err(ApiError::bad_request(format!("{}: takes no field {field:?}", op.name()))),
        None => Ok(()),
    }
}

fn same_length(a: usize, b: usize, what: &str) -> Result<(), ApiError> {
    if a == b {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!("{what} differ in length ({a} and {b})")))
    }
}

/// The little-endian u64s of a binary body.
fn u64s(body: &[u8]) -> Result<Vec<u64>, ApiError> {
    if body.len() % 8 != 0 {
        return Err(ApiError::bad_request(format!("binary body of {} bytes: not a whole number of u64s", body.len())));
    }
    Ok(body.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default())).collect())
}

/// The `k` of a query string (`k=8`; nothing else is allowed).
fn query_k(query: Option<&str>) -> Result<Option<u32>, ApiError> {
    let mut k = None;
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("k", v)) => k = Some(v.parse().map_err(|_| ApiError::bad_request(format!("query parameter k={v:?}: not a distance")))?),
            _ => return Err(ApiError::bad_request(format!("unknown query parameter {pair:?} (only k=N)"))),
        }
    }
    Ok(k)
}

/// The request `op` makes of `body`, sent with media type `content_type` and URL query
/// `query`.
pub fn decode(op: Op, content_type: Option<&str>, query: Option<&str>, body: &[u8]) -> Result<Request, ApiError> {
    let media = content_type.map(|c| c.split(';').next().unwrap_or("").trim().to_ascii_lowercase());
    let binary = match media.as_deref() {
        // (curl -d sends its default form type: read as JSON, so `curl -d '{...}'` works)
        None | Some("application/json" | "application/x-www-form-urlencoded") => false,
        Some(BINARY) => true,
        Some(other) => return Err(ApiError::new(415, "unsupported_media_type", format!("Content-Type {other:?}: send application/json (or {BINARY} for a fingerprint batch)"))),
    };
    if binary {
        return decode_binary(op, query, body);
    }
    if query.is_some_and(|q| !q.is_empty()) {
        return Err(ApiError::bad_request("a JSON request takes its arguments in the body, not the URL"));
    }
    Ok(match op {
        Op::FingerprintsOf => {
            let r: IdJson = json(body)?;
            Request::FingerprintsOf { doc_id: r.doc_id }
        }
        Op::Query | Op::FindOrInsert | Op::Insert | Op::Delete | Op::Replace | Op::FindOrReplace => {
            let r: FpJson = json(body)?;
            match op {
                Op::Query => {
                    refuse(&r.doc_id, "doc_id", op)?;
                    Request::Query { fp: r.fp, k: r.k }
                }
                Op::FindOrInsert => Request::FindOrInsert { fp: r.fp, doc_id: required(r.doc_id, "doc_id", op)?, k: r.k },
                Op::FindOrReplace => Request::FindOrReplace { fp: r.fp, doc_id: required(r.doc_id, "doc_id", op)?, k: r.k },
                Op::Replace => {
                    refuse(&r.k, "k", op)?;
                    Request::Replace { fp: r.fp, doc_id: required(r.doc_id, "doc_id", op)? }
                }
                _ => {
                    refuse(&r.k, "k", op)?;
                    let doc_id = required(r.doc_id, "doc_id", op)?;
                    if op == Op::Insert {
                        Request::Insert { fp: r.fp, doc_id }
                    } else {
                        Request::Delete { fp: r.fp, doc_id }
                    }
                }
            }
        }
        Op::QueryMany | Op::FindOrInsertMany | Op::InsertMany | Op::DeleteMany => {
            let r: ManyJson = json(body)?;
            if let Some(ids) = &r.doc_ids {
                same_length(r.fps.len(), ids.len(), "fps and doc_ids")?;
            }
            match op {
                Op::QueryMany => {
                    refuse(&r.doc_ids, "doc_ids", op)?;
                    Request::QueryMany { fps: r.fps, k: r.k, binary: false }
                }
                Op::FindOrInsertMany => Request::FindOrInsertMany { doc_ids: required(r.doc_ids, "doc_ids", op)?, fps: r.fps, k: r.k, binary: false },
                Op::InsertMany => {
                    refuse(&r.k, "k", op)?;
                    Request::InsertMany { fps: r.fps, doc_ids: r.doc_ids }
                }
                _ => {
                    refuse(&r.k, "k", op)?;
                    Request::DeleteMany { doc_ids: required(r.doc_ids, "doc_ids", op)?, fps: r.fps }
                }
            }
        }
        Op::FingerprintDocument
        | Op::FingerprintDocuments
        | Op::InsertDocument
        | Op::QueryDocument
        | Op::FindOrInsertDocument
        | Op::FindOrInsertDocuments
        | Op::FindOrReplaceDocument => decode_documents(op, json(body)?)?,
        Op::LiveEntries | Op::Info | Op::Stats | Op::Sync | Op::Flush | Op::Compact => {
            let Empty {} = json(body)?;
            match op {
                Op::LiveEntries => Request::LiveEntries,
                Op::Info => Request::Info,
                Op::Stats => Request::Stats,
                Op::Sync => Request::Sync,
                Op::Flush => Request::Flush,
                _ => Request::Compact,
            }
        }
    })
}

fn decode_documents(op: Op, r: DocJson) -> Result<Request, ApiError> {
    let options = DocOptions { k: r.k, min_words: r.min_words, confirm: r.confirm };
    let single = matches!(op, Op::FingerprintDocument | Op::InsertDocument | Op::QueryDocument | Op::FindOrInsertDocument | Op::FindOrReplaceDocument);
    if single {
        refuse(&r.docs, "docs", op)?;
        refuse(&r.doc_ids, "doc_ids", op)?;
    } else {
        refuse(&r.doc, "doc", op)?;
        refuse(&r.doc_id, "doc_id", op)?;
    }
    let judged = matches!(op, Op::QueryDocument | Op::FindOrInsertDocument | Op::FindOrInsertDocuments | Op::FindOrReplaceDocument);
    if !judged && options != DocOptions::default() {
        return Err(ApiError::bad_request(format!("{}: takes no k, min_words or confirm", op.name())));
    }
    if op == Op::QueryDocument {
        refuse(&r.doc_id, "doc_id", op)?;
        refuse(&r.min_words, "min_words", op)?;
    }
    if op == Op::FingerprintDocument {
        refuse(&r.doc_id, "doc_id", op)?;
    }
    if op == Op::FingerprintDocuments {
        refuse(&r.doc_ids, "doc_ids", op)?;
    }
    let doc = |r: Option<DocumentJson>| required(r, "doc", op).and_then(Doc::try_from);
    let docs = |r: Option<Vec<DocumentJson>>| required(r, "docs", op)?.into_iter().map(Doc::try_from).collect::<Result<Vec<Doc>, ApiError>>();
    Ok(match op {
        Op::FingerprintDocument => Request::FingerprintDocument { doc: doc(r.doc)? },
        Op::InsertDocument => Request::InsertDocument { doc: doc(r.doc)?, doc_id: required(r.doc_id, "doc_id", op)? },
        Op::QueryDocument => Request::QueryDocument { doc: doc(r.doc)?, options },
        Op::FindOrInsertDocument => Request::FindOrInsertDocument { doc: doc(r.doc)?, doc_id: required(r.doc_id, "doc_id", op)?, options },
        Op::FindOrReplaceDocument => Request::FindOrReplaceDocument { doc: doc(r.doc)?, doc_id: required(r.doc_id, "doc_id", op)?, options },
        Op::FingerprintDocuments => Request::FingerprintDocuments { docs: docs(r.docs)? },
        _ => {
            let docs = docs(r.docs)?;
            let doc_ids = required(r.doc_ids, "doc_ids", op)?;
            same_length(docs.len(), doc_ids.len(), "docs and doc_ids")?;
            Request::FindOrInsertDocuments { docs, doc_ids, options }
        }
    })
}

/// The binary form: the body is little-endian u64s (the fingerprints, then, for calls
/// that take ids, as many ids), `k` in the URL query.
fn decode_binary(op: Op, query: Option<&str>, body: &[u8]) -> Result<Request, ApiError> {
    let k = query_k(query)?;
    let values = u64s(body)?;
    let halves = |values: Vec<u64>| {
        if values.len() % 2 != 0 {
            return Err(ApiError::bad_request(format!("{}: a binary body of fingerprints then ids has an even number of u64s, not {}", op.name(), values.len())));
        }
        let mut fps = values;
        let ids = fps.split_off(fps.len() / 2);
        Ok((fps, ids))
    };
    let no_k = |k: Option<u32>| if k.is_some() { Err(ApiError::bad_request(format!("{}: takes no k", op.name()))) } else { Ok(()) };
    Ok(match op {
        Op::QueryMany => Request::QueryMany { fps: values, k, binary: true },
        Op::FindOrInsertMany => {
            let (fps, doc_ids) = halves(values)?;
            Request::FindOrInsertMany { fps, doc_ids, k, binary: true }
        }
        Op::InsertMany => {
            no_k(k)?;
            let (fps, doc_ids) = halves(values)?;
            Request::InsertMany { fps, doc_ids: Some(doc_ids) }
        }
        Op::DeleteMany => {
            no_k(k)?;
            let (fps, doc_ids) = halves(values)?;
            Request::DeleteMany { fps, doc_ids }
        }
        _ => {
            return Err(ApiError::new(
                415,
                "unsupported_media_type",
                format!("{}: the binary form is for {}; send JSON", op.name(), Op::ALL.iter().filter(|o| o.batch()).map(|o| o.name()).collect::<Vec<_>>().join(", ")),
            ))
        }
    })
}

#[cfg(test)]
#[path = "protocol_tests.rs"]
mod tests;
