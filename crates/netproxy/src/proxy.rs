//! The proxy server (SANDBOX.md §6.2–§6.4, §6.8): builder, listeners, auth, routing, plain-HTTP
//! forwarding, `network_blocked` and shutdown.

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rustls::pki_types::CertificateDer;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::auth::ProxyToken;
use crate::ca::EphemeralCa;
use crate::decide::BlockReason;
use crate::dial::VettedConnector;
use crate::error::NetProxyError;
use crate::head::{
    RequestTarget, TargetKind, canonical_host_header, check_request_host, target_of,
};
use crate::matcher::Policy;
use crate::resolve::{Resolver, SystemResolver};
use crate::response::{IO_TIMEOUT, ProxyBody, auth_required, strip_hop_by_hop, text};
use crate::rewrite::SecretRewriter;
use crate::shared::{BlockedCallback, Shared, refuse};

/// Default bound on an inspected request body (`ITERION_SANDBOX_INSPECT_MAX_BODY`).
pub const DEFAULT_INSPECT_MAX_BODY: usize = 64 * 1024 * 1024;

/// Parses an inspection body bound as `ITERION_SANDBOX_INSPECT_MAX_BODY` writes it (SANDBOX.md
/// §17): a byte count, or one with a `KiB`, `MiB` or `GiB` suffix (`64MiB`, `512 KiB`). Zero,
/// overflow and anything else are refused with the accepted forms.
pub fn parse_inspect_max_body(text: &str) -> Result<usize, NetProxyError> {
    let t = text.trim();
    let (digits, unit) = match t.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => (&t[..at], t[at..].trim()),
        None => (t, ""),
    };
    let scale: usize = match unit {
        "" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => 0,
    };
    digits
        .parse::<usize>()
        .ok()
        .filter(|n| *n > 0 && scale > 0)
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| NetProxyError::InvalidSize {
            text: text.to_owned(),
        })
}
/// The method of a name query (issue 22, transparent egress): `ITERION-NAME /<name> HTTP/1.1`
/// with the run's `Proxy-Authorization`, sent by the in-sandbox egress bridge's DNS stub. The
/// proxy answers `200` with [`NAME_PORTS_HEADER`] when the policy lets the name through on some
/// port ([`crate::name_ports`], built on [`crate::decide`]), else `403` after recording the
/// refusal (`network_blocked`, once per host). Nothing is resolved: no query for any name leaves
/// the host.
pub const NAME_METHOD: &str = "ITERION-NAME";
/// The ports a name may be reached on, comma-separated, in a name query's `200`.
pub const NAME_PORTS_HEADER: &str = "x-iterion-ports";

/// Largest request head accepted on the proxy's own listener.
pub const MAX_PROXY_HEAD_BYTES: usize = 64 * 1024;

/// Configures and starts a per-run proxy. Nothing binds until [`ProxyBuilder::start`].
pub struct ProxyBuilder {
    run_id: String,
    policy: Policy,
    token: ProxyToken,
    tcp: Option<SocketAddr>,
    unix: Option<PathBuf>,
    rewriter: Option<SecretRewriter>,
    ca: Option<Arc<EphemeralCa>>,
    resolver: Arc<dyn Resolver>,
    on_blocked: Option<BlockedCallback>,
    extra_roots: Vec<CertificateDer<'static>>,
    max_body: usize,
}

impl fmt::Debug for ProxyBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProxyBuilder")
            .field("run_id", &self.run_id)
            .field("policy", &self.policy)
            .field("tcp", &self.tcp)
            .field("unix", &self.unix)
            .field("tls_inspection", &self.ca.is_some())
            .finish_non_exhaustive()
    }
}

impl ProxyBuilder {
    /// A proxy for `run_id` enforcing `policy`, accepting only `token`.
    pub fn new(run_id: impl Into<String>, policy: Policy, token: ProxyToken) -> Self {
        Self {
            run_id: run_id.into(),
            policy,
            token,
            tcp: None,
            unix: None,
            rewriter: None,
            ca: None,
            resolver: Arc::new(SystemResolver),
            on_blocked: None,
            extra_roots: Vec::new(),
            max_body: DEFAULT_INSPECT_MAX_BODY,
        }
    }

    /// Listen on a TCP address (`127.0.0.1:0` picks a port). Default: no TCP listener.
    pub fn listen_tcp(mut self, addr: SocketAddr) -> Self {
        self.tcp = Some(addr);
        self
    }

    /// Listen on a Unix socket at `path` (created 0666; a stale file is replaced; removed at
    /// shutdown). Default: no Unix listener. At least one listener is required.
    pub fn listen_unix(mut self, path: impl Into<PathBuf>) -> Self {
        self.unix = Some(path.into());
        self
    }

    /// The run's secrets. Default: none. They are materialised and scanned only when TLS
    /// inspection is on; otherwise placeholders stay opaque.
    pub fn secrets(mut self, rewriter: SecretRewriter) -> Self {
        self.rewriter = Some(rewriter);
        self
    }

    /// Turns TLS inspection on with this CA. Default: off (CONNECT tunnels are spliced).
    pub fn tls_inspection(mut self, ca: Arc<EphemeralCa>) -> Self {
        self.ca = Some(ca);
        self
    }

    /// The resolver. Default: [`SystemResolver`].
    pub fn resolver(mut self, resolver: Arc<dyn Resolver>) -> Self {
        self.resolver = resolver;
        self
    }

    /// The `network_blocked` sink. Default: events are only logged.
    pub fn on_blocked(mut self, callback: BlockedCallback) -> Self {
        self.on_blocked = Some(callback);
        self
    }

    /// Trust an extra root for upstream TLS under inspection (loopback test upstreams, a
    /// corporate CA). Default: webpki roots only.
    pub fn extra_upstream_root(mut self, der: CertificateDer<'static>) -> Self {
        self.extra_roots.push(der);
        self
    }

    /// Trust every root of `ders` as [`Self::extra_upstream_root`] does (what
    /// [`crate::load_upstream_roots`] read from `ITERION_SANDBOX_UPSTREAM_CA`).
    pub fn extra_upstream_roots(
        mut self,
        ders: impl IntoIterator<Item = CertificateDer<'static>>,
    ) -> Self {
        self.extra_roots.extend(ders);
        self
    }

    /// The inspected body bound in bytes. Default: 64 MiB.
    pub fn max_inspected_body(mut self, bytes: usize) -> Self {
        self.max_body = bytes;
        self
    }

    /// Binds the listeners and starts serving. Errors leave nothing bound.
    pub async fn start(self) -> Result<RunningProxy, NetProxyError> {
        if self.tcp.is_none() && self.unix.is_none() {
            return Err(NetProxyError::NoListener);
        }
        let upstream_tls = crate::upstream_tls::UpstreamTls::new(&self.extra_roots)?;
        let tcp = match self.tcp {
            Some(addr) => Some(
                tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|source| NetProxyError::BindTcp { addr, source })?,
            ),
            None => None,
        };
        let unix = match &self.unix {
            Some(path) => Some(bind_unix(path)?),
            None => None,
        };
        let tcp_addr = match &tcp {
            Some(l) => Some(l.local_addr().map_err(|source| {
                NetProxyError::BindTcp {
                    addr: self
                        .tcp
                        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0))),
                    source,
                }
            })?),
            None => None,
        };
        let connector = VettedConnector::default();
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(8)
            .pool_idle_timeout(Duration::from_secs(90))
            .pool_timer(TokioTimer::new())
            .build(connector.clone());
        let cancel = CancellationToken::new();
        let shared = Arc::new(Shared {
            run_id: self.run_id,
            policy: self.policy,
            token: self.token.clone(),
            resolver: self.resolver,
            rewriter: self.rewriter.map(Arc::new),
            ca: self.ca.clone(),
            upstream_tls,
            max_body: self.max_body,
            blocked: Mutex::new(HashMap::new()),
            blocked_beyond: std::sync::atomic::AtomicU64::new(0),
            on_blocked: self.on_blocked,
            client,
            connector,
            cancel: cancel.clone(),
        });
        let mut tasks = Vec::new();
        if let Some(l) = tcp {
            let shared = shared.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    tokio::select! {
                        _ = shared.cancel.cancelled() => break,
                        r = l.accept() => match r {
                            Ok((s, _)) => {
                                let _ = s.set_nodelay(true);
                                tokio::spawn(serve_connection(shared.clone(), s));
                            }
                            Err(e) => tracing::warn!(error = %e, "proxy accept failed"),
                        },
                    }
                }
            }));
        }
        if let Some(l) = unix {
            let shared = shared.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    tokio::select! {
                        _ = shared.cancel.cancelled() => break,
                        r = l.accept() => match r {
                            Ok((s, _)) => { tokio::spawn(serve_connection(shared.clone(), s)); }
                            Err(e) => tracing::warn!(error = %e, "proxy accept failed"),
                        },
                    }
                }
            }));
        }
        tracing::info!(run_id = %shared.run_id, tcp = ?tcp_addr, unix = ?self.unix, inspection = self.ca.is_some(), "egress proxy listening");
        Ok(RunningProxy {
            tcp_addr,
            unix_path: self.unix,
            ca: self.ca,
            token: self.token,
            shared,
            tasks: Mutex::new(tasks),
            stopped: AtomicBool::new(false),
        })
    }
}

fn bind_unix(path: &Path) -> Result<tokio::net::UnixListener, NetProxyError> {
    use std::os::unix::fs::PermissionsExt;
    let err = |source| NetProxyError::BindUnix {
        path: path.to_path_buf(),
        source,
    };
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(err(e)),
    }
    let l = tokio::net::UnixListener::bind(path).map_err(err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666)).map_err(err)?;
    Ok(l)
}

/// A started proxy. Dropping it without [`RunningProxy::shutdown`] cancels it too.
pub struct RunningProxy {
    tcp_addr: Option<SocketAddr>,
    unix_path: Option<PathBuf>,
    ca: Option<Arc<EphemeralCa>>,
    token: ProxyToken,
    shared: Arc<Shared>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    stopped: AtomicBool,
}

impl fmt::Debug for RunningProxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunningProxy")
            .field("run_id", &self.shared.run_id)
            .field("tcp_addr", &self.tcp_addr)
            .field("unix_path", &self.unix_path)
            .field("tls_inspection", &self.ca.is_some())
            .finish_non_exhaustive()
    }
}

impl RunningProxy {
    /// The bound TCP address, if listening on TCP.
    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        self.tcp_addr
    }

    /// The Unix socket path, if listening on one.
    pub fn unix_path(&self) -> Option<&Path> {
        self.unix_path.as_deref()
    }

    /// The CA PEM the sandbox must trust, when inspection is on.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca.as_deref().map(EphemeralCa::cert_pem)
    }

    /// Whether TLS inspection is on.
    pub fn tls_inspection(&self) -> bool {
        self.ca.is_some()
    }

    /// The endpoint for the sandbox: `http://t:<token>@<host>:<port>` (it carries the token:
    /// hand it to the container only, never log it). E.g. `endpoint_url("127.0.0.1", 3128)`
    /// behind the egress bridge.
    pub fn endpoint_url(&self, host: &str, port: u16) -> String {
        let host = match host.parse::<IpAddr>() {
            Ok(IpAddr::V6(v6)) => format!("[{v6}]"),
            _ => host.to_string(),
        };
        format!("http://t:{}@{host}:{port}", self.token.reveal())
    }

    /// Refusal counts per `(host, reason)` so far (logged at shutdown).
    pub fn blocked_counts(&self) -> Vec<(String, BlockReason, u64)> {
        let mut v: Vec<_> = match self.shared.blocked.lock() {
            Ok(m) => m.iter().map(|((h, r), c)| (h.clone(), *r, *c)).collect(),
            Err(_) => Vec::new(),
        };
        v.sort();
        v
    }

    /// Refusals not itemised in [`blocked_counts`](Self::blocked_counts): of new
    /// `(host, reason)` pairs once [`crate::BLOCKED_HOSTS_MAX`] were counted.
    pub fn blocked_beyond(&self) -> u64 {
        self.shared
            .blocked_beyond
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Closes the listeners, every open connection and tunnel, and removes the Unix socket.
    /// Idempotent.
    pub async fn shutdown(&self) {
        if self.stopped.swap(true, Ordering::SeqCst) {
            return;
        }
        self.shared.cancel.cancel();
        let tasks: Vec<_> = match self.tasks.lock() {
            Ok(mut t) => t.drain(..).collect(),
            Err(_) => Vec::new(),
        };
        for t in tasks {
            let _ = t.await;
        }
        if let Some(p) = &self.unix_path {
            let _ = tokio::fs::remove_file(p).await;
        }
        for (host, reason, count) in self.blocked_counts() {
            tracing::info!(run_id = %self.shared.run_id, host, reason = reason.as_str(), count, "egress refusals");
        }
    }
}

impl Drop for RunningProxy {
    fn drop(&mut self) {
        self.shared.cancel.cancel();
    }
}

async fn serve_connection<I>(shared: Arc<Shared>, io: I)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let svc_shared = shared.clone();
    let svc = service_fn(move |req| handle(svc_shared.clone(), req));
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(IO_TIMEOUT)
        .max_buf_size(MAX_PROXY_HEAD_BYTES)
        .serve_connection(TokioIo::new(io), svc)
        .with_upgrades();
    tokio::select! {
        r = conn => if let Err(e) = r { tracing::debug!(error = %e, "proxy connection ended") },
        _ = shared.cancel.cancelled() => {}
    }
}

async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<ProxyBody>, Infallible> {
    let auth = req
        .headers()
        .get(header::PROXY_AUTHORIZATION)
        .map(HeaderValue::as_bytes);
    if !shared.token.authorizes(auth) {
        return Ok(auth_required());
    }
    if req.method().as_str() == NAME_METHOD {
        return Ok(answer_name_query(&shared, req.uri().path()));
    }
    let target = match target_of(req.method(), req.uri(), req.headers()) {
        Ok(t) => t,
        Err(e) => return Ok(text(StatusCode::BAD_REQUEST, e.message())),
    };
    // Domain fronting: a forwarded request must name no other host than its target, before
    // anything is resolved, decided or materialised for that target.
    if target.kind == TargetKind::Forward
        && check_request_host(&target, req.uri(), req.headers(), 80).is_err()
    {
        return Ok(refuse(
            &shared,
            &target.host,
            StatusCode::MISDIRECTED_REQUEST,
            BlockReason::HostMismatch,
        ));
    }
    let vetted = match shared.vet(&target).await {
        Ok(v) => v,
        Err(resp) => return Ok(resp),
    };
    Ok(match target.kind {
        TargetKind::Connect => crate::tunnel::connect(shared, req, target, vetted).await,
        TargetKind::Forward => forward(shared, req, target, vetted).await,
    })
}

/// A name query: the ports the policy allows `/<name>` on, or a recorded refusal.
fn answer_name_query(shared: &Shared, path: &str) -> Response<ProxyBody> {
    let raw = path.strip_prefix('/').unwrap_or(path);
    let host = match crate::host::parse_host(raw) {
        Ok(h) if h.parse::<IpAddr>().is_err() => h,
        _ => return text(StatusCode::BAD_REQUEST, "bad name"),
    };
    let ports = crate::decide::name_ports(&shared.policy, &host);
    if ports.is_empty() {
        let silent = crate::preset::is_silent_deny(&host);
        shared.blocked(&host, BlockReason::PolicyDenial, silent);
        return crate::response::policy_denied(&host);
    }
    // A secret spelled as DNS labels is refused here as on a CONNECT.
    if let Some(refused) = crate::shared::refuse_secret_in_host(shared, &host) {
        return refused;
    }
    let list = ports
        .iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let mut r = text(StatusCode::OK, String::new());
    if let Ok(v) = HeaderValue::from_str(&list) {
        r.headers_mut().insert(NAME_PORTS_HEADER, v);
    }
    r
}

async fn forward(
    shared: Arc<Shared>,
    req: Request<Incoming>,
    target: RequestTarget,
    vetted: Vec<SocketAddr>,
) -> Response<ProxyBody> {
    let (mut parts, body) = req.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    // The upstream sees the canonical target, never the written form (checked equal above).
    match canonical_host_header(&target, 80) {
        Ok(h) => {
            parts.headers.insert(header::HOST, h);
        }
        Err(_) => return text(StatusCode::BAD_REQUEST, "bad request target"),
    }
    let pq = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let authority = match target.host.parse::<IpAddr>() {
        Ok(IpAddr::V6(v6)) => format!("[{v6}]:{}", target.port),
        _ => format!("{}:{}", target.host, target.port),
    };
    parts.uri = match format!("http://{authority}{pq}").parse() {
        Ok(u) => u,
        Err(_) => return text(StatusCode::BAD_REQUEST, "bad request target"),
    };
    let inspecting = shared.ca.is_some() && shared.rewriter.is_some();
    let (body, tripwire) = if inspecting {
        match crate::mitm::inspect_request(&shared, &target.host, &mut parts, body).await {
            Ok(i) => (i.body, Some(i.tripwire)),
            Err(resp) => return resp,
        }
    } else {
        (crate::request_body::passthrough(body), None)
    };
    shared.connector.remember(&target.host, target.port, vetted);
    tracing::debug!(host = %target.host, method = %parts.method, "forwarding plain http");
    let resp = match shared
        .client
        .request(Request::from_parts(parts, body))
        .await
    {
        Ok(r) => r,
        Err(e) => {
            if let Some(refusal) = tripwire.as_ref().and_then(|t| t.refusal()) {
                return refusal;
            }
            tracing::info!(host = %target.host, error = %e, "upstream error");
            return crate::response::upstream_unreachable(
                &format!("{}:{}", target.host, target.port),
                &crate::response::root_cause(&e),
            );
        }
    };
    let (mut rparts, rbody) = resp.into_parts();
    strip_hop_by_hop(&mut rparts.headers);
    if inspecting {
        return crate::redact_stream::finish_response(
            &shared,
            rparts,
            rbody,
            http::Version::HTTP_11,
        );
    }
    Response::from_parts(rparts, rbody.boxed())
}

#[cfg(test)]
mod tests {
    use super::parse_inspect_max_body;
    use pretty_assertions::assert_eq;

    #[test]
    fn inspect_max_body_takes_bytes_and_binary_suffixes_only() {
        let rows = [
            "1048576",
            "64MiB",
            "512 KiB",
            "1GiB",
            " 7 ",
            "0",
            "64MB",
            "64mib",
            "MiB",
            "-1",
            "99999999999999999999",
            "1.5MiB",
        ];
        let got: Vec<Option<usize>> = rows
            .iter()
            .map(|r| parse_inspect_max_body(r).ok())
            .collect();
        assert_eq!(
            got,
            vec![
                Some(1 << 20),
                Some(64 << 20),
                Some(512 << 10),
                Some(1 << 30),
                Some(7),
                None,
                None,
                None,
                None,
                None,
                None,
                None,
            ]
        );
        assert!(
            parse_inspect_max_body("64MB")
                .unwrap_err()
                .to_string()
                .contains("KiB, MiB or GiB")
        );
    }
}
