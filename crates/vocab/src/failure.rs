//! Failure codes, run statuses and dispositions (DSL.md §5.7, SANDBOX.md §9.2).
//!
//! One enum holds every stable code a run can end with, whichever layer found it: the workflow
//! outcomes of DSL.md §5.7, the sandbox setup outcomes of SANDBOX.md §9.2 and the engine's own
//! refusals. Each code knows the status it gives the run and how a runner treats it
//! ([`Disposition`]); both are exhaustive matches, so a new code cannot compile without choosing.
//! Codes are part of the CLI contract and never change once shipped.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The status a run ends with (SANDBOX.md §9.2). The store's lifecycle also has `queued`,
/// `running` and `paused`; the executor only ever ends a run in one of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeStatus {
    /// An edge into `done` was taken.
    Finished,
    /// Ended for good; `iterion resume --force` is the only way back.
    Failed,
    /// Ended, but `iterion resume RUN_ID` retries from the last completed node.
    FailedResumable,
    /// The user (or the embedder's cancellation token) stopped the run.
    Cancelled,
    /// An `ask_user` waits for the operator: `iterion resume RUN_ID --answer TEXT` continues it.
    Paused,
}

impl OutcomeStatus {
    /// The wire spelling: `finished`, `failed`, `failed_resumable`, `cancelled`.
    pub const fn as_str(self) -> &'static str {
        match self {
            OutcomeStatus::Finished => "finished",
            OutcomeStatus::Failed => "failed",
            OutcomeStatus::FailedResumable => "failed_resumable",
            OutcomeStatus::Cancelled => "cancelled",
            OutcomeStatus::Paused => "paused",
        }
    }
}

impl std::fmt::Display for OutcomeStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a runner treats a failed run (SANDBOX.md §9.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Disposition {
    /// Acknowledged and parked, never retried by itself; `iterion resume` retries by hand. Every
    /// workflow-level code is deterministic, even when its status is `failed_resumable`.
    Deterministic,
    /// NAKed and redelivered to a healthy runner after [`FailureCode::redelivery_delay`], at
    /// most [`MAX_DELIVERIES`] times.
    Infrastructure,
    /// Nothing to decide: the user cancelled the run.
    NotApplicable,
}

/// After this many deliveries an infrastructure failure is dead-lettered and keeps
/// `failed_resumable` (SANDBOX.md §9.2).
pub const MAX_DELIVERIES: u32 = 5;

/// A stable failure code (DSL.md §5.7, §3.9; SANDBOX.md §9.2). Serialised as its
/// [`FailureCode::as_str`] spelling.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FailureCode {
    /// An edge into `fail` was taken.
    WorkflowFailed,
    /// A declared `fail NAME:` node was reached: the workflow's own code is the outcome's
    /// `declared_code`, its message the failure message.
    DeclaredFailure,
    /// A declared `fail NAME:` node with `resumable: true` was reached: `iterion resume` runs
    /// the node that routed there again.
    DeclaredFailureResumable,
    /// No outgoing edge of a node could be taken (DSL.md §5.4 step 6).
    NoOutgoingEdge,
    /// A tool exited non-zero (or by a signal), its stdout went over 16 MiB, the exec itself
    /// failed, or an agent errored.
    ExecutionFailed,
    /// An output did not conform to its schema (DSL.md §3.4).
    SchemaValidation,
    /// A command reference could not be resolved (DSL.md §6.1, D10).
    TemplateUnresolved,
    /// A fan-out join failed (DSL.md §5.6).
    JoinFailed,
    /// A loop cap written as a template (`as L("{{…}}")`) did not resolve to an integer from 1
    /// to `MAX_LOOP_CAP` when its edge was checked.
    LoopCapInvalid,
    /// `max_iterations` or `max_duration` was hit (DSL.md §5.7).
    BudgetExceeded,
    /// The engine cannot do what the workflow asks: `interaction: ask` in an active sandbox
    /// without the ask-user channel, `interaction: async` on a sandboxed claw node, and — until
    /// the agent executor lands — any agent or judge node (a refusal at dispatch).
    CapabilityUnsupported,
    /// Subbot nesting went deeper than 8 (DSL.md §3.9).
    SubbotDepthExceeded,
    /// An `inline` sandbox with no container driver (SANDBOX.md §3.7).
    SandboxDriverUnavailable,
    /// A sandbox setup phase went over its bound (SANDBOX.md §16).
    SandboxSetupTimeout,
    /// The sandbox pod was not placed (SANDBOX.md §16.3).
    SandboxCapacity,
    /// Every other sandbox setup error (SANDBOX.md §9.2).
    SandboxSetupFailed,
    /// A typed refusal of subbot sandbox adoption (SANDBOX.md §14).
    SandboxAdoptionRefused,
    /// Admission denied the run (SANDBOX.md §10).
    LaunchFailed,
    /// A resume that cannot restore the scratch dir (SANDBOX.md §8.3); the run keeps its status.
    ScratchNotPortable,
    /// A resume that cannot be honoured (SANDBOX.md §14, or a checkpoint that does not fit the
    /// workflow); the run keeps its status.
    ResumeInvalid,
    /// The run was interrupted, or crash recovery found its lease expired (SANDBOX.md §12).
    Interrupted,
    /// The user cancelled the run.
    Cancelled,
}

impl FailureCode {
    /// Every code, in declaration order.
    pub const ALL: [FailureCode; 22] = [
        FailureCode::WorkflowFailed,
        FailureCode::DeclaredFailure,
        FailureCode::DeclaredFailureResumable,
        FailureCode::NoOutgoingEdge,
        FailureCode::ExecutionFailed,
        FailureCode::SchemaValidation,
        FailureCode::TemplateUnresolved,
        FailureCode::JoinFailed,
        FailureCode::LoopCapInvalid,
        FailureCode::BudgetExceeded,
        FailureCode::CapabilityUnsupported,
        FailureCode::SubbotDepthExceeded,
        FailureCode::SandboxDriverUnavailable,
        FailureCode::SandboxSetupTimeout,
        FailureCode::SandboxCapacity,
        FailureCode::SandboxSetupFailed,
        FailureCode::SandboxAdoptionRefused,
        FailureCode::LaunchFailed,
        FailureCode::ScratchNotPortable,
        FailureCode::ResumeInvalid,
        FailureCode::Interrupted,
        FailureCode::Cancelled,
    ];

    /// The stable spelling (`EXECUTION_FAILED`).
    pub const fn as_str(self) -> &'static str {
        match self {
            FailureCode::WorkflowFailed => "WORKFLOW_FAILED",
            FailureCode::DeclaredFailure => "DECLARED_FAILURE",
            FailureCode::DeclaredFailureResumable => "DECLARED_FAILURE_RESUMABLE",
            FailureCode::NoOutgoingEdge => "NO_OUTGOING_EDGE",
            FailureCode::ExecutionFailed => "EXECUTION_FAILED",
            FailureCode::SchemaValidation => "SCHEMA_VALIDATION",
            FailureCode::TemplateUnresolved => "TEMPLATE_UNRESOLVED",
            FailureCode::JoinFailed => "JOIN_FAILED",
            FailureCode::LoopCapInvalid => "LOOP_CAP_INVALID",
            FailureCode::BudgetExceeded => "BUDGET_EXCEEDED",
            FailureCode::CapabilityUnsupported => "CAPABILITY_UNSUPPORTED",
            FailureCode::SubbotDepthExceeded => "SUBBOT_DEPTH_EXCEEDED",
            FailureCode::SandboxDriverUnavailable => "SANDBOX_DRIVER_UNAVAILABLE",
            FailureCode::SandboxSetupTimeout => "SANDBOX_SETUP_TIMEOUT",
            FailureCode::SandboxCapacity => "SANDBOX_CAPACITY",
            FailureCode::SandboxSetupFailed => "SANDBOX_SETUP_FAILED",
            FailureCode::SandboxAdoptionRefused => "SANDBOX_ADOPTION_REFUSED",
            FailureCode::LaunchFailed => "LAUNCH_FAILED",
            FailureCode::ScratchNotPortable => "SCRATCH_NOT_PORTABLE",
            FailureCode::ResumeInvalid => "RESUME_INVALID",
            FailureCode::Interrupted => "INTERRUPTED",
            FailureCode::Cancelled => "CANCELLED",
        }
    }

    /// The code spelled `word`, exactly.
    pub fn from_str_exact(word: &str) -> Option<FailureCode> {
        FailureCode::ALL.into_iter().find(|c| c.as_str() == word)
    }

    /// The status the run gets, or `None` when the run keeps the status it had (the resume is
    /// refused: `SCRATCH_NOT_PORTABLE`, `RESUME_INVALID`).
    pub fn status(self) -> Option<OutcomeStatus> {
        use OutcomeStatus::{Cancelled, Failed, FailedResumable};
        match self {
            FailureCode::WorkflowFailed
            | FailureCode::DeclaredFailure
            | FailureCode::NoOutgoingEdge
            | FailureCode::TemplateUnresolved
            | FailureCode::JoinFailed
            | FailureCode::LoopCapInvalid
            | FailureCode::BudgetExceeded
            | FailureCode::CapabilityUnsupported
            | FailureCode::SubbotDepthExceeded
            | FailureCode::SandboxDriverUnavailable
            | FailureCode::SandboxSetupFailed
            | FailureCode::SandboxAdoptionRefused
            | FailureCode::LaunchFailed => Some(Failed),
            FailureCode::ExecutionFailed
            | FailureCode::DeclaredFailureResumable
            | FailureCode::SchemaValidation
            | FailureCode::SandboxSetupTimeout
            | FailureCode::SandboxCapacity
            | FailureCode::Interrupted => Some(FailedResumable),
            FailureCode::Cancelled => Some(Cancelled),
            FailureCode::ScratchNotPortable | FailureCode::ResumeInvalid => None,
        }
    }

    /// How a runner treats a run that ended with this code.
    pub fn disposition(self) -> Disposition {
        match self {
            FailureCode::SandboxSetupTimeout
            | FailureCode::SandboxCapacity
            | FailureCode::Interrupted => Disposition::Infrastructure,
            FailureCode::Cancelled => Disposition::NotApplicable,
            FailureCode::WorkflowFailed
            | FailureCode::DeclaredFailure
            | FailureCode::DeclaredFailureResumable
            | FailureCode::NoOutgoingEdge
            | FailureCode::ExecutionFailed
            | FailureCode::SchemaValidation
            | FailureCode::TemplateUnresolved
            | FailureCode::JoinFailed
            | FailureCode::LoopCapInvalid
            | FailureCode::BudgetExceeded
            | FailureCode::CapabilityUnsupported
            | FailureCode::SubbotDepthExceeded
            | FailureCode::SandboxDriverUnavailable
            | FailureCode::SandboxSetupFailed
            | FailureCode::SandboxAdoptionRefused
            | FailureCode::LaunchFailed
            | FailureCode::ScratchNotPortable
            | FailureCode::ResumeInvalid => Disposition::Deterministic,
        }
    }

    /// The re-offer delay of an infrastructure failure: 120 s for `SANDBOX_SETUP_TIMEOUT`, 60 s
    /// for `SANDBOX_CAPACITY`, 0 for `INTERRUPTED`; `None` for every other code.
    pub fn redelivery_delay(self) -> Option<Duration> {
        if self.disposition() != Disposition::Infrastructure {
            return None;
        }
        Some(match self {
            FailureCode::SandboxSetupTimeout => Duration::from_secs(120),
            FailureCode::SandboxCapacity => Duration::from_secs(60),
            // Interrupted, and any infrastructure code without a reason to wait.
            _ => Duration::ZERO,
        })
    }
}

impl std::fmt::Display for FailureCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn serde_spelling_is_the_stable_string() {
        for code in FailureCode::ALL {
            assert_eq!(
                serde_json::to_value(code).ok(),
                Some(serde_json::Value::String(code.as_str().to_owned()))
            );
            assert_eq!(FailureCode::from_str_exact(code.as_str()), Some(code));
        }
    }

    #[test]
    fn statuses_and_dispositions_follow_the_tables() {
        let table: Vec<(&str, Option<&str>, Disposition)> = FailureCode::ALL
            .into_iter()
            .map(|c| (c.as_str(), c.status().map(|s| s.as_str()), c.disposition()))
            .collect();
        use Disposition::{Deterministic as D, Infrastructure as I, NotApplicable as N};
        assert_eq!(
            table,
            vec![
                ("WORKFLOW_FAILED", Some("failed"), D),
                ("DECLARED_FAILURE", Some("failed"), D),
                ("DECLARED_FAILURE_RESUMABLE", Some("failed_resumable"), D),
                ("NO_OUTGOING_EDGE", Some("failed"), D),
                ("EXECUTION_FAILED", Some("failed_resumable"), D),
                ("SCHEMA_VALIDATION", Some("failed_resumable"), D),
                ("TEMPLATE_UNRESOLVED", Some("failed"), D),
                ("JOIN_FAILED", Some("failed"), D),
                ("LOOP_CAP_INVALID", Some("failed"), D),
                ("BUDGET_EXCEEDED", Some("failed"), D),
                ("CAPABILITY_UNSUPPORTED", Some("failed"), D),
                ("SUBBOT_DEPTH_EXCEEDED", Some("failed"), D),
                ("SANDBOX_DRIVER_UNAVAILABLE", Some("failed"), D),
                ("SANDBOX_SETUP_TIMEOUT", Some("failed_resumable"), I),
                ("SANDBOX_CAPACITY", Some("failed_resumable"), I),
                ("SANDBOX_SETUP_FAILED", Some("failed"), D),
                ("SANDBOX_ADOPTION_REFUSED", Some("failed"), D),
                ("LAUNCH_FAILED", Some("failed"), D),
                ("SCRATCH_NOT_PORTABLE", None, D),
                ("RESUME_INVALID", None, D),
                ("INTERRUPTED", Some("failed_resumable"), I),
                ("CANCELLED", Some("cancelled"), N),
            ]
        );
    }

    #[test]
    fn all_lists_every_code_in_declaration_order() {
        let positions: Vec<usize> = FailureCode::ALL.iter().map(|c| *c as usize).collect();
        let expected: Vec<usize> = (0..=FailureCode::Cancelled as usize).collect();
        assert_eq!(positions, expected);
    }

    #[test]
    fn only_infrastructure_codes_are_redelivered() {
        for code in FailureCode::ALL {
            assert_eq!(
                code.redelivery_delay().is_some(),
                code.disposition() == Disposition::Infrastructure,
                "{code}"
            );
        }
    }
}
