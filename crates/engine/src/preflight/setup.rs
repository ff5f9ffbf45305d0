//! What the battery is asked ([`PreflightRequest`]); what it is given is the engine's
//! `PreflightSetup` (`launcher/setup.rs`).

use std::time::Duration;

use iterion_dsl::ir;
use iterion_sandbox::Trust;

use crate::launcher::launch::LaunchOptions;
use crate::preflight::report::Target;

/// What the battery is asked about.
#[derive(Clone, Copy, Debug)]
pub struct PreflightRequest<'a> {
    /// The workflow's `sandbox:` block; the default block for "no workflow" (the doctor without
    /// `FILE`).
    pub sandbox: &'a ir::Sandbox,
    /// The run's flags and working directory, as `iterion run` would pass them.
    pub options: &'a LaunchOptions,
    /// The run's trust (an untrusted run's host_state is `none`).
    pub trust: Trust,
    /// Which battery: `auto` follows the selected driver.
    pub target: Target,
    /// The bound of each probe.
    pub timeout: Duration,
    /// What the workflow's nodes will exec in the container ([`ContainerNeeds::of`]).
    pub needs: ContainerNeeds,
}

/// What a workflow's nodes exec inside its container, so the doctor can look for it in the image
/// (issue 19: a run that would fail at its first exec fails the strict doctor instead).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContainerNeeds {
    /// A tool node runs `bash -c` (DSL.md §6.1), an agent's `bash` tool too.
    pub bash: bool,
    /// An agent node runs the claw runner: the engine binary, in the container.
    pub agent_runner: bool,
    /// A `claude_code` node runs `claude` from the image's `PATH`.
    pub claude: bool,
    /// A `codex` node runs `codex` from the image's `PATH`.
    pub codex: bool,
}

impl ContainerNeeds {
    /// The delegate CLIs the nodes exec, by program name.
    pub fn clis(&self) -> Vec<&'static str> {
        let mut clis = Vec::new();
        if self.claude {
            clis.push("claude");
        }
        if self.codex {
            clis.push("codex");
        }
        clis
    }

    /// What `workflow`'s nodes need (routers and subbots exec nothing themselves).
    pub fn of(workflow: &ir::Workflow) -> ContainerNeeds {
        let mut needs = ContainerNeeds::default();
        for node in &workflow.nodes {
            match &node.body {
                ir::NodeBody::Tool(t) => {
                    // A script runs its own interpreter; only `bash` scripts need bash.
                    if matches!(t.script, None | Some(ir::ScriptLanguage::Bash)) {
                        needs.bash = true;
                    }
                }
                ir::NodeBody::Router(_) | ir::NodeBody::Human(_) if node.body.model().is_some() => {
                    // An llm router on a delegate backend execs that CLI instead.
                    match node.body.backend() {
                        ir::Backend::Claw => needs.agent_runner = true,
                        ir::Backend::ClaudeCode => needs.claude = true,
                        ir::Backend::Codex => needs.codex = true,
                    }
                }
                ir::NodeBody::Agent(agent) => match agent.backend {
                    ir::Backend::Claw => {
                        needs.bash = true;
                        needs.agent_runner = true;
                    }
                    // A delegate node execs its CLI (whose own shell tool wants bash).
                    ir::Backend::ClaudeCode => {
                        needs.bash = true;
                        needs.claude = true;
                    }
                    ir::Backend::Codex => {
                        needs.bash = true;
                        needs.codex = true;
                    }
                },
                ir::NodeBody::Router(_)
                | ir::NodeBody::Subbot(_)
                | ir::NodeBody::Compute(_)
                | ir::NodeBody::Fail(_)
                | ir::NodeBody::Human(_) => {}
            }
        }
        needs
    }
}
