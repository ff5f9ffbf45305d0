//! Subbot children as runs of their own in the store (DSL.md §3.9, SANDBOX.md §14):
//! [`StoreChildRuns`], the launcher's [`ChildRuns`]. Each child is a record of its own with its
//! lease and events; a child that declares a sandbox of its own under a bind-mount parent is
//! launched here as a whole attempt ([`Engine`]'s: admission, sandbox, execution, teardown).

use std::sync::Arc;

use iterion_store::{RunId, Store};

use crate::executor::child_runs::{ChildRun, ChildRuns, OwnEnd, OwnRun};
use crate::executor::outcome::{Failure, RunOutcome};
use crate::launcher::attempt::{Attempt, Inputs};
use crate::launcher::engine::Engine;
use crate::records::record::{RunObserver, StoreEvents};
use crate::records::secrets::Redactor;
use iterion_vocab::FailureCode;

/// Child runs of subbot nodes as records of their own (DSL.md §3.9): each is created `running`
/// as a child of the parent record (parent id, root id, the parent's trust), holds its own lease
/// while it runs, gets its own events, and is saved with its outcome when it ends.
///
/// A child that declares a sandbox of its own under a bind-mount parent is a whole launch of its
/// own ([`crate::Engine`]'s attempt: admission, sandbox, execution, teardown) with the parent's
/// sandbox settings and launch options (SANDBOX.md §14 rule 1).
pub(crate) struct StoreChildRuns<'e> {
    engine: &'e Engine,
    store: Arc<dyn Store>,
    parent: iterion_store::Run,
    holder: String,
    observer: Arc<dyn RunObserver>,
    /// Cancelled when a child's lease is lost.
    on_lost: tokio_util::sync::CancellationToken,
    /// Cancelled when the parent is interrupted: children end INTERRUPTED with it.
    interrupt: tokio_util::sync::CancellationToken,
    /// The parent's host workspace (where SANDBOX.md §15's bot source is told apart).
    workspace: std::path::PathBuf,
    /// The lease keepers of the open children, by child run id.
    keepers: std::sync::Mutex<Vec<(String, crate::launcher::lease::LeaseKeeper)>>,
    /// The parent's sandbox settings, override and launch options, for a child's own launch.
    settings: crate::sandbox::resolve::SandboxSettings,
    override_env: Option<iterion_sandbox::SandboxFlag>,
    launch: crate::launcher::launch::LaunchOptions,
}

/// What [`StoreChildRuns`] takes from the parent's attempt besides the attempt itself.
pub(crate) struct ChildContext {
    /// Told of every child record and event.
    pub observer: Arc<dyn RunObserver>,
    /// Cancelled when a child's lease is lost: the parent's own lease-lost token, so the
    /// parent stops INTERRUPTED (resumable) as when it loses its own.
    pub on_lost: tokio_util::sync::CancellationToken,
    /// Cancelled when the parent is interrupted.
    pub interrupt: tokio_util::sync::CancellationToken,
    /// The parent's host workspace.
    pub workspace: std::path::PathBuf,
    /// The parent's redactor: child records pass it on their way into the store.
    pub redactor: Arc<Redactor>,
}

impl<'e> StoreChildRuns<'e> {
    pub(crate) fn new(
        engine: &'e Engine,
        attempt: &Attempt,
        parent: iterion_store::Run,
        context: ChildContext,
    ) -> StoreChildRuns<'e> {
        StoreChildRuns {
            engine,
            store: crate::records::redacting_store::RedactingStore::wrap(
                Arc::clone(&engine.store),
                context.redactor,
            ),
            parent,
            holder: attempt.holder.clone(),
            observer: context.observer,
            on_lost: context.on_lost,
            interrupt: context.interrupt,
            workspace: context.workspace,
            keepers: std::sync::Mutex::new(Vec::new()),
            settings: attempt.settings.clone(),
            override_env: attempt.override_env,
            launch: attempt.launch.clone(),
        }
    }

    /// The child's `.iter` file: `source` relative to the parent's file (DSL.md §3.9).
    fn child_file(&self, subbot: &iterion_dsl::ir::SubbotNode) -> std::path::PathBuf {
        self.parent
            .file_path
            .parent()
            .map_or_else(|| subbot.source.clone().into(), |d| d.join(&subbot.source))
    }

    /// The envelope a child record keeps: the parent's launch options, so that a resume of the
    /// child (a forced one, SANDBOX.md §14) works from the parent's directory, not the caller's.
    fn child_envelope(&self) -> Option<serde_json::Value> {
        crate::launcher::engine::RunEnvelope {
            launch: self.launch.clone(),
            executor: None,
        }
        .to_value()
    }

    fn keepers(
        &self,
    ) -> std::sync::MutexGuard<'_, Vec<(String, crate::launcher::lease::LeaseKeeper)>> {
        self.keepers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl ChildRuns for StoreChildRuns<'_> {
    fn open<'a>(
        &'a self,
        _parent_run: &'a str,
        node: &'a str,
        subbot: &'a iterion_dsl::ir::SubbotNode,
        child: &'a iterion_dsl::ir::Workflow,
        vars: &'a serde_json::Map<String, serde_json::Value>,
        resumed: Option<&'a str>,
    ) -> futures_util::future::BoxFuture<'a, Result<ChildRun, Failure>> {
        Box::pin(async move {
            if let Some(run_id) = resumed {
                return self.reopen(node, subbot, run_id).await;
            }
            let ir = serde_json::to_vec(child).unwrap_or_default();
            let file = self.child_file(subbot);
            // The hash of the child's source as resume computes it; the compiled child's when
            // the file is gone.
            let hash = iterion_dsl::load(&file).map_or_else(
                |_| crate::launcher::launch::workflow_hash(&ir),
                |bytes| crate::launcher::launch::workflow_hash(&bytes),
            );
            let bundle_devbox = crate::sandbox::devbox::bot_config(
                file.parent().unwrap_or(std::path::Path::new(".")),
                &self.workspace,
            )
            .await;
            let new = iterion_store::NewRun::new(child.name.clone(), hash, file)
                .child_of(&self.parent)
                .vars(vars.clone())
                .lease(self.holder.clone(), crate::launcher::lease::LEASE_TTL);
            let mut run = self.store.create_run(new).await.map_err(|e| {
                Failure::new(
                    iterion_vocab::FailureCode::ExecutionFailed,
                    format!("subbot {node}: cannot create the child run record: {e}"),
                )
            })?;
            run.checkpoint = self.child_envelope();
            match self.store.save_run(&run, run.version).await {
                Ok(version) => run.version = version,
                Err(error) => tracing::warn!(
                    "child run {}: could not record its launch options: {error}",
                    run.id
                ),
            }
            self.observer.run_created(run.id.as_str());
            Ok(self.attach(&run, false, bundle_devbox))
        })
    }

    fn run_own<'a>(
        &'a self,
        own: OwnRun<'a>,
    ) -> futures_util::future::BoxFuture<'a, Result<OwnEnd, Failure>> {
        Box::pin(self.launch_own(own))
    }

    fn parent_interrupted(&self) -> bool {
        self.interrupt.is_cancelled()
    }

    fn close<'a>(
        &'a self,
        child: &'a ChildRun,
        outcome: &'a RunOutcome,
    ) -> futures_util::future::BoxFuture<'a, ()> {
        Box::pin(async move {
            // The child is over: its cancel watch stops.
            child.cancel.cancel();
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

impl StoreChildRuns<'_> {
    /// The open child run of record `run`: its lease keeper, events, `run_started` and cancel
    /// watch.
    fn attach(
        &self,
        run: &iterion_store::Run,
        resumed: bool,
        bundle_devbox: Option<std::path::PathBuf>,
    ) -> ChildRun {
        let keeper = crate::launcher::lease::LeaseKeeper::start(
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
        let started = crate::records::events::RunStarted {
            workflow: run.workflow.clone(),
            workflow_hash: run.workflow_hash.clone(),
            trust: run.trust.as_str().to_owned(),
            resumed,
            parent_run: run.parent_run_id.as_ref().map(ToString::to_string),
            root_run: Some(run.root_run_id.to_string()),
        };
        // A cancel asked for this child (it runs in its parent's execution, not an
        // attempt of its own): the watch ends when `close` fires the same token.
        let cancel = tokio_util::sync::CancellationToken::new();
        crate::launcher::cancel::CancelWatch::start(
            Arc::clone(&self.store),
            run.id.clone(),
            cancel.clone(),
            cancel.clone(),
        );
        ChildRun {
            run_id: run.id.to_string(),
            events: Arc::new(events),
            started,
            bundle_devbox,
            cancel,
        }
    }

    /// Reopens child run `run_id` of subbot `node`, paused when its parent paused: it must be a
    /// `paused` child of this parent; it is taken (lease) and set `running` again.
    async fn reopen(
        &self,
        node: &str,
        subbot: &iterion_dsl::ir::SubbotNode,
        run_id: &str,
    ) -> Result<ChildRun, Failure> {
        let invalid = |why: String| {
            Failure::new(
                FailureCode::ResumeInvalid,
                format!("subbot {node}: the paused child run {run_id} cannot be resumed: {why}"),
            )
        };
        let id = run_id
            .parse::<RunId>()
            .map_err(|e| invalid(format!("not a run id: {e}")))?;
        let run = self
            .store
            .get_run(&id)
            .await
            .map_err(|e| invalid(e.to_string()))?
            .ok_or_else(|| invalid("no such run".to_owned()))?;
        if run.parent_run_id.as_ref() != Some(&self.parent.id) {
            return Err(invalid(format!(
                "it is not a child of run {}",
                self.parent.id
            )));
        }
        if run.status != iterion_store::RunStatus::Paused {
            return Err(invalid(format!("it is {}, not paused", run.status)));
        }
        self.store
            .acquire_lease(&run.id, &self.holder, crate::launcher::lease::LEASE_TTL)
            .await
            .map_err(|e| invalid(e.to_string()))?;
        let mut next = run.clone();
        next.status = iterion_store::RunStatus::Running;
        next.failure_code = None;
        next.failure_message = None;
        next.version = self
            .store
            .save_run(&next, run.version)
            .await
            .map_err(|e| invalid(e.to_string()))?;
        let bundle_devbox = crate::sandbox::devbox::bot_config(
            self.child_file(subbot)
                .parent()
                .unwrap_or(std::path::Path::new(".")),
            &self.workspace,
        )
        .await;
        Ok(self.attach(&next, true, bundle_devbox))
    }

    /// [`ChildRuns::run_own`]: the child record, then a whole attempt whose
    /// events start `run_started`, `sandbox_shared {adopted: false, declared}`.
    async fn launch_own(&self, own: OwnRun<'_>) -> Result<OwnEnd, Failure> {
        let fail = |code: FailureCode, message: String| Failure::new(code, message);
        let node = own.node;
        if let Some(run_id) = own.resumed {
            return self.resume_own(node, run_id, own.answer, own.cancel).await;
        }
        let file = self.child_file(own.subbot);
        let hash = iterion_dsl::load(&file).map_or_else(
            |_| {
                crate::launcher::launch::workflow_hash(
                    &serde_json::to_vec(own.child).unwrap_or_default(),
                )
            },
            |bytes| crate::launcher::launch::workflow_hash(&bytes),
        );
        let secrets =
            crate::launcher::launch::resolve_secrets(own.child, |k| self.engine.environment.get(k))
                .map_err(|e| fail(FailureCode::LaunchFailed, format!("subbot {node}: {e}")))?;
        let routes = iterion_agent::provider::resolve_routes(own.child, &own.vars, |k| {
            self.engine.environment.get(k)
        })
        .map_err(|e| fail(FailureCode::LaunchFailed, format!("subbot {node}: {e}")))?;
        let new = iterion_store::NewRun::new(own.child.name.clone(), hash, file)
            .child_of(&self.parent)
            .vars(own.vars.clone())
            .lease(self.holder.clone(), crate::launcher::lease::LEASE_TTL);
        let run = self.store.create_run(new).await.map_err(|e| {
            fail(
                FailureCode::ExecutionFailed,
                format!("subbot {node}: cannot create the child run record: {e}"),
            )
        })?;
        let reason = format!(
            "subbot {node} declares sandbox fields [{}]; the parent's {} sandbox is bind-mounted, \
             so the child gets a sandbox of its own",
            own.fields.join(", "),
            own.driver
        );
        tracing::warn!("{reason}");
        let declined = crate::records::sandbox_events::SandboxShared::declined(
            &own.driver,
            self.parent.id.as_str(),
            own.fields.clone(),
            &reason,
        );
        let inputs = Inputs {
            workflow: own.child.clone(),
            vars: own.vars,
            secrets,
            routes,
        };
        let attempt = Attempt::prepare(
            run,
            self.holder.clone(),
            inputs,
            self.launch.clone(),
            (self.settings.clone(), self.override_env),
        )
        .shared(Some(declined));
        let control = crate::launcher::engine::RunControl {
            cancel: own.cancel,
            interrupt: self.interrupt.child_token(),
            abandon: tokio_util::sync::CancellationToken::new(),
        };
        let launched: futures_util::future::BoxFuture<'_, _> = Box::pin(self.engine.attempt(
            attempt,
            control,
            Arc::clone(&self.observer),
        ));
        let summary = launched.await.map_err(|e| {
            fail(
                FailureCode::ExecutionFailed,
                format!("subbot {node}: the child run could not run: {e}"),
            )
        })?;
        own_end(summary)
    }

    /// Resumes child run `run_id` of its own, paused when its parent paused, with `answer`: a
    /// resume of that record ([`Engine::resume_run`]: admission again, its own sandbox again).
    async fn resume_own(
        &self,
        node: &str,
        run_id: &str,
        answer: Option<String>,
        cancel: tokio_util::sync::CancellationToken,
    ) -> Result<OwnEnd, Failure> {
        let request = crate::launcher::engine::ResumeRequest {
            run_id: run_id.to_owned(),
            force: false,
            answer,
            from: None,
        };
        let control = crate::launcher::engine::RunControl {
            cancel,
            interrupt: self.interrupt.child_token(),
            abandon: tokio_util::sync::CancellationToken::new(),
        };
        let resumed: futures_util::future::BoxFuture<'_, _> = Box::pin(self.engine.resume_run(
            request,
            control,
            Arc::clone(&self.observer),
        ));
        let summary = resumed.await.map_err(|e| {
            Failure::new(
                FailureCode::ResumeInvalid,
                format!("subbot {node}: the paused child run {run_id} could not be resumed: {e}"),
            )
        })?;
        own_end(summary)
    }
}

/// What a child run of its own came to: its output, its pause, or its failure.
fn own_end(summary: crate::launcher::engine::RunSummary) -> Result<OwnEnd, Failure> {
    if summary.status == iterion_store::RunStatus::Paused {
        return Ok(OwnEnd::Paused {
            run_id: summary.run_id,
            question: summary.message.unwrap_or_default(),
        });
    }
    if summary.status != iterion_store::RunStatus::Finished {
        let code = summary
            .failure_code
            .as_deref()
            .and_then(FailureCode::from_str_exact)
            .unwrap_or(FailureCode::ExecutionFailed);
        return Err(Failure::new(
            code,
            format!(
                "child run {} ended {}: {}",
                summary.run_id,
                summary.status,
                summary.message.unwrap_or_default()
            ),
        ));
    }
    Ok(OwnEnd::Done(summary.output.unwrap_or_else(|| {
        serde_json::Value::Object(serde_json::Map::new())
    })))
}

/// Saves a child run's status, failure and last node (three tries on a version conflict).
async fn save_child(
    store: &dyn Store,
    run_id: &str,
    outcome: &RunOutcome,
) -> iterion_store::Result<()> {
    let Ok(id) = run_id.parse::<RunId>() else {
        return Ok(());
    };
    for attempt in 1..=3 {
        let Some(current) = store.get_run(&id).await? else {
            return Ok(());
        };
        let mut next = current.clone();
        next.status = crate::records::status::store_status(outcome.status);
        // A paused child's message is its question, not a failure (the store refuses one).
        let failed = next.status.allows_failure();
        next.failure_code = outcome
            .failure_code
            .filter(|_| failed)
            .map(|c| c.as_str().to_owned());
        next.failure_message = outcome.message.clone().filter(|_| failed);
        next.last_completed_node = outcome.last_completed_node.clone();
        match store.save_run(&next, current.version).await {
            Err(iterion_store::Error::Conflict { .. }) if attempt < 3 => {}
            other => return other.map(|_| ()),
        }
    }
    Ok(())
}
