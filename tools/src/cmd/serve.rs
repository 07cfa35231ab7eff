//! `simdex serve`: the command line of the `simdex-serve` crate (one index over HTTP/JSON).

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args as ClapArgs, ValueEnum};
use simdex::Durability;
use simdex_serve::ServeOptions;

/// Serve one index over HTTP and JSON to many crawler processes and machines
///
/// `simdex serve DIR` serves DIR (protocol: format-spec/protocol.md; Python:
/// `simdex.Client(URL)`; Scrapy: `SIMDEX_URL`) until SIGTERM or SIGINT.
///
/// Listens on 127.0.0.1:7878 by default and refuses any address that is not loopback
/// unless --token-file names a bearer token every request must carry. Prints
/// `listening on http://ADDR` once the index is open; /health answers 200 from then on,
/// /metrics gives Prometheus' text format. SIGTERM or SIGINT stops accepting, lets the
/// requests in flight finish, syncs and closes the index. TLS is left to a proxy in front
/// (python/README.md, "Several crawler processes").
///
/// Stopping does not grow with the index (within docker's 10 s and systemd's 90 s stop
/// timeouts): the index merges and settles its segments in the background while it serves,
/// and closing runs no merge. A merge in progress at SIGTERM stops at its next checkpoint
/// (milliseconds) and goes on from there at the next start; a flush in progress ends (one
/// memtable, 2^20 operations at most). The close syncs the log and writes the memtables not
/// yet flushed into a segment only when they hold at most one memtable's worth; after a
/// burst of writes it leaves them in their logs (synced: durable), and the next start
/// replays them and flushes them in the background, one memtable at a time (benches/
/// RESULTS.md, "Scale IV", has the measured stops). Nothing acknowledged is lost whatever
/// stops the server, SIGKILL included.
///
/// Memory is bounded by configuration: each request takes a share of --max-memory-mib (8
/// bytes per byte of its Content-Length, or of --max-body-mib without one, 24 for the
/// document calls; 64 KiB at least) and one of --max-in-flight before its body is read, a
/// fingerprint batch 192 bytes per item once decoded, and holds them until it is answered;
/// a request that finds either used up is answered 503 at once, one that needs more than the
/// whole budget 413. The worst case
/// is --max-memory-mib, plus at most about 80 KiB per open connection (its head buffer of
/// up to 64 KiB and its state), plus the index's own memory (an active memtable and up to
/// three frozen ones, about 114 MiB each at the defaults; format-spec/protocol.md, "Limits").
///
/// Descriptors: the soft limit (ulimit -n) is raised to the hard one at start; 64
/// descriptors are kept for the index and 16 for the server, and connections beyond the
/// rest (or --max-connections) are answered 503 and closed, so the index never runs out.
/// A connection that sends no request for --header-timeout is closed.
#[derive(Debug, ClapArgs)]
#[command(
    after_help = "Examples (--check opens and binds, then exits: drop it to serve):\n  simdex serve served.idx --listen 127.0.0.1:0 --check\n  simdex serve served.idx --read-only --listen 127.0.0.1:0 --refresh 5 --check\n  simdex serve served.idx --durability sync --listen 127.0.0.1:0 --check"
)]
pub struct Args {
    /// The index directory (created when missing, unless --read-only).
    dir: PathBuf,
    /// HOST:PORT to listen on (port 0: any free port, printed at start).
    #[arg(long, default_value = "127.0.0.1:7878")]
    listen: String,
    /// File holding the bearer token (one line, at least 16 characters); required to listen
    /// beyond loopback.
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Serve queries only, from a directory another process writes; reopened every
    /// --refresh seconds to see its new writes.
    #[arg(long)]
    read_only: bool,
    /// Seconds between a read-only server's reopens.
    #[arg(long, default_value_t = 2.0, value_parser = crate::value_parsers::positive_f64)]
    refresh: f64,
    /// When a write is acknowledged (the index's durability): `sync` after an fsync shared by
    /// every client waiting (survives a power loss), `group` once the OS has it (survives a
    /// kill of the server; group commit fsyncs within 10 ms, the library's default), `nosync`
    /// (fsynced on sync and at shutdown).
    #[arg(long, value_enum, default_value_t = DurabilityArg::Group)]
    durability: DurabilityArg,
    /// Largest query distance of a new index.
    #[arg(short, long, default_value_t = 3)]
    k: u32,
    /// A new index stores no sketches (document calls then decide by fingerprints alone).
    #[arg(long)]
    no_sketches: bool,
    /// The expiry window of a new index (`30d`, as `simdex insert --expire-after`); an existing
    /// index is served with its own window.
    #[arg(long, value_name = "WINDOW", value_parser = crate::value_parsers::expiry)]
    expire_after: Option<simdex::Expiry>,
    /// Create the index even in a directory that holds other files (refused by default).
    #[arg(long)]
    create_in_nonempty: bool,
    /// Largest request body in MiB (413 above it).
    #[arg(long, default_value_t = 64)]
    max_body_mib: usize,
    /// Requests read or worked on at once; more are answered 503 with Retry-After.
    #[arg(long, default_value_t = 256)]
    max_in_flight: usize,
    /// MiB the requests read or worked on may hold at once (8 bytes per byte of body, 24 for
    /// documents, 64 KiB at least, and 192 per item of a fingerprint batch); more are
    /// answered 503 with Retry-After.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    max_memory_mib: u64,
    /// Open connections; more are answered 503 and closed [default: what the descriptor
    /// limit allows beside 80 kept for the index and the server].
    #[arg(long)]
    max_connections: Option<usize>,
    /// Seconds a client has to send a request's head (slow clients are cut off), and that an
    /// idle connection stays open.
    #[arg(long, default_value_t = 10.0, value_parser = crate::value_parsers::positive_f64)]
    header_timeout: f64,
    /// Seconds a client has to send a request's body (408 after it).
    #[arg(long, default_value_t = 60.0, value_parser = crate::value_parsers::positive_f64)]
    body_timeout: f64,
    /// Threads answering connections. They run single-fingerprint calls themselves (batches,
    /// documents and fsyncs run on a pool beside them); more than one pays off with many
    /// clients on many cores that mostly query.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1024))]
    threads: u64,
    /// Log every failed request (server errors are always logged), as JSON lines on stderr.
    #[arg(long)]
    log_requests: bool,
    /// Open the index, bind the address and check the token, print the `listening on` line,
    /// then exit 0 without serving: a check of the configuration (as `nginx -t`).
    #[arg(long)]
    check: bool,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum DurabilityArg {
    Sync,
    Group,
    Nosync,
}

fn address(text: &str) -> Result<SocketAddr> {
    let mut addrs = text.to_socket_addrs().with_context(|| format!("--listen {text:?}: not HOST:PORT"))?;
    addrs.next().with_context(|| format!("--listen {text:?}: the name resolves to no address"))
}

pub fn run(args: Args) -> Result<()> {
    let mut options = ServeOptions::new(&args.dir);
    options.listen = address(&args.listen)?;
    options.token = args.token_file.as_deref().map(simdex_serve::read_token).transpose()?;
    options.read_only = args.read_only;
    options.refresh = Duration::from_secs_f64(args.refresh);
    options.durability = match args.durability {
        DurabilityArg::Sync => Durability::Sync,
        DurabilityArg::Group => Durability::default(),
        DurabilityArg::Nosync => Durability::NoSync,
    };
    options.k = args.k;
    options.sketches = !args.no_sketches;
    options.expiry = args.expire_after;
    options.create_in_nonempty = args.create_in_nonempty;
    options.max_body = args.max_body_mib.saturating_mul(1 << 20);
    options.max_in_flight = args.max_in_flight;
    options.max_memory = usize::try_from(args.max_memory_mib << 20).unwrap_or(usize::MAX);
    options.max_connections = args.max_connections;
    options.header_timeout = Duration::from_secs_f64(args.header_timeout);
    options.body_timeout = Duration::from_secs_f64(args.body_timeout);
    options.log_requests = args.log_requests;
    options.threads = usize::try_from(args.threads).unwrap_or(1);
    options.check = args.check;
    simdex_serve::serve(options, |addr| {
        // the line scripts and tests wait for (port 0: the port chosen)
        println!("listening on http://{addr}");
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
    })
    .with_context(|| format!("simdex serve {}", args.dir.display()))
}
