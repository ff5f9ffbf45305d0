//! `iterion events RUN [--json] [--follow]`: the run's audit trail (SANDBOX.md §9.1), in order.
//! With `--json`, one object a line: `{run_id, seq, ts, type, data}`. With `--follow`, new events
//! are printed as the run records them, until it is over ([`follow::Watch`]). Lines go through
//! [`crate::output`], so a reader that goes away (`| head -1`) ends the command quietly.
use crate::args::EventsArgs;
use crate::commands::follow::{self, Watch};
use crate::commands::{Failure, open_store};
use crate::exit::Exit;

/// Runs the command.
pub async fn run(args: EventsArgs, env: &iterion_vocab::Environment) -> Exit {
    match events(args, env).await {
        Ok(()) => Exit::Success,
        Err(failure) => failure.report(),
    }
}

async fn events(args: EventsArgs, env: &iterion_vocab::Environment) -> Result<(), Failure> {
    let (_, store) = open_store(env).await?;
    let run_id = crate::commands::runs::resolve(store.as_ref(), &args.run_id).await?;
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
        if over {
            return Ok(());
        }
        tokio::time::sleep(follow::POLL).await;
    }
}
