//! `iterion events RUN_ID [--json] [--follow]`: the run's audit trail (SANDBOX.md §9.1), in
//! order. With `--json`, one object a line: `{run_id, seq, ts, type, data}`. With `--follow`,
//! new events are printed as the run records them, until it is over ([`follow::Watch`]).
use iterion_store::RunId;

use crate::args::EventsArgs;
use crate::commands::follow::{self, Watch};
use crate::commands::stdout::{Closed, print_line};
use crate::commands::{Failure, open_store};
use crate::exit::Exit;

/// Runs the command.
pub async fn run(args: EventsArgs, env: &iterion_vocab::Environment) -> Exit {
    match events(args, env).await {
        Ok(Ok(())) => Exit::Success,
        Ok(Err(closed)) => closed.exit(),
        Err(failure) => failure.report(),
    }
}

async fn events(
    args: EventsArgs,
    env: &iterion_vocab::Environment,
) -> Result<Result<(), Closed>, Failure> {
    let run_id = RunId::parse(&args.run_id).map_err(Failure::bad_input)?;
    let (_, store) = open_store(env).await?;
    follow::existing(&store, &run_id).await?;
    let mut after = 0;
    let mut watch = Watch::default();
    loop {
        let over = !args.follow || watch.over(&store, &run_id).await?;
        let events = store
            .events(&run_id, after)
            .await
            .map_err(Failure::failed)?;
        for event in events {
            after = event.seq;
            let line = if args.json {
                serde_json::to_string(&event).unwrap_or_else(|_| "{}".to_owned())
            } else {
                format!(
                    "{:>4} {} {} {}",
                    event.seq,
                    event.ts,
                    event.kind,
                    crate::terminal::terminal_safe(&event.data.to_string())
                )
            };
            if let Err(closed) = print_line(&line) {
                return Ok(Err(closed));
            }
        }
        if over {
            return Ok(Ok(()));
        }
        tokio::time::sleep(follow::POLL).await;
    }
}
