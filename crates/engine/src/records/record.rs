//! Where a launched run's records go: events and run logs into the [`Store`], and a copy of each
//! event to the [`RunObserver`] (the CLI draws its progress from it). Recording only: the
//! children that need a record of their own are launched by `launcher::children`.
//!
//! - [`StoreEvents`] appends each event as it is emitted, in order, then tells the observer. A
//!   store error is logged, never fails the run (a dead store is caught by the lease heartbeat).
//! - [`StoreRunLog`] is both the executor's [`RunLogSink`] (tool output, called synchronously from
//!   inside an exec's output stream) and the driver's [`RunLog`] (its `docker …` lines, the
//!   `post_create` and build output). Neither may block, so lines go into a channel; one writer
//!   task drains it in batches (gathering for up to 50 ms) into [`Store::append_node_logs`]
//!   (node output, consecutive lines of one node and stream in one row) and
//!   [`Store::append_logs`] (the engine's own lines). Output lines are shown to the observer as
//!   they arrive. [`LogWriter::finish`] flushes and stops the writer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use iterion_sandbox::{LogLevel, PullProgress, RunLog};
use std::time::Duration;

use iterion_store::{NewEvent, NewLogLine, NewNodeLog, RunId, Store};
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
    /// A line a node printed (stdout or stderr; redacted, without its newline), as it was
    /// printed. Lines past a node's bound (1 MiB per execution and stream) are not shown either.
    fn output(&self, _line: &LogLine) {}
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

/// The run log: node output (`node_logs`, per node and stream) and the engine's and driver's
/// own lines (`run_logs`), batched into the store, and each output line shown to the observer
/// as it arrives.
#[derive(Clone)]
pub(crate) struct StoreRunLog {
    tx: mpsc::UnboundedSender<Entry>,
    redactor: Arc<Redactor>,
    observer: Arc<dyn RunObserver>,
    /// Bytes recorded so far of each setup pseudo-node's stream, bounded like a node
    /// execution's ([`crate::records::sink::LOG_CAP`]).
    setup_bytes: Arc<Mutex<HashMap<(&'static str, LogStream), usize>>>,
}

/// What the writer task is handed.
enum Entry {
    /// A `run_logs` line.
    Run(NewLogLine),
    /// A line of a node's output.
    Node {
        node: String,
        stream: LogStream,
        text: String,
    },
    /// The node's stream reached its bound with the line before.
    Cut { node: String, stream: LogStream },
}

/// The writer task behind a [`StoreRunLog`]; [`LogWriter::finish`] flushes it.
pub(crate) struct LogWriter {
    task: JoinHandle<()>,
}

/// The most entries written in one round (one transaction per table).
const LOG_BATCH: usize = 512;
/// How long the writer gathers lines after the first of a round, so that a tool printing a
/// line every few milliseconds costs a row per batch, not per line.
const LOG_LINGER: Duration = Duration::from_millis(50);
/// The most bytes of text in one `node_logs` row.
const CHUNK_MAX: usize = 64 * 1024;

/// The node name under which the sandbox's `post_create` output is recorded (not an
/// identifier, so no workflow node can share it).
pub(crate) const POST_CREATE_NODE: &str = "sandbox.post_create";
/// The node name under which an image build's output is recorded.
pub(crate) const BUILD_NODE: &str = "sandbox.build";

/// The prefixes the sandbox core and the docker driver give their output lines
/// (`iterion_sandbox::post_create`, `iterion_sandbox_docker::build`).
const POST_CREATE_PREFIX: &str = "sandbox: postCreate: ";
const BUILD_PREFIX: &str = "sandbox: build: ";

impl StoreRunLog {
    /// A log for `run_id` and its writer task (spawned on the current runtime); output lines
    /// are shown to `observer` too.
    pub(crate) fn start(
        store: Arc<dyn Store>,
        run_id: RunId,
        redactor: Arc<Redactor>,
        observer: Arc<dyn RunObserver>,
    ) -> (StoreRunLog, LogWriter) {
        let (tx, mut rx) = mpsc::unbounded_channel::<Entry>();
        let task = tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                let mut batch = vec![first];
                let deadline = tokio::time::Instant::now() + LOG_LINGER;
                while batch.len() < LOG_BATCH {
                    match tokio::time::timeout_at(deadline, rx.recv()).await {
                        Ok(Some(entry)) => batch.push(entry),
                        Ok(None) | Err(_) => break,
                    }
                }
                let (lines, chunks) = split_batch(batch);
                if !lines.is_empty()
                    && let Err(error) = store.append_logs(&run_id, lines).await
                {
                    tracing::warn!("run {run_id}: could not record run-log lines: {error}");
                }
                if !chunks.is_empty()
                    && let Err(error) = store.append_node_logs(&run_id, chunks).await
                {
                    tracing::warn!("run {run_id}: could not record node output: {error}");
                }
            }
        });
        (
            StoreRunLog {
                tx,
                redactor,
                observer,
                setup_bytes: Arc::default(),
            },
            LogWriter { task },
        )
    }

    /// The run's redactor (the sandbox adds the proxy token to it once minted).
    pub(crate) fn redactor(&self) -> &Arc<Redactor> {
        &self.redactor
    }

    fn send(&self, entry: Entry) {
        // The receiver lives until `finish`; a line sent after it is dropped on purpose.
        let _ = self.tx.send(entry);
    }

    fn push(&self, stream: LogStream, line: String) {
        self.send(Entry::Run(NewLogLine::new(stream, line)));
    }

    /// A line of `node`'s output: shown, then stored (both redacted here, whoever redacted
    /// before).
    fn output(&self, node: &str, stream: LogStream, text: &str) {
        let line = LogLine {
            node: node.to_owned(),
            stream,
            text: self.redactor.redact(text),
        };
        self.observer.output(&line);
        self.send(Entry::Node {
            node: line.node,
            stream,
            text: line.text,
        });
    }
}

/// Sorts a round's entries into `run_logs` lines and `node_logs` chunks: consecutive lines of
/// the same node and stream share a chunk (up to [`CHUNK_MAX`] bytes); a cut closes its chunk
/// and marks it.
fn split_batch(batch: Vec<Entry>) -> (Vec<NewLogLine>, Vec<NewNodeLog>) {
    let mut lines = Vec::new();
    let mut chunks: Vec<NewNodeLog> = Vec::new();
    for entry in batch {
        match entry {
            Entry::Run(line) => lines.push(line),
            Entry::Node { node, stream, text } => match chunks.last_mut() {
                Some(last)
                    if last.node == node
                        && last.stream == stream
                        && !last.truncated
                        && last.text.len() + text.len() < CHUNK_MAX =>
                {
                    last.text.push('\n');
                    last.text.push_str(&text);
                }
                _ => chunks.push(NewNodeLog::new(node, stream, text)),
            },
            Entry::Cut { node, stream } => {
                match chunks
                    .iter_mut()
                    .rev()
                    .find(|c| c.node == node && c.stream == stream)
                {
                    Some(chunk) => chunk.truncated = true,
                    None => chunks.push(NewNodeLog::new(node, stream, "").truncated()),
                }
            }
        }
    }
    (lines, chunks)
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
        match line.stream {
            LogStream::Stdout | LogStream::Stderr => {
                self.output(&line.node, line.stream, &line.text);
            }
            LogStream::System => {
                self.push(line.stream, format!("[{}] {}", line.node, line.text));
            }
        }
    }

    fn truncated(&self, node: &str, stream: LogStream) {
        self.send(Entry::Cut {
            node: node.to_owned(),
            stream,
        });
    }
}

impl StoreRunLog {
    /// A line of the sandbox's setup output, within its pseudo-node's bound: past it, the cut
    /// is marked once and the rest dropped.
    fn setup_output(&self, node: &'static str, stream: LogStream, text: &str) {
        let cap = crate::records::sink::LOG_CAP;
        let kept = {
            let mut bytes = self
                .setup_bytes
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let used = bytes.entry((node, stream)).or_default();
            if *used >= cap {
                return;
            }
            let kept = iterion_agent::text::truncate_bytes(text, cap - *used);
            *used = (*used + kept.len() + 1).min(cap);
            (kept, *used >= cap)
        };
        self.output(node, stream, kept.0);
        if kept.1 {
            self.send(Entry::Cut {
                node: node.to_owned(),
                stream,
            });
            self.push(
                LogStream::System,
                format!(
                    "[{node}] {stream}: further output not recorded ({} KiB per stream)",
                    cap / 1024
                ),
            );
        }
    }
}

impl RunLog for StoreRunLog {
    fn line(&self, level: LogLevel, line: &str) {
        // The sandbox's own setup output is node output of its pseudo-nodes.
        let setup = [
            (POST_CREATE_PREFIX, POST_CREATE_NODE),
            (BUILD_PREFIX, BUILD_NODE),
        ]
        .into_iter()
        .find_map(|(prefix, node)| line.strip_prefix(prefix).map(|rest| (node, rest)));
        match (level, setup) {
            // Node execs are logged at debug: the executor records their output already.
            (LogLevel::Debug, _) => {}
            (LogLevel::Info, Some((node, text))) => {
                self.setup_output(node, LogStream::Stdout, text);
            }
            (LogLevel::Warn, Some((node, text))) => {
                self.setup_output(node, LogStream::Stderr, text);
            }
            (LogLevel::Info, None) => self.push(LogStream::System, self.redactor.redact(line)),
            (LogLevel::Warn, None) => self.push(
                LogStream::System,
                format!("warning: {}", self.redactor.redact(line)),
            ),
            (LogLevel::Error, _) => self.push(
                LogStream::System,
                format!("error: {}", self.redactor.redact(line)),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn node(node: &str, stream: LogStream, text: &str) -> Entry {
        Entry::Node {
            node: node.into(),
            stream,
            text: text.into(),
        }
    }

    #[test]
    fn a_batch_groups_runs_of_one_node_and_stream_into_chunks_and_marks_the_cut() {
        let (lines, chunks) = split_batch(vec![
            node("a", LogStream::Stdout, "1"),
            node("a", LogStream::Stdout, "2"),
            Entry::Run(NewLogLine::new(LogStream::System, "[a] $ x")),
            node("b", LogStream::Stdout, "3"),
            node("a", LogStream::Stderr, "4"),
            Entry::Cut {
                node: "a".into(),
                stream: LogStream::Stderr,
            },
            node("a", LogStream::Stderr, "5"),
            Entry::Cut {
                node: "c".into(),
                stream: LogStream::Stdout,
            },
        ]);
        assert_eq!(lines, vec![NewLogLine::new(LogStream::System, "[a] $ x")]);
        assert_eq!(
            chunks,
            vec![
                NewNodeLog::new("a", LogStream::Stdout, "1\n2"),
                NewNodeLog::new("b", LogStream::Stdout, "3"),
                NewNodeLog::new("a", LogStream::Stderr, "4").truncated(),
                NewNodeLog::new("a", LogStream::Stderr, "5"),
                NewNodeLog::new("c", LogStream::Stdout, "").truncated(),
            ]
        );
    }

    #[tokio::test]
    async fn setup_output_is_bounded_per_pseudo_node_and_stream_and_the_cut_marked() {
        let store: Arc<dyn Store> = Arc::new(
            iterion_store::SqliteStore::in_memory(iterion_store::SqliteOptions::default())
                .await
                .unwrap(),
        );
        let run = store
            .create_run(iterion_store::NewRun::new("w", "h", "w.iter"))
            .await
            .unwrap();
        let (log, writer) = StoreRunLog::start(
            Arc::clone(&store),
            run.id.clone(),
            Arc::new(Redactor::default()),
            Arc::new(NoObserver),
        );
        let line = "y".repeat(1023);
        let cap = crate::records::sink::LOG_CAP;
        for _ in 0..(cap / 1024 + 10) {
            RunLog::line(&log, LogLevel::Info, &format!("{POST_CREATE_PREFIX}{line}"));
        }
        RunLog::line(
            &log,
            LogLevel::Warn,
            &format!("{POST_CREATE_PREFIX}still-kept"),
        );
        drop(log);
        writer.finish().await;
        let chunks = store
            .node_logs(&run.id, &iterion_store::NodeLogQuery::default())
            .await
            .unwrap();
        let stdout: usize = chunks
            .iter()
            .filter(|c| c.stream == LogStream::Stdout)
            .map(|c| c.text.len() + 1)
            .sum();
        assert!(stdout <= cap + 1, "{stdout}");
        let last_stdout = chunks
            .iter()
            .rfind(|c| c.stream == LogStream::Stdout)
            .unwrap();
        assert_eq!(
            (last_stdout.node.as_str(), last_stdout.truncated),
            (POST_CREATE_NODE, true)
        );
        assert!(
            chunks
                .iter()
                .any(|c| c.stream == LogStream::Stderr && c.text == "still-kept")
        );
    }

    #[test]
    fn a_chunk_never_grows_past_its_bound() {
        let big = "x".repeat(40 * 1024);
        let (_, chunks) = split_batch(vec![
            node("a", LogStream::Stdout, &big),
            node("a", LogStream::Stdout, &big),
        ]);
        assert_eq!(chunks.len(), 2);
    }
}
