//! iterion-engine: runs a compiled workflow.
//!
//! `Engine::run` admits a run, resolves and starts its sandbox (the seed's steps 3–19), executes
//! nodes, records every decision as an event and tears everything down. It is the only crate that
//! knows both the workflow (`iterion-dsl`) and the sandbox (`iterion-sandbox`), and the only place
//! that decides degrade versus refuse.
//!
//! This part of the crate is the **executor** ([`Execution`]): given a compiled
//! [`dsl::ir::Workflow`], resolved vars and a [`SandboxRun`](iterion_sandbox::SandboxRun), it runs
//! the graph exactly as DSL.md §5–§6 say — node input (§5.3), edge selection (§5.4), loops (§5.5),
//! `fan_out_all` and joins (§5.6), budgets and outcomes (§5.7), tool nodes (§6.1) — and returns a
//! [`RunOutcome`] with a resume [`Checkpoint`]. Around it: the [`Event`] enum of every event the
//! engine emits (SANDBOX.md §9.1), the stable [`FailureCode`]s (DSL.md §5.7, SANDBOX.md §9.2), the
//! sinks it writes to, secret redaction, and the `worktree: auto` helpers (DSL.md §7.6).
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
//!
//! What it deliberately does not do (yet): admission, sandbox resolution and start, the store
//! wiring, the CLI — the launcher builds those on this API and emits `run_started`, the sandbox
//! events and the final [`RunOutcome::terminal_event`]. Agent and judge nodes are refused at
//! dispatch with `CAPABILITY_UNSUPPORTED` until the agent executor lands.
#![deny(missing_docs)]

mod budget;
mod capture;
mod checkpoint;
mod events;
mod executor;
mod failure;
mod fanout;
mod graph;
mod host;
mod input;
mod outcome;
mod sandbox_events;
mod schema;
mod secrets;
mod select;
mod sink;
mod text;
mod tool;
mod worktree;

pub use iterion_dsl as dsl;

pub use budget::{BudgetError, RunBudget, parse_budget_duration};
pub use capture::{LOG_CAP, STDOUT_CAP};
pub use checkpoint::{CHECKPOINT_VERSION, Checkpoint, LoopCounter, NextNode, ResumeError};
pub use events::{
    BudgetDimension, BudgetExceeded, EdgeConditionError, EdgeSelected, Event, LoopExhausted,
    NodeFailed, NodeFinished, NodeKindLabel, NodeStarted, PHASE_EXECUTION, RunCancelled, RunFailed,
    RunFinished, RunPaused, RunStarted, Usage,
};
pub use executor::{EVENT_OUTPUT_MAX_BYTES, Execution, ExecutionError};
pub use failure::{Disposition, FailureCode, MAX_DELIVERIES, OutcomeStatus};
pub use host::host_sandbox;
pub use outcome::{RunOutcome, RunReport};
pub use sandbox_events::{
    Adoption, BUILD_ERROR_MAX_BYTES, DevboxTarget, DrainFailure, NetworkBlocked,
    PINNED_NOOP_REASON, SandboxAttachmentsCopied, SandboxBuildFailed, SandboxBuildFinished,
    SandboxBuildStarted, SandboxClawRoutedViaRunner, SandboxDevboxProvisioned, SandboxEnvDenied,
    SandboxHostBindsDropped, SandboxHostStateMounted, SandboxImageEnvPlanted,
    SandboxNetworkDefaulted, SandboxRunfilesDrainFailed, SandboxScratchBanked,
    SandboxScratchRestored, SandboxShared, SandboxSkipped, SandboxStarted,
    SandboxUidMismatchWarning, SandboxUserRemap, SandboxWorkspaceExportFailed, SkippedMount,
};
pub use secrets::{Redactor, ResolvedSecret, secret_placeholder};
pub use sink::{
    EventSink, LogLine, LogStream, MemoryEventSink, MemoryRunLog, NullRunLog, RunLogSink,
};
pub use worktree::{
    RunWorktree, WorktreeError, WorktreeLanding, create_worktree, workspace_root, worktree_branch,
};
