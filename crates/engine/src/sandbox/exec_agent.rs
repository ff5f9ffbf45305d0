//! L11 (after start): the in-sandbox exec agent (issue 18 item 3). Every node command of a
//! sandbox whose driver binds the engine binary goes through one long-lived `iterion
//! __exec-agent` instead of a driver exec each ([`iterion_sandbox::exec_agent`]); when the agent
//! cannot start the run goes on with the driver's exec and the run log says why. A driver whose
//! exec is already a direct spawn inside the sandbox (the namespace driver's init forks each
//! command) gets no agent: it would cost its start and save nothing per node.
//! Where the driver ran the agent as the sandbox's own command ([`iterion_sandbox::Spec::exec_agent`],
//! docker and podman) the channel it attached is used and no exec starts one.
//! `ITERION_SANDBOX_EXEC_AGENT=0` turns it off (to compare, or to rule it out).

use std::sync::Arc;
use std::time::Duration;

use iterion_sandbox::exec_agent::{EXEC_AGENT_SUBCOMMAND, attach_exec_agent, start_exec_agent};
use iterion_sandbox::{LogLevel, RunLog, SandboxRun};
use iterion_vocab::Environment;

/// The knob: `0`, `false`, `off` or `no` turn the agent off; unset or anything else keeps it.
pub(crate) const EXEC_AGENT_ENV: &str = "ITERION_SANDBOX_EXEC_AGENT";

/// How long the agent has to greet; a static binary on a local engine greets in milliseconds.
const READY_WITHIN: Duration = Duration::from_secs(10);

/// Whether `env` leaves the agent on.
pub(crate) fn exec_agent_enabled(env: &Environment) -> bool {
    !env.get(EXEC_AGENT_ENV).is_some_and(|value| {
        matches!(
            value.trim().to_ascii_lowercase().as_str(),
            "0" | "false" | "off" | "no"
        )
    })
}

/// `run` with its execs sent through an agent started from `engine_bin`, or `run` as it is.
pub(crate) async fn with_exec_agent(
    run: Arc<dyn SandboxRun>,
    engine_bin: &str,
    env: &Environment,
    run_log: &dyn RunLog,
) -> Arc<dyn SandboxRun> {
    if !exec_agent_enabled(env) {
        run_log.line(
            LogLevel::Info,
            &format!(
                "sandbox: exec agent off ({EXEC_AGENT_ENV}); node commands use the driver's exec"
            ),
        );
        return run;
    }
    if run.exec_spawns_directly() {
        run_log.line(
            LogLevel::Debug,
            &format!(
                "sandbox: no exec agent: the {} driver's exec is already a direct spawn",
                run.driver()
            ),
        );
        return run;
    }
    if let Some(attached) = run.take_attached_agent() {
        run_log.line(
            LogLevel::Debug,
            "sandbox: exec agent is the sandbox's command; node commands go through it",
        );
        return Arc::new(attach_exec_agent(run, attached));
    }
    let argv = vec![engine_bin.to_owned(), EXEC_AGENT_SUBCOMMAND.to_owned()];
    match start_exec_agent(Arc::clone(&run), argv, READY_WITHIN).await {
        Ok(agent) => Arc::new(agent),
        Err(why) => {
            run_log.line(
                LogLevel::Warn,
                &format!(
                    "sandbox: exec agent unavailable ({why}); node commands use the driver's exec"
                ),
            );
            run
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_explicit_off_value_turns_the_agent_off() {
        for off in ["0", "false", "OFF", " no "] {
            let env = Environment::empty().with(EXEC_AGENT_ENV, off);
            assert!(!exec_agent_enabled(&env), "{off}");
        }
        for on in ["1", "true", "", "yes"] {
            let env = Environment::empty().with(EXEC_AGENT_ENV, on);
            assert!(exec_agent_enabled(&env), "{on}");
        }
        assert!(exec_agent_enabled(&Environment::empty()));
    }
}
