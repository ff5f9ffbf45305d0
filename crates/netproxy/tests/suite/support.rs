//! A loopback HTTP upstream that records what it receives, a proxy starter, and a raw client
//! (the HTTPS upstream is test-support's `HttpsServer`).

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use iterion_netproxy::{
    BlockedEvent, BoxFuture, EphemeralCa, ProxyBuilder, ProxyToken, Resolver, RunningProxy,
    SecretRewriter, StaticHostsResolver, compile,
};
pub use iterion_test_support::https::HttpsServer;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub const TOKEN: &str = "test-token-0123456789";

/// What an upstream received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    pub method: String,
    pub uri: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

pub struct Upstream {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Vec<Seen>>>,
}

impl Upstream {
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

async fn respond(
    seen: Arc<Mutex<Vec<Seen>>>,
    req: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let auth = parts
        .headers
        .get("authorization")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    seen.lock().unwrap().push(Seen {
        method: parts.method.to_string(),
        uri: parts.uri.to_string(),
        headers: parts
            .headers
            .iter()
            .map(|(n, v)| {
                (
                    n.to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: String::from_utf8_lossy(&body).into_owned(),
    });
    // Echo the Authorization header so response redaction is observable.
    Ok(hyper::Response::new(Full::new(Bytes::from(format!(
        "hello; auth={auth}"
    )))))
}

pub async fn http_upstream() -> Upstream {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((io, _)) = l.accept().await else {
                return;
            };
            let s = s.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |r| respond(s.clone(), r));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(io), svc)
                    .await;
            });
        }
    });
    Upstream { addr, seen }
}

struct NoDns;
impl Resolver for NoDns {
    fn resolve<'a>(&'a self, _host: &'a str) -> BoxFuture<'a, std::io::Result<Vec<IpAddr>>> {
        Box::pin(async { Err(std::io::Error::other("no dns in tests")) })
    }
}

pub struct Harness {
    pub proxy: RunningProxy,
    pub events: Arc<Mutex<Vec<BlockedEvent>>>,
    pub ca: Option<Arc<EphemeralCa>>,
}

impl Harness {
    pub fn addr(&self) -> SocketAddr {
        self.proxy.tcp_addr().unwrap()
    }
    pub fn events(&self) -> Vec<BlockedEvent> {
        self.events.lock().unwrap().clone()
    }
}

pub struct Options<'a> {
    pub mode: &'a str,
    pub rules: Vec<String>,
    pub hosts: &'a str,
    pub secrets: Option<SecretRewriter>,
    pub inspect: bool,
    pub extra_root: Option<CertificateDer<'static>>,
    pub max_body: Option<usize>,
}

impl Default for Options<'_> {
    fn default() -> Self {
        Self {
            mode: "allowlist",
            rules: Vec::new(),
            hosts: "",
            secrets: None,
            inspect: false,
            extra_root: None,
            max_body: None,
        }
    }
}

pub async fn start(o: Options<'_>) -> Harness {
    let policy = compile(o.mode, &o.rules).unwrap();
    let map: HashMap<String, Vec<IpAddr>> = iterion_netproxy::parse_static_hosts(o.hosts).unwrap();
    let events = Arc::new(Mutex::new(Vec::new()));
    let ev = events.clone();
    let mut b = ProxyBuilder::new(
        "run-1",
        policy,
        ProxyToken::from_secret_string(TOKEN.into()),
    )
    .listen_tcp("127.0.0.1:0".parse().unwrap())
    .resolver(Arc::new(StaticHostsResolver::new(map, Arc::new(NoDns))))
    .on_blocked(Arc::new(move |e| ev.lock().unwrap().push(e)));
    let mut ca = None;
    if o.inspect {
        let c = Arc::new(EphemeralCa::new(std::time::Duration::from_secs(3600)).unwrap());
        ca = Some(c.clone());
        b = b.tls_inspection(c);
    }
    if let Some(s) = o.secrets {
        b = b.secrets(s);
    }
    if let Some(r) = o.extra_root {
        b = b.extra_upstream_root(r);
    }
    if let Some(m) = o.max_body {
        b = b.max_inspected_body(m);
    }
    Harness {
        proxy: b.start().await.unwrap(),
        events,
        ca,
    }
}

/// Rules as owned strings (rules that name a loopback upstream carry its port).
pub fn rules(list: &[&str]) -> Vec<String> {
    list.iter().map(|r| (*r).to_string()).collect()
}

/// Sends `head` (CRLFs included) and reads the response head; returns the status line + headers
/// and the open stream.
pub async fn send_head(addr: SocketAddr, head: &str) -> (String, TcpStream) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let mut b = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if s.read(&mut b).await.unwrap() == 0 {
            break;
        }
        buf.push(b[0]);
    }
    (String::from_utf8_lossy(&buf).into_owned(), s)
}

pub fn status_of(head: &str) -> u16 {
    head.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

pub async fn connect(addr: SocketAddr, target: &str) -> (String, TcpStream) {
    send_head(addr, &format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\nProxy-Authorization: Bearer {TOKEN}\r\n\r\n")).await
}

/// One HTTP/1.1 request over an established stream (plain or TLS); returns status and body.
pub async fn request_over<S>(
    io: S,
    req: hyper::Request<Full<Bytes>>,
) -> (u16, hyper::HeaderMap, String)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .unwrap();
    tokio::spawn(conn);
    let resp = sender.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, headers, String::from_utf8_lossy(&body).into_owned())
}

pub async fn tls_over(
    stream: TcpStream,
    sni: &str,
    root: &CertificateDer<'static>,
) -> tokio_rustls::client::TlsStream<TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(root.clone()).unwrap();
    let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(ServerName::try_from(sni.to_string()).unwrap(), stream)
        .await
        .unwrap()
}

pub fn get(uri: &str, host: &str) -> hyper::Request<Full<Bytes>> {
    hyper::Request::get(uri)
        .header("host", host)
        .body(Full::new(Bytes::new()))
        .unwrap()
}
