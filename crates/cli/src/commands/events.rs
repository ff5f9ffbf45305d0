//! `iterion events RUN_ID [--json]`: the run's audit trail (SANDBOX.md §9.1), in order. With
//! `--json`, one object a line: `{run_id, seq, ts, type, data}`.
use iterion_store::RunId;

use crate::args::EventsArgs;
use crate::commands::{Failure, open_store};
use crate::exit::Exit;

/// Runs the command.
pub async fn run(args: EventsArgs, env: &iterion_vocab::Environment) -> Exit {
    match events(args, env).await {
        Ok(exit) => exit,
        Err(failure) => failure.report(),
    }
}

async fn events(args: EventsArgs, env: &iterion_vocab::Environment) -> Result<Exit, Failure> {
    let run_id = RunId::parse(&args.run_id).map_err(Failure::bad_input)?;
    let (_, store) = open_store(env).await?;
    if store
        .get_run(&run_id)
        .await
        .map_err(Failure::failed)?
        .is_none()
    {
        return Err(Failure::failed(iterion_store::Error::RunNotFound {
            run_id,
        }));
    }
    let events = store.events(&run_id, 0).await.map_err(Failure::failed)?;
    for event in events {
        if args.json {
            println!(
                "{}",
                serde_json::to_string(&event).unwrap_or_else(|_| "{}".to_owned())
            );
        } else {
            println!(
                "{:>4} {} {} {}",
                event.seq,
                event.ts,
                event.kind,
                crate::terminal::terminal_safe(&event.data.to_string())
            );
        }
    }
    Ok(Exit::Success)
}
