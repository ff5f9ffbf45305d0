//! Where the executor's records go: events ([`EventSink`]) and the run log of tool output
//! ([`RunLogSink`]). The launcher backs both with the store; the in-memory sinks serve tests and
//! embedders that only want to look.
//!
//! Both take already-redacted text. Neither can fail from the executor's point of view: a sink
//! that cannot write logs the error itself (a run is not failed because an audit line was lost,
//! and a dead store is caught by the lease heartbeat instead).

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use iterion_vocab::LogStream;

use crate::records::events::Event;

/// The bytes of each stream of a node's output recorded (and shown) per node execution, and per
/// run attempt for the sandbox's setup pseudo-nodes (1 MiB).
pub(crate) const LOG_CAP: usize = 1024 * 1024;

/// Receives events in the order the executor produces them. Concurrent fan-out branches emit
/// from the same task, one at a time.
#[async_trait]
pub trait EventSink: Send + Sync {
    /// Records one event.
    async fn emit(&self, event: Event);
}

/// One run-log line (redacted, without its newline).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogLine {
    /// The node that produced it.
    pub node: String,
    /// The stream.
    pub stream: LogStream,
    /// The text.
    pub text: String,
}

/// Receives tool output line by line as it is produced. Called from inside an exec's output
/// stream, so it must not block: buffer or hand the line to a channel.
pub trait RunLogSink: Send + Sync {
    /// Records one line.
    fn line(&self, line: LogLine);

    /// `node`'s `stream` reached its bound: nothing more of it is recorded for this execution
    /// (the line before was the last one). The default ignores it.
    fn truncated(&self, _node: &str, _stream: LogStream) {}
}

/// A [`RunLogSink`] that drops every line.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct NullRunLog;

impl RunLogSink for NullRunLog {
    fn line(&self, _line: LogLine) {}
}

/// Keeps events in memory, in order.
#[derive(Clone, Debug, Default)]
pub struct MemoryEventSink {
    events: Arc<Mutex<Vec<Event>>>,
}

impl MemoryEventSink {
    /// An empty sink.
    pub fn new() -> Self {
        MemoryEventSink::default()
    }

    /// Every event so far.
    pub fn events(&self) -> Vec<Event> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[async_trait]
impl EventSink for MemoryEventSink {
    async fn emit(&self, event: Event) {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(event);
    }
}

/// Keeps run-log lines in memory, in order.
#[derive(Clone, Debug, Default)]
pub struct MemoryRunLog {
    lines: Arc<Mutex<Vec<LogLine>>>,
}

impl MemoryRunLog {
    /// An empty log.
    pub fn new() -> Self {
        MemoryRunLog::default()
    }

    /// Every line so far.
    pub fn lines(&self) -> Vec<LogLine> {
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl RunLogSink for MemoryRunLog {
    fn line(&self, line: LogLine) {
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(line);
    }
}
