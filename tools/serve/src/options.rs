//! How the server runs: [`ServeOptions`] and [`ServeDurability`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// When a write request is acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServeDurability {
    /// Once fsynced: group commit, one fsync for every request waiting on it.
    Sync,
    /// Once in the operating system (survives a kill of the server at once), fsynced
    /// within 10 ms: the index's default ([`simdex::Durability::default`]).
    Group,
    /// Once in the operating system; fsynced on `sync`, at log rotation and at shutdown.
    NoSync,
}

/// How to run the server.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// The index directory (created when missing, unless `read_only`).
    pub dir: PathBuf,
    /// Address to listen on (port 0: any free port, printed at start).
    pub listen: SocketAddr,
    /// Bearer token every request but `/health` must carry; required to listen on an
    /// address that is not loopback.
    pub token: Option<String>,
    /// Serve queries only, from a directory another process writes (reopened every `refresh`).
    pub read_only: bool,
    /// How often a read-only server reopens the index to see new writes.
    pub refresh: Duration,
    /// When writes are acknowledged.
    pub durability: ServeDurability,
    /// Largest query distance of a new index.
    pub k: u32,
    /// A new index stores a sketch per document (document calls confirm by it).
    pub sketches: bool,
    /// The expiry window of a new index (`None`: nothing expires); an existing index serves
    /// its own window (another one is refused).
    pub expiry: Option<simdex::Expiry>,
    /// Create the index in a directory that holds other files (refused by default).
    pub create_in_nonempty: bool,
    /// Largest request body, in bytes (413 above it).
    pub max_body: usize,
    /// Requests worked on at once; more get 503 with `Retry-After`.
    pub max_in_flight: usize,
    /// Open connections; more are answered 503 and closed.
    pub max_connections: usize,
    /// Time a client has to send a request's head (slow clients are cut off).
    pub header_timeout: Duration,
    /// Time a client has to send a request's body (408 after it).
    pub body_timeout: Duration,
    /// Time in-flight requests get to finish at shutdown.
    pub shutdown_timeout: Duration,
    /// Log every failed request (errors of status 500 and above are always logged).
    pub log_requests: bool,
    /// Open the index and bind the address, then stop without serving (a configuration check).
    pub check: bool,
    /// Threads answering connections (index calls run on a blocking pool beside them).
    pub threads: usize,
}

impl ServeOptions {
    /// The defaults for `dir`: 127.0.0.1:7878, no token, group durability, k = 3 with
    /// sketches (as `Index::open` creates), 64 MiB bodies, 256 requests in flight, 20,000
    /// connections, 10 s for a head, 60 s for a body, 30 s to shut down.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        ServeOptions {
            dir: dir.into(),
            listen: SocketAddr::from(([127, 0, 0, 1], 7878)),
            token: None,
            read_only: false,
            refresh: Duration::from_secs(2),
            durability: ServeDurability::Group,
            k: 3,
            sketches: true,
            expiry: None,
            create_in_nonempty: false,
            max_body: 64 << 20,
            max_in_flight: 256,
            max_connections: 20_000,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(60),
            shutdown_timeout: Duration::from_secs(30),
            log_requests: false,
            check: false,
            threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
        }
    }
}
