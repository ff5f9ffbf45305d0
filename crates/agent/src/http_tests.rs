//! The model call's production path, without a container: `https://` through the real egress
//! proxy (`CONNECT` with its token, TLS inspection with the per-run CA), a gateway placeholder
//! in the request headers materialised toward the provider host only.
use std::sync::{Arc, Mutex};

use iterion_netproxy::{
    EphemeralCa, ProxyBuilder, ProxyToken, Secret, SecretRewriter, compile, placeholder_for,
};
use pretty_assertions::assert_eq;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

const KEY: &str = "sk-ant-real-0123456789abcdef";

/// A TLS upstream for `localhost` (its certificate from `ca`) that records the request head and
/// answers a fixed JSON body.
async fn upstream(ca: &EphemeralCa) -> (u16, Arc<Mutex<Vec<String>>>) {
    let leaf = ca.leaf_for("localhost").unwrap();
    #[derive(Debug)]
    struct Fixed(Arc<rustls::sign::CertifiedKey>);
    impl rustls::server::ResolvesServerCert for Fixed {
        fn resolve(
            &self,
            _hello: rustls::server::ClientHello<'_>,
        ) -> Option<Arc<rustls::sign::CertifiedKey>> {
            Some(Arc::clone(&self.0))
        }
    }
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_cert_resolver(Arc::new(Fixed(leaf)));
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&heads);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let Ok(mut tls) = acceptor.accept(tcp).await else {
                continue;
            };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                if tls.read(&mut byte).await.unwrap_or(0) == 0 {
                    break;
                }
                head.push(byte[0]);
            }
            let text = String::from_utf8_lossy(&head).into_owned();
            let length = text
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                })
                .unwrap_or(0);
            let mut body = vec![0u8; length];
            let _ = tls.read_exact(&mut body).await;
            seen.lock().unwrap().push(text);
            let answer = r#"{"content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":1,"output_tokens":2}}"#;
            let _ = tls
                .write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                        answer.len()
                    )
                    .as_bytes(),
                )
                .await;
            let _ = tls.shutdown().await;
        }
    });
    (port, heads)
}

#[tokio::test]
async fn https_through_the_inspecting_proxy_materialises_the_placeholder_toward_its_host_only() {
    let upstream_ca = EphemeralCa::new(Duration::from_secs(3600)).unwrap();
    let (port, heads) = upstream(&upstream_ca).await;
    let mut rewriter = SecretRewriter::new();
    rewriter
        .add_value_secret(
            "ITERION_GATEWAY_ANTHROPIC",
            Secret::new(KEY.as_bytes().to_vec()),
            &["localhost".to_owned()],
        )
        .unwrap();
    // The upstream is on loopback, which a running proxy refuses under every mode unless an
    // address rule names it, on its port (issue 15 items 9 and 10).
    let rules = [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
    ];
    let proxy = ProxyBuilder::new(
        "r",
        compile("allowlist", &rules).unwrap(),
        ProxyToken::generate().unwrap(),
    )
    .listen_tcp("127.0.0.1:0".parse().unwrap())
    .secrets(rewriter)
    .tls_inspection(Arc::new(
        EphemeralCa::new(Duration::from_secs(3600)).unwrap(),
    ))
    .extra_upstream_root(upstream_ca.cert_der().clone())
    .start()
    .await
    .unwrap();
    let endpoint = proxy.endpoint_url("127.0.0.1", proxy.tcp_addr().unwrap().port());
    let client = HttpClient::with_roots(
        Route::Proxy(ProxyUrl::parse(&endpoint).unwrap()),
        Duration::from_secs(20),
        proxy.ca_pem().unwrap().as_bytes(),
    )
    .unwrap();
    let placeholder = placeholder_for("ITERION_GATEWAY_ANTHROPIC");
    let answer = client
        .post_json(
            &format!("https://localhost:{port}/v1/messages"),
            &[("x-api-key", placeholder.clone())],
            b"{}".to_vec(),
        )
        .await
        .unwrap();
    assert_eq!(answer.status, 200);
    assert_eq!(
        crate::wire::decode(crate::provider::Provider::Anthropic, &answer.body)
            .unwrap()
            .text,
        "hi"
    );
    let heads = heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 1);
    assert!(
        heads[0].lines().any(|l| l == format!("x-api-key: {KEY}")),
        "{}",
        heads[0]
    );

    // Without the proxy's token the tunnel is refused, and the client says so.
    let bad = HttpClient::with_roots(
        Route::Proxy(ProxyUrl::parse(&endpoint.replace("t:", "t:wrong")).unwrap()),
        Duration::from_secs(20),
        b"",
    )
    .unwrap()
    .post_json(
        &format!("https://localhost:{port}/v1/messages"),
        &[],
        b"{}".to_vec(),
    )
    .await;
    assert!(
        matches!(bad, Err(HttpError::ProxyRefused { status: 407, .. })),
        "{bad:?}"
    );
}
