//! The in-container runner (SANDBOX.md §13): the launcher side that execs
//! `iterion __claw-runner` in the run's container, and the runner side it speaks to.

use iterion_dsl::ir::AgentNode;

use crate::agent::session::{LoopSpec, Snapshot};
use crate::agent::{AgentEnv, AgentResult};
use crate::executor::Ctx;
use crate::failure::FailureCode;
use crate::outcome::Failure;

/// Runs agent nodes inside the run's container.
#[allow(dead_code, reason = "the runner channel uses them")]
pub(crate) struct Launcher {
    run: std::sync::Arc<dyn iterion_sandbox::SandboxRun>,
    logs: std::sync::Arc<dyn crate::sink::RunLogSink>,
}

impl Launcher {
    /// A launcher for the agent nodes of the run in `active`.
    pub(crate) fn new(
        active: &crate::sandbox::ActiveSandbox,
        logs: std::sync::Arc<dyn crate::sink::RunLogSink>,
    ) -> Launcher {
        Launcher {
            run: std::sync::Arc::clone(&active.run),
            logs,
        }
    }

    /// Runs one node through the runner.
    pub(crate) async fn run_node(
        &self,
        _ctx: &Ctx<'_>,
        _env: &AgentEnv,
        id: &str,
        _agent: &AgentNode,
        _spec: &LoopSpec,
        _resume: Option<(Snapshot, String)>,
    ) -> Result<AgentResult, Failure> {
        Err(Failure::new(
            FailureCode::CapabilityUnsupported,
            format!("agent node \"{id}\" cannot run in the sandbox yet"),
        ))
    }
}
