//! TLS inspection (SANDBOX.md §6.9): terminate the client's TLS with a leaf from the per-run
//! CA, bound and scan each request, rewrite it (§6.10), forward it over verified TLS, and
//! redact the response.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::request::Parts;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::ca::LeafResolver;
use crate::decide::BlockReason;
use crate::dial::dial;
use crate::error::NetProxyError;
use crate::head::{RequestTarget, canonical_host_header, check_request_host};
use crate::response::{IO_TIMEOUT, ProxyBody, established, full, strip_hop_by_hop, text};
use crate::rewrite::{HEADER_GROWTH_BUDGET, is_model_api_request};
use crate::shared::{Shared, refuse};

/// A request line plus headers over this gets `431`.
pub const MAX_INSPECTED_HEAD_BYTES: usize = 1024 * 1024 + 4096;

/// The upstream TLS client: webpki roots plus injected extra roots, HTTP/1.1 only.
pub(crate) fn client_config(
    extra_roots: &[CertificateDer<'static>],
) -> Result<rustls::ClientConfig, NetProxyError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    for r in extra_roots {
        roots
            .add(r.clone())
            .map_err(|source| NetProxyError::Tls { source })?;
    }
    let mut cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|source| NetProxyError::Tls { source })?
    .with_root_certificates(roots)
    .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(cfg)
}

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
        fallback_host: host.to_string(),
    }));
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Some(Arc::new(cfg))
}

/// Replies 200 and serves the tunnel as TLS with a minted leaf.
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
    let target = Arc::new(target);
    let vetted = Arc::new(vetted);
    tokio::spawn(async move {
        let up = match hyper::upgrade::on(req).await {
            Ok(up) => up,
            Err(e) => {
                return tracing::debug!(host = %target.host, error = %e, "tunnel upgrade failed");
            }
        };
        let tls = match tokio::time::timeout(
            IO_TIMEOUT,
            TlsAcceptor::from(cfg).accept(TokioIo::new(up)),
        )
        .await
        {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                return tracing::info!(host = %target.host, error = %e, "client tls handshake failed");
            }
            Err(_) => return tracing::info!(host = %target.host, "client tls handshake timed out"),
        };
        let svc_shared = shared.clone();
        let svc = service_fn(move |r| {
            let (s, t, v) = (svc_shared.clone(), target.clone(), vetted.clone());
            async move { Ok::<_, Infallible>(inspected(s, t, v, r).await) }
        });
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(IO_TIMEOUT)
            .max_buf_size(2 * MAX_INSPECTED_HEAD_BYTES)
            .serve_connection(TokioIo::new(tls), svc);
        tokio::select! {
            r = conn => if let Err(e) = r { tracing::debug!(error = %e, "inspected connection ended") },
            _ = shared.cancel.cancelled() => {}
        }
    });
    established()
}

fn head_len(parts: &Parts) -> usize {
    let line = parts.method.as_str().len() + parts.uri.to_string().len() + 12;
    line + parts
        .headers
        .iter()
        .map(|(n, v)| n.as_str().len() + v.len() + 4)
        .sum::<usize>()
}

async fn inspected(
    shared: Arc<Shared>,
    target: Arc<RequestTarget>,
    vetted: Arc<Vec<SocketAddr>>,
    req: Request<Incoming>,
) -> Response<ProxyBody> {
    let host = target.host.as_str();
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
    match canonical {
        Ok(h) => {
            parts.headers.insert(header::HOST, h);
        }
        Err(_) => {
            return refuse(
                &shared,
                host,
                StatusCode::MISDIRECTED_REQUEST,
                BlockReason::HostMismatch,
            );
        }
    }
    if parts.headers.contains_key(header::UPGRADE) {
        return refuse(
            &shared,
            host,
            StatusCode::FORBIDDEN,
            BlockReason::UpgradeRefused,
        );
    }
    let body = match inspect_request(&shared, host, &mut parts, body).await {
        Ok(b) => b,
        Err(resp) => return resp,
    };
    strip_hop_by_hop(&mut parts.headers);
    parts.headers.insert(
        header::ACCEPT_ENCODING,
        HeaderValue::from_static("identity"),
    );
    parts.version = http::Version::HTTP_11;
    parts.uri = match parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .parse()
    {
        Ok(u) => u,
        Err(_) => return text(StatusCode::BAD_REQUEST, "bad request target"),
    };
    match send_upstream(
        &shared,
        &target,
        &vetted,
        Request::from_parts(parts, full(body)),
    )
    .await
    {
        Ok(resp) => {
            let (mut rparts, rbody) = resp.into_parts();
            strip_hop_by_hop(&mut rparts.headers);
            finish_response(&shared, rparts, rbody).await
        }
        Err(e) => {
            tracing::info!(host, error = %e, "inspected upstream failed");
            crate::response::upstream_unreachable(host, &crate::response::root_cause(&*e))
        }
    }
}

async fn send_upstream(
    shared: &Shared,
    target: &RequestTarget,
    vetted: &[SocketAddr],
    req: Request<ProxyBody>,
) -> Result<Response<Incoming>, Box<dyn std::error::Error + Send + Sync>> {
    let tcp = dial(vetted).await?;
    let name = ServerName::try_from(target.host.clone())?;
    let tls = tokio::time::timeout(
        IO_TIMEOUT,
        TlsConnector::from(shared.client_tls.clone()).connect(name, tcp),
    )
    .await??;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
    let cancel = shared.cancel.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = conn => {}
            _ = cancel.cancelled() => {}
        }
    });
    Ok(sender.send_request(req).await?)
}

/// Bounds the body, refuses exfiltration, and materialises placeholders (headers within the
/// growth budget; the body unless it is a model-API request).
pub(crate) async fn inspect_request(
    shared: &Shared,
    host: &str,
    parts: &mut Parts,
    body: Incoming,
) -> Result<Bytes, Response<ProxyBody>> {
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
    let body = match Limited::new(body, shared.max_body).collect().await {
        Ok(c) => c.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return Err(refuse(
                shared,
                host,
                StatusCode::PAYLOAD_TOO_LARGE,
                BlockReason::BodyOverBound,
            ));
        }
        Err(_) => {
            return Err(text(
                StatusCode::BAD_REQUEST,
                "could not read the request body",
            ));
        }
    };
    let Some(rw) = &shared.rewriter else {
        return Ok(body);
    };
    let uri = parts.uri.to_string();
    let mut scanned: Vec<&[u8]> = vec![parts.method.as_str().as_bytes(), uri.as_bytes()];
    for (n, v) in &parts.headers {
        scanned.push(n.as_str().as_bytes());
        scanned.push(v.as_bytes());
    }
    scanned.push(body.as_ref());
    if rw.request_exfiltrates_to(&scanned, host).is_some() {
        return Err(refuse(
            shared,
            host,
            StatusCode::FORBIDDEN,
            BlockReason::SecretExfiltration,
        ));
    }
    let mut budget = HEADER_GROWTH_BUDGET;
    let names: Vec<_> = parts.headers.keys().cloned().collect();
    for name in names {
        let values: Vec<HeaderValue> = parts.headers.get_all(&name).iter().cloned().collect();
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
            parts.headers.remove(&name);
            for v in out {
                parts.headers.append(name.clone(), v);
            }
        }
    }
    let path = parts.uri.path();
    let body = if is_model_api_request(host, path) {
        body
    } else {
        let mut unbounded = usize::MAX;
        Bytes::from(rw.materialize_for_host(&body, host, &mut unbounded))
    };
    parts.headers.remove(header::TRANSFER_ENCODING);
    if !body.is_empty() || parts.headers.contains_key(header::CONTENT_LENGTH) {
        parts
            .headers
            .insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    }
    Ok(body)
}

/// Streams the response through the §6.10 sliding window (real values become placeholders),
/// redacts headers, drops trailers and forces `Connection: close`. When there is a value to look
/// for, `Content-Length` is dropped (the redacted length is known only at the end; HTTP/1.1
/// clients get it chunked); otherwise the body and its length pass through untouched.
pub(crate) async fn finish_response(
    shared: &Shared,
    mut parts: http::response::Parts,
    body: Incoming,
) -> Response<ProxyBody> {
    let body = match &shared.rewriter {
        Some(rw) if !rw.is_empty() => {
            // A header whose name carries a value goes; a custom reason phrase is not relayed.
            let named: Vec<_> = parts
                .headers
                .keys()
                .filter(|n| rw.forms().find(n.as_str().as_bytes(), |_| true).is_some())
                .cloned()
                .collect();
            for name in named {
                parts.headers.remove(&name);
            }
            parts.extensions.remove::<hyper::ext::ReasonPhrase>();
            for v in parts.headers.values_mut() {
                let r = rw.redact_response(v.as_bytes());
                if r != v.as_bytes()
                    && let Ok(nv) = HeaderValue::from_bytes(&r)
                {
                    *v = nv;
                }
            }
            parts.headers.remove(header::CONTENT_LENGTH);
            crate::redact_stream::redacted_body(body, rw)
        }
        _ => body.boxed(),
    };
    parts.headers.remove(header::TRANSFER_ENCODING);
    parts.headers.remove(header::TRAILER);
    parts
        .headers
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    Response::from_parts(parts, body)
}
