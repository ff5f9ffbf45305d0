//! A local HTTPS server for egress tests: a fresh test CA (hand its PEM to the proxy as
//! `ITERION_SANDBOX_UPSTREAM_CA`, or its DER to `ProxyBuilder::extra_upstream_root`), a leaf for
//! the names given, HTTP/1.1 and HTTP/2 by ALPN, on its own thread and runtime (so sync and
//! async tests alike can use it), bound to `127.0.0.1`.
//!
//! Routes:
//! - `/sse?n=N&gap_ms=M`: `text/event-stream`, `N` events `data: <i>\n\n`, `M` ms apart;
//! - `/ws`: a WebSocket echo (HTTP/1.1 `Upgrade`), every message sent back as it came;
//! - `/stream`: answers at once and echoes each request body chunk as it arrives (a
//!   bidirectional stream, like gRPC's), then the request's trailers as its own trailers, plus
//!   `grpc-status: 0`;
//! - `/files/<path>`: the file at `<path>` under the directory given to
//!   [`HttpsServer::start_serving`] (a bare git repository after `git update-server-info` is
//!   cloned from there over git's "dumb" HTTP protocol), `404` when there is none;
//! - anything else: `auth=<Authorization>;proto=<HTTP version>`, the `Authorization` header
//!   echoed so that response redaction is observable.
//!
//! Every request is recorded ([`HttpsServer::seen`]) when its head arrives, the WebSocket
//! handshake included; its body and trailers are added once they have arrived whole.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt as _, StreamExt as _};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_tungstenite::tungstenite::protocol::Role;

/// What the server received: one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    /// The method.
    pub method: String,
    /// The path and query.
    pub path: String,
    /// `HTTP/1.1` or `HTTP/2.0`.
    pub version: String,
    /// Every header, names lower-case, in order.
    pub headers: Vec<(String, String)>,
    /// The body, once it has arrived whole (empty until then, or if it never did).
    pub body: String,
    /// Whether the body arrived whole (false: still coming, cut, or an upgrade).
    pub complete: bool,
    /// The trailers, names lower-case, once the body has arrived.
    pub trailers: Vec<(String, String)>,
}

impl Seen {
    /// The first value of header `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A running server; it stops when dropped.
pub struct HttpsServer {
    /// Where it listens (`127.0.0.1:<port>`).
    pub addr: SocketAddr,
    /// The test CA, PEM.
    pub ca_pem: String,
    /// The test CA, DER.
    pub ca_der: CertificateDer<'static>,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for HttpsServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl HttpsServer {
    /// Starts a server whose leaf names `names` (DNS names or IP addresses).
    pub fn start(names: &[&str]) -> Self {
        Self::start_serving(names, None)
    }

    /// [`Self::start`], also serving the files under `files` at `/files/`.
    pub fn start_serving(names: &[&str], files: Option<std::path::PathBuf>) -> Self {
        let files = Arc::new(files);
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "iterion test upstream CA");
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);
        let leaf_key = rcgen::KeyPair::generate().unwrap();
        let leaf =
            rcgen::CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap()
                .signed_by(&leaf_key, &issuer)
                .unwrap();
        let mut cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone(), ca_cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
        )
        .unwrap();
        cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let recorded = seen.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let accept = async {
                    loop {
                        let Ok((io, _)) = listener.accept().await else {
                            return;
                        };
                        let _ = io.set_nodelay(true);
                        let (acceptor, seen) = (acceptor.clone(), recorded.clone());
                        let files = files.clone();
                        tokio::spawn(async move {
                            let Ok(tls) = acceptor.accept(io).await else {
                                return;
                            };
                            let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
                            let svc = service_fn(move |r| respond(seen.clone(), files.clone(), r));
                            let io = TokioIo::new(tls);
                            if h2 {
                                let _ =
                                    hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                                        .serve_connection(io, svc)
                                        .await;
                            } else {
                                let _ = hyper::server::conn::http1::Builder::new()
                                    .serve_connection(io, svc)
                                    .with_upgrades()
                                    .await;
                            }
                        });
                    }
                };
                tokio::select! {
                    _ = accept => {}
                    _ = stopped => {}
                }
            });
        });
        Self {
            addr,
            ca_pem: ca_cert.pem(),
            ca_der: ca_cert.der().clone(),
            seen,
            stop: Some(stop),
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Every request so far, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

type Body = BoxBody<Bytes, Infallible>;

fn full(text: impl Into<Bytes>) -> Body {
    Full::new(text.into()).boxed()
}

fn query(path: &str, key: &str) -> Option<u64> {
    path.split_once('?')?
        .1
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| v.parse().ok())
}

async fn respond(
    seen: Arc<Mutex<Vec<Seen>>>,
    files: Arc<Option<std::path::PathBuf>>,
    mut req: hyper::Request<Incoming>,
) -> Result<hyper::Response<Body>, Infallible> {
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let version = format!("{:?}", req.version());
    let index = record_head(
        &seen,
        Seen {
            method: req.method().to_string(),
            path: path.clone(),
            version: version.clone(),
            headers: req
                .headers()
                .iter()
                .map(|(n, v)| {
                    (
                        n.to_string(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect(),
            body: String::new(),
            complete: false,
            trailers: Vec::new(),
        },
    );
    let auth = req
        .headers()
        .get("authorization")
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .unwrap_or_default();
    if path.starts_with("/ws") {
        let Some(key) = req.headers().get("sec-websocket-key").cloned() else {
            let mut r = hyper::Response::new(full("not a websocket handshake"));
            *r.status_mut() = hyper::StatusCode::BAD_REQUEST;
            return Ok(r);
        };
        let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
        let upgrade = hyper::upgrade::on(&mut req);
        tokio::spawn(async move {
            let Ok(up) = upgrade.await else { return };
            let mut ws = tokio_tungstenite::WebSocketStream::from_raw_socket(
                TokioIo::new(up),
                Role::Server,
                None,
            )
            .await;
            while let Some(Ok(msg)) = ws.next().await {
                if msg.is_close() {
                    break;
                }
                if (msg.is_text() || msg.is_binary()) && ws.send(msg).await.is_err() {
                    break;
                }
            }
        });
        let r = hyper::Response::builder()
            .status(hyper::StatusCode::SWITCHING_PROTOCOLS)
            .header("connection", "upgrade")
            .header("upgrade", "websocket")
            .header("sec-websocket-accept", accept)
            .header("x-echo-auth", auth)
            .body(full(""))
            .unwrap();
        return Ok(r);
    }
    if path.starts_with("/sse") {
        let n = query(&path, "n").unwrap_or(3);
        let gap = Duration::from_millis(query(&path, "gap_ms").unwrap_or(100));
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, Infallible>>(4);
        tokio::spawn(async move {
            for i in 0..n {
                if i > 0 {
                    tokio::time::sleep(gap).await;
                }
                let event = format!("data: {i}\n\n");
                if tx.send(Ok(Frame::data(Bytes::from(event)))).await.is_err() {
                    return;
                }
            }
        });
        let stream =
            futures_util::stream::unfold(
                rx,
                |mut rx| async move { rx.recv().await.map(|f| (f, rx)) },
            );
        let r = hyper::Response::builder()
            .header("content-type", "text/event-stream")
            .header("cache-control", "no-cache")
            .body(http_body_util::BodyExt::boxed(StreamBody::new(stream)))
            .unwrap();
        return Ok(r);
    }
    if let (Some(rel), Some(root)) = (req.uri().path().strip_prefix("/files/"), files.as_ref()) {
        let rel = std::path::Path::new(rel);
        let inside = rel
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
        return Ok(match std::fs::read(root.join(rel)) {
            Ok(bytes) if inside => hyper::Response::new(full(bytes)),
            _ => {
                let mut r = hyper::Response::new(full("no such file"));
                *r.status_mut() = hyper::StatusCode::NOT_FOUND;
                r
            }
        });
    }
    if path.starts_with("/stream") {
        return Ok(hyper::Response::new(stream_echo(
            seen,
            index,
            req.into_body(),
        )));
    }
    if let Ok(body) = req.into_body().collect().await {
        let trailers = body.trailers().map(pairs).unwrap_or_default();
        record_body(&seen, index, &body.to_bytes(), trailers);
    }
    Ok(hyper::Response::new(full(format!(
        "auth={auth};proto={version}"
    ))))
}

fn pairs(h: &hyper::HeaderMap) -> Vec<(String, String)> {
    h.iter()
        .map(|(n, v)| {
            (
                n.to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect()
}

fn record_head(seen: &Mutex<Vec<Seen>>, head: Seen) -> usize {
    let mut seen = seen.lock().unwrap();
    seen.push(head);
    seen.len() - 1
}

fn record_body(
    seen: &Mutex<Vec<Seen>>,
    index: usize,
    body: &[u8],
    trailers: Vec<(String, String)>,
) {
    if let Some(s) = seen.lock().unwrap().get_mut(index) {
        s.body = String::from_utf8_lossy(body).into_owned();
        s.complete = true;
        s.trailers = trailers;
    }
}

/// The `/stream` route's body: each request chunk echoed as it arrives, then the request's
/// trailers and `grpc-status: 0` as trailers.
fn stream_echo(seen: Arc<Mutex<Vec<Seen>>>, index: usize, mut body: Incoming) -> Body {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, Infallible>>(16);
    tokio::spawn(async move {
        let mut all = Vec::new();
        let mut trailers = hyper::HeaderMap::new();
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else {
                return;
            };
            match frame.into_data() {
                Ok(data) => {
                    all.extend_from_slice(&data);
                    if tx.send(Ok(Frame::data(data))).await.is_err() {
                        return;
                    }
                }
                Err(frame) => {
                    if let Ok(t) = frame.into_trailers() {
                        trailers = t;
                    }
                }
            }
        }
        record_body(&seen, index, &all, pairs(&trailers));
        trailers.insert("grpc-status", hyper::header::HeaderValue::from_static("0"));
        let _ = tx.send(Ok(Frame::trailers(trailers))).await;
    });
    let stream =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|f| (f, rx)) });
    http_body_util::BodyExt::boxed(StreamBody::new(stream))
}
