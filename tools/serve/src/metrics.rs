//! The server's counters and histograms, and their Prometheus text exposition (format
//! 0.0.4) at `/metrics`: requests and errors by operation, latency and batch-size
//! histograms, connections and work in flight, and the index's own statistics.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::protocol::Op;

/// Upper bounds of the latency buckets, in seconds.
const LATENCY_BOUNDS: [f64; 14] = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0];
/// Upper bounds of the batch-size buckets, in items.
const BATCH_BOUNDS: [f64; 7] = [1.0, 10.0, 100.0, 1000.0, 10000.0, 100000.0, 1000000.0];
/// The status classes errors are counted by (every status the server answers with).
const STATUSES: [u16; 14] = [400, 401, 403, 404, 405, 408, 409, 413, 415, 422, 429, 500, 503, 507];

/// The kinds of a refused document (answered 422, nothing stored), counted apart from the
/// errors: a page too short to fingerprint is what the crawler sent, not a failure.
pub const REFUSALS: [&str; 2] = ["empty_document", "binary_document"];

/// A histogram of fixed buckets (cumulative on output).
struct Histogram<const N: usize> {
    bounds: &'static [f64; N],
    counts: [AtomicU64; N],
    over: AtomicU64,
    /// Sum of observations, in millionths.
    sum_micros: AtomicU64,
}

impl<const N: usize> Histogram<N> {
    fn new(bounds: &'static [f64; N]) -> Self {
        Histogram { bounds, counts: std::array::from_fn(|_| AtomicU64::new(0)), over: AtomicU64::new(0), sum_micros: AtomicU64::new(0) }
    }

    fn observe(&self, v: f64) {
        match self.bounds.iter().position(|&b| v <= b) {
            Some(i) => self.counts.get(i).map_or((), |c| {
                c.fetch_add(1, Relaxed);
            }),
            None => {
                self.over.fetch_add(1, Relaxed);
            }
        }
        self.sum_micros.fetch_add((v * 1e6) as u64, Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let mut cumulative = 0;
        for (b, c) in self.bounds.iter().zip(&self.counts) {
            cumulative += c.load(Relaxed);
            let _ = writeln!(out, "{name}_bucket{{{labels}le=\"{b}\"}} {cumulative}");
        }
        cumulative += self.over.load(Relaxed);
        let _ = writeln!(out, "{name}_bucket{{{labels}le=\"+Inf\"}} {cumulative}");
        let _ = writeln!(out, "{name}_sum{{{}}} {}", labels.trim_end_matches(','), self.sum_micros.load(Relaxed) as f64 / 1e6);
        let _ = writeln!(out, "{name}_count{{{}}} {cumulative}", labels.trim_end_matches(','));
    }
}

/// Per-operation figures.
struct PerOp {
    requests: AtomicU64,
    errors: [AtomicU64; STATUSES.len()],
    other_errors: AtomicU64,
    /// Documents refused as too short or binary: the client's outcome, not an error.
    refused: [AtomicU64; REFUSALS.len()],
    latency: Histogram<14>,
    batch: Histogram<7>,
}

/// Everything `/metrics` reports of the server itself.
pub struct Metrics {
    ops: Vec<PerOp>,
    /// Requests that named no operation (unknown paths, bad methods, refused before decoding).
    pub unrouted: AtomicU64,
    /// Open connections.
    pub connections: AtomicU64,
    /// Connections accepted since start.
    pub connections_total: AtomicU64,
    /// Requests being worked on.
    pub in_flight: AtomicU64,
    /// Connections refused because `--max-connections` were open.
    pub refused_connections: AtomicU64,
    /// Requests refused because the in-flight or memory bound was reached.
    pub overloaded: AtomicU64,
    /// Times the index was reopened (after a failed write, or a read-only refresh).
    pub reopens: AtomicU64,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            ops: Op::ALL
                .iter()
                .map(|_| PerOp {
                    requests: AtomicU64::new(0),
                    errors: std::array::from_fn(|_| AtomicU64::new(0)),
                    other_errors: AtomicU64::new(0),
                    refused: std::array::from_fn(|_| AtomicU64::new(0)),
                    latency: Histogram::new(&LATENCY_BOUNDS),
                    batch: Histogram::new(&BATCH_BOUNDS),
                })
                .collect(),
            unrouted: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            connections_total: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            refused_connections: AtomicU64::new(0),
            overloaded: AtomicU64::new(0),
            reopens: AtomicU64::new(0),
        }
    }
}

impl Metrics {
    /// Counts one request of `op` that took `elapsed`, carried `items` items and answered
    /// `status`.
    pub fn observe(&self, op: Op, elapsed: Duration, items: usize, status: u16) {
        self.observe_outcome(op, elapsed, items, status, None);
    }

    /// [`Self::observe`] of a request answered `status` with the error kind `kind`: a refused
    /// document ([`REFUSALS`]) is counted as an outcome (`simdex_documents_refused_total`),
    /// not in `simdex_errors_total`.
    pub fn observe_outcome(&self, op: Op, elapsed: Duration, items: usize, status: u16, kind: Option<&str>) {
        let Some(p) = self.ops.get(op.index()) else { return };
        p.requests.fetch_add(1, Relaxed);
        p.latency.observe(elapsed.as_secs_f64());
        p.batch.observe(items as f64);
        if let Some(c) = kind.and_then(|k| REFUSALS.iter().position(|&r| r == k)).and_then(|i| p.refused.get(i)) {
            c.fetch_add(1, Relaxed);
            return;
        }
        if status >= 400 {
            match STATUSES.iter().position(|&s| s == status).and_then(|i| p.errors.get(i)) {
                Some(c) => c.fetch_add(1, Relaxed),
                None => p.other_errors.fetch_add(1, Relaxed),
            };
        }
    }

    /// The exposition: the server's figures, then `index` (the index's statistics as
    /// `ops::stats` gives them; `None` while it is not open).
    pub fn render(&self, index: Option<&serde_json::Value>) -> String {
        let mut out = String::with_capacity(16 << 10);
        out.push_str("# HELP simdex_requests_total Requests answered, by operation.\n# TYPE simdex_requests_total counter\n");
        for (op, p) in Op::ALL.iter().zip(&self.ops) {
            let _ = writeln!(out, "simdex_requests_total{{op=\"{}\"}} {}", op.name(), p.requests.load(Relaxed));
        }
        out.push_str("# HELP simdex_errors_total Requests answered with an error status, by operation and status.\n# TYPE simdex_errors_total counter\n");
        for (op, p) in Op::ALL.iter().zip(&self.ops) {
            for (status, c) in STATUSES.iter().zip(&p.errors) {
                let n = c.load(Relaxed);
                if n > 0 {
                    let _ = writeln!(out, "simdex_errors_total{{op=\"{}\",status=\"{status}\"}} {n}", op.name());
                }
            }
            let n = p.other_errors.load(Relaxed);
            if n > 0 {
                let _ = writeln!(out, "simdex_errors_total{{op=\"{}\",status=\"other\"}} {n}", op.name());
            }
        }
        out.push_str("# HELP simdex_documents_refused_total Documents refused as too short or binary (answered 422, nothing stored): outcomes of the client's input, not errors.\n# TYPE simdex_documents_refused_total counter\n");
        for (op, p) in Op::ALL.iter().zip(&self.ops) {
            for (reason, c) in REFUSALS.iter().zip(&p.refused) {
                let n = c.load(Relaxed);
                if n > 0 {
                    let _ = writeln!(out, "simdex_documents_refused_total{{op=\"{}\",reason=\"{reason}\"}} {n}", op.name());
                }
            }
        }
        out.push_str("# HELP simdex_request_duration_seconds Time from a request's body read to its answer, by operation.\n# TYPE simdex_request_duration_seconds histogram\n");
        for (op, p) in Op::ALL.iter().zip(&self.ops) {
            p.latency.render(&mut out, "simdex_request_duration_seconds", &format!("op=\"{}\",", op.name()));
        }
        out.push_str("# HELP simdex_batch_items Items per request, by operation.\n# TYPE simdex_batch_items histogram\n");
        for (op, p) in Op::ALL.iter().zip(&self.ops) {
            p.batch.render(&mut out, "simdex_batch_items", &format!("op=\"{}\",", op.name()));
        }
        let gauge = |out: &mut String, name: &str, kind: &str, help: &str, v: u64| {
            let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}\n");
        };
        gauge(&mut out, "simdex_unrouted_requests_total", "counter", "Requests to no operation (unknown path or method, refused before decoding).", self.unrouted.load(Relaxed));
        gauge(&mut out, "simdex_connections", "gauge", "Open connections.", self.connections.load(Relaxed));
        gauge(&mut out, "simdex_connections_total", "counter", "Connections accepted.", self.connections_total.load(Relaxed));
        gauge(&mut out, "simdex_refused_connections_total", "counter", "Connections refused with 503 because --max-connections were open.", self.refused_connections.load(Relaxed));
        gauge(&mut out, "simdex_in_flight_requests", "gauge", "Requests being read or worked on.", self.in_flight.load(Relaxed));
        gauge(&mut out, "simdex_overloaded_total", "counter", "Requests refused with 503 because the in-flight or memory bound was reached.", self.overloaded.load(Relaxed));
        gauge(
            &mut out,
            "simdex_index_reopens_total",
            "counter",
            "Times the index was reopened (after a failed write, or to refresh a read-only view).",
            self.reopens.load(Relaxed),
        );
        gauge(&mut out, "simdex_index_open", "gauge", "1 when the index is open and serving.", u64::from(index.is_some()));
        if let Some(s) = index {
            let n = |key: &str| s.get(key).and_then(serde_json::Value::as_u64).unwrap_or(0);
            gauge(&mut out, "simdex_index_segment_entries", "gauge", "Fingerprints in segments (including ones tombstones hide).", n("segment_fingerprints"));
            gauge(&mut out, "simdex_index_segments", "gauge", "Live segments.", n("segments"));
            gauge(&mut out, "simdex_index_memtable_inserts", "gauge", "Inserts in the active memtable.", n("memtable_inserts"));
            gauge(&mut out, "simdex_index_memtable_deletes", "gauge", "Deletes in the active memtable.", n("memtable_deletes"));
            gauge(&mut out, "simdex_index_frozen_ops", "gauge", "Operations in memtables waiting for a flush.", n("frozen_ops"));
            gauge(&mut out, "simdex_index_tombstones", "gauge", "Tombstones in tombstone files.", n("tombstones"));
            gauge(&mut out, "simdex_index_log_bytes", "gauge", "Bytes in live logs.", n("log_bytes"));
            gauge(&mut out, "simdex_index_last_seq", "gauge", "Sequence number of the last write.", n("last_seq"));
            gauge(&mut out, "simdex_index_synced_seq", "gauge", "Every write up to this sequence number is fsynced.", n("synced_seq"));
            gauge(&mut out, "simdex_index_flushed_seq", "gauge", "Every write up to this sequence number is in a segment.", n("flushed_seq"));
            gauge(&mut out, "simdex_index_log_syncs_total", "counter", "fsyncs of the log since open (one serves many writes).", n("log_syncs"));
            gauge(&mut out, "simdex_index_flushes_total", "counter", "Flushes since open.", n("flushes"));
            gauge(&mut out, "simdex_index_compactions_total", "counter", "Compactions since open.", n("compactions"));
            let failing = s.get("maintenance_error").is_some_and(|e| !e.is_null());
            gauge(&mut out, "simdex_index_background_error", "gauge", "1 while the last background flush or compaction failed.", u64::from(failing));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_and_errors_counted_by_status() {
        let m = Metrics::default();
        m.observe(Op::Query, Duration::from_micros(70), 1, 200);
        m.observe(Op::Query, Duration::from_millis(2), 1, 400);
        m.observe(Op::QueryMany, Duration::from_secs(9), 5000, 200);
        m.observe(Op::Insert, Duration::from_millis(1), 1, 507);
        m.observe(Op::Insert, Duration::from_millis(1), 1, 408);
        let text = m.render(None);
        assert!(text.contains("simdex_requests_total{op=\"query\"} 2\n"), "{text}");
        assert!(text.contains("simdex_errors_total{op=\"query\",status=\"400\"} 1\n"), "{text}");
        assert!(text.contains("simdex_errors_total{op=\"insert\",status=\"507\"} 1\n"), "{text}");
        assert!(text.contains("simdex_errors_total{op=\"insert\",status=\"408\"} 1\n"), "{text}");
        assert!(!text.contains("status=\"other\""), "{text}");
        assert!(text.contains("simdex_request_duration_seconds_bucket{op=\"query\",le=\"0.0001\"} 1\n"), "{text}");
        assert!(text.contains("simdex_request_duration_seconds_bucket{op=\"query\",le=\"0.0025\"} 2\n"), "{text}");
        assert!(text.contains("simdex_request_duration_seconds_bucket{op=\"query_many\",le=\"5\"} 0\n"), "{text}");
        assert!(text.contains("simdex_request_duration_seconds_bucket{op=\"query_many\",le=\"+Inf\"} 1\n"), "{text}");
        assert!(text.contains("simdex_batch_items_bucket{op=\"query_many\",le=\"10000\"} 1\n"), "{text}");
        // a too-short page is the client's outcome: counted, never as an error
        m.observe_outcome(Op::FindOrInsertDocument, Duration::from_millis(1), 1, 422, Some("empty_document"));
        let text = m.render(None);
        assert!(text.contains("simdex_documents_refused_total{op=\"find_or_insert_document\",reason=\"empty_document\"} 1\n"), "{text}");
        assert!(text.contains("simdex_requests_total{op=\"find_or_insert_document\"} 1\n"), "{text}");
        assert!(!text.contains("status=\"422\""), "{text}");
        assert!(text.contains("simdex_request_duration_seconds_count{op=\"query\"} 2\n"), "{text}");
        assert!(text.contains("simdex_index_open 0\n"), "{text}");
    }
}
