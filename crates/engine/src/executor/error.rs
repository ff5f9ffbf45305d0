//! Why a run of the graph could not start.

use crate::executor::budget::BudgetError;
use crate::executor::checkpoint::ResumeError;

/// Why a run could not start (nothing was executed, no event emitted).
#[derive(Debug, thiserror::Error)]
pub enum ExecutionError {
    /// The checkpoint cannot be resumed (`RESUME_INVALID`).
    #[error("cannot resume: {0}")]
    Resume(#[from] ResumeError),
    /// The workflow's budget could not be resolved (only when no budget was given).
    #[error(transparent)]
    Budget(#[from] BudgetError),
}

impl ExecutionError {
    /// `RESUME_INVALID` or `BUDGET_INVALID`.
    pub fn code(&self) -> &'static str {
        match self {
            ExecutionError::Resume(e) => e.code().as_str(),
            ExecutionError::Budget(e) => e.code(),
        }
    }
}
