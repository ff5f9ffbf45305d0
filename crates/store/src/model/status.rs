//! The small closed vocabularies of a run record: its status (a state machine), its trust, and
//! the admission verdict.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Where a run is in its life (SANDBOX.md §9.2).
///
/// The lifecycle is a state machine ([`RunStatus::can_transition_to`]); the store refuses a save
/// that breaks it with [`Error::IllegalTransition`](crate::Error::IllegalTransition).
///
/// | from | may move to |
/// |---|---|
/// | `queued` | `running` (claimed), `failed` (refused before it ran), `cancelled` |
/// | `running` | `finished`, `failed`, `failed_resumable`, `cancelled`, `paused` |
/// | `paused` | `running` (answered), `cancelled` |
/// | `failed_resumable` | `running` (`iterion resume`), `queued` (redelivered), `cancelled` |
/// | `finished`, `failed`, `cancelled` | nothing |
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Submitted (`iterion run --submit`), waiting for a runner to claim it.
    Queued,
    /// Being executed by the process that holds its lease.
    Running,
    /// Reached a `done` terminal.
    Finished,
    /// Failed for good (deterministic: parked, never retried by itself).
    Failed,
    /// Failed in a way `iterion resume` (or a runner's redelivery) can retry from the checkpoint.
    FailedResumable,
    /// Stopped by the user.
    Cancelled,
    /// Waiting for an answer (`iterion resume RUN_ID --answer …`).
    Paused,
}

impl RunStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [Self; 7] = [
        Self::Queued,
        Self::Running,
        Self::Finished,
        Self::Failed,
        Self::FailedResumable,
        Self::Cancelled,
        Self::Paused,
    ];

    /// The wire and storage spelling (`failed_resumable`, …).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Finished => "finished",
            Self::Failed => "failed",
            Self::FailedResumable => "failed_resumable",
            Self::Cancelled => "cancelled",
            Self::Paused => "paused",
        }
    }

    /// Parses the storage spelling; `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// Terminal for this attempt: `finished`, `failed`, `failed_resumable`, `cancelled`. No
    /// process is executing a terminal run, so the reaper may collect its resources
    /// (SANDBOX.md §12.1). `failed_resumable` is terminal yet can move on (to `running` or
    /// `queued`) when resumed.
    pub const fn is_terminal(self) -> bool {
        match self {
            Self::Finished | Self::Failed | Self::FailedResumable | Self::Cancelled => true,
            Self::Queued | Self::Running | Self::Paused => false,
        }
    }

    /// Whether `failure_code` may be set in this status (`failed`, `failed_resumable`,
    /// `cancelled`; SANDBOX.md §9.2).
    pub const fn allows_failure(self) -> bool {
        match self {
            Self::Failed | Self::FailedResumable | Self::Cancelled => true,
            Self::Queued | Self::Running | Self::Finished | Self::Paused => false,
        }
    }

    /// The statuses a run may move to from this one (staying put is not listed: it is always
    /// allowed).
    pub const fn successors(self) -> &'static [Self] {
        match self {
            Self::Queued => &[Self::Running, Self::Failed, Self::Cancelled],
            Self::Running => &[
                Self::Finished,
                Self::Failed,
                Self::FailedResumable,
                Self::Cancelled,
                Self::Paused,
            ],
            Self::Paused => &[Self::Running, Self::Cancelled],
            // Resumed by hand (`running`) or redelivered to a runner (`queued`).
            Self::FailedResumable => &[Self::Running, Self::Queued, Self::Cancelled],
            Self::Finished | Self::Failed | Self::Cancelled => &[],
        }
    }

    /// Whether a save may change the status from `self` to `next`. Staying in the same status
    /// is always allowed (a save that updates other fields, e.g. the admission of a refused
    /// resume, SANDBOX.md §10).
    pub fn can_transition_to(self, next: Self) -> bool {
        self == next || self.successors().contains(&next)
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The verdict of the admission gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AdmissionDecision {
    /// The run may proceed.
    Allowed,
    /// The run was refused before any workspace setup or model call.
    Denied,
}

impl AdmissionDecision {
    /// The wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Denied => "denied",
        }
    }
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;
