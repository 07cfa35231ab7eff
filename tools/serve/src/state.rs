//! What the server shares between connections: the open index (in a slot that is empty
//! while it opens, recovers or closes), the bounds on work in flight and on its memory, the
//! connections allowed, and the metrics; and the index's life: opening, reopening after its
//! writer failed (an fsync failed: a full disk only refuses writes, see
//! `format-spec/protocol.md`), refreshing a read-only view, closing. Durability is the
//! index's own (`simdex::Durability`, passed through).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use serde_json::json;
use simdex::IndexOptions;
use simdex_fingerprint::sketch::SketchOptions;
use simdex_fingerprint::DocumentIndex;

use crate::limits::{self, Descriptors};
use crate::log::log;
use crate::metrics::Metrics;
use crate::options::ServeOptions;

/// The server's shared state.
pub struct Shared {
    /// How it was started.
    pub options: ServeOptions,
    slot: RwLock<Option<Arc<DocumentIndex>>>,
    /// Set once shutdown began: `/health` says so, new requests are refused.
    pub stopping: AtomicBool,
    /// Says `true` once shutdown began, to requests still waiting for their body.
    stop: tokio::sync::watch::Sender<bool>,
    recovering: AtomicBool,
    /// Bounds the requests being read or worked on (`--max-in-flight`).
    pub permits: tokio::sync::Semaphore,
    /// Bounds the memory they hold, in [`limits::CHARGE_UNIT`]s (`--max-memory-mib`).
    pub memory: tokio::sync::Semaphore,
    /// The descriptor limit and the connections allowed.
    pub descriptors: Descriptors,
    /// The last write answered was refused for want of space (`/health` says so).
    pub no_space: AtomicBool,
    /// `Keep-Alive: timeout=N`, N the seconds an idle connection stays open
    /// (`--header-timeout`), so that clients stop reusing one before the server closes it.
    pub keep_alive: hyper::header::HeaderValue,
    /// See [`Metrics`].
    pub metrics: Metrics,
}

impl Shared {
    /// The state of a server about to open its index.
    pub fn new(options: ServeOptions, descriptors: Descriptors) -> Self {
        Shared {
            permits: tokio::sync::Semaphore::new(options.max_in_flight.max(1)),
            memory: tokio::sync::Semaphore::new(limits::units(options.max_memory) as usize),
            descriptors,
            no_space: AtomicBool::new(false),
            keep_alive: hyper::header::HeaderValue::from_str(&format!("timeout={}", options.header_timeout.as_secs()))
                .unwrap_or(hyper::header::HeaderValue::from_static("timeout=1")),
            options,
            slot: RwLock::new(None),
            stopping: AtomicBool::new(false),
            stop: tokio::sync::watch::Sender::new(false),
            recovering: AtomicBool::new(false),
            metrics: Metrics::default(),
        }
    }

    /// Begins the shutdown: new requests are refused, and so are those still waiting for
    /// their body (a stalled upload must not hold the shutdown up until its timeout).
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.stop.send_replace(true);
    }

    /// Returns once [`Self::stop`] was called (at once if it was).
    pub async fn stopped(&self) {
        let _ = self.stop.subscribe().wait_for(|stopping| *stopping).await;
    }

    /// The open index, or `None` while it opens, recovers or closes.
    pub fn index(&self) -> Option<Arc<DocumentIndex>> {
        self.slot.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn put(&self, index: Option<DocumentIndex>) -> Option<Arc<DocumentIndex>> {
        std::mem::replace(&mut *self.slot.write().unwrap_or_else(PoisonError::into_inner), index.map(Arc::new))
    }

    /// True while a failed writer is being replaced.
    pub fn recovering(&self) -> bool {
        self.recovering.load(Ordering::SeqCst)
    }

    /// Opens the index as the options say.
    pub fn open(&self) -> Result<(), simdex_fingerprint::Error> {
        let index = open(&self.options)?;
        self.put(Some(index));
        Ok(())
    }

    /// Empties the slot and closes the index once no request holds it.
    pub fn close(&self) -> Result<(), simdex_fingerprint::Error> {
        match self.put(None) {
            Some(index) => wait_unshared(index).close(),
            None => Ok(()),
        }
    }

    /// After the index's writer failed (it refuses writes until reopened: an fsync failed,
    /// or a write the disk refused could not be cut off the log again): closes the index
    /// and opens it again, retrying every second, on a thread of its own. Requests meanwhile
    /// get 503 `recovering`. A full disk does not come here: the write it refuses does
    /// nothing, and the index goes on serving (507 for writes, until there is room).
    pub fn recover(self: &Arc<Self>) {
        if self.recovering.swap(true, Ordering::SeqCst) {
            return;
        }
        let shared = Arc::clone(self);
        std::thread::spawn(move || {
            log("warn", "recovering", json!({"why": "a write failed part-way; reopening the index"}));
            if let Some(old) = shared.put(None) {
                // its close may fail for the reason the write did: the reopen recovers the log
                let _ = wait_unshared(old).close();
            }
            while !shared.stopping.load(Ordering::SeqCst) {
                match open(&shared.options) {
                    Ok(index) => {
                        shared.put(Some(index));
                        shared.metrics.reopens.fetch_add(1, Ordering::Relaxed);
                        log("info", "recovered", json!({}));
                        break;
                    }
                    Err(e) => {
                        log("error", "reopen_failed", json!({"error": e.to_string(), "retry_in_s": 1}));
                        std::thread::sleep(Duration::from_secs(1));
                    }
                }
            }
            shared.recovering.store(false, Ordering::SeqCst);
        });
    }

    /// A read-only server's refresh: reopens the index every `refresh` so that it sees what
    /// the writing process added (a read-only open sees the writes made before it).
    pub fn refresh_forever(self: &Arc<Self>, every: Duration) {
        let shared = Arc::clone(self);
        std::thread::spawn(move || loop {
            std::thread::sleep(every);
            if shared.stopping.load(Ordering::SeqCst) {
                return;
            }
            match open(&shared.options) {
                Ok(index) => {
                    // the old view closes when its last request drops it
                    shared.put(Some(index));
                    shared.metrics.reopens.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => log("error", "refresh_failed", json!({"error": e.to_string()})),
            }
        });
    }
}

/// The index once `index` is its only reference (requests still running hold others).
fn wait_unshared(mut index: Arc<DocumentIndex>) -> DocumentIndex {
    loop {
        match Arc::try_unwrap(index) {
            Ok(i) => return i,
            Err(shared) => {
                index = shared;
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
}

fn open(options: &ServeOptions) -> Result<DocumentIndex, simdex_fingerprint::Error> {
    let sketches = options.sketches.then(|| SketchOptions::default().column());
    let index_options = IndexOptions::default()
        .with_k(options.k)
        .with_durability(options.durability)
        .with_create(!options.read_only)
        .with_sketches(sketches)
        .with_expiry(options.expiry)
        .with_create_in_nonempty(options.create_in_nonempty);
    if options.read_only {
        DocumentIndex::open_read_only(&options.dir, index_options)
    } else {
        DocumentIndex::open(&options.dir, index_options)
    }
}
