//! Name queries (issue 22, transparent egress): the in-sandbox DNS stub asks the proxy whether a
//! name may be reached, and on which ports; the proxy answers from `decide` without resolving.

use iterion_netproxy::{BlockReason, BlockedEvent, NAME_METHOD};
use pretty_assertions::assert_eq;

use super::support::*;

async fn ask(h: &Harness, name: &str, auth: bool) -> String {
    let auth = if auth {
        format!("Proxy-Authorization: Bearer {TOKEN}\r\n")
    } else {
        String::new()
    };
    let (head, _s) = send_head(
        h.addr(),
        &format!("{NAME_METHOD} /{name} HTTP/1.1\r\nHost: bridge\r\n{auth}\r\n"),
    )
    .await;
    head
}

fn ports_of(head: &str) -> Option<String> {
    head.lines()
        .find_map(|l| l.strip_prefix("x-iterion-ports: "))
        .map(str::to_owned)
}

#[tokio::test]
async fn an_allowed_name_gets_its_ports_a_denied_one_a_403_and_one_event_and_nothing_resolves() {
    // NoDns fails every lookup: an answer that needed DNS would be an error here.
    let h = start(Options {
        rules: rules(&[
            "api.test",
            "db.test:5432",
            "*.wild.test:8443",
            "!no.wild.test",
        ]),
        ..Default::default()
    })
    .await;
    let head = ask(&h, "API.Test.", true).await;
    assert_eq!(status_of(&head), 200, "{head}");
    assert_eq!(ports_of(&head).as_deref(), Some("443,80"));
    assert_eq!(
        ports_of(&ask(&h, "db.test", true).await).as_deref(),
        Some("5432")
    );
    assert_eq!(
        ports_of(&ask(&h, "a.wild.test", true).await).as_deref(),
        Some("8443")
    );
    for _ in 0..2 {
        assert_eq!(status_of(&ask(&h, "denied.test", true).await), 403);
    }
    assert_eq!(status_of(&ask(&h, "no.wild.test", true).await), 403);
    // An IP literal is never a name, and a malformed name is a 400 (nothing recorded).
    assert_eq!(status_of(&ask(&h, "127.0.0.1", true).await), 400);
    assert_eq!(status_of(&ask(&h, "a%00b.test", true).await), 400);
    assert_eq!(
        h.events(),
        vec![
            BlockedEvent {
                host: "denied.test".into(),
                reason: BlockReason::PolicyDenial,
                run_id: "run-1".into()
            },
            BlockedEvent {
                host: "no.wild.test".into(),
                reason: BlockReason::PolicyDenial,
                run_id: "run-1".into()
            },
        ]
    );
}

#[tokio::test]
async fn a_name_query_without_the_token_is_refused() {
    let h = start(Options {
        rules: rules(&["api.test"]),
        ..Default::default()
    })
    .await;
    assert_eq!(status_of(&ask(&h, "api.test", false).await), 407);
    assert_eq!(h.events(), vec![]);
}
