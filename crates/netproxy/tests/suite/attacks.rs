//! Issue 15 items 6, 9 and 10, attacked over real loopback sockets, table by table: domain
//! fronting on every forwarded request, numeric and embedded forms of loopback under every
//! mode, and ports on rules. Only loopback is ever dialled: every other special-purpose range
//! is covered without traffic in `decide_tests.rs`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use iterion_netproxy::{BlockReason, BlockedEvent, Secret, SecretRewriter};
use pretty_assertions::assert_eq;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::support::*;

const REAL: &str = "sk-front-secret-value-77";

fn scoped_to(host: &str) -> SecretRewriter {
    let mut r = SecretRewriter::new();
    r.add_value_secret("API_KEY", Secret::new(REAL), &[host.into()])
        .unwrap();
    r
}

/// A loopback listener that only counts the connections it accepts.
struct Counter {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
}

async fn counting_listener() -> Counter {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let a = accepted.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            a.fetch_add(1, Ordering::SeqCst);
            drop(s);
        }
    });
    Counter { addr, accepted }
}

/// The whole response to `raw` (sent after the proxy credential is spliced in for plain HTTP).
async fn plain(h: &Harness, raw: &str) -> String {
    let (head, mut s) = send_head(h.addr(), raw).await;
    let mut rest = String::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_string(&mut rest)).await;
    head + &rest
}

/// CONNECTs to `target`, speaks TLS trusting the per-run CA, writes `raw` and reads the reply.
async fn in_tunnel(h: &Harness, target: &str, raw: &str) -> String {
    let (head, stream) = connect(h.addr(), target).await;
    assert_eq!(status_of(&head), 200, "{head}");
    let sni = target.rsplit_once(':').unwrap().0;
    let ca = h.ca.as_ref().unwrap().cert_der().clone();
    let mut tls = tls_over(stream, sni, &ca).await;
    tls.write_all(raw.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

// ---------------------------------------------------------------------------------------------
// Item 6: domain fronting.

/// Plain-HTTP request heads naming another host than their target, `{P}` the upstream port.
/// Both names are allowed and map to the same loopback upstream; the secret is scoped to
/// `good.test`, so any of these forwarded would hand its real value to the `evil.test` vhost.
const PLAIN_FRONTING: &[&str] = &[
    "GET http://good.test:{P}/ok HTTP/1.1\r\nHost: evil.test\r\n",
    "GET http://good.test:{P}/ok HTTP/1.1\r\nHost: evil.test:{P}\r\n",
    "GET http://good.test:{P}/ok HTTP/1.1\r\nHost: EVIL.test.:{P}\r\n",
    "GET http://good.test:{P}/ok HTTP/1.1\r\nHost: good.test\r\n",
    "GET http://good.test:{P}/ok HTTP/1.1\r\nHost: good.test:1\r\n",
    "GET http://good.test:{P}/ok HTTP/1.1\r\nHost: good.test:{P}\r\nHost: evil.test:{P}\r\n",
    "GET http://good.test:{P}/ok HTTP/1.1\r\nHost: evil.test:{P}\r\nHost: good.test:{P}\r\n",
    "GET http://good.test:{P}/ok HTTP/1.1\r\nHost: good.test:{P}, evil.test:{P}\r\n",
    "GET http://good.test:{P}/ok HTTP/1.1\r\nHost: good.test:{P}@evil.test:{P}\r\n",
    "GET http://good.test:{P}/ok HTTP/1.1\r\nHost: x@good.test:{P}\r\n",
    "GET http://good.test:{P}/ok HTTP/1.1\r\nHost: 127.0.0.1:{P}\r\n",
    "GET http://good.test:{P}/ok HTTP/1.1\r\nHost: [::1]:{P}\r\n",
    "GET http://good.test:{P}/ok HTTP/1.1\r\nHost: good.test.evil.test:{P}\r\n",
    "GET http://good.test:{P}/ok HTTP/1.1\r\nHost: evil.test%2fgood.test:{P}\r\n",
    "GET http://good.test:{P}/ok HTTP/1.1\r\nHost: good.test:{P}/x\r\n",
    "GET http://good.test:{P}/ok HTTP/1.1\r\nHost: good.test:{P}:{P}\r\n",
    "GET http://good.test:{P}/ok HTTP/1.1\r\nHost: göod.test:{P}\r\n",
    "GET http://good.test:{P}/ok HTTP/1.1\r\nHost:\r\n",
    "GET http://good.test:{P}/ok HTTP/1.1\r\nHost: good.test:0{P}0\r\n",
    "GET http://GOOD.test.:{P}/ok HTTP/1.1\r\nHost: evil.test:{P}\r\n",
    "GET http://good.test:{P}/ok HTTP/1.0\r\nHost: evil.test:{P}\r\n",
    "POST http://good.test:{P}/ok HTTP/1.1\r\nHost: evil.test:{P}\r\nContent-Length: 3\r\n",
    "GET /ok HTTP/1.1\r\nHost: good.test:{P}\r\nHost: evil.test:{P}\r\n",
    "GET /ok HTTP/1.1\r\nHost: evil.test:{P}\r\nHost: good.test:{P}\r\n",
    "GET http://good.test:{P}/ok HTTP/1.1\r\nHost: good.test:{P}\r\nX-Forwarded-Host: evil.test\r\n",
    "GET http://good.test:{P}/ok HTTP/1.1\r\nHost: good.test:{P}\r\nX-Forwarded-Host: good.test, evil.test\r\n",
    "GET http://good.test:{P}/ok HTTP/1.1\r\nHost: good.test:{P}\r\nX-Host: evil.test\r\n",
    "GET http://good.test:{P}/ok HTTP/1.1\r\nHost: good.test:{P}\r\nX-Original-Host: evil.test\r\n",
    "GET http://good.test:{P}/ok HTTP/1.1\r\nHost: good.test:{P}\r\nX-HTTP-Host-Override: evil.test\r\n",
    "GET http://good.test:{P}/ok HTTP/1.1\r\nHost: good.test:{P}\r\nX-Forwarded-Server: evil.test\r\n",
    "GET http://good.test:{P}/ok HTTP/1.1\r\nHost: good.test:{P}\r\nForwarded: for=1.2.3.4;host=evil.test;proto=http\r\n",
    "GET http://good.test:{P}/ok HTTP/1.1\r\nHost: good.test:{P}\r\nForwarded: host=\"evil.test:{P}\"\r\n",
];

/// Request targets with userinfo: refused outright (400), whichever side is the "real" host.
const USERINFO_TARGETS: &[&str] = &[
    "GET http://good.test@evil.test:{P}/ok HTTP/1.1\r\nHost: good.test:{P}\r\n",
    "GET http://good.test:{P}@evil.test:{P}/ok HTTP/1.1\r\nHost: evil.test:{P}\r\n",
    "GET http://evil.test@good.test:{P}/ok HTTP/1.1\r\nHost: good.test:{P}\r\n",
    "GET http://u:p@good.test:{P}/ok HTTP/1.1\r\nHost: good.test:{P}\r\n",
];

async fn fronting_proxy(port: u16, inspect: bool) -> Harness {
    start(Options {
        mode: "allowlist",
        rules: rules(&[
            &format!("good.test:{port}"),
            &format!("evil.test:{port}"),
            &format!("127.0.0.1/32:{port}"),
        ]),
        hosts: "good.test=127.0.0.1,evil.test=127.0.0.1",
        secrets: Some(scoped_to("good.test")),
        inspect,
        ..Default::default()
    })
    .await
}

fn with_auth_and_close(head: &str, port: u16) -> String {
    let head = head.replace("{P}", &port.to_string());
    let body = if head.contains("Content-Length: 3") {
        "abc"
    } else {
        ""
    };
    format!(
        "{head}Authorization: Bearer __ITERION_SECRET_API_KEY__\r\nProxy-Authorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n{body}"
    )
}

#[tokio::test]
async fn plain_http_fronting_in_every_shape_is_refused_before_anything_is_materialised() {
    let up = http_upstream().await;
    let port = up.addr.port();
    for inspect in [true, false] {
        let h = fronting_proxy(port, inspect).await;
        for shape in PLAIN_FRONTING {
            let resp = plain(&h, &with_auth_and_close(shape, port)).await;
            let status = status_of(&resp);
            assert!(
                status == 421 || status == 400,
                "inspect={inspect} {shape:?} got {resp}"
            );
            assert!(!resp.contains(REAL), "{shape:?} leaked: {resp}");
        }
        for shape in USERINFO_TARGETS {
            let resp = plain(&h, &with_auth_and_close(shape, port)).await;
            assert_eq!(status_of(&resp), 400, "inspect={inspect} {shape:?}: {resp}");
        }
        assert_eq!(
            up.seen(),
            vec![],
            "inspect={inspect}: an upstream was reached"
        );
        // Fronting attempts are recorded once per host, as HostMismatch.
        assert!(
            h.events()
                .iter()
                .all(|e| e.reason == BlockReason::HostMismatch),
            "{:?}",
            h.events()
        );
        assert!(!h.events().is_empty());
    }
}

#[tokio::test]
async fn plain_http_that_names_its_target_in_any_written_form_passes_with_the_canonical_host() {
    let up = http_upstream().await;
    let port = up.addr.port();
    let h = fronting_proxy(port, true).await;
    let agreeing = [
        "GET http://good.test:{P}/ok HTTP/1.1\r\nHost: good.test:{P}\r\n",
        "GET http://good.test:{P}/ok HTTP/1.1\r\nHost: GOOD.Test.:{P}\r\n",
        "GET http://GOOD.test.:{P}/ok HTTP/1.1\r\nHost: good.test:{P}\r\n",
        "GET http://good.test:{P}/ok HTTP/1.0\r\n",
        "GET /ok HTTP/1.1\r\nHost: Good.Test:{P}\r\n",
        "GET /ok HTTP/1.1\r\nHost: good.test:{P}\r\nX-Forwarded-Host: good.test\r\nForwarded: for=1.2.3.4;host=good.test:{P}\r\n",
    ];
    for shape in agreeing {
        let resp = plain(&h, &with_auth_and_close(shape, port)).await;
        assert_eq!(status_of(&resp), 200, "{shape:?}: {resp}");
    }
    let seen = up.seen();
    assert_eq!(seen.len(), agreeing.len());
    for s in &seen {
        assert_eq!(s.header("host"), Some(format!("good.test:{port}").as_str()));
        assert_eq!(
            s.header("authorization"),
            Some(format!("Bearer {REAL}").as_str())
        );
    }
    assert_eq!(h.events(), vec![]);
}

/// Requests inside an inspected tunnel to `good.test:{P}` that name another authority.
const TUNNEL_FRONTING: &[&str] = &[
    "GET /ok HTTP/1.1\r\nHost: evil.test:{P}\r\n",
    "GET /ok HTTP/1.1\r\nHost: evil.test\r\n",
    "GET /ok HTTP/1.1\r\nHost: good.test\r\n",
    "GET /ok HTTP/1.1\r\nHost: good.test:443\r\n",
    "GET /ok HTTP/1.1\r\nHost: good.test:1\r\n",
    "GET /ok HTTP/1.1\r\nHost: x@good.test:{P}\r\n",
    "GET /ok HTTP/1.1\r\nHost: good.test:{P}@evil.test:{P}\r\n",
    "GET /ok HTTP/1.1\r\nHost: good.test:{P}\r\nHost: evil.test:{P}\r\n",
    "GET /ok HTTP/1.1\r\nHost: 127.0.0.1:{P}\r\n",
    "GET /ok HTTP/1.1\r\nHost: good.test.evil.test:{P}\r\n",
    "GET /ok HTTP/1.1\r\n",
    "GET https://evil.test:{P}/ok HTTP/1.1\r\nHost: good.test:{P}\r\n",
    "GET https://good.test:{P}/ok HTTP/1.1\r\nHost: evil.test:{P}\r\n",
    "GET https://good.test/ok HTTP/1.1\r\nHost: good.test:{P}\r\n",
    "GET https://x@good.test:{P}/ok HTTP/1.1\r\nHost: good.test:{P}\r\n",
    "GET http://evil.test:{P}/ok HTTP/1.1\r\nHost: good.test:{P}\r\n",
    "GET ftp://good.test:{P}/ok HTTP/1.1\r\nHost: good.test:{P}\r\n",
    "GET /ok HTTP/1.1\r\nHost: good.test:{P}\r\nX-Forwarded-Host: evil.test\r\n",
    "GET /ok HTTP/1.1\r\nHost: good.test:{P}\r\nForwarded: host=evil.test\r\n",
];

#[tokio::test]
async fn fronting_inside_an_inspected_tunnel_in_every_shape_gets_421() {
    let up = HttpsServer::start(&["good.test", "evil.test"]);
    let port = up.addr.port();
    let h = start(Options {
        rules: rules(&[
            &format!("good.test:{port}"),
            &format!("evil.test:{port}"),
            &format!("127.0.0.1/32:{port}"),
        ]),
        hosts: "good.test=127.0.0.1,evil.test=127.0.0.1",
        secrets: Some(scoped_to("good.test")),
        inspect: true,
        extra_root: Some(up.ca_der.clone()),
        ..Default::default()
    })
    .await;
    let target = format!("good.test:{port}");
    for shape in TUNNEL_FRONTING {
        let raw = format!(
            "{}Authorization: Bearer __ITERION_SECRET_API_KEY__\r\nConnection: close\r\n\r\n",
            shape.replace("{P}", &port.to_string())
        );
        let resp = in_tunnel(&h, &target, &raw).await;
        assert!(
            status_of(&resp) == 421 || status_of(&resp) == 400,
            "{shape:?}: {resp}"
        );
        assert!(!resp.contains(REAL));
    }
    assert_eq!(up.seen(), vec![]);
    assert_eq!(
        h.events(),
        vec![BlockedEvent {
            host: "good.test".into(),
            reason: BlockReason::HostMismatch,
            run_id: "run-1".into()
        }]
    );
    // The agreeing forms pass, and the upstream sees the canonical Host.
    for shape in [
        "GET /ok HTTP/1.1\r\nHost: good.test:{P}\r\n",
        "GET /ok HTTP/1.1\r\nHost: GOOD.TEST.:{P}\r\n",
        "GET https://good.test:{P}/ok HTTP/1.1\r\nHost: good.test:{P}\r\n",
        "GET https://Good.Test:{P}/ok HTTP/1.1\r\n",
    ] {
        let raw = format!(
            "{}Authorization: Bearer __ITERION_SECRET_API_KEY__\r\nConnection: close\r\n\r\n",
            shape.replace("{P}", &port.to_string())
        );
        let resp = in_tunnel(&h, &target, &raw).await;
        assert_eq!(status_of(&resp), 200, "{shape:?}: {resp}");
    }
    for s in up.seen() {
        assert_eq!(s.header("host"), Some(target.as_str()));
        assert_eq!(
            s.header("authorization"),
            Some(format!("Bearer {REAL}").as_str())
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Item 9: the host's loopback, however it is written, under every mode the proxy runs in.

/// Hosts that all reach this machine's loopback (or "this host", 0.0.0.0 / `::`).
const LOOPBACK_FORMS: &[&str] = &[
    "127.0.0.1",
    "127.0.0.1.",
    "127.1",
    "127.0.1",
    "127.000.000.001",
    "127.1.2.3",
    "2130706433",
    "0x7f000001",
    "0X7F000001",
    "0x7f.1",
    "0x7f.0.0.1",
    "0x7f.0x0.0x0.0x1",
    "0177.0.0.1",
    "0177.1",
    "017700000001",
    "00177.0.0.01",
    "0",
    "0.0.0.0",
    "0x0",
    "[::1]",
    "[0:0:0:0:0:0:0:1]",
    "[::]",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
    "[0:0:0:0:0:ffff:127.0.0.1]",
    "[::127.0.0.1]",
    "[64:ff9b::127.0.0.1]",
    "[64:ff9b:1::7f00:1]",
    "[2002:7f00:1::1]",
    "[2001:0:4136:e378:8000:63bf:80ff:fffe]",
    "localhost",
    "LOCALHOST.",
    "loopback.test",
    "mapped.test",
    "v6.test",
];

/// Static answers for the names above: loopback in IPv4, IPv4-mapped and IPv6 form.
const LOOPBACK_HOSTS: &str =
    "localhost=127.0.0.1,loopback.test=127.0.0.2,mapped.test=::ffff:127.0.0.1,v6.test=::1";

async fn assert_loopback_unreachable(h: &Harness, counter: &Counter) {
    let port = counter.addr.port();
    for host in LOOPBACK_FORMS {
        let target = format!("{host}:{port}");
        let (head, _) = connect(h.addr(), &target).await;
        assert_eq!(status_of(&head), 403, "CONNECT {target}: {head}");
        let resp = plain(
            h,
            &format!(
                "GET http://{target}/ HTTP/1.1\r\nHost: {target}\r\nProxy-Authorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
            ),
        )
        .await;
        assert_eq!(status_of(&resp), 403, "GET http://{target}/: {resp}");
    }
    assert_eq!(
        counter.accepted.load(Ordering::SeqCst),
        0,
        "loopback reached"
    );
    assert!(
        h.events()
            .iter()
            .all(|e| e.reason == BlockReason::NonPublicAddress),
        "{:?}",
        h.events()
    );
}

#[tokio::test]
async fn open_with_a_scoped_secret_never_reaches_host_loopback_in_any_written_form() {
    let counter = counting_listener().await;
    let h = start(Options {
        mode: "open",
        hosts: LOOPBACK_HOSTS,
        secrets: Some(scoped_to("good.test")),
        inspect: true,
        ..Default::default()
    })
    .await;
    assert_loopback_unreachable(&h, &counter).await;
}

#[tokio::test]
async fn denylist_and_open_without_inspection_never_reach_host_loopback_either() {
    let counter = counting_listener().await;
    for mode in ["denylist", "open"] {
        let h = start(Options {
            mode,
            rules: rules(&["!blocked.test"]),
            hosts: LOOPBACK_HOSTS,
            ..Default::default()
        })
        .await;
        assert_loopback_unreachable(&h, &counter).await;
    }
}

#[tokio::test]
async fn allowlist_with_any_name_never_reaches_host_loopback() {
    let counter = counting_listener().await;
    let port = counter.addr.port();
    let h = start(Options {
        rules: rules(&["**", &format!("**:{port}"), "*", &format!("*:{port}")]),
        hosts: LOOPBACK_HOSTS,
        ..Default::default()
    })
    .await;
    for host in LOOPBACK_FORMS {
        let (head, _) = connect(h.addr(), &format!("{host}:{port}")).await;
        assert_eq!(status_of(&head), 403, "{host}");
    }
    assert_eq!(counter.accepted.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn an_explicit_loopback_rule_is_still_the_escape_hatch() {
    let up = http_upstream().await;
    let port = up.addr.port();
    let h = start(Options {
        mode: "open",
        rules: rules(&[&format!("127.0.0.0/8:{port}")]),
        hosts: LOOPBACK_HOSTS,
        secrets: Some(scoped_to("good.test")),
        inspect: true,
        ..Default::default()
    })
    .await;
    for host in [
        "127.0.0.1",
        "0x7f.1",
        "2130706433",
        "localhost",
        "mapped.test",
    ] {
        let t = format!("{host}:{port}");
        let resp = plain(&h, &format!("GET http://{t}/ HTTP/1.1\r\nHost: {t}\r\nProxy-Authorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n")).await;
        assert_eq!(status_of(&resp), 200, "{host}: {resp}");
    }
    // The rule names IPv4 loopback on one port: IPv6 loopback and other ports stay closed.
    for t in [format!("[::1]:{port}"), format!("127.0.0.1:{}", port ^ 1)] {
        let (head, _) = connect(h.addr(), &t).await;
        assert_eq!(status_of(&head), 403, "{t}");
    }
}

#[tokio::test]
async fn hosts_that_cannot_be_canonicalised_are_refused_before_any_resolution() {
    let counter = counting_listener().await;
    let port = counter.addr.port();
    let h = start(Options {
        mode: "open",
        hosts: LOOPBACK_HOSTS,
        ..Default::default()
    })
    .await;
    for host in [
        "1.2.3.4.5",
        "127.0.0.1.1",
        "08.0.0.1",
        "0x7f.0.0.0x100",
        "256.0.0.1",
        "4294967296",
        "foo.127",
        "[127.0.0.1]",
        "[fe80::1%25lo]",
        "%31%32%37.0.0.1",
    ] {
        let (head, _) = connect(h.addr(), &format!("{host}:{port}")).await;
        assert_eq!(status_of(&head), 400, "{host}: {head}");
    }
    assert_eq!(counter.accepted.load(Ordering::SeqCst), 0);
}

// ---------------------------------------------------------------------------------------------
// Item 10: ports.

#[tokio::test]
async fn a_bare_rule_allows_443_and_80_only_and_a_port_rule_only_its_port() {
    let counter = counting_listener().await;
    let port = counter.addr.port();
    let other = port ^ 1;
    let h = start(Options {
        rules: rules(&[
            "bare.test",
            "*.wild.test",
            "**.deep.test",
            &format!("api.port.test:{port}"),
            &format!("*.wport.test:{port}"),
            &format!("**.dport.test:{port}"),
            &format!("127.0.0.1/32:{port}"),
            "127.0.0.1/32:443",
            "127.0.0.1/32:80",
        ]),
        hosts: "bare.test=127.0.0.1,a.wild.test=127.0.0.1,x.y.deep.test=127.0.0.1,api.port.test=127.0.0.1,a.wport.test=127.0.0.1,b.c.dport.test=127.0.0.1",
        ..Default::default()
    })
    .await;
    let denied = [
        format!("bare.test:{port}"),
        "bare.test:22".into(),
        "bare.test:8443".into(),
        "bare.test:444".into(),
        "bare.test:8080".into(),
        format!("a.wild.test:{port}"),
        format!("x.y.deep.test:{port}"),
        format!("api.port.test:{other}"),
        "api.port.test:443".into(),
        "api.port.test:80".into(),
        format!("a.wport.test:{other}"),
        "a.wport.test:443".into(),
        format!("b.c.dport.test:{other}"),
        format!("127.0.0.1:{other}"),
    ];
    for t in &denied {
        let (head, _) = connect(h.addr(), t).await;
        assert_eq!(status_of(&head), 403, "CONNECT {t}: {head}");
        let (head, _) = connect(h.addr(), t).await;
        assert_eq!(status_of(&head), 403, "CONNECT {t} again");
    }
    let plain_denied = plain(&h, &format!("GET http://bare.test:{port}/ HTTP/1.1\r\nHost: bare.test:{port}\r\nProxy-Authorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n")).await;
    assert_eq!(status_of(&plain_denied), 403);
    assert_eq!(counter.accepted.load(Ordering::SeqCst), 0);
    // One event per (host, reason), whatever the port and however often.
    let mut hosts: Vec<String> = h.events().into_iter().map(|e| e.host).collect();
    hosts.sort();
    assert_eq!(
        hosts,
        vec![
            "127.0.0.1",
            "a.wild.test",
            "a.wport.test",
            "api.port.test",
            "b.c.dport.test",
            "bare.test",
            "x.y.deep.test"
        ]
    );
    assert!(
        h.events()
            .iter()
            .all(|e| e.reason == BlockReason::PolicyDenial)
    );
    for t in [
        format!("api.port.test:{port}"),
        format!("a.wport.test:{port}"),
        format!("b.c.dport.test:{port}"),
        format!("127.0.0.1:{port}"),
    ] {
        let (head, _) = connect(h.addr(), &t).await;
        assert_eq!(status_of(&head), 200, "CONNECT {t}: {head}");
    }
    // 443 and 80 pass the policy for bare rules (nothing listens there: 502, not 403).
    for t in [
        "bare.test:443",
        "bare.test:80",
        "a.wild.test:443",
        "x.y.deep.test:80",
    ] {
        let (head, _) = connect(h.addr(), t).await;
        assert_ne!(status_of(&head), 403, "CONNECT {t}: {head}");
    }
}

#[tokio::test]
async fn a_bare_deny_rule_denies_every_port_under_denylist() {
    let h = start(Options {
        mode: "denylist",
        rules: rules(&[
            "!bad.test",
            "!*.bad.test",
            "!**.worse.test",
            "!pinned.test:8443",
        ]),
        ..Default::default()
    })
    .await;
    for t in [
        "bad.test:443",
        "bad.test:22",
        "bad.test:8443",
        "a.bad.test:9000",
        "x.y.worse.test:1",
        "pinned.test:8443",
    ] {
        let (head, _) = connect(h.addr(), t).await;
        assert_eq!(status_of(&head), 403, "{t}");
    }
}

/// A sandbox CONNECTing to `<n>.evil.test` for every `n` gets a refusal each time, but the
/// proxy itemises (one `network_blocked` event, one count kept in memory, one shutdown log
/// line) at most `BLOCKED_HOSTS_MAX` hosts; the rest are counted together.
#[tokio::test]
async fn attack_blocked_hosts_by_the_thousand_are_itemised_up_to_the_bound() {
    let h = start(Options {
        rules: rules(&["allowed.test"]),
        ..Options::default()
    })
    .await;
    let extra = 50;
    for n in 0..(iterion_netproxy::BLOCKED_HOSTS_MAX + extra) {
        let (head, _) = connect(h.addr(), &format!("h{n}.evil.test:443")).await;
        assert_eq!(status_of(&head), 403, "{head}");
    }
    // A host already itemised is counted on its own line still.
    let (head, _) = connect(h.addr(), "h0.evil.test:443").await;
    assert_eq!(status_of(&head), 403, "{head}");
    assert_eq!(h.events().len(), iterion_netproxy::BLOCKED_HOSTS_MAX);
    let counts = h.proxy.blocked_counts();
    assert_eq!(counts.len(), iterion_netproxy::BLOCKED_HOSTS_MAX);
    assert!(counts.contains(&("h0.evil.test".to_owned(), BlockReason::PolicyDenial, 2)));
    assert_eq!(h.proxy.blocked_beyond(), extra as u64);
}
