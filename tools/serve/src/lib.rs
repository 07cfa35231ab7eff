//! `simdex serve`: one simdex index over HTTP/1.1 and JSON, so that many crawler processes
//! and machines share one near-duplicate filter. The protocol is specified in
//! `format-spec/protocol.md`; this crate is the server (the library crates know nothing of
//! it), and `simdex serve` in the CLI is its command line.
//!
//! Modules: [`protocol`] (paths, request decoding, error statuses), `ops` (running a
//! request against the index), `state` (the open index, the group commit, recovery), `http`
//! (one request's handling), `access` (loopback and tokens), `metrics` (Prometheus), `log`
//! (structured logs). [`serve`] ties them together: open the index, bind, accept, and on
//! SIGTERM or SIGINT stop accepting, finish what is in flight, and close the index.

mod access;
mod error;
mod http;
mod log;
mod metrics;
mod ops;
mod options;
pub mod protocol;
mod state;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

pub use access::{read_token, MIN_TOKEN_LEN};
pub use error::ServeError;
use log::log;
pub use options::{ServeDurability, ServeOptions};
use state::Shared;

/// The buffer a request head (request line and headers) may fill before the connection is
/// closed (hyper checks it between reads, so one read may go beyond it): hyper's default
/// (about 400 KB) times 20,000 connections would let clients pin 8 GB.
const MAX_HEAD: usize = 64 << 10;

/// Runs the server until SIGTERM or SIGINT; `ready` is called with the bound address once
/// the index is open and the socket listens. Returns after a clean shutdown.
pub fn serve(options: ServeOptions, ready: impl FnOnce(SocketAddr)) -> Result<(), ServeError> {
    access::check_bind(&options.listen, options.token.as_deref())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(options.threads.max(1))
        .enable_all()
        .build()
        .map_err(|source| ServeError::Io { what: "starting the runtime".into(), source })?;
    runtime.block_on(run(options, ready))
}

async fn run(options: ServeOptions, ready: impl FnOnce(SocketAddr)) -> Result<(), ServeError> {
    let listener = TcpListener::bind(options.listen).await.map_err(|source| ServeError::Io { what: format!("listening on {}", options.listen), source })?;
    let addr = listener.local_addr().map_err(|source| ServeError::Io { what: "reading the bound address".into(), source })?;
    let shared = Arc::new(Shared::new(options));
    // /health answers 503 "starting" while the index opens (replaying a long log takes time)
    let opener = Arc::clone(&shared);
    let serving = tokio::spawn(accept_loop(Arc::clone(&shared), listener));
    tokio::task::spawn_blocking(move || opener.open()).await.map_err(|e| ServeError::Io { what: "opening the index".into(), source: std::io::Error::other(e) })??;
    if shared.options.read_only {
        shared.refresh_forever(shared.options.refresh);
    }
    log("info", "listening", json!({"addr": addr.to_string(), "dir": shared.options.dir, "read_only": shared.options.read_only, "auth": shared.options.token.is_some()}));
    ready(addr);
    if shared.options.check {
        // `--check`: the index opened and the address bound; stop before serving anyone
        serving.abort();
        let closer = Arc::clone(&shared);
        tokio::task::spawn_blocking(move || closer.close()).await.map_err(|e| ServeError::Io { what: "closing the index".into(), source: std::io::Error::other(e) })??;
        log("info", "checked", json!({}));
        return Ok(());
    }
    let graceful = serving.await.map_err(|e| ServeError::Io { what: "serving".into(), source: std::io::Error::other(e) })?;
    log("info", "stopping", json!({"in_flight": shared.metrics.in_flight.load(Ordering::Relaxed)}));
    if tokio::time::timeout(shared.options.shutdown_timeout, graceful.shutdown()).await.is_err() {
        log("warn", "shutdown_timeout", json!({"after_s": shared.options.shutdown_timeout.as_secs_f64()}));
    }
    let closer = Arc::clone(&shared);
    tokio::task::spawn_blocking(move || closer.close()).await.map_err(|e| ServeError::Io { what: "closing the index".into(), source: std::io::Error::other(e) })??;
    log("info", "stopped", json!({}));
    Ok(())
}

/// Accepts connections until SIGTERM or SIGINT; returns the watcher of those still open.
async fn accept_loop(shared: Arc<Shared>, listener: TcpListener) -> GracefulShutdown {
    let graceful = GracefulShutdown::new();
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let terminated = async move {
        match term.as_mut() {
            Some(t) => {
                t.recv().await;
            }
            None => std::future::pending().await,
        }
    };
    tokio::pin!(terminated);
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = tokio::signal::ctrl_c() => break,
            _ = &mut terminated => break,
        };
        let (mut stream, _) = match accepted {
            Ok(s) => s,
            Err(e) => {
                // out of descriptors and the like: pause rather than spin
                log("warn", "accept_failed", json!({"error": e.to_string()}));
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let metrics = &shared.metrics;
        if metrics.connections.load(Ordering::Relaxed) >= shared.options.max_connections as u64 {
            tokio::spawn(async move {
                let body = br#"{"error":{"kind":"too_many_connections","message":"the server has --max-connections open connections"}}"#;
                let head =
                    format!("HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n", body.len());
                let _ = stream.write_all(head.as_bytes()).await;
                let _ = stream.write_all(body).await;
            });
            continue;
        }
        metrics.connections.fetch_add(1, Ordering::Relaxed);
        metrics.connections_total.fetch_add(1, Ordering::Relaxed);
        let conn_shared = Arc::clone(&shared);
        let used = Arc::new(AtomicBool::new(false));
        let mark = Arc::clone(&used);
        let service = service_fn(move |req| {
            mark.store(true, Ordering::SeqCst);
            http::handle(Arc::clone(&conn_shared), req)
        });
        let conn = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(shared.options.header_timeout)
            .max_buf_size(MAX_HEAD)
            .keep_alive(true)
            .serve_connection(TokioIo::new(stream), service);
        let conn = graceful.watch(conn);
        let done = Arc::clone(&shared);
        tokio::spawn(async move {
            // hyper's graceful shutdown closes an idle connection only once it has served a
            // request: one that never sent a whole head would hold the shutdown up until
            // --header-timeout. Dropped at shutdown instead (no request of it was started).
            let never_used = async {
                done.stopped().await;
                if used.load(Ordering::SeqCst) {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                _ = conn => {}
                () = never_used => {}
            }
            done.metrics.connections.fetch_sub(1, Ordering::Relaxed);
        });
    }
    shared.stop();
    graceful
}
