//! L10's start rules without a container: open means no proxy, a bad rule is a setup failure,
//! and a started proxy's socket is gone after shutdown.
use std::sync::Arc;

use iterion_sandbox::{
    AdvertisedPort, NetworkMode, NetworkPolicy, NetworkSource, NullRunLog, ProxyAddresses,
    ProxyBind,
};
use pretty_assertions::assert_eq;

use super::{ProxyRequest, start_network_proxy};
use crate::records::sink::MemoryEventSink;
use iterion_vocab::FailureCode;

fn policy(mode: NetworkMode, rules: &[&str]) -> NetworkPolicy {
    NetworkPolicy {
        mode,
        preset: None,
        rules: rules.iter().map(|r| (*r).to_owned()).collect(),
        source: NetworkSource::Workflow,
    }
}

fn unix_at(dir: &std::path::Path) -> ProxyAddresses {
    ProxyAddresses {
        bind: ProxyBind::UnixSocket(dir.join("net").join("proxy.sock")),
        advertise_host: "127.0.0.1".to_owned(),
        advertise_port: AdvertisedPort::Fixed(3128),
    }
}

#[tokio::test]
async fn open_without_inspection_starts_nothing_and_a_bad_rule_fails_the_setup() {
    let dir = tempfile::tempdir().unwrap();
    let open = policy(NetworkMode::Open, &[]);
    let request = ProxyRequest {
        host_services: &[],
        untrusted: false,
        policy: &open,
        run_id: "r1",
        addresses: unix_at(dir.path()),
        secrets: &[],
        tls_capable: true,
        max_duration_seconds: 0,
        redactor: &crate::records::secrets::Redactor::default(),
        env: &iterion_vocab::Environment::empty(),
    };
    let started = start_network_proxy(&request, Arc::new(MemoryEventSink::new()), &NullRunLog)
        .await
        .unwrap();
    assert!(started.is_none());
    assert!(!dir.path().join("net").exists());

    let bad = policy(NetworkMode::Allowlist, &["a.*.b"]);
    let request = ProxyRequest {
        host_services: &[],
        untrusted: false,
        policy: &bad,
        ..request
    };
    let Err(error) =
        start_network_proxy(&request, Arc::new(MemoryEventSink::new()), &NullRunLog).await
    else {
        panic!("a bad rule must fail");
    };
    assert_eq!(error.code, FailureCode::SandboxSetupFailed);
}

#[tokio::test]
async fn an_allowlist_proxy_listens_on_its_socket_until_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let allow = policy(NetworkMode::Allowlist, &["example.com"]);
    let request = ProxyRequest {
        host_services: &[],
        untrusted: false,
        policy: &allow,
        run_id: "r2",
        addresses: unix_at(dir.path()),
        secrets: &[],
        tls_capable: true,
        max_duration_seconds: 0,
        redactor: &crate::records::secrets::Redactor::default(),
        env: &iterion_vocab::Environment::empty(),
    };
    let proxy = start_network_proxy(&request, Arc::new(MemoryEventSink::new()), &NullRunLog)
        .await
        .unwrap()
        .unwrap();
    let socket = dir.path().join("net").join("proxy.sock");
    assert!(socket.exists());
    assert!(proxy.bridged);
    assert!(!proxy.tls_inspection());
    assert!(
        proxy.endpoint.starts_with("http://t:") && proxy.endpoint.ends_with("@127.0.0.1:3128"),
        "the endpoint's shape"
    );
    proxy.shutdown(&NullRunLog).await;
    assert!(!socket.exists());
}
