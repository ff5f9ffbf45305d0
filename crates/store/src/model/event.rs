//! Append-only records of a run: audit events and log lines.

use iterion_vocab::LogStream;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::id::RunId;
use crate::time::Timestamp;

/// One audit event of a run, as stored in `events` (SANDBOX.md §9.1).
///
/// Serialises as `{"run_id", "seq", "ts", "type", "data"}`: `kind` is stored and serialised as
/// `type`, the name the engine's event enum is tagged with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// The run it belongs to.
    pub run_id: RunId,
    /// Position in the run's event log: 1, 2, 3, … with no gap, assigned by the store in
    /// commit order, also when several writers append at once.
    pub seq: u64,
    /// When the store recorded it.
    pub ts: Timestamp,
    /// The event type (`sandbox_started`, `node_finished`, …).
    #[serde(rename = "type")]
    pub kind: String,
    /// The payload.
    pub data: Value,
}

/// An event to append; the store assigns `seq` and `ts`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NewEvent {
    /// The event type.
    #[serde(rename = "type")]
    pub kind: String,
    /// The payload.
    pub data: Value,
}

impl NewEvent {
    /// An event of type `kind` carrying `data`.
    pub fn new(kind: impl Into<String>, data: Value) -> Self {
        Self {
            kind: kind.into(),
            data,
        }
    }
}

/// One line of a run's log, as stored in `run_logs`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogLine {
    /// The run it belongs to.
    pub run_id: RunId,
    /// Position in the run's log (1, 2, 3, …, gap-free, its own sequence apart from events).
    pub seq: u64,
    /// When the store recorded it.
    pub ts: Timestamp,
    /// Where it came from.
    pub stream: LogStream,
    /// The text, without its line ending.
    pub line: String,
}

/// A log line to append; the store assigns `seq` and `ts`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewLogLine {
    /// Where it came from.
    pub stream: LogStream,
    /// The text.
    pub line: String,
}

impl NewLogLine {
    /// A line of `stream`.
    pub fn new(stream: LogStream, line: impl Into<String>) -> Self {
        Self {
            stream,
            line: line.into(),
        }
    }
}
