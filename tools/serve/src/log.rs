//! Structured logs: one JSON object per line on standard error, with the time (seconds
//! since the Unix epoch), the level, the event's name and its fields.

use std::io::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

/// Writes `{"ts": ..., "level": level, "event": event, ...fields}` as one line.
pub fn log(level: &str, event: &str, fields: Value) {
    let ts = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    let mut line = Map::new();
    line.insert("ts".into(), Value::from((ts * 1000.0).round() / 1000.0));
    line.insert("level".into(), Value::from(level));
    line.insert("event".into(), Value::from(event));
    if let Value::Object(fields) = fields {
        line.extend(fields);
    }
    let mut text = serde_json::to_string(&Value::Object(line)).unwrap_or_default();
    text.push('\n');
    // a closed standard error must not stop the server
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}
