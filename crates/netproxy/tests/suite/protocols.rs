//! Issue 22 items 2 and 4: inspection keeps the client's protocol. HTTP/1.1 and HTTP/2 (ALPN)
//! through one request policy, WebSocket upgrades (HTTP/1.1 `Upgrade` and HTTP/2 extended
//! CONNECT), SSE relayed event by event; against the local HTTPS server of `iterion-test-support`,
//! whose CA the proxy trusts as an extra upstream root.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{SinkExt as _, StreamExt as _};
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use iterion_netproxy::{BlockReason, Secret, SecretRewriter};
use iterion_test_support::https::HttpsServer;
use pretty_assertions::assert_eq;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::Role;

use super::support::*;

const REAL: &str = "sk-real-secret-value-42";
const PLACEHOLDER: &str = "__ITERION_SECRET_API_KEY__";

/// A proxy inspecting TLS, with `API_KEY` scoped to `secure.test`, trusting `server`'s CA.
async fn inspecting(server: &HttpsServer) -> Harness {
    let p = server.port();
    let mut rw = SecretRewriter::new();
    rw.add_value_secret("API_KEY", Secret::new(REAL), &["secure.test".into()])
        .unwrap();
    start(Options {
        rules: rules(&[
            &format!("secure.test:{p}"),
            &format!("other.test:{p}"),
            &format!("127.0.0.1/32:{p}"),
        ]),
        hosts: "secure.test=127.0.0.1,other.test=127.0.0.1,denied.test=127.0.0.1",
        secrets: Some(rw),
        inspect: true,
        extra_root: Some(server.ca_der.clone()),
        ..Default::default()
    })
    .await
}

fn client_tls(root: &CertificateDer<'static>, alpn: &[&[u8]]) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(root.clone()).unwrap();
    let mut cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    cfg
}

/// A CONNECT to `target` and a TLS session inside it offering `alpn`, SNI `sni`.
async fn tunnel(
    h: &Harness,
    target: &str,
    sni: &str,
    alpn: &[&[u8]],
) -> tokio_rustls::client::TlsStream<TcpStream> {
    let (head, stream) = connect(h.addr(), target).await;
    assert_eq!(status_of(&head), 200, "{head}");
    let root = h.ca.as_ref().unwrap().cert_der().clone();
    tokio_rustls::TlsConnector::from(Arc::new(client_tls(&root, alpn)))
        .connect(ServerName::try_from(sni.to_string()).unwrap(), stream)
        .await
        .unwrap()
}

/// The protocol a tunnel's client uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Proto {
    H1,
    H2,
}

impl Proto {
    fn alpn(self) -> &'static [&'static [u8]] {
        match self {
            Proto::H1 => &[b"http/1.1"],
            Proto::H2 => &[b"h2"],
        }
    }
}

/// A sender over a fresh inspected tunnel to `target`, speaking `proto`.
enum Sender {
    H1(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    H2(hyper::client::conn::http2::SendRequest<Full<Bytes>>),
}

impl Sender {
    async fn open(h: &Harness, target: &str, proto: Proto) -> Sender {
        let sni = target.split(':').next().unwrap();
        let tls = tunnel(h, target, sni, proto.alpn()).await;
        let negotiated = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
        assert_eq!(negotiated.as_deref(), Some(proto.alpn()[0]), "ALPN");
        let io = TokioIo::new(tls);
        match proto {
            Proto::H1 => {
                let (s, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
                tokio::spawn(conn.with_upgrades());
                Sender::H1(s)
            }
            Proto::H2 => {
                let (s, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                    .await
                    .unwrap();
                tokio::spawn(conn);
                Sender::H2(s)
            }
        }
    }

    async fn send(
        &mut self,
        req: hyper::Request<Full<Bytes>>,
    ) -> hyper::Result<hyper::Response<hyper::body::Incoming>> {
        match self {
            Sender::H1(s) => s.send_request(req).await,
            Sender::H2(s) => s.send_request(req).await,
        }
    }
}

/// A request as `proto` writes it: HTTP/1.1 origin form with `Host`, HTTP/2 absolute form
/// (its `:authority`).
fn request(proto: Proto, method: &str, authority: &str, path: &str) -> http::request::Builder {
    let b = hyper::Request::builder().method(method);
    match proto {
        Proto::H1 => b.uri(path).header("host", authority),
        Proto::H2 => b
            .uri(format!("https://{authority}{path}"))
            .version(http::Version::HTTP_2),
    }
}

async fn body_text(resp: hyper::Response<hyper::body::Incoming>) -> String {
    let b = resp.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8_lossy(&b).into_owned()
}

#[tokio::test]
async fn the_secret_swap_holds_end_to_end_over_http1_and_http2_with_the_upstream_on_the_same_protocol()
 {
    let server = HttpsServer::start(&["secure.test", "other.test"]);
    let h = inspecting(&server).await;
    let t = format!("secure.test:{}", server.port());
    for (proto, upstream_version) in [(Proto::H1, "HTTP/1.1"), (Proto::H2, "HTTP/2.0")] {
        let mut s = Sender::open(&h, &t, proto).await;
        let req = request(proto, "GET", &t, "/v1/files")
            .header("authorization", format!("Bearer {PLACEHOLDER}"))
            .body(Full::new(Bytes::new()))
            .unwrap();
        let resp = s.send(req).await.unwrap();
        assert_eq!(resp.status(), 200, "{proto:?}");
        // The server saw the real value, over the client's protocol; the sandbox sees the
        // placeholder in what the server echoed.
        assert_eq!(
            body_text(resp).await,
            format!("auth=Bearer {PLACEHOLDER};proto={upstream_version}"),
            "{proto:?}"
        );
        let seen = server.seen().pop().unwrap();
        assert_eq!(
            (seen.version.as_str(), seen.header("authorization")),
            (upstream_version, Some(format!("Bearer {REAL}").as_str())),
            "{proto:?}"
        );
        assert_eq!(seen.header("accept-encoding"), Some("identity"));
    }
    assert_eq!(h.events(), vec![]);
}

#[tokio::test]
async fn several_http2_streams_share_one_tunnel_and_each_passes_the_policy() {
    let server = HttpsServer::start(&["secure.test", "other.test"]);
    let h = inspecting(&server).await;
    let t = format!("secure.test:{}", server.port());
    let Sender::H2(s) = Sender::open(&h, &t, Proto::H2).await else {
        unreachable!()
    };
    let mut pending = Vec::new();
    for i in 0..8 {
        let mut s = s.clone();
        let req = request(Proto::H2, "GET", &t, &format!("/n/{i}"))
            .header("authorization", format!("Bearer {PLACEHOLDER}"))
            .body(Full::new(Bytes::new()))
            .unwrap();
        pending.push(tokio::spawn(async move {
            let r = s.send_request(req).await.unwrap();
            (r.status().as_u16(), body_text(r).await)
        }));
    }
    for p in pending {
        let (status, body) = p.await.unwrap();
        assert_eq!(status, 200);
        assert!(body.contains(PLACEHOLDER), "{body}");
    }
    assert_eq!(server.seen().len(), 8);
    // The same stream policy: toward another host, the real value is refused on its stream.
    let o = format!("other.test:{}", server.port());
    let mut s = Sender::open(&h, &o, Proto::H2).await;
    let req = request(Proto::H2, "POST", &o, "/up")
        .body(Full::new(Bytes::from(format!("k={REAL}"))))
        .unwrap();
    let resp = s.send(req).await.unwrap();
    assert_eq!(resp.status(), 403);
    // The body streams, so the server may have seen the head; never the value.
    let cut: Vec<_> = server
        .seen()
        .into_iter()
        .filter(|s| s.path == "/up")
        .collect();
    assert!(
        cut.iter().all(|s| !s.complete && s.body.is_empty()),
        "{cut:?}"
    );
    assert_eq!(
        h.events().iter().map(|e| e.reason).collect::<Vec<_>>(),
        vec![BlockReason::SecretExfiltration]
    );
}

/// Reads an SSE body and returns each frame with when it arrived.
async fn sse_arrivals(resp: hyper::Response<hyper::body::Incoming>) -> Vec<(Duration, String)> {
    let t0 = Instant::now();
    let mut body = resp.into_body();
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.unwrap().into_data() {
            out.push((t0.elapsed(), String::from_utf8_lossy(&data).into_owned()));
        }
    }
    out
}

#[tokio::test]
async fn an_sse_stream_is_relayed_event_by_event_under_inspection_never_buffered() {
    let server = HttpsServer::start(&["secure.test"]);
    let h = inspecting(&server).await;
    let t = format!("secure.test:{}", server.port());
    for proto in [Proto::H1, Proto::H2] {
        let mut s = Sender::open(&h, &t, proto).await;
        let req = request(proto, "GET", &t, "/sse?n=3&gap_ms=400")
            .body(Full::new(Bytes::new()))
            .unwrap();
        let resp = s.send(req).await.unwrap();
        assert_eq!(resp.status(), 200);
        let arrivals = sse_arrivals(resp).await;
        let text: String = arrivals.iter().map(|(_, d)| d.as_str()).collect();
        assert_eq!(text, "data: 0\n\ndata: 1\n\ndata: 2\n\n", "{proto:?}");
        // Each event arrives on its own, long before the next one is even sent.
        let events: Vec<&(Duration, String)> =
            arrivals.iter().filter(|(_, d)| !d.is_empty()).collect();
        assert_eq!(events.len(), 3, "{proto:?}: {arrivals:?}");
        assert!(
            events[0].0 < Duration::from_millis(200) && events[1].0 < Duration::from_millis(700),
            "{proto:?}: {arrivals:?}"
        );
    }
}

/// A WebSocket over `proto` in an inspected tunnel to `target`: the handshake carries
/// `Authorization: Bearer <placeholder>`. Returns the status and, on success, the socket.
async fn websocket(
    h: &Harness,
    target: &str,
    authority: &str,
    proto: Proto,
) -> (
    u16,
    hyper::HeaderMap,
    Option<tokio_tungstenite::WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>>,
) {
    let mut s = Sender::open(h, target, proto).await;
    let req = match proto {
        Proto::H1 => request(proto, "GET", authority, "/ws")
            .header("connection", "upgrade")
            .header("upgrade", "websocket")
            .header("sec-websocket-version", "13")
            .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
        Proto::H2 => request(proto, "CONNECT", authority, "/ws")
            .header("sec-websocket-version", "13")
            .extension(hyper::ext::Protocol::from_static("websocket")),
    }
    .header("authorization", format!("Bearer {PLACEHOLDER}"))
    .body(Full::new(Bytes::new()))
    .unwrap();
    let resp = s.send(req).await.unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let ok = matches!((proto, status), (Proto::H1, 101) | (Proto::H2, 200));
    if !ok {
        return (status, headers, None);
    }
    let up = hyper::upgrade::on(resp).await.unwrap();
    let ws =
        tokio_tungstenite::WebSocketStream::from_raw_socket(TokioIo::new(up), Role::Client, None)
            .await;
    // Keep the connection task alive as long as the socket.
    std::mem::forget(s);
    (status, headers, Some(ws))
}

#[tokio::test]
async fn a_websocket_echo_works_under_inspection_over_http1_upgrade_and_http2_extended_connect() {
    let server = HttpsServer::start(&["secure.test"]);
    let h = inspecting(&server).await;
    let t = format!("secure.test:{}", server.port());
    for proto in [Proto::H1, Proto::H2] {
        let (status, headers, ws) = websocket(&h, &t, &t, proto).await;
        let mut ws = ws.unwrap_or_else(|| panic!("{proto:?}: {status} {headers:?}"));
        // The handshake reached the server with the real value; its echo came back redacted.
        let seen = server.seen().pop().unwrap();
        assert_eq!(
            (
                seen.method.as_str(),
                seen.version.as_str(),
                seen.header("authorization")
            ),
            ("GET", "HTTP/1.1", Some(format!("Bearer {REAL}").as_str())),
            "{proto:?}"
        );
        assert_eq!(
            headers.get("x-echo-auth").unwrap(),
            &format!("Bearer {PLACEHOLDER}"),
            "{proto:?}"
        );
        ws.send(Message::text("ping 1")).await.unwrap();
        let echoed = tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(echoed, Message::text("ping 1"), "{proto:?}");
    }
    assert_eq!(h.events(), vec![]);
}

#[tokio::test]
async fn upgrades_other_than_websocket_and_tunnels_inside_the_tunnel_are_refused() {
    let server = HttpsServer::start(&["secure.test"]);
    let h = inspecting(&server).await;
    let t = format!("secure.test:{}", server.port());
    // HTTP/1.1 `Upgrade: h2c` (or anything but websocket), and a WebSocket upgrade on a POST.
    let mut s = Sender::open(&h, &t, Proto::H1).await;
    let req = request(Proto::H1, "GET", &t, "/ws")
        .header("connection", "upgrade")
        .header("upgrade", "h2c")
        .body(Full::new(Bytes::new()))
        .unwrap();
    assert_eq!(s.send(req).await.unwrap().status(), 403);
    // HTTP/2: a plain CONNECT to the tunnel's own host, and an extended CONNECT of another protocol.
    let mut s = Sender::open(&h, &t, Proto::H2).await;
    let req = hyper::Request::connect(t.as_str())
        .version(http::Version::HTTP_2)
        .body(Full::new(Bytes::new()))
        .unwrap();
    let plain = s.send(req).await.unwrap().status();
    let req = request(Proto::H2, "CONNECT", &t, "/x")
        .extension(hyper::ext::Protocol::from_static("connect-udp"))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let other = s.send(req).await.unwrap().status();
    // A plain CONNECT's authority-form target names no scheme: the fronting rule already
    // refuses it, whatever host it names.
    assert_eq!((plain.as_u16(), other.as_u16()), (421, 403));
    assert!(server.seen().is_empty(), "{:?}", server.seen());
    assert_eq!(
        h.events().iter().map(|e| e.reason).collect::<Vec<_>>(),
        vec![BlockReason::UpgradeRefused, BlockReason::HostMismatch]
    );
}

// ---------------------------------------------------------------------------------------------
// Streamed request bodies (client-streaming and bidirectional gRPC).

type Chunks =
    tokio::sync::mpsc::Sender<Result<hyper::body::Frame<Bytes>, std::convert::Infallible>>;
type ChanBody = http_body_util::StreamBody<
    futures_util::stream::BoxStream<
        'static,
        Result<hyper::body::Frame<Bytes>, std::convert::Infallible>,
    >,
>;

/// A request body the test writes frame by frame, and its writer.
fn chan_body() -> (Chunks, ChanBody) {
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let stream =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|f| (f, rx)) })
            .boxed();
    (tx, http_body_util::StreamBody::new(stream))
}

/// Sends `req` over a fresh inspected tunnel speaking `proto`; the response once its head is in.
async fn send_streaming(
    h: &Harness,
    target: &str,
    proto: Proto,
    req: hyper::Request<ChanBody>,
) -> hyper::Result<hyper::Response<hyper::body::Incoming>> {
    let sni = target.split(':').next().unwrap();
    let io = TokioIo::new(tunnel(h, target, sni, proto.alpn()).await);
    match proto {
        Proto::H1 => {
            let (mut s, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
            tokio::spawn(conn);
            s.send_request(req).await
        }
        Proto::H2 => {
            let (mut s, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                .await
                .unwrap();
            tokio::spawn(conn);
            s.send_request(req).await
        }
    }
}

/// The next data frame of `body` (skipping none), within two seconds.
async fn next_data(body: &mut hyper::body::Incoming) -> Option<String> {
    let frame = tokio::time::timeout(Duration::from_secs(2), body.frame())
        .await
        .unwrap_or_else(|_| panic!("no streamed frame in time"))?
        .unwrap();
    frame
        .into_data()
        .ok()
        .map(|d| String::from_utf8_lossy(&d).into_owned())
}

#[tokio::test]
async fn an_h2_client_stream_flows_upstream_and_the_server_answers_before_it_ends() {
    let server = HttpsServer::start(&["secure.test"]);
    let h = inspecting(&server).await;
    let t = format!("secure.test:{}", server.port());
    let (tx, body) = chan_body();
    let req = request(Proto::H2, "POST", &t, "/stream")
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(body)
        .unwrap();
    tx.send(Ok(hyper::body::Frame::data(Bytes::from("one\n"))))
        .await
        .unwrap();
    // The response head arrives while the request body is still open: it streamed.
    let resp = tokio::time::timeout(
        Duration::from_secs(5),
        send_streaming(&h, &t, Proto::H2, req),
    )
    .await
    .expect("the server answers before the client finished")
    .unwrap();
    assert_eq!(resp.status(), 200);
    let mut rbody = resp.into_body();
    assert_eq!(next_data(&mut rbody).await.as_deref(), Some("one\n"));
    // A bidirectional exchange: each message gets its echo before the next is sent.
    tx.send(Ok(hyper::body::Frame::data(Bytes::from(format!(
        "k={PLACEHOLDER}\n"
    )))))
    .await
    .unwrap();
    assert_eq!(
        next_data(&mut rbody).await,
        // The server got the real value; its echo is redacted on the way back.
        Some(format!("k={PLACEHOLDER}\n"))
    );
    assert!(!server.seen()[0].complete, "the request body is still open");
    let mut trailers = http::HeaderMap::new();
    trailers.insert("x-client-done", http::HeaderValue::from_static(PLACEHOLDER));
    tx.send(Ok(hyper::body::Frame::trailers(trailers)))
        .await
        .unwrap();
    drop(tx);
    let mut response_trailers = None;
    while let Some(frame) = rbody.frame().await {
        if let Ok(t) = frame.unwrap().into_trailers() {
            response_trailers = Some(t);
        }
    }
    let response_trailers = response_trailers.expect("trailers reach the h2 client");
    assert_eq!(response_trailers["grpc-status"], "0");
    assert_eq!(response_trailers["x-client-done"], PLACEHOLDER);
    let seen = server.seen().pop().unwrap();
    assert_eq!(
        (seen.complete, seen.body.as_str()),
        (true, format!("one\nk={REAL}\n").as_str())
    );
    // The request trailers reached the server, their placeholder swapped.
    assert_eq!(
        seen.trailers,
        vec![("x-client-done".to_string(), REAL.to_string())]
    );
    assert_eq!(h.events(), vec![]);
}

#[tokio::test]
async fn a_placeholder_split_across_two_data_frames_is_swapped() {
    let server = HttpsServer::start(&["secure.test"]);
    let h = inspecting(&server).await;
    let t = format!("secure.test:{}", server.port());
    let (head, tail) = PLACEHOLDER.split_at(9);
    for proto in [Proto::H2, Proto::H1] {
        let (tx, body) = chan_body();
        let req = request(proto, "POST", &t, "/stream").body(body).unwrap();
        let writer = tokio::spawn(async move {
            tx.send(Ok(hyper::body::Frame::data(Bytes::from(format!(
                "k={head}"
            )))))
            .await
            .unwrap();
            // A pause: the proxy has nothing more ready and releases what it may.
            tokio::time::sleep(Duration::from_millis(100)).await;
            tx.send(Ok(hyper::body::Frame::data(Bytes::from(format!(
                "{tail};"
            )))))
            .await
            .unwrap();
        });
        let resp = send_streaming(&h, &t, proto, req).await.unwrap();
        assert_eq!(resp.status(), 200, "{proto:?}");
        let echoed = body_text(resp).await;
        writer.await.unwrap();
        assert_eq!(echoed, format!("k={PLACEHOLDER};"), "{proto:?}");
        let seen = server.seen().pop().unwrap();
        assert_eq!(seen.body, format!("k={REAL};"), "{proto:?}");
    }
    assert_eq!(h.events(), vec![]);
}

#[tokio::test]
async fn a_streamed_body_over_the_bound_is_refused_with_413() {
    let server = HttpsServer::start(&["secure.test"]);
    let p = server.port();
    let h = start(Options {
        rules: rules(&[&format!("secure.test:{p}"), &format!("127.0.0.1/32:{p}")]),
        hosts: "secure.test=127.0.0.1",
        secrets: Some(SecretRewriter::new()),
        inspect: true,
        extra_root: Some(server.ca_der.clone()),
        max_body: Some(1024),
        ..Default::default()
    })
    .await;
    let t = format!("secure.test:{p}");
    for proto in [Proto::H2, Proto::H1] {
        let (tx, body) = chan_body();
        // No declared length: the bound is met while the body streams.
        let req = request(proto, "POST", &t, "/upload").body(body).unwrap();
        let writer = tokio::spawn(async move {
            for _ in 0..4 {
                if tx
                    .send(Ok(hyper::body::Frame::data(Bytes::from(vec![b'x'; 600]))))
                    .await
                    .is_err()
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        let resp = send_streaming(&h, &t, proto, req).await.unwrap();
        assert_eq!(resp.status(), 413, "{proto:?}");
        writer.abort();
    }
    assert!(
        server.seen().iter().all(|s| !s.complete),
        "{:?}",
        server.seen()
    );
    assert_eq!(
        h.events().iter().map(|e| e.reason).collect::<Vec<_>>(),
        vec![BlockReason::BodyOverBound]
    );
}
