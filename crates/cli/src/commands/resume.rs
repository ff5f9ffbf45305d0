//! `iterion resume RUN_ID [--force] [--json]`: a `failed_resumable` run again, from its
//! checkpoint (SANDBOX.md §16.4). Crash recovery runs first, so a run whose process died (its
//! lease lapsed) is resumable at once; a refusal (`RESUME_INVALID`) exits 1.
use std::sync::Arc;

use iterion_engine::{EngineError, ResumeRequest, RunControl};
use iterion_store::RunId;

use crate::args::ResumeArgs;
use crate::commands::progress::Progress;
use crate::commands::{Failure, finish, install_signals, open_store, product_engine};
use crate::exit::Exit;

/// Runs the command.
pub async fn run(args: ResumeArgs, env: &iterion_vocab::Environment) -> Exit {
    let json = args.json;
    let mut resolved = None;
    match resume(args, env, &mut resolved).await {
        Ok(exit) => exit,
        Err(failure) => failure.report_json(json, resolved.as_ref().map(RunId::as_str)),
    }
}

async fn resume(
    args: ResumeArgs,
    env: &iterion_vocab::Environment,
    resolved: &mut Option<RunId>,
) -> Result<Exit, Failure> {
    let (home, store) = open_store(env).await?;
    let run_id = crate::commands::runs::resolve(store.as_ref(), &args.run_id).await?;
    *resolved = Some(run_id.clone());
    let engine = Arc::new(product_engine(store, home, env)?);
    engine.boot_maintenance().await;
    let control = RunControl::default();
    install_signals(&control);
    let progress = Arc::new(Progress::new(args.json, args.quiet));
    let result = engine
        .resume(
            ResumeRequest {
                run_id: run_id.as_str().to_owned(),
                force: args.force,
                answer: args.answer.clone(),
            },
            control,
            progress.clone(),
        )
        .await;
    progress.done();
    match result {
        Ok(summary) => Ok(finish(&summary, args.json)),
        Err(EngineError::Launch(e)) => Err(Failure::bad_input(e)),
        Err(e @ (EngineError::ResumeRefused { .. } | EngineError::ScratchNotPortable { .. })) => {
            let code = e.code();
            Err(Failure::failed(
                anyhow::Error::new(e).context(format!("resume refused [{code}]")),
            ))
        }
        Err(e) => Err(Failure::failed(e)),
    }
}
