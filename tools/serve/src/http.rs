//! One HTTP request, from its head to its answer: routing (`/health`, `/metrics`,
//! `/v1/<op>`), the token, the bounds on work in flight and its memory (taken before the
//! body is read), the body's size and time limits, decoding, the index call (here or on the
//! blocking pool), metrics and logs.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::json;

use simdex::Durability;

use crate::access::authorized;
use crate::limits;
use crate::log::log;
use crate::ops::{self, Reply};
use crate::protocol::{self, ApiError, Op};
use crate::state::Shared;

const KEEP_ALIVE: hyper::header::HeaderName = hyper::header::HeaderName::from_static("keep-alive");

/// A response body.
pub type Body = Full<Bytes>;

fn respond(status: u16, content_type: &'static str, body: Vec<u8>) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// The response of an error.
pub fn error_response(e: &ApiError) -> Response<Body> {
    let mut r = respond(e.status, "application/json", e.body());
    if let Some(s) = e.retry_after {
        r.headers_mut().insert(RETRY_AFTER, HeaderValue::from(s));
    }
    if e.status == 401 {
        r.headers_mut().insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    if e.status == 405 {
        r.headers_mut().insert(ALLOW, HeaderValue::from_static("POST"));
    }
    r
}

/// Answers `req` (never fails: every failure is an error response).
pub async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let path = req.uri().path().to_owned();
    let mut response = match path.as_str() {
        "/health" => health(&shared),
        _ => match route(&shared, req, &path).await {
            Ok(r) => r,
            Err((op, started, items, e)) => {
                match op {
                    Some(op) => shared.metrics.observe_outcome(op, started.elapsed(), items, e.status, Some(e.kind)),
                    None => {
                        shared.metrics.unrouted.fetch_add(1, Ordering::Relaxed);
                    }
                }
                if e.status >= 500 || shared.options.log_requests {
                    log(if e.status >= 500 { "error" } else { "info" }, "request_failed", json!({"path": path, "status": e.status, "kind": e.kind, "message": e.message}));
                }
                error_response(&e)
            }
        },
    };
    response.headers_mut().insert(KEEP_ALIVE, shared.keep_alive.clone());
    Ok(response)
}

/// `/health`: 200 once the index is open and while it serves; 503 while it opens,
/// recovers or shuts down.
fn health(shared: &Shared) -> Response<Body> {
    let status = if shared.stopping.load(Ordering::SeqCst) {
        "stopping"
    } else if shared.recovering() {
        "recovering"
    } else if shared.index().is_none() {
        "starting"
    } else {
        "ready"
    };
    let code = if status == "ready" { 200 } else { 503 };
    // a full disk leaves the server ready for queries; writes are answered 507 meanwhile
    let body = json!({"status": status, "no_space": shared.no_space.load(Ordering::Relaxed)});
    respond(code, "application/json", serde_json::to_vec(&body).unwrap_or_default())
}

type Failure = (Option<Op>, Instant, usize, ApiError);

async fn route(shared: &Arc<Shared>, req: Request<Incoming>, path: &str) -> Result<Response<Body>, Failure> {
    let started = Instant::now();
    let fail = |op: Option<Op>, e: ApiError| (op, started, 0, e);
    if let Some(token) = &shared.options.token {
        if !authorized(req.headers().get(AUTHORIZATION).map(HeaderValue::as_bytes), token) {
            return Err(fail(None, ApiError::new(401, "unauthorized", "this server needs the header `Authorization: Bearer TOKEN` (see --token-file)")));
        }
    }
    if path == "/metrics" {
        if req.method() != Method::GET {
            return Err(fail(None, ApiError::new(405, "method_not_allowed", "GET /metrics")));
        }
        let stats = shared.index().map(|i| ops::stats(&i));
        return Ok(respond(200, "text/plain; version=0.0.4", shared.metrics.render(stats.as_ref()).into_bytes()));
    }
    let Some(op) = Op::from_path(path) else {
        return Err(fail(None, ApiError::new(404, "not_found", format!("no such path {path:?}: operations are POST /v1/<operation> (format-spec/protocol.md)"))));
    };
    if !(req.method() == Method::POST || (req.method() == Method::GET && op.gettable())) {
        return Err(fail(Some(op), ApiError::new(405, "method_not_allowed", format!("{} {path}: use POST", req.method()))));
    }
    if shared.stopping.load(Ordering::SeqCst) {
        return Err(fail(Some(op), ApiError::new(503, "stopping", "the server is shutting down").retry_after(1)));
    }
    if shared.options.read_only && op.writes() {
        return Err(fail(Some(op), ApiError::new(403, "read_only", format!("{}: this server is read-only (--read-only)", op.name()))));
    }
    let max = shared.options.max_body;
    let declared = req.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(fail(Some(op), too_large(max)));
    }
    // The bounds on work in flight and on its memory, taken before the body is read (a
    // body without a length is charged as the largest allowed): refuse at once rather than
    // queue without bound.
    let content_type = req.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let query = req.uri().query().map(str::to_owned);
    let incoming = req.into_body();
    let Ok(_permit) = shared.permits.try_acquire() else {
        let e = overloaded(shared, format!("{} requests are in flight (--max-in-flight)", shared.options.max_in_flight));
        return Err(fail(Some(op), refuse_unread(shared, incoming, e).await));
    };
    let body_bound = declared.map_or(max, |n| usize::try_from(n).unwrap_or(max));
    let charge = limits::charge(body_bound, op.documents());
    if charge > shared.options.max_memory {
        let most = shared.options.max_memory / (charge / body_bound.max(1)).max(1);
        return Err(fail(
            Some(op),
            ApiError::new(
                413,
                "too_large",
                format!(
                    "a body of {body_bound} bytes would need {} MiB of the server's memory budget (--max-memory-mib {}): {} takes at most {most} bytes",
                    charge >> 20,
                    shared.options.max_memory >> 20,
                    op.name()
                ),
            ),
        ));
    }
    let Ok(_memory) = shared.memory.try_acquire_many(limits::units(charge)) else {
        let e = overloaded(shared, format!("the requests in flight hold the memory budget (--max-memory-mib {})", shared.options.max_memory >> 20));
        return Err(fail(Some(op), refuse_unread(shared, incoming, e).await));
    };
    let _gauge = Gauge::up(&shared.metrics.in_flight);
    let body = tokio::select! {
        biased;
        b = tokio::time::timeout(shared.options.body_timeout, Limited::new(incoming, max).collect()) => b,
        () = shared.stopped() => return Err(fail(Some(op), ApiError::new(503, "stopping", "the server is shutting down (the request body had not all arrived)").retry_after(1))),
    };
    let body = match body {
        Err(_) => return Err(fail(Some(op), ApiError::new(408, "timeout", format!("the request body did not arrive within {:?}", shared.options.body_timeout)))),
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => return Err(fail(Some(op), too_large(max))),
        Ok(Err(e)) => return Err(fail(Some(op), ApiError::bad_request(format!("reading the request body: {e}")))),
        Ok(Ok(b)) => b.to_bytes(),
    };
    // A single fingerprint's call takes microseconds: this thread decodes and runs it (a hop
    // to the blocking pool and back cost more than the call). Large bodies, batches,
    // documents, fsyncs and whole-index work run on the blocking pool, and so do writes that
    // wait for an fsync.
    let (items, outcome) = if runs_here(op, shared.options.durability) && body.len() <= INLINE_BODY {
        work(shared, op, content_type.as_deref(), query.as_deref(), body)
    } else {
        // (the call runs to its end even when the client goes away meanwhile)
        let task_shared = Arc::clone(shared);
        tokio::task::spawn_blocking(move || work(&task_shared, op, content_type.as_deref(), query.as_deref(), body))
            .await
            .unwrap_or_else(|e| (0, Err(ApiError::new(500, "internal", format!("the operation panicked: {e}")))))
    };
    match outcome {
        Ok(reply) => {
            shared.metrics.observe(op, started.elapsed(), items, 200);
            if op.writes() {
                shared.no_space.store(false, Ordering::Relaxed);
            }
            Ok(match reply {
                Reply::Json(b) => respond(200, "application/json", b),
                Reply::Binary(b) => respond(200, protocol::BINARY, b),
            })
        }
        Err(e) => {
            if e.kind == "recovering" {
                shared.recover();
            }
            if e.status == 507 {
                shared.no_space.store(true, Ordering::Relaxed);
            }
            Err((Some(op), started, items, e))
        }
    }
}

/// Bodies up to this size may be decoded on the connection's thread (a single
/// fingerprint's call is a few dozen bytes).
const INLINE_BODY: usize = 4 << 10;

/// Decodes `body` as `op`'s request and runs it: the items it carried (0 when it did not
/// decode) and the answer. The index is looked up after decoding, so a malformed request
/// is told so also while the index opens.
fn work(shared: &Shared, op: Op, content_type: Option<&str>, query: Option<&str>, body: Bytes) -> (usize, Result<Reply, ApiError>) {
    let request = match protocol::decode(op, content_type, query, &body) {
        Ok(r) => r,
        Err(e) => return (0, Err(e)),
    };
    drop(body);
    let items = request.items();
    let _items_memory = match charge_items(shared, op, items) {
        Ok(permit) => permit,
        Err(e) => return (items, Err(e)),
    };
    let Some(index) = shared.index() else {
        let e = if shared.recovering() {
            ApiError::new(503, "recovering", "the index is being reopened after its writer failed")
        } else {
            ApiError::new(503, "starting", "the index is not open yet")
        };
        return (items, Err(e.retry_after(1)));
    };
    (items, ops::execute(&index, request))
}

/// A fingerprint batch's share of the memory budget for its items (`limits::ITEM_CHARGE`),
/// taken once its body is decoded: 503 `overloaded` when too little is left, 413 when the
/// batch needs more than the whole budget.
fn charge_items(shared: &Shared, op: Op, items: usize) -> Result<Option<tokio::sync::SemaphorePermit<'_>>, ApiError> {
    if !op.batch() {
        return Ok(None);
    }
    let bytes = limits::items_charge(items);
    if bytes > shared.options.max_memory {
        let most = shared.options.max_memory / limits::ITEM_CHARGE;
        return Err(ApiError::new(
            413,
            "too_large",
            format!("{items} items need {} MiB of the server's memory budget (--max-memory-mib {}): send at most {most} a batch", bytes >> 20, shared.options.max_memory >> 20),
        ));
    }
    match shared.memory.try_acquire_many(limits::units(bytes)) {
        Ok(permit) => Ok(Some(permit)),
        Err(_) => Err(overloaded(shared, format!("the requests in flight hold the memory budget (--max-memory-mib {})", shared.options.max_memory >> 20))),
    }
}

/// True for the calls the connection's thread runs itself: single fingerprints (and
/// `info`), unless a write waits for an fsync (`Durability::Sync`).
fn runs_here(op: Op, durability: Durability) -> bool {
    op.single() && !(op.writes() && durability == Durability::Sync)
}

/// `e`, once the body of the request it refuses has arrived, read and dropped piece by
/// piece (holding no memory): a connection closed with unread data in it is reset, and a
/// reset can overtake the answer, so the client would not know the server did nothing.
/// Gives up after `--body-timeout` or at shutdown (then the connection closes).
async fn refuse_unread(shared: &Shared, mut body: Incoming, e: ApiError) -> ApiError {
    let drain = async { while let Some(Ok(_)) = body.frame().await {} };
    tokio::select! {
        _ = tokio::time::timeout(shared.options.body_timeout, drain) => {}
        () = shared.stopped() => {}
    }
    e
}

/// A 503 `overloaded`, counted.
fn overloaded(shared: &Shared, why: String) -> ApiError {
    shared.metrics.overloaded.fetch_add(1, Ordering::Relaxed);
    ApiError::new(503, "overloaded", format!("{why}: retry shortly")).retry_after(1)
}

/// Counts one request in a gauge for as long as it lives: dropped with the request's
/// future, also when the client went away before the answer (hyper then drops it).
struct Gauge<'a>(&'a AtomicU64);

impl<'a> Gauge<'a> {
    fn up(gauge: &'a AtomicU64) -> Self {
        gauge.fetch_add(1, Ordering::Relaxed);
        Gauge(gauge)
    }
}

impl Drop for Gauge<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

fn too_large(max: usize) -> ApiError {
    ApiError::new(413, "too_large", format!("the request body is over {max} bytes (--max-body); split the batch"))
}
