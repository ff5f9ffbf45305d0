//! [`Attempt`]: everything one attempt of a run needs, whether it launches, resumes, is drained
//! by a fleet worker or is a subbot child with a sandbox of its own.

use iterion_dsl::ir::Workflow;
use iterion_sandbox::SandboxFlag;
use iterion_store::Run;
use serde_json::{Map, Value};

use crate::executor::checkpoint::Checkpoint;
use crate::launcher::launch::LaunchOptions;
use crate::records::failure::FailureCode;
use crate::records::sandbox_events::SandboxShared;
use crate::records::secrets::ResolvedSecret;
use crate::sandbox::resolve::SandboxSettings;

/// Everything one attempt needs.
pub(crate) struct Attempt {
    pub run: Run,
    pub holder: String,
    pub workflow: Workflow,
    pub vars: Map<String, Value>,
    pub secrets: Vec<ResolvedSecret>,
    pub settings: SandboxSettings,
    pub override_env: Option<SandboxFlag>,
    pub launch: LaunchOptions,
    pub checkpoint: Option<Checkpoint>,
    pub resumed: bool,
    /// Every agent node's model, resolved at launch.
    pub routes: iterion_agent::provider::Routes,
    /// `iterion resume --answer`.
    pub answer: Option<String>,
    /// Recorded right after `run_started`: how a subbot child stands towards its parent's
    /// sandbox (SANDBOX.md §14: declined, or a forced resume).
    pub shared: Option<SandboxShared>,
    /// A resume of a `failed_resumable` run: the failure it had before the reopen, which a
    /// refused admission puts back (SANDBOX.md §10, "a refused resume leaves the status as it
    /// was"). `None` for a launch.
    pub prior_failure: Option<(FailureCode, String)>,
}
