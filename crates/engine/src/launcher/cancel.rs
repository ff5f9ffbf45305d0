//! Cancelling a run from any process (`iterion cancel`, the studio), and the watch an attempt
//! keeps for it.
//!
//! The request is recorded in the store, so it reaches the run wherever it executes (this host, a
//! runner elsewhere on the same PostgreSQL): [`request_cancel`] appends a `cancel_requested`
//! event to a run that a process is executing (it holds the run's lease), and that process's
//! [`CancelWatch`] polls the run's events and cancels the attempt — the same stop as the
//! embedder's cancel token, so the executor stops, the sandbox is torn down and the run ends
//! `cancelled` / `CANCELLED` with its one terminal event. A run nobody executes (`queued`,
//! `paused`, `failed_resumable`, or `running` with a lapsed lease) is moved to `cancelled` at
//! once, under compare-and-swap. A run that is over (`finished`, `failed`, `cancelled`) is
//! refused.
//!
//! One rule says which request is pending: a `cancel_requested` event recorded after the
//! attempt's `run_started` (an older one belongs to an attempt that ended before it noticed).

use std::sync::Arc;
use std::time::Duration;

use iterion_store::{Error as StoreError, NewEvent, Run, RunId, RunStatus, Store};
use iterion_vocab::FailureCode;
use tokio_util::sync::CancellationToken;

use crate::records::events::{CancelRequested, Event, PHASE_EXECUTION, RunCancelled};

/// How often an attempt looks for a cancel request.
pub(crate) const CANCEL_POLL: Duration = Duration::from_millis(500);

/// The `phase` of the `run_cancelled` of a run cancelled while queued (it never started).
pub const PHASE_QUEUED: &str = "queued";

/// What [`request_cancel`] did.
#[derive(Clone, Debug, PartialEq)]
pub enum CancelOutcome {
    /// A process executes the run: the request is recorded, and that process stops the run
    /// (within about a second, plus its sandbox's teardown). Wait for the status to turn
    /// terminal to see how it ended.
    Requested(Run),
    /// Nobody executed the run: it is `cancelled` now (the run as saved).
    Cancelled(Run),
}

/// Why [`request_cancel`] refused.
#[derive(Debug, thiserror::Error)]
pub enum CancelError {
    /// The run is over: there is nothing to cancel.
    #[error("run {run_id} is {status}: it is over, there is nothing to cancel")]
    Over {
        /// The run.
        run_id: RunId,
        /// Its status: `finished`, `failed` or `cancelled`.
        status: RunStatus,
    },
    /// The store failed, or has no such run (`RunNotFound`).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl CancelError {
    /// The stable code: `RUN_OVER`, or the store error's.
    pub fn code(&self) -> &'static str {
        match self {
            CancelError::Over { .. } => "RUN_OVER",
            CancelError::Store(error) => error.code(),
        }
    }
}

/// Whether a run in `status` can be cancelled: any that is not over (`finished`, `failed`,
/// `cancelled`). [`request_cancel`] refuses the others; the studio offers its button by it.
pub const fn cancellable(status: RunStatus) -> bool {
    !matches!(
        status,
        RunStatus::Finished | RunStatus::Failed | RunStatus::Cancelled
    )
}

/// How many times a direct cancel retries a lost compare-and-swap.
const ATTEMPTS: u32 = 5;

/// Cancels run `id` on behalf of `by` (`iterion cancel`, `studio`: recorded in the event).
///
/// # Errors
///
/// [`CancelError::Over`] for a `finished`, `failed` or `cancelled` run; `RunNotFound` and
/// backend errors as [`CancelError::Store`].
pub async fn request_cancel(
    store: &dyn Store,
    id: &RunId,
    by: &str,
) -> Result<CancelOutcome, CancelError> {
    let request = Event::CancelRequested(CancelRequested { by: by.to_owned() });
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut run = store
            .get_run(id)
            .await?
            .ok_or_else(|| StoreError::RunNotFound { run_id: id.clone() })?;
        if !cancellable(run.status) {
            return Err(CancelError::Over {
                run_id: run.id,
                status: run.status,
            });
        }
        if store.lease_held(id).await? {
            store
                .append_event(id, NewEvent::new(request.kind(), request.data()))
                .await?;
            return Ok(CancelOutcome::Requested(run));
        }
        // Nobody executes it: cancel it here. A process that takes it meanwhile (a runner's
        // claim, a resume) bumps its version first, and this save loses and looks again.
        let phase = if run.status == RunStatus::Queued {
            PHASE_QUEUED
        } else {
            PHASE_EXECUTION
        };
        let version = run.version;
        run.status = RunStatus::Cancelled;
        run.failure_code = Some(FailureCode::Cancelled.as_str().to_owned());
        let reason = format!("the run was cancelled (by {by})");
        run.failure_message = Some(reason.clone());
        match store.save_run(&run, version).await {
            Ok(_) => {
                let ended = Event::RunCancelled(RunCancelled {
                    reason,
                    phase: phase.to_owned(),
                });
                store
                    .append_events(
                        id,
                        vec![
                            NewEvent::new(request.kind(), request.data()),
                            NewEvent::new(ended.kind(), ended.data()),
                        ],
                    )
                    .await?;
                let saved = store
                    .get_run(id)
                    .await?
                    .ok_or_else(|| StoreError::RunNotFound { run_id: id.clone() })?;
                return Ok(CancelOutcome::Cancelled(saved));
            }
            Err(StoreError::Conflict { .. }) if attempt < ATTEMPTS => {}
            Err(error) => return Err(error.into()),
        }
    }
}

/// Waits until run `id` is stopped — terminal or paused, and no process holds its lease (its
/// sandbox is torn down then) — or `timeout` passed; returns the run as it is then (check its
/// status). What `iterion cancel` and the studio wait on after a [`CancelOutcome::Requested`].
///
/// # Errors
///
/// `RunNotFound` (the run was removed meanwhile) and backend errors.
pub async fn wait_stopped(
    store: &dyn Store,
    id: &RunId,
    timeout: Duration,
) -> Result<Run, StoreError> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let run = store
            .get_run(id)
            .await?
            .ok_or_else(|| StoreError::RunNotFound { run_id: id.clone() })?;
        let stopped = (run.status.is_terminal() || run.status == RunStatus::Paused)
            && !store.lease_held(id).await?;
        if stopped || tokio::time::Instant::now() >= deadline {
            return Ok(run);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Watches one attempt's run for a pending cancel request ([module docs](self)), polling every
/// [`CANCEL_POLL`] until `done` is cancelled; cancels `requested` when one comes.
pub(crate) struct CancelWatch;

impl CancelWatch {
    pub(crate) fn start(
        store: Arc<dyn Store>,
        run_id: RunId,
        requested: CancellationToken,
        done: CancellationToken,
    ) {
        tokio::spawn(async move {
            let mut cursor = 0;
            // A request counts once this attempt's `run_started` is behind it; each
            // `run_started` (the latest is this attempt's) clears an older attempt's request.
            let mut started = false;
            let mut pending = false;
            loop {
                match store.events(&run_id, cursor).await {
                    Ok(events) => {
                        for event in events {
                            cursor = event.seq;
                            match event.kind.as_str() {
                                "run_started" => (started, pending) = (true, false),
                                "cancel_requested" if started => pending = true,
                                _ => {}
                            }
                        }
                        if pending {
                            tracing::info!("run {run_id}: cancel requested");
                            requested.cancel();
                            return;
                        }
                    }
                    Err(error) => tracing::warn!("run {run_id}: watching for a cancel: {error}"),
                }
                tokio::select! {
                    () = done.cancelled() => return,
                    () = tokio::time::sleep(CANCEL_POLL) => {}
                }
            }
        });
    }
}

#[cfg(test)]
#[path = "cancel_tests.rs"]
mod tests;
