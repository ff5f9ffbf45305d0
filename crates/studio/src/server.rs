//! The router, the access gate in front of it, the security headers on every answer, and
//! serving.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use iterion_store::Store;

use crate::access::{Access, COOKIE, Granted};
use crate::state::{Actions, AppState};
use crate::{api, handlers};

/// What `iterion studio` is started with.
#[derive(Clone, Debug)]
pub struct StudioOptions {
    /// Where to listen.
    pub listen: SocketAddr,
    /// The token (from `ITERION_STUDIO_TOKEN`, or [`crate::generate_token`]).
    pub token: String,
}

/// The content security policy: nothing inline, nothing from elsewhere.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The studio's routes over `store`, with `actions` for the writes, behind `access`. Live
/// streams end when `closing` turns `true`.
pub fn router(
    store: Arc<dyn Store>,
    actions: Arc<dyn Actions>,
    access: Access,
    closing: tokio::sync::watch::Receiver<bool>,
) -> Router {
    let state = AppState {
        store,
        actions,
        access: Arc::new(access),
        closing,
    };
    Router::new()
        .route("/", get(handlers::runs))
        .route("/runs/{id}", get(handlers::run))
        .route("/runs/{id}/live", get(handlers::live))
        .route("/runs/{id}/answer", post(handlers::answer_form))
        .route("/runs/{id}/cancel", post(handlers::cancel_form))
        .route("/live/runs", get(handlers::live_runs))
        .route("/static/studio.js", get(handlers::js))
        .route("/static/studio.css", get(handlers::css))
        .route("/api/runs", get(api::runs))
        .route("/api/runs/{id}", get(api::run))
        .route("/api/runs/{id}/events", get(api::events))
        .route("/api/runs/{id}/logs", get(api::logs))
        .route("/api/runs/{id}/answer", post(api::answer_api))
        .route("/api/runs/{id}/cancel", post(api::cancel_api))
        .layer(middleware::from_fn_with_state(state.clone(), gate))
        .layer(middleware::from_fn(secure_headers))
        .with_state(state)
}

fn query_token(req: &Request) -> Option<String> {
    let query = req.uri().query()?;
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k == "token").then(|| v.to_owned())
    })
}

/// Lets a request through when [`Access::check_read`] does; sets the cookie after a good
/// `?token=`.
async fn gate(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let token = query_token(&req);
    match state.access.check_read(req.headers(), token.as_deref()) {
        Ok(granted) => {
            let mut res = next.run(req).await;
            if granted == Granted::SetCookie
                && let Ok(v) = HeaderValue::from_str(&format!(
                    "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
                    state.access.token()
                ))
            {
                res.headers_mut().append(header::SET_COOKIE, v);
            }
            res
        }
        Err(denied) => {
            let status = StatusCode::from_u16(denied.status).unwrap_or(StatusCode::FORBIDDEN);
            let body = serde_json::json!({"error": {"code": "DENIED", "message": denied.message}});
            (status, axum::Json(body)).into_response()
        }
    }
}

async fn secure_headers(req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

/// Serves the studio on `listener` until `shutdown` completes; live streams are ended then, and
/// the answers in flight finish.
///
/// # Errors
///
/// The listener failed.
pub async fn serve(
    listener: tokio::net::TcpListener,
    store: Arc<dyn Store>,
    actions: Arc<dyn Actions>,
    access: Access,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (tx, rx) = tokio::sync::watch::channel(false);
    let mut stopped = rx.clone();
    tokio::spawn(async move {
        shutdown.await;
        let _ = tx.send(true);
        // Keep the sender until every receiver is gone.
        tx.closed().await;
    });
    axum::serve(listener, router(store, actions, access, rx))
        .with_graceful_shutdown(async move {
            let _ = stopped.wait_for(|c| *c).await;
        })
        .await
}
