//! The docker/podman driver against the real engines (SANDBOX.md §4 acceptance): every test runs
//! once on dockerd and once on `podman system service` (see `engines.rs`).

// Test code: a failed unwrap is the assertion.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bollard::Docker;
use iterion_sandbox::{
    Driver, Error, ExecOpts, ExecResult, LogLevel, Mode, NoProgress, ProxyAttachment, RunInfo,
    RunLog, SandboxRun, Spec,
};
use iterion_sandbox_docker::{DockerDriver, DockerSettings};
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
    post_create_runs_in_the_workspace_and_its_failure_leaves_no_container,
    a_post_create_past_its_budget_times_out_and_leaves_no_container,
    cleanup_succeeds_after_the_container_was_killed_or_removed_externally,
    a_build_inside_the_workspace_runs_with_sleep_as_pid_1_despite_its_entrypoint,
    a_build_context_outside_the_workspace_is_refused_before_the_engine_sees_it,
    a_build_leaves_no_intermediate_image_and_its_nix_volume_is_reaped,
    a_registry_that_never_answers_is_a_pull_phase_timeout,
    an_unresolvable_registry_fails_the_pull_quickly_naming_the_image,
    the_run_log_shows_a_docker_run_line_with_the_proxy_token_hidden,
    a_planned_listener_without_proxy_gets_the_host_alias,
    orphans_are_listed_by_store_and_removed_by_run,
    file_secrets_are_readable_by_the_sandbox_user_and_refresh_in_place,
    prepare_checks_the_engine_binary_against_the_image_architecture,
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
            format!(
                "sleep infinity \n{}\n",
                ws.path().canonicalize().unwrap().display()
            ),
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
    assert!(
        matches!(closed, Err(Error::SandboxClosed { .. })),
        "{closed:?}"
    );
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
        run.exec(&argv(&["false"]), ExecOpts::default())
            .await
            .unwrap()
            .exit_code,
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
            &argv(&[
                "sh",
                "-c",
                &format!("head -c {SIZE} /dev/zero; echo done >&2"),
            ]),
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

async fn post_create_runs_in_the_workspace_and_its_failure_leaves_no_container(engine: Engine) {
    let (test_id, run_id) = ids(engine, "post_create");
    let Some((driver, client)) = engine
        .driver_or_skip(&test_id, DockerSettings::default().persist_nix(false))
        .await
    else {
        return;
    };
    let (tmp, ws) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut spec = busybox_spec();
    spec.post_create = Some("pwd > post-created; echo setting up".to_owned());
    let info = run_info(&run_id, "store", ws.path(), tmp.path());
    let (run, _guard) = start(engine, &driver, &spec, info).await;
    assert_eq!(
        std::fs::read_to_string(ws.path().join("post-created")).unwrap(),
        format!("{}\n", ws.path().canonicalize().unwrap().display())
    );
    run.cleanup().await.unwrap();

    spec.post_create = Some("echo partial; echo 'no such package' >&2; exit 4".to_owned());
    let info = run_info(&format!("{run_id}-fail"), "store", ws.path(), tmp.path());
    let prepared = driver.prepare(&spec, &NoProgress).await.unwrap();
    let error = driver.start(prepared, info).await.err().unwrap();
    assert_eq!(
        (error.code(), error.to_string()),
        (
            "SANDBOX_SETUP_FAILED",
            format!(
                "{}: postCreate failed: no such package\npartial",
                engine.kind()
            )
        )
    );
    assert_eq!(labelled(&client, &test_id).await, Vec::<String>::new());
}

async fn a_post_create_past_its_budget_times_out_and_leaves_no_container(engine: Engine) {
    let (test_id, run_id) = ids(engine, "post_create_timeout");
    let settings = DockerSettings::default()
        .persist_nix(false)
        .post_create_timeout(Duration::from_secs(1));
    let Some((driver, client)) = engine.driver_or_skip(&test_id, settings).await else {
        return;
    };
    let (tmp, ws) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut spec = busybox_spec();
    spec.post_create = Some("sleep 600".to_owned());
    let info = run_info(&run_id, "store", ws.path(), tmp.path());
    let prepared = driver.prepare(&spec, &NoProgress).await.unwrap();
    let started = Instant::now();
    let error = driver.start(prepared, info).await.err().unwrap();
    assert_eq!(
        (error.code(), matches!(error, Error::PhaseTimeout { .. })),
        ("SANDBOX_SETUP_TIMEOUT", true)
    );
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(labelled(&client, &test_id).await, Vec::<String>::new());
}

async fn cleanup_succeeds_after_the_container_was_killed_or_removed_externally(engine: Engine) {
    let (test_id, run_id) = ids(engine, "external_kill");
    let Some((driver, client)) = engine
        .driver_or_skip(&test_id, DockerSettings::default().persist_nix(false))
        .await
    else {
        return;
    };
    let (tmp, ws) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let info = run_info(&run_id, "store", ws.path(), tmp.path());
    let (killed, _g1) = start(engine, &driver, &busybox_spec(), info).await;
    client
        .kill_container(
            killed.id(),
            None::<bollard::query_parameters::KillContainerOptions>,
        )
        .await
        .unwrap();
    // An exec into the killed sandbox is an error, never a success: callers probe liveness so.
    let probe = killed.exec(&argv(&["true"]), ExecOpts::default()).await;
    assert!(probe.is_err(), "exec into a killed container: {probe:?}");
    let info = run_info(&format!("{run_id}-rm"), "store", ws.path(), tmp.path());
    let (removed, _g2) = start(engine, &driver, &busybox_spec(), info).await;
    client
        .remove_container(
            removed.id(),
            Some(
                bollard::query_parameters::RemoveContainerOptionsBuilder::new()
                    .force(true)
                    .build(),
            ),
        )
        .await
        .unwrap();
    let outcomes = [
        killed.cleanup().await.map_err(|e| e.to_string()),
        removed.cleanup().await.map_err(|e| e.to_string()),
        killed.cleanup().await.map_err(|e| e.to_string()),
    ];
    assert_eq!(outcomes, [Ok(()), Ok(()), Ok(())]);
    // The killed one may still be auto-removing; it is gone within moments.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !labelled(&client, &test_id).await.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(labelled(&client, &test_id).await, Vec::<String>::new());
}

async fn a_build_inside_the_workspace_runs_with_sleep_as_pid_1_despite_its_entrypoint(
    engine: Engine,
) {
    let (test_id, run_id) = ids(engine, "build_inside");
    let Some((driver, client)) = engine
        .driver_or_skip(&test_id, DockerSettings::default().persist_nix(false))
        .await
    else {
        return;
    };
    let (tmp, ws) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::create_dir_all(ws.path().join("docker")).unwrap();
    std::fs::write(
        ws.path().join("docker/Dockerfile"),
        format!(
            "FROM {BUSYBOX_IMAGE}\nARG GREETING=unset\nCOPY hello.txt /hello.txt\n\
             RUN echo \"$GREETING\" > /greeting\nENTRYPOINT [\"/bin/false\"]\n"
        ),
    )
    .unwrap();
    std::fs::write(ws.path().join("docker/hello.txt"), "copied\n").unwrap();
    std::fs::write(ws.path().join("docker/.dockerignore"), "*.secret\n").unwrap();
    std::fs::write(ws.path().join("docker/key.secret"), "s").unwrap();
    let spec = Spec {
        mode: Mode::Inline,
        build: Some(iterion_sandbox::Build {
            dockerfile: "docker/Dockerfile".to_owned(),
            context: None,
            args: [("GREETING".to_owned(), "built-with-arg".to_owned())].into(),
        }),
        ..Spec::default()
    };
    let info = run_info(&run_id, "store-build", ws.path(), tmp.path());
    let prepared = driver.prepare(&spec, &NoProgress).await.unwrap();
    let built = driver
        .builder()
        .unwrap()
        .build(prepared, &info)
        .await
        .unwrap();
    let tag = format!("iterion-sandbox-build:{run_id}");
    let _image_guard = EngineGuard::image(engine, &tag);
    assert_eq!(built.image.as_deref(), Some(tag.as_str()));
    let image_labels = client
        .inspect_image(&tag)
        .await
        .unwrap()
        .config
        .and_then(|c| c.labels)
        .unwrap_or_default();
    assert_eq!(
        (
            image_labels.get("iterion.io/managed").map(String::as_str),
            image_labels.get("iterion.io/run-id").map(String::as_str),
            image_labels.get("iterion.io/store").map(String::as_str),
        ),
        (Some("true"), Some(run_id.as_str()), Some("store-build"))
    );
    let run = driver.start(built, info).await.unwrap();
    let _guard = EngineGuard::container(engine, run.id());
    let inside = sh(
        run.as_ref(),
        "tr '\\0' ' ' < /proc/1/cmdline; echo; cat /greeting /hello.txt; ls /key.secret 2>&1 || true",
    )
    .await;
    assert_eq!(
        (inside.exit_code, text(inside.stdout)),
        (
            0,
            "sleep infinity \nbuilt-with-arg\ncopied\nls: /key.secret: No such file or directory\n"
                .to_owned()
        )
    );
    run.cleanup().await.unwrap();
    // The built image goes with the run.
    assert!(
        matches!(
            client.inspect_image(&tag).await,
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404,
                ..
            })
        ),
        "{tag} should be removed at cleanup"
    );
}

async fn a_build_context_outside_the_workspace_is_refused_before_the_engine_sees_it(
    engine: Engine,
) {
    let (test_id, run_id) = ids(engine, "build_outside");
    let Some((driver, client)) = engine
        .driver_or_skip(&test_id, DockerSettings::default().persist_nix(false))
        .await
    else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(
        tmp.path().join("Dockerfile"),
        format!("FROM {BUSYBOX_IMAGE}\n"),
    )
    .unwrap();
    std::fs::write(ws.join("Dockerfile"), format!("FROM {BUSYBOX_IMAGE}\n")).unwrap();
    std::os::unix::fs::symlink(tmp.path(), ws.join("up")).unwrap();
    let info = run_info(&run_id, "store", &ws, tmp.path());
    let builds = [
        ("../Dockerfile", None),
        ("Dockerfile", Some("..")),
        ("up/Dockerfile", None),
        ("Dockerfile", Some("up")),
    ];
    let mut refusals = Vec::new();
    for (dockerfile, context) in builds {
        let spec = Spec {
            mode: Mode::Inline,
            build: Some(iterion_sandbox::Build {
                dockerfile: dockerfile.to_owned(),
                context: context.map(str::to_owned),
                args: Default::default(),
            }),
            ..Spec::default()
        };
        let prepared = driver.prepare(&spec, &NoProgress).await.unwrap();
        let error = driver
            .builder()
            .unwrap()
            .build(prepared, &info)
            .await
            .unwrap_err();
        refusals.push((
            error.code(),
            matches!(error, Error::EscapesWorkspace { .. }),
        ));
    }
    assert_eq!(refusals, vec![("SANDBOX_SETUP_FAILED", true); 4]);
    let tag = format!("iterion-sandbox-build:{run_id}");
    assert!(client.inspect_image(&tag).await.is_err(), "{tag} exists");
}

async fn a_registry_that_never_answers_is_a_pull_phase_timeout(engine: Engine) {
    let (test_id, _run_id) = ids(engine, "pull_timeout");
    let settings = DockerSettings::default().pull_timeout(Duration::from_secs(2));
    let Some((driver, _client)) = engine.driver_or_skip(&test_id, settings).await else {
        return;
    };
    // A registry on loopback that accepts connections and never says a word.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let blackhole = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let spec = Spec {
        mode: Mode::Inline,
        image: Some(format!("127.0.0.1:{port}/iterion/never:1")),
        ..Spec::default()
    };
    let started = Instant::now();
    let error = driver.prepare(&spec, &NoProgress).await.unwrap_err();
    let elapsed = started.elapsed();
    blackhole.abort();
    assert_eq!(
        (error.code(), matches!(error, Error::PhaseTimeout { .. })),
        ("SANDBOX_SETUP_TIMEOUT", true),
        "{error}"
    );
    assert!(
        elapsed >= Duration::from_secs(2) && elapsed < Duration::from_secs(6),
        "{elapsed:?}"
    );
}

async fn an_unresolvable_registry_fails_the_pull_quickly_naming_the_image(engine: Engine) {
    let (test_id, _run_id) = ids(engine, "pull_unresolvable");
    let settings = DockerSettings::default().pull_timeout(Duration::from_secs(20));
    let Some((driver, _client)) = engine.driver_or_skip(&test_id, settings).await else {
        return;
    };
    let started = Instant::now();
    let progress = |_: &iterion_sandbox::PullProgress| {};
    let error = driver
        .prepare(
            &Spec {
                mode: Mode::Inline,
                image: Some("unreachable.invalid/x:1".to_owned()),
                ..Spec::default()
            },
            &progress,
        )
        .await
        .unwrap_err();
    assert_eq!(
        (
            error.code(),
            matches!(&error, Error::PullFailed { image, .. } if image == "unreachable.invalid/x:1")
        ),
        ("SANDBOX_SETUP_FAILED", true),
        "{error}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
}

async fn the_run_log_shows_a_docker_run_line_with_the_proxy_token_hidden(engine: Engine) {
    let (test_id, run_id) = ids(engine, "run_log");
    let Some((driver, _client)) = engine
        .driver_or_skip(&test_id, DockerSettings::default().persist_nix(false))
        .await
    else {
        return;
    };
    let lines = Arc::new(Lines::default());
    let driver = driver
        .with_run_log(Arc::clone(&lines) as Arc<dyn RunLog>)
        .unwrap();
    let (tmp, ws) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut info = run_info(&run_id, "store", ws.path(), tmp.path());
    std::fs::create_dir_all(info.run_dir.join("net")).unwrap();
    info.proxy = Some(ProxyAttachment {
        endpoint: "http://t:tok-3f9a2c@127.0.0.1:3128".to_owned(),
        host_socket: Some(info.run_dir.join("net/proxy.sock")),
        port: Some(3128),
    });
    info.listener_planned = true;
    let mut spec = busybox_spec();
    spec.post_create = Some("echo ready".to_owned());
    let prepared = driver.prepare(&spec, &NoProgress).await.unwrap();
    let run = driver.start(prepared, info).await.unwrap();
    let _guard = EngineGuard::container(engine, run.id());
    // No network but loopback; the proxy env is there for the bridge to serve.
    let inside = sh(
        run.as_ref(),
        "ls /sys/class/net; echo \"$HTTPS_PROXY\"; ls -d /run/iterion/net",
    )
    .await;
    assert_eq!(
        text(inside.stdout),
        "lo\nhttp://t:tok-3f9a2c@127.0.0.1:3128\n/run/iterion/net\n"
    );
    run.cleanup().await.unwrap();
    let all = lines.all();
    let name = engine.kind().as_str();
    let run_line = all
        .iter()
        .find(|(_, line)| {
            line.starts_with(&format!(
                "{name} run --detach --rm --name iterion-{run_id} "
            ))
        })
        .cloned();
    let summary: Vec<(LogLevel, String)> = all
        .iter()
        .filter(|(_, line)| !line.starts_with(&format!("{name} run ")))
        .map(|(level, line)| (*level, line.split(" workspace=").next().unwrap().to_owned()))
        .map(|(level, line)| {
            (
                level,
                line.replace(run.id(), "<id>")
                    .replace(&run.id()[..12], "<id>"),
            )
        })
        .filter(|(level, _)| *level != LogLevel::Debug)
        .collect();
    let Some((LogLevel::Info, run_line)) = run_line else {
        panic!("no run line in {all:?}");
    };
    assert_eq!(
        (
            run_line.contains("tok-3f9a2c"),
            run_line.contains("--network none"),
            run_line.contains("'HTTPS_PROXY=http://t:***@127.0.0.1:3128'"),
            run_line.ends_with(&format!("--entrypoint sleep {BUSYBOX_IMAGE} infinity")),
            all.iter().any(|(_, line)| line.contains("tok-3f9a2c")),
        ),
        (false, true, true, true, false)
    );
    let ws_path = ws.path().canonicalize().unwrap().display().to_string();
    assert_eq!(
        summary,
        vec![
            (
                LogLevel::Info,
                format!("{name} exec --workdir {ws_path} <id> sh -c 'echo ready'")
            ),
            (LogLevel::Info, "sandbox: postCreate: ready".to_owned()),
            (
                LogLevel::Info,
                format!(
                    "sandbox active: driver={name} image={BUSYBOX_IMAGE} container=<id> network=none"
                )
            ),
            (LogLevel::Info, format!("{name} rm --force <id>")),
        ]
    );
}

async fn a_planned_listener_without_proxy_gets_the_host_alias(engine: Engine) {
    let (test_id, run_id) = ids(engine, "host_alias");
    let Some((driver, _client)) = engine
        .driver_or_skip(&test_id, DockerSettings::default().persist_nix(false))
        .await
    else {
        return;
    };
    let (tmp, ws) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut info = run_info(&run_id, "store", ws.path(), tmp.path());
    info.listener_planned = true;
    // The engine makes the listener's `net/` dir before start (the driver binds it).
    std::fs::create_dir_all(info.run_dir.join("net")).unwrap();
    let (run, _guard) = start(engine, &driver, &busybox_spec(), info).await;
    let hosts = sh(run.as_ref(), "grep -c 'host.docker.internal' /etc/hosts").await;
    assert_eq!((hosts.exit_code, text(hosts.stdout)), (0, "1\n".to_owned()));
    run.cleanup().await.unwrap();
}

async fn orphans_are_listed_by_store_and_removed_by_run(engine: Engine) {
    let (test_id, run_id) = ids(engine, "orphans");
    let Some((driver, client)) = engine
        .driver_or_skip(&test_id, DockerSettings::default().persist_nix(false))
        .await
    else {
        return;
    };
    let store = format!("store-{run_id}");
    let (tmp, ws) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (first, second) = (format!("{run_id}-a"), format!("{run_id}-b"));
    let (_a, _ga) = start(
        engine,
        &driver,
        &busybox_spec(),
        run_info(&first, &store, ws.path(), tmp.path()),
    )
    .await;
    let (b, _gb) = start(
        engine,
        &driver,
        &busybox_spec(),
        run_info(&second, &store, ws.path(), tmp.path()),
    )
    .await;
    let run_ids = |managed: Vec<iterion_sandbox::ManagedResource>| {
        let mut ids: Vec<String> = managed.into_iter().map(|m| m.run_id).collect();
        ids.sort();
        ids
    };
    let before = run_ids(driver.list_managed(&store).await.unwrap());
    let removed = driver.remove_run(&store, &first).await.unwrap();
    let after = run_ids(driver.list_managed(&store).await.unwrap());
    assert_eq!(
        (
            before,
            removed,
            after,
            run_ids(driver.list_managed("another-store").await.unwrap())
        ),
        (
            vec![first.clone(), second.clone()],
            1,
            vec![second.clone()],
            vec![]
        )
    );
    b.cleanup().await.unwrap();
    assert_eq!(labelled(&client, &test_id).await, Vec::<String>::new());
}

#[tokio::test]
async fn docker_factory_takes_the_engine_that_answers_names_it_and_reports_dead_endpoints() {
    use iterion_sandbox::{
        DriverKind, Factory, FactoryOptions, HostKind, HostSignals, NoopConstructor, Registry,
    };
    use iterion_sandbox_docker::DockerConstructor;
    let test_id = "iterion-sandbox::docker_driver::docker_factory";
    let settings = DockerSettings::default().persist_nix(false);
    if Engine::Docker
        .driver_or_skip(test_id, settings.clone())
        .await
        .is_none()
        || Engine::Podman
            .driver_or_skip(test_id, settings.clone())
            .await
            .is_none()
    {
        return;
    }
    let dead = "unix:///nonexistent/iterion-test.sock".to_owned();
    let factory = |docker: Vec<String>, podman: Vec<String>| {
        let registry = Registry::empty()
            .register(
                DriverKind::Docker,
                DockerConstructor::with_endpoints(DriverKind::Docker, docker, settings.clone()),
            )
            .register(
                DriverKind::Podman,
                DockerConstructor::with_endpoints(DriverKind::Podman, podman, settings.clone()),
            )
            .register(DriverKind::Noop, NoopConstructor);
        let options = FactoryOptions {
            host: Some(HostKind::Local),
            preferred_driver: None,
        };
        Factory::new(registry, options, &HostSignals::default())
    };
    let active = busybox_spec();

    // Docker first when it answers; podman when docker's endpoint is dead.
    let docker_up = factory(
        vec![Engine::Docker.endpoint()],
        vec![Engine::Podman.endpoint()],
    );
    let docker_down = factory(vec![dead.clone()], vec![Engine::Podman.endpoint()]);
    // The docker constructor pointed at podman's socket names what answers: podman.
    let podman_behind_docker_host = factory(vec![Engine::Podman.endpoint()], vec![]);
    let mut names = Vec::new();
    for factory in [&docker_up, &docker_down, &podman_behind_docker_host] {
        let driver = factory.driver_for_spec(Some(&active)).await.unwrap();
        names.push(driver.name().to_owned());
    }
    assert_eq!(names, ["docker", "podman", "podman"]);

    // Nothing answers: an active spec gets DriverUnavailable naming each endpoint's reason.
    let nothing = factory(vec![dead.clone()], vec![]);
    let error = nothing.driver_for_spec(Some(&active)).await.err().unwrap();
    let Error::DriverUnavailable { tried } = &error else {
        panic!("{error}");
    };
    assert_eq!(
        (
            error.code(),
            tried
                .iter()
                .map(|t| (
                    t.driver.as_str(),
                    t.reason.contains(&dead) || t.reason.contains("no endpoint")
                ))
                .collect::<Vec<_>>()
        ),
        (
            "SANDBOX_DRIVER_UNAVAILABLE",
            vec![("docker", true), ("podman", true)]
        )
    );
    assert_eq!(
        nothing.driver().await.map(|d| d.name().to_owned()).ok(),
        Some("noop".to_owned())
    );
}

async fn file_secrets_are_readable_by_the_sandbox_user_and_refresh_in_place(engine: Engine) {
    let (test_id, run_id) = ids(engine, "file_secrets");
    let Some((driver, _client)) = engine
        .driver_or_skip(&test_id, DockerSettings::default().persist_nix(false))
        .await
    else {
        return;
    };
    let (tmp, ws) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let info = run_info(&run_id, "store", ws.path(), tmp.path());
    let run_dir = info.run_dir.clone();
    let secret =
        |name: &str, path: &str, env: Option<&str>, value: &str| iterion_sandbox::SecretFileMount {
            name: name.to_owned(),
            mount_path: path.to_owned(),
            env: env.map(str::to_owned),
            value: value.into(),
        };
    let spec = Spec {
        user: Some("1000:1000".to_owned()),
        secret_files: vec![
            secret(
                "API_TOKEN",
                "/run/iterion/secrets/API_TOKEN",
                Some("TOKEN_FILE"),
                "first-token",
            ),
            secret("kube", "/home/user/.kube-config", None, "first-kube"),
        ],
        ..busybox_spec()
    };
    let (run, _guard) = start(engine, &driver, &spec, info).await;
    let read = "cat \"$TOKEN_FILE\"; echo; cat /home/user/.kube-config; echo; \
                stat -c '%a %u' /run/iterion/secrets/API_TOKEN /home/user/.kube-config; \
                echo x > /run/iterion/secrets/API_TOKEN 2>/dev/null && echo writable || echo read-only";
    let before = sh(run.as_ref(), read).await;
    let refresher = run.secret_file_refresher().unwrap();
    refresher
        .refresh_secret_file("API_TOKEN", &"second-token".into())
        .await
        .unwrap();
    refresher
        .refresh_secret_file("kube", &"second-kube".into())
        .await
        .unwrap();
    let after = sh(run.as_ref(), read).await;
    assert_eq!(
        (text(before.stdout), text(after.stdout)),
        (
            "first-token\nfirst-kube\n400 1000\n400 1000\nread-only\n".to_owned(),
            "second-token\nsecond-kube\n400 1000\n400 1000\nread-only\n".to_owned()
        )
    );
    run.cleanup().await.unwrap();
    assert!(
        !run_dir.exists(),
        "the per-run dir (and its secrets) is removed"
    );
}

async fn prepare_checks_the_engine_binary_against_the_image_architecture(engine: Engine) {
    let (test_id, _run_id) = ids(engine, "engine_binary");
    let Some((driver, _client)) = engine
        .driver_or_skip(&test_id, DockerSettings::default().persist_nix(false))
        .await
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("iterion");
    std::fs::write(&script, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let with_binary = |source: &Path| Spec {
        engine_mounts: vec![iterion_sandbox::EngineMount {
            kind: iterion_sandbox::EngineMountKind::Bind,
            source: source.display().to_string(),
            target: "/run/iterion/bin/iterion".to_owned(),
            read_only: true,
            purpose: iterion_sandbox_docker::ENGINE_BINARY_PURPOSE.to_owned(),
        }],
        ..busybox_spec()
    };
    // This test binary is an ELF for the host, as the test images are.
    let ok = driver
        .prepare(&with_binary(&std::env::current_exe().unwrap()), &NoProgress)
        .await
        .unwrap();
    let refused = driver
        .prepare(&with_binary(&script), &NoProgress)
        .await
        .unwrap_err();
    let host_arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    assert_eq!(
        (
            ok.image_config.map(|c| c.architecture),
            refused.code(),
            matches!(refused, Error::EngineBinary { .. })
        ),
        (Some(host_arch.to_owned()), "SANDBOX_SETUP_FAILED", true)
    );
}

/// Every image of a run labelled with its run id, intermediates included (`all=true`).
async fn images_of_run(client: &Docker, run_id: &str) -> Vec<String> {
    let filters = std::collections::HashMap::from([(
        "label".to_owned(),
        vec![format!("iterion.io/run-id={run_id}")],
    )]);
    let options = bollard::query_parameters::ListImagesOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    client
        .list_images(Some(options))
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.id)
        .collect()
}

async fn volume_exists(client: &Docker, name: &str) -> bool {
    client.inspect_volume(name).await.is_ok()
}

/// Issue 15 item 13: a build's intermediate images (the classic builder commits one per `LABEL`
/// step, the store's label last) go with the run's image at cleanup, and the shared `/nix`
/// volume each trusted build makes for its new image carries the store label and is reaped once
/// that image is gone.
async fn a_build_leaves_no_intermediate_image_and_its_nix_volume_is_reaped(engine: Engine) {
    let (test_id, run_id) = ids(engine, "build_reaped");
    let Some((driver, client)) = engine
        .driver_or_skip(&test_id, DockerSettings::default().persist_nix(true))
        .await
    else {
        return;
    };
    let store = format!("store-reap-{}", std::process::id());
    let (tmp, ws) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::write(
        ws.path().join("Dockerfile"),
        format!("FROM {BUSYBOX_IMAGE}\nRUN echo a > /a\nRUN echo b > /b\n"),
    )
    .unwrap();
    let spec = Spec {
        mode: Mode::Inline,
        build: Some(iterion_sandbox::Build {
            dockerfile: "Dockerfile".to_owned(),
            context: None,
            args: Default::default(),
        }),
        ..Spec::default()
    };
    let info = run_info(&run_id, &store, ws.path(), tmp.path());
    let prepared = driver.prepare(&spec, &NoProgress).await.unwrap();
    let built = driver
        .builder()
        .unwrap()
        .build(prepared, &info)
        .await
        .unwrap();
    let tag = format!("iterion-sandbox-build:{run_id}");
    let _image_guard = EngineGuard::image(engine, &tag);
    let image_id = built.image_config.as_ref().unwrap().id.clone();
    let volume =
        iterion_sandbox::nix_volume_name(&image_id, iterion_sandbox::Trust::Trusted, None).unwrap();
    let run = driver.start(built, info).await.unwrap();
    let _guard = EngineGuard::container(engine, run.id());
    let volume_made = volume_exists(&client, &volume).await;
    let volume_labels = client
        .inspect_volume(&volume)
        .await
        .map(|v| v.labels)
        .unwrap_or_default();
    run.cleanup().await.unwrap();
    let left_images = images_of_run(&client, &run_id).await;
    let before_reap = volume_exists(&client, &volume).await;
    let reaped = driver.reap_nix_volumes(&store).await.unwrap();
    let after_reap = volume_exists(&client, &volume).await;
    // Clean up whatever a failure left, then assert.
    for image in &left_images {
        let _ = client
            .remove_image(
                image,
                None::<bollard::query_parameters::RemoveImageOptions>,
                None,
            )
            .await;
    }
    let _ = client
        .remove_volume(
            &volume,
            None::<bollard::query_parameters::RemoveVolumeOptions>,
        )
        .await;
    assert_eq!(
        (
            volume_made,
            volume_labels.get("iterion.io/store").cloned(),
            left_images,
            before_reap,
            reaped,
            after_reap
        ),
        (
            true,
            Some(store.clone()),
            Vec::<String>::new(),
            true,
            vec![volume.clone()],
            false
        )
    );
}
