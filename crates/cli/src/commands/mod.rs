//! One module per command, and what they share.
pub mod cancel;
pub mod claw_runner;
pub mod completions;
pub mod config;
pub mod egress_bridge;
pub mod egress_probe;
pub mod events;
pub mod exec_agent;
pub mod follow;
pub mod inspect;
pub mod logs;
pub mod mcp_ask_user;
pub mod operator;
pub mod progress;
pub mod prune;
pub mod resume;
pub mod run;
pub mod runner;
pub mod runs;
pub mod sandbox_doctor;
pub mod studio;
pub mod transparent;
pub mod validate;
pub mod warm_fill;

use std::sync::Arc;

use anyhow::Context as _;
use iterion_engine::{Engine, PreflightSetup};
use iterion_store::{Store, db_path, iterion_home_from_env};
use iterion_vocab::Environment;

use crate::exit::Exit;

/// A failure of a command before or outside a run, with its exit code.
pub struct Failure {
    pub exit: Exit,
    pub error: anyhow::Error,
}

impl Failure {
    pub fn bad_input(error: impl Into<anyhow::Error>) -> Failure {
        Failure {
            exit: Exit::BadInput,
            error: error.into(),
        }
    }

    pub fn failed(error: impl Into<anyhow::Error>) -> Failure {
        Failure {
            exit: Exit::Failed,
            error: error.into(),
        }
    }

    /// The stable code of the error when it has one (a store, engine or launch error, found
    /// anywhere in its chain), else `BAD_INPUT` or `FAILED` after the exit code.
    pub fn code(&self) -> &'static str {
        for cause in self.error.chain() {
            if let Some(e) = cause.downcast_ref::<iterion_engine::EngineError>() {
                return e.code();
            }
            if let Some(e) = cause.downcast_ref::<iterion_engine::CancelError>() {
                return e.code();
            }
            if let Some(e) = cause.downcast_ref::<iterion_engine::LaunchError>() {
                return e.code();
            }
            if let Some(e) = cause.downcast_ref::<iterion_store::Error>() {
                return e.code();
            }
            if let Some(e) = cause.downcast_ref::<iterion_dsl::LoadError>() {
                return e.code();
            }
            if let Some(e) = cause.downcast_ref::<crate::config::ConfigError>() {
                return e.code();
            }
        }
        match self.exit {
            Exit::BadInput => "BAD_INPUT",
            Exit::Success | Exit::Failed | Exit::Paused => "FAILED",
        }
    }

    /// The error and its causes, each said once: `{:#}` joins the chain with `: `, and a cause
    /// whose text the previous one already ends with (an error whose Display includes its
    /// source, `… (os error 2)` then `No such file or directory (os error 2)`) is skipped.
    pub fn message(&self) -> String {
        error_chain_text(&self.error)
    }

    /// Prints the error (with its causes) to stderr and returns the exit code.
    pub fn report(self) -> Exit {
        crate::output::errln!("error: {}", crate::terminal::terminal_safe(&self.message()));
        self.exit
    }

    /// [`Failure::report`], and with `json` also one JSON object on stdout, in the shape of a
    /// run summary: `{run_id, status: "error", failure_code, message}` (`run_id` is `null` when
    /// no run was created).
    pub fn report_json(self, json: bool, run_id: Option<&str>) -> Exit {
        if json {
            crate::output::outln!(
                "{}",
                serde_json::json!({
                    "run_id": run_id,
                    "status": "error",
                    "failure_code": self.code(),
                    "message": self.message(),
                    "exit_code": self.exit.code(),
                })
            );
        }
        self.report()
    }
}

/// `error`'s chain as one line, each cause said once (see [`Failure::message`]).
pub fn error_chain_text(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let line = cause.to_string();
        if text.is_empty() {
            text = line;
        } else if !text.contains(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
    }
    text
}

/// `env`'s `$ITERION_HOME` (default `~/.iterion`) and its store.
pub async fn open_store(
    env: &Environment,
) -> Result<(std::path::PathBuf, Arc<dyn Store>), Failure> {
    let home = iterion_home_from_env(env)
        .map_err(|e| Failure::bad_input(anyhow::Error::new(e).context("set ITERION_HOME")))?;
    // ITERION_STORE_URL=postgres://… selects PostgreSQL; otherwise SQLite under ITERION_HOME.
    let shown = match env.get(iterion_store::ITERION_STORE_URL) {
        Some(url) if !url.is_empty() => "named by ITERION_STORE_URL".to_owned(),
        _ => db_path(&home).display().to_string(),
    };
    let store = iterion_store::store_from_env(env)
        .await
        .with_context(|| format!("cannot open the run store {shown}"))
        .map_err(Failure::failed)?;
    Ok((home, store))
}

/// The sandbox setup the product entry points use: the process environment `env`, the global
/// default installed from its `ITERION_SANDBOX_DEFAULT` (else `auto`), and this executable (or
/// its static twin) as the engine binary. The doctor and the pre-flight take it without a store.
pub fn product_setup(env: &Environment) -> Result<PreflightSetup, Failure> {
    let default = iterion_sandbox::global_sandbox_default_from_env(env).map_err(|e| {
        Failure::bad_input(anyhow::anyhow!(
            "{e} (ITERION_SANDBOX_DEFAULT sets whether workflows without a sandbox: block are sandboxed)"
        ))
    })?;
    let preferred = iterion_sandbox::sandbox_driver_from_env(env).map_err(|e| {
        Failure::bad_input(anyhow::anyhow!(
            "{e} (ITERION_SANDBOX_DRIVER pins the sandbox driver; unset it to let iterion choose)"
        ))
    })?;
    let mut setup = PreflightSetup::new()
        .with_environment(env.clone())
        .with_sandbox_default(default)
        .with_factory_options(iterion_sandbox::FactoryOptions {
            host: None,
            preferred_driver: preferred,
        });
    if let Ok(exe) = std::env::current_exe().and_then(std::fs::canonicalize) {
        // Its static twin when this build is dynamic (SANDBOX.md §8.4; engine_binary.rs).
        setup = setup.with_engine_binary(iterion_engine::container_binary_for(&exe).path);
        // A docker warm pool refills through `iterion __warm-fill`, a process of its own, so
        // the entries one `iterion run` asks for outlive it and serve the next.
        iterion_engine::install_warm_filler(&exe);
    }
    Ok(setup)
}

/// The engine the product entry points use: [`product_setup`] (its environment included) over
/// the store.
pub fn product_engine(
    store: Arc<dyn Store>,
    home: std::path::PathBuf,
    env: &Environment,
) -> Result<Engine, Failure> {
    let mut engine = Engine::new(store, home).with_preflight_setup(product_setup(env)?);
    if let Some(operator) = crate::commands::operator::TerminalOperator::if_interactive() {
        engine = engine.with_operator(Arc::new(operator));
    }
    Ok(engine)
}

/// Ctrl-C and SIGTERM interrupt the run (`failed_resumable`, `INTERRUPTED`: `iterion resume`
/// continues it); a second Ctrl-C cancels it (`cancelled`, not resumable). Either way the engine
/// tears the sandbox down before the process exits.
pub fn install_signals(control: &iterion_engine::RunControl) {
    let (interrupt, abandon) = (control.interrupt.clone(), control.abandon.clone());
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_err() {
            return;
        }
        crate::output::errln!(
            "interrupt: stopping the run, resumable with iterion resume (tearing down the sandbox); press Ctrl-C again to cancel it…"
        );
        interrupt.cancel();
        if tokio::signal::ctrl_c().await.is_ok() {
            crate::output::errln!(
                "interrupt: cancelling the run, not resumable (tearing down the sandbox)…"
            );
            abandon.cancel();
        }
    });
    let interrupt = control.interrupt.clone();
    tokio::spawn(async move {
        if let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            && term.recv().await.is_some()
        {
            crate::output::errln!("terminated: interrupting the run (resumable)…");
            interrupt.cancel();
        }
    });
}

/// Prints a run's summary and maps its status to the exit code.
pub fn finish(summary: &iterion_engine::RunSummary, json: bool) -> Exit {
    use iterion_store::RunStatus;
    if json {
        crate::output::outln!(
            "{}",
            serde_json::to_string(summary).unwrap_or_else(|_| "{}".to_owned())
        );
    } else {
        let code = summary
            .failure_code
            .as_deref()
            .map(|c| format!(" [{c}]"))
            .unwrap_or_default();
        crate::output::outln!("run {} {}{code}", summary.run_id, summary.status);
        if summary.status == RunStatus::Paused {
            crate::output::outln!(
                "question: {}\nanswer with: iterion resume {} --answer TEXT",
                crate::terminal::terminal_safe(summary.message.as_deref().unwrap_or_default()),
                summary.run_id
            );
        }
        if let Some(output) = &summary.output {
            crate::output::outln!(
                "output: {}",
                crate::terminal::terminal_safe(&output.to_string())
            );
        }
        if let Some(branch) = &summary.branch {
            crate::output::outln!(
                "changes committed on branch {}",
                crate::terminal::terminal_safe(branch)
            );
        }
        if let Some(path) = &summary.worktree {
            crate::output::outln!("worktree kept at {}", path.display());
        }
    }
    match summary.status {
        RunStatus::Finished => Exit::Success,
        RunStatus::Failed
        | RunStatus::FailedResumable
        | RunStatus::Cancelled
        | RunStatus::Queued
        | RunStatus::Running => Exit::Failed,
        RunStatus::Paused => Exit::Paused,
    }
}

#[cfg(test)]
mod tests {
    use super::error_chain_text;

    /// An error whose Display already says its source, as `thiserror`'s `"…: {source}"` with
    /// `#[source]` does: printed with its chain, the source would be said twice.
    #[derive(Debug, thiserror::Error)]
    #[error("cannot read x.iter: {source}")]
    struct Says {
        #[source]
        source: std::io::Error,
    }

    #[test]
    fn each_cause_is_said_once_even_when_a_display_includes_its_source() {
        let io = || std::io::Error::from_raw_os_error(2);
        let doubled = anyhow::Error::new(Says { source: io() });
        assert_eq!(
            format!("{doubled:#}"),
            "cannot read x.iter: No such file or directory (os error 2): No such file or directory (os error 2)"
        );
        assert_eq!(
            error_chain_text(&doubled),
            "cannot read x.iter: No such file or directory (os error 2)"
        );
        // A context over a plain error keeps both.
        let plain = anyhow::Error::new(io()).context("opening the store");
        assert_eq!(
            error_chain_text(&plain),
            "opening the store: No such file or directory (os error 2)"
        );
    }
}
