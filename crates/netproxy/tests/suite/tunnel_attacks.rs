//! Issue 22 item 4 (the proxy's part): known bypasses from other sandboxes, each against the real
//! proxy over loopback. Control bytes and odd spellings of a CONNECT target or a `Host`; an SNI
//! that names another host than the CONNECT; HTTP/2's `:authority` and CONNECT inside a tunnel;
//! a WebSocket toward a denied host; HTTP/2's header and stream bounds.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::rt::{TokioExecutor, TokioIo};
use iterion_netproxy::{BlockReason, MAX_INSPECTED_HEAD_BYTES, MAX_INSPECTED_STREAMS};
use iterion_test_support::https::HttpsServer;
use pretty_assertions::assert_eq;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio::io::AsyncReadExt as _;

use super::support::*;

/// An inspecting proxy allowing `secure.test` and `other.test` on `server`'s port, denying
/// `denied.test` (mapped to the same server, so a bypass would reach it).
async fn inspecting(server: &HttpsServer) -> Harness {
    let p = server.port();
    start(Options {
        rules: rules(&[
            &format!("secure.test:{p}"),
            &format!("other.test:{p}"),
            &format!("127.0.0.1/32:{p}"),
        ]),
        hosts: "secure.test=127.0.0.1,other.test=127.0.0.1,denied.test=127.0.0.1",
        inspect: true,
        extra_root: Some(server.ca_der.clone()),
        ..Default::default()
    })
    .await
}

/// Accepts any certificate: a client that does not check names, as an attacker's would.
#[derive(Debug)]
struct AnyCert;

impl rustls::client::danger::ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A TLS session inside a CONNECT to `target`, with SNI `sni`, trusting anything, offering `alpn`.
async fn blind_tunnel(
    h: &Harness,
    target: &str,
    sni: &str,
    alpn: &[u8],
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let (head, stream) = connect(h.addr(), target).await;
    assert_eq!(status_of(&head), 200, "{head}");
    let mut cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .dangerous()
    .with_custom_certificate_verifier(Arc::new(AnyCert))
    .with_no_client_auth();
    cfg.alpn_protocols = vec![alpn.to_vec()];
    tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(ServerName::try_from(sni.to_string()).unwrap(), stream)
        .await
        .unwrap()
}

async fn h2_sender(
    h: &Harness,
    target: &str,
) -> hyper::client::conn::http2::SendRequest<Full<Bytes>> {
    let sni = target.split(':').next().unwrap();
    let tls = blind_tunnel(h, target, sni, b"h2").await;
    let (s, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(conn);
    s
}

fn h2_get(uri: &str) -> hyper::Request<Full<Bytes>> {
    hyper::Request::get(uri)
        .version(http::Version::HTTP_2)
        .body(Full::new(Bytes::new()))
        .unwrap()
}

#[tokio::test]
async fn control_bytes_and_odd_spellings_of_a_connect_target_never_reach_another_host() {
    let server = HttpsServer::start(&["secure.test"]);
    let h = inspecting(&server).await;
    let p = server.port();
    let cases: Vec<(String, u16)> = vec![
        (format!("secure.test\0.denied.test:{p}"), 400),
        (format!("denied.test\0secure.test:{p}"), 400),
        (format!("secure.test\x01:{p}"), 400),
        (format!("secure.test\x7f:{p}"), 400),
        (format!("secure.test\x1b[0m:{p}"), 400),
        (format!("secure.test%00:{p}"), 400),
        (format!("secure%2etest:{p}"), 400),
        (format!("denied.test%2f@secure.test:{p}"), 400),
        (format!("denied.test:{p}"), 403),
        (format!("DENIED.TEST.:{p}"), 403),
        (format!("Denied.Test..:{p}"), 403),
        (format!("xn--dnied-bsa.test:{p}"), 403),
        // The canonical spellings of an allowed name are that name.
        (format!("SECURE.TEST.:{p}"), 200),
        (format!("secure.test.:{p}"), 200),
    ];
    let mut got = Vec::new();
    for (target, _) in &cases {
        let (head, _) = send_head(
            h.addr(),
            &format!("CONNECT {target} HTTP/1.1\r\nProxy-Authorization: Bearer {TOKEN}\r\n\r\n"),
        )
        .await;
        got.push((target.clone(), status_of(&head)));
    }
    assert_eq!(got, cases);
    // A Host header inside the tunnel, in the same shapes: only the canonical target passes.
    let t = format!("secure.test:{p}");
    for (host, want) in [
        (format!("secure.test\0.denied.test:{p}"), 400),
        (format!("secure.test%00:{p}"), 421),
        (format!("denied.test:{p}"), 421),
        (format!("DENIED.TEST.:{p}"), 421),
        (format!("xn--dnied-bsa.test:{p}"), 421),
        (format!("SECURE.TEST.:{p}"), 200),
    ] {
        let tls = blind_tunnel(&h, &t, "secure.test", b"http/1.1").await;
        let raw = format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        let status = raw_status_over(tls, raw.as_bytes()).await;
        assert_eq!(status, want, "{host:?}");
    }
    // Only the two canonical CONNECTs and the one canonical Host got anywhere.
    assert_eq!(server.seen().len(), 1, "{:?}", server.seen());
}

/// Writes `raw` over `io` and returns the response's status (0 when the connection closed).
async fn raw_status_over<S>(mut io: S, raw: &[u8]) -> u16
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::AsyncWriteExt as _;
    io.write_all(raw).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), io.read_to_end(&mut out)).await;
    status_of(&String::from_utf8_lossy(&out))
}

#[tokio::test]
async fn an_sni_that_names_another_host_than_the_connect_is_cut_off_before_any_request() {
    let server = HttpsServer::start(&["secure.test", "other.test"]);
    let h = inspecting(&server).await;
    let t = format!("secure.test:{}", server.port());
    // SNI other.test (allowed too) inside a tunnel to secure.test, with a Host that matches the
    // tunnel: the request must not be served.
    let tls = blind_tunnel(&h, &t, "other.test", b"http/1.1").await;
    let raw = format!("GET / HTTP/1.1\r\nHost: {t}\r\nConnection: close\r\n\r\n");
    assert_eq!(raw_status_over(tls, raw.as_bytes()).await, 0);
    assert_eq!(server.seen(), vec![]);
    assert_eq!(
        h.events()
            .iter()
            .map(|e| (e.host.as_str(), e.reason))
            .collect::<Vec<_>>(),
        vec![("secure.test", BlockReason::HostMismatch)]
    );
    // The same tunnel with the right SNI is served.
    let tls = blind_tunnel(&h, &t, "Secure.Test", b"http/1.1").await;
    assert_eq!(raw_status_over(tls, raw.as_bytes()).await, 200);
}

#[tokio::test]
async fn http2_authority_or_connect_naming_another_host_inside_the_tunnel_gets_421() {
    let server = HttpsServer::start(&["secure.test", "other.test"]);
    let h = inspecting(&server).await;
    let p = server.port();
    let t = format!("secure.test:{p}");
    let mut s = h2_sender(&h, &t).await;
    let mut got = Vec::new();
    // `:authority` of another allowed host, of a denied one, and on another port.
    for authority in [
        format!("other.test:{p}"),
        format!("denied.test:{p}"),
        format!("secure.test:{}", p ^ 1),
        "secure.test".to_owned(),
    ] {
        let r = s
            .send_request(h2_get(&format!("https://{authority}/")))
            .await
            .unwrap();
        got.push((authority, r.status().as_u16()));
    }
    // `:authority` right but a Host header naming another host.
    let mut req = h2_get(&format!("https://{t}/"));
    req.headers_mut()
        .insert("host", format!("other.test:{p}").parse().unwrap());
    got.push((
        "host header".to_owned(),
        s.send_request(req).await.unwrap().status().as_u16(),
    ));
    // CONNECT and extended CONNECT (WebSocket) toward another host.
    let req = hyper::Request::connect(format!("other.test:{p}"))
        .version(http::Version::HTTP_2)
        .body(Full::new(Bytes::new()))
        .unwrap();
    got.push((
        "connect".to_owned(),
        s.send_request(req).await.unwrap().status().as_u16(),
    ));
    let req = hyper::Request::connect(format!("https://denied.test:{p}/ws"))
        .version(http::Version::HTTP_2)
        .extension(hyper::ext::Protocol::from_static("websocket"))
        .header("sec-websocket-version", "13")
        .body(Full::new(Bytes::new()))
        .unwrap();
    got.push((
        "websocket".to_owned(),
        s.send_request(req).await.unwrap().status().as_u16(),
    ));
    assert_eq!(
        got,
        vec![
            (format!("other.test:{p}"), 421),
            (format!("denied.test:{p}"), 421),
            (format!("secure.test:{}", p ^ 1), 421),
            ("secure.test".to_owned(), 421),
            ("host header".to_owned(), 421),
            ("connect".to_owned(), 421),
            ("websocket".to_owned(), 421),
        ]
    );
    assert_eq!(server.seen(), vec![]);
    // The right authority passes.
    let r = s
        .send_request(h2_get(&format!("https://{t}/")))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn a_websocket_toward_a_denied_host_is_refused_however_it_is_asked_for() {
    let server = HttpsServer::start(&["secure.test"]);
    let h = inspecting(&server).await;
    let p = server.port();
    // A tunnel to the denied host is refused before any handshake.
    let (head, _) = connect(h.addr(), &format!("denied.test:{p}")).await;
    assert_eq!(status_of(&head), 403);
    // Plain-HTTP `ws://` through the proxy.
    let (head, _) = send_head(
        h.addr(),
        &format!(
            "GET http://denied.test:{p}/ws HTTP/1.1\r\nHost: denied.test:{p}\r\nProxy-Authorization: Bearer {TOKEN}\r\nConnection: upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
        ),
    )
    .await;
    assert_eq!(status_of(&head), 403);
    // Inside an allowed tunnel, a handshake whose Host names the denied host.
    let tls = blind_tunnel(&h, &format!("secure.test:{p}"), "secure.test", b"http/1.1").await;
    let raw = format!(
        "GET /ws HTTP/1.1\r\nHost: denied.test:{p}\r\nConnection: upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    );
    assert_eq!(raw_status_over(tls, raw.as_bytes()).await, 421);
    assert_eq!(server.seen(), vec![]);
    assert_eq!(
        h.events()
            .iter()
            .map(|e| (e.host.as_str(), e.reason))
            .collect::<Vec<_>>(),
        vec![
            ("denied.test", BlockReason::PolicyDenial),
            ("secure.test", BlockReason::HostMismatch)
        ]
    );
}

#[tokio::test]
async fn http2_heads_over_the_bound_get_431_and_nothing_reaches_the_upstream() {
    let server = HttpsServer::start(&["secure.test"]);
    let h = inspecting(&server).await;
    let t = format!("secure.test:{}", server.port());
    let mut s = h2_sender(&h, &t).await;
    let mut req = h2_get(&format!("https://{t}/"));
    req.headers_mut().insert(
        "x-big",
        "a".repeat(MAX_INSPECTED_HEAD_BYTES).parse().unwrap(),
    );
    assert_eq!(s.send_request(req).await.unwrap().status(), 431);
    // Many headers adding up past the bound.
    let mut req = h2_get(&format!("https://{t}/"));
    for i in 0..64 {
        req.headers_mut().append(
            http::HeaderName::from_bytes(format!("x-h{i}").as_bytes()).unwrap(),
            "b".repeat(MAX_INSPECTED_HEAD_BYTES / 60).parse().unwrap(),
        );
    }
    assert_eq!(s.send_request(req).await.unwrap().status(), 431);
    assert_eq!(server.seen(), vec![]);
    assert_eq!(
        h.events().iter().map(|e| e.reason).collect::<Vec<_>>(),
        vec![BlockReason::HeaderOverBound]
    );
}

#[tokio::test]
async fn one_tunnel_holds_at_most_the_bound_of_concurrent_http2_streams() {
    let server = HttpsServer::start(&["secure.test"]);
    let h = inspecting(&server).await;
    let t = format!("secure.test:{}", server.port());
    let s = h2_sender(&h, &t).await;
    let bound = MAX_INSPECTED_STREAMS as usize;
    // Each stream stays open ~2 s (an SSE stream of two events); one more than the bound.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for i in 0..=bound {
        let (mut s, tx) = (s.clone(), tx.clone());
        let uri = format!("https://{t}/sse?n=2&gap_ms=2000&i={i}");
        tokio::spawn(async move {
            let r = s.send_request(h2_get(&uri)).await;
            let _ = tx.send(r.as_ref().map(|r| r.status().as_u16()).ok());
            if let Ok(r) = r {
                let _ = http_body_util::BodyExt::collect(r.into_body()).await;
            }
        });
    }
    let mut answered = 0;
    while answered < bound {
        let got = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got, Some(200));
        answered += 1;
    }
    // The one past the bound waits for a stream to end (its client holds it back: the proxy
    // advertised the bound), so it is not answered while the others are open.
    assert!(
        tokio::time::timeout(Duration::from_millis(800), rx.recv())
            .await
            .is_err(),
        "stream {} was opened at once",
        bound + 1
    );
    let late = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(late, Some(200));
}
