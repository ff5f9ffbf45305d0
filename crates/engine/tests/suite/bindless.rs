//! A whole `Engine::run` on a driver without host binds (SANDBOX.md §8.8, M12).
//!
//! `BindlessDockerTestDriver` is a TEST DRIVER, not a product one: the real docker driver with its
//! `host_bind_mounts` capability reported false, which is what a copy-based driver (kubernetes)
//! reports. The engine must then drop every host bind — the run files dir and the workflow
//! author's own bind; the engine binary is the image's own and never bound — withdraw `ITERION_ARTIFACT_FILES_DIR`, say so in
//! `sandbox_host_binds_dropped`, and fall back to host_state `none` (§8.2). The container is real,
//! so what the tool sees inside it is checked, not only the plan.

use std::sync::Arc;

use async_trait::async_trait;
use iterion_engine::Engine;
use iterion_sandbox::{
    Builder, Capabilities, Driver, DriverConstructor, DriverKind, PreparedSpec, Progress,
    ProxyConfigurer, Registry, RunInfo, SandboxRun, Spec,
};
use iterion_test_support::{DEBIAN_IMAGE, docker_or_skip};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::suite::support::{events_of, run_request, run_to_end, sqlite_store, workflow};

/// The docker driver, claiming it cannot bind host paths (see the module docs).
struct BindlessDockerTestDriver(Arc<dyn Driver>);

#[async_trait]
impl Driver for BindlessDockerTestDriver {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            supports_host_bind_mounts: false,
            ..self.0.capabilities()
        }
    }

    async fn prepare(
        &self,
        spec: &Spec,
        progress: &dyn Progress,
    ) -> iterion_sandbox::Result<PreparedSpec> {
        self.0.prepare(spec, progress).await
    }

    async fn start(
        &self,
        prepared: PreparedSpec,
        info: RunInfo,
    ) -> iterion_sandbox::Result<Box<dyn SandboxRun>> {
        self.0.start(prepared, info).await
    }

    fn builder(&self) -> Option<&dyn Builder> {
        self.0.builder()
    }

    fn proxy_configurer(&self) -> Option<&dyn ProxyConfigurer> {
        self.0.proxy_configurer()
    }
}

struct BindlessConstructor;

#[async_trait]
impl DriverConstructor for BindlessConstructor {
    async fn construct(&self) -> iterion_sandbox::Result<Arc<dyn Driver>> {
        let docker = iterion_sandbox_docker::DockerConstructor::docker_from_env(
            &iterion_vocab::Environment::from_process(),
        )
        .construct()
        .await?;
        Ok(Arc::new(BindlessDockerTestDriver(docker)))
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn docker_a_driver_without_host_binds_gets_no_host_bind_and_no_promise_of_one() {
    if docker_or_skip("engine::bindless::docker_no_host_binds")
        .await
        .is_none()
    {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let store = sqlite_store(home.path()).await;
    // The test's edge: the engine reads this process's environment, as the CLI's does.
    let engine = Engine::new(Arc::clone(&store), home.path())
        .with_environment(iterion_vocab::Environment::from_process())
        .with_registry(Registry::with_noop().register(DriverKind::Docker, BindlessConstructor));
    let src = format!(
        "tool probe:\n  command: `jq -cn --arg m \"$(awk '{{print $5}}' /proc/self/mountinfo)\" '{{mounts: ($m|split(\"\\n\")), files: env.ITERION_ARTIFACT_FILES_DIR, bin: env.ITERION_ENGINE_BIN, scratch: env.PROJECT_SCRATCH_DIR}}' > probe.json`\n\nworkflow bindless:\n  entry: probe\n  sandbox:\n    image: \"{DEBIAN_IMAGE}\"\n    mounts: [\"source={},target=/cache\"]\n  probe -> done\n",
        cache.path().display()
    );
    let wf = workflow(&src);
    let summary = run_to_end(&engine, run_request(wf, ws.path(), "bindless.iter")).await;
    let events = events_of(store.as_ref(), &summary.run_id).await;
    assert_eq!(
        summary.failure_code, None,
        "{:?}\n{events:#?}",
        summary.message
    );
    let of = |kind: &str| {
        events
            .iter()
            .find(|(k, _)| k == kind)
            .map(|(_, d)| d.clone())
            .unwrap_or_else(|| panic!("no {kind}: {events:#?}"))
    };
    assert_eq!(
        of("sandbox_host_binds_dropped"),
        json!({
            "driver": "docker",
            "dropped": ["/cache", "/iterion/artifact-files"],
            "withdrawn_env": ["ITERION_ARTIFACT_FILES_DIR"],
            "attachments_dir_cleared": false,
        })
    );
    // host_state falls back to none on a driver without host binds (§8.2).
    assert_eq!(of("sandbox_host_state_mounted")["enabled"], json!(false));

    // Inside the container: none of the dropped targets is mounted, the promise is gone, the
    // engine binary is the image's path, and the scratch dir is container-local.
    let probe: Value =
        serde_json::from_str(&std::fs::read_to_string(ws.path().join("probe.json")).unwrap())
            .unwrap();
    let mounts: Vec<&str> = probe["mounts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for target in [
        "/cache",
        "/iterion/artifact-files",
        "/run/iterion/bin/iterion",
    ] {
        assert!(!mounts.contains(&target), "{target} in {mounts:?}");
    }
    assert_eq!(probe["files"], Value::Null);
    assert_eq!(probe["bin"], json!("/usr/local/bin/iterion"));
    assert_eq!(
        probe["scratch"],
        json!(format!("/tmp/iterion-scratch/{}", summary.run_id))
    );
}
