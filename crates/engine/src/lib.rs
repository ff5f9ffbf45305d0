//! iterion-engine: runs a compiled workflow.
//!
//! [`Engine::run`] admits a run, resolves and starts its sandbox (the seed's steps 3–19), executes
//! nodes, records every decision as an event and tears everything down. It is the only crate that
//! knows both the workflow (`iterion-dsl`) and the sandbox (`iterion-sandbox`), and the only place
//! that decides degrade versus refuse. The agent loop and the runner protocol, which also run
//! inside the container, are `iterion-agent`'s; this crate runs them as a node kind.
//!
//! The crate has five rooms:
//!
//! - **`launcher/`** — [`Engine`] and every `impl Engine` block: one attempt of a run
//!   (`Engine::run`): the launch checks ([`resolve_vars`], [`resolve_secrets`]), the run record in
//!   the [`iterion_store::Store`] with its lease, admission (SANDBOX.md §10), the workspace
//!   (`worktree: auto`, DSL.md §7.6), the sandbox, the executor, teardown in every outcome, the
//!   final record and the terminal event; [`Engine::resume`] takes a `failed_resumable` run again;
//!   the fleet worker ([`run_worker`]) drains queued runs; subbot children that need a sandbox of
//!   their own get a whole attempt; [`Engine::boot_maintenance`] recovers crashed runs and reaps
//!   orphaned containers (SANDBOX.md §12).
//! - **`executor/`** — [`Execution`]: given a compiled [`dsl::ir::Workflow`], resolved vars and a
//!   [`SandboxRun`](iterion_sandbox::SandboxRun), it runs the graph exactly as DSL.md §5–§6 say —
//!   node input (§5.3), edge selection (§5.4), loops (§5.5), `fan_out_all` and joins (§5.6),
//!   budgets and outcomes (§5.7), tool, agent and subbot nodes (§6.1, §6.2, §3.9) — and returns a
//!   [`RunOutcome`] with a resume [`Checkpoint`]. Agent and judge nodes run the claw loop in this
//!   process on the host when the run is unsandboxed, and inside the container through
//!   `iterion __claw-runner` otherwise (SANDBOX.md §13).
//! - **`sandbox/`** — orchestration around a driver: `resolve_and_start_sandbox`, the one place
//!   where an absent container runtime degrades (`auto`) or refuses (`inline`); the repository's
//!   devcontainer fused with the workflow block and the operator overlay (SANDBOX.md §7), a
//!   hostile one refusing the run; the mount plan; the per-run egress proxy and bridge, with
//!   gateway credentials for the model keys (§6.10, §13.1b); file-secret delivery; devbox
//!   provisioning (§15); the scratch dir and its bank (§8.3); the worktree git-dir mount; an
//!   untrusted run's workspace copy and its landing as a branch; the teardown.
//! - **`records/`** — the [`Event`] enum of every event the engine emits (SANDBOX.md §9.1), the
//!   stable [`FailureCode`]s (DSL.md §5.7, SANDBOX.md §9.2), the sinks, the store-backed records
//!   and the [`RunObserver`], and secret redaction (the `Redactor`).
//! - **`preflight/`** — the strict battery of `iterion sandbox doctor --strict` and of the
//!   pre-flight (`ITERION_SANDBOX_PREFLIGHT`), [`build_strict_report`]: the run's own resolution,
//!   read-only probes bounded by `ITERION_SANDBOX_DOCTOR_TIMEOUT`, one `{id, status, summary,
//!   remediation, duration_ms}` row per check (SANDBOX.md §11); and the basic report.
//!
//! How it is built, and why:
//!
//! - **One code path.** Tool nodes always execute through a `&dyn SandboxRun`: a container's, or
//!   the noop driver's host run when the run is unsandboxed. The executor never knows which.
//! - **Pure decisions, thin I/O.** Edge selection, input construction, schema conformance and
//!   budget parsing are functions over values; only the tool step and the sinks do I/O.
//! - **One task, no spawning.** Fan-out branches are futures of the run's task. Stopping is a
//!   cancellation token: dropping an exec future kills its command, so a cancelled branch is
//!   killed, never awaited.
//! - **Recorded text is redacted.** Events, run-log lines, messages, outputs in the outcome and
//!   the checkpoint replace every resolved secret value by `[REDACTED:<NAME>]`; rendering itself
//!   only ever produces placeholders and mount paths (DSL.md §7.5).
//! - **Files import downwards.** Inside each room a file never imports one that imports it back;
//!   what children share lives in a leaf file (`scripts/check-architecture.py` checks it).
#![deny(missing_docs)]

mod executor;
mod launcher;
mod preflight;
mod records;
mod sandbox;

pub use async_trait::async_trait;
pub use iterion_dsl as dsl;

pub use executor::agent::operator::{Operator, PausedAgent, PausedDelegate};
pub use executor::budget::{BudgetError, RunBudget};
pub use executor::checkpoint::{
    CHECKPOINT_VERSION, Checkpoint, LoopCounter, NextNode, NodeStart, ResumeError, RewindError,
};
pub use executor::error::ExecutionError;
pub use executor::execution::Execution;
pub use executor::outcome::{RunOutcome, RunReport};
pub use iterion_agent::envelope::{Envelope, EnvelopeReader, EnvelopeWriter};
pub use iterion_agent::runner::TaskData;
pub use iterion_agent::wire::Usage;
pub use iterion_vocab::LogStream;
pub use iterion_vocab::{Disposition, FailureCode, MAX_DELIVERIES, OutcomeStatus};
pub use launcher::admission::AdmissionError;
pub use launcher::cancel::{
    CancelError, CancelOutcome, PHASE_QUEUED, cancellable, request_cancel, wait_stopped,
};
pub use launcher::engine::{
    Engine, EngineError, ResumeRequest, RunControl, RunRequest, RunSummary,
};
pub use launcher::fleet::{
    Delivery, WorkerOptions, WorkerReport, redeliver_interrupted, run_worker,
};
pub use launcher::launch::{
    LaunchError, LaunchOptions, resolve_secrets, resolve_vars, resolve_vars_with_preset,
    workflow_hash, workflow_hash_at,
};
pub use launcher::reaper::{
    DEFAULT_REAP_INTERVAL, INTERRUPTED_MESSAGE, ITERION_SANDBOX_REAP_INTERVAL, LivenessSource,
    ReapReport, Verdict, reap_cloud, reap_interval, reap_local, reapable, recover_interrupted,
    run_sandbox_reaper, sandbox_resource_reapable, survey_local,
};
pub use preflight::{
    BasicReport, Check, CheckId, CheckStatus, ContainerNeeds, Counts, DEFAULT_DOCTOR_TIMEOUT,
    HostClass, ITERION_SANDBOX_DOCTOR_TIMEOUT, ITERION_SANDBOX_PREFLIGHT, PreflightError,
    PreflightRequest, PreflightSetup, SCHEMA_VERSION, StrictReport, Target, build_basic_report,
    build_strict_report, doctor_timeout_from_env, preflight_sandbox, sandbox_preflight_enabled,
};
pub use records::agent_events::{
    AgentToolCall, AgentTurn, TRANSCRIPT_TEXT_MAX, bound_transcript_text,
};
pub use records::events::{
    ArtifactPublished, BudgetDimension, BudgetExceeded, CancelRequested, EdgeConditionError,
    EdgeSelected, Event, LoopExhausted, NodeFailed, NodeFinished, NodeKindLabel, NodeStarted,
    PHASE_EXECUTION, RunCancelled, RunFailed, RunFinished, RunPaused, RunRewound, RunStarted,
};
pub use records::record::{NoObserver, RunObserver};
pub use records::sandbox_events::{
    Adoption, AttachmentRecord, BUILD_ERROR_MAX_BYTES, DevboxTarget, DrainFailure, NetworkBlocked,
    PINNED_NOOP_REASON, SandboxAttachmentsCopied, SandboxBuildFailed, SandboxBuildFinished,
    SandboxBuildStarted, SandboxClawRoutedViaRunner, SandboxDevboxProvisioned, SandboxEnvDenied,
    SandboxHostBindsDropped, SandboxHostStateMounted, SandboxImageEnvPlanted,
    SandboxLimitsNotApplied, SandboxNetworkDefaulted, SandboxRunfilesDrainFailed,
    SandboxScratchBanked, SandboxScratchRestored, SandboxShared, SandboxSkipped, SandboxStarted,
    SandboxUidMismatchWarning, SandboxUserRemap, SandboxWorkspaceCopied,
    SandboxWorkspaceExportFailed, SandboxWorkspaceLanded, SkippedMount,
};
pub use records::secrets::ResolvedSecret;
pub use records::sink::{EventSink, LogLine, MemoryEventSink, MemoryRunLog, RunLogSink};
pub use sandbox::attachments::{
    AttachmentError, AttachmentSource, MAX_FILE_BYTES as MAX_ATTACHMENT_BYTES,
    MAX_TOTAL_BYTES as MAX_ATTACHMENTS_TOTAL_BYTES,
};
pub use sandbox::engine_binary::{ContainerBinary, ITERION_BIN, container_binary_for};
pub use sandbox::host::{claw_runner_main, host_sandbox};
/// The ask-user listener's wire format and names, for `iterion __mcp-ask-user`.
pub mod ask_user {
    pub use crate::sandbox::ask_user::{
        ADDR_ENV, AskReply, AskRequest, MCP_SERVER_NAME, MCP_SUBCOMMAND, NODE_ENV,
        QUESTION_MAX_BYTES, REQUEST_MAX_BYTES, RUN_ENV, Reach, SOCKET_ENV, TOKEN_ENV,
    };
}
/// The docker warm pool's detached filler (issue 18): installed by the binary, run by its
/// hidden `__warm-fill` subcommand.
pub use iterion_sandbox_docker::{install_warm_filler, run_fill_job as run_warm_fill_job};
pub use sandbox::host_services::{HostService, HostServiceError, UntrustedHostServices};
pub use sandbox::registry::local_reapers;
pub use sandbox::rundir::runtime_root;
pub use sandbox::worktree::{
    RunWorktree, WorktreeError, WorktreeLanding, create_worktree, workspace_root, worktree_branch,
};
