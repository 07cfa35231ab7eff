//! `simdex serve`: one simdex index over HTTP/1.1 and JSON, so that many crawler processes
//! and machines share one near-duplicate filter. The protocol is specified in
//! `format-spec/protocol.md`; this crate is the server (the library crates know nothing of
//! it), and `simdex serve` in the CLI is its command line.
//!
//! Modules: `operations` (the one table of operations everything else reads), [`protocol`]
//! (paths, request decoding, error statuses), `ops` (running a
//! request against the index), `state` (the open index, recovery), `http` (one request's
//! handling), `limits` (descriptors and the memory budget), `access` (loopback and tokens),
//! `metrics` (Prometheus), `log` (structured logs). [`serve`] ties them together: open the index, bind, accept, and on
//! SIGTERM or SIGINT stop accepting, finish what is in flight, and close the index.

mod access;
mod error;
mod http;
mod limits;
mod log;
mod metrics;
mod operations;
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
use tokio::net::{TcpListener, TcpSocket};

pub use access::{read_token, MIN_TOKEN_LEN};
pub use error::ServeError;
pub use limits::{charge, items_charge, DECODE_FACTOR, DOCUMENT_FACTOR, INDEX_RESERVE, ITEM_CHARGE, MIN_CHARGE, SERVER_OWN};
use log::log;
pub use options::ServeOptions;
use state::Shared;

/// The buffer a request head (request line and headers) may fill before the connection is
/// closed (hyper checks it between reads, so one read may go beyond it): hyper's default
/// (about 400 KB) times tens of thousands of connections would let clients pin gigabytes.
const MAX_HEAD: usize = 64 << 10;

/// The answer to a connection over `--max-connections`.
const TOO_MANY_CONNECTIONS: &str = concat!(
    "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: 103\r\n\r\n",
    r#"{"error":{"kind":"too_many_connections","message":"the server has --max-connections open connections"}}"#
);

/// Runs the server until SIGTERM or SIGINT; `ready` is called with the bound address once
/// the index is open and the socket listens. Returns after a clean shutdown.
pub fn serve(options: ServeOptions, ready: impl FnOnce(SocketAddr)) -> Result<(), ServeError> {
    access::check_bind(&options.listen, options.token.as_deref())?;
    // before any thread starts, so that all of them run under the raised limit
    let descriptors = limits::descriptors(options.max_connections)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(options.threads.max(1))
        .enable_all()
        .build()
        .map_err(|source| ServeError::Io { what: "starting the runtime".into(), source })?;
    runtime.block_on(run(options, descriptors, ready))
}

/// The listen backlog: the system's bound (`net.core.somaxconn`), so that a burst of
/// reconnecting clients waits in the queue rather than for SYN retries (std and tokio ask
/// for 128).
fn backlog() -> u32 {
    std::fs::read_to_string("/proc/sys/net/core/somaxconn").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(4096)
}

fn listen(addr: SocketAddr) -> std::io::Result<(TcpListener, u32)> {
    let socket = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    let backlog = backlog();
    Ok((socket.listen(backlog)?, backlog))
}

async fn run(options: ServeOptions, descriptors: limits::Descriptors, ready: impl FnOnce(SocketAddr)) -> Result<(), ServeError> {
    let (listener, backlog) = listen(options.listen).map_err(|source| ServeError::Io { what: format!("listening on {}", options.listen), source })?;
    let addr = listener.local_addr().map_err(|source| ServeError::Io { what: "reading the bound address".into(), source })?;
    let shared = Arc::new(Shared::new(options, descriptors));
    // /health answers 503 "starting" while the index opens (replaying a long log takes time)
    let opener = Arc::clone(&shared);
    let serving = tokio::spawn(accept_loop(Arc::clone(&shared), listener));
    tokio::task::spawn_blocking(move || opener.open()).await.map_err(|e| ServeError::Io { what: "opening the index".into(), source: std::io::Error::other(e) })??;
    if shared.options.read_only {
        shared.refresh_forever(shared.options.refresh);
    }
    let d = shared.descriptors;
    log(
        "info",
        "listening",
        json!({"addr": addr.to_string(), "dir": shared.options.dir, "read_only": shared.options.read_only, "auth": shared.options.token.is_some(),
               "backlog": backlog, "descriptor_limit": d.limit, "descriptor_limit_raised_from": d.raised_from, "max_connections": d.connections,
               "max_in_flight": shared.options.max_in_flight, "max_memory_mib": shared.options.max_memory >> 20}),
    );
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
        let (stream, _) = match accepted {
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
        if metrics.connections.load(Ordering::Relaxed) >= shared.descriptors.connections as u64 {
            // answered at once and closed: a refused connection holds its descriptor for
            // no longer than this (the answer fits the socket's buffer)
            metrics.refused_connections.fetch_add(1, Ordering::Relaxed);
            let _ = stream.try_write(TOO_MANY_CONNECTIONS.as_bytes());
            drop(stream);
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

#[cfg(test)]
mod tests {
    #[test]
    fn the_refusal_of_a_connection_is_a_whole_answer() {
        let (head, body) = super::TOO_MANY_CONNECTIONS.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("content-length: {}", body.len())), "{head}");
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["error"]["kind"], "too_many_connections");
    }
}
