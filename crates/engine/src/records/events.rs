//! The engine's events (SANDBOX.md §9.1, DSL.md §5): one enum, serialised as
//! `{"type": "…", "data": {…}}`.
//!
//! Every payload is a struct whose fields are exactly the keys of the tables; optional keys are
//! `Option`s skipped when absent, never written as `null` (the one documented exception is
//! `sandbox_started.egress_enforced`, which is `bool | null` and always present). Payloads are
//! recorded as they are given: the executor redacts secret values before it builds them, and so
//! must any other emitter (SANDBOX.md §6.10).
//!
//! The sandbox events live in their own module ([`crate::records::sandbox_events`]); this one holds the run,
//! node and edge events and the [`Event`] enum itself.

use iterion_agent::wire::Usage;
use serde::{Deserialize, Serialize};

use crate::records::agent_events::{AgentToolCall, AgentTurn};
use crate::records::sandbox_events::{
    NetworkBlocked, SandboxAttachmentsCopied, SandboxBuildFailed, SandboxBuildFinished,
    SandboxBuildStarted, SandboxClawRoutedViaRunner, SandboxDevboxProvisioned, SandboxEnvDenied,
    SandboxHostBindsDropped, SandboxHostStateMounted, SandboxImageEnvPlanted,
    SandboxLimitsNotApplied, SandboxNetworkDefaulted, SandboxRunfilesDrainFailed,
    SandboxScratchBanked, SandboxScratchRestored, SandboxShared, SandboxSkipped, SandboxStarted,
    SandboxUidMismatchWarning, SandboxUserRemap, SandboxWorkspaceCopied,
    SandboxWorkspaceExportFailed, SandboxWorkspaceLanded,
};
use iterion_vocab::{FailureCode, OutcomeStatus};

/// One event. `type` is the variant in snake case, `data` its payload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "data", rename_all = "snake_case")]
pub enum Event {
    /// The run began (or resumed). Emitted by the launcher, before any sandbox event.
    RunStarted(RunStarted),
    /// `iterion resume --from NODE` moved the run back to an earlier node, right after
    /// `run_started`: which outputs were dropped to be computed again.
    RunRewound(RunRewound),
    /// A node began.
    NodeStarted(NodeStarted),
    /// A node produced its output.
    NodeFinished(NodeFinished),
    /// A node's output was stored as a named artifact (`publish:`), right after its
    /// `node_finished`.
    ArtifactPublished(ArtifactPublished),
    /// A node failed, or was stopped (cancellation, budget, a failed sibling branch).
    NodeFailed(NodeFailed),
    /// An edge was chosen (DSL.md §5.4 step 8), or a fan-out branch started.
    EdgeSelected(EdgeSelected),
    /// A loop edge was skipped because its counter reached its cap (DSL.md §5.4 step 2).
    LoopExhausted(LoopExhausted),
    /// A `when` condition could not be decided; the edge was not taken (DSL.md §5.2, §5.4).
    EdgeConditionError(EdgeConditionError),
    /// A budget cap was hit (DSL.md §5.7).
    BudgetExceeded(BudgetExceeded),
    /// The run waits for an operator's answer.
    RunPaused(RunPaused),
    /// The run finished.
    RunFinished(RunFinished),
    /// The run failed.
    RunFailed(RunFailed),
    /// The run was cancelled.
    RunCancelled(RunCancelled),
    /// Someone asked for the run to be cancelled (`iterion cancel`, the studio): appended by
    /// them, not by the engine; the engine executing the run watches for it and stops the run.
    CancelRequested(CancelRequested),
    /// No sandbox: degraded `auto`, refused `inline`, or the pinned noop driver.
    SandboxSkipped(SandboxSkipped),
    /// The sandbox is running.
    SandboxStarted(SandboxStarted),
    /// A subbot child adopted its parent's sandbox, or did not.
    SandboxShared(SandboxShared),
    /// Host caches and tool state were (or were not) bound into the sandbox.
    SandboxHostStateMounted(SandboxHostStateMounted),
    /// Binds the driver cannot honour were dropped.
    SandboxHostBindsDropped(SandboxHostBindsDropped),
    /// Resource limits the driver cannot apply were left out.
    SandboxLimitsNotApplied(SandboxLimitsNotApplied),
    /// Attachments were copied into a copy-based sandbox.
    SandboxAttachmentsCopied(SandboxAttachmentsCopied),
    /// The container user was remapped.
    SandboxUserRemap(SandboxUserRemap),
    /// The spec's user differs from the host uid.
    SandboxUidMismatchWarning(SandboxUidMismatchWarning),
    /// Devbox tooling was provisioned.
    SandboxDevboxProvisioned(SandboxDevboxProvisioned),
    /// Repository-contributed env keys were refused.
    SandboxEnvDenied(SandboxEnvDenied),
    /// The image's own env was planted into the spec.
    SandboxImageEnvPlanted(SandboxImageEnvPlanted),
    /// A devcontainer-built spec got the default allowlist.
    SandboxNetworkDefaulted(SandboxNetworkDefaulted),
    /// Claw nodes run through the in-container runner.
    SandboxClawRoutedViaRunner(SandboxClawRoutedViaRunner),
    /// An image build began.
    SandboxBuildStarted(SandboxBuildStarted),
    /// An image build finished.
    SandboxBuildFinished(SandboxBuildFinished),
    /// An image build failed.
    SandboxBuildFailed(SandboxBuildFailed),
    /// The container-local scratch was banked at teardown.
    SandboxScratchBanked(SandboxScratchBanked),
    /// The scratch was restored on resume.
    SandboxScratchRestored(SandboxScratchRestored),
    /// An untrusted run's workspace was copied.
    SandboxWorkspaceCopied(SandboxWorkspaceCopied),
    /// An untrusted run's copy was landed (or could not be).
    SandboxWorkspaceLanded(SandboxWorkspaceLanded),
    /// A copy-based workspace could not be exported.
    SandboxWorkspaceExportFailed(SandboxWorkspaceExportFailed),
    /// The run files could not be drained.
    SandboxRunfilesDrainFailed(SandboxRunfilesDrainFailed),
    /// The egress proxy refused a request.
    NetworkBlocked(NetworkBlocked),
    /// An agent's model answered once (claw, delegates).
    AgentTurn(AgentTurn),
    /// An agent called a tool.
    AgentToolCall(AgentToolCall),
}

impl Event {
    /// The `type` string, as stored in the events table.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::RunStarted(_) => "run_started",
            Event::RunRewound(_) => "run_rewound",
            Event::NodeStarted(_) => "node_started",
            Event::NodeFinished(_) => "node_finished",
            Event::ArtifactPublished(_) => "artifact_published",
            Event::NodeFailed(_) => "node_failed",
            Event::EdgeSelected(_) => "edge_selected",
            Event::LoopExhausted(_) => "loop_exhausted",
            Event::EdgeConditionError(_) => "edge_condition_error",
            Event::BudgetExceeded(_) => "budget_exceeded",
            Event::RunPaused(_) => "run_paused",
            Event::RunFinished(_) => "run_finished",
            Event::RunFailed(_) => "run_failed",
            Event::RunCancelled(_) => "run_cancelled",
            Event::CancelRequested(_) => "cancel_requested",
            Event::SandboxSkipped(_) => "sandbox_skipped",
            Event::SandboxStarted(_) => "sandbox_started",
            Event::SandboxShared(_) => "sandbox_shared",
            Event::SandboxHostStateMounted(_) => "sandbox_host_state_mounted",
            Event::SandboxHostBindsDropped(_) => "sandbox_host_binds_dropped",
            Event::SandboxLimitsNotApplied(_) => "sandbox_limits_not_applied",
            Event::SandboxAttachmentsCopied(_) => "sandbox_attachments_copied",
            Event::SandboxUserRemap(_) => "sandbox_user_remap",
            Event::SandboxUidMismatchWarning(_) => "sandbox_uid_mismatch_warning",
            Event::SandboxDevboxProvisioned(_) => "sandbox_devbox_provisioned",
            Event::SandboxEnvDenied(_) => "sandbox_env_denied",
            Event::SandboxImageEnvPlanted(_) => "sandbox_image_env_planted",
            Event::SandboxNetworkDefaulted(_) => "sandbox_network_defaulted",
            Event::SandboxClawRoutedViaRunner(_) => "sandbox_claw_routed_via_runner",
            Event::SandboxBuildStarted(_) => "sandbox_build_started",
            Event::SandboxBuildFinished(_) => "sandbox_build_finished",
            Event::SandboxBuildFailed(_) => "sandbox_build_failed",
            Event::SandboxScratchBanked(_) => "sandbox_scratch_banked",
            Event::SandboxScratchRestored(_) => "sandbox_scratch_restored",
            Event::SandboxWorkspaceCopied(_) => "sandbox_workspace_copied",
            Event::SandboxWorkspaceLanded(_) => "sandbox_workspace_landed",
            Event::SandboxWorkspaceExportFailed(_) => "sandbox_workspace_export_failed",
            Event::SandboxRunfilesDrainFailed(_) => "sandbox_runfiles_drain_failed",
            Event::NetworkBlocked(_) => "network_blocked",
            Event::AgentTurn(_) => "agent_turn",
            Event::AgentToolCall(_) => "agent_tool_call",
        }
    }

    /// The payload alone, as the JSON object stored in the events table's `data` column.
    pub fn data(&self) -> serde_json::Value {
        match serde_json::to_value(self) {
            Ok(serde_json::Value::Object(mut map)) => map
                .remove("data")
                .unwrap_or_else(|| serde_json::Value::Object(serde_json::Map::new())),
            // Serialising plain structs of strings, numbers and JSON values cannot fail.
            Ok(_) | Err(_) => serde_json::Value::Object(serde_json::Map::new()),
        }
    }
}

/// `node_started.kind` (SANDBOX.md §9.1): the node's kind, spelled as its keyword.
pub use iterion_vocab::NodeKind as NodeKindLabel;

/// `run_rewound`: a resume that starts again at an earlier node (`iterion resume --from`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRewound {
    /// The node the run starts again at, with the input it last started with.
    pub node: String,
    /// The nodes whose outputs were dropped, in the order they had last started: `node` and
    /// those after it. They run again; the nodes before `node` keep their outputs.
    pub dropped_outputs: Vec<String>,
}

/// `run_started` (SANDBOX.md §9.1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunStarted {
    /// The workflow's name.
    pub workflow: String,
    /// The hash of the workflow source.
    pub workflow_hash: String,
    /// `trusted` or `untrusted`.
    pub trust: String,
    /// Whether this is `iterion resume`.
    pub resumed: bool,
    /// The parent run of a subbot child.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run: Option<String>,
    /// The root run of a subbot child.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_run: Option<String>,
}

/// `node_started` (SANDBOX.md §9.1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStarted {
    /// The node id.
    pub node: String,
    /// The node's kind.
    pub kind: NodeKindLabel,
    /// How many times this node has started in this run, this time included (1 first). Loops
    /// and resumes count on.
    pub attempt: u32,
    /// Inside a fan-out branch: the branch's first node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
}

/// `node_finished` (SANDBOX.md §9.1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeFinished {
    /// The node id.
    pub node: String,
    /// Wall-clock time of the node.
    pub duration_ms: u64,
    /// The output, redacted. An output whose compact JSON is over 64 KiB is replaced by a JSON
    /// string holding the first 64 KiB of that text and a truncation note.
    pub output: serde_json::Value,
    /// Token counts (agents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// `artifact_published`: a `publish: NAME` node's output, stored with the run under `NAME`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArtifactPublished {
    /// The artifact's name.
    pub name: String,
    /// The node that published it.
    pub node: String,
    /// 0 for the first publication under this name in the run, then 1, 2, …
    pub version: u32,
    /// The published output, redacted and clamped as `node_finished.output` is.
    pub value: serde_json::Value,
}

/// `node_failed` (SANDBOX.md §9.1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeFailed {
    /// The node id.
    pub node: String,
    /// Why.
    pub code: FailureCode,
    /// What happened, redacted.
    pub message: String,
    /// The exit code of a tool that ran and failed (128 + signal when killed by one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    /// The last 4 KiB of the tool's stderr, redacted; absent when it wrote nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr_tail: Option<String>,
    /// A `fail NAME:` node's own code (`code` is then `DECLARED_FAILURE[_RESUMABLE]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared_code: Option<String>,
}

/// `edge_selected {from, to, condition, loop, iteration}` (DSL.md §5.4 step 8).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EdgeSelected {
    /// The source node.
    pub from: String,
    /// The target: a node id, `done` or `fail`.
    pub to: String,
    /// The condition as written (`approved`, `not approved`, an expression's text, `else`);
    /// absent for an edge without `when` or `else`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
    /// The loop, for an `as L(N)` edge.
    #[serde(default, rename = "loop", skip_serializing_if = "Option::is_none")]
    pub loop_: Option<String>,
    /// The loop's counter after this crossing (1 for the first); present with `loop`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration: Option<u32>,
}

/// `loop_exhausted` (DSL.md §5.4 step 2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoopExhausted {
    /// The source node.
    pub from: String,
    /// The loop edge's target.
    pub to: String,
    /// The loop.
    #[serde(rename = "loop")]
    pub loop_: String,
    /// Its cap N, which the counter has reached.
    pub max: u32,
}

/// `edge_condition_error` (DSL.md §5.2, §5.4): names the edge and the reason.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EdgeConditionError {
    /// The source node.
    pub from: String,
    /// The target.
    pub to: String,
    /// The condition as written (as in [`EdgeSelected::condition`]).
    pub condition: String,
    /// Why it could not be decided.
    pub reason: String,
}

/// Which budget cap was hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetDimension {
    /// `budget.max_iterations`.
    MaxIterations,
    /// `budget.max_duration`.
    MaxDuration,
}

impl BudgetDimension {
    /// `max_iterations` or `max_duration`.
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetDimension::MaxIterations => "max_iterations",
            BudgetDimension::MaxDuration => "max_duration",
        }
    }
}

/// `budget_exceeded {dimension}` (DSL.md §5.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetExceeded {
    /// The cap that was hit.
    pub dimension: BudgetDimension,
}

/// `run_paused` (SANDBOX.md §9.1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunPaused {
    /// The asking node.
    pub node: String,
    /// The question.
    pub question: String,
    /// The choices offered, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<String>>,
}

/// `run_finished {status: "finished", duration_ms}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunFinished {
    /// Always [`OutcomeStatus::Finished`].
    pub status: OutcomeStatus,
    /// Wall-clock time of the run.
    pub duration_ms: u64,
}

/// `run_failed {error, phase, code?, resumable?: true}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunFailed {
    /// What went wrong, redacted.
    pub error: String,
    /// A setup phase label (SANDBOX.md §16.1), `sandbox setup`, or [`PHASE_EXECUTION`] for a
    /// failure after the entry node started.
    pub phase: String,
    /// The failure code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<FailureCode>,
    /// `Some(true)` when the status is `failed_resumable`; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumable: Option<bool>,
}

/// `run_cancelled {reason, phase}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunCancelled {
    /// Why.
    pub reason: String,
    /// As in [`RunFailed::phase`].
    pub phase: String,
}

/// `cancel_requested {by}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelRequested {
    /// Who asked: `iterion cancel`, `studio`.
    pub by: String,
}

/// The `phase` of `run_failed` / `run_cancelled` once the graph is running (defined here; the
/// setup phases are SANDBOX.md §16.1's labels).
pub const PHASE_EXECUTION: &str = "execution";

#[cfg(test)]
#[path = "events_tests.rs"]
mod tests;
