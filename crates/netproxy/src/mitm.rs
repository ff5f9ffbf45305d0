//! TLS inspection (SANDBOX.md §6.9): terminate the client's TLS with a leaf from the per-run
//! CA (ALPN `h2` and `http/1.1`), bound and scan each request, rewrite it (§6.10), forward it
//! over verified TLS ([`crate::upstream`]) with its body streamed through the same rules
//! ([`crate::request_stream`]), and redact the response as it streams.
//!
//! HTTP/1.1 and HTTP/2 requests take the same path ([`inspected`]): hyper hands both over as an
//! `http::Request`, whose `:authority` (HTTP/2) or `Host` (HTTP/1.1) the domain-fronting rule
//! checks, so no rule exists twice. A WebSocket handshake passes the same policy, then its
//! bytes are spliced ([`crate::websocket`]).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use http::header::{self, HeaderValue};
use http::request::Parts;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio_rustls::TlsAcceptor;

use crate::ca::LeafResolver;
use crate::decide::BlockReason;
use crate::head::{RequestTarget, canonical_host_header, check_request_host};
use crate::host::canonical_host;
use crate::request_body::{RequestBody, full_request};
use crate::request_stream::{RequestInspector, Tripwire, inspected_body};
use crate::response::{IO_TIMEOUT, ProxyBody, established, strip_hop_by_hop, text};
use crate::rewrite::{HEADER_GROWTH_BUDGET, SecretRewriter, is_model_api_request};
use crate::shared::{Shared, refuse};
use crate::upstream::{Offer, TunnelUpstream};

/// A request line plus headers over this gets `431` (HTTP/1.1 and HTTP/2 alike).
pub const MAX_INSPECTED_HEAD_BYTES: usize = 1024 * 1024 + 4096;

/// The most HTTP/2 streams one inspected tunnel may have open at once
/// (`SETTINGS_MAX_CONCURRENT_STREAMS`): each may hold a bounded request body in memory (one that
/// declares its length toward a host whose placeholders are swapped is read whole; others hold
/// only the scan window), so this bounds what one tunnel can make the proxy hold.
pub const MAX_INSPECTED_STREAMS: u32 = 100;

/// The protocols offered to the client inside an inspected tunnel, preferred first.
const CLIENT_ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

fn server_config(shared: &Shared, host: &str) -> Option<Arc<rustls::ServerConfig>> {
    let ca = shared.ca.clone()?;
    let mut cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS12, &rustls::version::TLS13])
    .ok()?
    .with_no_client_auth()
    .with_cert_resolver(Arc::new(LeafResolver {
        ca,
        host: host.to_string(),
    }));
    cfg.alpn_protocols = CLIENT_ALPN.iter().map(|p| p.to_vec()).collect();
    Some(Arc::new(cfg))
}

/// Replies 200 and serves the tunnel as TLS with a minted leaf for the CONNECT host, over the
/// protocol the client chose (`h2` or `http/1.1`).
pub(crate) fn intercept(
    shared: Arc<Shared>,
    req: Request<Incoming>,
    target: RequestTarget,
    vetted: Vec<SocketAddr>,
) -> Response<ProxyBody> {
    let Some(cfg) = server_config(&shared, &target.host) else {
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "tls inspection unavailable",
        );
    };
    tokio::spawn(async move {
        let up = match hyper::upgrade::on(req).await {
            Ok(up) => up,
            Err(e) => {
                return tracing::debug!(host = %target.host, error = %e, "tunnel upgrade failed");
            }
        };
        // Transparent egress (issue 22) carries plain HTTP (`http://…` on port 80 or a rule's
        // port) as a CONNECT too: a tunnel whose client speaks first with an HTTP/1 method
        // rather than a TLS record is relayed as it is, as without inspection (no secret is
        // swapped into plaintext; the dial goes to the vetted addresses only).
        let mut up = TokioIo::new(up);
        let mut first = [0u8; 1];
        let first = match tokio::time::timeout(
            IO_TIMEOUT,
            tokio::io::AsyncReadExt::read(&mut up, &mut first),
        )
        .await
        {
            Ok(Ok(1)) => first[0],
            _ => return,
        };
        let up = Prefixed {
            first: Some(first),
            io: up,
        };
        if first.is_ascii_uppercase() {
            match crate::dial::dial(&vetted).await {
                Ok(upstream) => crate::pipe::splice(up, upstream, &shared.cancel).await,
                Err(e) => tracing::info!(host = %target.host, error = %e, "tunnel dial failed"),
            }
            return;
        }
        let tls = match tokio::time::timeout(IO_TIMEOUT, TlsAcceptor::from(cfg).accept(up)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                return tracing::info!(host = %target.host, error = %e, "client tls handshake failed");
            }
            Err(_) => return tracing::info!(host = %target.host, "client tls handshake timed out"),
        };
        // SNI ≠ CONNECT: the name the client's TLS asks for must be the tunnel's target too.
        let (_, session) = tls.get_ref();
        if session
            .server_name()
            .is_some_and(|sni| canonical_host(sni) != target.host)
        {
            shared.blocked(&target.host, BlockReason::HostMismatch, false);
            return;
        }
        let offer = match session.alpn_protocol() {
            Some(b"h2") => Offer::Http2,
            _ => Offer::Http1,
        };
        serve_tunnel(shared, target, vetted, offer, tls).await;
    });
    established()
}

/// A stream with the one byte already read from it in front.
struct Prefixed<I> {
    first: Option<u8>,
    io: I,
}

impl<I: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Prefixed<I> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        if let Some(byte) = self.first.take() {
            buf.put_slice(&[byte]);
            return std::task::Poll::Ready(Ok(()));
        }
        std::pin::Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<I: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Prefixed<I> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        data: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.io).poll_write(cx, data)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// Serves the requests of one inspected tunnel until it closes or the proxy shuts down.
async fn serve_tunnel<I>(
    shared: Arc<Shared>,
    target: RequestTarget,
    vetted: Vec<SocketAddr>,
    offer: Offer,
    io: I,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let upstream = Arc::new(TunnelUpstream::new(target.host.clone(), vetted));
    let target = Arc::new(target);
    let svc_shared = shared.clone();
    let svc = service_fn(move |r| {
        let (s, t, u) = (svc_shared.clone(), target.clone(), upstream.clone());
        async move { Ok::<_, Infallible>(inspected(s, t, u, offer, r).await) }
    });
    let io = TokioIo::new(io);
    let ended = match offer {
        Offer::Http2 => {
            let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .timer(TokioTimer::new())
                .max_concurrent_streams(MAX_INSPECTED_STREAMS)
                // Twice the bound, so that a head between the two gets the same `431` and
                // event as over HTTP/1.1; past it the h2 layer refuses on its own.
                .max_header_list_size(
                    u32::try_from(2 * MAX_INSPECTED_HEAD_BYTES).unwrap_or(u32::MAX),
                )
                .enable_connect_protocol()
                .serve_connection(io, svc);
            tokio::select! {
                r = conn => r.err().map(|e| e.to_string()),
                _ = shared.cancel.cancelled() => None,
            }
        }
        Offer::Http1 => {
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(IO_TIMEOUT)
                .max_buf_size(2 * MAX_INSPECTED_HEAD_BYTES)
                .serve_connection(io, svc)
                .with_upgrades();
            tokio::select! {
                r = conn => r.err().map(|e| e.to_string()),
                _ = shared.cancel.cancelled() => None,
            }
        }
    };
    if let Some(error) = ended {
        tracing::debug!(error, "inspected connection ended");
    }
}

fn head_len(parts: &Parts) -> usize {
    let line = parts.method.as_str().len() + parts.uri.to_string().len() + 12;
    line + parts
        .headers
        .iter()
        .map(|(n, v)| n.as_str().len() + v.len() + 4)
        .sum::<usize>()
}

/// How a request inside a tunnel asks to leave HTTP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Upgrade {
    /// It does not.
    None,
    /// A WebSocket: HTTP/1.1 `GET` with `Upgrade: websocket`, or HTTP/2 extended CONNECT with
    /// `:protocol = websocket` (RFC 8441).
    WebSocket,
    /// Anything else: another `Upgrade` (`h2c`, …), a plain CONNECT (a tunnel inside the tunnel
    /// would carry bytes past inspection), another `:protocol`.
    Refused,
}

fn upgrade_of(parts: &Parts) -> Upgrade {
    let is_websocket = |v: &[u8]| v.trim_ascii().eq_ignore_ascii_case(b"websocket");
    if parts.method == http::Method::CONNECT {
        return match parts.extensions.get::<hyper::ext::Protocol>() {
            Some(p) if is_websocket(p.as_str().as_bytes()) => Upgrade::WebSocket,
            _ => Upgrade::Refused,
        };
    }
    let mut upgrades = parts.headers.get_all(header::UPGRADE).iter();
    match (upgrades.next(), upgrades.next()) {
        (None, _) => Upgrade::None,
        (Some(v), None) if parts.method == http::Method::GET && is_websocket(v.as_bytes()) => {
            Upgrade::WebSocket
        }
        _ => Upgrade::Refused,
    }
}

/// The request policy of an inspected tunnel, one path for HTTP/1.1 and HTTP/2: the head
/// bound, the domain-fronting rule (`Host` and `:authority`), the upgrade rule, then
/// [`inspect_request`] (body bound, exfiltration scan, placeholders), then the upstream.
async fn inspected(
    shared: Arc<Shared>,
    target: Arc<RequestTarget>,
    upstream: Arc<TunnelUpstream>,
    offer: Offer,
    mut req: Request<Incoming>,
) -> Response<ProxyBody> {
    let host = target.host.as_str();
    let client_version = req.version();
    let on_upgrade = hyper::upgrade::on(&mut req);
    let (mut parts, body) = req.into_parts();
    if head_len(&parts) > MAX_INSPECTED_HEAD_BYTES {
        return refuse(
            &shared,
            host,
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            BlockReason::HeaderOverBound,
        );
    }
    // Domain fronting: the request must name the tunnel's target and nothing else.
    let canonical = check_request_host(&target, &parts.uri, &parts.headers, 443)
        .and_then(|()| canonical_host_header(&target, 443));
    let canonical = match canonical {
        Ok(h) => h,
        Err(_) => {
            return refuse(
                &shared,
                host,
                StatusCode::MISDIRECTED_REQUEST,
                BlockReason::HostMismatch,
            );
        }
    };
    parts.headers.insert(header::HOST, canonical.clone());
    let upgrade = upgrade_of(&parts);
    if upgrade == Upgrade::Refused {
        return refuse(
            &shared,
            host,
            StatusCode::FORBIDDEN,
            BlockReason::UpgradeRefused,
        );
    }
    let inspected_req = match inspect_request(&shared, host, &mut parts, body).await {
        Ok(b) => b,
        Err(resp) => return resp,
    };
    let absolute = match format!(
        "https://{}{}",
        canonical.to_str().unwrap_or_default(),
        parts.uri.path_and_query().map_or("/", |p| p.as_str())
    )
    .parse::<http::Uri>()
    {
        Ok(u) => u,
        Err(_) => return text(StatusCode::BAD_REQUEST, "bad request target"),
    };
    parts.uri = absolute;
    if upgrade == Upgrade::WebSocket {
        return crate::websocket::relay(&shared, &upstream, client_version, parts, on_upgrade)
            .await;
    }
    // gRPC over HTTP/2 needs `te: trailers`; it is hop-by-hop only in HTTP/1.1.
    let te_trailers = parts
        .headers
        .get_all(header::TE)
        .iter()
        .any(|v| v.as_bytes().eq_ignore_ascii_case(b"trailers"));
    strip_hop_by_hop(&mut parts.headers);
    if te_trailers && offer == Offer::Http2 {
        parts
            .headers
            .insert(header::TE, HeaderValue::from_static("trailers"));
    }
    parts.headers.insert(
        header::ACCEPT_ENCODING,
        HeaderValue::from_static("identity"),
    );
    let InspectedRequest { body, tripwire } = inspected_req;
    let sent = upstream
        .send(&shared, offer, Request::from_parts(parts, body))
        .await;
    match sent {
        Ok(resp) => {
            let (mut rparts, rbody) = resp.into_parts();
            strip_hop_by_hop(&mut rparts.headers);
            crate::redact_stream::finish_response(&shared, rparts, rbody, client_version)
        }
        Err(e) => {
            if let Some(refusal) = tripwire.refusal() {
                return refusal;
            }
            tracing::info!(host, error = %e, "inspected upstream failed");
            crate::response::upstream_unreachable(host, &crate::response::root_cause(&*e))
        }
    }
}

/// A request that passed [`inspect_request`]: its body, streamed through the body rules, and
/// the tripwire that says which rule cut it if one did.
pub(crate) struct InspectedRequest {
    pub(crate) body: RequestBody,
    pub(crate) tripwire: Tripwire,
}

/// Bounds the body, refuses exfiltration, and materialises placeholders (headers within the
/// growth budget; the body unless it is a model-API request). The head is checked here; the
/// body streams through [`RequestInspector`] as the upstream reads it ([`crate::request_stream`]).
pub(crate) async fn inspect_request(
    shared: &Arc<Shared>,
    host: &str,
    parts: &mut Parts,
    body: Incoming,
) -> Result<InspectedRequest, Response<ProxyBody>> {
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > shared.max_body as u64) {
        return Err(refuse(
            shared,
            host,
            StatusCode::PAYLOAD_TOO_LARGE,
            BlockReason::BodyOverBound,
        ));
    }
    parts.headers.remove(header::TRANSFER_ENCODING);
    let uri = parts.uri.to_string();
    let mut scanned: Vec<&[u8]> = vec![parts.method.as_str().as_bytes(), uri.as_bytes()];
    for (n, v) in &parts.headers {
        scanned.push(n.as_str().as_bytes());
        scanned.push(v.as_bytes());
    }
    let head = scanned.concat();
    let rewriter = shared.rewriter.clone().filter(|rw| !rw.is_empty());
    if let Some(rw) = &rewriter
        && rw.request_exfiltrates_to(&scanned, host).is_some()
    {
        return Err(refuse(
            shared,
            host,
            StatusCode::FORBIDDEN,
            BlockReason::SecretExfiltration,
        ));
    }
    if let Some(rw) = &rewriter {
        materialize_headers(rw, host, &mut parts.headers);
    }
    let swap = !is_model_api_request(host, parts.uri.path());
    let inspector = RequestInspector::new(rewriter, host, shared.max_body, &head, swap);
    let swaps = inspector.swaps();
    let (body, tripwire) = inspected_body(shared.clone(), body, inspector);
    let inspected = InspectedRequest { body, tripwire };
    if !(swaps && declared.is_some()) {
        // Nothing can change the length: a declared one stays, and the body streams.
        return Ok(inspected);
    }
    // A declared length whose body a swap may change: read whole, through the same rules.
    let InspectedRequest { body, tripwire } = inspected;
    let body = match body.collect().await {
        Ok(c) => c.to_bytes(),
        Err(_) => {
            return Err(tripwire.refusal().unwrap_or_else(|| {
                text(StatusCode::BAD_REQUEST, "could not read the request body")
            }));
        }
    };
    parts
        .headers
        .insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    Ok(InspectedRequest {
        body: full_request(body),
        tripwire,
    })
}

/// Materialises the placeholders in header values, within [`HEADER_GROWTH_BUDGET`].
fn materialize_headers(rw: &SecretRewriter, host: &str, headers: &mut http::HeaderMap) {
    let mut budget = HEADER_GROWTH_BUDGET;
    let names: Vec<_> = headers.keys().cloned().collect();
    for name in names {
        let values: Vec<HeaderValue> = headers.get_all(&name).iter().cloned().collect();
        let mut changed = false;
        let mut out = Vec::with_capacity(values.len());
        for v in values {
            let m = rw.materialize_for_host(v.as_bytes(), host, &mut budget);
            if m != v.as_bytes() {
                changed = true;
                out.push(HeaderValue::from_bytes(&m).unwrap_or(v));
            } else {
                out.push(v);
            }
        }
        if changed {
            headers.remove(&name);
            for v in out {
                headers.append(name.clone(), v);
            }
        }
    }
}
