//! A `simdex insert DIR -` fed through a pipe that stays open, as a crawler feeds it: bytes are
//! written in bursts, acknowledgements (`--acks --json`) read back, and the process killed
//! with SIGKILL at a chosen moment.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

/// How long a test waits for an acknowledgement before it fails.
const ACK_TIMEOUT: Duration = Duration::from_secs(60);

pub struct StreamingAdd {
    child: Child,
    stdin: Option<ChildStdin>,
    acks: Receiver<serde_json::Value>,
    stderr: tempfile::NamedTempFile,
    /// Records acknowledged so far.
    pub acked: u64,
}

impl StreamingAdd {
    /// Starts `simdex insert DIR - --acks --json EXTRA...`.
    pub fn spawn(dir: &Path, extra: &[&str]) -> Self {
        let stderr = tempfile::NamedTempFile::new().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_simdex"))
            .arg("add")
            .arg(dir)
            .args(["-", "--acks", "--json"])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr.reopen().unwrap())
            .spawn()
            .expect("run simdex insert");
        let stdout = child.stdout.take().unwrap();
        let (tx, acks) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON: {line:?}: {e}"));
                if tx.send(value).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take();
        Self { child, stdin, acks, stderr, acked: 0 }
    }

    /// Writes `bytes` to the process's stdin (one `write` call when they fit in a pipe's
    /// atomic write).
    pub fn send(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    /// Waits until at least `n` records are acknowledged; returns the acknowledgement.
    pub fn wait_acked(&mut self, n: u64) -> serde_json::Value {
        loop {
            let ack = self.acks.recv_timeout(ACK_TIMEOUT).unwrap_or_else(|e| panic!("no acknowledgement of {n} records ({e}); stderr: {}", self.stderr()));
            self.acked = ack["acked"].as_u64().expect("acked");
            assert!(self.acked <= n, "acknowledged {} records, only {n} were complete: {ack}", self.acked);
            if self.acked == n {
                return ack;
            }
        }
    }

    /// Closes stdin and waits for the exit; returns the exit code and stderr.
    pub fn finish(mut self) -> (Option<i32>, String) {
        drop(self.stdin.take());
        let status = self.child.wait().unwrap();
        (status.code(), self.stderr())
    }

    /// SIGKILL, while the pipe is still open.
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.stderr.path()).unwrap_or_default()
    }
}
