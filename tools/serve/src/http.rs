//! One HTTP request, from its head to its answer: routing (`/health`, `/metrics`,
//! `/v1/<op>`), the token, the body's size and time limits, the bound on work in flight,
//! decoding, the index call on the blocking pool, the group commit, metrics and logs.

use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::json;

use crate::access::authorized;
use crate::log::log;
use crate::ops::{self, Reply};
use crate::options::ServeDurability;
use crate::protocol::{self, ApiError, Op};
use crate::state::Shared;

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
    let response = match path.as_str() {
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
    respond(code, "application/json", serde_json::to_vec(&json!({"status": status})).unwrap_or_default())
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
    let max = shared.options.max_body;
    let declared = req.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(fail(Some(op), too_large(max)));
    }
    let content_type = req.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let query = req.uri().query().map(str::to_owned);
    let body = tokio::select! {
        biased;
        b = tokio::time::timeout(shared.options.body_timeout, Limited::new(req.into_body(), max).collect()) => b,
        () = shared.stopped() => return Err(fail(Some(op), ApiError::new(503, "stopping", "the server is shutting down (the request body had not all arrived)").retry_after(1))),
    };
    let body = match body {
        Err(_) => return Err(fail(Some(op), ApiError::new(408, "timeout", format!("the request body did not arrive within {:?}", shared.options.body_timeout)))),
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => return Err(fail(Some(op), too_large(max))),
        Ok(Err(e)) => return Err(fail(Some(op), ApiError::bad_request(format!("reading the request body: {e}")))),
        Ok(Ok(b)) => b.to_bytes(),
    };
    let request = protocol::decode(op, content_type.as_deref(), query.as_deref(), &body).map_err(|e| fail(Some(op), e))?;
    drop(body);
    let items = request.items();
    if shared.options.read_only && op.writes() {
        return Err((Some(op), started, items, ApiError::new(403, "read_only", format!("{}: this server is read-only (--read-only)", op.name()))));
    }
    // the bound on work in flight: refuse at once rather than queue without bound
    let Ok(permit) = shared.permits.try_acquire() else {
        shared.metrics.overloaded.fetch_add(1, Ordering::Relaxed);
        let e = ApiError::new(503, "overloaded", format!("{} requests are in flight (--max-in-flight): retry shortly", shared.options.max_in_flight)).retry_after(1);
        return Err((Some(op), started, items, e));
    };
    let Some(index) = shared.index() else {
        let e = if shared.recovering() {
            ApiError::new(503, "recovering", "the index is being reopened after a failed write")
        } else {
            ApiError::new(503, "starting", "the index is not open yet")
        };
        return Err((Some(op), started, items, e.retry_after(1)));
    };
    shared.metrics.in_flight.fetch_add(1, Ordering::Relaxed);
    let task_shared = Arc::clone(shared);
    let outcome = tokio::task::spawn_blocking(move || {
        let reply = ops::execute(&index, request)?;
        if op.writes() && task_shared.options.durability == ServeDurability::Sync {
            task_shared.committer.commit(&index, &task_shared.metrics).map_err(ops::index_error)?;
        }
        Ok::<Reply, ApiError>(reply)
    })
    .await;
    shared.metrics.in_flight.fetch_sub(1, Ordering::Relaxed);
    drop(permit);
    let outcome = outcome.unwrap_or_else(|e| Err(ApiError::new(500, "internal", format!("the operation panicked: {e}"))));
    match outcome {
        Ok(reply) => {
            shared.metrics.observe(op, started.elapsed(), items, 200);
            Ok(match reply {
                Reply::Json(b) => respond(200, "application/json", b),
                Reply::Binary(b) => respond(200, protocol::BINARY, b),
            })
        }
        Err(e) => {
            if e.kind == "recovering" {
                shared.recover();
            }
            Err((Some(op), started, items, e))
        }
    }
}

fn too_large(max: usize) -> ApiError {
    ApiError::new(413, "too_large", format!("the request body is over {max} bytes (--max-body); split the batch"))
}
