//! A run's status in the store's words: the engine's [`OutcomeStatus`] as the run record keeps
//! it. (Trust needs no conversion: the workflow, the sandbox and the store share
//! `iterion_vocab::Trust`.)

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
