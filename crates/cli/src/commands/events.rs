//! `iterion events RUN_ID [--json]`: the run's audit trail (SANDBOX.md §9.1), in order. With
//! `--json`, one object a line: `{run_id, seq, ts, type, data}`.
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
    let (_, store) = open_store(env).await?;
    let run_id = crate::commands::runs::resolve(store.as_ref(), &args.run_id).await?;
    let events = store.events(&run_id, 0).await.map_err(Failure::failed)?;
    for event in events {
        if args.json {
            crate::output::outln!(
                "{}",
                serde_json::to_string(&event).unwrap_or_else(|_| "{}".to_owned())
            );
        } else {
            crate::output::outln!(
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
