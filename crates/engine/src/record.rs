//! Where a launched run's records go: events and run logs into the [`Store`], and a copy of each
//! event to the [`RunObserver`] (the CLI draws its progress from it).
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
use iterion_store::{LogStream as StoreStream, NewEvent, NewLogLine, RunId, Store};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::events::Event;
use crate::secrets::Redactor;
use crate::sink::{EventSink, LogLine, LogStream, RunLogSink};

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

/// Child runs of subbot nodes as records of their own (DSL.md §3.9): each is created `running`
/// as a child of the parent record (parent id, root id, the parent's trust), holds its own lease
/// while it runs, gets its own events, and is saved with its outcome when it ends.
pub(crate) struct StoreChildRuns {
    store: Arc<dyn Store>,
    parent: iterion_store::Run,
    holder: String,
    observer: Arc<dyn RunObserver>,
    /// Cancelled when a child's lease is lost.
    on_lost: tokio_util::sync::CancellationToken,
    /// The lease keepers of the open children, by child run id.
    keepers: std::sync::Mutex<Vec<(String, crate::lease::LeaseKeeper)>>,
}

impl StoreChildRuns {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        parent: iterion_store::Run,
        holder: String,
        observer: Arc<dyn RunObserver>,
        on_lost: tokio_util::sync::CancellationToken,
    ) -> StoreChildRuns {
        StoreChildRuns {
            store,
            parent,
            holder,
            observer,
            on_lost,
            keepers: std::sync::Mutex::new(Vec::new()),
        }
    }

    fn keepers(&self) -> std::sync::MutexGuard<'_, Vec<(String, crate::lease::LeaseKeeper)>> {
        self.keepers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl crate::subbot::ChildRuns for StoreChildRuns {
    fn open<'a>(
        &'a self,
        _parent_run: &'a str,
        node: &'a str,
        subbot: &'a iterion_dsl::ir::SubbotNode,
        child: &'a iterion_dsl::ir::Workflow,
    ) -> futures_util::future::BoxFuture<'a, Result<crate::subbot::ChildRun, crate::outcome::Failure>>
    {
        Box::pin(async move {
            let ir = serde_json::to_vec(child).unwrap_or_default();
            let file = self
                .parent
                .file_path
                .parent()
                .map_or_else(|| subbot.source.clone().into(), |d| d.join(&subbot.source));
            // The hash of the child's source as resume computes it; the compiled child's when
            // the file is gone.
            let hash = iterion_dsl::load(&file).map_or_else(
                |_| crate::launch::workflow_hash(&ir),
                |bytes| crate::launch::workflow_hash(&bytes),
            );
            let new = iterion_store::NewRun::new(child.name.clone(), hash, file)
                .child_of(&self.parent)
                .lease(self.holder.clone(), crate::lease::LEASE_TTL);
            let run = self.store.create_run(new).await.map_err(|e| {
                crate::outcome::Failure::new(
                    crate::failure::FailureCode::ExecutionFailed,
                    format!("subbot {node}: cannot create the child run record: {e}"),
                )
            })?;
            self.observer.run_created(run.id.as_str());
            let keeper = crate::lease::LeaseKeeper::start(
                Arc::clone(&self.store),
                run.id.clone(),
                self.holder.clone(),
                self.on_lost.clone(),
            );
            self.keepers().push((run.id.to_string(), keeper));
            let events = StoreEvents::new(
                Arc::clone(&self.store),
                run.id.clone(),
                Arc::clone(&self.observer),
            );
            let started = crate::events::RunStarted {
                workflow: run.workflow.clone(),
                workflow_hash: run.workflow_hash.clone(),
                trust: crate::run::sandbox_trust(run.trust).as_str().to_owned(),
                resumed: false,
                parent_run: run.parent_run_id.as_ref().map(ToString::to_string),
                root_run: Some(run.root_run_id.to_string()),
            };
            Ok(crate::subbot::ChildRun {
                run_id: run.id.to_string(),
                events: Arc::new(events),
                started,
            })
        })
    }

    fn close<'a>(
        &'a self,
        child: &'a crate::subbot::ChildRun,
        outcome: &'a crate::outcome::RunOutcome,
    ) -> futures_util::future::BoxFuture<'a, ()> {
        Box::pin(async move {
            let keeper = {
                let mut keepers = self.keepers();
                keepers
                    .iter()
                    .position(|(id, _)| *id == child.run_id)
                    .map(|at| keepers.swap_remove(at).1)
            };
            if let Err(error) = save_child(self.store.as_ref(), &child.run_id, outcome).await {
                tracing::warn!(
                    "child run {}: could not save its outcome: {error}",
                    child.run_id
                );
            }
            if let Some(keeper) = keeper {
                keeper.release().await;
            }
        })
    }
}

/// Saves a child run's status, failure and last node (three tries on a version conflict).
async fn save_child(
    store: &dyn Store,
    run_id: &str,
    outcome: &crate::outcome::RunOutcome,
) -> iterion_store::Result<()> {
    let Ok(id) = run_id.parse::<RunId>() else {
        return Ok(());
    };
    for attempt in 1..=3 {
        let Some(current) = store.get_run(&id).await? else {
            return Ok(());
        };
        let mut next = current.clone();
        next.status = crate::run::store_status(outcome.status);
        next.failure_code = outcome.failure_code.map(|c| c.as_str().to_owned());
        next.failure_message = outcome.message.clone();
        next.last_completed_node = outcome.last_completed_node.clone();
        match store.save_run(&next, current.version).await {
            Err(iterion_store::Error::Conflict { .. }) if attempt < 3 => {}
            other => return other.map(|_| ()),
        }
    }
    Ok(())
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

    fn push(&self, stream: StoreStream, line: String) {
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
        let stream = match line.stream {
            LogStream::Stdout => StoreStream::Stdout,
            LogStream::Stderr => StoreStream::Stderr,
            LogStream::System => StoreStream::System,
        };
        self.push(stream, format!("[{}] {}", line.node, line.text));
    }
}

impl RunLog for StoreRunLog {
    fn line(&self, level: LogLevel, line: &str) {
        let text = self.redactor.redact(line);
        match level {
            // Node execs are logged at debug: the executor records their output already.
            LogLevel::Debug => {}
            LogLevel::Info => self.push(StoreStream::System, text),
            LogLevel::Warn => self.push(StoreStream::System, format!("warning: {text}")),
            LogLevel::Error => self.push(StoreStream::System, format!("error: {text}")),
        }
    }
}
