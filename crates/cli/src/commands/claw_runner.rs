//! `iterion __claw-runner` (hidden; SANDBOX.md §13): the agent loop inside the run's container.
//! The engine execs it with stdin attached; stdout carries NDJSON envelopes only, logs go to
//! stderr. Exit 0 after a `result` (a model-level error included), non-zero on a fatal
//! bootstrap or channel error.
use crate::exit::Exit;

/// Runs the runner on its own runtime, reading `env` (the container process's environment).
pub fn run(env: &iterion_vocab::Environment) -> Exit {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_target(false)
        .without_time()
        .with_ansi(false)
        .try_init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("claw runner: cannot start the async runtime: {e}");
            return Exit::BadInput;
        }
    };
    match runtime.block_on(iterion_engine::claw_runner_main(env)) {
        0 => Exit::Success,
        _ => Exit::BadInput,
    }
}
