//! What every handler shares: the store, the write actions the embedder provides, the access
//! rules.

use std::sync::Arc;

use async_trait::async_trait;
use iterion_store::{Run, Store};

use crate::access::Access;

/// Why a write action was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    /// The run is not in a state that allows the action (HTTP 409).
    #[error("{0}")]
    Conflict(String),
    /// The request itself is wrong (HTTP 400).
    #[error("{0}")]
    BadRequest(String),
    /// The action could not be carried out (HTTP 500).
    #[error("{0}")]
    Failed(String),
}

/// The write actions, carried out by the embedder (the CLI builds an engine for them). The
/// studio checks access, the token and the run's status before calling.
#[async_trait]
pub trait Actions: Send + Sync {
    /// Answers the question `run` (status `paused`) waits on and resumes it in the background.
    /// Returns once the resume has been started, not when the run ends.
    async fn answer(&self, run: &Run, answer: String) -> Result<(), ActionError>;
}

/// The handlers' state.
#[derive(Clone)]
pub(crate) struct AppState {
    pub store: Arc<dyn Store>,
    pub actions: Arc<dyn Actions>,
    pub access: Arc<Access>,
    /// Turns `true` when the server stops: live streams end then, so shutdown never waits on them.
    pub closing: tokio::sync::watch::Receiver<bool>,
}
