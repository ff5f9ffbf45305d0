//! `iterion run FILE [--var K=V]… [--sandbox auto|none] [--sandbox-host-state auto|none]
//! [--sandbox-default-image REF] [--sandbox-env K=V]… [--trust trusted|untrusted] [--submit]
//! [--json]` (ARCHITECTURE.md §4). `--submit` queues the run for `iterion runner` instead.
//!
//! Everything that can refuse the launch is checked before the store is touched: the file, the
//! workflow's diagnostics, the vars, the secrets and `ITERION_SANDBOX_DEFAULT` (exit 2, no run).
//! Then the boot maintenance (crash recovery, reaper) runs beside the run, and is awaited before
//! the process exits.
use std::sync::Arc;

use iterion_dsl::CompileOptions;
use iterion_engine::{
    EngineError, LaunchOptions, RunControl, RunRequest, resolve_secrets, resolve_vars_with_preset,
    workflow_hash_at,
};
use iterion_sandbox::{
    EnvOverlay, HostState, ITERION_SANDBOX_ENV_FILE, SandboxFlag, Trust, parse_env_file,
    parse_env_pairs,
};

use iterion_vocab::Environment;

use crate::args::{AutoOrNone, HostStateArg, RunArgs, SandboxFlags, TrustArg};
use crate::commands::progress::Progress;
use crate::commands::{
    Failure, finish, install_signals, open_store, product_engine, product_setup,
};
use crate::exit::Exit;

/// The operator overlay (SANDBOX.md §7.8): `--sandbox-env K=V` over `env`'s
/// `ITERION_SANDBOX_ENV_FILE`, key by key. A malformed entry or an unreadable file is bad input
/// (exit 2, no run).
pub(crate) fn operator_overlay(pairs: &[String], env: &Environment) -> Result<EnvOverlay, Failure> {
    let from_file = match env
        .get_os(ITERION_SANDBOX_ENV_FILE)
        .filter(|v| !v.is_empty())
    {
        None => EnvOverlay::default(),
        Some(path) => {
            let shown = std::path::Path::new(&path).display().to_string();
            let content = std::fs::read_to_string(path).map_err(|e| {
                Failure::bad_input(anyhow::anyhow!(
                    "{ITERION_SANDBOX_ENV_FILE}={shown}: cannot read the operator env file: {e}"
                ))
            })?;
            parse_env_file(&shown, &content).map_err(Failure::bad_input)?
        }
    };
    let from_flags = parse_env_pairs(pairs).map_err(Failure::bad_input)?;
    Ok(from_file.overridden_by(from_flags))
}

/// Runs the command, reading `env`.
pub async fn run(args: RunArgs, env: &Environment) -> Exit {
    let json = args.json;
    match launch(args, env).await {
        Ok(exit) => exit,
        Err(failure) => failure.report_json(json, None),
    }
}

/// `--sandbox`.
pub(crate) fn sandbox_flag(value: Option<AutoOrNone>) -> Option<SandboxFlag> {
    value.map(|v| match v {
        AutoOrNone::Auto => SandboxFlag::Auto,
        AutoOrNone::None => SandboxFlag::None,
    })
}

/// The launch options the sandbox flags, the operator overlay (`--sandbox-env` pairs over
/// `ITERION_SANDBOX_ENV_FILE`) and the working directory make: one translation for `run` and
/// `sandbox doctor`.
pub(crate) fn launch_options(
    flags: &SandboxFlags,
    sandbox_env: &[String],
    cwd: std::path::PathBuf,
    env: &Environment,
) -> Result<LaunchOptions, Failure> {
    Ok(LaunchOptions {
        sandbox: sandbox_flag(flags.sandbox),
        host_state: host_state_flag(flags.sandbox_host_state),
        default_image: flags.sandbox_default_image.clone(),
        sandbox_env: operator_overlay(sandbox_env, env)?.vars,
        cwd,
        ..LaunchOptions::default()
    })
}

/// `--sandbox-host-state`.
pub(crate) fn host_state_flag(value: Option<HostStateArg>) -> Option<HostState> {
    value.map(|v| match v {
        HostStateArg::Auto => HostState::Auto,
        HostStateArg::None => HostState::None,
    })
}

/// Loads and compiles a workflow file; warnings go to stderr. A file that cannot be read or
/// does not compile is bad input (the diagnostics are printed). Returns the workflow and the
/// source bytes.
pub(crate) fn compile_workflow(
    file: &std::path::Path,
) -> Result<(iterion_dsl::ir::Workflow, Vec<u8>), Failure> {
    let shown = file.display().to_string();
    let bytes = iterion_dsl::load(file).map_err(Failure::bad_input)?;
    let compiled = iterion_dsl::compile_at(
        &bytes,
        file,
        &CompileOptions {
            ask_user_in_sandbox: crate::commands::validate::ASK_USER_IN_SANDBOX,
        },
    );
    let (errors, warnings) = (compiled.error_count(), compiled.warning_count());
    if errors > 0 || warnings > 0 || compiled.workflow.is_none() {
        crate::output::err!(
            "{}",
            crate::terminal::diagnostics(&shown, &bytes, &compiled)
        );
    }
    let workflow = match compiled.workflow {
        Some(workflow) if errors == 0 => workflow,
        _ => {
            let why = if errors == 0 {
                "declares no workflow (C150)"
            } else {
                "does not compile"
            };
            return Err(Failure::bad_input(anyhow::anyhow!(
                "{shown} {why}; nothing was run (`iterion validate {shown}` shows the same diagnostics)"
            )));
        }
    };
    Ok((workflow, bytes))
}

async fn launch(args: RunArgs, env: &Environment) -> Result<Exit, Failure> {
    let file = iterion_dsl::workflow_file(&args.file);
    let shown = file.display().to_string();
    let (workflow, bytes) = compile_workflow(&file)?;
    let vars = resolve_vars_with_preset(&workflow, args.preset.as_deref(), &args.vars)
        .map_err(Failure::bad_input)?;
    let secrets = resolve_secrets(&workflow, |k| env.get(k)).map_err(Failure::bad_input)?;
    let cwd = std::env::current_dir().map_err(Failure::bad_input)?;
    // ITERION_SANDBOX_DEFAULT is checked before the store is opened.
    let setup = product_setup(env)?;
    let request = RunRequest {
        workflow,
        workflow_hash: workflow_hash_at(&file, &bytes),
        file_path: std::fs::canonicalize(&file).unwrap_or(file.clone()),
        vars,
        secrets,
        trust: match args.trust {
            TrustArg::Trusted => Trust::Trusted,
            TrustArg::Untrusted => Trust::Untrusted,
        },
        options: LaunchOptions {
            allow_hosts: args
                .allow_hosts
                .iter()
                .map(|arg| iterion_engine::HostService::parse(arg))
                .collect::<Result<_, _>>()
                .map_err(Failure::bad_input)?,
            allow_hosts_untrusted: if args.dangerously_allow_host_untrusted {
                iterion_engine::UntrustedHostServices::Allowed
            } else {
                iterion_engine::UntrustedHostServices::Refused
            },
            attachments: args
                .attach
                .iter()
                .map(|arg| iterion_engine::AttachmentSource::parse(arg, &cwd))
                .collect::<Result<_, _>>()
                .map_err(Failure::bad_input)?,
            ..launch_options(&args.sandbox, &args.sandbox_env, cwd.clone(), env)?
        },
    };
    // The strict pre-flight (SANDBOX.md §11.4): a failing check refuses the launch (exit 2)
    // before the store is even opened.
    if iterion_engine::sandbox_preflight_enabled(env) {
        iterion_engine::preflight_sandbox(&setup, &request, &shown)
            .await
            .map_err(Failure::bad_input)?;
    }
    let (home, store) = open_store(env).await?;
    let engine = Arc::new(product_engine(store, home, env)?);
    if args.submit && !request.options.attachments.is_empty() {
        return Err(Failure::bad_input(anyhow::anyhow!(
            "--attach cannot go with --submit: a queued run's runner has no access to this machine's files"
        )));
    }
    if args.submit {
        // `--submit` (ARCHITECTURE.md §4): queue for `iterion runner`, print the id, exit 0.
        let run = engine.submit(request).await.map_err(|e| match e {
            EngineError::Launch(e) => Failure::bad_input(e),
            other => Failure::failed(other),
        })?;
        if args.json {
            crate::output::outln!(
                "{}",
                serde_json::json!({"run_id": run.id.as_str(), "status": run.status.as_str()})
            );
        } else {
            crate::output::outln!("{}", run.id.as_str());
        }
        return Ok(Exit::Success);
    }
    let maintenance = {
        let engine = Arc::clone(&engine);
        tokio::spawn(async move { engine.boot_maintenance().await })
    };
    let control = RunControl::default();
    install_signals(&control);
    let progress = Arc::new(Progress::new(args.json, args.quiet));
    let result = engine.run(request, control, progress.clone()).await;
    progress.done();
    let _ = maintenance.await;
    match result {
        Ok(summary) => Ok(finish(&summary, args.json)),
        Err(EngineError::Launch(e)) => Err(Failure::bad_input(e)),
        Err(e) => Err(Failure::failed(e)),
    }
}
