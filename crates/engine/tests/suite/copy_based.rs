//! Teardown of a copy-based sandbox (SANDBOX.md §5.11) in a whole `Engine::run`: the workspace's
//! HEAD goes to the run log, the workspace is exported back into the host workspace, and a failed
//! export is reported as `sandbox_workspace_export_failed` without failing the run; then the run
//! files are drained from `/iterion/artifact-files` into `<ITERION_HOME>/runs/<run id>/files`,
//! and a drain that declined members is `sandbox_runfiles_drain_failed`.
//!
//! `CopyTestDriver` is a TEST DRIVER, not a product one: the noop driver's host execution behind
//! the capabilities of kubernetes (no host binds) and a run that offers a workspace exporter, a
//! HEAD capturer and a run-files drainer (answering a scripted report), which is what makes a run
//! copy-based. It needs no engine and no cluster.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use iterion_engine::Engine;
use iterion_sandbox::{
    Capabilities, Driver, DriverConstructor, DriverKind, ExecOpts, ExecResult, NoopDriver,
    PreparedSpec, Progress, Registry, RunFilesDrainer, RunInfo, SandboxRun, Spec,
    WorkspaceExporter, WorkspaceHeadCapturer,
};
use iterion_sandbox::{Decline, DeclinedMember, DrainReport};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::suite::support::{events_of, run_request, run_to_end, sqlite_store, workflow};

const NAME: &str = "copy-test";

/// What the test driver does at teardown.
#[derive(Clone, Default)]
struct Script {
    fail_export: bool,
    /// The drain's answer; it also writes `drained.txt` into the destination.
    drain: DrainReport,
    /// The `(from, dest)` the engine asked the drainer for.
    drained: Arc<Mutex<Vec<(String, PathBuf)>>>,
    /// The workspace the driver was given (what a copy-based driver copies in).
    given: Arc<Mutex<Option<PathBuf>>>,
    /// Where the export was asked to go.
    exported_to: Arc<Mutex<Option<PathBuf>>>,
}

struct CopyTestDriver {
    script: Script,
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
        *self.script.given.lock().unwrap() = Some(info.workspace_path.clone());
        let inner = NoopDriver.start(prepared, info).await?;
        Ok(Box::new(CopyRun {
            inner,
            script: self.script.clone(),
        }))
    }
}

struct CopyRun {
    inner: Box<dyn SandboxRun>,
    script: Script,
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

    fn run_files_drainer(&self) -> Option<&dyn RunFilesDrainer> {
        Some(self)
    }
}

#[async_trait]
impl RunFilesDrainer for CopyRun {
    async fn drain_run_files(&self, from: &str, dest: &Path) -> DrainReport {
        self.script
            .drained
            .lock()
            .unwrap()
            .push((from.to_owned(), dest.to_owned()));
        std::fs::write(dest.join("drained.txt"), "a run file").unwrap();
        self.script.drain.clone()
    }
}

#[async_trait]
impl WorkspaceExporter for CopyRun {
    async fn export_workspace(&self, dest: &Path) -> iterion_sandbox::Result<()> {
        if self.script.fail_export {
            return Err(iterion_sandbox::Error::ExitCodeUnavailable {
                sandbox_id: "pod-x".to_owned(),
            });
        }
        *self.script.exported_to.lock().unwrap() = Some(dest.to_owned());
        std::fs::write(dest.join("exported.txt"), "from the sandbox").unwrap();
        // What a hostile pod's export would carry back.
        std::fs::create_dir_all(dest.join(".git/hooks")).unwrap();
        std::fs::write(
            dest.join(".git/hooks/post-commit"),
            "#!/bin/sh\ntouch /tmp/x\n",
        )
        .unwrap();
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
    script: Script,
}

#[async_trait]
impl DriverConstructor for CopyConstructor {
    async fn construct(&self) -> iterion_sandbox::Result<Arc<dyn Driver>> {
        Ok(Arc::new(CopyTestDriver {
            script: self.script.clone(),
        }))
    }
}

/// What one run left behind.
struct Ran {
    home: tempfile::TempDir,
    ws: tempfile::TempDir,
    run_id: String,
    events: Vec<(String, Value)>,
    logs: Vec<String>,
}

/// Runs a one-tool workflow in an inline sandbox on the test driver.
async fn run(script: Script) -> Ran {
    run_in(
        script,
        tempfile::tempdir().unwrap(),
        iterion_sandbox::Trust::Trusted,
    )
    .await
}

/// The same, in `ws`, at `trust`.
async fn run_in(script: Script, ws: tempfile::TempDir, trust: iterion_sandbox::Trust) -> Ran {
    let home = tempfile::tempdir().unwrap();
    let store = sqlite_store(home.path()).await;
    let engine = Engine::new(Arc::clone(&store), home.path()).with_registry(
        Registry::with_noop().register(DriverKind::Docker, CopyConstructor { script }),
    );
    let wf = workflow(
        "tool hello:\n  command: `echo hi`\n\nworkflow copy:\n  entry: hello\n  sandbox:\n    image: \"any:1\"\n  hello -> done\n",
    );
    let mut request = run_request(wf, ws.path(), "copy.iter");
    request.trust = trust;
    let summary = run_to_end(&engine, request).await;
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
    Ran {
        home,
        ws,
        run_id: summary.run_id,
        events,
        logs,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_based_sandbox_is_exported_back_at_teardown() {
    let Ran {
        ws, events, logs, ..
    } = run(Script::default()).await;
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
    let Ran { ws, events, .. } = run(Script {
        fail_export: true,
        ..Script::default()
    })
    .await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_files_are_drained_into_the_host_run_files_dir() {
    let script = Script {
        drain: DrainReport {
            found: true,
            files: 1,
            bytes: 10,
            ..DrainReport::default()
        },
        ..Script::default()
    };
    let drained = Arc::clone(&script.drained);
    let ran = run(script).await;
    let files = ran.home.path().join("runs").join(&ran.run_id).join("files");
    assert_eq!(
        drained.lock().unwrap().clone(),
        vec![("/iterion/artifact-files".to_owned(), files.clone())]
    );
    assert_eq!(
        std::fs::read_to_string(files.join("drained.txt")).unwrap(),
        "a run file"
    );
    let line = format!(
        "sandbox: drained 1 run files (10 bytes) from /iterion/artifact-files into {}",
        files.display()
    );
    assert!(ran.logs.contains(&line), "{:#?}", ran.logs);
    assert!(
        !ran.events
            .iter()
            .any(|(k, _)| k == "sandbox_runfiles_drain_failed"),
        "{:#?}",
        ran.events
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declined_run_files_are_named_in_the_drain_event_after_the_export() {
    let declined = |name: &str, why| DeclinedMember {
        name: name.to_owned(),
        why,
    };
    let ran = run(Script {
        fail_export: true,
        drain: DrainReport {
            found: true,
            files: 1,
            bytes: 4,
            declined: vec![
                declined("link", Decline::Link),
                declined("big.bin", Decline::OverCap),
            ],
            stale: true,
            error: None,
        },
        ..Script::default()
    })
    .await;
    let teardown: Vec<(&str, &Value)> = ran
        .events
        .iter()
        .filter(|(k, _)| k.starts_with("sandbox_workspace") || k.starts_with("sandbox_runfiles"))
        .map(|(k, d)| (k.as_str(), d))
        .collect();
    assert_eq!(
        teardown,
        vec![
            (
                "sandbox_workspace_export_failed",
                &json!({"driver": "copy-test", "error": "exit code unavailable"})
            ),
            (
                "sandbox_runfiles_drain_failed",
                &json!({"reason": "archive_too_large", "declined": ["link", "big.bin"], "stale": true})
            ),
        ]
    );
    assert!(
        ran.logs
            .iter()
            .any(|l| l == "warning: sandbox: run file \"link\" not drained (link)"),
        "{:#?}",
        ran.logs
    );
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim_end().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_an_untrusted_copy_based_run_copies_in_a_sanitised_copy_and_exports_nothing_into_the_checkout()
 {
    let ws = tempfile::tempdir().unwrap();
    git(ws.path(), &["init", "-q"]);
    git(
        ws.path(),
        &[
            "remote",
            "add",
            "origin",
            "https://user:TOKEN123@git.example.test/r",
        ],
    );
    std::fs::write(ws.path().join("a.txt"), "a\n").unwrap();
    git(ws.path(), &["add", "-A"]);
    git(ws.path(), &["commit", "-q", "-m", "init"]);
    let script = Script::default();
    let (given, exported_to) = (Arc::clone(&script.given), Arc::clone(&script.exported_to));
    let Ran {
        ws, events, run_id, ..
    } = run_in(script, ws, iterion_sandbox::Trust::Untrusted).await;
    let given = given.lock().unwrap().clone().unwrap();
    let exported_to = exported_to.lock().unwrap().clone().unwrap();
    // The driver copied in a copy, not the checkout, and the copy carries no token.
    assert_ne!(given, ws.path());
    assert!(!exported_to.starts_with(ws.path()));
    assert_ne!(exported_to, given, "the export lands in a fresh dir");
    // Nothing came back into the checkout.
    assert!(!ws.path().join("exported.txt").exists());
    assert!(!ws.path().join(".git/hooks/post-commit").exists());
    let config = std::fs::read_to_string(ws.path().join(".git/config")).unwrap();
    assert!(
        config.contains("TOKEN123"),
        "the checkout's own config is untouched"
    );
    // The result is a branch, without the planted hook and without a.txt (the export of
    // this pod did not hold it, so the run deleted it).
    let landed = events
        .iter()
        .find(|(k, _)| k == "sandbox_workspace_landed")
        .map(|(_, v)| v.clone())
        .unwrap();
    assert_eq!(landed["changed"], true, "{landed}");
    let branch = format!("iterion/copy/{run_id}");
    assert_eq!(
        git(ws.path(), &["ls-tree", "-r", "--name-only", &branch]),
        "exported.txt"
    );
}
