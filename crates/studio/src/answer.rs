//! Answering a paused run: the one write action, shared by the form and the API.

use std::time::Duration;

use axum::http::StatusCode;
use iterion_store::{Run, RunStatus};

use crate::load::Failure;
use crate::state::{ActionError, AppState};
use crate::view::run_view;

/// The longest answer accepted.
pub(crate) const ANSWER_MAX: usize = 4096;

/// Checks that `run` waits on a question `answer` fits, hands it to the embedder, and waits (a
/// few seconds at most) for the run to leave `paused`.
pub(crate) async fn answer(state: &AppState, run: &Run, answer: String) -> Result<(), Failure> {
    if run.status != RunStatus::Paused {
        return Err(Failure::new(
            StatusCode::CONFLICT,
            "NOT_PAUSED",
            format!(
                "run {} is {}, not paused: there is no question to answer",
                run.id,
                run.status.as_str()
            ),
        ));
    }
    let answer = answer.trim().to_owned();
    if answer.is_empty() || answer.len() > ANSWER_MAX {
        return Err(Failure::new(
            StatusCode::BAD_REQUEST,
            "BAD_ANSWER",
            format!("an answer is 1 to {ANSWER_MAX} bytes of text"),
        ));
    }
    let events = state
        .store
        .events(&run.id, 0)
        .await
        .map_err(Failure::store)?;
    let view = run_view(run, &events, &[], &[], Vec::new(), run.updated_at);
    if let Some(q) = &view.question
        && !q.options.is_empty()
        && !q.options.contains(&answer)
    {
        return Err(Failure::new(
            StatusCode::BAD_REQUEST,
            "BAD_ANSWER",
            format!(
                "the question offers {}: answer one of them",
                q.options.join(", ")
            ),
        ));
    }
    state
        .actions
        .answer(run, answer)
        .await
        .map_err(|e| match e {
            ActionError::Conflict(m) => Failure::new(StatusCode::CONFLICT, "NOT_PAUSED", m),
            ActionError::BadRequest(m) => Failure::new(StatusCode::BAD_REQUEST, "BAD_ANSWER", m),
            ActionError::Failed(m) => {
                Failure::new(StatusCode::INTERNAL_SERVER_ERROR, "RESUME_FAILED", m)
            }
        })?;
    for _ in 0..50 {
        match state.store.get_run(&run.id).await {
            Ok(Some(r)) if r.status != RunStatus::Paused => break,
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    Ok(())
}
