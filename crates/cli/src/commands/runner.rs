//! `iterion runner` (ARCHITECTURE.md §4, §5 decision 8): a cloud worker. It takes queued runs
//! (`iterion run --submit`) from the store's queue — PostgreSQL for a fleet
//! (`ITERION_STORE_URL`) — holds their leases while it executes them, redelivers infrastructure
//! failures to a healthy runner and parks deterministic ones (`iterion_engine::run_worker`).
//!
//! At boot: crash recovery (runs whose runner died are redelivered). Beside the worker: the
//! sandbox reaper (SANDBOX.md §12.2) — on a cloud host this pod's namespace (pods, Secrets,
//! NetworkPolicies), else the local engine — at boot and every `ITERION_SANDBOX_REAP_INTERVAL`.
//! Under `ITERION_SANDBOX_OVERRIDE=none` the runner is itself the boundary: every run it takes
//! runs unsandboxed (the override is the CLI-strength tier), and no reaper runs.
//!
//! SIGTERM and Ctrl-C stop claiming and interrupt the run in hand (`failed_resumable` /
//! `INTERRUPTED`, redelivered at once); the process exits 0 once it is settled.
use std::sync::Arc;

use iterion_engine::{
    ITERION_SANDBOX_REAP_INTERVAL, NoObserver, WorkerOptions, reap_interval, redeliver_interrupted,
    run_sandbox_reaper, run_worker,
};
use iterion_sandbox::{
    HostKind, HostSignals, Reaper, SandboxFlag, detect_host, sandbox_override_from_env,
};
use iterion_sandbox_kubernetes::{ITERION_RUNNER_POD_NAME, SchedulingPolicy, in_cluster_api};
use iterion_vocab::Environment;

use crate::commands::{Failure, open_store, product_engine};
use crate::exit::Exit;

/// Runs the command, reading `env`.
pub async fn run(env: &Environment) -> Exit {
    match serve(env).await {
        Ok(exit) => exit,
        Err(failure) => failure.report(),
    }
}

fn holder(env: &Environment) -> String {
    env.get(ITERION_RUNNER_POD_NAME)
        .filter(|name| !name.trim().is_empty())
        .unwrap_or_else(|| format!("iterion-runner-pid{}", std::process::id()))
}

async fn serve(env: &Environment) -> Result<Exit, Failure> {
    let override_env = sandbox_override_from_env(env).map_err(Failure::bad_input)?;
    let cloud_host = detect_host(&HostSignals::from_env(env)) == HostKind::Cloud;
    // A malformed scheduling policy stops a cloud runner before it takes any run (SANDBOX.md
    // §16.2): every sandbox start would fail on it anyway.
    if cloud_host && override_env != Some(SandboxFlag::None) {
        let policy = SchedulingPolicy::from_env(env).map_err(Failure::bad_input)?;
        crate::output::errln!("runner: sandbox scheduling policy: {}", policy.summary());
    }
    let (home, store) = open_store(env).await?;
    let engine = Arc::new(product_engine(Arc::clone(&store), home, env)?);
    // A fresh cancellation token (the engine's type; the CLI does not name tokio-util).
    let shutdown = iterion_engine::RunControl::default().interrupt;
    {
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let mut term =
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    Ok(term) => term,
                    Err(error) => {
                        crate::output::errln!("runner: cannot listen for SIGTERM: {error}");
                        return;
                    }
                };
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            crate::output::errln!(
                "runner: shutting down (the run in hand is interrupted and redelivered)"
            );
            shutdown.cancel();
        });
    }
    for run_id in redeliver_interrupted(store.as_ref()).await {
        crate::output::errln!("runner: run {run_id} was interrupted (lease lapsed); redelivered");
    }
    let reaper = if override_env == Some(SandboxFlag::None) {
        crate::output::errln!("runner: ITERION_SANDBOX_OVERRIDE=none: no sandbox, no reaper");
        None
    } else {
        let cloud = if cloud_host {
            match in_cluster_api(env) {
                Ok(api) => Some(Arc::new(api) as Arc<dyn Reaper>),
                Err(error) => {
                    crate::output::errln!("runner: cloud reaper off: {error}");
                    None
                }
            }
        } else {
            None
        };
        let interval = reap_interval(env.get(ITERION_SANDBOX_REAP_INTERVAL).as_deref());
        Some(tokio::spawn(run_sandbox_reaper(
            Arc::clone(&store),
            cloud,
            interval,
            shutdown.clone(),
            env.clone(),
        )))
    };
    let options = WorkerOptions::new(holder(env));
    crate::output::errln!("runner: {} taking queued runs", options.holder);
    let report = run_worker(&engine, &options, shutdown.clone(), Arc::new(NoObserver)).await;
    shutdown.cancel();
    if let Some(reaper) = reaper {
        let _ = reaper.await;
    }
    crate::output::errln!(
        "runner: stopped after {} run(s) ({} redelivered, {} parked)",
        report.taken.len(),
        report.redelivered,
        report.parked
    );
    Ok(Exit::Success)
}
