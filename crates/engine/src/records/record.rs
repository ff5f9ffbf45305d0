//! Where a launched run's records go: events and run logs into the [`Store`], and a copy of each
//! event to the [`RunObserver`] (the CLI draws its progress from it). Recording only: the
//! children that need a record of their own are launched by `launcher::children`.
//!
//! - [`StoreEvents`] appends each event as it is emitted, in order, then tells the observer. A
//!   store error is logged, never fails the run (a dead store is caught by the lease heartbeat).
//! - [`StoreRunLog`] is both the executor's [`RunLogSink`] (tool output, called synchronously from
//!   inside an exec's output stream) and the driver's [`RunLog`] (its `docker …` lines). Neither
//!   may block, so lines go into a channel; one writer task drains it in batches into
//!   [`Store::append_logs`]. [`StoreRunLog::finish`] flushes and stops it.

use std::sync::Arc;

use async_trait::async_trait;
use iterion_sandbox::{LogLevel, PullProgress, RunLog};
use iterion_store::{NewEvent, NewLogLine, RunId, Store};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::records::events::Event;
use crate::records::secrets::Redactor;
use crate::records::sink::{EventSink, LogLine, RunLogSink};
use iterion_vocab::LogStream;

/// Watches a run as it happens: the CLI prints a line per node and a pull progress bar from
/// these. Every method defaults to doing nothing. Called from the run's task: must not block.
pub trait RunObserver: Send + Sync {
    /// The run record exists (its id is known).
    fn run_created(&self, _run_id: &str) {}
    /// An event was recorded.
    fn event(&self, _event: &Event) {}
    /// Image pull progress.
    fn pull(&self, _update: &PullProgress) {}
}

/// A [`RunObserver`] that ignores everything.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoObserver;

impl RunObserver for NoObserver {}

/// Appends events to the store, then shows them to the observer.
#[derive(Clone)]
pub(crate) struct StoreEvents {
    store: Arc<dyn Store>,
    run_id: RunId,
    observer: Arc<dyn RunObserver>,
}

impl StoreEvents {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        run_id: RunId,
        observer: Arc<dyn RunObserver>,
    ) -> StoreEvents {
        StoreEvents {
            store,
            run_id,
            observer,
        }
    }
}

#[async_trait]
impl EventSink for StoreEvents {
    async fn emit(&self, event: Event) {
        let record = NewEvent::new(event.kind(), event.data());
        if let Err(error) = self.store.append_event(&self.run_id, record).await {
            tracing::warn!(
                "run {}: could not record event {}: {error}",
                self.run_id,
                event.kind()
            );
        }
        self.observer.event(&event);
    }
}

/// The run log: tool output and driver operations, batched into the store.
#[derive(Clone)]
pub(crate) struct StoreRunLog {
    tx: mpsc::UnboundedSender<NewLogLine>,
    redactor: Arc<Redactor>,
}

/// The writer task behind a [`StoreRunLog`]; [`LogWriter::finish`] flushes it.
pub(crate) struct LogWriter {
    task: JoinHandle<()>,
}

/// The most lines written in one transaction.
const LOG_BATCH: usize = 512;

impl StoreRunLog {
    /// A log for `run_id` and its writer task (spawned on the current runtime).
    pub(crate) fn start(
        store: Arc<dyn Store>,
        run_id: RunId,
        redactor: Arc<Redactor>,
    ) -> (StoreRunLog, LogWriter) {
        let (tx, mut rx) = mpsc::unbounded_channel::<NewLogLine>();
        let task = tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                let mut batch = vec![first];
                while batch.len() < LOG_BATCH {
                    match rx.try_recv() {
                        Ok(line) => batch.push(line),
                        Err(_) => break,
                    }
                }
                if let Err(error) = store.append_logs(&run_id, batch).await {
                    tracing::warn!("run {run_id}: could not record run-log lines: {error}");
                }
            }
        });
        (StoreRunLog { tx, redactor }, LogWriter { task })
    }

    /// The run's redactor (the sandbox adds the proxy token to it once minted).
    pub(crate) fn redactor(&self) -> &Arc<Redactor> {
        &self.redactor
    }

    fn push(&self, stream: LogStream, line: String) {
        // The receiver lives until `finish`; a line sent after it is dropped on purpose.
        let _ = self.tx.send(NewLogLine::new(stream, line));
    }
}

impl LogWriter {
    /// Waits until every line sent by now (and by any sender still alive) is written; call it
    /// after the last sender is dropped.
    pub(crate) async fn finish(self) {
        if let Err(error) = self.task.await {
            tracing::warn!("run-log writer stopped: {error}");
        }
    }
}

impl RunLogSink for StoreRunLog {
    fn line(&self, line: LogLine) {
        self.push(line.stream, format!("[{}] {}", line.node, line.text));
    }
}

impl RunLog for StoreRunLog {
    fn line(&self, level: LogLevel, line: &str) {
        let text = self.redactor.redact(line);
        match level {
            // Node execs are logged at debug: the executor records their output already.
            LogLevel::Debug => {}
            LogLevel::Info => self.push(LogStream::System, text),
            LogLevel::Warn => self.push(LogStream::System, format!("warning: {text}")),
            LogLevel::Error => self.push(LogStream::System, format!("error: {text}")),
        }
    }
}
