//! WebSocket upgrades inside an inspected tunnel (issue 22): the handshake is an ordinary
//! inspected request (head bound, `Host`/`:authority`, exfiltration scan, placeholders in its
//! headers), sent upstream as an HTTP/1.1 `Upgrade: websocket` whatever the client spoke
//! (HTTP/1.1 `Upgrade`, or HTTP/2 extended CONNECT, RFC 8441); once the upstream answers
//! `101`, the client gets `101` (HTTP/1.1) or `200` (HTTP/2) and the two sides are spliced.
//!
//! # What is not inspected
//!
//! After the upgrade the proxy copies bytes: frames are not parsed, so nothing in them is
//! scanned or rewritten in either direction. A placeholder the sandbox writes in a frame stays a
//! placeholder (only the handshake's headers are materialised), and a real value the server
//! writes in a frame (an echo of the handshake's `Authorization`, say) reaches the sandbox.
//! Redacting server→client bytes is not done: replacing a value by its placeholder changes the
//! payload's length, which the frame header states, so the stream would break, and a frame
//! compressed by `permessage-deflate` does not show the value at all. The host is still one the
//! policy allows, and only the handshake carries a real value (docs/security.md).

use base64::Engine as _;
use http::header::{self, HeaderValue};
use http::request::Parts;
use http::{Request, Response, StatusCode};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;

use crate::redact_stream::redact_headers;
use crate::response::{ProxyBody, full, strip_hop_by_hop, text};
use crate::shared::Shared;
use crate::upstream::TunnelUpstream;

/// The WebSocket handshake headers that survive hop-by-hop stripping.
const HANDSHAKE: [&str; 2] = ["sec-websocket-key", "sec-websocket-version"];

/// Sends the vetted, rewritten handshake `parts` upstream and, on `101`, splices the client's
/// upgraded stream with the upstream's.
pub(crate) async fn relay(
    shared: &Shared,
    upstream: &TunnelUpstream,
    client_version: http::Version,
    mut parts: Parts,
    client_upgrade: OnUpgrade,
) -> Response<ProxyBody> {
    let http2 = client_version == http::Version::HTTP_2;
    let key = match parts.headers.get("sec-websocket-key") {
        Some(k) if !http2 => k.clone(),
        _ => match random_key() {
            Some(k) => k,
            None => return text(StatusCode::INTERNAL_SERVER_ERROR, "no randomness"),
        },
    };
    let version = parts
        .headers
        .get("sec-websocket-version")
        .cloned()
        .unwrap_or_else(|| HeaderValue::from_static("13"));
    for h in HANDSHAKE {
        parts.headers.remove(h);
    }
    strip_hop_by_hop(&mut parts.headers);
    parts
        .headers
        .insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    parts
        .headers
        .insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    parts.headers.insert("sec-websocket-key", key);
    parts.headers.insert("sec-websocket-version", version);
    parts.method = http::Method::GET;
    parts.extensions = http::Extensions::new();
    let req = Request::from_parts(parts, crate::request_body::full_request(""));
    let mut resp = match upstream.send_upgrade(shared, req).await {
        Ok(r) => r,
        Err(e) => {
            tracing::info!(error = %e, "websocket upstream failed");
            return crate::response::upstream_unreachable(
                upstream.host(),
                &crate::response::root_cause(&*e),
            );
        }
    };
    if resp.status() != StatusCode::SWITCHING_PROTOCOLS {
        // The upstream refused the upgrade: relay its answer like any response.
        let (mut rparts, rbody) = resp.into_parts();
        strip_hop_by_hop(&mut rparts.headers);
        return crate::redact_stream::finish_response(shared, rparts, rbody, client_version);
    }
    let upstream_upgrade = hyper::upgrade::on(&mut resp);
    let mut headers = resp.headers().clone();
    if let Some(rw) = &shared.rewriter {
        redact_headers(rw, &mut headers);
    }
    let mut out = Response::new(full(""));
    if http2 {
        for h in ["connection", "upgrade", "sec-websocket-accept"] {
            headers.remove(h);
        }
    } else {
        *out.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    }
    *out.headers_mut() = headers;
    let cancel = shared.cancel.clone();
    tokio::spawn(async move {
        match tokio::join!(client_upgrade, upstream_upgrade) {
            (Ok(client), Ok(server)) => {
                crate::pipe::splice(TokioIo::new(client), TokioIo::new(server), &cancel).await;
            }
            (c, s) => tracing::debug!(
                client = c.err().map(|e| e.to_string()),
                server = s.err().map(|e| e.to_string()),
                "websocket upgrade failed"
            ),
        }
    });
    out
}

/// A fresh `Sec-WebSocket-Key`: 16 random bytes, base64 (an HTTP/2 client sends none).
fn random_key() -> Option<HeaderValue> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).ok()?;
    HeaderValue::from_str(&base64::engine::general_purpose::STANDARD.encode(b)).ok()
}
