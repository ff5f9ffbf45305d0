//! The seed's steps 5–19 for one run: [`resolve_and_start_sandbox`] — the one place where an
//! absent container runtime means *degrade* (auto) or *refuse* (inline) (SANDBOX.md §3.7,
//! invariant I1) — and [`ActiveSandbox::shutdown`], the teardown every outcome goes through.
//!
//! Order (SANDBOX.md §0.3): L3–L4 are [`resolve`] (pure, shared with admission); L5 ends an
//! inactive mode; L6 selects the driver and splits degrade from refuse; L8 is the mount plan
//! ([`mounts`]); L10 starts the per-run egress proxy when the policy is not `open` or TLS
//! inspection is on ([`egress`]); L11 is prepare → build → start → egress bridge →
//! `sandbox_started`; L14 settles by handing the run to the executor.
//!
//! Under a proxy the container has no network (`--network none`) and reaches the proxy's Unix
//! socket only through the egress bridge: `sandbox_started` says `proxy: true`,
//! `egress_enforced: true` (a driver without the bridged shape reports `null`: nothing stops its
//! processes from ignoring the proxy). An `open` workflow without inspection gets the engine's
//! default network, no proxy and `egress_enforced: null`. Any failure after the proxy started
//! shuts it down, and teardown does too (the socket goes with it).

pub(crate) mod copy;
pub(crate) mod devbox;
mod egress;
mod finalize;
pub(crate) mod mounts;
pub(crate) mod registry;
pub(crate) mod resolve;
pub(crate) mod rundir;
mod scratch;

pub(crate) use scratch::scratch_not_portable;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use iterion_sandbox::{
    Driver, Error as SandboxError, Factory, Mode, NetworkMode, Progress, ProxyAttachment, RunInfo,
    RunLog, SandboxRun, Spec, Trust, resolve_network_policy, select_sandbox_driver,
};

use crate::events::Event;
use crate::failure::FailureCode;
use crate::sandbox_events::{
    SandboxBuildFailed, SandboxBuildFinished, SandboxBuildStarted, SandboxEnvDenied,
    SandboxNetworkDefaulted, SandboxSkipped, SandboxStarted,
};
use crate::sink::EventSink;

pub(crate) use egress::EgressSecret;
pub use resolve::SandboxSettings;
pub(crate) use resolve::{Resolved, resolve};
pub use rundir::{COPIES_DIR, STORE_MARKER, runtime_root};

/// The `phase` of a setup failure that is not one of §16.1's bounded phases.
pub const PHASE_SANDBOX_SETUP: &str = "sandbox setup";

/// A setup failure, classified (SANDBOX.md §16.4): the code decides the status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SetupError {
    pub code: FailureCode,
    pub message: String,
    pub phase: String,
}

impl SetupError {
    /// `SANDBOX_SETUP_FAILED` in phase `sandbox setup`.
    pub(crate) fn failed(message: String) -> SetupError {
        SetupError {
            code: FailureCode::SandboxSetupFailed,
            message,
            phase: PHASE_SANDBOX_SETUP.to_owned(),
        }
    }

    /// §16.4 rules 1–3 (the context is alive here; cancellation is the caller's): a phase
    /// timeout is `SANDBOX_SETUP_TIMEOUT` in that phase, a capacity error `SANDBOX_CAPACITY`,
    /// anything else the error's own code.
    pub(crate) fn classify(error: &SandboxError) -> SetupError {
        let root = match error {
            SandboxError::CleanupFailed { error, .. } => error.as_ref(),
            other => other.root(),
        };
        let (code, phase) = match root {
            SandboxError::PhaseTimeout { phase, .. } => {
                (FailureCode::SandboxSetupTimeout, phase.label().to_owned())
            }
            SandboxError::Capacity { .. } => {
                (FailureCode::SandboxCapacity, PHASE_SANDBOX_SETUP.to_owned())
            }
            other => (
                FailureCode::from_str_exact(other.code())
                    .unwrap_or(FailureCode::SandboxSetupFailed),
                PHASE_SANDBOX_SETUP.to_owned(),
            ),
        };
        let mut message = error.to_string();
        if let (SandboxError::PhaseTimeout { phase, .. }, Some(var)) = (root, root_phase_var(root))
        {
            message.push_str(&format!("; raise {var} if {} needs longer", phase.label()));
        }
        SetupError {
            code,
            message,
            phase,
        }
    }
}

fn root_phase_var(error: &SandboxError) -> Option<&'static str> {
    match error {
        SandboxError::PhaseTimeout { phase, .. } => phase.env_var(),
        _ => None,
    }
}

/// What L5–L14 came to.
pub(crate) enum SandboxOutcome {
    /// No container: an explicit opt-out or nothing configured (silent), or a degraded auto
    /// (`sandbox_skipped` emitted). Tools run on the host.
    Unsandboxed,
    /// A running sandbox; tools exec in it.
    Started(ActiveSandbox),
    /// No container, and that is final for this run: an inline refusal (after its
    /// `sandbox_skipped`), or a setup failure (nothing left behind).
    Failed(SetupError),
}

/// Everything [`resolve_and_start_sandbox`] needs about the run.
pub(crate) struct StartCtx<'a> {
    pub resolved: &'a Resolved,
    pub factory: &'a Factory,
    pub run_id: &'a str,
    pub store_id: &'a str,
    pub workflow: &'a str,
    pub trust: Trust,
    pub max_duration_seconds: u64,
    pub mount_inputs: mounts::MountInputs,
    pub file_secrets: bool,
    pub events: &'a dyn EventSink,
    /// The same sink, owned: the proxy's `network_blocked` events arrive from its own task.
    pub event_sink: Arc<dyn EventSink>,
    /// The resolved secrets with their hosts, for the proxy's rewriter (§6.10).
    pub egress_secrets: Vec<EgressSecret>,
    /// The agent nodes' model provider hosts, implicitly allowed under an allowlist (§13.1b).
    pub model_hosts: Vec<String>,
    pub run_log: Arc<dyn RunLog>,
    /// The run's redactor: the proxy token is added to it once minted (issue 15 item 8).
    pub redactor: Arc<crate::secrets::Redactor>,
    pub progress: &'a dyn Progress,
}

/// A running sandbox and what tears it down.
pub(crate) struct ActiveSandbox {
    pub run: Arc<dyn SandboxRun>,
    /// `$ITERION_ENGINE_BIN` in the container (§8.4): the bound binary, or the image's own on
    /// drivers without host binds. The claw runner is exec'd from it (§13.1).
    pub engine_bin: &'static str,
    run_dir: PathBuf,
    proxy: Option<Box<egress::EngineProxy>>,
    bridge: Option<egress::EgressBridge>,
    run_log: Arc<dyn RunLog>,
    /// The container-local scratch dir to bank at teardown (§8.3), and where to say so.
    scratch: Option<Box<(scratch::ScratchBank, Arc<dyn EventSink>)>>,
    /// A sandbox without host binds (kubernetes, §5.11): what is copied back at teardown.
    copy_back: Option<Box<CopyBack>>,
    /// The container's workspace folder (the spec's, after the mount plan).
    workspace_folder: Option<String>,
    /// An untrusted run's copy, landed back as a branch and a patch at teardown (issue 15).
    landing: Option<Box<copy::UntrustedLanding>>,
}

/// Where a sandbox without host binds is copied back to at teardown (SANDBOX.md §5.11), and
/// where a failure is reported.
struct CopyBack {
    /// The host workspace: the export's destination.
    workspace: PathBuf,
    /// The host run-files dir: the drain's destination.
    run_files: PathBuf,
    events: Arc<dyn EventSink>,
}

impl ActiveSandbox {
    /// What this sandbox hands the subbot children that adopt it (SANDBOX.md §14).
    pub(crate) fn shared(&self) -> crate::subbot::SharedSandbox {
        crate::subbot::SharedSandbox {
            workspace_folder: self.workspace_folder.clone(),
            // §14 rule 2: the run's scratch lives in the container.
            scratch_in_container: self.scratch.is_some(),
        }
    }

    /// L16: removes the container (bounded by the cleanup budget) and the per-run host dir.
    /// Errors are logged: teardown is best-effort, and the reaper collects what it leaves.
    pub(crate) async fn shutdown(self) {
        if let Some(bridge) = self.bridge {
            bridge.stop();
        }
        // L15: bank the container-local scratch before the container goes.
        if let Some(pair) = self.scratch {
            let (bank, events) = *pair;
            let banked = scratch::bank(self.run.as_ref(), &bank).await;
            events.emit(Event::SandboxScratchBanked(banked)).await;
        }
        // A copy-based sandbox: log its HEAD, export its workspace back, then drain its run
        // files (§5.11), before the pod goes. Each is bounded by the driver (30 s, 5 min, 2 min);
        // a failure is reported, not fatal.
        if let Some(copy_back) = self.copy_back {
            export_copy_based(
                self.run.as_ref(),
                &copy_back.workspace,
                self.run_log.as_ref(),
                copy_back.events.as_ref(),
            )
            .await;
            drain_run_files(
                self.run.as_ref(),
                &copy_back.run_files,
                self.run_log.as_ref(),
                copy_back.events.as_ref(),
            )
            .await;
        }
        match tokio::time::timeout(iterion_sandbox::CLEANUP_TIMEOUT, self.run.cleanup()).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::warn!("sandbox cleanup: {error}"),
            Err(_) => tracing::warn!(
                "sandbox cleanup did not finish within {:?}; the reaper will remove it",
                iterion_sandbox::CLEANUP_TIMEOUT
            ),
        }
        if let Some(proxy) = self.proxy {
            proxy.shutdown(self.run_log.as_ref()).await;
        }
        // The container is gone: nothing writes the copy any more while it is read.
        if let Some(landing) = self.landing {
            landing.land(self.run_log.as_ref()).await;
        }
        rundir::remove(&self.run_dir).await;
    }
}

/// The teardown of a copy-based sandbox (SANDBOX.md §5.11): the workspace's HEAD to the run log,
/// then the workspace exported into the host `workspace`; a failed export is logged and emitted
/// as `sandbox_workspace_export_failed`.
async fn export_copy_based(
    run: &dyn SandboxRun,
    workspace: &std::path::Path,
    run_log: &dyn RunLog,
    events: &dyn EventSink,
) {
    if let Some(capturer) = run.workspace_head_capturer() {
        match capturer.capture_workspace_head().await {
            Ok(Some(head)) => run_log.line(
                iterion_sandbox::LogLevel::Info,
                &format!("sandbox: workspace HEAD {head}"),
            ),
            Ok(None) => {}
            Err(error) => run_log.line(
                iterion_sandbox::LogLevel::Warn,
                &format!("sandbox: capturing the workspace HEAD: {error}"),
            ),
        }
    }
    let Some(exporter) = run.workspace_exporter() else {
        return;
    };
    if let Err(error) = exporter.export_workspace(workspace).await {
        run_log.line(
            iterion_sandbox::LogLevel::Warn,
            &format!("sandbox: exporting the workspace: {error}"),
        );
        events
            .emit(Event::SandboxWorkspaceExportFailed(
                crate::sandbox_events::SandboxWorkspaceExportFailed {
                    driver: run.driver().to_owned(),
                    error: error.to_string(),
                },
            ))
            .await;
    }
}

/// The run-files drain of a sandbox without host binds (SANDBOX.md §5.11): the sandbox's
/// [`mounts::ARTIFACT_FILES_TARGET`] into the host run-files dir, screened member by member by the
/// driver. What was drained goes to the run log; a declined member or a failure is
/// `sandbox_runfiles_drain_failed`, naming the declined members and whether the host dir kept an
/// earlier attempt's files (`stale`).
async fn drain_run_files(
    run: &dyn SandboxRun,
    run_files: &std::path::Path,
    run_log: &dyn RunLog,
    events: &dyn EventSink,
) {
    let Some(drainer) = run.run_files_drainer() else {
        return;
    };
    let report = drainer
        .drain_run_files(mounts::ARTIFACT_FILES_TARGET, run_files)
        .await;
    if report.found {
        run_log.line(
            iterion_sandbox::LogLevel::Info,
            &format!(
                "sandbox: drained {} run files ({} bytes) from {} into {}",
                report.files,
                report.bytes,
                mounts::ARTIFACT_FILES_TARGET,
                run_files.display()
            ),
        );
    }
    let Some(reason) = report.reason() else {
        return;
    };
    for member in &report.declined {
        run_log.line(
            iterion_sandbox::LogLevel::Warn,
            &format!(
                "sandbox: run file {:?} not drained ({})",
                member.name,
                member.why.as_str()
            ),
        );
    }
    if let Some(error) = &report.error {
        run_log.line(
            iterion_sandbox::LogLevel::Warn,
            &format!("sandbox: draining the run files: {}", error.message),
        );
    }
    events
        .emit(Event::SandboxRunfilesDrainFailed(
            crate::sandbox_events::SandboxRunfilesDrainFailed {
                reason: drain_failure(reason),
                declined: report.declined.iter().map(|m| m.name.clone()).collect(),
                stale: report.stale,
                error: report.error.map(|e| e.message),
            },
        ))
        .await;
}

/// The event's reason for a drain's.
fn drain_failure(reason: iterion_sandbox::DrainReason) -> crate::sandbox_events::DrainFailure {
    use crate::sandbox_events::DrainFailure;
    use iterion_sandbox::DrainReason;
    match reason {
        DrainReason::UnsafeMembers => DrainFailure::UnsafeMembers,
        DrainReason::ArchiveTooLarge => DrainFailure::ArchiveTooLarge,
        DrainReason::WriteFailed => DrainFailure::WriteFailed,
        DrainReason::ExecFailed => DrainFailure::ExecFailed,
    }
}

/// L5–L14: resolves, and when the mode is active selects a driver, plans the mounts, prepares,
/// builds, starts, and emits `sandbox_started`. The one place where degrade (auto) and refuse
/// (inline) are decided.
pub(crate) async fn resolve_and_start_sandbox(ctx: StartCtx<'_>) -> SandboxOutcome {
    let resolved = ctx.resolved;
    // L5: an inactive mode ends here, silently.
    if !resolved.mode.is_active() {
        return SandboxOutcome::Unsandboxed;
    }
    // L4's facts: the resolution's run-log lines, then its events, then a refusal ends the path
    // (a hostile devcontainer: no fallback, nothing starts).
    for line in &resolved.run_log {
        ctx.run_log
            .line(iterion_sandbox::LogLevel::Warn, &format!("sandbox: {line}"));
    }
    if let Some(refusal) = &resolved.refusal {
        return SandboxOutcome::Failed(SetupError::failed(refusal.clone()));
    }
    if !resolved.denied_env.is_empty() {
        ctx.events
            .emit(Event::SandboxEnvDenied(SandboxEnvDenied {
                keys: resolved.denied_env.clone(),
                source: resolved.label.clone(),
                run_id: ctx.run_id.to_owned(),
            }))
            .await;
    }
    if resolved.repo_network_defaulted {
        ctx.events
            .emit(Event::SandboxNetworkDefaulted(
                SandboxNetworkDefaulted::new(&resolved.label, ctx.run_id),
            ))
            .await;
    }
    let Some(spec) = resolved.spec.clone() else {
        // auto without a repository root degrades visibly, whatever tier spoke.
        let reason = resolved.skip_reason.clone().unwrap_or_default();
        ctx.events
            .emit(Event::SandboxSkipped(SandboxSkipped::degrade(
                &resolved.label,
                &reason,
                ctx.file_secrets,
            )))
            .await;
        return SandboxOutcome::Unsandboxed;
    };
    // L6: the driver, and the degrade-or-refuse split.
    let driver =
        match select_sandbox_driver(Some(&spec), Arc::clone(&ctx.run_log), ctx.factory).await {
            Ok(driver) => driver,
            Err(error) if error.is_driver_unavailable() => {
                let reason = error.obstacle();
                return match resolved.mode {
                    Mode::Auto => {
                        ctx.events
                            .emit(Event::SandboxSkipped(SandboxSkipped::degrade(
                                &resolved.label,
                                &reason,
                                ctx.file_secrets,
                            )))
                            .await;
                        SandboxOutcome::Unsandboxed
                    }
                    Mode::Inline | Mode::None | Mode::Inherit => {
                        ctx.events
                            .emit(Event::SandboxSkipped(SandboxSkipped::refusal(
                                &resolved.label,
                                &reason,
                            )))
                            .await;
                        let hint = error.hint().unwrap_or_default();
                        SandboxOutcome::Failed(SetupError {
                            code: FailureCode::SandboxDriverUnavailable,
                            message: format!(
                                "{reason}; {hint}, or pass --sandbox none to run on the host"
                            ),
                            phase: PHASE_SANDBOX_SETUP.to_owned(),
                        })
                    }
                };
            }
            Err(error) => return SandboxOutcome::Failed(SetupError::classify(&error)),
        };
    match start(&ctx, spec, driver.as_ref()).await {
        Ok(active) => SandboxOutcome::Started(active),
        Err(error) => SandboxOutcome::Failed(error),
    }
}

/// L8–L11 on a selected driver.
async fn start(
    ctx: &StartCtx<'_>,
    mut spec: Spec,
    driver: &dyn Driver,
) -> Result<ActiveSandbox, SetupError> {
    let resolved = ctx.resolved;
    let mut policy = resolve_network_policy(&spec, resolved.network_origin());
    // §13.1b: the model providers' hosts are the last rules of an allowlist, so the runner
    // reaches its model whatever the list names; `network_source` says so.
    let mut network_source = policy.source.label().to_owned();
    if policy.mode == NetworkMode::Allowlist {
        let added: Vec<&String> = ctx
            .model_hosts
            .iter()
            .filter(|h| !policy.rules.contains(h))
            .collect();
        if !added.is_empty() {
            let names: Vec<&str> = added.iter().map(|h| h.as_str()).collect();
            network_source = format!(
                "{network_source} + model provider hosts ({})",
                names.join(", ")
            );
            policy.rules.extend(added.into_iter().cloned());
        }
    }
    if let Some(warning) = policy.warning() {
        ctx.run_log.line(
            iterion_sandbox::LogLevel::Warn,
            &format!("sandbox: {warning}"),
        );
    }
    let closed_network = policy.mode != NetworkMode::Open;
    // Issue 15 item 16: a trusted build runs with the engine's default network, which the
    // run's proxy does not police; under any policy but `open` it is refused, before anything
    // is made. (An untrusted build runs with network none and stays allowed.)
    if spec.build.is_some() && closed_network && ctx.trust == Trust::Trusted {
        return Err(SetupError::classify(&SandboxError::BuildNeedsOpenNetwork {
            mode: policy.mode.as_str().to_owned(),
        }));
    }
    // L8: the mount and env plan. An untrusted sandbox runs as a non-root uid (issue 15 item 4),
    // which owns its copy of the workspace.
    let mut inputs = ctx.mount_inputs.clone();
    inputs.host_binds = driver.capabilities().supports_host_bind_mounts;
    inputs.post_create = driver.capabilities().supports_post_create;
    let copy_owner = match ctx.trust {
        Trust::Untrusted => copy::untrusted_user(&mut spec),
        Trust::Trusted => None,
    };
    // Issue 15 item 2: an untrusted run never sees the host checkout, only a copy under the
    // root-only runtime root (a driver without host binds copies it in itself and exports into
    // it).
    let landing = match ctx.trust {
        Trust::Untrusted => Some(Box::new(
            copy::prepare(ctx, &mut spec, inputs.host_binds, copy_owner).await?,
        )),
        Trust::Trusted => None,
    };
    inputs.untrusted_copy = landing.as_ref().map(|l| l.dir.clone());
    let plan = match mounts::plan_mounts(&mut spec, &inputs).await {
        Ok(plan) => plan,
        Err(error) => {
            copy::discard(landing).await;
            return Err(error);
        }
    };
    for event in plan.events {
        ctx.events.emit(event).await;
    }
    // M12: what a driver without host binds cannot honour goes, with the promises it made.
    if let Some(dropped) =
        finalize::finalize_mounts_for_driver(&mut spec, inputs.host_binds, driver.name())
    {
        ctx.events
            .emit(Event::SandboxHostBindsDropped(dropped))
            .await;
    }
    let run_dir = match rundir::create(ctx.run_id, ctx.store_id, closed_network).await {
        Ok(dir) => dir,
        Err(error) => {
            copy::discard(landing).await;
            return Err(error);
        }
    };
    let workspace_path = match &landing {
        Some(landing) => landing.copy.clone(),
        None => ctx.mount_inputs.workspace.clone(),
    };
    // L10: the proxy, listening from here on; every later failure shuts it down.
    let proxy = match egress::start_network_proxy(
        &egress::ProxyRequest {
            policy: &policy,
            run_id: ctx.run_id,
            untrusted: ctx.trust == Trust::Untrusted,
            addresses: match iterion_sandbox::proxy_addresses_for_driver(driver, &run_dir) {
                Ok(addresses) => addresses,
                Err(error) => {
                    rundir::remove(&run_dir).await;
                    copy::discard(landing).await;
                    return Err(SetupError::classify(&error));
                }
            },
            secrets: &ctx.egress_secrets,
            tls_capable: driver.capabilities().supports_tls_inspection,
            max_duration_seconds: ctx.max_duration_seconds,
            redactor: &ctx.redactor,
        },
        Arc::clone(&ctx.event_sink),
        ctx.run_log.as_ref(),
    )
    .await
    {
        Ok(proxy) => proxy,
        Err(error) => {
            rundir::remove(&run_dir).await;
            copy::discard(landing).await;
            return Err(error);
        }
    };
    let workspace_folder = spec.workspace_folder.clone();
    let result = start_in(ctx, spec, driver, &run_dir, &workspace_path, proxy.as_ref()).await;
    match result {
        Ok(run) => {
            if let Some(scratch) = &plan.scratch_in_container {
                make_container_scratch(run.0.as_ref(), scratch, ctx.run_log.as_ref()).await;
            }
            let scratch_bank = plan.scratch_in_container.clone().map(|scratch| {
                scratch::ScratchBank::new(
                    scratch,
                    &ctx.mount_inputs.iterion_home,
                    ctx.mount_inputs.root_run_id(),
                )
            });
            let started = SandboxStarted {
                driver: driver.name().to_owned(),
                mode: resolved.mode.as_str().to_owned(),
                source: resolved.label.clone(),
                image: run.1,
                sandbox_id: run.0.id().to_owned(),
                has_post_create: resolved
                    .spec
                    .as_ref()
                    .and_then(|s| s.post_create.as_deref())
                    .is_some_and(|s| !s.trim().is_empty()),
                network_mode: policy.mode.as_str().to_owned(),
                network_source,
                proxy: proxy.is_some(),
                tls_inspection: proxy
                    .as_ref()
                    .is_some_and(egress::EngineProxy::tls_inspection),
                // Enforced when the container's only route is the bridge (`--network none`); a
                // driver that cannot take that shape reports null.
                egress_enforced: match &proxy {
                    Some(p) if p.bridged => Some(true),
                    Some(_) => run.0.egress_enforced(),
                    None => None,
                },
                scheduling: None,
            };
            ctx.events.emit(Event::SandboxStarted(started)).await;
            // L12: a bank left by an earlier attempt of this run (a resume) comes back.
            if let Some(bank) = &scratch_bank
                && let Some(restored) = scratch::restore(run.0.as_ref(), bank).await
            {
                ctx.events
                    .emit(Event::SandboxScratchRestored(restored))
                    .await;
            }
            let copy_back =
                run.0.workspace_exporter().is_some() || run.0.run_files_drainer().is_some();
            Ok(ActiveSandbox {
                run: run.0,
                engine_bin: if inputs.host_binds {
                    mounts::ENGINE_BIN_TARGET
                } else {
                    mounts::IMAGE_ENGINE_BIN
                },
                run_dir,
                proxy: proxy.map(Box::new),
                bridge: run.2,
                run_log: Arc::clone(&ctx.run_log),
                scratch: scratch_bank.map(|bank| Box::new((bank, Arc::clone(&ctx.event_sink)))),
                copy_back: copy_back.then(|| {
                    Box::new(CopyBack {
                        // An untrusted export goes into the copy, never into the checkout.
                        workspace: landing.as_ref().map_or_else(
                            || ctx.mount_inputs.workspace.clone(),
                            |l| l.result.clone(),
                        ),
                        run_files: mounts::run_files_dir(
                            &ctx.mount_inputs.iterion_home,
                            &ctx.mount_inputs.run_id,
                        ),
                        events: Arc::clone(&ctx.event_sink),
                    })
                }),
                workspace_folder,
                landing,
            })
        }
        Err(error) => {
            if let Some(proxy) = proxy {
                proxy.shutdown(ctx.run_log.as_ref()).await;
            }
            rundir::remove(&run_dir).await;
            copy::discard(landing).await;
            Err(error)
        }
    }
}

/// §8.3: the container-local scratch dir, made after Start (world-writable and sticky, like
/// the bound one). A failure is a warning: only the nodes that use the scratch dir need it.
async fn make_container_scratch(run: &dyn SandboxRun, scratch: &str, run_log: &dyn RunLog) {
    let argv: Vec<String> = ["mkdir", "-p", "-m", "1777", scratch]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let failure = match run.exec(&argv, iterion_sandbox::ExecOpts::default()).await {
        Ok(result) if result.exit_code == 0 => return,
        Ok(result) => format!(
            "exit {}: {}",
            result.exit_code,
            String::from_utf8_lossy(result.stderr.as_deref().unwrap_or_default()).trim()
        ),
        Err(error) => error.to_string(),
    };
    run_log.line(
        iterion_sandbox::LogLevel::Warn,
        &format!("sandbox: cannot create the scratch dir {scratch} in the container ({failure})"),
    );
}

/// The started run, its image, and its egress bridge when a proxy is attached.
type Started = (Arc<dyn SandboxRun>, String, Option<egress::EgressBridge>);

/// L11: prepare → build → start → egress bridge. Returns the run, the image it runs and the
/// bridge.
async fn start_in(
    ctx: &StartCtx<'_>,
    spec: Spec,
    driver: &dyn Driver,
    run_dir: &std::path::Path,
    workspace_path: &std::path::Path,
    proxy: Option<&egress::EngineProxy>,
) -> Result<Started, SetupError> {
    let mut info = RunInfo::new(ctx.run_id, ctx.store_id, workspace_path, run_dir);
    info.friendly_name = ctx.workflow.to_owned();
    info.trust = ctx.trust;
    info.mount_scope = ctx.mount_inputs.mount_scope();
    if workspace_path != ctx.mount_inputs.workspace {
        info.mount_scope.engine_copy = Some(workspace_path.to_owned());
    }
    info.max_duration_seconds = ctx.max_duration_seconds;
    if let Some(proxy) = proxy {
        info.proxy = Some(ProxyAttachment {
            endpoint: proxy.endpoint.clone(),
            host_socket: proxy
                .bridged
                .then(|| run_dir.join("net").join("proxy.sock")),
            port: proxy.port,
        });
        info.proxy_ca_pem = proxy.ca_pem();
    }
    let prepared = driver
        .prepare(&spec, ctx.progress)
        .await
        .map_err(|error| prepare_error(ctx.resolved, &error))?;
    let prepared = match (&prepared.spec.build, driver.builder()) {
        (Some(build), Some(builder)) => {
            let context = build.context.clone().unwrap_or_else(|| {
                std::path::Path::new(&build.dockerfile)
                    .parent()
                    .map(|p| p.to_string_lossy().into_owned())
                    .filter(|p| !p.is_empty())
                    .unwrap_or_else(|| ".".to_owned())
            });
            ctx.events
                .emit(Event::SandboxBuildStarted(SandboxBuildStarted {
                    driver: driver.name().to_owned(),
                    dockerfile: build.dockerfile.clone(),
                    context,
                    network: if ctx.trust == Trust::Untrusted {
                        "none".to_owned()
                    } else {
                        "default".to_owned()
                    },
                }))
                .await;
            let began = Instant::now();
            match builder.build(prepared, &info).await {
                Ok(built) => {
                    ctx.events
                        .emit(Event::SandboxBuildFinished(SandboxBuildFinished {
                            driver: driver.name().to_owned(),
                            target: built.image.clone().unwrap_or_default(),
                            duration_ms: u64::try_from(began.elapsed().as_millis())
                                .unwrap_or(u64::MAX),
                        }))
                        .await;
                    built
                }
                Err(error) => {
                    ctx.events
                        .emit(Event::SandboxBuildFailed(SandboxBuildFailed::new(
                            driver.name(),
                            &error.to_string(),
                        )))
                        .await;
                    return Err(SetupError::classify(&error));
                }
            }
        }
        (Some(_), None) => {
            return Err(SetupError::failed(format!(
                "sandbox: the {} driver cannot build images; use image: instead of build:",
                driver.name()
            )));
        }
        (None, _) => prepared,
    };
    let mut prepared = prepared;
    let image = prepared.image.clone().unwrap_or_default();
    if let Some(planted) =
        devbox::plant_image_env(&mut prepared.spec, prepared.image_config.as_ref(), &image)
    {
        ctx.events
            .emit(Event::SandboxImageEnvPlanted(planted))
            .await;
    }
    let run: Arc<dyn SandboxRun> = driver
        .start(prepared, info)
        .await
        .map_err(|error| SetupError::classify(&error))?
        .into();
    let bridge = match proxy {
        None => None,
        Some(proxy) if !proxy.bridged => None,
        Some(_) => match egress::start_egress_bridge(Arc::clone(&run)).await {
            Ok(bridge) => Some(bridge),
            Err(error) => {
                if let Err(cleanup) =
                    tokio::time::timeout(iterion_sandbox::CLEANUP_TIMEOUT, run.cleanup())
                        .await
                        .unwrap_or(Ok(()))
                {
                    tracing::warn!("sandbox cleanup: {cleanup}");
                }
                return Err(error);
            }
        },
    };
    Ok((run, image, bridge))
}

/// A Prepare failure; when auto's default image could not be had, the message says how to get
/// one (issue 4, "The default image").
fn prepare_error(resolved: &Resolved, error: &SandboxError) -> SetupError {
    let mut failure = SetupError::classify(error);
    if let (Some(default), SandboxError::PullFailed { .. }) = (&resolved.default_image, error) {
        failure.message = format!(
            "{}\nThe default sandbox image {image} is neither present locally nor pullable ({source}). To get one:\n  - pull it: docker pull {image}\n  - or point --sandbox-default-image (or ITERION_SANDBOX_DEFAULT_IMAGE) at an image you have locally\n  - or build one with no registry: scripts/build-default-image.sh (it tags the image so that it is found by default)\n  - or run on the host: --sandbox none",
            failure.message,
            image = default.image,
            source = default.source.label(),
        );
    }
    failure
}
