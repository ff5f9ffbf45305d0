//! What every proxy response is built from: the body type, plain-text replies (a policy denial,
//! a proxy-auth challenge, `200 Connection Established`), the hop-by-hop header rule and the I/O
//! timeout.

use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};

/// The body type of every response the proxy produces.
pub(crate) type ProxyBody = BoxBody<Bytes, hyper::Error>;

/// Header read timeout and dial timeout.
pub(crate) const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// `X-Iterion-Reason` on policy denials.
pub const POLICY_REASON_HEADER: &str = "blocked by sandbox network policy";

pub(crate) fn full(body: impl Into<Bytes>) -> ProxyBody {
    Full::new(body.into())
        .map_err(|never| match never {})
        .boxed()
}

pub(crate) fn text(status: StatusCode, body: impl Into<String>) -> Response<ProxyBody> {
    let mut r = Response::new(full(body.into()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

pub use iterion_vocab::UPSTREAM_ERROR_HEADER;

/// The innermost cause of `error`, printable and bounded (it travels in a header).
pub(crate) fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause
        .to_string()
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .take(256)
        .collect()
}

/// `502`: the upstream `authority` could not be reached, for `reason` ([`root_cause`]).
pub(crate) fn upstream_unreachable(authority: &str, reason: &str) -> Response<ProxyBody> {
    let mut r = text(
        StatusCode::BAD_GATEWAY,
        format!("could not reach the upstream {authority}: {reason}"),
    );
    if let Ok(value) = HeaderValue::from_str(reason) {
        r.headers_mut().insert(UPSTREAM_ERROR_HEADER, value);
    }
    r
}

pub(crate) fn policy_denied(host: &str) -> Response<ProxyBody> {
    let mut r = text(
        StatusCode::FORBIDDEN,
        format!("host '{host}' {POLICY_REASON_HEADER}"),
    );
    r.headers_mut().insert(
        "x-iterion-reason",
        HeaderValue::from_static(POLICY_REASON_HEADER),
    );
    r
}

pub(crate) fn auth_required() -> Response<ProxyBody> {
    let mut r = text(
        StatusCode::PROXY_AUTHENTICATION_REQUIRED,
        "proxy authentication required",
    );
    r.headers_mut().insert(
        header::PROXY_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"iterion-sandbox\""),
    );
    r
}

const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Strips the hop-by-hop headers, and any header the `Connection` header names.
pub(crate) fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    for n in named {
        headers.remove(n);
    }
    for h in HOP_BY_HOP {
        headers.remove(h);
    }
}

/// `200 Connection Established`.
pub(crate) fn established() -> Response<ProxyBody> {
    let mut r = Response::new(full(""));
    r.extensions_mut()
        .insert(hyper::ext::ReasonPhrase::from_static(
            b"Connection Established",
        ));
    r
}
