//! `iterion cancel RUN [--no-wait] [--timeout S] [--json]`: cancels a run wherever it executes,
//! through [`iterion_engine::request_cancel`] (the request is recorded in the store; the process
//! executing the run stops it), then waits for it to stop.
use std::time::Duration;

use iterion_engine::{CancelOutcome, request_cancel, wait_stopped};
use iterion_store::{Run, RunStatus};
use iterion_vocab::Environment;

use crate::args::CancelArgs;
use crate::commands::runs::resolve;
use crate::commands::{Failure, open_store};
use crate::exit::Exit;
use crate::output::outln;

/// Who the request names.
const BY: &str = "iterion cancel";

/// Runs the command.
pub async fn run(args: CancelArgs, env: &Environment) -> Exit {
    let json = args.json;
    match cancel(args, env).await {
        Ok(exit) => exit,
        Err((failure, run_id)) => failure.report_json(json, run_id.as_deref()),
    }
}

async fn cancel(args: CancelArgs, env: &Environment) -> Result<Exit, (Failure, Option<String>)> {
    let (_, store) = open_store(env).await.map_err(|f| (f, None))?;
    let id = resolve(store.as_ref(), &args.run_id)
        .await
        .map_err(|f| (f, None))?;
    let with_id = |f: Failure| (f, Some(id.to_string()));
    let outcome = request_cancel(store.as_ref(), &id, BY)
        .await
        .map_err(|e| with_id(Failure::failed(e)))?;
    let (run, requested, stopped) = match outcome {
        CancelOutcome::Cancelled(run) => (run, false, true),
        CancelOutcome::Requested(run) if args.no_wait => (run, true, false),
        CancelOutcome::Requested(_) => {
            let run = wait_stopped(store.as_ref(), &id, Duration::from_secs(args.timeout))
                .await
                .map_err(|e| with_id(Failure::failed(e)))?;
            let stopped = run.status.is_terminal() || run.status == RunStatus::Paused;
            (run, true, stopped)
        }
    };
    let exit = if run.status == RunStatus::Cancelled || (args.no_wait && !stopped) {
        Exit::Success
    } else {
        Exit::Failed
    };
    if args.json {
        outln!(
            "{}",
            serde_json::json!({
                "run_id": run.id.as_str(),
                "status": run.status.as_str(),
                "failure_code": run.failure_code,
                "requested": requested,
                "stopped": stopped,
            })
        );
    } else {
        report(&run, args.no_wait, stopped, args.timeout);
    }
    Ok(exit)
}

fn report(run: &Run, no_wait: bool, stopped: bool, timeout: u64) {
    let id = &run.id;
    if run.status == RunStatus::Cancelled {
        outln!("run {id} cancelled");
    } else if no_wait && !stopped {
        outln!("run {id}: cancel requested; the process executing it stops it");
    } else if !stopped {
        crate::output::errln!(
            "error: run {id}: the cancel is recorded but the run is still {} after {timeout}s \
             (is the process executing it alive? `iterion ps` shows it; once its lease lapses \
             `iterion cancel` ends it directly)",
            run.status.as_str()
        );
    } else {
        crate::output::errln!(
            "error: run {id} ended {} before the cancel took effect",
            run.status.as_str()
        );
    }
}
