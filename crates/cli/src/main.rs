//! The `iterion` binary: clap commands over the engine. The only crate that prints for humans
//! (ARCHITECTURE.md §1): human output goes to stdout, progress and logs to stderr, `--json`
//! prints one JSON document (JSON lines for `events`).
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod args;
mod commands;
mod config;
mod exit;
mod output;
mod terminal;

use clap::Parser;
use iterion_vocab::Environment;

use crate::exit::Exit;

fn main() -> std::process::ExitCode {
    let cli = args::Cli::parse();
    // The one read of the process environment: every command is handed this snapshot.
    let env = Environment::from_process();
    let code = match cli.command {
        args::Command::Validate(args) => commands::validate::run(&args),
        args::Command::Completions(args) => commands::completions::run(&args),
        // Its own small runtime, no tracing subscriber: it reads no env (SANDBOX.md §4.6).
        args::Command::EgressBridge(args) => commands::egress_bridge::run(args),
        args::Command::EgressProbe { target } => commands::egress_probe::run(&target),
        // stdout carries NDJSON only; logs go to stderr (SANDBOX.md §13.1).
        args::Command::ClawRunner => commands::claw_runner::run(&env),
        // Framed stdin/stdout only, no tracing subscriber, no env read.
        args::Command::ExecAgent => commands::exec_agent::run(),
        // JSON-RPC on stdin/stdout only, no tracing subscriber.
        args::Command::McpAskUser => commands::mcp_ask_user::run(&env),
        // The job on stdin, nothing printed; its own small runtime.
        args::Command::WarmFill => commands::warm_fill::run(),
        command => async_main(command, env),
    };
    code.into()
}

/// The commands that talk to the store or the engine run on a multi-threaded tokio runtime,
/// over `env` with the operator's config file folded in (the one read of it, `config.rs`).
fn async_main(command: args::Command, process_env: Environment) -> Exit {
    let command = match command {
        args::Command::Config(args) => return commands::config::run(args, &process_env),
        other => other,
    };
    let env = match config::fold(process_env) {
        Ok((env, _)) => env,
        Err(error) => return commands::Failure::bad_input(error).report(),
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_target(false)
        .without_time()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            crate::output::errln!("error: cannot start the async runtime: {e}");
            return Exit::Failed;
        }
    };
    runtime.block_on(async move {
        match command {
            args::Command::Validate(args) => commands::validate::run(&args),
            args::Command::Run(args) => commands::run::run(args, &env).await,
            args::Command::Resume(args) => commands::resume::run(args, &env).await,
            args::Command::Cancel(args) => commands::cancel::run(args, &env).await,
            args::Command::Inspect(args) => commands::inspect::run(args, &env).await,
            args::Command::Events(args) => commands::events::run(args, &env).await,
            args::Command::Logs(args) => commands::logs::run(args, &env).await,
            args::Command::Sandbox(args) => commands::sandbox_doctor::run(args, &env).await,
            args::Command::Ps(args) => commands::runs::ps(args, &env).await,
            args::Command::Rm(args) => commands::runs::rm(args, &env).await,
            args::Command::Prune(args) => commands::prune::run(args, &env).await,
            args::Command::Config(args) => commands::config::run(args, &env),
            args::Command::Completions(args) => commands::completions::run(&args),
            args::Command::Runner => commands::runner::run(&env).await,
            args::Command::EgressBridge(args) => commands::egress_bridge::run_async(args).await,
            args::Command::EgressProbe { target } => commands::egress_probe::run(&target),
            args::Command::ClawRunner => commands::claw_runner::run(&env),
            args::Command::ExecAgent => commands::exec_agent::run(),
            args::Command::McpAskUser => commands::mcp_ask_user::run(&env),
            args::Command::WarmFill => commands::warm_fill::run(),
            args::Command::Studio(args) => commands::studio::run(args, &env).await,
        }
    })
}
