//! A run's status and trust in the store's words, and back: the engine's [`OutcomeStatus`] and
//! the sandbox's [`Trust`] as the run record keeps them.

use iterion_sandbox::Trust;
use iterion_store::RunStatus;

use iterion_vocab::OutcomeStatus;

/// The record's status for an outcome.
pub(crate) fn store_status(status: OutcomeStatus) -> RunStatus {
    match status {
        OutcomeStatus::Finished => RunStatus::Finished,
        OutcomeStatus::Failed => RunStatus::Failed,
        OutcomeStatus::FailedResumable => RunStatus::FailedResumable,
        OutcomeStatus::Cancelled => RunStatus::Cancelled,
        OutcomeStatus::Paused => RunStatus::Paused,
    }
}

/// The record's trust.
pub(crate) fn store_trust(trust: Trust) -> iterion_store::Trust {
    match trust {
        Trust::Trusted => iterion_store::Trust::Trusted,
        Trust::Untrusted => iterion_store::Trust::Untrusted,
    }
}

/// The sandbox's trust of a record's.
pub(crate) fn sandbox_trust(trust: iterion_store::Trust) -> Trust {
    match trust {
        iterion_store::Trust::Trusted => Trust::Trusted,
        iterion_store::Trust::Untrusted => Trust::Untrusted,
    }
}
