//! `/api/`: the same data as JSON (documented in docs/studio.md).

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::answer::answer;
use crate::cancel::cancel;
use crate::load::{Failure, ListParams, find_run, follow, list, view_of};
use crate::state::AppState;

/// `GET /api/runs?status=&workflow=&limit=`: `{"runs": [row…]}`, newest first, children nested.
pub(crate) async fn runs(
    State(state): State<AppState>,
    Query(params): Query<ListParams>,
) -> Result<Json<Value>, Failure> {
    let listing = list(&state, &params).await.map_err(Failure::json)?;
    Ok(Json(json!({ "runs": listing.rows })))
}

/// `GET /api/runs/{id}`: the run's whole view.
pub(crate) async fn run(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, Failure> {
    let run = find_run(state.store.as_ref(), &id)
        .await
        .map_err(Failure::json)?;
    let view = view_of(&state, &run).await.map_err(Failure::json)?;
    Ok(Json(view).into_response())
}

#[derive(serde::Deserialize)]
pub(crate) struct EventParams {
    after: Option<u64>,
    follow: Option<String>,
}

/// `GET /api/runs/{id}/events?after=N`: `{"events": [...]}`; with `&follow=1`, server-sent
/// events (`event` per event, then `end`).
pub(crate) async fn events(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(params): Query<EventParams>,
) -> Result<Response, Failure> {
    let run = find_run(state.store.as_ref(), &id)
        .await
        .map_err(Failure::json)?;
    let after = params.after.unwrap_or(0);
    if params
        .follow
        .as_deref()
        .is_some_and(|f| f != "0" && f != "false")
    {
        let stream = follow(state.store.clone(), state.closing.clone(), run.id, after);
        return Ok(Sse::new(stream)
            .keep_alive(KeepAlive::default())
            .into_response());
    }
    let events = state
        .store
        .events(&run.id, after)
        .await
        .map_err(|e| Failure::store(e).json())?;
    Ok(Json(json!({ "events": events })).into_response())
}

#[derive(serde::Deserialize)]
pub(crate) struct LogParams {
    after: Option<u64>,
    node: Option<String>,
}

/// `GET /api/runs/{id}/logs?after=N`: `{"logs": [{run_id, seq, ts, stream, line}…]}`, the run
/// log. `GET /api/runs/{id}/logs?node=ID&after=N`: `{"node_logs": [{run_id, seq, ts, node,
/// stream, text, truncated}…]}`, one node's output (`node=*` for every node's), at most 1000
/// chunks after `seq` N.
pub(crate) async fn logs(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(params): Query<LogParams>,
) -> Result<Response, Failure> {
    let run = find_run(state.store.as_ref(), &id)
        .await
        .map_err(Failure::json)?;
    let after = params.after.unwrap_or(0);
    if let Some(node) = params.node.filter(|n| !n.is_empty()) {
        let mut query = iterion_store::NodeLogQuery::after(after);
        if node != "*" {
            query = query.node(node);
        }
        let chunks = state
            .store
            .node_logs(&run.id, &query)
            .await
            .map_err(|e| Failure::store(e).json())?;
        return Ok(Json(json!({ "node_logs": chunks })).into_response());
    }
    let logs = state
        .store
        .logs(&run.id, after)
        .await
        .map_err(|e| Failure::store(e).json())?;
    Ok(Json(json!({ "logs": logs })).into_response())
}

#[derive(serde::Deserialize)]
pub(crate) struct AnswerBody {
    answer: String,
}

/// `POST /api/runs/{id}/answer` `{"answer": "…"}` with `Authorization: Bearer TOKEN`: 202
/// `{"run_id", "status": "resuming"}`.
pub(crate) async fn answer_api(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Json(body): Json<AnswerBody>,
) -> Result<Response, Failure> {
    state
        .access
        .check_write(&headers, None)
        .map_err(|d| Failure::denied(d).json())?;
    let run = find_run(state.store.as_ref(), &id)
        .await
        .map_err(Failure::json)?;
    answer(&state, &run, body.answer)
        .await
        .map_err(Failure::json)?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"run_id": run.id, "status": "resuming"})),
    )
        .into_response())
}

/// `POST /api/runs/{id}/cancel` with `Authorization: Bearer TOKEN`: cancels the run and waits
/// (a few seconds at most) for it to stop; 200 `{"run_id", "status", "failure_code"}` with the
/// status then (`cancelled`, or still `running` while its process winds down). 409 `RUN_OVER`
/// for a run that is over.
pub(crate) async fn cancel_api(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, Failure> {
    state
        .access
        .check_write(&headers, None)
        .map_err(|d| Failure::denied(d).json())?;
    let run = find_run(state.store.as_ref(), &id)
        .await
        .map_err(Failure::json)?;
    let run = cancel(&state, &run).await.map_err(Failure::json)?;
    Ok(Json(json!({
        "run_id": run.id,
        "status": run.status.as_str(),
        "failure_code": run.failure_code,
    }))
    .into_response())
}
