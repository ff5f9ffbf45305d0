//! `iterion resume RUN_ID` (SANDBOX.md §16.4, §9.2): a `failed_resumable` run is taken again —
//! admission again, sandbox again — and continues from the checkpoint on its record (the node
//! that failed or was interrupted; the entry node when it stopped before any node ran).
//!
//! Refusals (`RESUME_INVALID`, the run left as it was): a run in any other status, one another
//! process holds the lease of, a workflow file that no longer compiles, and — unless `--force` —
//! a workflow file whose source changed since the run started, or a subbot child that ran in a
//! copy-based parent's sandbox (SANDBOX.md §14; `--force` gives it a sandbox of its own).

use std::sync::Arc;

use iterion_store::{Run, RunStatus};

use crate::launcher::attempt::{Attempt, Continuation, Inputs};
use crate::launcher::engine::parse_run_id;
use crate::launcher::engine::{
    Engine, EngineError, ResumeRequest, RunControl, RunEnvelope, RunSummary,
};
use crate::launcher::launch::settings_from_env;
use crate::launcher::launch::{resolve_secrets, workflow_hash_at};
use crate::launcher::lease::LEASE_TTL;
use crate::records::record::RunObserver;

/// The failure of a `failed_resumable` run, when its code is one that leaves a run
/// `failed_resumable` (what a refused attempt puts back; SANDBOX.md §10).
fn prior_failure(run: &Run) -> Option<(iterion_vocab::FailureCode, String)> {
    if run.status != RunStatus::FailedResumable {
        return None;
    }
    let code = iterion_vocab::FailureCode::from_str_exact(run.failure_code.as_deref()?)?;
    (code.status() == Some(iterion_vocab::OutcomeStatus::FailedResumable))
        .then(|| (code, run.failure_message.clone().unwrap_or_default()))
}

fn refused(message: impl Into<String>) -> EngineError {
    EngineError::ResumeRefused {
        message: message.into(),
    }
}

impl Engine {
    /// Resumes a `failed_resumable` run.
    ///
    /// # Errors
    ///
    /// [`EngineError::ResumeRefused`] (the run is left as it was), launch errors (a required
    /// secret unset), store errors.
    pub async fn resume(
        &self,
        request: ResumeRequest,
        control: RunControl,
        observer: Arc<dyn RunObserver>,
    ) -> Result<RunSummary, EngineError> {
        let run_id = parse_run_id(&request.run_id)?;
        // A subbot child that paused on a question paused its parent with it: the answer goes
        // to the parent, whose resume resumes this child (`launcher::children`).
        if let Some(run) = self.store.get_run(&run_id).await?
            && run.status == RunStatus::Paused
            && let Some(parent) = &run.parent_run_id
            && self
                .store
                .get_run(parent)
                .await?
                .is_some_and(|p| p.status == RunStatus::Paused)
        {
            return Err(refused(format!(
                "run {run_id} is a subbot child that paused its parent {parent} with it; `iterion resume {parent} --answer TEXT` answers it"
            )));
        }
        self.resume_run(request, control, observer).await
    }

    /// [`Engine::resume`] without its refusal of a paused child: what a parent's resume calls
    /// to resume the child run of its own it paused with.
    pub(crate) async fn resume_run(
        &self,
        request: ResumeRequest,
        control: RunControl,
        observer: Arc<dyn RunObserver>,
    ) -> Result<RunSummary, EngineError> {
        let run_id = parse_run_id(&request.run_id)?;
        let Some(run) = self.store.get_run(&run_id).await? else {
            return Err(EngineError::Store(iterion_store::Error::RunNotFound {
                run_id,
            }));
        };
        if run.status == RunStatus::Running {
            return Err(refused(format!(
                "run {run_id} is running: another process holds its lease, or the process died less than {} s ago (its lease lapses then, and `iterion resume` can take it)",
                LEASE_TTL.as_secs()
            )));
        }
        if run.status != RunStatus::FailedResumable && run.status != RunStatus::Paused {
            return Err(refused(format!(
                "run {run_id} is {}; only a failed_resumable or paused run can be resumed (`iterion inspect {run_id}` shows why it ended)",
                run.status
            )));
        }
        if request.answer.is_some() && run.status != RunStatus::Paused {
            return Err(refused(format!(
                "run {run_id} is {}; --answer is for a paused run",
                run.status
            )));
        }
        let bytes = iterion_dsl::load(&run.file_path)
            .map_err(|e| refused(format!("cannot resume run {run_id}: {e}")))?;
        let hash = workflow_hash_at(&run.file_path, &bytes);
        if hash != run.workflow_hash && !request.force {
            return Err(refused(format!(
                "the workflow file {} (or a file it imports) changed since run {run_id} started; pass --force to resume with the files as they are now",
                run.file_path.display()
            )));
        }
        let events = self.store.events(&run.id, 0).await?;
        if !request.force
            && let Some(message) = crate::sandbox::scratch::scratch_not_portable(
                run_id.as_str(),
                events.iter().map(|e| (e.kind.as_str(), &e.data)),
            )
        {
            return Err(EngineError::ScratchNotPortable { message });
        }
        // A child that ran in a copy-based parent's sandbox has no sandbox to go back to
        // (SANDBOX.md §14): refused, or with --force, a sandbox of its own.
        let forced_parent = crate::executor::subbot::adopted_in_copy_based_parent(
            events.iter().map(|e| (e.kind.as_str(), &e.data)),
        );
        if let Some(parent) = &forced_parent
            && !request.force
        {
            return Err(refused(format!(
                "run {run_id} is a subbot child that ran in its parent {parent}'s copy-based sandbox; without the parent's sandbox it cannot continue there. Pass --force to resume it in a sandbox of its own"
            )));
        }
        let Some(workflow) = crate::launcher::engine::compile_recorded(&run, &bytes) else {
            return Err(refused(format!(
                "the workflow file {} no longer compiles; `iterion validate {}` shows why",
                run.file_path.display(),
                run.file_path.display()
            )));
        };
        let secrets = resolve_secrets(&workflow, |k| self.environment.get(k))?;
        let routes = iterion_agent::provider::resolve_routes(&workflow, &run.vars, |k| {
            self.environment.get(k)
        })
        .map_err(crate::launcher::launch::LaunchError::from)?;
        let mut envelope = RunEnvelope::from_value(run.checkpoint.as_ref());
        let mut rewound = None;
        if let Some(node) = &request.from {
            // Before the lease and the reopen: a refusal leaves the run as it was.
            let mut checkpoint = envelope.executor.clone().unwrap_or_default();
            let dropped_outputs = checkpoint.rewind_to(&workflow, node)?;
            envelope.executor = Some(checkpoint);
            rewound = Some(crate::records::events::RunRewound {
                node: node.clone(),
                dropped_outputs,
            });
        }
        let launch = envelope.launch_or_cwd();
        let (settings, override_env) =
            settings_from_env(self.sandbox_default, &launch, &self.environment)?;
        // What `run` checks before a run exists is checked here before the record is reopened:
        // a refusal after `reopen` would turn `failed_resumable` into `failed`.
        crate::executor::budget::RunBudget::resolve(&workflow.budget, |k| self.environment.get(k))
            .map_err(crate::launcher::launch::LaunchError::from)?;
        if workflow.worktree == iterion_dsl::ir::Worktree::Auto && run.worktree_path.is_none() {
            crate::sandbox::workspace::check_worktree_possible(&launch.cwd, &self.environment)
                .await
                .map_err(crate::launcher::launch::LaunchError::from)?;
        }
        let holder = crate::launcher::engine::holder_name();
        self.store
            .acquire_lease(&run.id, &holder, LEASE_TTL)
            .await
            .map_err(|e| match e {
                iterion_store::Error::LeaseHeld { .. } => refused(format!(
                    "run {run_id} is being executed by another process ({e})"
                )),
                other => EngineError::Store(other),
            })?;
        // Admission before the record changes (SANDBOX.md §10: "A refused resume leaves the
        // status as it was"). The denial is persisted on the record as it stands, then refused.
        let run = match self
            .admit_resume(&run, &workflow, &settings, override_env, &launch)
            .await
        {
            Ok(run) => run,
            Err(error) => {
                let _ = self.store.release_lease(&run.id, &holder).await;
                return Err(error);
            }
        };
        let before = run.clone();
        let run = match self.reopen(&run).await {
            Ok(run) => run,
            Err(error) => {
                let _ = self.store.release_lease(&run.id, &holder).await;
                return Err(error);
            }
        };
        let shared = forced_parent.map(|parent| {
            let reason = "resumed with --force without its parent's copy-based sandbox";
            tracing::warn!("run {run_id}: {reason}; it gets a sandbox of its own");
            crate::records::sandbox_events::SandboxShared::forced(&parent, reason)
        });
        let inputs = Inputs::recorded(&run, workflow, secrets, routes);
        let attempt = Attempt::prepare(run, holder, inputs, launch, (settings, override_env))
            .continuing(Continuation {
                checkpoint: envelope.executor,
                resumed: true,
                answer: request.answer.clone(),
                prior_failure: prior_failure(&before),
                rewound,
            })
            .shared(shared);
        let outcome = self.attempt(attempt, control, observer).await;
        self.undo_refused_reopen(&before, outcome).await
    }

    /// The backstop of "a refused resume leaves the record as it was" (SANDBOX.md §10): the
    /// attempt's own admission may refuse after all (the answer changed since
    /// [`Self::admit_resume`] asked). The attempt then ends with the failure the run had
    /// (`Attempt::prior_failure`, so the status it had), and the resume is refused here. When
    /// the attempt's admission could not even be persisted (the record is left `running`), the
    /// pre-reopen status and failure are put back.
    async fn undo_refused_reopen(
        &self,
        before: &Run,
        outcome: Result<RunSummary, EngineError>,
    ) -> Result<RunSummary, EngineError> {
        match &outcome {
            Ok(summary)
                if summary.failure_code.is_some()
                    && summary.failure_code == before.failure_code =>
            {
                let now = self.store.get_run(&before.id).await.ok().flatten();
                let denied = now
                    .as_ref()
                    .and_then(|r| r.admission.as_ref())
                    .filter(|a| a.decision == iterion_store::AdmissionDecision::Denied);
                match denied {
                    Some(admission) => Err(refused(format!(
                        "cannot resume run {}: {}",
                        before.id, admission.reason
                    ))),
                    None => outcome,
                }
            }
            Err(EngineError::Admission(error)) => {
                let message = format!("cannot resume run {}: {error}", before.id);
                if let Ok(Some(now)) = self.store.get_run(&before.id).await {
                    let mut restored = now.clone();
                    restored.status = before.status;
                    restored.failure_code = before.failure_code.clone();
                    restored.failure_message = before.failure_message.clone();
                    if let Err(error) = self.store.save_run(&restored, now.version).await {
                        tracing::warn!(
                            "run {}: could not restore the refused resume's record: {error}",
                            before.id
                        );
                    }
                }
                Err(refused(message))
            }
            _ => outcome,
        }
    }

    /// The admission of a resume, decided and (when denied) persisted on the record as it is —
    /// status and failure untouched — before anything reopens it. Returns the record to reopen.
    async fn admit_resume(
        &self,
        run: &Run,
        workflow: &iterion_dsl::ir::Workflow,
        settings: &crate::sandbox::resolve::SandboxSettings,
        override_env: Option<iterion_sandbox::SandboxFlag>,
        launch: &crate::launcher::launch::LaunchOptions,
    ) -> Result<Run, EngineError> {
        let trust = run.trust;
        let repo_root =
            crate::sandbox::workspace::sandbox_root_of(&launch.cwd, &self.environment).await;
        let overlay = iterion_sandbox::EnvOverlay {
            vars: launch.sandbox_env.clone(),
        };
        let resolved = crate::sandbox::resolve::resolve(
            &workflow.sandbox,
            settings,
            trust,
            Some(repo_root.as_path()),
            &overlay,
            &self.environment,
        );
        let factory = iterion_sandbox::Factory::new(
            self.registry(),
            self.factory_options,
            &iterion_sandbox::HostSignals::from_env(&self.environment),
        );
        let admission =
            crate::launcher::admission::decide(trust, &resolved, settings, &factory, override_env)
                .await;
        if admission.decision == iterion_store::AdmissionDecision::Allowed {
            return Ok(run.clone());
        }
        crate::launcher::admission::persist_admission(
            self.store.as_ref(),
            run,
            &admission,
            &|_: &mut Run| {},
        )
        .await?;
        Err(refused(format!(
            "cannot resume run {}: {}",
            run.id, admission.reason
        )))
    }

    /// `failed_resumable` → `running`, failure cleared, under compare-and-swap.
    async fn reopen(&self, run: &Run) -> Result<Run, EngineError> {
        let mut next = run.clone();
        next.status = RunStatus::Running;
        next.failure_code = None;
        next.failure_message = None;
        let version = self.store.save_run(&next, run.version).await?;
        next.version = version;
        Ok(next)
    }

    /// Boot maintenance of `iterion run` / `iterion resume` (SANDBOX.md §12): crash recovery,
    /// then one local reaper pass, bounded by 10 s. Off under `ITERION_SANDBOX_OVERRIDE=none`
    /// (crash recovery still runs).
    pub async fn boot_maintenance(&self) -> crate::launcher::reaper::ReapReport {
        let store = Arc::clone(&self.store);
        let recovered = crate::launcher::reaper::recover_interrupted(store.as_ref()).await;
        if !recovered.is_empty() {
            tracing::info!(
                "crash recovery: {} run(s) marked INTERRUPTED",
                recovered.len()
            );
        }
        let off = iterion_sandbox::sandbox_override_from_env(&self.environment)
            .ok()
            .flatten()
            .is_some_and(|flag| flag == iterion_sandbox::SandboxFlag::None);
        if off {
            return crate::launcher::reaper::ReapReport::default();
        }
        match tokio::time::timeout(
            std::time::Duration::from_secs(10),
            crate::launcher::reaper::reap_local(
                store,
                &crate::sandbox::registry::local_reapers(&self.environment),
                &self.environment,
            ),
        )
        .await
        {
            Ok(report) => report,
            Err(_) => {
                tracing::warn!("reaper: the boot pass did not finish within 10 s");
                crate::launcher::reaper::ReapReport::default()
            }
        }
    }
}
