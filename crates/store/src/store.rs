//! The `Store` trait: everything the engine, the CLI, the runner and the reaper ask of durable
//! run state. Backends: [`SqliteStore`](crate::SqliteStore) now, PostgreSQL later, behind the
//! same trait.

use std::fmt;
use std::ops::Range;
use std::time::Duration;

use async_trait::async_trait;

use crate::error::Result;
use crate::model::{
    Claim, Event, Lease, Liveness, LogLine, LogStream, NewEvent, NewLogLine, NewNodeLog, NewRun,
    NodeLog, NodeLogQuery, Run, RunId, RunStatus,
};
use crate::time::Timestamp;

/// Which runs [`Store::list_runs`] returns: newest first (by creation), at most `limit`,
/// optionally only those in one status, optionally only top-level runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunQuery {
    /// Only runs in this status; by default any.
    pub status: Option<RunStatus>,
    /// At most this many; by default 50.
    pub limit: usize,
    /// Only runs without a parent (what a person started, not subbot children); by default
    /// every run.
    pub top_level: bool,
}

impl Default for RunQuery {
    fn default() -> Self {
        Self::newest(50)
    }
}

impl RunQuery {
    /// The newest `limit` runs, of any status.
    pub fn newest(limit: usize) -> Self {
        Self {
            status: None,
            limit,
            top_level: false,
        }
    }

    /// Keeps only runs without a parent.
    pub fn top_level(mut self) -> Self {
        self.top_level = true;
        self
    }

    /// Keeps only runs in `status`.
    pub fn status(mut self, status: RunStatus) -> Self {
        self.status = Some(status);
        self
    }
}

/// Durable run state: runs (versioned, compare-and-swap), events, run logs, leases and the run
/// queue.
///
/// Contract, for every backend:
///
/// - **Runs** are saved under compare-and-swap: [`Store::save_run`] succeeds only if the stored
///   version is the one the caller loaded, and enforces the status state machine
///   ([`RunStatus::can_transition_to`]) and the immutability of identity fields against the
///   stored row, in the same transaction.
/// - **Events, log lines and node-log chunks** are append-only. Each run has three sequences,
///   numbered 1, 2, 3, … with no gap and in commit order, also under concurrent appenders; a
///   batch gets consecutive numbers.
/// - **Leases** say a process is executing a run. A lease is held while its expiry, by the
///   store's clock, is in the future. Acquiring succeeds when there is no lease, when it lapsed,
///   or when the caller already holds it.
/// - All methods are async and never block the runtime's worker threads.
/// - Errors are [`Error`](crate::Error)s; an absent run is `Ok(None)` / [`Liveness::Absent`]
///   where absence is an answer, and [`Error::RunNotFound`](crate::Error::RunNotFound) where
///   the operation needs the run.
#[async_trait]
pub trait Store: Send + Sync + fmt::Debug {
    /// This store's identity, generated once when the store is created. Every container, pod
    /// and per-run directory is labelled with it, so two stores sharing a container engine never
    /// reap each other's resources (SANDBOX.md §12.2).
    fn store_id(&self) -> &str;

    /// Creates a run (version 1; `created_at` = `updated_at` = now), taking `new.lease` in the
    /// same transaction when given.
    ///
    /// # Errors
    /// `RunExists`, `ParentNotFound`, `NonUtf8Path`, `InvalidLeaseTtl`, and backend errors.
    async fn create_run(&self, new: NewRun) -> Result<Run>;

    /// The run `id`, or `None` when there is no such run.
    async fn get_run(&self, id: &RunId) -> Result<Option<Run>>;

    /// Runs newest first (ties broken by id, also newest first).
    async fn list_runs(&self, query: &RunQuery) -> Result<Vec<Run>>;

    /// The runs whose id starts with `prefix`, newest first, at most `limit`. `prefix` is
    /// compared byte for byte with the stored (lowercase) ids; [`resolve_run`](crate::resolve_run)
    /// validates and lowercases what a person typed before it gets here.
    async fn runs_by_id_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<Run>>;

    /// Top-level runs in a terminal status ([`RunStatus::is_terminal`]) that finished strictly
    /// before `before`, oldest first, at most `limit`: what `iterion prune` removes.
    async fn runs_finished_before(&self, before: Timestamp, limit: usize) -> Result<Vec<Run>>;

    /// Deletes run `id` and every run below it (its subbot children, theirs, …) with their
    /// events, log lines and leases, in one transaction: all of them or none. Returns the ids
    /// deleted, `id` first.
    ///
    /// # Errors
    /// - `RunNotFound`;
    /// - `RunActive` when a run of the tree is `queued` or `running` (a process may be executing
    ///   it, or a runner is about to);
    /// - `LeaseHeld` when a run of the tree is leased;
    /// - backend errors.
    async fn delete_run(&self, id: &RunId) -> Result<Vec<RunId>>;

    /// Saves the state fields of `run` if the stored version is still `expected_version`
    /// (usually the `run.version` that was loaded), and returns the new version. `updated_at`
    /// and `finished_at` are set by the store; reload to see them.
    ///
    /// # Errors
    /// - `Conflict { expected, actual }` when someone else saved first: reload and reapply;
    /// - `RunNotFound`;
    /// - `IllegalTransition` when the stored status cannot move to `run.status`;
    /// - `ImmutableField` when an identity field differs from the stored one;
    /// - `FailureOnStatus` when a failure code or message is set on a status that cannot carry
    ///   one;
    /// - `NonUtf8Path`, `Encode`, and backend errors.
    async fn save_run(&self, run: &Run, expected_version: u64) -> Result<u64>;

    /// Claims the oldest `queued` run that is available (`available_at` absent or past) and not
    /// leased: moves it to `running`, counts a delivery, bumps its version and leases it to
    /// `holder` for `ttl`, atomically. `None` when the queue is empty. Concurrent claimers never
    /// get the same run (PostgreSQL: `FOR UPDATE SKIP LOCKED`).
    ///
    /// # Errors
    /// `InvalidLeaseTtl`, and backend errors.
    async fn claim_next_queued(&self, holder: &str, ttl: Duration) -> Result<Option<Claim>>;

    /// Appends one event, returning it with its `seq` and `ts`.
    ///
    /// # Errors
    /// `RunNotFound`, and backend errors.
    async fn append_event(&self, run_id: &RunId, event: NewEvent) -> Result<Event>;

    /// Appends a batch of events in one transaction (all or none), returning the range of
    /// `seq`s they got (empty for an empty batch).
    ///
    /// # Errors
    /// `RunNotFound`, and backend errors.
    async fn append_events(&self, run_id: &RunId, events: Vec<NewEvent>) -> Result<Range<u64>>;

    /// The run's events with `seq > after_seq`, in order (`after_seq = 0`: all). Empty for an
    /// unknown run.
    async fn events(&self, run_id: &RunId, after_seq: u64) -> Result<Vec<Event>>;

    /// Appends one log line, returning it with its `seq` and `ts`.
    ///
    /// # Errors
    /// `RunNotFound`, and backend errors.
    async fn append_log(&self, run_id: &RunId, stream: LogStream, line: String) -> Result<LogLine>;

    /// Appends a batch of log lines in one transaction, returning their `seq` range.
    ///
    /// # Errors
    /// `RunNotFound`, and backend errors.
    async fn append_logs(&self, run_id: &RunId, lines: Vec<NewLogLine>) -> Result<Range<u64>>;

    /// The run's log lines with `seq > after_seq`, in order. Empty for an unknown run.
    async fn logs(&self, run_id: &RunId, after_seq: u64) -> Result<Vec<LogLine>>;

    /// Appends chunks of node output in one transaction (all or none), returning their `seq`
    /// range in the run's node log (its own sequence, gap-free like the others).
    ///
    /// # Errors
    /// `RunNotFound`, and backend errors.
    async fn append_node_logs(&self, run_id: &RunId, chunks: Vec<NewNodeLog>)
    -> Result<Range<u64>>;

    /// The run's node-log chunks that `query` selects, in `seq` order. Empty for an unknown run.
    async fn node_logs(&self, run_id: &RunId, query: &NodeLogQuery) -> Result<Vec<NodeLog>>;

    /// Takes the run's lease for `holder` until now + `ttl`. Succeeds when the run has no lease,
    /// when its lease lapsed, or when `holder` already holds it (which renews it).
    ///
    /// # Errors
    /// `LeaseHeld` when another holder's lease is live; `RunNotFound`; `InvalidLeaseTtl`; and
    /// backend errors.
    async fn acquire_lease(&self, run_id: &RunId, holder: &str, ttl: Duration) -> Result<Lease>;

    /// Renews `holder`'s lease until now + `ttl`. A lapsed lease that nobody took since is
    /// renewed too.
    ///
    /// # Errors
    /// `LeaseLost` when the lease was released or taken by another holder: stop executing the
    /// run. `InvalidLeaseTtl`, and backend errors.
    async fn heartbeat(&self, run_id: &RunId, holder: &str, ttl: Duration) -> Result<Lease>;

    /// Releases `holder`'s lease. Returns whether one was released: `false` when there was none
    /// or it belongs to another holder (which is left alone). Idempotent.
    async fn release_lease(&self, run_id: &RunId, holder: &str) -> Result<bool>;

    /// Whether anyone holds a live lease on the run.
    async fn lease_held(&self, run_id: &RunId) -> Result<bool>;

    /// The lease and status of a run, read together, for the reaper's predicate (see
    /// [`Liveness`]).
    async fn liveness(&self, run_id: &RunId) -> Result<Liveness>;
}

/// Read-modify-write under compare-and-swap: loads the run, applies `change`, saves; on a
/// [`Error::Conflict`](crate::Error::Conflict) reloads and applies `change` again to the fresh
/// copy, for at most `attempts` tries in all (at least one). Returns the run as saved.
///
/// This is the retry loop of SANDBOX.md §10's `persist_admission` (3 attempts) and of crash
/// recovery; `change` must therefore be safe to apply to a newer version of the run.
///
/// # Errors
/// The last `Conflict` when every attempt lost; `RunNotFound`; and any other error of
/// [`Store::save_run`] at once, without retrying.
pub async fn update_run<S, F>(
    store: &S,
    run_id: &RunId,
    attempts: u32,
    mut change: F,
) -> Result<Run>
where
    S: Store + ?Sized,
    F: FnMut(&mut Run) + Send,
{
    let mut attempt = 1;
    loop {
        let mut run = store
            .get_run(run_id)
            .await?
            .ok_or_else(|| crate::Error::RunNotFound {
                run_id: run_id.clone(),
            })?;
        change(&mut run);
        match store.save_run(&run, run.version).await {
            Ok(_) => {
                return store
                    .get_run(run_id)
                    .await?
                    .ok_or_else(|| crate::Error::RunNotFound {
                        run_id: run_id.clone(),
                    });
            }
            Err(crate::Error::Conflict { .. }) if attempt < attempts => attempt += 1,
            Err(err) => return Err(err),
        }
    }
}
