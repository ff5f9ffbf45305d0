//! Policy at the proxy: 403 + one event, the resolved-address check, silent deny.

use iterion_netproxy::{BlockReason, BlockedEvent};
use pretty_assertions::assert_eq;

use super::support::*;

#[tokio::test]
async fn allowed_host_passes_through_a_connect_tunnel() {
    let up = http_upstream().await;
    let p = up.addr.port();
    let h = start(Options {
        rules: rules(&[&format!("upstream.test:{p}"), &format!("127.0.0.1/32:{p}")]),
        hosts: "upstream.test=127.0.0.1",
        ..Default::default()
    })
    .await;
    let target = format!("upstream.test:{}", up.addr.port());
    let (head, stream) = connect(h.addr(), &target).await;
    assert_eq!(
        head.lines().next(),
        Some("HTTP/1.1 200 Connection Established")
    );
    let (status, _, body) = request_over(stream, get("/hello?q=1", &target)).await;
    assert_eq!((status, body.as_str()), (200, "hello; auth="));
    assert_eq!(up.seen()[0].uri, "/hello?q=1");
    assert_eq!(h.events(), vec![]);
}

#[tokio::test]
async fn plain_http_is_forwarded_without_hop_by_hop_headers_or_the_proxy_credential() {
    let up = http_upstream().await;
    let p = up.addr.port();
    let h = start(Options {
        rules: rules(&[&format!("upstream.test:{p}"), &format!("127.0.0.1/32:{p}")]),
        hosts: "upstream.test=127.0.0.1",
        ..Default::default()
    })
    .await;
    let port = up.addr.port();
    let (head, mut s) = send_head(
        h.addr(),
        &format!(
            "GET http://upstream.test:{port}/p?x=1 HTTP/1.1\r\nHost: upstream.test:{port}\r\nProxy-Authorization: Bearer {TOKEN}\r\nConnection: close, X-Drop\r\nX-Drop: 1\r\nKeep-Alive: 5\r\nX-Keep: yes\r\n\r\n"
        ),
    )
    .await;
    assert_eq!(status_of(&head), 200, "{head}");
    let mut rest = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut s, &mut rest)
        .await
        .unwrap();
    let seen = up.seen();
    assert_eq!(seen[0].uri, "/p?x=1");
    let names: Vec<&str> = seen[0].headers.iter().map(|(n, _)| n.as_str()).collect();
    for gone in ["proxy-authorization", "x-drop", "keep-alive", "connection"] {
        assert!(!names.contains(&gone), "{gone} forwarded: {names:?}");
    }
    assert_eq!(seen[0].header("x-keep"), Some("yes"));
}

#[tokio::test]
async fn denied_host_gets_403_and_exactly_one_event_after_three_attempts() {
    let h = start(Options {
        rules: rules(&["allowed.test"]),
        ..Default::default()
    })
    .await;
    for _ in 0..3 {
        let (head, _) = connect(h.addr(), "denied.test:443").await;
        assert_eq!(status_of(&head), 403);
        assert!(
            head.to_ascii_lowercase()
                .contains("x-iterion-reason: blocked by sandbox network policy"),
            "{head}"
        );
    }
    let (head, mut s) = send_head(h.addr(), &format!("GET http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\nProxy-Authorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n")).await;
    assert_eq!(status_of(&head), 403);
    let mut body = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut s, &mut body)
        .await
        .unwrap();
    assert_eq!(body, "host 'denied.test' blocked by sandbox network policy");
    assert_eq!(
        h.events(),
        vec![BlockedEvent {
            host: "denied.test".into(),
            reason: BlockReason::PolicyDenial,
            run_id: "run-1".into()
        }]
    );
    assert_eq!(
        h.proxy.blocked_counts(),
        vec![("denied.test".into(), BlockReason::PolicyDenial, 4)]
    );
}

#[tokio::test]
async fn ip_literals_and_the_metadata_address_are_refused_under_allowlist() {
    let h = start(Options {
        rules: rules(&["**"]),
        ..Default::default()
    })
    .await;
    for t in [
        "169.254.169.254:80",
        "10.0.0.1:443",
        "127.0.0.1:443",
        "[::1]:443",
    ] {
        let (head, _) = connect(h.addr(), t).await;
        assert_eq!(status_of(&head), 403, "{t}");
    }
    let hosts: Vec<String> = h.events().into_iter().map(|e| e.host).collect();
    assert_eq!(
        hosts,
        vec!["169.254.169.254", "10.0.0.1", "127.0.0.1", "::1"]
    );
}

#[tokio::test]
async fn a_name_mapped_to_loopback_is_refused_until_a_cidr_rule_allows_it() {
    let up = http_upstream().await;
    let target = format!("upstream.test:{}", up.addr.port());
    let p = up.addr.port();
    let h = start(Options {
        rules: rules(&[&format!("upstream.test:{p}")]),
        hosts: "upstream.test=127.0.0.1",
        ..Default::default()
    })
    .await;
    let (head, _) = connect(h.addr(), &target).await;
    assert_eq!(status_of(&head), 403);
    assert_eq!(
        h.events(),
        vec![BlockedEvent {
            host: "upstream.test".into(),
            reason: BlockReason::NonPublicAddress,
            run_id: "run-1".into()
        }]
    );
    let h = start(Options {
        rules: rules(&[&format!("upstream.test:{p}"), &format!("127.0.0.1/32:{p}")]),
        hosts: "upstream.test=127.0.0.1",
        ..Default::default()
    })
    .await;
    let (head, _) = connect(h.addr(), &target).await;
    assert_eq!(status_of(&head), 200);
    assert_eq!(up.seen(), vec![]);
}

#[tokio::test]
async fn silent_deny_hosts_are_refused_without_an_event() {
    let h = start(Options {
        rules: rules(&["allowed.test"]),
        ..Default::default()
    })
    .await;
    let (head, _) = connect(h.addr(), "o1.ingest.sentry.io:443").await;
    assert_eq!(status_of(&head), 403);
    assert_eq!(h.events(), vec![]);
}

#[tokio::test]
async fn an_unreachable_vetted_address_gets_502() {
    // Bind then drop a listener so the port is closed.
    let port = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let h = start(Options {
        rules: rules(&[
            &format!("gone.test:{port}"),
            &format!("127.0.0.1/32:{port}"),
        ]),
        hosts: "gone.test=127.0.0.1",
        ..Default::default()
    })
    .await;
    let (head, _) = connect(h.addr(), &format!("gone.test:{port}")).await;
    assert_eq!(status_of(&head), 502);
}
