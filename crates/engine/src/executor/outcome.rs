//! What a run ends with (DSL.md §5.7): the [`RunOutcome`], the resume [`Checkpoint`] beside it,
//! and the run-level event the launcher records last.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::executor::checkpoint::Checkpoint;
use crate::records::events::{Event, PHASE_EXECUTION, RunCancelled, RunFailed, RunFinished};
use iterion_vocab::{FailureCode, OutcomeStatus};

/// How a run ended. Every text in it is redacted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunOutcome {
    /// `finished`, `failed`, `failed_resumable` or `cancelled` (from the code, DSL.md §5.7).
    pub status: OutcomeStatus,
    /// Set exactly when the status is not `finished`.
    pub failure_code: Option<FailureCode>,
    /// What went wrong: the node, the reason, and for a failed command the tails of both
    /// streams.
    pub message: Option<String>,
    /// The node that most recently finished.
    pub last_completed_node: Option<String>,
    /// The output of the node that took the edge into `done` (a subbot's result, DSL.md §3.9).
    pub final_output: Option<Value>,
    /// The latest output of every node that produced one.
    pub outputs: BTreeMap<String, Value>,
    /// When a `fail NAME:` node ended the run: the workflow's own code (`failure_code` is then
    /// `DECLARED_FAILURE` or `DECLARED_FAILURE_RESUMABLE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared_code: Option<String>,
    /// With status `paused`: the question the run waits on (its `run_paused` event).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<crate::records::events::RunPaused>,
}

impl RunOutcome {
    /// The run-level event for this outcome: `run_finished`, `run_failed` (with `resumable:
    /// true` for `failed_resumable`) or `run_cancelled`, all with phase [`PHASE_EXECUTION`]. The
    /// launcher emits it last, after teardown and worktree handling.
    pub fn terminal_event(&self, duration_ms: u64) -> Event {
        let message = self.message.clone().unwrap_or_default();
        match self.status {
            OutcomeStatus::Finished => Event::RunFinished(RunFinished {
                status: OutcomeStatus::Finished,
                duration_ms,
            }),
            OutcomeStatus::Paused => Event::RunPaused(self.paused.clone().unwrap_or_else(|| {
                crate::records::events::RunPaused {
                    node: self.last_completed_node.clone().unwrap_or_default(),
                    question: message.clone(),
                    options: None,
                }
            })),
            OutcomeStatus::Cancelled => Event::RunCancelled(RunCancelled {
                reason: message,
                phase: PHASE_EXECUTION.to_owned(),
            }),
            OutcomeStatus::Failed | OutcomeStatus::FailedResumable => Event::RunFailed(RunFailed {
                error: message,
                phase: PHASE_EXECUTION.to_owned(),
                code: self.failure_code,
                resumable: (self.status == OutcomeStatus::FailedResumable).then_some(true),
            }),
        }
    }
}

/// The executor's result: the outcome, and the checkpoint `iterion resume` restarts from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// How the run ended.
    pub outcome: RunOutcome,
    /// Where it got to (redacted).
    pub checkpoint: Checkpoint,
}

/// The longest stream tail kept in a failure (4 KiB).
pub(crate) const TAIL_BYTES: usize = 4096;

/// A failure inside the executor, before redaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Failure {
    pub code: FailureCode,
    pub message: String,
    /// The node it happened at.
    pub node: Option<String>,
    pub exit_code: Option<i64>,
    /// Already redacted, ≤ [`TAIL_BYTES`].
    pub stderr_tail: Option<String>,
    /// Already redacted, ≤ [`TAIL_BYTES`].
    pub stdout_tail: Option<String>,
    /// Not a failure: the node paused on `ask_user` (the checkpoint holds the question).
    pub paused: bool,
}

impl Failure {
    pub(crate) fn new(code: FailureCode, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
            node: None,
            exit_code: None,
            stderr_tail: None,
            stdout_tail: None,
            paused: false,
        }
    }

    /// A `fail NAME:` node's failure: the engine's code, and the node's own code leading the
    /// message (`CODE: message`, where [`Failure::declared_code`] reads it back).
    pub(crate) fn declared(resumable: bool, code: &str, message: &str) -> Failure {
        let engine_code = if resumable {
            FailureCode::DeclaredFailureResumable
        } else {
            FailureCode::DeclaredFailure
        };
        Failure::new(engine_code, format!("{code}: {message}"))
    }

    /// The workflow's own code of a [`Failure::declared`] failure (an `UPPER_SNAKE` word, C045,
    /// so it holds no `:`).
    pub(crate) fn declared_code(&self) -> Option<String> {
        matches!(
            self.code,
            FailureCode::DeclaredFailure | FailureCode::DeclaredFailureResumable
        )
        .then(|| self.message.split_once(": ").map(|(c, _)| c.to_owned()))
        .flatten()
    }

    /// The failure, placed at `node` unless it already names one.
    pub(crate) fn at(mut self, node: &str) -> Failure {
        if self.node.is_none() {
            self.node = Some(node.to_owned());
        }
        self
    }

    /// The outcome message: `node "x": message`, then the stream tails.
    pub(crate) fn describe(&self) -> String {
        let mut out = match &self.node {
            Some(node) => format!("node \"{node}\": {}", self.message),
            None => self.message.clone(),
        };
        if let Some(tail) = &self.stderr_tail {
            out.push_str("\n--- stderr (tail) ---\n");
            out.push_str(tail);
        }
        if let Some(tail) = &self.stdout_tail {
            out.push_str("\n--- stdout (tail) ---\n");
            out.push_str(tail);
        }
        out
    }
}
