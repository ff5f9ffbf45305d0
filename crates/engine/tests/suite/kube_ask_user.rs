//! The ask-user listener of a run on kubernetes, through a whole `Engine::run`, against the FAKE
//! Kubernetes API server (`crates/sandbox-kubernetes/tests/support/fake_kube.rs`): the pod shares
//! no run dir with the engine, so the engine binds the listener on TCP where the proxy binds
//! (`0.0.0.0`), advertises it at the runner pod's IP (`ITERION_POD_IP`, here `127.0.0.1`), and
//! the asking node's CLI is told `ITERION_ASK_USER_ADDR`, never a socket path. The pod's
//! NetworkPolicy admits the runner's IP on every port, so that port too.
//!
//! What the fake cannot do: its "pod" runs execs on the host, where the image's
//! `/usr/local/bin/iterion` (the MCP server a pod's CLI runs) and the CLIs on the image's `PATH`
//! are not, so the node's `claude` is not found and the node fails; the listener's TCP path
//! with the real `claude` and the real `iterion __mcp-ask-user` is
//! `executor::agent::delegate::tcp_tests` (loopback), and its refusals are
//! `sandbox::ask_user::tests`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use iterion_engine::Engine;
use iterion_sandbox::{Driver, DriverConstructor, DriverKind, FactoryOptions, HostKind, Registry};
use iterion_sandbox_kubernetes::{KubeRsApi, KubernetesDriver, KubernetesSettings};
use iterion_test_support::fake_model::{Api, FakeModel, Reply};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::suite::support::{events_of, run_request, run_to_end, sqlite_store, workflow};

use crate::suite::fake_kube::{FakeKube, Kind};

/// The kubernetes driver over the fake API server, the runner pod at `127.0.0.1`.
struct FakeKubeConstructor(FakeKube);

#[async_trait]
impl DriverConstructor for FakeKubeConstructor {
    async fn construct(&self) -> iterion_sandbox::Result<Arc<dyn Driver>> {
        let api = KubeRsApi::new(self.0.client(), self.0.namespace());
        let settings = KubernetesSettings {
            pod_ip: Some("127.0.0.1".to_owned()),
            egress_probe: None,
            pod_ready_timeout: Duration::from_secs(5),
            poll_interval: Duration::from_millis(20),
            apply_timeout: Duration::from_secs(5),
            ..KubernetesSettings::default()
        };
        Ok(Arc::new(KubernetesDriver::new(Arc::new(api), settings)))
    }
}

/// The asking node's MCP config as the engine wrote it into the "pod" (on the host).
const MCP_JSON: &str = "/tmp/iterion-delegate/claude_code/mcp.json";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_an_asking_delegate_node_is_told_the_tcp_listener_at_the_runner_pods_ip() {
    let fake = FakeKube::start("iterion-test").await;
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let pod_ws = tempfile::tempdir().unwrap();
    let store = sqlite_store(home.path()).await;
    let model = FakeModel::start(Api::Anthropic, vec![Reply::text("{}")]);
    let engine = Engine::new(Arc::clone(&store), home.path())
        .with_environment(iterion_vocab::Environment::from_pairs([
            (
                "ANTHROPIC_API_KEY",
                "sk-ant-Hx3pQ8wM2nR6tV9yB4kL7cJ5".to_owned(),
            ),
            ("ITERION_ANTHROPIC_BASE_URL", model.base_url()),
        ]))
        .with_registry(
            Registry::empty().register(DriverKind::Kubernetes, FakeKubeConstructor(fake.clone())),
        )
        .with_factory_options(FactoryOptions {
            host: Some(HostKind::Cloud),
            preferred_driver: Some(DriverKind::Kubernetes),
        });
    let _ = std::fs::remove_file(MCP_JSON);
    let src = format!(
        "agent asker:\n  model: \"anthropic/claude-test\"\n  backend: claude_code\n  interaction: ask\n  user: \"Deploy.\"\n\n\
         workflow w:\n  entry: asker\n  sandbox:\n    image: \"iterion-test/none:1\"\n    workspace_folder: \"{}\"\n  asker -> done\n",
        pod_ws.path().display()
    );
    // A kubernetes exec's stdin is never closed: a config write or a CLI that read to the end
    // of it would wait forever, so the run is given a deadline rather than the test's own.
    let summary = tokio::time::timeout(
        Duration::from_secs(120),
        run_to_end(&engine, run_request(workflow(&src), ws.path(), "w.iter")),
    )
    .await
    .expect("the run ended (no exec waited for an end of stdin that never comes)");
    let events = events_of(store.as_ref(), &summary.run_id).await;
    let of = |kind: &str| -> Vec<Value> {
        events
            .iter()
            .filter(|(k, _)| k == kind)
            .map(|(_, v)| v.clone())
            .collect()
    };
    let started = of("sandbox_started");
    assert_eq!(started.len(), 1, "{:?}\n{events:#?}", summary.message);
    assert_eq!(started[0]["driver"], json!("kubernetes"));
    // The node got past the listener check (no CAPABILITY_UNSUPPORTED): its CLI is what the
    // host-as-pod lacks.
    let failed = of("node_failed");
    assert_eq!(failed.len(), 1, "{events:#?}");
    assert_ne!(
        failed[0]["code"],
        json!("CAPABILITY_UNSUPPORTED"),
        "{failed:#?}"
    );
    // The CLI reads its prompt to the end of a stdin that never closes: it is told the length.
    let cli = fake
        .exec_argvs()
        .into_iter()
        .find_map(|argv| {
            let at = argv.iter().position(|a| a == "claude")?;
            Some(argv[at.saturating_sub(4)..at].to_vec())
        })
        .unwrap_or_else(|| panic!("{:#?}", fake.exec_argvs()));
    assert_eq!(
        cli[..3],
        ["sh", "-c", "head -c \"$0\" | \"$@\""],
        "{cli:#?}"
    );
    assert!(cli[3].parse::<usize>().unwrap() > 0, "{cli:#?}");
    // The CLI's `iterion` server is told the TCP listener at the runner pod's IP.
    let config: Value = serde_json::from_str(&std::fs::read_to_string(MCP_JSON).unwrap()).unwrap();
    let server = &config["mcpServers"]["iterion"];
    assert_eq!(
        server["command"],
        json!("/usr/local/bin/iterion"),
        "{config:#}"
    );
    let env = &server["env"];
    let addr = env["ITERION_ASK_USER_ADDR"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(addr.starts_with("127.0.0.1:"), "{config:#}");
    assert_eq!(env.get("ITERION_ASK_USER_SOCKET"), None, "{config:#}");
    assert_eq!(env["ITERION_ASK_USER_RUN"], json!(summary.run_id));
    assert_eq!(env["ITERION_ASK_USER_NODE"], json!("asker"));
    assert_eq!(
        env["ITERION_ASK_USER_TOKEN"].as_str().map(str::len),
        Some(64)
    );
    // The token is in no record.
    let token = env["ITERION_ASK_USER_TOKEN"].as_str().unwrap();
    assert!(!format!("{events:?}").contains(token));
    // The pod's NetworkPolicy admits the runner's IP on every port: the listener's too.
    let policies = fake.names(Kind::NetworkPolicy);
    assert_eq!(policies, Vec::<String>::new(), "torn down with the run");
    let applied = fake
        .requests()
        .into_iter()
        .filter(|r| r.starts_with("APPLY networkpolicy/"))
        .count();
    assert!(applied > 0, "{:#?}", fake.requests());
    // The listener closed with the run.
    assert!(
        std::net::TcpStream::connect(addr.as_str()).is_err(),
        "{addr}"
    );
    std::fs::remove_file(MCP_JSON).unwrap();
}
