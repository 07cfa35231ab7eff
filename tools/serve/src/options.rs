//! How the server runs: [`ServeOptions`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use simdex::Durability;

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
    /// When a write is acknowledged: the index's own durability, which the server opens the
    /// index with (a write request is answered when the index call returns).
    pub durability: Durability,
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
    /// Requests read or worked on at once; more get 503 with `Retry-After`.
    pub max_in_flight: usize,
    /// Bytes the requests read or worked on may hold at once (their bodies, decoded, and
    /// the work on them): each takes its share (`limits::charge`) before its body is read,
    /// a fingerprint batch one per item (`limits::items_charge`) once decoded; a request
    /// that finds too little left gets 503 with `Retry-After`, one that needs more than all
    /// of it 413.
    pub max_memory: usize,
    /// Open connections; more are answered 503 and closed. `None`: as many as the
    /// descriptor limit allows beside the index's reserve (`limits::Descriptors`).
    pub max_connections: Option<usize>,
    /// Time a client has to send a request's head (slow clients are cut off), and that an
    /// idle connection stays open.
    pub header_timeout: Duration,
    /// Time a client has to send a request's body (408 after it).
    pub body_timeout: Duration,
    /// Time in-flight requests get to finish at shutdown.
    pub shutdown_timeout: Duration,
    /// Log every failed request (errors of status 500 and above are always logged).
    pub log_requests: bool,
    /// Open the index and bind the address, then stop without serving (a configuration check).
    pub check: bool,
    /// Threads answering connections (they run single-fingerprint calls themselves; batches,
    /// documents and fsyncs run on a blocking pool beside them). One by default, as Redis
    /// runs: a second thread cost more CPU per call in wake-ups between the two than it
    /// saved (benches/RESULTS.md, "Serve II"); more pay off with many clients on many cores
    /// that mostly query.
    pub threads: usize,
}

impl ServeOptions {
    /// The defaults for `dir`: 127.0.0.1:7878, no token, the index's default durability
    /// (`Durability::Group`'s group commit), k = 3 with sketches (the server's choice: a
    /// Rust `Index::open` stores none unless asked), 64 MiB bodies, 256 requests in flight holding at most 1 GiB,
    /// connections as the descriptor limit allows, 10 s for a head, 60 s for a body, 30 s
    /// to shut down, one thread answering connections.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        ServeOptions {
            dir: dir.into(),
            listen: SocketAddr::from(([127, 0, 0, 1], 7878)),
            token: None,
            read_only: false,
            refresh: Duration::from_secs(2),
            durability: Durability::default(),
            k: 3,
            sketches: true,
            expiry: None,
            create_in_nonempty: false,
            max_body: 64 << 20,
            max_in_flight: 256,
            max_memory: 1 << 30,
            max_connections: None,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(60),
            shutdown_timeout: Duration::from_secs(30),
            log_requests: false,
            check: false,
            threads: 1,
        }
    }
}
