//! Reading what the pages and the API show, and the one error type their handlers return.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::sse::Event as SseEvent;
use axum::response::{Html, IntoResponse, Response};
use futures_util::Stream;
use iterion_store::{
    Event, NodeLog, NodeLogQuery, Run, RunId, RunQuery, RunStatus, Store, Timestamp,
};

use crate::pages::error_page;
use crate::state::AppState;
use crate::view::{RunRow, RunView, nest, row, run_view, unique_short_ids};

/// How many runs a list reads at most (the page's filters apply to these).
pub(crate) const LIST_SCAN: usize = 500;
/// How many log lines the run page shows (the newest).
pub(crate) const LOG_LINES_SHOWN: usize = 2000;
/// How many node-log chunks the run page reads at most (the oldest first; the API pages on).
pub(crate) const NODE_LOG_CHUNKS_SHOWN: usize = 5000;
/// How often a live stream looks at the store.
const POLL: Duration = Duration::from_millis(400);

/// A handler's failure: its status, a stable code and a message; JSON for `/api/`, HTML else.
#[derive(Debug)]
pub(crate) struct Failure {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub json: bool,
}

impl Failure {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            json: false,
        }
    }

    /// A write refused by [`crate::access::Access::check_write`]: its status and message.
    pub fn denied(d: crate::access::Denied) -> Self {
        Self::new(
            StatusCode::from_u16(d.status).unwrap_or(StatusCode::FORBIDDEN),
            "DENIED",
            d.message,
        )
    }

    pub fn store(e: iterion_store::Error) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "STORE", e.to_string())
    }

    pub fn json(mut self) -> Self {
        self.json = true;
        self
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        if self.json {
            let body = serde_json::json!({"error": {"code": self.code, "message": self.message}});
            (self.status, axum::Json(body)).into_response()
        } else {
            (self.status, Html(error_page(&self.message).into_string())).into_response()
        }
    }
}

/// The run `text` names, as every command resolves it ([`iterion_store::resolve_run`]): a whole
/// id, a prefix only one run has, or `last`.
pub(crate) async fn find_run(store: &dyn Store, text: &str) -> Result<Run, Failure> {
    use iterion_store::Error as E;
    let id = iterion_store::resolve_run(store, text)
        .await
        .map_err(|e| match e {
            E::InvalidRunRef { .. } => {
                Failure::new(StatusCode::BAD_REQUEST, "BAD_RUN_ID", e.to_string())
            }
            E::AmbiguousRunRef { .. } => {
                Failure::new(StatusCode::BAD_REQUEST, "AMBIGUOUS_RUN_ID", e.to_string())
            }
            E::RunNotFound { .. } | E::NoRunMatches { .. } => {
                Failure::new(StatusCode::NOT_FOUND, "RUN_NOT_FOUND", e.to_string())
            }
            e => Failure::store(e),
        })?;
    store
        .get_run(&id)
        .await
        .map_err(Failure::store)?
        .ok_or_else(|| {
            Failure::new(
                StatusCode::NOT_FOUND,
                "RUN_NOT_FOUND",
                format!("run {id} is gone"),
            )
        })
}

/// The runs list's filter.
#[derive(Debug, Default, Clone, serde::Deserialize)]
pub(crate) struct ListParams {
    pub status: Option<String>,
    pub workflow: Option<String>,
    pub limit: Option<usize>,
    pub fragment: Option<String>,
}

impl ListParams {
    /// Empty strings (the form's "any") are no filter.
    pub fn status(&self) -> Result<Option<RunStatus>, Failure> {
        match self.status.as_deref().filter(|s| !s.is_empty()) {
            None => Ok(None),
            Some(s) => RunStatus::parse(s).map(Some).ok_or_else(|| {
                Failure::new(
                    StatusCode::BAD_REQUEST,
                    "BAD_STATUS",
                    format!(
                        "unknown status {s:?}: one of {}",
                        crate::pages::STATUSES.join(", ")
                    ),
                )
            }),
        }
    }

    pub fn workflow(&self) -> Option<&str> {
        self.workflow.as_deref().filter(|s| !s.is_empty())
    }
}

/// A short digest of the newest runs' ids, statuses and versions: it changes whenever the list
/// could.
pub(crate) fn signature(runs: &[Run]) -> String {
    use std::hash::{Hash as _, Hasher as _};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for r in runs {
        r.id.as_str().hash(&mut h);
        r.status.as_str().hash(&mut h);
        r.version.hash(&mut h);
    }
    format!("{:016x}", h.finish())
}

/// What the list shows.
pub(crate) struct Listing {
    /// The rows, nested.
    pub rows: Vec<RunRow>,
    /// Every workflow name seen (for the filter).
    pub workflows: Vec<String>,
    /// The [`signature`] of what was read.
    pub signature: String,
}

/// The rows the list shows (nested), every workflow name seen, and the signature.
pub(crate) async fn list(state: &AppState, params: &ListParams) -> Result<Listing, Failure> {
    let status = params.status()?;
    let limit = params.limit.unwrap_or(200).clamp(1, LIST_SCAN);
    let all = state
        .store
        .list_runs(&RunQuery::newest(LIST_SCAN))
        .await
        .map_err(Failure::store)?;
    let mut workflows: Vec<String> = all.iter().map(|r| r.workflow.clone()).collect();
    workflows.sort();
    workflows.dedup();
    let now = Timestamp::now();
    let mut rows = Vec::new();
    for run in all
        .iter()
        .filter(|r| status.is_none_or(|s| r.status == s))
        .filter(|r| params.workflow().is_none_or(|w| r.workflow == w))
        .take(limit)
    {
        let events = state
            .store
            .events(&run.id, 0)
            .await
            .map_err(Failure::store)?;
        rows.push(row(run, &events, now));
    }
    unique_short_ids(&mut rows);
    Ok(Listing {
        rows: nest(rows),
        workflows,
        signature: signature(&all),
    })
}

/// The whole view of `run`.
pub(crate) async fn view_of(state: &AppState, run: &Run) -> Result<RunView, Failure> {
    let store = &state.store;
    let events = store.events(&run.id, 0).await.map_err(Failure::store)?;
    let mut logs = store.logs(&run.id, 0).await.map_err(Failure::store)?;
    if logs.len() > LOG_LINES_SHOWN {
        logs.drain(..logs.len() - LOG_LINES_SHOWN);
    }
    let node_logs = node_logs_of(store.as_ref(), &run.id, NODE_LOG_CHUNKS_SHOWN).await?;
    let now = Timestamp::now();
    let mut children = Vec::new();
    for child in store
        .list_runs(&RunQuery::newest(LIST_SCAN))
        .await
        .map_err(Failure::store)?
        .iter()
        .filter(|r| r.parent_run_id.as_ref() == Some(&run.id))
    {
        let ev = store.events(&child.id, 0).await.map_err(Failure::store)?;
        children.push(row(child, &ev, now));
    }
    Ok(run_view(run, &events, &logs, &node_logs, children, now))
}

/// The run's node-log chunks, in order, at most `max` (read a page at a time).
pub(crate) async fn node_logs_of(
    store: &dyn Store,
    run_id: &RunId,
    max: usize,
) -> Result<Vec<NodeLog>, Failure> {
    let mut out: Vec<NodeLog> = Vec::new();
    loop {
        let after = out.last().map_or(0, |c| c.seq);
        let page = store
            .node_logs(run_id, &NodeLogQuery::after(after))
            .await
            .map_err(Failure::store)?;
        let full = page.len() >= NodeLogQuery::default().limit;
        out.extend(page);
        if !full || out.len() >= max {
            out.truncate(max);
            return Ok(out);
        }
    }
}

fn sse_of(event: &Event) -> SseEvent {
    SseEvent::default()
        .event("event")
        .id(event.seq.to_string())
        .data(serde_json::to_string(event).unwrap_or_else(|_| "{}".to_owned()))
}

/// Sleeps `d`; `false` when the server is closing instead.
async fn pause(closing: &mut tokio::sync::watch::Receiver<bool>, d: Duration) -> bool {
    if *closing.borrow() {
        return false;
    }
    tokio::select! {
        () = tokio::time::sleep(d) => true,
        _ = closing.changed() => false,
    }
}

struct Follow {
    store: Arc<dyn Store>,
    closing: tokio::sync::watch::Receiver<bool>,
    run_id: RunId,
    after: u64,
    buf: VecDeque<Event>,
    ended: bool,
}

/// The run's events after `after`, then each new one as it is recorded, as server-sent events
/// named `event` (data: the event's JSON); an `end` event (data: `{"status"}`) once the run is
/// in a terminal status and every event was sent.
pub(crate) fn follow(
    store: Arc<dyn Store>,
    closing: tokio::sync::watch::Receiver<bool>,
    run_id: RunId,
    after: u64,
) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    let start = Follow {
        store,
        closing,
        run_id,
        after,
        buf: VecDeque::new(),
        ended: false,
    };
    futures_util::stream::unfold(start, |mut st| async move {
        loop {
            if let Some(ev) = st.buf.pop_front() {
                let msg = sse_of(&ev);
                return Some((Ok(msg), st));
            }
            if st.ended {
                return None;
            }
            // The status and the lease first, then the events: the engine records the run's
            // last event before it lets go of the lease, so once a terminal run holds no lease
            // the events call below reads everything (the status alone turns terminal before
            // `run_finished` is appended).
            let run = st.store.get_run(&st.run_id).await;
            let leased = st.store.lease_held(&st.run_id).await;
            let events = st.store.events(&st.run_id, st.after).await;
            match (run, leased, events) {
                (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                    st.ended = true;
                    let msg = SseEvent::default().event("error").data(e.to_string());
                    return Some((Ok(msg), st));
                }
                (Ok(run), Ok(leased), Ok(events)) => {
                    if let Some(last) = events.last() {
                        st.after = last.seq;
                        st.buf.extend(events);
                        continue;
                    }
                    let terminal = run.as_ref().is_none_or(|r| r.status.is_terminal()) && !leased;
                    if terminal {
                        st.ended = true;
                        let status = run.map_or("gone", |r| r.status.as_str());
                        let msg = SseEvent::default()
                            .event("end")
                            .data(serde_json::json!({"status": status}).to_string());
                        return Some((Ok(msg), st));
                    }
                }
            }
            if !pause(&mut st.closing, POLL).await {
                return None;
            }
        }
    })
}

/// A `changed` event whenever the newest runs (ids, statuses, versions) differ from the last
/// look; the first look is compared with `since`, the [`signature`] the page was rendered from
/// (none: a `changed` at once).
pub(crate) fn watch_runs(
    store: Arc<dyn Store>,
    closing: tokio::sync::watch::Receiver<bool>,
    since: Option<String>,
) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    let start = (store, closing, since);
    futures_util::stream::unfold(start, |(store, mut closing, last)| async move {
        loop {
            let sig = match store.list_runs(&RunQuery::newest(LIST_SCAN)).await {
                Ok(runs) => signature(&runs),
                Err(_) => String::new(),
            };
            if last.as_deref() != Some(sig.as_str()) {
                let msg = SseEvent::default().event("changed").data("{}");
                return Some((Ok(msg), (store, closing, Some(sig))));
            }
            if !pause(&mut closing, POLL * 2).await {
                return None;
            }
        }
    })
}
