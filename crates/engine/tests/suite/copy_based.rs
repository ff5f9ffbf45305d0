//! Teardown of a copy-based sandbox (SANDBOX.md §5.11) in a whole `Engine::run`: the workspace's
//! HEAD goes to the run log, the workspace is exported back into the host workspace, and a failed
//! export is reported as `sandbox_workspace_export_failed` without failing the run.
//!
//! `CopyTestDriver` is a TEST DRIVER, not a product one: the noop driver's host execution behind
//! the capabilities of kubernetes (no host binds) and a run that offers a workspace exporter and a
//! HEAD capturer, which is what makes a run copy-based. It needs no engine and no cluster.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use iterion_engine::Engine;
use iterion_sandbox::{
    Capabilities, Driver, DriverConstructor, DriverKind, ExecOpts, ExecResult, NoopDriver,
    PreparedSpec, Progress, Registry, RunInfo, SandboxRun, Spec, WorkspaceExporter,
    WorkspaceHeadCapturer,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::suite::support::{events_of, run_request, run_to_end, sqlite_store, workflow};

const NAME: &str = "copy-test";

struct CopyTestDriver {
    fail_export: bool,
}

#[async_trait]
impl Driver for CopyTestDriver {
    fn name(&self) -> &str {
        NAME
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::KUBERNETES
    }

    async fn prepare(
        &self,
        spec: &Spec,
        progress: &dyn Progress,
    ) -> iterion_sandbox::Result<PreparedSpec> {
        let mut prepared = NoopDriver.prepare(spec, progress).await?;
        prepared.driver = NAME.to_owned();
        prepared.skipped_reason = None;
        Ok(prepared)
    }

    async fn start(
        &self,
        mut prepared: PreparedSpec,
        info: RunInfo,
    ) -> iterion_sandbox::Result<Box<dyn SandboxRun>> {
        prepared.driver = "noop".to_owned();
        let inner = NoopDriver.start(prepared, info).await?;
        Ok(Box::new(CopyRun {
            inner,
            fail_export: self.fail_export,
        }))
    }
}

struct CopyRun {
    inner: Box<dyn SandboxRun>,
    fail_export: bool,
}

#[async_trait]
impl SandboxRun for CopyRun {
    fn driver(&self) -> &str {
        NAME
    }

    fn id(&self) -> &str {
        self.inner.id()
    }

    async fn exec(&self, argv: &[String], opts: ExecOpts) -> iterion_sandbox::Result<ExecResult> {
        self.inner.exec(argv, opts).await
    }

    async fn cleanup(&self) -> iterion_sandbox::Result<()> {
        self.inner.cleanup().await
    }

    fn workspace_exporter(&self) -> Option<&dyn WorkspaceExporter> {
        Some(self)
    }

    fn workspace_head_capturer(&self) -> Option<&dyn WorkspaceHeadCapturer> {
        Some(self)
    }
}

#[async_trait]
impl WorkspaceExporter for CopyRun {
    async fn export_workspace(&self, dest: &Path) -> iterion_sandbox::Result<()> {
        if self.fail_export {
            return Err(iterion_sandbox::Error::ExitCodeUnavailable {
                sandbox_id: "pod-x".to_owned(),
            });
        }
        std::fs::write(dest.join("exported.txt"), "from the sandbox").unwrap();
        Ok(())
    }
}

#[async_trait]
impl WorkspaceHeadCapturer for CopyRun {
    async fn capture_workspace_head(&self) -> iterion_sandbox::Result<Option<String>> {
        Ok(Some("0123abcd".to_owned()))
    }
}

struct CopyConstructor {
    fail_export: bool,
}

#[async_trait]
impl DriverConstructor for CopyConstructor {
    async fn construct(&self) -> iterion_sandbox::Result<Arc<dyn Driver>> {
        Ok(Arc::new(CopyTestDriver {
            fail_export: self.fail_export,
        }))
    }
}

/// Runs a one-tool workflow in an inline sandbox on the test driver; returns the host
/// workspace, the run's events and its run log.
async fn run(fail_export: bool) -> (tempfile::TempDir, Vec<(String, Value)>, Vec<String>) {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let store = sqlite_store(home.path()).await;
    let engine = Engine::new(Arc::clone(&store), home.path()).with_registry(
        Registry::with_noop().register(DriverKind::Docker, CopyConstructor { fail_export }),
    );
    let wf = workflow(
        "tool hello:\n  command: `echo hi`\n\nworkflow copy:\n  entry: hello\n  sandbox:\n    image: \"any:1\"\n  hello -> done\n",
    );
    let summary = run_to_end(&engine, run_request(wf, ws.path(), "copy.iter")).await;
    let events = events_of(store.as_ref(), &summary.run_id).await;
    assert_eq!(
        summary.failure_code, None,
        "{:?}\n{events:#?}",
        summary.message
    );
    let logs = store
        .logs(&iterion_store::RunId::parse(&summary.run_id).unwrap(), 0)
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.line)
        .collect();
    (ws, events, logs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_based_sandbox_is_exported_back_at_teardown() {
    let (ws, events, logs) = run(false).await;
    assert_eq!(
        std::fs::read_to_string(ws.path().join("exported.txt")).unwrap(),
        "from the sandbox"
    );
    assert!(
        logs.iter()
            .any(|l| l.contains("sandbox: workspace HEAD 0123abcd")),
        "{logs:#?}"
    );
    assert!(
        !events
            .iter()
            .any(|(k, _)| k == "sandbox_workspace_export_failed")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_export_is_reported_and_the_run_still_finishes() {
    let (ws, events, _logs) = run(true).await;
    assert!(!ws.path().join("exported.txt").exists());
    let failed: Vec<&Value> = events
        .iter()
        .filter(|(k, _)| k == "sandbox_workspace_export_failed")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(
        failed,
        vec![&json!({"driver": "copy-test", "error": "exit code unavailable"})]
    );
}
