//! Egress proxy benchmark: proxied vs direct on loopback, interleaved (BENCHMARKS.md "Egress
//! proxy"). `cargo bench -p iterion-netproxy --bench egress [-- --requests N]`.
//!
//! - latency: one request per fresh connection (connect, [CONNECT,] GET, read to close), direct
//!   and through a CONNECT tunnel alternately; then HTTPS direct vs through TLS inspection.
//! - throughput: a 100 MB download direct vs through a tunnel, alternately, 3 rounds each: once
//!   as fast as loopback goes (CPU-bound: client, upstream and proxy share the cores), once from
//!   an upstream paced at 1 Gbit/s (what a download from outside looks like to the proxy).
//! - 1,000 tunnels held open at once; the process RSS before and after.
#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark fails loudly"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use iterion_netproxy::{
    EphemeralCa, ProxyBuilder, ProxyToken, StaticHostsResolver, SystemResolver, compile,
    parse_static_hosts,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const TOKEN: &str = "bench-token";
const BIG: usize = 100 * 1024 * 1024;
/// The paced upstream's rate: 1 Gbit/s.
const PACED_BYTES_PER_SEC: f64 = 125_000_000.0;

async fn serve<S: AsyncRead + AsyncWrite + Unpin>(mut s: S) {
    let mut buf = Vec::new();
    let mut b = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut b).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&b[..n]),
        }
    }
    let paced = buf.starts_with(b"GET /paced");
    let big = paced || buf.starts_with(b"GET /big");
    let len = if big { BIG } else { 13 };
    let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n");
    if s.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    if big {
        let chunk = vec![b'x'; 64 * 1024];
        let mut left = BIG;
        let started = tokio::time::Instant::now();
        while left > 0 {
            if paced {
                let sent = (BIG - left) as f64;
                let due = started + Duration::from_secs_f64(sent / PACED_BYTES_PER_SEC);
                tokio::time::sleep_until(due).await;
            }
            let n = left.min(chunk.len());
            if s.write_all(&chunk[..n]).await.is_err() {
                return;
            }
            left -= n;
        }
    } else if s.write_all(b"hello, bench!").await.is_err() {
        return;
    }
    let _ = s.shutdown().await;
}

struct TestCa {
    root: CertificateDer<'static>,
    acceptor: tokio_rustls::TlsAcceptor,
}

fn test_ca() -> TestCa {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["bench.test".to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![leaf.der().clone()],
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    )
    .unwrap();
    TestCa {
        root: ca.der().clone(),
        acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(cfg)),
    }
}

fn connector(root: &CertificateDer<'static>) -> tokio_rustls::TlsConnector {
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
}

async fn open_tunnel(proxy: std::net::SocketAddr, port: u16) -> TcpStream {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    s.set_nodelay(true).unwrap();
    s.write_all(
        format!(
            "CONNECT bench.test:{port} HTTP/1.1\r\nProxy-Authorization: Bearer {TOKEN}\r\n\r\n"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(
            s.read(&mut b).await.unwrap(),
            1,
            "proxy closed during CONNECT"
        );
        head.push(b[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    s
}

async fn get<S: AsyncRead + AsyncWrite + Unpin>(mut s: S, path: &str) -> usize {
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: bench.test\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0;
    loop {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return total,
            Ok(n) => total += n,
        }
    }
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("VmRSS:")
                .map(|v| v.trim().trim_end_matches(" kB").trim().parse().unwrap_or(0))
        })
        .unwrap_or(0)
}

fn report(name: &str, direct: &mut [f64], proxied: &mut [f64]) {
    let (d50, d95) = (pct(direct, 0.5), pct(direct, 0.95));
    let (p50, p95) = (pct(proxied, 0.5), pct(proxied, 0.95));
    println!(
        "{name}: direct p50 {d50:.3} ms p95 {d95:.3} ms | proxied p50 {p50:.3} ms p95 {p95:.3} ms | added p50 {:.3} ms p95 {:.3} ms",
        p50 - d50,
        p95 - d95
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let requests: usize = args
        .iter()
        .position(|a| a == "--requests")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(run(requests));
}

async fn run(requests: usize) {
    // Upstreams: plain and TLS.
    let plain = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let plain_port = plain.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((s, _)) = plain.accept().await {
            let _ = s.set_nodelay(true);
            tokio::spawn(serve(s));
        }
    });
    let tca = test_ca();
    let tls = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let tls_port = tls.local_addr().unwrap().port();
    let acceptor = tca.acceptor.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = tls.accept().await {
            let _ = s.set_nodelay(true);
            let a = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(t) = a.accept(s).await {
                    serve(t).await;
                }
            });
        }
    });
    let policy = || compile("allowlist", &["bench.test", "127.0.0.1/32"]).unwrap();
    let resolver = || {
        Arc::new(StaticHostsResolver::new(
            parse_static_hosts("bench.test=127.0.0.1").unwrap(),
            Arc::new(SystemResolver),
        ))
    };
    let proxy = ProxyBuilder::new(
        "bench",
        policy(),
        ProxyToken::from_secret_string(TOKEN.into()),
    )
    .listen_tcp("127.0.0.1:0".parse().unwrap())
    .resolver(resolver())
    .start()
    .await
    .unwrap();
    let paddr = proxy.tcp_addr().unwrap();
    let ca = Arc::new(EphemeralCa::new(Duration::from_secs(3600)).unwrap());
    let mitm = ProxyBuilder::new(
        "bench-mitm",
        policy(),
        ProxyToken::from_secret_string(TOKEN.into()),
    )
    .listen_tcp("127.0.0.1:0".parse().unwrap())
    .resolver(resolver())
    .tls_inspection(ca.clone())
    .extra_upstream_root(tca.root.clone())
    .start()
    .await
    .unwrap();
    let maddr = mitm.tcp_addr().unwrap();
    println!("egress bench: {requests} requests per arm, interleaved; 2 tokio workers; loopback");

    // Warm up.
    for _ in 0..20 {
        get(
            TcpStream::connect(("127.0.0.1", plain_port)).await.unwrap(),
            "/small",
        )
        .await;
        get(open_tunnel(paddr, plain_port).await, "/small").await;
    }
    let (mut d, mut p) = (Vec::new(), Vec::new());
    for _ in 0..requests {
        let t = Instant::now();
        let s = TcpStream::connect(("127.0.0.1", plain_port)).await.unwrap();
        s.set_nodelay(true).unwrap();
        assert!(get(s, "/small").await > 0);
        d.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        assert!(get(open_tunnel(paddr, plain_port).await, "/small").await > 0);
        p.push(t.elapsed().as_secs_f64() * 1e3);
    }
    report("CONNECT (plain HTTP inside)", &mut d, &mut p);

    let direct_tls = connector(&tca.root);
    let via_ca = connector(ca.cert_der());
    let name = ServerName::try_from("bench.test").unwrap();
    let tls_requests = (requests / 2).max(50);
    let (mut d, mut p) = (Vec::new(), Vec::new());
    for i in 0..tls_requests + 10 {
        let t = Instant::now();
        let s = TcpStream::connect(("127.0.0.1", tls_port)).await.unwrap();
        s.set_nodelay(true).unwrap();
        let s = direct_tls.connect(name.clone(), s).await.unwrap();
        assert!(get(s, "/small").await > 0);
        let direct = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let s = via_ca
            .connect(name.clone(), open_tunnel(maddr, tls_port).await)
            .await
            .unwrap();
        assert!(get(s, "/small").await > 0);
        let proxied = t.elapsed().as_secs_f64() * 1e3;
        if i >= 10 {
            d.push(direct);
            p.push(proxied);
        }
    }
    report("HTTPS with TLS inspection", &mut d, &mut p);

    for (label, path) in [
        ("100 MB transfer", "/big"),
        ("100 MB transfer, upstream paced at 1 Gbit/s", "/paced"),
    ] {
        let (mut d, mut p) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            let t = Instant::now();
            let n = get(
                TcpStream::connect(("127.0.0.1", plain_port)).await.unwrap(),
                path,
            )
            .await;
            assert!(n >= BIG);
            d.push(BIG as f64 / t.elapsed().as_secs_f64() / 1e6);
            let t = Instant::now();
            let n = get(open_tunnel(paddr, plain_port).await, path).await;
            assert!(n >= BIG);
            p.push(BIG as f64 / t.elapsed().as_secs_f64() / 1e6);
        }
        let (dm, pm) = (pct(&mut d, 0.5), pct(&mut p, 0.5));
        println!(
            "{label}: direct {dm:.0} MB/s | through CONNECT {pm:.0} MB/s | ratio {:.2}x (median of 3)",
            pm / dm
        );
    }

    // 1,000 tunnels held open. The upstream holds its side too (it waits for a request head).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = rss_kib();
    let mut held = Vec::with_capacity(1000);
    let t = Instant::now();
    for _ in 0..1000 {
        held.push(open_tunnel(paddr, plain_port).await);
    }
    let opened = t.elapsed();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = rss_kib();
    // Every tunnel still works.
    let last = held.pop().unwrap();
    assert!(get(last, "/small").await > 0);
    println!(
        "1000 concurrent tunnels: opened in {:.0} ms; process RSS {} KiB -> {} KiB (+{} KiB, {:.1} KiB/tunnel incl. client and upstream sockets)",
        opened.as_secs_f64() * 1e3,
        before,
        after,
        after.saturating_sub(before),
        after.saturating_sub(before) as f64 / 1000.0
    );
    drop(held);
    proxy.shutdown().await;
    mitm.shutdown().await;
}
