//! Auth, listeners and shutdown.

use base64::Engine as _;
use pretty_assertions::assert_eq;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::support::*;

#[tokio::test]
async fn missing_or_wrong_token_gets_407_and_bearer_and_basic_pass() {
    let up = http_upstream().await;
    let p = up.addr.port();
    let h = start(Options {
        rules: rules(&[&format!("a.test:{p}"), &format!("127.0.0.1/32:{p}")]),
        hosts: "a.test=127.0.0.1",
        ..Default::default()
    })
    .await;
    let t = format!("a.test:{}", up.addr.port());
    let (head, _) = send_head(
        h.addr(),
        &format!("CONNECT {t} HTTP/1.1\r\nHost: {t}\r\n\r\n"),
    )
    .await;
    assert_eq!(status_of(&head), 407);
    assert!(
        head.to_ascii_lowercase()
            .contains("proxy-authenticate: basic realm=\"iterion-sandbox\""),
        "{head}"
    );
    let (head, _) = send_head(
        h.addr(),
        &format!("CONNECT {t} HTTP/1.1\r\nProxy-Authorization: Bearer wrong\r\n\r\n"),
    )
    .await;
    assert_eq!(status_of(&head), 407);
    let (head, _) = send_head(
        h.addr(),
        &format!("CONNECT {t} HTTP/1.1\r\nProxy-Authorization: Bearer {TOKEN}\r\n\r\n"),
    )
    .await;
    assert_eq!(status_of(&head), 200);
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("t:{TOKEN}"));
    let (head, _) = send_head(
        h.addr(),
        &format!("CONNECT {t} HTTP/1.1\r\nProxy-Authorization: Basic {basic}\r\n\r\n"),
    )
    .await;
    assert_eq!(status_of(&head), 200);
    // A refusal before auth must not leak the policy: the 407 comes first.
    let (head, _) = send_head(h.addr(), "CONNECT denied.test:443 HTTP/1.1\r\n\r\n").await;
    assert_eq!(status_of(&head), 407);
    assert_eq!(h.events(), vec![]);
}

#[tokio::test]
async fn an_empty_host_gets_400_no_host() {
    let h = start(Options::default()).await;
    let (head, mut s) = send_head(h.addr(), &format!("GET /x HTTP/1.1\r\nProxy-Authorization: Bearer {TOKEN}\r\nHost: :80\r\nConnection: close\r\n\r\n")).await;
    assert_eq!(status_of(&head), 400);
    let mut body = String::new();
    s.read_to_string(&mut body).await.unwrap();
    assert_eq!(body, "no host");
}

#[tokio::test]
async fn the_unix_socket_listener_serves_and_is_removed_at_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("proxy.sock");
    let policy = iterion_netproxy::compile("allowlist", &["a.test"]).unwrap();
    let proxy = iterion_netproxy::ProxyBuilder::new(
        "run-u",
        policy,
        iterion_netproxy::ProxyToken::from_secret_string(TOKEN.into()),
    )
    .listen_unix(&path)
    .start()
    .await
    .unwrap();
    assert_eq!(proxy.tcp_addr(), None);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o666
    );
    let mut s = tokio::net::UnixStream::connect(&path).await.unwrap();
    s.write_all(b"CONNECT b.test:443 HTTP/1.1\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 12];
    s.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"HTTP/1.1 407");
    proxy.shutdown().await;
    proxy.shutdown().await; // idempotent
    assert!(!path.exists());
}

#[tokio::test]
async fn shutdown_closes_the_listener_and_every_open_tunnel() {
    let up = http_upstream().await;
    let h = start(Options {
        rules: {
            let p = up.addr.port();
            rules(&[&format!("upstream.test:{p}"), &format!("127.0.0.1/32:{p}")])
        },
        hosts: "upstream.test=127.0.0.1",
        ..Default::default()
    })
    .await;
    let target = format!("upstream.test:{}", up.addr.port());
    let (head, mut tunnel) = connect(h.addr(), &target).await;
    assert_eq!(status_of(&head), 200);
    let (_, mut idle) = send_head(h.addr(), "").await; // an idle client connection
    let addr = h.addr();
    tokio::time::timeout(std::time::Duration::from_secs(5), h.proxy.shutdown())
        .await
        .unwrap();
    let mut b = [0u8; 1];
    let n = tokio::time::timeout(std::time::Duration::from_secs(5), tunnel.read(&mut b))
        .await
        .unwrap()
        .unwrap_or(0);
    assert_eq!(n, 0, "tunnel still open");
    let n = tokio::time::timeout(std::time::Duration::from_secs(5), idle.read(&mut b))
        .await
        .unwrap()
        .unwrap_or(0);
    assert_eq!(n, 0, "idle connection still open");
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "listener still accepting"
    );
}

#[tokio::test]
async fn an_https_tunnel_without_inspection_reaches_the_upstream_end_to_end() {
    let up = HttpsServer::start(&["secure.test"]);
    let h = start(Options {
        rules: {
            let p = up.addr.port();
            rules(&[&format!("secure.test:{p}"), &format!("127.0.0.1/32:{p}")])
        },
        hosts: "secure.test=127.0.0.1",
        ..Default::default()
    })
    .await;
    let target = format!("secure.test:{}", up.addr.port());
    let (head, stream) = connect(h.addr(), &target).await;
    assert_eq!(status_of(&head), 200);
    let tls = tls_over(stream, "secure.test", &up.ca_der).await;
    let (status, _, body) = request_over(tls, get("/s", &target)).await;
    assert_eq!((status, body.as_str()), (200, "auth=;proto=HTTP/1.1"));
}

#[tokio::test]
async fn the_endpoint_carries_the_token_and_debug_does_not() {
    let h = start(Options::default()).await;
    assert_eq!(
        h.proxy.endpoint_url("127.0.0.1", 3128),
        format!("http://t:{TOKEN}@127.0.0.1:3128")
    );
    assert!(!format!("{:?}", h.proxy).contains(TOKEN));
    assert_eq!(h.proxy.ca_pem(), None);
}
