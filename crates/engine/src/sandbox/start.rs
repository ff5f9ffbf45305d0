//! The seed's steps 5–14 for one run: [`resolve_and_start_sandbox`] — the one place where an
//! absent container runtime means *degrade* (auto) or *refuse* (inline) (SANDBOX.md §3.7,
//! invariant I1).
//!
//! Order (SANDBOX.md §0.3): L3–L4 are `resolve` (shared with admission); L5 ends an inactive
//! mode; L6 selects the driver and splits degrade from refuse; L8 is the mount plan (`mounts`);
//! L10 starts the per-run egress proxy when the policy is not `open` or TLS inspection is on
//! (`egress`); L11 is prepare → build → start → egress bridge → `sandbox_started`; L14 settles
//! by handing the run to the executor.

use std::sync::Arc;
use std::time::Instant;

use iterion_sandbox::{
    Driver, Error as SandboxError, Mode, NetworkMode, NetworkPolicy, ProxyAttachment, RunInfo,
    RunLog, SandboxRun, Spec, Trust, resolve_network_policy, select_sandbox_driver,
};
use iterion_vocab::FailureCode;

use crate::records::events::Event;
use crate::records::sandbox_events::{
    SandboxBuildFailed, SandboxBuildFinished, SandboxBuildStarted, SandboxEnvDenied,
    SandboxHostBindsDropped, SandboxLimitsNotApplied, SandboxNetworkDefaulted, SandboxSkipped,
    SandboxStarted,
};
use crate::sandbox::active::{ActiveSandbox, CopyBack};
use crate::sandbox::copy::UntrustedLanding;
use crate::sandbox::egress::{self};
use crate::sandbox::error::{PHASE_SANDBOX_SETUP, SetupError};
use crate::sandbox::resolve::Resolved;
use crate::sandbox::start_ctx::StartCtx;
use crate::sandbox::{
    ask_user, copy, devbox, exec_agent, finalize, mounts, readback, rundir, scratch,
};

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

/// What starting the sandbox on the selected driver will do, computed before anything is made:
/// the final spec (mounts, env, user, workspace folder), the egress policy, the untrusted copy's
/// place, the host dirs the binds need and the events the mount plan reports.
struct StartPlan {
    spec: Spec,
    policy: NetworkPolicy,
    network_source: String,
    closed_network: bool,
    inputs: mounts::MountInputs,
    /// The untrusted run's copy (`None` for a trusted run).
    copy: Option<PlannedCopy>,
    mounts: mounts::MountPlan,
    dropped: Option<SandboxHostBindsDropped>,
}

/// Where an untrusted run's copy goes and what its landing needs, and the uid:gid that owns it.
struct PlannedCopy {
    landing: Box<UntrustedLanding>,
    owner: Option<(u32, u32)>,
}

/// L8–L11 on a selected driver: planned, then applied.
async fn start(
    ctx: &StartCtx<'_>,
    spec: Spec,
    driver: &dyn Driver,
) -> Result<ActiveSandbox, SetupError> {
    let plan = plan(ctx, spec, driver).await?;
    let active = apply(ctx, plan, driver).await?;
    // Seed step 17: the logins' read-only mounts copied into the CLIs' writable config dirs; a
    // failure tears the sandbox down (it would otherwise surface as an auth failure later).
    if let Err(error) = ctx.forfaits.seed(active.run.as_ref()).await {
        active.shutdown().await;
        return Err(error);
    }
    Ok(active)
}

/// L8–L9 and the L10 policy, reading the host but making nothing: a refusal here leaves no copy,
/// no dir and no listener behind.
async fn plan(
    ctx: &StartCtx<'_>,
    mut spec: Spec,
    driver: &dyn Driver,
) -> Result<StartPlan, SetupError> {
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
    // An untrusted run's own rules never open the host's loopback or a private network; the
    // operator's --allow-host below is the one way, and it asks for explicit consent.
    if ctx.trust == Trust::Untrusted {
        let opening = egress::non_public_rules(&policy.rules);
        if !opening.is_empty() {
            return Err(SetupError::failed(format!(
                "the network rules {} would let an untrusted run reach non-public addresses (this machine's loopback or a private network); an untrusted run's workflow and devcontainer may not open them: remove the rules, reach a service on this machine with --allow-host NAME:PORT --dangerously-allow-host-untrusted, or run it trusted",
                opening.join(", ")
            )));
        }
    }
    // --allow-host: the operator's host services, after every other rule so they win.
    if !ctx.host_services.is_empty() {
        if policy.mode == NetworkMode::Open && ctx.trust == Trust::Trusted {
            return Err(SetupError::failed(format!(
                "--allow-host needs the run's egress proxy, which an open network does not start: give the workflow's sandbox a network block (mode: allowlist with its rules, or mode: denylist), or run --trust untrusted with --dangerously-allow-host-untrusted; an open sandbox reaches services that listen on the docker gateway's address directly ({})",
                ctx.host_services
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        for service in &ctx.host_services {
            for rule in service.rules() {
                if !policy.rules.contains(&rule) {
                    policy.rules.push(rule);
                }
            }
        }
        network_source = format!(
            "{network_source} + host services ({})",
            ctx.host_services
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
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
    // Issue 15 item 2: an untrusted run never sees the host checkout, only a copy under the
    // root-only runtime root (a driver without host binds copies it in itself and exports into
    // it).
    let copy = match ctx.trust {
        Trust::Untrusted => {
            let owner = copy::untrusted_user(&mut spec);
            let landing = Box::new(copy::plan(ctx, &mut spec, inputs.host_binds).await?);
            Some(PlannedCopy { landing, owner })
        }
        Trust::Trusted => None,
    };
    inputs.untrusted_copy = copy.as_ref().map(|c| c.landing.dir.clone());
    // A workflow bind that named a login is not made: the login is the secret file below.
    ctx.forfaits.consume_mounts(&mut spec);
    let mounts = mounts::plan_mounts(&mut spec, &inputs).await?;
    // Issue 18: the operator's resource limits; a driver that cannot apply them says why.
    spec.limits = iterion_sandbox::Limits::from_env(&ctx.mount_inputs.env)
        .map_err(|error| SetupError::classify(&error))?;
    if !spec.limits.is_empty()
        && let Some(reason) = driver.resource_limits_refusal()
    {
        ctx.run_log.line(
            iterion_sandbox::LogLevel::Warn,
            &format!("sandbox: resource limits not applied: {reason}"),
        );
        ctx.events
            .emit(Event::SandboxLimitsNotApplied(SandboxLimitsNotApplied {
                driver: driver.name().to_owned(),
                limits: spec.limits.names().into_iter().map(str::to_owned).collect(),
                reason,
            }))
            .await;
    }
    // Issue 18: where the driver can, the exec agent is the sandbox's own command.
    if inputs.host_binds
        && ctx.mount_inputs.engine_binary.is_some()
        && exec_agent::exec_agent_enabled(&ctx.mount_inputs.env)
    {
        spec.exec_agent = Some(mounts::ENGINE_BIN_TARGET.to_owned());
    }
    // M12: what a driver without host binds cannot honour goes, with the promises it made.
    let dropped = finalize::finalize_mounts_for_driver(&mut spec, inputs.host_binds, driver.name());
    // Seed step 14: the logins as read-only secret files (shadowing a host-state bind's
    // original), their config-dir variables exported before the container starts.
    ctx.forfaits.plan(&mut spec);
    Ok(StartPlan {
        spec,
        policy,
        network_source,
        closed_network,
        inputs,
        copy,
        mounts,
        dropped,
    })
}

/// The host side of applying a plan, recording in `made` what it made: the copy, the binds'
/// dirs, the mount events, the run dir and the proxy's addresses on it.
#[allow(clippy::too_many_arguments)]
async fn make_host_side(
    ctx: &StartCtx<'_>,
    copy: Option<PlannedCopy>,
    dirs: Vec<mounts::PlannedDir>,
    events: Vec<Event>,
    dropped: Option<SandboxHostBindsDropped>,
    closed_network: bool,
    driver: &dyn Driver,
    made: &mut Made,
) -> Result<(std::path::PathBuf, iterion_sandbox::ProxyAddresses), SetupError> {
    if let Some(PlannedCopy { mut landing, owner }) = copy {
        copy::make(ctx, &mut landing, owner).await?;
        made.landing = Some(landing);
    }
    mounts::make_dirs(&dirs).await?;
    for event in events {
        ctx.events.emit(event).await;
    }
    if let Some(dropped) = dropped {
        ctx.events
            .emit(Event::SandboxHostBindsDropped(dropped))
            .await;
    }
    let run_dir = rundir::create(
        ctx.run_id,
        ctx.store_id,
        closed_network,
        &ctx.mount_inputs.env,
    )
    .await?;
    made.run_dir = Some(run_dir.clone());
    let addresses = iterion_sandbox::proxy_addresses_for_driver(driver, &run_dir)
        .map_err(|error| SetupError::classify(&error))?;
    Ok((run_dir, addresses))
}

/// What applying a plan has made so far, undone when a later step fails.
#[derive(Default)]
struct Made {
    landing: Option<Box<UntrustedLanding>>,
    run_dir: Option<std::path::PathBuf>,
}

impl Made {
    async fn undo(self) {
        if let Some(dir) = &self.run_dir {
            rundir::remove(dir).await;
        }
        copy::discard(self.landing).await;
    }
}

/// Applies a plan: the copy, the binds' dirs, the mount events, the run dir, the proxy
/// (listening from here on), then the container (L11).
async fn apply(
    ctx: &StartCtx<'_>,
    plan: StartPlan,
    driver: &dyn Driver,
) -> Result<ActiveSandbox, SetupError> {
    let StartPlan {
        spec,
        policy,
        network_source,
        closed_network,
        inputs,
        copy,
        mounts: plan,
        dropped,
    } = plan;
    let resolved = ctx.resolved;
    let mut made = Made::default();
    let (run_dir, addresses) = match make_host_side(
        ctx,
        copy,
        plan.dirs,
        plan.events,
        dropped,
        closed_network,
        driver,
        &mut made,
    )
    .await
    {
        Ok(made_dirs) => made_dirs,
        Err(error) => {
            made.undo().await;
            return Err(error);
        }
    };
    let workspace_path = match &made.landing {
        Some(landing) => landing.copy.clone(),
        None => ctx.mount_inputs.workspace.clone(),
    };
    // Seed step 18: the ask-user listener where the proxy is: beside the proxy's socket, in the
    // run's `net/` dir that the driver binds, or, for a driver that shares no run dir with its
    // sandbox (kubernetes: the proxy is on TCP, reached over the pod network), on TCP at the
    // proxy's bind address, advertised at the proxy's host. Decided here, before the container
    // exists, because the bind is part of its shape.
    let ask_user = if ctx.ask_user {
        let bound = match &addresses.bind {
            iterion_sandbox::ProxyBind::UnixSocket(_) => {
                ask_user::AskUserListener::bind(
                    &run_dir.join("net"),
                    Some(ask_user::CONTAINER_SOCKET),
                    &ctx.redactor,
                    Arc::clone(&ctx.run_log),
                )
                .await
            }
            iterion_sandbox::ProxyBind::Tcp(addr) => {
                ask_user::AskUserListener::bind_tcp(
                    std::net::SocketAddr::new(addr.ip(), 0),
                    &addresses.advertise_host,
                    &ctx.redactor,
                    Arc::clone(&ctx.run_log),
                )
                .await
            }
        };
        match bound {
            Ok(listener) => Some(Arc::new(listener)),
            Err(error) => {
                made.undo().await;
                return Err(SetupError::failed(error.to_string()));
            }
        }
    } else {
        None
    };
    // L10: the proxy, listening from here on; every later failure shuts it down.
    let proxy = match egress::start_network_proxy(
        &egress::ProxyRequest {
            policy: &policy,
            run_id: ctx.run_id,
            untrusted: ctx.trust == Trust::Untrusted,
            addresses,
            secrets: &ctx.egress_secrets,
            tls_capable: driver.capabilities().supports_tls_inspection,
            max_duration_seconds: ctx.max_duration_seconds,
            redactor: &ctx.redactor,
            env: &ctx.mount_inputs.env,
            host_services: &ctx.host_services,
        },
        Arc::clone(&ctx.event_sink),
        ctx.run_log.as_ref(),
    )
    .await
    {
        Ok(proxy) => proxy,
        Err(error) => {
            if let Some(listener) = &ask_user {
                listener.shutdown().await;
            }
            made.undo().await;
            return Err(error);
        }
    };
    let workspace_folder = spec.workspace_folder.clone();
    let result = start_in(
        ctx,
        spec,
        driver,
        (&run_dir, &workspace_path),
        proxy.as_ref(),
        ask_user.is_some(),
    )
    .await;
    match result {
        Ok(mut run) => {
            // Drivers that bind the engine binary run node commands through its exec agent.
            if inputs.host_binds && ctx.mount_inputs.engine_binary.is_some() {
                run.0 = exec_agent::with_exec_agent(
                    run.0,
                    mounts::ENGINE_BIN_TARGET,
                    &ctx.mount_inputs.env,
                    ctx.run_log.as_ref(),
                )
                .await;
            }
            // From here on the engine's execs keep a bounded part of what they print.
            run.0 = readback::bounded(run.0);
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
                transparent_egress: proxy.as_ref().is_some_and(|p| p.bridged),
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
                        workspace: made.landing.as_ref().map_or_else(
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
                landing: made.landing,
                ask_user,
            })
        }
        Err(error) => {
            if let Some(proxy) = proxy {
                proxy.shutdown(ctx.run_log.as_ref()).await;
            }
            if let Some(listener) = &ask_user {
                listener.shutdown().await;
            }
            made.undo().await;
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
    (run_dir, workspace_path): (&std::path::Path, &std::path::Path),
    proxy: Option<&egress::EngineProxy>,
    listener_planned: bool,
) -> Result<Started, SetupError> {
    let mut info = RunInfo::new(ctx.run_id, ctx.store_id, workspace_path, run_dir);
    info.listener_planned = listener_planned;
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
        // Issue 22: a bridged proxy is transparent too (DNS stub, synthetic addresses).
        info.transparent_egress = proxy.bridged;
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
        Some(proxy) => match egress::start_egress_bridge(Arc::clone(&run), Some(proxy)).await {
            Ok(bridge) => Some(bridge),
            Err(mut error) => {
                error.message.push_str(&egress::dynamic_binary_hint(
                    ctx.mount_inputs.engine_binary.as_deref(),
                ));
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
/// one (issue 4, "The default image"); when another image could not be pulled, it says so first
/// and what to check (issue 19: a typo must not read as a raw registry error).
fn prepare_error(resolved: &Resolved, error: &SandboxError) -> SetupError {
    let mut failure = SetupError::classify(error);
    if let (None, SandboxError::PullFailed { image, reason }) = (&resolved.default_image, error) {
        failure.message = format!(
            "image {image} is not present locally and could not be pulled: check its name (image: in the workflow's sandbox: block, or the devcontainer's), pull it yourself (docker pull {image}) or build it; iterion sandbox doctor --strict checks this before a run\n(the engine said: {reason})"
        );
    }
    if let (Some(default), SandboxError::PullFailed { .. }) = (&resolved.default_image, error) {
        failure.message = format!(
            "{}\nThe default sandbox image {image} is neither present locally nor pullable ({source}). To get one:\n  - pull it: docker pull {image}\n  - or point --sandbox-default-image (or ITERION_SANDBOX_DEFAULT_IMAGE) at an image you have locally\n  - or build one with no registry, as root: sudo scripts/build-default-image.sh (it tags the image so that it is found by default)\n  - or run on the host: --sandbox none",
            failure.message,
            image = default.image,
            source = default.source.label(),
        );
    }
    failure
}
