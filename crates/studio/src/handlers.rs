//! The HTML pages' handlers.

use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, header};
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Redirect, Response};
use iterion_store::RunId;

use crate::answer::answer;
use crate::assets;
use crate::cancel::cancel;
use crate::load::{Failure, ListParams, find_run, follow, list, view_of, watch_runs};
use crate::pages::{Filter, run_fragment, run_page, runs_page, runs_rows};
use crate::state::AppState;

/// `GET /`: the runs list (`?fragment=1`: its rows only).
pub(crate) async fn runs(
    State(state): State<AppState>,
    Query(params): Query<ListParams>,
) -> Result<Html<String>, Failure> {
    let listing = list(&state, &params).await?;
    if params.fragment.is_some() {
        return Ok(Html(runs_rows(&listing.rows).into_string()));
    }
    let filter = Filter {
        status: params.status.clone().filter(|s| !s.is_empty()),
        workflow: params.workflow().map(str::to_owned),
    };
    Ok(Html(
        runs_page(
            &listing.rows,
            &filter,
            &listing.workflows,
            &listing.signature,
        )
        .into_string(),
    ))
}

#[derive(serde::Deserialize)]
pub(crate) struct RunParams {
    fragment: Option<String>,
}

/// `GET /runs/{id}`: one run (`?fragment=1`: its live part only).
pub(crate) async fn run(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(params): Query<RunParams>,
) -> Result<Html<String>, Failure> {
    let run = find_run(state.store.as_ref(), &id).await?;
    let view = view_of(&state, &run).await?;
    let token = state.access.token();
    Ok(Html(if params.fragment.is_some() {
        run_fragment(&view, token).into_string()
    } else {
        run_page(&view, token).into_string()
    }))
}

#[derive(serde::Deserialize)]
pub(crate) struct LiveParams {
    after: Option<u64>,
}

/// `GET /runs/{id}/live?after=N`: the run's new events as server-sent events.
pub(crate) async fn live(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(params): Query<LiveParams>,
) -> Result<Response, Failure> {
    let run = find_run(state.store.as_ref(), &id).await?;
    let stream = follow(
        state.store.clone(),
        state.closing.clone(),
        run.id,
        params.after.unwrap_or(0),
    );
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}

#[derive(serde::Deserialize)]
pub(crate) struct WatchParams {
    since: Option<String>,
}

/// `GET /live/runs?since=SIG`: `changed` whenever the newest runs change.
pub(crate) async fn live_runs(
    State(state): State<AppState>,
    Query(params): Query<WatchParams>,
) -> Response {
    Sse::new(watch_runs(
        state.store.clone(),
        state.closing.clone(),
        params.since,
    ))
    .keep_alive(KeepAlive::default())
    .into_response()
}

#[derive(serde::Deserialize)]
pub(crate) struct AnswerForm {
    token: Option<String>,
    answer: String,
}

/// `POST /runs/{id}/answer` (a form: `token`, `answer`): answers a paused run, then back to it.
pub(crate) async fn answer_form(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Form(form): Form<AnswerForm>,
) -> Result<Response, Failure> {
    state
        .access
        .check_write(&headers, form.token.as_deref())
        .map_err(Failure::denied)?;
    let run = find_run(state.store.as_ref(), &id).await?;
    answer(&state, &run, form.answer).await?;
    Ok(Redirect::to(&format!("/runs/{}", run_path(&run.id))).into_response())
}

#[derive(serde::Deserialize)]
pub(crate) struct CancelForm {
    token: Option<String>,
}

/// `POST /runs/{id}/cancel` (a form: `token`): cancels the run, then back to it.
pub(crate) async fn cancel_form(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Form(form): Form<CancelForm>,
) -> Result<Response, Failure> {
    state
        .access
        .check_write(&headers, form.token.as_deref())
        .map_err(Failure::denied)?;
    let run = find_run(state.store.as_ref(), &id).await?;
    cancel(&state, &run).await?;
    Ok(Redirect::to(&format!("/runs/{}", run_path(&run.id))).into_response())
}

fn run_path(id: &RunId) -> String {
    crate::pages::urlencode(id.as_str())
}

/// `GET /static/studio.js`.
pub(crate) async fn js() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        assets::JS,
    )
}

/// `GET /static/studio.css`.
pub(crate) async fn css() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        assets::CSS,
    )
}
