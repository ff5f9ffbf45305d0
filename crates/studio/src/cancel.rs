//! Cancelling a run: the other write action, shared by the page's button and the API. The
//! policy is the engine's ([`iterion_engine::request_cancel`]): the request is recorded in the
//! store and the process executing the run (this one or another, on another host) stops it.

use std::time::Duration;

use axum::http::StatusCode;
use iterion_engine::{CancelError, CancelOutcome, request_cancel, wait_stopped};
use iterion_store::Run;

use crate::load::Failure;
use crate::state::AppState;

/// How long a cancel waits for the run to stop before answering (the page follows it live
/// anyway).
const WAIT: Duration = Duration::from_secs(10);

/// Who the request names.
const BY: &str = "studio";

/// Cancels `run` and waits (at most [`WAIT`]) for it to stop; returns it as it is then.
pub(crate) async fn cancel(state: &AppState, run: &Run) -> Result<Run, Failure> {
    match request_cancel(state.store.as_ref(), &run.id, BY).await {
        Ok(CancelOutcome::Cancelled(run)) => Ok(run),
        Ok(CancelOutcome::Requested(_)) => wait_stopped(state.store.as_ref(), &run.id, WAIT)
            .await
            .map_err(Failure::store),
        Err(e @ CancelError::Over { .. }) => {
            Err(Failure::new(StatusCode::CONFLICT, e.code(), e.to_string()))
        }
        Err(CancelError::Store(e)) => Err(Failure::store(e)),
    }
}
