//! SSE time to first byte: direct vs through a CONNECT tunnel vs through TLS inspection, on
//! loopback, interleaved in one run (BENCHMARKS.md "SSE through the egress proxy").
//! `cargo bench -p iterion-netproxy --bench sse [-- --rounds N]`.
//!
//! The upstream is `iterion-test-support`'s HTTPS server (`/sse`: `text/event-stream`, the first
//! event at once). Each round and path measures, on a fresh connection:
//! - `ttfb`: from opening the TCP connection (to the upstream, or to the proxy) to the first
//!   event's bytes: connect, [CONNECT,] TLS, request, first event;
//! - `request ttfb`: from sending the request on the already-established TLS session to the
//!   first event (what an open keep-alive connection pays).
//!
//! Under inspection the proxy holds a secret scoped to the host, so the response goes through
//! the streaming redactor.
#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark fails loudly"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty};
use hyper_util::rt::TokioIo;
use iterion_netproxy::{
    EphemeralCa, ProxyBuilder, ProxyToken, RunningProxy, Secret, SecretRewriter,
    StaticHostsResolver, SystemResolver, compile, parse_static_hosts,
};
use iterion_test_support::https::HttpsServer;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

const TOKEN: &str = "bench-token";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    Direct,
    Tunnel,
    Inspected,
}

async fn proxy(server: &HttpsServer, inspect: bool) -> RunningProxy {
    let p = server.port();
    let policy = compile(
        "allowlist",
        &[format!("sse.test:{p}"), format!("127.0.0.1/32:{p}")],
    )
    .unwrap();
    let hosts = parse_static_hosts("sse.test=127.0.0.1").unwrap();
    let mut b = ProxyBuilder::new(
        "bench",
        policy,
        ProxyToken::from_secret_string(TOKEN.into()),
    )
    .listen_tcp("127.0.0.1:0".parse().unwrap())
    .resolver(Arc::new(StaticHostsResolver::new(
        hosts,
        Arc::new(SystemResolver),
    )));
    if inspect {
        let mut rw = SecretRewriter::new();
        rw.add_value_secret(
            "K",
            Secret::new("bench-secret-value-0123"),
            &["sse.test".into()],
        )
        .unwrap();
        b = b
            .tls_inspection(Arc::new(
                EphemeralCa::new(Duration::from_secs(3600)).unwrap(),
            ))
            .secrets(rw)
            .extra_upstream_root(server.ca_der.clone());
    }
    b.start().await.unwrap()
}

fn tls_config(root: &CertificateDer<'static>) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(root.clone()).unwrap();
    let mut cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(cfg)
}

/// The upstream, the two proxies, and the root the inspected path's client trusts.
struct Setup {
    server: HttpsServer,
    tunnel: RunningProxy,
    inspected: RunningProxy,
    inspected_root: CertificateDer<'static>,
}

/// One SSE request on a fresh connection: (ttfb, request ttfb).
async fn once(path: Path, setup: &Setup) -> (Duration, Duration) {
    let Setup {
        server,
        tunnel,
        inspected,
        inspected_root,
    } = setup;
    let p = server.port();
    let target = format!("sse.test:{p}");
    let t0 = Instant::now();
    let (tcp, root) = match path {
        Path::Direct => (
            TcpStream::connect(server.addr).await.unwrap(),
            server.ca_der.clone(),
        ),
        Path::Tunnel | Path::Inspected => {
            let (proxy, root) = match path {
                Path::Tunnel => (tunnel, server.ca_der.clone()),
                _ => (inspected, inspected_root.clone()),
            };
            let mut s = TcpStream::connect(proxy.tcp_addr().unwrap()).await.unwrap();
            s.set_nodelay(true).unwrap();
            s.write_all(
                format!("CONNECT {target} HTTP/1.1\r\nProxy-Authorization: Bearer {TOKEN}\r\n\r\n")
                    .as_bytes(),
            )
            .await
            .unwrap();
            let mut head = Vec::new();
            let mut b = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                s.read_exact(&mut b).await.unwrap();
                head.push(b[0]);
            }
            assert!(head.starts_with(b"HTTP/1.1 200"));
            (s, root)
        }
    };
    tcp.set_nodelay(true).unwrap();
    let tls = tokio_rustls::TlsConnector::from(tls_config(&root))
        .connect(ServerName::try_from("sse.test").unwrap(), tcp)
        .await
        .unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(conn);
    let req = hyper::Request::get("/sse?n=2&gap_ms=200")
        .header("host", &target)
        .body(Empty::<Bytes>::new())
        .unwrap();
    let t1 = Instant::now();
    let resp = sender.send_request(req).await.unwrap();
    let mut body = resp.into_body();
    loop {
        let frame = body.frame().await.unwrap().unwrap();
        if frame.data_ref().is_some_and(|d| !d.is_empty()) {
            break;
        }
    }
    (t0.elapsed(), t1.elapsed())
}

fn stats(mut v: Vec<Duration>) -> String {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    format!(
        "median {:.2} ms, p90 {:.2} ms, min {:.2} ms",
        ms(at(0.5)),
        ms(at(0.9)),
        ms(v[0])
    )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args
        .iter()
        .position(|a| a == "--rounds")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let server = HttpsServer::start(&["sse.test"]);
    let tunnel = proxy(&server, false).await;
    let inspected = proxy(&server, true).await;
    let pem = inspected.ca_pem().unwrap().to_owned();
    let inspected_root = {
        use rustls::pki_types::pem::PemObject as _;
        CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
    };
    let setup = Setup {
        server,
        tunnel,
        inspected,
        inspected_root,
    };
    let paths = [Path::Direct, Path::Tunnel, Path::Inspected];
    // Warm-up (leaf minting, first handshakes).
    for p in paths {
        once(p, &setup).await;
    }
    let mut full: [Vec<Duration>; 3] = Default::default();
    let mut req: [Vec<Duration>; 3] = Default::default();
    for _ in 0..rounds {
        for (i, p) in paths.iter().enumerate() {
            let (a, b) = once(*p, &setup).await;
            full[i].push(a);
            req[i].push(b);
        }
    }
    println!("SSE time to first event, {rounds} rounds interleaved (direct, tunnel, inspected):");
    for (i, p) in paths.iter().enumerate() {
        println!("  {p:?}: ttfb {}", stats(full[i].clone()));
        println!("  {p:?}: request ttfb {}", stats(req[i].clone()));
    }
    setup.tunnel.shutdown().await;
    setup.inspected.shutdown().await;
}
