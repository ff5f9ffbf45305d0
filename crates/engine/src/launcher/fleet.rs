//! The fleet (ARCHITECTURE.md §5, decision 8): `iterion run --submit` queues a run
//! ([`Engine::submit`]); `iterion runner` takes queued runs from the store's queue
//! ([`run_worker`]), holds their leases while it executes them ([`Engine::execute_claimed`]),
//! and settles each delivery ([`settle_delivery`]): an infrastructure failure
//! (`SANDBOX_SETUP_TIMEOUT`, `SANDBOX_CAPACITY`, `INTERRUPTED`) goes back to the queue after its
//! delay, at most [`MAX_DELIVERIES`] times, to be taken by a healthy runner; a deterministic one
//! is parked where it ended.
//!
//! Graceful shutdown: cancelling the worker's token stops claiming and *interrupts* the run in
//! hand, which ends `failed_resumable` / `INTERRUPTED` and is redelivered at once.
//!
//! The workflow is read from the run's `file_path` on the runner (as `iterion resume` does): a
//! fleet shares its workflow files (an image, a volume), and a file that changed since the
//! submit is refused, not silently run.

use std::sync::Arc;
use std::time::Duration;

use iterion_store::{Claim, InitialStatus, Run, RunStatus, Timestamp};
use tokio_util::sync::CancellationToken;

use crate::launcher::attempt::{Attempt, Continuation, Inputs};
use crate::launcher::engine::{
    Engine, EngineError, RunControl, RunEnvelope, RunRequest, RunSummary,
};
use crate::launcher::launch::settings_from_env;
use crate::launcher::launch::{resolve_secrets, workflow_hash_at};
use crate::launcher::lease::LEASE_TTL;
use crate::records::record::RunObserver;
use iterion_vocab::{Disposition, FailureCode, MAX_DELIVERIES};

/// How a worker runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerOptions {
    /// The lease holder name (the runner pod's name, else `host-pid`).
    pub holder: String,
    /// How long to sleep when the queue is empty. Default: 1 s.
    pub poll_interval: Duration,
    /// Stop after this many runs (tests, benchmarks); `None` = until shut down.
    pub max_runs: Option<usize>,
}

impl WorkerOptions {
    /// A worker named `holder`, polling every second, until shut down.
    pub fn new(holder: impl Into<String>) -> WorkerOptions {
        WorkerOptions {
            holder: holder.into(),
            poll_interval: Duration::from_secs(1),
            max_runs: None,
        }
    }
}

/// What happened to one delivery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// The run ended for good (`finished`, `failed`, `cancelled`, `paused`).
    Ended(RunStatus),
    /// Back in the queue, offered again after `delay`.
    Redelivered {
        /// The failure code's redelivery delay.
        delay: Duration,
    },
    /// `failed_resumable` and left there: a deterministic failure, or deliveries exhausted.
    Parked,
}

/// What a worker did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerReport {
    /// Runs taken, in order.
    pub taken: Vec<String>,
    /// Of those, how many were redelivered.
    pub redelivered: usize,
    /// Of those, how many were parked.
    pub parked: usize,
}

impl Engine {
    /// `iterion run --submit`: checks the launch settings, then creates the run `queued`, with
    /// its launch options kept on the run for the runner. Nothing executes here.
    ///
    /// # Errors
    ///
    /// [`EngineError::Launch`] for a bad setting (exit 2); store errors.
    pub async fn submit(&self, request: RunRequest) -> Result<Run, EngineError> {
        settings_from_env(self.sandbox_default, &request.options, &self.environment)?;
        let run = self
            .store
            .create_run(request.new_run().status(InitialStatus::Queued))
            .await?;
        // The launch options ride on the checkpoint envelope, as for `iterion resume`. A runner
        // that claims the run before this save sees the default launch (no flags).
        let mut next = run.clone();
        next.checkpoint = RunEnvelope {
            launch: request.options,
            executor: None,
        }
        .to_value();
        match self.store.save_run(&next, run.version).await {
            Ok(version) => {
                next.version = version;
                Ok(next)
            }
            Err(iterion_store::Error::Conflict { .. }) => Ok(run),
            Err(error) => Err(error.into()),
        }
    }

    /// Executes a run this process claimed from the queue (status `running`, lease held by
    /// `claim.lease.holder`). A run that cannot even start (its file is gone, changed or no
    /// longer compiles; a required secret is unset) is parked `failed` / `LAUNCH_FAILED` and its
    /// lease released.
    ///
    /// # Errors
    ///
    /// Store errors; the launch failure, after parking the run.
    pub async fn execute_claimed(
        &self,
        claim: Claim,
        control: RunControl,
        observer: Arc<dyn RunObserver>,
    ) -> Result<RunSummary, EngineError> {
        let Claim { run, lease } = claim;
        let holder = lease.holder.clone();
        let prepared = self.prepare_claimed(&run).await;
        let (workflow, secrets, routes, launch, checkpoint) = match prepared {
            Ok(parts) => parts,
            Err(message) => {
                let mut next = run.clone();
                next.status = RunStatus::Failed;
                next.failure_code = Some(FailureCode::LaunchFailed.as_str().to_owned());
                next.failure_message = Some(message.clone());
                let saved = self.store.save_run(&next, run.version).await;
                if let Err(error) = self.store.release_lease(&run.id, &holder).await {
                    tracing::warn!("run {}: releasing the lease: {error}", run.id);
                }
                saved?;
                return Err(EngineError::Launch(
                    crate::launcher::launch::LaunchError::InvalidSetting { message },
                ));
            }
        };
        let (settings, override_env) =
            settings_from_env(self.sandbox_default, &launch, &self.environment)?;
        let resumed = checkpoint.is_some();
        let inputs = Inputs::recorded(&run, workflow, secrets, routes);
        let attempt = Attempt::prepare(run, holder, inputs, launch, (settings, override_env))
            .continuing(Continuation {
                checkpoint,
                resumed,
                ..Continuation::default()
            });
        self.attempt(attempt, control, observer).await
    }

    #[allow(clippy::type_complexity)]
    async fn prepare_claimed(
        &self,
        run: &Run,
    ) -> Result<
        (
            iterion_dsl::ir::Workflow,
            Vec<crate::records::secrets::ResolvedSecret>,
            iterion_agent::provider::Routes,
            crate::launcher::launch::LaunchOptions,
            Option<crate::executor::checkpoint::Checkpoint>,
        ),
        String,
    > {
        let path = run.file_path.display();
        let bytes = iterion_dsl::load(&run.file_path)
            .map_err(|e| format!("runner: cannot read the workflow {path}: {e}"))?;
        if workflow_hash_at(&run.file_path, &bytes) != run.workflow_hash {
            return Err(format!(
                "runner: the workflow file {path} changed since the run was submitted"
            ));
        }
        let workflow = crate::launcher::engine::compile_recorded(run, &bytes)
            .ok_or_else(|| format!("runner: the workflow file {path} no longer compiles"))?;
        let secrets =
            resolve_secrets(&workflow, |k| self.environment.get(k)).map_err(|e| e.to_string())?;
        let routes = iterion_agent::provider::resolve_routes(&workflow, &run.vars, |k| {
            self.environment.get(k)
        })
        .map_err(|e| e.to_string())?;
        let envelope = RunEnvelope::from_value(run.checkpoint.as_ref());
        Ok((
            workflow,
            secrets,
            routes,
            envelope.launch_or_cwd(),
            envelope.executor,
        ))
    }
}

/// Decides what happens to a run after a delivery (SANDBOX.md §9.2): an infrastructure failure
/// with deliveries left goes back to the queue (`queued`, offered after its delay); any other
/// `failed_resumable` is parked; every other status has ended.
///
/// # Errors
///
/// Store errors (a lost compare-and-swap means someone else moved the run: their answer stands,
/// and the delivery counts as parked).
pub(crate) async fn settle_delivery(
    store: &dyn iterion_store::Store,
    summary: &RunSummary,
) -> Result<Delivery, EngineError> {
    if summary.status != RunStatus::FailedResumable {
        return Ok(Delivery::Ended(summary.status));
    }
    let Ok(run_id) = iterion_store::RunId::parse(&summary.run_id) else {
        return Ok(Delivery::Parked);
    };
    match store.get_run(&run_id).await? {
        Some(run) => redeliver(store, &run).await,
        None => Ok(Delivery::Parked),
    }
}

/// Puts a `failed_resumable` run with an infrastructure code and deliveries left back in the
/// queue; anything else is [`Delivery::Parked`] (or [`Delivery::Ended`] when not
/// `failed_resumable`).
///
/// # Errors
///
/// Store errors other than a lost compare-and-swap.
pub(crate) async fn redeliver(
    store: &dyn iterion_store::Store,
    run: &Run,
) -> Result<Delivery, EngineError> {
    if run.status != RunStatus::FailedResumable {
        return Ok(Delivery::Ended(run.status));
    }
    let code = run
        .failure_code
        .as_deref()
        .and_then(FailureCode::from_str_exact);
    let Some(code) = code.filter(|c| c.disposition() == Disposition::Infrastructure) else {
        return Ok(Delivery::Parked);
    };
    if run.deliveries >= MAX_DELIVERIES {
        return Ok(Delivery::Parked);
    }
    let delay = code.redelivery_delay().unwrap_or(Duration::ZERO);
    let mut next = run.clone();
    next.status = RunStatus::Queued;
    // A queued run carries no failure (the store refuses one); the `run_failed` event keeps it.
    next.failure_code = None;
    next.failure_message = None;
    // No delay: offered at once (and independent of the store's clock).
    next.available_at = (!delay.is_zero()).then(|| Timestamp::now().saturating_add(delay));
    match store.save_run(&next, run.version).await {
        Ok(_) => Ok(Delivery::Redelivered { delay }),
        Err(iterion_store::Error::Conflict { .. }) => Ok(Delivery::Parked),
        Err(error) => Err(error.into()),
    }
}

/// Crash recovery for the fleet: runs left `running` by a runner whose lease lapsed become
/// `failed_resumable` / `INTERRUPTED` ([`crate::recover_interrupted`]) and go straight back to
/// the queue, to be taken by a healthy runner. A queue run (one delivered at least once) that is
/// `failed_resumable` with an infrastructure code and deliveries left is requeued too: another
/// process's boot recovery may have moved it, or its runner died between the end of the run and
/// settling it. Runs never delivered (a local `iterion run`) are left to `iterion resume`, and
/// so are subbot children: their parent's redelivery runs the subbot node again.
/// Returns the runs redelivered.
pub async fn redeliver_interrupted(store: &dyn iterion_store::Store) -> Vec<String> {
    let recovered = crate::launcher::reaper::recover_interrupted(store).await;
    if !recovered.is_empty() {
        tracing::info!(
            "runner: {} run(s) interrupted (lease lapsed)",
            recovered.len()
        );
    }
    let candidates = match store
        .list_runs(&iterion_store::RunQuery::newest(1_000).status(RunStatus::FailedResumable))
        .await
    {
        Ok(runs) => runs,
        Err(error) => {
            tracing::warn!("runner: listing failed_resumable runs: {error}");
            return Vec::new();
        }
    };
    let mut redelivered = Vec::new();
    // A subbot child is never delivered (its record is created by its parent's attempt, with
    // `deliveries` 0), so this also leaves children to their parent's redelivery.
    for run in candidates.into_iter().filter(|run| run.deliveries > 0) {
        match redeliver(store, &run).await {
            Ok(Delivery::Redelivered { .. }) => redelivered.push(run.id.as_str().to_owned()),
            Ok(_) => {}
            Err(error) => tracing::warn!("runner: redelivering run {}: {error}", run.id),
        }
    }
    redelivered
}

/// The runner's loop (`iterion runner`): claim the next queued run, execute it under its lease,
/// settle the delivery, repeat; sleep `poll_interval` when the queue is empty. Cancelling
/// `shutdown` stops claiming and interrupts the run in hand (it is redelivered).
pub async fn run_worker(
    engine: &Engine,
    options: &WorkerOptions,
    shutdown: CancellationToken,
    observer: Arc<dyn RunObserver>,
) -> WorkerReport {
    let mut report = WorkerReport::default();
    let store = Arc::clone(engine.store());
    while !shutdown.is_cancelled() && options.max_runs.is_none_or(|max| report.taken.len() < max) {
        let claim = match store.claim_next_queued(&options.holder, LEASE_TTL).await {
            Ok(Some(claim)) => claim,
            Ok(None) => {
                // An idle runner is the one to notice a dead runner's lapsed leases.
                for run_id in redeliver_interrupted(store.as_ref()).await {
                    tracing::info!(
                        "runner: run {run_id} was interrupted (lease lapsed); redelivered"
                    );
                }
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    () = tokio::time::sleep(options.poll_interval) => continue,
                }
            }
            Err(error) => {
                tracing::warn!("runner: claiming: {error}");
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    () = tokio::time::sleep(options.poll_interval) => continue,
                }
            }
        };
        let run_id = claim.run.id.as_str().to_owned();
        tracing::info!(
            "runner: took run {run_id} (delivery {})",
            claim.run.deliveries
        );
        report.taken.push(run_id.clone());
        let control = RunControl {
            interrupt: shutdown.child_token(),
            ..RunControl::default()
        };
        let summary = match engine
            .execute_claimed(claim, control, Arc::clone(&observer))
            .await
        {
            Ok(summary) => summary,
            Err(error) => {
                tracing::warn!("runner: run {run_id}: {error}");
                report.parked += 1;
                continue;
            }
        };
        match settle_delivery(store.as_ref(), &summary).await {
            Ok(Delivery::Redelivered { delay }) => {
                tracing::info!(
                    "runner: run {run_id} redelivered (after {}s)",
                    delay.as_secs()
                );
                report.redelivered += 1;
            }
            Ok(Delivery::Parked) => {
                tracing::info!("runner: run {run_id} parked ({:?})", summary.failure_code);
                report.parked += 1;
            }
            Ok(Delivery::Ended(status)) => tracing::info!("runner: run {run_id} {status}"),
            Err(error) => tracing::warn!("runner: run {run_id}: settling: {error}"),
        }
    }
    report
}
