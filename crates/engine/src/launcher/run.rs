//! One attempt of a run, launch or resume alike (ARCHITECTURE.md §2, SANDBOX.md §0.3):
//! `run_started` → admission → workspace → `resolve_and_start_sandbox` → executor → teardown →
//! the final record and the terminal event. Every outcome goes through teardown and ends with
//! exactly one terminal event and one final save.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use iterion_dsl::ir::{Workflow, Worktree};
use iterion_sandbox::{
    EnvOverlay, Factory, HostSignals, Progress, PullProgress, SandboxRun, Trust,
};
use iterion_store::{AdmissionDecision, Run, Store};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::executor::checkpoint::Checkpoint;
use crate::executor::execution::Execution;
use crate::executor::outcome::RunOutcome;
use crate::launcher::admission::persist_admission;
use crate::launcher::attempt::{Attempt, Inputs};
use crate::launcher::cancel::CancelWatch;
use crate::launcher::children::{ChildContext, StoreChildRuns};
use crate::launcher::engine::{
    Engine, EngineError, RunControl, RunEnvelope, RunRequest, RunSummary, holder_name,
};
use crate::launcher::launch::settings_from_env;
use crate::launcher::lease::{LEASE_TTL, LeaseKeeper};
use crate::records::events::{Event, RunFailed, RunStarted};
use crate::records::record::{LogWriter, RunObserver, StoreEvents, StoreRunLog};
use crate::records::secrets::{Redactor, ResolvedSecret};
use crate::records::sink::EventSink;
use crate::records::status::store_status;
use crate::sandbox::active::ActiveSandbox;
use crate::sandbox::egress::EgressSecret;
use crate::sandbox::error::{PHASE_SANDBOX_SETUP, SetupError};
use crate::sandbox::mounts::MountInputs;
use crate::sandbox::resolve::{Resolved, resolve};
use crate::sandbox::skills;
use crate::sandbox::start::{SandboxOutcome, resolve_and_start_sandbox};
use crate::sandbox::start_ctx::StartCtx;
use crate::sandbox::worktree::{RunWorktree, WorktreeError, create_worktree};
use iterion_vocab::{FailureCode, OutcomeStatus};

/// The `phase` of an admission refusal's `run_failed` (defined here).
pub(crate) const PHASE_ADMISSION: &str = "admission";

impl Engine {
    /// Launches a run: checks the settings, creates the run (status `running`, with its lease),
    /// then runs one attempt to its end.
    ///
    /// # Errors
    ///
    /// [`EngineError::Launch`] before the run exists (exit 2); store and admission-persistence
    /// failures. Everything after the run exists is an outcome in the [`RunSummary`].
    pub async fn run(
        &self,
        request: RunRequest,
        control: RunControl,
        observer: Arc<dyn RunObserver>,
    ) -> Result<RunSummary, EngineError> {
        let (settings, override_env) =
            settings_from_env(self.sandbox_default, &request.options, &self.environment)?;
        crate::sandbox::host_services::check_trust(
            &request.options.allow_hosts,
            request.trust,
            request.options.allow_hosts_untrusted,
        )
        .map_err(crate::launcher::launch::LaunchError::from)?;
        if request.workflow.worktree == Worktree::Auto {
            crate::sandbox::workspace::check_worktree_possible(
                &request.options.cwd,
                &self.environment,
            )
            .await
            .map_err(crate::launcher::launch::LaunchError::from)?;
        }
        crate::executor::budget::RunBudget::resolve(&request.workflow.budget, |k| {
            self.environment.get(k)
        })
        .map_err(crate::launcher::launch::LaunchError::from)?;
        let routes =
            iterion_agent::provider::resolve_routes(&request.workflow, &request.vars, |k| {
                self.environment.get(k)
            })
            .map_err(crate::launcher::launch::LaunchError::from)?;
        let staged =
            crate::sandbox::attachments::stage(&request.workflow, &request.options.attachments)
                .map_err(crate::launcher::launch::LaunchError::from)?;
        let holder = holder_name();
        let run = self
            .store
            .create_run(request.new_run().lease(holder.clone(), LEASE_TTL))
            .await?;
        let inputs = Inputs {
            workflow: request.workflow,
            vars: request.vars,
            secrets: request.secrets,
            routes,
        };
        let mut attempt = Attempt::prepare(
            run,
            holder,
            inputs,
            request.options,
            (settings, override_env),
        );
        attempt.attachments = (!staged.is_empty()).then_some(staged);
        self.attempt(attempt, control, observer).await
    }

    /// Runs one attempt of an existing run that this process holds the lease of, in stages that
    /// hand each other values: the record is opened ([`Recording`]) and the stop watched
    /// ([`Stopping`]); admission decides ([`Admitted`]); the workspace is set up; the sandbox is
    /// planned and started and the executor runs ([`Self::sandbox_and_execute`]); the worktree is
    /// torn down; the final record and the terminal event close it.
    pub(crate) async fn attempt(
        &self,
        attempt: Attempt,
        control: RunControl,
        observer: Arc<dyn RunObserver>,
    ) -> Result<RunSummary, EngineError> {
        let started = Instant::now();
        let mut attempt = attempt;
        // The delegate CLIs' subscription logins, read before the record opens so their tokens
        // are redacted from its first write; a broken one fails the setup below.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        let forfaits = crate::sandbox::forfait::load(
            &attempt.workflow,
            &attempt.routes,
            &self.environment,
            attempt.run.trust,
            now,
        );
        let login_secrets = forfaits
            .as_ref()
            .map(crate::sandbox::forfait::Forfaits::redacted)
            .unwrap_or_default();
        let record = self
            .open_record(&mut attempt, &observer, login_secrets)
            .await;
        // A cancel asked for from another process (`iterion cancel`, the studio) stops the
        // attempt as the caller's cancel token does.
        let requested = CancellationToken::new();
        let stopping = Stopping::watch(&control, &record.lost, &requested);
        CancelWatch::start(
            Arc::clone(&self.store),
            attempt.run.id.clone(),
            requested,
            stopping.stop.clone(),
        );
        let admitted = match self.admit(&attempt, record.store.as_ref()).await {
            Ok(admitted) => admitted,
            Err(error) => {
                record.close().await;
                stopping.stop.cancel();
                return Err(error);
            }
        };
        let run = &admitted.run;
        let mut ending = Ending::default();
        let mut worktree: Option<RunWorktree> = None;
        let copied = match (&admitted.refusal, attempt.attachments.take()) {
            (None, Some(staged)) => Some(
                self.copy_attachments(staged, run.id.as_str(), &record.events)
                    .await,
            ),
            _ => None,
        };
        if let Some((code, message)) = admitted.refusal.clone() {
            ending.fail(code, message, PHASE_ADMISSION);
        } else if let Some(Err(message)) = copied {
            ending.fail(FailureCode::LaunchFailed, message, PHASE_ADMISSION);
        } else {
            match self.workspace(&attempt, run, &admitted.root).await {
                Err(error) => ending.fail(
                    FailureCode::SandboxSetupFailed,
                    error.to_string(),
                    "workspace setup",
                ),
                Ok((workspace, made)) => {
                    worktree = made;
                    // A trusted run's bundle skills, into the workspace before any sandbox
                    // sees it (an untrusted run's go into its copy when that is made).
                    let skills = &attempt.workflow.skills;
                    let mirrored = match run.trust {
                        Trust::Trusted => skills::mirror_blocking(&workspace, skills, None).await,
                        Trust::Untrusted => Ok(skills::Mirrored::default()),
                    };
                    if let Err(message) = mirrored {
                        ending.fail(FailureCode::SandboxSetupFailed, message, "workspace setup");
                    } else {
                        let in_worktree = match &worktree {
                            // A worktree run's repository root is the worktree itself (SANDBOX.md
                            // §7.1): its devcontainer is the one the run sees.
                            Some(_) => Some(
                                admitted
                                    .resolve_in(&attempt, &workspace, &self.environment)
                                    .await,
                            ),
                            None => None,
                        };
                        let stop_code = || stopping.code();
                        let scope = Scope {
                            attempt: &attempt,
                            run,
                            resolved: in_worktree.as_ref().unwrap_or(&admitted.resolved),
                            factory: &admitted.factory,
                            workspace: &workspace,
                            events: &record.events,
                            run_log: &record.run_log,
                            observer: &observer,
                            stop: &stopping.stop,
                            lost: &record.lost,
                            interrupt_children: &stopping.interrupt_children,
                            stop_code: &stop_code,
                            forfaits: &forfaits,
                        };
                        self.sandbox_and_execute(&scope, &mut ending).await;
                        // What the run left of them is its own; the rest is taken back.
                        if let Ok(mirrored) = mirrored {
                            skills::unmirror_blocking(&workspace, skills, mirrored).await;
                        }
                    }
                }
            }
        }
        let (kept_worktree, landed_branch) = land_worktree(worktree, &ending, &attempt).await;
        // The final record, then the terminal event.
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let envelope = RunEnvelope {
            launch: attempt.launch.clone(),
            executor: ending.checkpoint.clone().or(attempt.checkpoint.clone()),
        };
        let saved = save_final(
            record.store.as_ref(),
            run,
            &ending,
            &envelope,
            kept_worktree.as_ref(),
        )
        .await;
        record.events.emit(ending.terminal_event(duration_ms)).await;
        let redactor = Arc::clone(&record.redactor);
        record.close().await;
        stopping.stop.cancel();
        saved?;
        Ok(RunSummary {
            run_id: run.id.to_string(),
            status: store_status(ending.status()),
            failure_code: ending.code.map(|c| c.as_str().to_owned()),
            declared_code: ending
                .outcome
                .as_ref()
                .and_then(|o| o.declared_code.clone()),
            message: ending.message.as_deref().map(|m| redactor.redact(m)),
            output: ending.output.as_ref().map(|o| redactor.redact_json(o)),
            worktree: kept_worktree,
            branch: landed_branch,
        })
    }

    /// A launch's attachments copied into the run's attachments dir, recorded as
    /// `sandbox_attachments_copied` (names, sizes, hashes; never contents).
    async fn copy_attachments(
        &self,
        staged: crate::sandbox::attachments::Staged,
        run_id: &str,
        events: &StoreEvents,
    ) -> Result<(), String> {
        let dir = crate::sandbox::attachments::run_dir(&self.iterion_home, run_id);
        let records = tokio::task::spawn_blocking(move || staged.copy_into(&dir))
            .await
            .map_err(|e| format!("copying the attachments: {e}"))?
            .map_err(|e| e.to_string())?;
        events
            .emit(Event::SandboxAttachmentsCopied(
                crate::records::sandbox_events::SandboxAttachmentsCopied {
                    target: crate::sandbox::attachments::CONTAINER_DIR.to_owned(),
                    files: records.len() as u64,
                    bytes: records.iter().map(|r| r.size).sum(),
                    error: None,
                    attachments: records,
                },
            ))
            .await;
        Ok(())
    }

    /// The attempt's record opened: the lease kept, the model keys added to the secrets, every
    /// write redacted, `run_started` (and a subbot child's `sandbox_shared`) recorded.
    async fn open_record(
        &self,
        attempt: &mut Attempt,
        observer: &Arc<dyn RunObserver>,
        login_secrets: Vec<ResolvedSecret>,
    ) -> Recording {
        let run_id = attempt.run.id.clone();
        observer.run_created(run_id.as_str());
        let lost = CancellationToken::new();
        let keeper = LeaseKeeper::start(
            Arc::clone(&self.store),
            run_id.clone(),
            attempt.holder.clone(),
            lost.clone(),
        );
        // The model keys and the logins' tokens are redacted, but never join the workflow's
        // resolved secrets: a workflow that declares a secret of the same name (say an optional
        // `ITERION_GATEWAY_ANTHROPIC` with its own hosts, or `as: file`) must not be handed them.
        let mut redacted = attempt.secrets.clone();
        redacted.extend(crate::sandbox::gateway::redacted_keys(&attempt.routes));
        redacted.extend(login_secrets);
        let redactor = Arc::new(Redactor::new(&redacted));
        // Every write of this attempt into the record passes its redactor (issue 15 item 8).
        let store = crate::records::redacting_store::RedactingStore::wrap(
            Arc::clone(&self.store),
            Arc::clone(&redactor),
        );
        let events = StoreEvents::new(Arc::clone(&store), run_id.clone(), Arc::clone(observer));
        let (run_log, writer) = StoreRunLog::start(
            Arc::clone(&store),
            run_id.clone(),
            Arc::clone(&redactor),
            Arc::clone(observer),
        );
        let trust = attempt.run.trust;
        events
            .emit(Event::RunStarted(RunStarted {
                workflow: attempt.workflow.name.clone(),
                workflow_hash: attempt.run.workflow_hash.clone(),
                trust: trust.as_str().to_owned(),
                resumed: attempt.resumed,
                // A subbot child launched with a sandbox of its own (SANDBOX.md §14).
                parent_run: attempt.run.parent_run_id.as_ref().map(ToString::to_string),
                root_run: attempt
                    .run
                    .parent_run_id
                    .is_some()
                    .then(|| attempt.run.root_run_id.to_string()),
            }))
            .await;
        if let Some(rewound) = attempt.rewound.take() {
            events.emit(Event::RunRewound(rewound)).await;
        }
        if let Some(shared) = attempt.shared.take() {
            events.emit(Event::SandboxShared(shared)).await;
        }
        Recording {
            store,
            events,
            run_log,
            writer,
            keeper,
            redactor,
            lost,
        }
    }

    /// Admission (seed steps 3–4) on the run's resolution, persisted (with the launch envelope)
    /// before a refusal is returned.
    async fn admit(&self, attempt: &Attempt, store: &dyn Store) -> Result<Admitted, EngineError> {
        let trust = attempt.run.trust;
        let overlay = EnvOverlay {
            vars: attempt.launch.sandbox_env.clone(),
        };
        let repo_root =
            crate::sandbox::workspace::sandbox_root_of(&attempt.launch.cwd, &self.environment)
                .await;
        let resolved = resolve(
            &attempt.workflow.sandbox,
            &attempt.settings,
            trust,
            Some(repo_root.as_path()),
            &overlay,
            &self.environment,
        );
        let factory = Factory::new(
            self.registry(),
            self.factory_options,
            &HostSignals::from_env(&self.environment),
        );
        let envelope = RunEnvelope {
            launch: attempt.launch.clone(),
            executor: attempt.checkpoint.clone(),
        };
        let admission = crate::launcher::admission::decide(
            trust,
            &resolved,
            &attempt.settings,
            &factory,
            attempt.override_env,
        )
        .await;
        let envelope_value = envelope.to_value();
        let run = persist_admission(store, &attempt.run, &admission, &|r: &mut Run| {
            r.checkpoint = envelope_value.clone();
        })
        .await?;
        let refusal = (admission.decision == AdmissionDecision::Denied).then(|| {
            attempt
                .prior_failure
                .clone()
                .unwrap_or((FailureCode::LaunchFailed, admission.reason.clone()))
        });
        Ok(Admitted {
            run,
            refusal,
            resolved,
            factory,
            overlay,
            root: repo_root,
        })
    }

    /// Workspace setup: the run's worktree (made, or reopened on a resume) under
    /// `worktree: auto`, else `root`, the workspace root of the launch directory admission
    /// found (one `git rev-parse` per run, not two); canonicalised. A worktree that cannot be
    /// made is the message.
    async fn workspace(
        &self,
        attempt: &Attempt,
        run: &Run,
        root: &std::path::Path,
    ) -> Result<(PathBuf, Option<RunWorktree>), WorktreeError> {
        let cwd = &attempt.launch.cwd;
        let (workspace, worktree) = match attempt.workflow.worktree {
            Worktree::Auto => {
                let made = match &run.worktree_path {
                    Some(path) => RunWorktree::reopen(path, &self.environment).await,
                    None => {
                        create_worktree(&self.iterion_home, run.id.as_str(), cwd, &self.environment)
                            .await
                    }
                };
                let worktree = made?;
                (worktree.path().to_owned(), Some(worktree))
            }
            Worktree::None => (root.to_owned(), None),
        };
        let workspace = tokio::fs::canonicalize(&workspace)
            .await
            .unwrap_or(workspace);
        Ok((workspace, worktree))
    }

    /// `resolve_and_start_sandbox`, the `interaction: ask` guard, the executor and the sandbox
    /// teardown. Records how it ended in `ending`.
    async fn sandbox_and_execute(&self, scope: &Scope<'_>, ending: &mut Ending) {
        let Scope {
            attempt,
            run,
            resolved,
            factory,
            workspace,
            events,
            run_log,
            observer,
            stop,
            stop_code,
            forfaits,
            ..
        } = *scope;
        let run_id = run.id.as_str();
        let forfaits = match forfaits {
            Ok(forfaits) => forfaits.clone(),
            Err(message) => {
                ending.fail(
                    FailureCode::SandboxSetupFailed,
                    message.clone(),
                    PHASE_SANDBOX_SETUP,
                );
                return;
            }
        };
        let budget =
            match crate::executor::budget::RunBudget::resolve(&attempt.workflow.budget, |k| {
                self.environment.get(k)
            }) {
                Ok(budget) => budget,
                Err(error) => {
                    ending.fail(
                        FailureCode::LaunchFailed,
                        error.to_string(),
                        PHASE_SANDBOX_SETUP,
                    );
                    return;
                }
            };
        let progress = ObserverProgress(Arc::clone(observer));
        let ctx = StartCtx {
            resolved,
            factory,
            run_id,
            store_id: self.store.store_id(),
            workflow: &attempt.workflow.name,
            trust: run.trust,
            max_duration_seconds: budget.max_duration.map_or(0, |d| d.as_secs()),
            host_services: attempt.launch.allow_hosts.clone(),
            mount_inputs: MountInputs {
                run_id: run_id.to_owned(),
                env: self.environment.clone(),
                iterion_home: self.iterion_home.clone(),
                workspace: workspace.to_owned(),
                home: self
                    .environment
                    .get_os("HOME")
                    .map(PathBuf::from)
                    .filter(|h| h.is_absolute()),
                host_state_source: resolved.host_state_source,
                engine_binary: crate::sandbox::engine_binary::engine_binary_for_run(
                    self.engine_binary.as_deref(),
                    &self.environment,
                ),
                host_binds: true,
                post_create: true,
                bundle_dir: attempt
                    .run
                    .file_path
                    .parent()
                    .map(std::path::Path::to_path_buf),
                repo_devbox: attempt.workflow.repo_devbox,
                file_secrets: file_secret_mounts(&attempt.workflow, &attempt.secrets),
                worktree_git_dir: match attempt.workflow.worktree {
                    Worktree::Auto => crate::sandbox::worktree::git(
                        workspace,
                        &["rev-parse", "--absolute-git-dir"],
                        &self.environment,
                    )
                    .await
                    .ok()
                    .map(PathBuf::from),
                    Worktree::None => None,
                },
                untrusted_copy: None,
                child_of_live_sandbox: attempt.run.parent_run_id.is_some(),
                attachments: {
                    let dir = crate::sandbox::attachments::run_dir(&self.iterion_home, run_id);
                    dir.is_dir().then_some(dir)
                },
            },
            file_secrets: attempt.workflow.has_file_secrets(),
            ask_user: crate::sandbox::ask_user::wanted(&attempt.workflow),
            events,
            event_sink: Arc::new(events.clone()),
            egress_secrets: {
                let mut secrets = egress_secrets(&attempt.workflow, &attempt.secrets);
                secrets.extend(crate::sandbox::gateway::egress_secrets(&attempt.routes));
                secrets.extend(forfaits.egress_secrets());
                secrets
            },
            model_hosts: {
                let mut hosts = crate::sandbox::gateway::model_hosts(&attempt.routes);
                for host in forfaits.model_hosts() {
                    if !hosts.contains(&host) {
                        hosts.push(host);
                    }
                }
                hosts
            },
            forfaits: forfaits.clone(),
            run_log: Arc::new(run_log.clone()),
            redactor: Arc::clone(run_log.redactor()),
            progress: &progress,
            skills: &attempt.workflow.skills,
        };
        let outcome = tokio::select! {
            outcome = resolve_and_start_sandbox(ctx) => Some(outcome),
            () = stop.cancelled() => None,
        };
        let active = match outcome {
            None => {
                // Stopped during setup: the driver's drop guard removes what it created; make
                // sure by label before the process may exit.
                crate::launcher::reaper::remove_run_containers(
                    &crate::sandbox::registry::local_reapers(&self.environment),
                    self.store.store_id(),
                    run_id,
                )
                .await;
                let code = stop_code();
                ending.fail(code, stop_message(code), PHASE_SANDBOX_SETUP);
                return;
            }
            Some(SandboxOutcome::Failed(SetupError {
                code,
                message,
                phase,
            })) => {
                ending.fail(code, message, &phase);
                return;
            }
            Some(SandboxOutcome::Unsandboxed) => None,
            Some(SandboxOutcome::Started(active)) => Some(active),
        };
        // ask_user works inside a sandbox through the runner channel (SANDBOX.md §13.3), so an
        // `interaction: ask` node is no longer refused here (DSL.md §6.2, C136).
        self.execute(scope, active.as_ref(), ending).await;
        if let Some(active) = active {
            active.shutdown().await;
        }
    }

    async fn execute(
        &self,
        scope: &Scope<'_>,
        active: Option<&ActiveSandbox>,
        ending: &mut Ending,
    ) {
        let Scope {
            attempt,
            run,
            workspace,
            events,
            run_log,
            ..
        } = *scope;
        let run_id = run.id.as_str();
        // §15 "No sandbox": devbox provisioned on the host, once, before the first node.
        let devbox = match active {
            Some(_) => None,
            None => {
                let stage_root = std::env::temp_dir().join(format!("iterion-devbox-{run_id}"));
                match crate::sandbox::devbox::provision_host_devbox(
                    workspace,
                    attempt.run.file_path.parent(),
                    &stage_root,
                    &self.environment,
                    attempt.workflow.repo_devbox,
                )
                .await
                {
                    Ok(devbox) => Some(devbox),
                    Err(SetupError {
                        code,
                        message,
                        phase,
                    }) => {
                        ending.fail(code, message, &phase);
                        return;
                    }
                }
            }
        };
        if let Some(devbox) = &devbox {
            for line in &devbox.log {
                tracing::warn!("devbox: {line}");
                crate::records::sink::RunLogSink::line(
                    run_log,
                    crate::records::sink::LogLine {
                        node: String::new(),
                        stream: iterion_vocab::LogStream::System,
                        text: line.clone(),
                    },
                );
            }
            if let Some(event) = devbox.event.clone() {
                events.emit(Event::SandboxDevboxProvisioned(event)).await;
            }
        }
        let host_path = devbox.as_ref().and_then(|d| d.path.clone());
        self.execute_on(scope, active, host_path, ending).await;
        if let Some(devbox) = &devbox {
            devbox.cleanup().await;
        }
    }

    async fn execute_on(
        &self,
        scope: &Scope<'_>,
        active: Option<&ActiveSandbox>,
        host_path: Option<crate::sandbox::host::HostPath>,
        ending: &mut Ending,
    ) {
        let Scope {
            attempt,
            run,
            workspace,
            events,
            run_log,
            observer,
            stop,
            stop_code,
            ..
        } = *scope;
        let run_id = run.id.as_str();
        let host;
        let sandbox: &dyn SandboxRun = match active {
            Some(active) => active.run.as_ref(),
            None => {
                match crate::sandbox::host::host_sandbox_with_path(
                    run_id,
                    workspace,
                    host_path.as_ref(),
                )
                .await
                {
                    Ok(run) => {
                        host = run;
                        host.as_ref()
                    }
                    Err(error) => {
                        ending.fail(
                            FailureCode::SandboxSetupFailed,
                            error.to_string(),
                            PHASE_SANDBOX_SETUP,
                        );
                        return;
                    }
                }
            }
        };
        let sink: Arc<dyn EventSink> = Arc::new(events.clone());
        let place = match active {
            Some(active) => crate::executor::agent::env::AgentPlace::Runner(Arc::new(
                crate::executor::agent::launcher::Launcher::new(
                    Arc::clone(&active.run),
                    active.engine_bin,
                    Arc::new(run_log.clone()),
                    crate::sandbox::gateway::placeholders(&attempt.routes),
                ),
            )),
            None => crate::executor::agent::env::AgentPlace::InProcess {
                workspace: workspace.to_owned(),
                path: host_path.clone(),
            },
        };
        // The ask-user channel of delegate nodes: the sandbox's listener, or on the host one in
        // a fresh 0700 dir, with the iterion binary the CLI runs as its MCP server.
        let host_listener = match active {
            None if crate::sandbox::ask_user::wanted(&attempt.workflow) => {
                let tmp = self
                    .environment
                    .get_os("TMPDIR")
                    .filter(|t| !t.is_empty())
                    .map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
                match crate::sandbox::ask_user::AskUserListener::bind_on_host(
                    &tmp,
                    run_log.redactor(),
                    Arc::new(run_log.clone()),
                )
                .await
                {
                    Ok(listener) => Some(Arc::new(listener)),
                    Err(error) => {
                        ending.fail(
                            FailureCode::SandboxSetupFailed,
                            error.to_string(),
                            PHASE_SANDBOX_SETUP,
                        );
                        return;
                    }
                }
            }
            _ => None,
        };
        let ask_user =
            match (active, &host_listener) {
                (Some(active), _) => active.ask_user.as_ref().map(|listener| {
                    crate::executor::agent::env::AskChannel {
                        listener: Arc::clone(listener),
                        command: active.engine_bin.to_owned(),
                    }
                }),
                (None, Some(listener)) => crate::sandbox::engine_binary::engine_binary_for_run(
                    self.engine_binary.as_deref(),
                    &self.environment,
                )
                .or_else(|| std::env::current_exe().ok())
                .map(|bin| crate::executor::agent::env::AskChannel {
                    listener: Arc::clone(listener),
                    command: bin.to_string_lossy().into_owned(),
                }),
                (None, None) => None,
            };
        let mut execution = Execution::new(&attempt.workflow, run_id, sandbox, sink)
            .vars(attempt.vars.clone())
            .environment(self.environment.clone())
            .secrets(attempt.secrets.clone())
            .redactor(Arc::clone(run_log.redactor()))
            .run_log(Arc::new(run_log.clone()))
            .cancel_token(stop.clone())
            .agents(crate::executor::agent::env::AgentEnv {
                routes: attempt.routes.clone(),
                place,
                operator: self.operator.clone(),
                answer: attempt.answer.clone(),
                delegates: Default::default(),
                // Ok here: a login that failed to load ended the attempt before the sandbox.
                forfaits: scope.forfaits.clone().unwrap_or_default(),
                ask_user,
            });
        if let Some(checkpoint) = attempt.checkpoint.clone() {
            execution = execution.resume_from(checkpoint);
        }
        {
            // The copies, at the path the nodes see them: bound in a sandbox, on the host else.
            let dir = crate::sandbox::attachments::run_dir(&self.iterion_home, run_id);
            let records = crate::sandbox::attachments::load(&dir);
            let base = match active {
                Some(_) => crate::sandbox::attachments::CONTAINER_DIR.to_owned(),
                None => dir.to_string_lossy().into_owned(),
            };
            execution = execution.attachments(crate::sandbox::attachments::scope(&records, &base));
        }
        let children = StoreChildRuns::new(
            self,
            attempt,
            run.clone(),
            ChildContext {
                observer: Arc::clone(observer),
                // A child's lost lease is the parent's: the whole tree stops, resumable.
                on_lost: scope.lost.clone(),
                interrupt: scope.interrupt_children.clone(),
                workspace: workspace.to_owned(),
                redactor: Arc::clone(run_log.redactor()),
            },
        );
        execution = execution.child_runs(
            Arc::new(children),
            active.map(ActiveSandbox::shared).unwrap_or_default(),
        );
        let ran = execution.run().await;
        if let Some(listener) = &host_listener {
            listener.shutdown().await;
        }
        match ran {
            Ok(report) => {
                let mut outcome = report.outcome;
                if outcome.failure_code == Some(FailureCode::Cancelled) && stop.is_cancelled() {
                    let code = stop_code();
                    outcome.failure_code = Some(code);
                    outcome.status = code.status().unwrap_or(OutcomeStatus::Cancelled);
                }
                if let (Some(active), Some(FailureCode::ExecutionFailed)) =
                    (active, outcome.failure_code)
                    && !sandbox_alive(active).await
                {
                    let message = outcome.message.take().unwrap_or_default();
                    outcome.message = Some(format!(
                        "{message}\nthe sandbox container is no longer running (killed or removed outside iterion)"
                    ));
                }
                ending.finish(outcome, report.checkpoint);
            }
            Err(error) => {
                let code =
                    FailureCode::from_str_exact(error.code()).unwrap_or(FailureCode::ResumeInvalid);
                ending.fail(code, error.to_string(), PHASE_SANDBOX_SETUP);
            }
        }
    }
}

struct ObserverProgress(Arc<dyn RunObserver>);

impl Progress for ObserverProgress {
    fn pull(&self, update: &PullProgress) {
        self.0.pull(update);
    }
}

/// Whether the sandbox still answers an exec (asked only after a node failed, so that a
/// container killed from outside is named as the cause).
async fn sandbox_alive(active: &ActiveSandbox) -> bool {
    let argv = ["true".to_owned()];
    let probe = active.run.exec(&argv, iterion_sandbox::ExecOpts::default());
    // Alive means the probe really ran: an exec into a container whose PID 1 was just killed can
    // still be created and then report a non-zero status while the engine catches up.
    matches!(
        tokio::time::timeout(std::time::Duration::from_secs(5), probe).await,
        Ok(Ok(result)) if result.exit_code == 0
    )
}

/// The resolved secrets with their `hosts`, for the egress proxy's rewriter (SANDBOX.md §6.10);
/// unresolved optional ones are not delivered.
fn egress_secrets(wf: &Workflow, secrets: &[ResolvedSecret]) -> Vec<EgressSecret> {
    wf.secrets
        .iter()
        .filter_map(|declared| {
            let resolved = secrets.iter().find(|s| s.name() == declared.name)?;
            Some(EgressSecret {
                name: declared.name.clone(),
                value: resolved.expose_value().to_owned(),
                hosts: declared.hosts.clone(),
                file: matches!(declared.delivery, iterion_dsl::ir::Delivery::File { .. }),
            })
        })
        .collect()
}

/// The resolved `as: file` secrets as mounts (SANDBOX.md §8.7); unresolved optional ones are not
/// delivered.
fn file_secret_mounts(
    wf: &Workflow,
    secrets: &[ResolvedSecret],
) -> Vec<iterion_sandbox::SecretFileMount> {
    wf.secrets
        .iter()
        .filter_map(|declared| {
            let iterion_dsl::ir::Delivery::File { mount_path, env } = &declared.delivery else {
                return None;
            };
            let resolved = secrets.iter().find(|s| s.name() == declared.name)?;
            Some(iterion_sandbox::SecretFileMount {
                name: declared.name.clone(),
                mount_path: mount_path.clone(),
                env: env.clone(),
                value: iterion_sandbox::SecretBytes::from(resolved.expose_value()),
            })
        })
        .collect()
}

fn stop_message(code: FailureCode) -> String {
    match code {
        FailureCode::Interrupted => {
            "the run was interrupted; `iterion resume` continues it".to_owned()
        }
        _ => "the run was cancelled".to_owned(),
    }
}

/// Where one attempt records: the lease it keeps, its redacted store, events and run log.
struct Recording {
    store: Arc<dyn Store>,
    events: StoreEvents,
    run_log: StoreRunLog,
    writer: LogWriter,
    keeper: LeaseKeeper,
    redactor: Arc<Redactor>,
    /// Cancelled when the lease is lost: the run stops as interrupted.
    lost: CancellationToken,
}

impl Recording {
    /// Flushes the run log and releases the lease.
    async fn close(self) {
        drop(self.run_log);
        self.writer.finish().await;
        self.keeper.release().await;
    }
}

/// How an attempt stops: `stop` ends the executor when the caller cancels or interrupts, or the
/// lease is lost; `interrupt_children` fires before it in the last two cases, so the subbot
/// children it launched end INTERRUPTED with it, not CANCELLED.
struct Stopping {
    stop: CancellationToken,
    interrupt_children: CancellationToken,
    interrupted: Arc<AtomicBool>,
    interrupt: CancellationToken,
    abandon: CancellationToken,
}

impl Stopping {
    /// Watches `control`, `lost` and `requested` (a cancel request recorded in the store) until
    /// `stop` is cancelled.
    fn watch(
        control: &RunControl,
        lost: &CancellationToken,
        requested: &CancellationToken,
    ) -> Stopping {
        let stop = CancellationToken::new();
        let interrupt_children = CancellationToken::new();
        let interrupted = Arc::new(AtomicBool::new(false));
        let (watched, control_w, lost) = (stop.clone(), control.clone(), lost.clone());
        let requested = requested.clone();
        let children = interrupt_children.clone();
        let flag = Arc::clone(&interrupted);
        tokio::spawn(async move {
            tokio::select! {
                () = control_w.cancel.cancelled() => {}
                () = control_w.abandon.cancelled() => {}
                () = requested.cancelled() => {}
                () = control_w.interrupt.cancelled() => flag.store(true, Ordering::SeqCst),
                () = lost.cancelled() => flag.store(true, Ordering::SeqCst),
                () = watched.cancelled() => return,
            }
            if flag.load(Ordering::SeqCst) {
                children.cancel();
            }
            watched.cancel();
        });
        Stopping {
            stop,
            interrupt_children,
            interrupted,
            interrupt: control.interrupt.clone(),
            abandon: control.abandon.clone(),
        }
    }

    /// Why the attempt stopped: `CANCELLED` once an abandon came (the operator's second Ctrl-C,
    /// even after an interrupt), else `INTERRUPTED` (an interrupt, or the lease lost), else
    /// `CANCELLED`.
    fn code(&self) -> FailureCode {
        if self.abandon.is_cancelled() {
            FailureCode::Cancelled
        } else if self.interrupted.load(Ordering::SeqCst) || self.interrupt.is_cancelled() {
            FailureCode::Interrupted
        } else {
            FailureCode::Cancelled
        }
    }
}

/// What admission decided on, and decided: the run as persisted, the refusal (the run's prior
/// failure on a resume, else `LAUNCH_FAILED` with the reason), the resolution and the factory.
struct Admitted {
    run: Run,
    refusal: Option<(FailureCode, String)>,
    resolved: Resolved,
    factory: Factory,
    overlay: EnvOverlay,
    /// The launch directory's workspace root ([`crate::sandbox::workspace::sandbox_root_of`]).
    root: PathBuf,
}

impl Admitted {
    /// The resolution of a worktree run, whose repository root is the worktree at `workspace`.
    async fn resolve_in(
        &self,
        attempt: &Attempt,
        workspace: &std::path::Path,
        env: &iterion_vocab::Environment,
    ) -> Resolved {
        resolve(
            &attempt.workflow.sandbox,
            &attempt.settings,
            attempt.run.trust,
            crate::sandbox::workspace::repository_root_of(workspace, env)
                .await
                .as_deref(),
            &self.overlay,
            env,
        )
    }
}

/// Teardown of the workspace: a finished run's worktree is landed (the branch its changes went
/// to, when there were any), any other is kept (its path).
async fn land_worktree(
    worktree: Option<RunWorktree>,
    ending: &Ending,
    attempt: &Attempt,
) -> (Option<PathBuf>, Option<String>) {
    let Some(wt) = worktree else {
        return (None, None);
    };
    if ending.status() == OutcomeStatus::Finished {
        match wt
            .finish_done(&attempt.workflow.name, attempt.run.id.as_str())
            .await
        {
            Ok(crate::sandbox::worktree::WorktreeLanding::Branch { name, .. }) => {
                (None, Some(name))
            }
            Ok(crate::sandbox::worktree::WorktreeLanding::Unchanged) => (None, None),
            Err(error) => {
                tracing::warn!("landing the worktree: {error}");
                (None, None)
            }
        }
    } else {
        (Some(wt.keep()), None)
    }
}

/// What the sandbox and executor steps of one attempt share.
struct Scope<'a> {
    attempt: &'a Attempt,
    run: &'a Run,
    resolved: &'a Resolved,
    factory: &'a Factory,
    workspace: &'a std::path::Path,
    events: &'a StoreEvents,
    run_log: &'a StoreRunLog,
    observer: &'a Arc<dyn RunObserver>,
    stop: &'a CancellationToken,
    /// The run's lease was lost: it stops as interrupted (see `attempt`).
    lost: &'a CancellationToken,
    /// Cancelled before `stop` when the run is interrupted (see `attempt`).
    interrupt_children: &'a CancellationToken,
    stop_code: &'a (dyn Fn() -> FailureCode + Sync),
    /// The delegate nodes' subscription logins, or why one cannot be used.
    forfaits: &'a Result<crate::sandbox::forfait::Forfaits, String>,
}

/// How an attempt ended.
#[derive(Default)]
pub(crate) struct Ending {
    pub code: Option<FailureCode>,
    pub message: Option<String>,
    pub phase: Option<String>,
    pub outcome: Option<RunOutcome>,
    pub checkpoint: Option<Checkpoint>,
    pub output: Option<Value>,
}

impl Ending {
    fn fail(&mut self, code: FailureCode, message: String, phase: &str) {
        self.code = Some(code);
        self.message = Some(message);
        self.phase = Some(phase.to_owned());
    }

    fn finish(&mut self, outcome: RunOutcome, checkpoint: Checkpoint) {
        self.code = outcome.failure_code;
        self.message = outcome.message.clone();
        self.output = outcome.final_output.clone();
        self.outcome = Some(outcome);
        self.checkpoint = Some(checkpoint);
    }

    pub(crate) fn status(&self) -> OutcomeStatus {
        match (&self.outcome, self.code) {
            (Some(outcome), _) => outcome.status,
            (None, Some(code)) => code.status().unwrap_or(OutcomeStatus::Failed),
            (None, None) => OutcomeStatus::Finished,
        }
    }

    fn terminal_event(&self, duration_ms: u64) -> Event {
        if let Some(outcome) = &self.outcome {
            return outcome.terminal_event(duration_ms);
        }
        let message = self.message.clone().unwrap_or_default();
        let phase = self
            .phase
            .clone()
            .unwrap_or_else(|| PHASE_SANDBOX_SETUP.to_owned());
        match self.status() {
            OutcomeStatus::Cancelled => Event::RunCancelled(crate::records::events::RunCancelled {
                reason: message,
                phase,
            }),
            status => Event::RunFailed(RunFailed {
                error: message,
                phase,
                code: self.code,
                resumable: (status == OutcomeStatus::FailedResumable).then_some(true),
            }),
        }
    }
}

/// The final save, under compare-and-swap with reload-and-reapply (3 attempts).
async fn save_final(
    store: &dyn Store,
    run: &Run,
    ending: &Ending,
    envelope: &RunEnvelope,
    kept_worktree: Option<&PathBuf>,
) -> Result<(), EngineError> {
    let mut current = run.clone();
    for attempt in 1..=3 {
        let mut next = current.clone();
        next.status = store_status(ending.status());
        // A paused run keeps no failure: its question is in the `run_paused` event.
        let failed = ending.status() != OutcomeStatus::Paused;
        next.failure_code = ending
            .code
            .filter(|_| failed)
            .map(|c| c.as_str().to_owned());
        next.failure_message = ending.message.clone().filter(|_| failed);
        next.checkpoint = envelope.to_value();
        if let Some(checkpoint) = &envelope.executor {
            next.last_completed_node = checkpoint.last_completed_node.clone();
        }
        if let Some(path) = kept_worktree {
            next.worktree_path = Some(path.clone());
        }
        match store.save_run(&next, current.version).await {
            Err(iterion_store::Error::Conflict { .. }) if attempt < 3 => {
                if let Some(reloaded) = store.get_run(&run.id).await? {
                    current = reloaded;
                }
            }
            other => return other.map(|_| ()).map_err(EngineError::from),
        }
    }
    Ok(())
}
