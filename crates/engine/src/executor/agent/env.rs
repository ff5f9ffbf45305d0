//! What agent nodes need from the launcher ([`AgentEnv`]): every node's model route, where the
//! loop runs ([`AgentPlace`]), who answers `ask_user`, the answer a resumed run brings, and the
//! ask-user channel of delegate nodes ([`AskChannel`]).

use std::path::PathBuf;
use std::sync::Arc;

use iterion_agent::provider::Routes;

use crate::executor::agent::delegate_state::DelegateState;
use crate::executor::agent::launcher::Launcher;
use crate::executor::agent::operator::Operator;
use crate::sandbox::host::HostPath;

/// Where agent nodes run.
#[derive(Clone)]
pub(crate) enum AgentPlace {
    /// In this process; the file tools work in `workspace` on the host, and its commands get
    /// the host devbox `PATH` (SANDBOX.md §15), when there is one.
    InProcess {
        workspace: PathBuf,
        path: Option<HostPath>,
    },
    /// In the run's container, through the runner.
    Runner(Arc<Launcher>),
}

/// What agent nodes need from the launcher.
#[derive(Clone)]
pub(crate) struct AgentEnv {
    /// Every agent node's model.
    pub routes: Routes,
    /// Where the loop runs.
    pub place: AgentPlace,
    /// Who answers `ask_user` at once, if anyone.
    pub operator: Option<Arc<dyn Operator>>,
    /// The operator's answer to the question the run paused on (`iterion resume --answer`).
    pub answer: Option<String>,
    /// What the run's delegate nodes share (their CLI sessions, the host config dir).
    pub delegates: Arc<DelegateState>,
    /// The delegate CLIs' subscription logins, for nodes without an API key.
    pub forfaits: crate::sandbox::forfait::Forfaits,
    /// The run's ask-user listener, when an `interaction: ask` delegate node can reach one.
    pub ask_user: Option<AskChannel>,
}

/// How a delegate CLI's `ask_user` reaches the engine (the `sandbox::ask_user` module).
#[derive(Clone)]
pub(crate) struct AskChannel {
    /// The run's listener (shared by the subbot children that adopt its sandbox).
    pub listener: Arc<crate::sandbox::ask_user::AskUserListener>,
    /// The iterion binary the CLI runs as its `iterion` MCP server, where it runs.
    pub command: String,
}
