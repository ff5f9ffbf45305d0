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

/// One stored chunk of a node's output, as stored in `node_logs`: one or more complete lines of
/// one stream of one node, written together (the engine batches lines, so a chatty tool costs a
/// row per batch, not per line).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeLog {
    /// The run it belongs to.
    pub run_id: RunId,
    /// Position in the run's node log (1, 2, 3, …, gap-free, its own sequence apart from events
    /// and `run_logs`).
    pub seq: u64,
    /// When the store recorded it.
    pub ts: Timestamp,
    /// The node that printed it (`post_create` and `sandbox` for the sandbox's own setup).
    pub node: String,
    /// Its stream.
    pub stream: LogStream,
    /// The lines, joined by `\n`, without a final line ending.
    pub text: String,
    /// The node's output on this stream reached the engine's bound with this chunk: what it
    /// printed after it is not stored.
    pub truncated: bool,
}

impl NodeLog {
    /// The chunk's lines.
    pub fn lines(&self) -> std::str::Split<'_, char> {
        self.text.split('\n')
    }
}

/// A chunk of node output to append; the store assigns `seq` and `ts`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewNodeLog {
    /// The node.
    pub node: String,
    /// Its stream.
    pub stream: LogStream,
    /// The lines, joined by `\n`.
    pub text: String,
    /// The bound was reached with this chunk (see [`NodeLog::truncated`]).
    pub truncated: bool,
}

impl NewNodeLog {
    /// A chunk of `node`'s `stream`.
    pub fn new(node: impl Into<String>, stream: LogStream, text: impl Into<String>) -> Self {
        Self {
            node: node.into(),
            stream,
            text: text.into(),
            truncated: false,
        }
    }

    /// Marks the chunk as the last one stored for its node and stream.
    pub fn truncated(mut self) -> Self {
        self.truncated = true;
        self
    }
}

/// Which node-log chunks [`Store::node_logs`](crate::Store::node_logs) returns: those after
/// `after_seq`, in order, optionally of one node and one stream, at most `limit`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeLogQuery {
    /// Only chunks with a greater `seq` (0: from the start).
    pub after_seq: u64,
    /// Only this node's chunks; by default every node's.
    pub node: Option<String>,
    /// Only this stream's; by default every stream's.
    pub stream: Option<LogStream>,
    /// At most this many; by default 1000 (a reader pages with `after_seq`).
    pub limit: usize,
}

impl Default for NodeLogQuery {
    fn default() -> Self {
        Self {
            after_seq: 0,
            node: None,
            stream: None,
            limit: 1000,
        }
    }
}

impl NodeLogQuery {
    /// Chunks after `after_seq`.
    pub fn after(after_seq: u64) -> Self {
        Self {
            after_seq,
            ..Self::default()
        }
    }

    /// Keeps only `node`'s chunks.
    pub fn node(mut self, node: impl Into<String>) -> Self {
        self.node = Some(node.into());
        self
    }

    /// Keeps only `stream`'s chunks.
    pub fn stream(mut self, stream: LogStream) -> Self {
        self.stream = Some(stream);
        self
    }
}
