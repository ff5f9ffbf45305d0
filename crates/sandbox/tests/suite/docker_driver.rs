//! The docker/podman driver against the real engines (SANDBOX.md §4 acceptance): every test runs
//! once on dockerd and once on `podman system service` (see `engines.rs`).

use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bollard::Docker;
use iterion_sandbox::{
    DockerDriver, DockerSettings, Driver, Error, ExecOpts, ExecResult, LogLevel, Mode,
    NoProgress, PreparedSpec, RunInfo, RunLog, SandboxRun, Spec,
};
use iterion_test_support::BUSYBOX_IMAGE;
use pretty_assertions::assert_eq;
use tokio::io::AsyncWrite;

use super::engines::{Engine, EngineGuard, labelled};

crate::engine_tests!(
    lifecycle_names_labels_and_runs_sleep_infinity_as_pid_1,
    exec_returns_exit_codes_and_separates_stdout_from_stderr,
    exec_streams_50_mb_without_buffering_it,
    exec_passes_stdin_through,
    a_1_mb_script_runs_through_stdin,
);

/// A test's id and a run id unique to it (container names are per run id).
pub(crate) fn ids(engine: Engine, test: &str) -> (String, String) {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let test_id = format!("iterion-sandbox::docker_driver::{engine:?}::{test}").to_lowercase();
    let run_id = format!(
        "it-{}-{}-{}-{}",
        engine.kind(),
        test.chars().take(24).collect::<String>().replace('_', "-"),
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    );
    (test_id, run_id)
}

/// A run whose per-run dir is `<tmp>/<run id>` (cleanup removes it).
pub(crate) fn run_info(run_id: &str, store: &str, workspace: &Path, tmp: &Path) -> RunInfo {
    let run_dir = tmp.join(run_id);
    std::fs::create_dir_all(&run_dir).unwrap();
    let mut info = RunInfo::new(run_id, store, workspace.canonicalize().unwrap(), run_dir);
    info.friendly_name = "it run/☃".to_owned();
    info
}

pub(crate) fn busybox_spec() -> Spec {
    Spec {
        mode: Mode::Inline,
        image: Some(BUSYBOX_IMAGE.to_owned()),
        ..Spec::default()
    }
}

/// Prepares and starts `spec`; the guard removes the container if the test fails first.
pub(crate) async fn start(
    engine: Engine,
    driver: &DockerDriver,
    spec: &Spec,
    info: RunInfo,
) -> (Box<dyn SandboxRun>, EngineGuard) {
    let prepared = driver.prepare(spec, &NoProgress).await.unwrap();
    let run = driver.start(prepared, info).await.unwrap();
    let guard = EngineGuard::container(engine, run.id());
    (run, guard)
}

pub(crate) fn argv(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| (*a).to_owned()).collect()
}

pub(crate) async fn sh(run: &dyn SandboxRun, script: &str) -> ExecResult {
    run.exec(&argv(&["sh", "-c", script]), ExecOpts::default())
        .await
        .unwrap()
}

pub(crate) fn text(bytes: Option<bytes::Bytes>) -> String {
    String::from_utf8_lossy(&bytes.unwrap_or_default()).into_owned()
}

/// A run log that keeps its lines.
#[derive(Default)]
pub(crate) struct Lines(Mutex<Vec<(LogLevel, String)>>);

impl RunLog for Lines {
    fn line(&self, level: LogLevel, line: &str) {
        self.0.lock().unwrap().push((level, line.to_owned()));
    }
}

impl Lines {
    pub(crate) fn all(&self) -> Vec<(LogLevel, String)> {
        self.0.lock().unwrap().clone()
    }
}

/// Counts what is written to it, keeping nothing.
#[derive(Clone, Default)]
struct Counter(Arc<AtomicU64>);

impl AsyncWrite for Counter {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.0.fetch_add(buf.len() as u64, Ordering::SeqCst);
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

pub(crate) async fn container_exists(client: &Docker, id: &str) -> bool {
    match client.inspect_container(id, None).await {
        Ok(_) => true,
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => false,
        Err(e) => panic!("inspect {id}: {e}"),
    }
}

async fn lifecycle_names_labels_and_runs_sleep_infinity_as_pid_1(engine: Engine) {
    let (test_id, run_id) = ids(engine, "lifecycle");
    let Some((driver, client)) = engine
        .driver_or_skip(&test_id, DockerSettings::default().persist_nix(false))
        .await
    else {
        return;
    };
    assert_eq!(driver.name(), engine.kind().as_str());
    let tmp = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let info = run_info(&run_id, "store-lifecycle", ws.path(), tmp.path());
    let run_dir = info.run_dir.clone();
    let prepared = driver.prepare(&busybox_spec(), &NoProgress).await.unwrap();
    assert_eq!(
        (
            prepared.driver.as_str(),
            prepared.image.as_deref(),
            prepared
                .image_config
                .as_ref()
                .map(|c| c.id.starts_with("sha256:") || c.id.len() >= 12)
        ),
        (engine.kind().as_str(), Some(BUSYBOX_IMAGE), Some(true))
    );
    let run = driver.start(prepared, info).await.unwrap();
    let _guard = EngineGuard::container(engine, run.id());

    let inspect = client.inspect_container(run.id(), None).await.unwrap();
    let config = inspect.config.clone().unwrap();
    let mut labels: Vec<(String, String)> = config.labels.unwrap().into_iter().collect();
    labels.sort();
    assert_eq!(
        (
            inspect.name.unwrap().trim_start_matches('/'),
            labels,
            inspect.host_config.unwrap().auto_remove,
            config.working_dir,
        ),
        (
            format!("iterion-{run_id}").as_str(),
            vec![
                ("iterion.io/managed".to_owned(), "true".to_owned()),
                ("iterion.io/run-id".to_owned(), run_id.clone()),
                ("iterion.io/run-name".to_owned(), "it-run--".to_owned()),
                ("iterion.io/store".to_owned(), "store-lifecycle".to_owned()),
                ("iterion.io/test-id".to_owned(), test_id.clone()),
                // Inherited from the test image.
                ("iterion.io/test-image".to_owned(), "1".to_owned()),
            ],
            Some(true),
            Some(ws.path().canonicalize().unwrap().display().to_string()),
        )
    );

    let pid1 = sh(run.as_ref(), "tr '\\0' ' ' < /proc/1/cmdline; echo; pwd").await;
    assert_eq!(
        (pid1.exit_code, text(pid1.stdout), text(pid1.stderr)),
        (
            0,
            format!("sleep infinity \n{}\n", ws.path().canonicalize().unwrap().display()),
            String::new()
        )
    );

    // The workspace is bound read-write at the same path.
    let wrote = sh(run.as_ref(), "echo from-container > in-ws.txt").await;
    assert_eq!(wrote.exit_code, 0);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("in-ws.txt")).unwrap(),
        "from-container\n"
    );

    run.cleanup().await.unwrap();
    assert_eq!(
        (container_exists(&client, run.id()).await, run_dir.exists()),
        (false, false)
    );
    run.cleanup().await.unwrap();
    let closed = run.exec(&argv(&["true"]), ExecOpts::default()).await;
    assert!(matches!(closed, Err(Error::SandboxClosed { .. })), "{closed:?}");
    assert_eq!(labelled(&client, &test_id).await, Vec::<String>::new());
}

async fn exec_returns_exit_codes_and_separates_stdout_from_stderr(engine: Engine) {
    let (test_id, run_id) = ids(engine, "exit_codes");
    let Some((driver, _client)) = engine
        .driver_or_skip(&test_id, DockerSettings::default().persist_nix(false))
        .await
    else {
        return;
    };
    let (tmp, ws) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let info = run_info(&run_id, "store", ws.path(), tmp.path());
    let (run, _guard) = start(engine, &driver, &busybox_spec(), info).await;

    let seven = sh(run.as_ref(), "echo out; echo err >&2; exit 7").await;
    assert_eq!(
        (seven.exit_code, text(seven.stdout), text(seven.stderr)),
        (7, "out\n".to_owned(), "err\n".to_owned())
    );
    let codes = [
        run.exec(&argv(&["false"]), ExecOpts::default()).await.unwrap().exit_code,
        sh(run.as_ref(), "kill -9 $$").await.exit_code,
    ];
    assert_eq!(codes, [1, 137]);

    // env, workdir and user per exec.
    let opts = ExecOpts {
        env: vec![("GREETING".to_owned(), "hi there".to_owned())],
        workdir: Some("/tmp".to_owned()),
        user: Some("1000:1000".to_owned()),
        ..ExecOpts::default()
    };
    let who = run
        .exec(&argv(&["sh", "-c", "echo \"$GREETING\"; pwd; id -u"]), opts)
        .await
        .unwrap();
    assert_eq!(
        (who.exit_code, text(who.stdout)),
        (0, "hi there\n/tmp\n1000\n".to_owned())
    );
    run.cleanup().await.unwrap();
}

async fn exec_streams_50_mb_without_buffering_it(engine: Engine) {
    let (test_id, run_id) = ids(engine, "stream_50mb");
    let Some((driver, _client)) = engine
        .driver_or_skip(&test_id, DockerSettings::default().persist_nix(false))
        .await
    else {
        return;
    };
    let (tmp, ws) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let info = run_info(&run_id, "store", ws.path(), tmp.path());
    let (run, _guard) = start(engine, &driver, &busybox_spec(), info).await;

    const SIZE: u64 = 50 * 1024 * 1024;
    let (out, err) = (Counter::default(), Counter::default());
    let opts = ExecOpts {
        stdout: Some(Box::new(out.clone())),
        stderr: Some(Box::new(err.clone())),
        ..ExecOpts::default()
    };
    let started = Instant::now();
    let result = run
        .exec(
            &argv(&["sh", "-c", &format!("head -c {SIZE} /dev/zero; echo done >&2")]),
            opts,
        )
        .await
        .unwrap();
    assert_eq!(
        (
            result,
            out.0.load(Ordering::SeqCst),
            err.0.load(Ordering::SeqCst)
        ),
        (
            ExecResult {
                exit_code: 0,
                stdout: None,
                stderr: None
            },
            SIZE,
            5
        )
    );
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "50 MB took {:?}",
        started.elapsed()
    );
    run.cleanup().await.unwrap();
}

async fn exec_passes_stdin_through(engine: Engine) {
    let (test_id, run_id) = ids(engine, "stdin");
    let Some((driver, _client)) = engine
        .driver_or_skip(&test_id, DockerSettings::default().persist_nix(false))
        .await
    else {
        return;
    };
    let (tmp, ws) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let info = run_info(&run_id, "store", ws.path(), tmp.path());
    let (run, _guard) = start(engine, &driver, &busybox_spec(), info).await;

    let input: &'static [u8] = b"line one\nline two\n";
    let cat = run
        .exec(
            &argv(&["cat"]),
            ExecOpts {
                stdin: Some(Box::new(input)),
                ..ExecOpts::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        (cat.exit_code, text(cat.stdout)),
        (0, "line one\nline two\n".to_owned())
    );

    // 4 MiB through stdin, counted on the other side.
    let big = vec![b'x'; 4 * 1024 * 1024];
    let wc = run
        .exec(
            &argv(&["wc", "-c"]),
            ExecOpts {
                stdin: Some(Box::new(std::io::Cursor::new(big))),
                ..ExecOpts::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        (wc.exit_code, text(wc.stdout).trim().to_owned()),
        (0, (4 * 1024 * 1024).to_string())
    );
    run.cleanup().await.unwrap();
}

async fn a_1_mb_script_runs_through_stdin(engine: Engine) {
    let (test_id, run_id) = ids(engine, "script_1mb");
    let Some((driver, _client)) = engine
        .driver_or_skip(&test_id, DockerSettings::default().persist_nix(false))
        .await
    else {
        return;
    };
    let (tmp, ws) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let info = run_info(&run_id, "store", ws.path(), tmp.path());
    let (run, _guard) = start(engine, &driver, &busybox_spec(), info).await;

    // One argument of 1 MiB is far past the kernel's 128 KiB per-argument limit: this only runs
    // because the driver feeds it to `sh -s` on stdin.
    let mut script = String::from("n=0\n");
    while script.len() < 1024 * 1024 {
        script.push_str("n=$((n+1)) # padding padding padding padding padding padding\n");
    }
    script.push_str("echo \"lines=$n\"; echo \"args=$#\"\n");
    let lines = script.lines().count() - 2;
    let result = sh(run.as_ref(), &script).await;
    assert_eq!(
        (result.exit_code, text(result.stdout), text(result.stderr)),
        (0, format!("lines={lines}\nargs=0\n"), String::new())
    );
    run.cleanup().await.unwrap();
}

#[allow(dead_code)]
pub(crate) fn prepared_for(driver: &DockerDriver, spec: Spec) -> PreparedSpec {
    PreparedSpec::new(driver.name(), spec)
}
