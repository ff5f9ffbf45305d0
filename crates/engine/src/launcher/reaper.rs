//! Crash recovery and the local reaper (SANDBOX.md §12; our decision 9).
//!
//! At the start of `iterion run` and `iterion resume`:
//!
//! 1. [`recover_interrupted`]: a run still `running` whose lease has lapsed belongs to a process
//!    that died; it becomes `failed_resumable` / `INTERRUPTED` (under compare-and-swap) with a
//!    `run_failed` event, so it never hangs `running` and `iterion resume` can pick it up.
//! 2. [`reap_local`]: containers labelled `iterion.io/managed=true` and this store's
//!    `iterion.io/store`, on the local engine runs are created on (docker, else podman), are removed
//!    when [`reapable`] says so; so are this store's per-run host dirs under the runtime root.
//!
//! 3. [`reap_cloud`] (the runner on kubernetes): this store's pods, Secrets and NetworkPolicies,
//!    by label, in the runner's namespace; [`run_sandbox_reaper`] runs it at boot and on a
//!    ticker (`ITERION_SANDBOX_REAP_INTERVAL`).
//!
//! Listing and removing is each driver's capability ([`Reaper`], built by a
//! [`ReaperConstructor`]); this file names no driver. It hands the drivers the store's answers
//! ([`ReapJudge`]) and keeps the host-side run dirs, which are the engine's own. The local
//! reapers come from `sandbox/registry.rs`, next to the product registry.
//!
//! One predicate decides for every kind of resource, local or cloud:
//! [`sandbox_resource_reapable`] (pure core: [`reapable`]). It is liveness-first and fails safe:
//! a held lease, a lease check that errored or a transient store error all keep the resource;
//! only no lease plus a terminal status, or a run the store provably does not have, reaps it.
//! Built images are not collected yet.
//! The whole reaper is off under `ITERION_SANDBOX_OVERRIDE=none` (SANDBOX.md §12.2).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use iterion_sandbox::{
    ReapError, ReapJudge, Reaper, ReaperConstructor, ResourceKind, parse_go_duration,
};
use iterion_store::{Liveness, NewEvent, RunId, RunQuery, RunStatus, Store};
use tokio_util::sync::CancellationToken;

use crate::records::events::{Event, PHASE_EXECUTION, RunFailed};
use crate::sandbox::rundir::runtime_root;
use iterion_vocab::{Environment, FailureCode};

/// Why a resource was kept or reaped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Leave it.
    Keep,
    /// Remove it.
    Reap,
}

/// The reaper's predicate over what the store said (SANDBOX.md §12.1). `run_id` is the
/// resource's `iterion.io/run-id` label.
pub fn reapable(
    run_id: &str,
    liveness: Option<&Result<Liveness, iterion_store::Error>>,
) -> Verdict {
    if run_id.is_empty() {
        return Verdict::Reap;
    }
    match liveness {
        // The label is not a run id this store could hold: provably absent.
        None => Verdict::Reap,
        Some(Err(_)) => Verdict::Keep,
        Some(Ok(Liveness::Leased(_))) => Verdict::Keep,
        Some(Ok(Liveness::Absent)) => Verdict::Reap,
        Some(Ok(Liveness::Unleased { status })) if status.is_terminal() => Verdict::Reap,
        Some(Ok(Liveness::Unleased { .. })) => Verdict::Keep,
    }
}

/// Where the predicate reads a run's liveness: every [`Store`] is one. A seam of its own so the
/// predicate's table test can force a lease-check or load error on a real store.
#[async_trait]
pub trait LivenessSource: Send + Sync {
    /// The run's lease and status (the store contract's `liveness`).
    async fn liveness(&self, run_id: &RunId) -> Result<Liveness, iterion_store::Error>;
}

#[async_trait]
impl<S: Store + ?Sized> LivenessSource for S {
    async fn liveness(&self, run_id: &RunId) -> Result<Liveness, iterion_store::Error> {
        Store::liveness(self, run_id).await
    }
}

/// The one reaper predicate (SANDBOX.md §12.1), for local containers, per-run dirs, pods,
/// Secrets and NetworkPolicies alike. `run_id` is the resource's `iterion.io/run-id` label
/// (`""` when absent):
///
/// | condition | verdict |
/// |---|---|
/// | empty or missing label, or a label no run id could be | reap |
/// | lease held | keep |
/// | lease check or load errored (transient) | keep |
/// | no lease, run provably absent | reap |
/// | no lease, status terminal | reap |
/// | no lease, `running`, `paused`, `queued` | keep |
pub async fn sandbox_resource_reapable<S: LivenessSource + ?Sized>(
    source: &S,
    run_id: &str,
) -> Verdict {
    if run_id.is_empty() {
        return Verdict::Reap;
    }
    match RunId::parse(run_id) {
        Err(_) => reapable(run_id, None),
        Ok(id) => reapable(run_id, Some(&source.liveness(&id).await)),
    }
}

/// The store's answers, as a driver's [`Reaper`] asks them.
struct StoreJudge<'a>(&'a dyn Store);

#[async_trait]
impl ReapJudge for StoreJudge<'_> {
    async fn reapable(&self, run_id: &str) -> bool {
        sandbox_resource_reapable(self.0, run_id).await == Verdict::Reap
    }

    /// The store knows the run and nobody holds its lease.
    async fn claims(&self, run_id: &str) -> bool {
        let Ok(id) = RunId::parse(run_id) else {
            return false;
        };
        matches!(self.0.liveness(&id).await, Ok(Liveness::Unleased { .. }))
    }
}

/// One cloud reaper pass (SANDBOX.md §12.2): this store's pods, Secrets and NetworkPolicies in
/// the namespace of `reaper` (the runner's kubernetes API), each judged by
/// [`sandbox_resource_reapable`] (once per run id per pass).
///
/// # Errors
///
/// The first list or delete failure (the others are logged), with what was done anyway.
pub async fn reap_cloud(
    store: &dyn Store,
    reaper: &dyn Reaper,
) -> Result<iterion_sandbox::ReapReport, ReapError> {
    reaper.reap(store.store_id(), &StoreJudge(store)).await
}

/// `ITERION_SANDBOX_REAP_INTERVAL`: the runner's reaper tick (SANDBOX.md §12.2).
pub const ITERION_SANDBOX_REAP_INTERVAL: &str = "ITERION_SANDBOX_REAP_INTERVAL";

/// The tick when the variable is unset or unusable.
pub const DEFAULT_REAP_INTERVAL: Duration = Duration::from_secs(60);

/// The reaper tick from the variable's value: a Go-style duration; unset, empty or unparsable
/// gives [`DEFAULT_REAP_INTERVAL`] (a bad value is also warned about); `0s` gives `None`, the
/// boot pass only.
pub fn reap_interval(value: Option<&str>) -> Option<Duration> {
    let Some(value) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Some(DEFAULT_REAP_INTERVAL);
    };
    match parse_go_duration(value) {
        Ok(interval) if interval.is_zero() => None,
        Ok(interval) => Some(interval),
        Err(error) => {
            tracing::warn!(
                "{ITERION_SANDBOX_REAP_INTERVAL}={value:?} ({error}); using {}s",
                DEFAULT_REAP_INTERVAL.as_secs()
            );
            Some(DEFAULT_REAP_INTERVAL)
        }
    }
}

/// The runner's reaper (SANDBOX.md §12.2): a boot pass, then one every `interval` (`None`: boot
/// only), until `shutdown`. Each pass reaps the cloud objects when `cloud` is given (the runner
/// on kubernetes: its namespace's reaper), else the local containers and run dirs. Errors are
/// logged. The caller does not start it under `ITERION_SANDBOX_OVERRIDE=none`. The local
/// engines' endpoints and the runtime root are read from `env`.
pub async fn run_sandbox_reaper(
    store: Arc<dyn Store>,
    cloud: Option<Arc<dyn Reaper>>,
    interval: Option<Duration>,
    shutdown: CancellationToken,
    env: Environment,
) {
    loop {
        match &cloud {
            Some(reaper) => match reap_cloud(store.as_ref(), reaper.as_ref()).await {
                Ok(report) if !report.deleted.is_empty() => {
                    tracing::info!(
                        "reaper: deleted {} orphaned object(s)",
                        report.deleted.len()
                    );
                }
                Ok(_) => {}
                Err(error) => tracing::warn!("{error}"),
            },
            None => {
                let local = crate::sandbox::registry::local_reapers(&env);
                let report = reap_local(Arc::clone(&store), &local, &env).await;
                let containers = report.count(ResourceKind::Container);
                if containers > 0 || !report.run_dirs.is_empty() {
                    tracing::info!(
                        "reaper: removed {} container(s), {} run dir(s)",
                        containers,
                        report.run_dirs.len()
                    );
                }
            }
        }
        let Some(interval) = interval else { return };
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
    }
}

/// The message of a run found `running` with a lapsed lease.
pub const INTERRUPTED_MESSAGE: &str = "the process running this run stopped before it finished (its lease lapsed); `iterion resume` continues it";

/// Moves every `running` run whose lease lapsed to `failed_resumable` / `INTERRUPTED`. Returns
/// the runs moved. Errors are logged and skip the run.
pub async fn recover_interrupted(store: &dyn Store) -> Vec<RunId> {
    let runs = match store
        .list_runs(&RunQuery::newest(10_000).status(RunStatus::Running))
        .await
    {
        Ok(runs) => runs,
        Err(error) => {
            tracing::warn!("crash recovery: cannot list running runs: {error}");
            return Vec::new();
        }
    };
    let mut moved = Vec::new();
    for run in runs {
        match store.liveness(&run.id).await {
            Ok(Liveness::Unleased {
                status: RunStatus::Running,
            }) => {}
            Ok(_) | Err(_) => continue,
        }
        let mut next = run.clone();
        next.status = RunStatus::FailedResumable;
        next.failure_code = Some(FailureCode::Interrupted.as_str().to_owned());
        next.failure_message = Some(INTERRUPTED_MESSAGE.to_owned());
        match store.save_run(&next, run.version).await {
            Ok(_) => {
                let event = Event::RunFailed(RunFailed {
                    error: INTERRUPTED_MESSAGE.to_owned(),
                    phase: PHASE_EXECUTION.to_owned(),
                    code: Some(FailureCode::Interrupted),
                    resumable: Some(true),
                });
                if let Err(error) = store
                    .append_event(&run.id, NewEvent::new(event.kind(), event.data()))
                    .await
                {
                    tracing::warn!("crash recovery: run {}: {error}", run.id);
                }
                moved.push(run.id);
            }
            // Someone else moved it first: their answer stands.
            Err(error) => tracing::debug!("crash recovery: run {}: {error}", run.id),
        }
    }
    moved
}

/// The reapers a local pass asks (SANDBOX.md §3.2): the first of `reapers` whose engine answers,
/// and only it (the reapers are in the factory's order, so it is the engine runs are created
/// on), plus every host-local one ([`ReaperConstructor::host_local`]: the namespace driver's
/// cgroups), which is no alternative to an engine.
async fn answering_reapers(reapers: &[Arc<dyn ReaperConstructor>]) -> Vec<Arc<dyn Reaper>> {
    let mut answering = Vec::new();
    let mut engine_found = false;
    for constructor in reapers {
        let host_local = constructor.host_local();
        if !host_local && engine_found {
            continue;
        }
        if let Ok(reaper) = constructor.reaper().await {
            engine_found |= !host_local;
            answering.push(reaper);
        }
    }
    answering
}

/// What one local reaper pass removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReapReport {
    /// What the local engine's reaper removed, by kind and id: containers, images (built images
    /// of reapable runs, and a build's unattributed intermediates) and shared `/nix` volumes whose
    /// image is gone.
    pub deleted: Vec<(ResourceKind, String)>,
    /// Per-run host dirs removed.
    pub run_dirs: Vec<String>,
}

impl ReapReport {
    /// How many resources of `kind` were removed.
    pub fn count(&self, kind: ResourceKind) -> usize {
        self.deleted.iter().filter(|(k, _)| *k == kind).count()
    }
}

/// One pass of the local reaper over this store's containers, images, `/nix` volumes and per-run
/// host dirs: the first of `reapers` that answers lists and removes (its failures are logged
/// where they happen), then the run dirs (under `env`'s runtime root).
pub async fn reap_local(
    store: Arc<dyn Store>,
    reapers: &[Arc<dyn ReaperConstructor>],
    env: &Environment,
) -> ReapReport {
    let mut report = ReapReport::default();
    for reaper in answering_reapers(reapers).await {
        report.deleted.extend(
            match reaper
                .reap(store.store_id(), &StoreJudge(store.as_ref()))
                .await
            {
                Ok(done) => done.deleted,
                // Each failure was warned about where it happened; what was done anyway counts.
                Err(error) => {
                    tracing::debug!("{error}");
                    error.report.deleted
                }
            },
        );
    }
    report.run_dirs = reap_run_dirs(store.as_ref(), &runtime_root(env)).await;
    // Untrusted runs' workspace copies (issue 15) are keyed the same way.
    report.run_dirs.extend(
        reap_run_dirs(
            store.as_ref(),
            &runtime_root(env).join(crate::sandbox::rundir::COPIES_DIR),
        )
        .await,
    );
    report
}

/// What [`reap_local`] would remove if the runs `assume_removed` were gone from the store,
/// removing nothing (`iterion prune --dry-run`): the local engine's containers, images and `/nix`
/// volumes (the first of `reapers` that answers), and the per-run host dirs under `env`'s
/// runtime root.
pub async fn survey_local(
    store: Arc<dyn Store>,
    reapers: &[Arc<dyn ReaperConstructor>],
    env: &Environment,
    assume_removed: &[RunId],
) -> ReapReport {
    let judge = AssumingJudge {
        store: store.as_ref(),
        removed: assume_removed,
    };
    let mut report = ReapReport::default();
    for reaper in answering_reapers(reapers).await {
        report
            .deleted
            .extend(match reaper.survey(store.store_id(), &judge).await {
                Ok(found) => found.deleted,
                Err(error) => {
                    tracing::warn!("{error}");
                    error.report.deleted
                }
            });
    }
    for root in [
        runtime_root(env),
        runtime_root(env).join(crate::sandbox::rundir::COPIES_DIR),
    ] {
        report
            .run_dirs
            .extend(survey_run_dirs(store.as_ref(), &root, &judge).await);
    }
    report
}

/// The store's answers, with some runs taken as already removed.
struct AssumingJudge<'a> {
    store: &'a dyn Store,
    removed: &'a [RunId],
}

impl AssumingJudge<'_> {
    fn is_removed(&self, run_id: &str) -> bool {
        RunId::parse(run_id).is_ok_and(|id| self.removed.contains(&id))
    }
}

#[async_trait]
impl ReapJudge for AssumingJudge<'_> {
    async fn reapable(&self, run_id: &str) -> bool {
        self.is_removed(run_id) || StoreJudge(self.store).reapable(run_id).await
    }

    async fn claims(&self, run_id: &str) -> bool {
        self.is_removed(run_id) || StoreJudge(self.store).claims(run_id).await
    }
}

/// The run dirs under `root` that [`reap_run_dirs`] would remove, by `judge`.
async fn survey_run_dirs(store: &dyn Store, root: &Path, judge: &AssumingJudge<'_>) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(mut entries) = tokio::fs::read_dir(root).await else {
        return found;
    };
    while let Ok(Some(entry)) = entries.next_entry().await {
        let name = entry.file_name().to_string_lossy().into_owned();
        if RunId::parse(&name).is_err() {
            continue;
        }
        let marker = entry.path().join(crate::sandbox::rundir::STORE_MARKER);
        let owner = tokio::fs::read_to_string(&marker).await.unwrap_or_default();
        if owner.trim() == store.store_id() && judge.reapable(&name).await {
            found.push(name);
        }
    }
    found
}

async fn reap_run_dirs(store: &dyn Store, root: &Path) -> Vec<String> {
    let mut removed = Vec::new();
    let Ok(mut entries) = tokio::fs::read_dir(root).await else {
        return removed;
    };
    while let Ok(Some(entry)) = entries.next_entry().await {
        let name = entry.file_name().to_string_lossy().into_owned();
        if RunId::parse(&name).is_err() {
            continue;
        }
        let marker = entry.path().join(crate::sandbox::rundir::STORE_MARKER);
        let owner = tokio::fs::read_to_string(&marker).await.unwrap_or_default();
        if owner.trim() != store.store_id() {
            continue;
        }
        // Through remove_run_dir: a staged mount left by a crashed engine is detached, never
        // emptied (issue 15 item 1).
        let path = entry.path();
        if sandbox_resource_reapable(store, &name).await == Verdict::Reap
            && tokio::task::spawn_blocking(move || iterion_sandbox::remove_run_dir(&path))
                .await
                .is_ok_and(|removed| removed.is_ok())
        {
            removed.push(name);
        }
    }
    removed
}

/// Removes every container of `run_id` in this store, on the local engine of `reapers` (a
/// cancelled setup, where the driver's own cleanup may not have run).
pub(crate) async fn remove_run_containers(
    reapers: &[Arc<dyn ReaperConstructor>],
    store_id: &str,
    run_id: &str,
) {
    for reaper in answering_reapers(reapers).await {
        if let Err(error) = reaper.remove_run(store_id, run_id).await {
            tracing::warn!("removing the sandbox resources of run {run_id}: {error}");
        }
    }
}

#[cfg(test)]
mod tests {
    use iterion_store::{Lease, Timestamp};
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn the_reap_interval_parses_go_durations_and_zero_means_boot_only() {
        let got: Vec<(Option<&str>, Option<Duration>)> = [
            None,
            Some(""),
            Some("90s"),
            Some(" 1m30s "),
            Some("0s"),
            Some("abc"),
            Some("5"),
            Some("-1s"),
        ]
        .into_iter()
        .map(|value| (value, reap_interval(value)))
        .collect();
        let default = Some(DEFAULT_REAP_INTERVAL);
        assert_eq!(
            got,
            vec![
                (None, default),
                (Some(""), default),
                (Some("90s"), Some(Duration::from_secs(90))),
                (Some(" 1m30s "), Some(Duration::from_secs(90))),
                (Some("0s"), None),
                (Some("abc"), default),
                (Some("5"), default),
                (Some("-1s"), default),
            ]
        );
    }

    #[test]
    fn only_an_absent_or_terminal_unleased_run_is_reaped() {
        let id = "0190b4c6-1d2e-7f00-8000-000000000001";
        let lease = Liveness::Leased(Lease {
            run_id: RunId::parse(id).unwrap(),
            holder: "h".into(),
            expires_at: Timestamp::from_millis(0),
        });
        let unleased = |status| Ok(Liveness::Unleased { status });
        type Case = (
            &'static str,
            Option<Result<Liveness, iterion_store::Error>>,
            Verdict,
        );
        let cases: Vec<Case> = vec![
            ("", None, Verdict::Reap),
            ("not-a-uuid", None, Verdict::Reap),
            (id, Some(Ok(lease)), Verdict::Keep),
            (
                id,
                Some(Err(iterion_store::Error::HomeUnset)),
                Verdict::Keep,
            ),
            (id, Some(Ok(Liveness::Absent)), Verdict::Reap),
            (id, Some(unleased(RunStatus::Finished)), Verdict::Reap),
            (id, Some(unleased(RunStatus::Failed)), Verdict::Reap),
            (
                id,
                Some(unleased(RunStatus::FailedResumable)),
                Verdict::Reap,
            ),
            (id, Some(unleased(RunStatus::Cancelled)), Verdict::Reap),
            (id, Some(unleased(RunStatus::Running)), Verdict::Keep),
            (id, Some(unleased(RunStatus::Paused)), Verdict::Keep),
            (id, Some(unleased(RunStatus::Queued)), Verdict::Keep),
        ];
        for (run_id, liveness, want) in cases {
            assert_eq!(
                reapable(run_id, liveness.as_ref()),
                want,
                "{run_id} {liveness:?}"
            );
        }
    }
}
