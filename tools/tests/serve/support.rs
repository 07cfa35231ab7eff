//! What the `simdex serve` tests share: a server process per test (on a free port, killed
//! on drop), a small HTTP/1.1 client over a std `TcpStream` (the tests also send bytes no
//! real client would), the binary batch forms, and the oracle: a brute-force Hamming scan
//! over a set of pairs.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The `simdex` binary under test.
pub fn simdex() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_simdex"));
    c.stdin(Stdio::null());
    c
}

/// Runs `command` until it exits or `limit` passes (then kills it and returns `None`).
pub fn output_within(mut command: Command, limit: Duration) -> Option<(ExitStatus, String, String)> {
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn simdex");
    let (out, err) = (drain(child.stdout.take()), drain(child.stderr.take()));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let text = |s: &Arc<Mutex<String>>| s.lock().unwrap().clone();
    // the pipes close with the process; give the readers a moment to take the last bytes
    let deadline = Instant::now() + Duration::from_secs(2);
    while Arc::strong_count(&out) + Arc::strong_count(&err) > 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    status.map(|s| (s, text(&out), text(&err)))
}

/// Collects everything `pipe` gives into a string, on a thread of its own (which drops its
/// handle of the string when the pipe closes).
fn drain(pipe: Option<impl Read + Send + 'static>) -> Arc<Mutex<String>> {
    let text = Arc::new(Mutex::new(String::new()));
    if let Some(mut pipe) = pipe {
        let sink = Arc::clone(&text);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = pipe.read(&mut buf) {
                sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
    }
    text
}

/// A running `simdex serve`, killed (SIGKILL) on drop if it still runs.
pub struct Server {
    child: Child,
    /// Where it listens (an unspecified address is given as loopback, to connect to).
    pub addr: SocketAddr,
    stderr: Arc<Mutex<String>>,
}

impl Server {
    /// Starts `simdex serve DIR --listen 127.0.0.1:0 ARGS` and waits for its
    /// `listening on http://ADDR` line.
    pub fn start(dir: &Path, args: &[&str]) -> Server {
        Self::start_under(dir, args, None)
    }

    /// As [`Self::start`], under a descriptor limit of `(soft, hard)` (`ulimit -Sn`, `-Hn`).
    pub fn start_under(dir: &Path, args: &[&str], nofile: Option<(u64, u64)>) -> Server {
        let listen = if args.contains(&"--listen") { vec![] } else { vec!["--listen", "127.0.0.1:0"] };
        let mut command = match nofile {
            None => simdex(),
            Some((soft, hard)) => {
                let mut c = Command::new("sh");
                c.arg("-c").arg(format!("ulimit -Sn {soft} && ulimit -Hn {hard} && exec \"$0\" \"$@\"")).arg(env!("CARGO_BIN_EXE_simdex")).stdin(Stdio::null());
                c
            }
        };
        let mut child = command.arg("serve").arg(dir).args(listen).args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn simdex serve");
        let stderr = drain(child.stderr.take());
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if let Some(addr) = line.strip_prefix("listening on http://") {
                    let _ = tx.send(addr.trim().to_owned());
                }
            }
        });
        let addr = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(a) => a,
            Err(_) => {
                let _ = child.kill();
                let status = child.wait().unwrap();
                panic!("simdex serve {} {args:?} did not start ({status}): {}", dir.display(), stderr.lock().unwrap());
            }
        };
        let mut addr: SocketAddr = addr.parse().unwrap_or_else(|e| panic!("listening address {addr:?}: {e}"));
        if addr.ip().is_unspecified() {
            addr.set_ip(Ipv4Addr::LOCALHOST.into());
        }
        Server { child, addr, stderr }
    }

    /// A new keep-alive connection.
    pub fn client(&self) -> Client {
        Client::connect(self.addr).unwrap_or_else(|e| panic!("connect to {}: {e}", self.addr))
    }

    /// What the server logged so far.
    pub fn log(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// What the server logged, once it holds `needle` (its standard error is read apart from
    /// the `listening on` line: it may lag behind); panics after 10 s without it.
    pub fn log_with(&self, needle: &str) -> String {
        let started = Instant::now();
        loop {
            let log = self.log();
            if log.contains(needle) {
                return log;
            }
            assert!(started.elapsed() < Duration::from_secs(10), "no {needle:?} in the log: {log}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Kills it with SIGKILL and reaps it.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A field of `/proc/PID/status` in kB (`VmRSS`, `VmHWM`).
    pub fn status_kb(&self, field: &str) -> u64 {
        let text = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let line = text.lines().find(|l| l.starts_with(&format!("{field}:"))).unwrap_or_else(|| panic!("no {field} in /proc/PID/status"));
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success(), "kill -TERM {pid}");
    }

    /// Its exit status once it exits within `limit`, else `None` (it still runs).
    pub fn exit_within(&mut self, limit: Duration) -> Option<ExitStatus> {
        let started = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return Some(s);
            }
            if started.elapsed() > limit {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The value of the unlabelled sample `name` in `/metrics` (0 when absent).
    pub fn metric(&self, name: &str) -> f64 {
        let text = self.client().get("/metrics").text();
        text.lines().filter_map(|l| l.strip_prefix(name)?.strip_prefix(' ')).map(|v| v.parse().unwrap()).next().unwrap_or(0.0)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A request sent but for the last byte of its body: the server has taken its place among
/// the requests in flight and its share of the memory budget (both taken before a body is
/// read) and holds them until [`Held::finish`] sends the rest, so that a test fills the
/// server's bounds without racing a slow request (start the server with a long enough
/// `--body-timeout`).
pub struct Held {
    client: Client,
    rest: Vec<u8>,
}

impl Held {
    /// Sends `POST path` with `body` but its last byte, then waits until the server counts
    /// one more request in flight than before (a generous bound: a hang fails, a slow
    /// machine does not).
    pub fn start(server: &Server, path: &str, content_type: &str, body: &[u8]) -> Held {
        assert!(!body.is_empty(), "a held request needs a body");
        let before = server.metric("simdex_in_flight_requests");
        let mut client = server.client();
        client.stream().set_read_timeout(Some(Duration::from_secs(600))).unwrap();
        client.stream().set_write_timeout(Some(Duration::from_secs(600))).unwrap();
        let head = format!("POST {path} HTTP/1.1\r\nHost: simdex\r\nContent-Length: {}\r\nContent-Type: {content_type}\r\n\r\n", body.len());
        let (sent, rest) = body.split_at(body.len() - 1);
        client.raw(&[head.as_bytes(), sent].concat()).unwrap();
        let started = Instant::now();
        while server.metric("simdex_in_flight_requests") < before + 1.0 {
            assert!(started.elapsed() < Duration::from_secs(300), "the held request never showed in flight");
            std::thread::sleep(Duration::from_millis(5));
        }
        Held { client, rest: rest.to_vec() }
    }

    /// Sends the rest of the body and reads the answer.
    pub fn finish(mut self) -> Response {
        self.client.raw(&self.rest).unwrap();
        self.client.read_response().unwrap()
    }
}

/// A response as the wire had it.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    /// Names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("status {}: body is not JSON ({e}): {}", self.status, self.text()))
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The `kind` of an error body (`{"error": {"kind", "message"}}`, both strings).
    pub fn error_kind(&self) -> String {
        let v = self.json();
        let e = &v["error"];
        assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()), "error body without a message: {v}");
        assert_eq!(v.as_object().map(|o| o.len()), Some(1), "error body has only `error`: {v}");
        e["kind"].as_str().unwrap_or_else(|| panic!("error body without a kind: {v}")).to_owned()
    }

    /// Asserts an error of `status` and `kind`.
    pub fn assert_error(&self, status: u16, kind: &str) {
        assert_eq!((self.status, self.error_kind().as_str()), (status, kind), "{}", self.text());
    }
}

/// One HTTP/1.1 connection, kept alive between requests.
pub struct Client {
    reader: BufReader<TcpStream>,
    /// Sent as `Authorization: Bearer TOKEN` when set.
    pub token: Option<String>,
}

impl Client {
    /// Connects, with 10 s read and write timeouts (a hang fails instead of blocking).
    pub fn connect(addr: SocketAddr) -> std::io::Result<Client> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        stream.set_write_timeout(Some(Duration::from_secs(10)))?;
        stream.set_nodelay(true)?;
        Ok(Client::from_stream(stream))
    }

    /// A client on a connection already open.
    pub fn from_stream(stream: TcpStream) -> Client {
        Client { reader: BufReader::new(stream), token: None }
    }

    /// The socket (to change timeouts, or write raw bytes).
    pub fn stream(&self) -> &TcpStream {
        self.reader.get_ref()
    }

    /// Writes `bytes` as they are.
    pub fn raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.reader.get_mut().write_all(bytes)
    }

    /// Sends one request and reads its response.
    pub fn send(&mut self, method: &str, path: &str, content_type: Option<&str>, body: &[u8]) -> std::io::Result<Response> {
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: simdex\r\nContent-Length: {}\r\n", body.len());
        if let Some(t) = content_type {
            head.push_str(&format!("Content-Type: {t}\r\n"));
        }
        if let Some(t) = &self.token {
            head.push_str(&format!("Authorization: Bearer {t}\r\n"));
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(body);
        self.raw(&bytes)?;
        self.read_response()
    }

    /// `POST path` with a JSON body.
    pub fn post(&mut self, path: &str, body: &Value) -> Response {
        self.send("POST", path, Some("application/json"), body.to_string().as_bytes()).unwrap_or_else(|e| panic!("POST {path}: {e}"))
    }

    /// `POST /v1/<op>` with a JSON body; asserts 200 and returns the answer.
    pub fn ok(&mut self, op: &str, body: Value) -> Value {
        let r = self.post(&format!("/v1/{op}"), &body);
        assert_eq!(r.status, 200, "{op} {body}: {}", r.text());
        assert_eq!(r.header("content-type"), Some("application/json"));
        r.json()
    }

    /// `POST /v1/<op>?query` with a binary body; asserts 200 and returns the answer.
    pub fn binary(&mut self, op: &str, query: &str, values: &[u64]) -> Vec<u8> {
        let r = self.send("POST", &format!("/v1/{op}{query}"), Some("application/octet-stream"), &le(values)).unwrap_or_else(|e| panic!("{op}: {e}"));
        assert_eq!(r.status, 200, "{op}: {}", r.text());
        r.body
    }

    /// `GET path`.
    pub fn get(&mut self, path: &str) -> Response {
        self.send("GET", path, None, b"").unwrap_or_else(|e| panic!("GET {path}: {e}"))
    }

    /// Reads one response (EOF before a status line is `UnexpectedEof`).
    pub fn read_response(&mut self) -> std::io::Result<Response> {
        let eof = || std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "connection closed");
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(eof());
        }
        let status = line.strip_prefix("HTTP/1.1 ").and_then(|s| s.get(..3)).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("not a status line: {line:?}"));
        let mut headers = Vec::new();
        loop {
            line.clear();
            if self.reader.read_line(&mut line)? == 0 {
                return Err(eof());
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            let (n, v) = l.split_once(':').unwrap_or_else(|| panic!("not a header: {l:?}"));
            headers.push((n.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
        let mut r = Response { status, headers, body: Vec::new() };
        if r.header("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
            loop {
                line.clear();
                self.reader.read_line(&mut line)?;
                let n = usize::from_str_radix(line.trim(), 16).unwrap_or_else(|_| panic!("chunk size {line:?}"));
                let mut chunk = vec![0; n + 2];
                self.reader.read_exact(&mut chunk)?;
                if n == 0 {
                    break;
                }
                r.body.extend_from_slice(&chunk[..n]);
            }
        } else if let Some(n) = r.header("content-length") {
            r.body = vec![0; n.parse().unwrap()];
            self.reader.read_exact(&mut r.body)?;
        } else {
            self.reader.read_to_end(&mut r.body)?;
        }
        Ok(r)
    }
}

/// True for the errors a connection the server closed or lost gives (not a timeout).
pub fn is_disconnect(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(e.kind(), UnexpectedEof | ConnectionReset | ConnectionAborted | BrokenPipe | ConnectionRefused)
}

/// Asserts that a fresh connection is served: a query answers 200 within `limit`.
pub fn assert_served(addr: SocketAddr, limit: Duration) {
    let started = Instant::now();
    let mut c = Client::connect(addr).unwrap();
    let r = c.post("/v1/query", &json!({"fp": 1, "k": 0}));
    assert_eq!(r.status, 200, "another client is served: {}", r.text());
    assert!(started.elapsed() < limit, "another client is served within {limit:?}, not {:?}", started.elapsed());
}

/// Little-endian bytes of `values`.
pub fn le(values: &[u64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// A match as the protocol gives it: fingerprint, distance, id (`None`: stored without one).
pub type Row = (u64, u32, Option<u64>);

/// The rows of a JSON `matches` list.
pub fn rows(v: &Value) -> Vec<Row> {
    v.as_array().unwrap_or_else(|| panic!("matches: {v}")).iter().map(|m| (m[0].as_u64().unwrap(), u32::try_from(m[1].as_u64().unwrap()).unwrap(), m[2].as_u64())).collect()
}

/// The items of a JSON batch answer `{"matches": [[row...]...]}`.
pub fn items(v: &Value) -> Vec<Vec<Row>> {
    v["matches"].as_array().unwrap_or_else(|| panic!("batch answer: {v}")).iter().map(rows).collect()
}

/// The items of a binary batch answer: n and m, then m positions, fingerprints, ids (0
/// where none) and distances (u32), little-endian. Ids of 0 read as `Some(0)`.
pub fn binary_items(b: &[u8]) -> Vec<Vec<Row>> {
    let u64_at = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
    let (n, m) = (u64_at(0) as usize, u64_at(1) as usize);
    assert_eq!(b.len(), 16 + m * 28, "binary answer of {n} items and {m} matches");
    let mut out = vec![Vec::new(); n];
    for j in 0..m {
        let at = 16 + 24 * m + 4 * j;
        let distance = u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
        let item = u64_at(2 + j) as usize;
        assert!(item < n, "position {item} of {n} items");
        out[item].push((u64_at(2 + m + j), distance, Some(u64_at(2 + 2 * m + j))));
    }
    out
}

/// Deterministic pseudo-random u64s (splitmix64).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// `fp` with `bits` distinct random bits flipped.
    pub fn flip(&mut self, fp: u64, bits: u32) -> u64 {
        let mut out = fp;
        while (out ^ fp).count_ones() < bits {
            out ^= 1 << (self.next() % 64);
        }
        out
    }
}

/// The oracle: every stored pair within `k` of `fp`, sorted as the server sorts (distance,
/// fingerprint, id).
pub fn brute(stored: &BTreeSet<(u64, u64)>, fp: u64, k: u32) -> Vec<Row> {
    let mut v: Vec<Row> = stored.iter().map(|&(f, id)| (f, (f ^ fp).count_ones(), Some(id))).filter(|r| r.1 <= k).collect();
    v.sort_by_key(|&(f, d, id)| (d, f, id));
    v
}

/// Every stored id of each of `fps` (queried at k = 0 in one batch), as pairs.
pub fn stored_pairs(client: &mut Client, fps: &[u64]) -> BTreeSet<(u64, u64)> {
    let mut out = BTreeSet::new();
    for part in fps.chunks(50_000) {
        for (item, matches) in binary_items(&client.binary("query_many", "?k=0", part)).into_iter().enumerate() {
            for (f, d, id) in matches {
                assert_eq!((f, d), (part[item], 0), "a k = 0 match is the fingerprint itself");
                out.insert((f, id.unwrap()));
            }
        }
    }
    out
}
