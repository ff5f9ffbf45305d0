//! The driver's sequencing over a recording fake: which calls, in which order, what is logged,
//! and what is cleaned up when a step fails.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use iterion_sandbox::{
    AdvertisedPort, Build, Driver, Error, ExecOpts, ExecResult, ImageConfig, ListedResource,
    LogLevel, Mode, NoProgress, PreparedSpec, Progress, ProxyAddresses, ProxyBind, ProxyConfigurer,
    PullProgress, RunInfo, RunLog, SandboxRun, Spec,
};
use pretty_assertions::assert_eq;

use super::*;
use crate::api::{BuildRequest, ExecChunk, ExecState};
use crate::fake::{Call, FakeContainerApi, Reply};

#[derive(Default)]
struct Lines(Mutex<Vec<(LogLevel, String)>>);

impl RunLog for Lines {
    fn line(&self, level: LogLevel, line: &str) {
        self.0.lock().unwrap().push((level, line.to_owned()));
    }
}

impl Lines {
    fn all(&self) -> Vec<(LogLevel, String)> {
        self.0.lock().unwrap().clone()
    }
}

fn driver_with(
    replies: impl IntoIterator<Item = Reply>,
    settings: DockerSettings,
) -> (Arc<dyn Driver>, FakeContainerApi, Arc<Lines>) {
    let fake = FakeContainerApi::new(replies);
    let lines = Arc::new(Lines::default());
    let driver = DockerDriver::new(Arc::new(fake.clone()), EngineKind::Docker, settings);
    let driver = driver
        .with_run_log(Arc::clone(&lines) as Arc<dyn RunLog>)
        .unwrap();
    (driver, fake, lines)
}

fn driver(
    replies: impl IntoIterator<Item = Reply>,
) -> (Arc<dyn Driver>, FakeContainerApi, Arc<Lines>) {
    driver_with(replies, DockerSettings::default().persist_nix(false))
}

fn image_config() -> ImageConfig {
    ImageConfig {
        id: "sha256:0123456789abcdef".to_owned(),
        env: vec!["PATH=/bin".to_owned()],
        architecture: "amd64".to_owned(),
    }
}

fn spec(image: &str) -> Spec {
    Spec {
        mode: Mode::Inline,
        image: Some(image.to_owned()),
        ..Spec::default()
    }
}

fn status(status: u16) -> ApiError {
    ApiError::Status {
        status,
        message: "boom".to_owned(),
    }
}

struct Workspace {
    _dir: tempfile::TempDir,
    info: RunInfo,
}

fn workspace() -> Workspace {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(dir.path().join("r1")).unwrap();
    let info = RunInfo::new(
        "r1",
        "s1",
        ws.canonicalize().unwrap(),
        dir.path().join("r1"),
    );
    Workspace { _dir: dir, info }
}

fn prepared(spec: Spec) -> PreparedSpec {
    PreparedSpec::new("docker", spec)
}

fn created(fake: &FakeContainerApi) -> Vec<String> {
    fake.calls()
        .iter()
        .map(|call| match call {
            Call::CreateContainer(name, _) => format!("create {name}"),
            Call::StartContainer(id) => format!("start {id}"),
            Call::RemoveContainer(id) => format!("remove {id}"),
            Call::CreateExec(id, request) => format!("exec {id} {:?}", request.cmd),
            Call::StartExec(id) => format!("start-exec {id}"),
            Call::InspectExec(id) => format!("inspect-exec {id}"),
            Call::CreateVolume(name, _) => format!("volume {name}"),
            other => format!("{other:?}"),
        })
        .collect()
}

#[tokio::test]
async fn prepare_uses_a_present_image_without_pulling() {
    let (driver, fake, lines) = driver([Reply::InspectImage(Ok(Some(image_config())))]);
    let prepared = driver
        .prepare(&spec("img:1"), &NoProgressSink)
        .await
        .unwrap();
    assert_eq!(
        (
            prepared.image,
            prepared.image_config,
            fake.calls(),
            lines.all()
        ),
        (
            Some("img:1".to_owned()),
            Some(image_config()),
            vec![Call::InspectImage("img:1".to_owned())],
            vec![]
        )
    );
}

struct NoProgressSink;
impl Progress for NoProgressSink {
    fn pull(&self, _update: &PullProgress) {}
}

#[tokio::test]
async fn prepare_pulls_a_missing_image_and_reports_its_progress() {
    let update = |layer: &str, status: &str, current: u64, total: Option<u64>| PullProgress {
        layer: layer.to_owned(),
        status: status.to_owned(),
        current,
        total,
    };
    let updates = vec![
        update("1:", "Pulling from library/img", 0, None),
        update("abc", "Downloading", 512, Some(1024)),
        update("abc", "Pull complete", 0, None),
    ];
    let (driver, fake, lines) = driver([
        Reply::InspectImage(Ok(None)),
        Reply::Pull(updates.iter().cloned().map(Ok).collect()),
        Reply::InspectImage(Ok(Some(image_config()))),
    ]);
    let seen = Mutex::new(Vec::new());
    let progress = |update: &PullProgress| seen.lock().unwrap().push(update.clone());
    let prepared = driver.prepare(&spec("img:1"), &progress).await.unwrap();
    assert_eq!(
        (
            prepared.image.as_deref(),
            seen.into_inner().unwrap(),
            fake.calls(),
            lines.all()
        ),
        (
            Some("img:1"),
            updates,
            vec![
                Call::InspectImage("img:1".to_owned()),
                Call::PullImage("img:1".to_owned()),
                Call::InspectImage("img:1".to_owned()),
            ],
            vec![(LogLevel::Info, "docker pull img:1".to_owned())]
        )
    );
}

#[tokio::test]
async fn a_pull_the_registry_refuses_falls_back_to_the_default_image() {
    let (driver, fake, lines) = driver([
        Reply::InspectImage(Ok(None)),
        Reply::Pull(vec![Err(ApiError::NotFound {
            message: "manifest for img:edge not found".to_owned(),
        })]),
        Reply::Pull(vec![]),
        Reply::InspectImage(Ok(Some(image_config()))),
    ]);
    let mut spec = spec("img:edge");
    spec.image_fallback = Some("img:latest".to_owned());
    let prepared = driver.prepare(&spec, &NoProgress).await.unwrap();
    assert_eq!(
        (prepared.image.as_deref(), fake.calls(), lines.all()),
        (
            Some("img:latest"),
            vec![
                Call::InspectImage("img:edge".to_owned()),
                Call::PullImage("img:edge".to_owned()),
                Call::PullImage("img:latest".to_owned()),
                Call::InspectImage("img:latest".to_owned()),
            ],
            vec![
                (LogLevel::Info, "docker pull img:edge".to_owned()),
                (
                    LogLevel::Warn,
                    "sandbox: img:edge not found; using fallback img:latest".to_owned()
                ),
                (LogLevel::Info, "docker pull img:latest".to_owned()),
            ]
        )
    );
}

#[tokio::test]
async fn any_other_pull_error_fails_setup_naming_the_image() {
    let (driver, _fake, _lines) = driver([
        Reply::InspectImage(Ok(None)),
        Reply::Pull(vec![Err(ApiError::Stream {
            message: "dial tcp: lookup unreachable.invalid: no such host".to_owned(),
        })]),
    ]);
    let mut spec = spec("unreachable.invalid/x:1");
    spec.image_fallback = Some("img:latest".to_owned());
    let error = driver.prepare(&spec, &NoProgress).await.unwrap_err();
    assert_eq!(
        (error.code(), error.to_string()),
        (
            "SANDBOX_SETUP_FAILED",
            "sandbox: pull unreachable.invalid/x:1: dial tcp: lookup unreachable.invalid: no such host"
                .to_owned()
        )
    );
}

#[tokio::test(start_paused = true)]
async fn a_pull_that_never_ends_is_a_phase_timeout() {
    let (driver, _fake, _lines) = driver_with(
        [Reply::InspectImage(Ok(None)), Reply::PullHangs],
        DockerSettings::default().pull_timeout(Duration::from_secs(2)),
    );
    let error = driver
        .prepare(&spec("img:1"), &NoProgress)
        .await
        .unwrap_err();
    assert_eq!(
        (error.code(), error.to_string()),
        (
            "SANDBOX_SETUP_TIMEOUT",
            "sandbox: image pull phase timed out after 2s (deadline 2s exceeded)".to_owned()
        )
    );
}

#[tokio::test]
async fn prepare_validates_before_any_call() {
    let (driver, fake, _lines) = driver([]);
    let inline_without_image = Spec {
        mode: Mode::Inline,
        ..Spec::default()
    };
    let dash_image = spec("--privileged");
    let errors = [
        driver
            .prepare(&inline_without_image, &NoProgress)
            .await
            .unwrap_err(),
        driver.prepare(&dash_image, &NoProgress).await.unwrap_err(),
    ]
    .map(|e| e.to_string());
    assert_eq!(
        (errors, fake.calls()),
        (
            [
                "sandbox: invalid spec: image: mode inline needs image or build".to_owned(),
                "sandbox: image \"--privileged\" refused: begins with -".to_owned(),
            ],
            vec![]
        )
    );
}

#[tokio::test]
async fn start_creates_starts_and_logs_the_run_line() {
    let ws = workspace();
    let (driver, fake, lines) = driver([
        Reply::CreateContainer(Ok("c0ffee1234567890".to_owned())),
        Reply::StartContainer(Ok(())),
    ]);
    let run = driver
        .start(prepared(spec("img:1")), ws.info.clone())
        .await
        .unwrap();
    let workspace = ws.info.workspace_path.display().to_string();
    assert_eq!(
        (run.id(), run.driver(), created(&fake), lines.all()),
        (
            "c0ffee1234567890",
            "docker",
            vec![
                "create iterion-r1".to_owned(),
                "start c0ffee1234567890".to_owned()
            ],
            vec![
                (
                    LogLevel::Info,
                    format!(
                        "docker run --detach --rm --name iterion-r1 --label iterion.io/managed=true \
                         --label iterion.io/run-id=r1 --label iterion.io/store=s1 --workdir {workspace} \
                         --mount type=bind,source={workspace},target={workspace} \
                         --entrypoint sleep img:1 infinity"
                    )
                ),
                (
                    LogLevel::Info,
                    format!(
                        "sandbox active: driver=docker image=img:1 container=c0ffee123456 network=default workspace={workspace}"
                    )
                ),
            ]
        )
    );
}

#[tokio::test]
async fn a_failed_start_removes_the_container() {
    let ws = workspace();
    let (driver, fake, _lines) = driver([
        Reply::CreateContainer(Ok("c1".to_owned())),
        Reply::StartContainer(Err(status(500))),
        Reply::RemoveContainer(Ok(())),
    ]);
    let error = driver
        .start(prepared(spec("img:1")), ws.info.clone())
        .await
        .err()
        .unwrap();
    assert_eq!(
        (error.code(), error.to_string(), created(&fake)),
        (
            "SANDBOX_SETUP_FAILED",
            "sandbox: docker: start container iterion-r1: engine answered 500: boom".to_owned(),
            vec![
                "create iterion-r1".to_owned(),
                "start c1".to_owned(),
                "remove c1".to_owned()
            ]
        )
    );
}

#[tokio::test]
async fn a_failed_cleanup_is_reported_next_to_the_failure_that_caused_it() {
    let ws = workspace();
    let (driver, _fake, _lines) = driver([
        Reply::CreateContainer(Ok("c1".to_owned())),
        Reply::StartContainer(Err(status(500))),
        Reply::RemoveContainer(Err(status(503))),
    ]);
    let error = driver
        .start(prepared(spec("img:1")), ws.info.clone())
        .await
        .err()
        .unwrap();
    assert_eq!(
        (error.code(), error.to_string()),
        (
            "SANDBOX_SETUP_FAILED",
            "sandbox: docker: start container iterion-r1: engine answered 500: boom; cleanup also \
             failed: sandbox: docker: remove container c1: engine answered 503: boom"
                .to_owned()
        )
    );
}

#[tokio::test]
async fn a_failing_post_create_removes_the_container_and_keeps_its_output() {
    let ws = workspace();
    let (driver, fake, lines) = driver([
        Reply::CreateContainer(Ok("c1".to_owned())),
        Reply::StartContainer(Ok(())),
        Reply::CreateExec(Ok("e1".to_owned())),
        Reply::StartExec(Ok(vec![
            ExecChunk::Stdout(Bytes::from_static(b"installing\n")),
            ExecChunk::Stderr(Bytes::from_static(b"boom\n")),
        ])),
        Reply::InspectExec(Ok(ExecState {
            running: false,
            exit_code: Some(3),
        })),
        Reply::RemoveContainer(Ok(())),
    ]);
    let mut spec = spec("img:1");
    spec.post_create = Some("make setup".to_owned());
    let error = driver
        .start(prepared(spec), ws.info.clone())
        .await
        .err()
        .unwrap();
    let workspace = ws.info.workspace_path.display().to_string();
    assert_eq!(
        (error.code(), error.to_string(), created(&fake)),
        (
            "SANDBOX_SETUP_FAILED",
            "docker: postCreate failed: boom\ninstalling".to_owned(),
            vec![
                "create iterion-r1".to_owned(),
                "start c1".to_owned(),
                "exec c1 [\"sh\", \"-c\", \"make setup\"]".to_owned(),
                "start-exec e1".to_owned(),
                "inspect-exec e1".to_owned(),
                "remove c1".to_owned(),
            ]
        )
    );
    assert_eq!(
        lines.all()[1..].to_vec(),
        vec![
            (
                LogLevel::Info,
                format!("docker exec --workdir {workspace} c1 sh -c 'make setup'")
            ),
            (LogLevel::Info, "sandbox: postCreate: installing".to_owned()),
            (LogLevel::Warn, "sandbox: postCreate: boom".to_owned()),
            (LogLevel::Info, "docker rm --force c1".to_owned()),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_post_create_that_overruns_its_budget_is_a_timeout_and_leaves_no_container() {
    let ws = workspace();
    let (driver, fake, _lines) = driver_with(
        [
            Reply::CreateContainer(Ok("c1".to_owned())),
            Reply::StartContainer(Ok(())),
            Reply::CreateExec(Ok("e1".to_owned())),
            Reply::StartExecHangs,
            Reply::RemoveContainer(Ok(())),
        ],
        DockerSettings::default()
            .persist_nix(false)
            .post_create_timeout(Duration::from_secs(1)),
    );
    let mut spec = spec("img:1");
    spec.post_create = Some("sleep 3600".to_owned());
    let error = driver
        .start(prepared(spec), ws.info.clone())
        .await
        .err()
        .unwrap();
    assert_eq!(
        (error.code(), created(&fake).last().cloned()),
        ("SANDBOX_SETUP_TIMEOUT", Some("remove c1".to_owned()))
    );
}

#[tokio::test]
async fn a_refused_mount_never_reaches_create() {
    let ws = workspace();
    let (driver, fake, _lines) = driver([]);
    for mount in [
        "source=/proc,target=/p",
        "type=bind,source=/var/run/docker.sock,target=/s",
        "source=../..,target=/up",
        "target=/run/iterion/x",
    ] {
        let mut spec = spec("img:1");
        spec.mounts = vec![mount.to_owned()];
        let error = driver
            .start(prepared(spec), ws.info.clone())
            .await
            .err()
            .unwrap();
        assert!(
            matches!(error, Error::MountRefused { .. }),
            "{mount}: {error}"
        );
    }
    assert_eq!(fake.calls(), vec![]);
}

#[tokio::test]
async fn a_name_conflict_removes_the_leftover_and_retries_once() {
    let ws = workspace();
    let (driver, fake, _lines) = driver([
        Reply::CreateContainer(Err(ApiError::Conflict {
            message: "name in use".to_owned(),
        })),
        Reply::RemoveContainer(Ok(())),
        Reply::CreateContainer(Ok("c2".to_owned())),
        Reply::StartContainer(Ok(())),
    ]);
    let run = driver
        .start(prepared(spec("img:1")), ws.info.clone())
        .await
        .unwrap();
    assert_eq!(
        (run.id(), created(&fake)),
        (
            "c2",
            vec![
                "create iterion-r1".to_owned(),
                "remove iterion-r1".to_owned(),
                "create iterion-r1".to_owned(),
                "start c2".to_owned()
            ]
        )
    );
}

#[tokio::test]
async fn start_refuses_a_spec_prepared_by_another_driver() {
    let ws = workspace();
    let (driver, fake, _lines) = driver([]);
    let foreign = PreparedSpec::new("podman", spec("img:1"));
    let error = driver.start(foreign, ws.info.clone()).await.err().unwrap();
    assert_eq!(
        (error.to_string(), fake.calls()),
        (
            "sandbox: docker: prepared spec comes from driver \"podman\"".to_owned(),
            vec![]
        )
    );
}

#[tokio::test]
async fn file_secrets_are_bound_read_only_refreshable_and_gone_after_cleanup() {
    let ws = workspace();
    let (driver, fake, lines) = driver([
        Reply::CreateContainer(Ok("c1".to_owned())),
        Reply::StartContainer(Ok(())),
        Reply::RemoveContainer(Ok(())),
    ]);
    let mut with_secret = spec("img:1");
    with_secret.secret_files = vec![iterion_sandbox::SecretFileMount {
        name: "TOKEN".to_owned(),
        mount_path: "/run/iterion/secrets/TOKEN".to_owned(),
        env: Some("TOKEN_FILE".to_owned()),
        value: "s3cr3t-value".into(),
    }];
    let run = driver
        .start(prepared(with_secret), ws.info.clone())
        .await
        .unwrap();
    let file = ws.info.run_dir.join("secrets/TOKEN");
    let first = std::fs::read_to_string(&file).unwrap();
    run.secret_file_refresher()
        .unwrap()
        .refresh_secret_file("TOKEN", &"rotated".into())
        .await
        .unwrap();
    let second = std::fs::read_to_string(&file).unwrap();
    let calls = fake.calls();
    let Some(Call::CreateContainer(_, body)) = calls.first() else {
        panic!("{calls:?}");
    };
    let secret_mount = body
        .host_config
        .clone()
        .and_then(|h| h.mounts)
        .and_then(|m| {
            m.into_iter()
                .find(|m| m.target.as_deref() == Some("/run/iterion/secrets"))
        })
        .map(|m| (m.source, m.read_only));
    run.cleanup().await.unwrap();
    assert_eq!(
        (
            first.as_str(),
            second.as_str(),
            secret_mount,
            body.env
                .clone()
                .unwrap_or_default()
                .contains(&"TOKEN_FILE=/run/iterion/secrets/TOKEN".to_owned()),
            lines.all().iter().any(|(_, l)| l.contains("s3cr3t-value")),
            format!("{body:?}").contains("s3cr3t-value"),
            ws.info.run_dir.exists(),
        ),
        (
            "s3cr3t-value",
            "rotated",
            Some((
                Some(ws.info.run_dir.join("secrets").display().to_string()),
                Some(true)
            )),
            true,
            false,
            false,
            false
        )
    );
}

#[tokio::test]
async fn a_trusted_run_shares_a_labelled_nix_volume_per_image() {
    let ws = workspace();
    let (driver, fake, _lines) = driver_with(
        [
            Reply::CreateVolume(Ok(())),
            Reply::CreateContainer(Ok("c1".to_owned())),
            Reply::StartContainer(Ok(())),
        ],
        DockerSettings::default(),
    );
    let mut prepared = prepared(spec("img:1"));
    prepared.image_config = Some(image_config());
    driver.start(prepared, ws.info.clone()).await.unwrap();
    let calls = fake.calls();
    let Some(Call::CreateContainer(_, body)) = calls.get(1) else {
        panic!("{calls:?}");
    };
    let last_mount = body
        .host_config
        .clone()
        .and_then(|h| h.mounts)
        .and_then(|m| m.last().cloned())
        .unwrap();
    assert_eq!(
        (
            calls[0].clone(),
            last_mount.source.as_deref(),
            last_mount.target.as_deref()
        ),
        (
            Call::CreateVolume(
                "iterion-nix-0123456789ab".to_owned(),
                BTreeMap::from([
                    ("iterion.io/managed".to_owned(), "true".to_owned()),
                    ("iterion.io/purpose".to_owned(), "nix-store".to_owned()),
                    ("iterion.io/store".to_owned(), ws.info.store_id.clone()),
                    ("iterion.io/image".to_owned(), "0123456789ab".to_owned()),
                ])
            ),
            Some("iterion-nix-0123456789ab"),
            Some("/nix")
        )
    );
}

async fn started(replies: Vec<Reply>) -> (Box<dyn SandboxRun>, FakeContainerApi, Workspace) {
    let ws = workspace();
    let mut all = vec![
        Reply::CreateContainer(Ok("c1".to_owned())),
        Reply::StartContainer(Ok(())),
    ];
    all.extend(replies);
    let (driver, fake, _lines) = driver(all);
    let run = driver
        .start(prepared(spec("img:1")), ws.info.clone())
        .await
        .unwrap();
    (run, fake, ws)
}

fn exited(code: i64) -> Reply {
    Reply::InspectExec(Ok(ExecState {
        running: false,
        exit_code: Some(code),
    }))
}

#[tokio::test]
async fn exec_buffers_what_the_caller_does_not_stream_and_writes_stdin_then_closes_it() {
    let (run, fake, _ws) = started(vec![
        Reply::CreateExec(Ok("e1".to_owned())),
        Reply::StartExec(Ok(vec![
            ExecChunk::Stdout(Bytes::from_static(b"a")),
            ExecChunk::Stderr(Bytes::from_static(b"warn")),
            ExecChunk::Stdout(Bytes::from_static(b"b")),
        ])),
        Reply::InspectExec(Ok(ExecState {
            running: true,
            exit_code: None,
        })),
        exited(7),
    ])
    .await;
    let input: &'static [u8] = b"hello";
    let result = run
        .exec(
            &["cat".to_owned()],
            ExecOpts {
                stdin: Some(Box::new(input)),
                ..ExecOpts::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        (result, fake.stdin()),
        (
            ExecResult {
                exit_code: 7,
                stdout: Some(Bytes::from_static(b"ab")),
                stderr: Some(Bytes::from_static(b"warn")),
            },
            (b"hello".to_vec(), true)
        )
    );
}

#[tokio::test]
async fn a_large_script_is_written_to_the_shell_on_stdin() {
    let script = format!("{}echo done\n", "# pad\n".repeat(20_000));
    let (run, fake, _ws) = started(vec![
        Reply::CreateExec(Ok("e1".to_owned())),
        Reply::StartExec(Ok(vec![])),
        exited(0),
    ])
    .await;
    let argv = ["bash".to_owned(), "-c".to_owned(), script.clone()];
    run.exec(&argv, ExecOpts::default()).await.unwrap();
    let exec_cmd = fake.calls().into_iter().find_map(|call| match call {
        Call::CreateExec(_, request) => Some((request.cmd, request.attach_stdin)),
        _ => None,
    });
    assert_eq!(
        (exec_cmd, fake.stdin()),
        (
            Some((vec!["bash".to_owned(), "-s".to_owned()], true)),
            (script.into_bytes(), true)
        )
    );
}

#[tokio::test(start_paused = true)]
async fn an_exec_whose_exit_code_never_comes_is_an_error() {
    let mut replies = vec![
        Reply::CreateExec(Ok("e1".to_owned())),
        Reply::StartExec(Ok(vec![])),
    ];
    replies.extend((0..200).map(|_| {
        Reply::InspectExec(Ok(ExecState {
            running: false,
            exit_code: None,
        }))
    }));
    let (run, _fake, _ws) = started(replies).await;
    let error = run.exec(&["true".to_owned()], ExecOpts::default()).await;
    assert_eq!(
        error.map_err(|e| e.to_string()),
        Err("exit code unavailable".to_owned())
    );
}

#[tokio::test]
async fn exec_refuses_an_empty_argv_and_any_exec_after_cleanup() {
    let (run, fake, ws) = started(vec![Reply::RemoveContainer(Err(ApiError::NotFound {
        message: "gone".to_owned(),
    }))])
    .await;
    let empty = run
        .exec(&[], ExecOpts::default())
        .await
        .map_err(|e| e.to_string());
    run.cleanup().await.unwrap();
    run.cleanup().await.unwrap();
    let closed = run
        .exec(&["true".to_owned()], ExecOpts::default())
        .await
        .map_err(|e| e.to_string());
    assert_eq!(
        (empty, closed, created(&fake), ws.info.run_dir.exists()),
        (
            Err("sandbox: argv \"\" refused: empty".to_owned()),
            Err("sandbox: docker sandbox c1 is cleaned up".to_owned()),
            vec![
                "create iterion-r1".to_owned(),
                "start c1".to_owned(),
                "remove c1".to_owned()
            ],
            false
        )
    );
}

#[tokio::test]
async fn a_cleanup_that_failed_is_retried_by_the_next_call() {
    let (run, fake, _ws) = started(vec![
        Reply::RemoveContainer(Err(status(500))),
        Reply::RemoveContainer(Ok(())),
    ])
    .await;
    let first = run.cleanup().await.map_err(|e| e.to_string());
    let second = run.cleanup().await.map_err(|e| e.to_string());
    let third = run.cleanup().await.map_err(|e| e.to_string());
    assert_eq!(
        (first, second, third, fake.unused()),
        (
            Err("sandbox: docker: remove container c1: engine answered 500: boom".to_owned()),
            Ok(()),
            Ok(()),
            0
        )
    );
}

/// A removal the engine already has in progress (AutoRemove after a kill from outside) answers
/// 409 until it is done: cleanup asks again until the container is gone (404), so it never
/// returns while the container is still listed; a 409 that never clears is an error.
#[tokio::test(start_paused = true)]
async fn a_removal_in_progress_is_asked_again_until_the_container_is_gone() {
    let conflict = || {
        Reply::RemoveContainer(Err(ApiError::Conflict {
            message: "removal of container c1 is already in progress".to_owned(),
        }))
    };
    let (run, fake, _ws) = started(vec![
        conflict(),
        conflict(),
        Reply::RemoveContainer(Err(ApiError::NotFound {
            message: "no such container".to_owned(),
        })),
    ])
    .await;
    assert_eq!(run.cleanup().await.map_err(|e| e.to_string()), Ok(()));
    assert_eq!(fake.unused(), 0, "asked three times");

    let (run, fake, _ws) = started((0..6).map(|_| conflict()).collect()).await;
    let stuck = run.cleanup().await.map_err(|e| e.to_string());
    assert_eq!(
        (stuck, fake.unused()),
        (
            Err(
                "sandbox: docker: remove container c1: conflict: removal of container c1 is \
                 already in progress"
                    .to_owned()
            ),
            0
        )
    );
}

#[tokio::test]
async fn orphans_are_listed_by_store_and_removed_by_run() {
    let listed = |id: &str, run: Option<&str>, store: &str| ListedResource {
        id: id.to_owned(),
        name: format!("iterion-{id}"),
        labels: [
            Some(("iterion.io/managed", "true")),
            Some(("iterion.io/store", store)),
            run.map(|r| ("iterion.io/run-id", r)),
        ]
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect(),
    };
    let fake = FakeContainerApi::new([
        Reply::ListContainers(Ok(vec![
            listed("a", Some("r1"), "s1"),
            listed("b", None, "s1"),
            listed("c", Some("r2"), "other-store"),
        ])),
        Reply::ListContainers(Ok(vec![listed("a", Some("r1"), "s1")])),
        Reply::RemoveContainer(Err(ApiError::NotFound {
            message: "gone".to_owned(),
        })),
    ]);
    let driver = DockerDriver::new(
        Arc::new(fake.clone()),
        EngineKind::Podman,
        DockerSettings::default(),
    );
    let managed = driver.list_managed("s1").await.unwrap();
    let removed = driver.remove_run("s1", "r1").await.unwrap();
    assert_eq!(
        (
            managed
                .iter()
                .map(|m| (m.id.as_str(), m.run_id.as_str()))
                .collect::<Vec<_>>(),
            removed,
            fake.calls()
        ),
        (
            vec![("a", "r1"), ("b", "")],
            1,
            vec![
                Call::ListContainers(vec![
                    "iterion.io/managed=true".to_owned(),
                    "iterion.io/store=s1".to_owned()
                ]),
                Call::ListContainers(vec![
                    "iterion.io/managed=true".to_owned(),
                    "iterion.io/store=s1".to_owned(),
                    "iterion.io/run-id=r1".to_owned()
                ]),
                Call::RemoveContainer("a".to_owned()),
            ]
        )
    );
}

fn build_workspace() -> Workspace {
    let ws = workspace();
    let root = &ws.info.workspace_path;
    std::fs::create_dir_all(root.join("docker")).unwrap();
    std::fs::write(
        root.join("docker/Dockerfile"),
        "FROM iterion-test/busybox:1\n",
    )
    .unwrap();
    std::fs::write(root.join("docker/setup.sh"), "echo hi\n").unwrap();
    ws
}

fn build_spec() -> Spec {
    Spec {
        mode: Mode::Inline,
        build: Some(Build {
            dockerfile: "docker/Dockerfile".to_owned(),
            context: None,
            args: BTreeMap::from([("V".to_owned(), "1".to_owned())]),
        }),
        ..Spec::default()
    }
}

#[tokio::test]
async fn a_build_tars_the_context_tags_the_image_for_the_run_and_inspects_it() {
    let ws = build_workspace();
    let (driver, fake, lines) = driver([
        Reply::Build(vec![Ok(
            "Step 1/1 : FROM iterion-test/busybox:1\n".to_owned()
        )]),
        Reply::InspectImage(Ok(Some(image_config()))),
    ]);
    let prepared = driver.prepare(&build_spec(), &NoProgress).await.unwrap();
    let built = driver
        .builder()
        .unwrap()
        .build(prepared, &ws.info)
        .await
        .unwrap();
    let labels = BTreeMap::from([
        ("iterion.io/managed".to_owned(), "true".to_owned()),
        ("iterion.io/run-id".to_owned(), "r1".to_owned()),
        ("iterion.io/store".to_owned(), "s1".to_owned()),
    ]);
    assert_eq!(
        (
            built.image.as_deref(),
            built.spec.image.as_deref(),
            built.spec.build.is_none(),
            built.image_config,
            fake.calls(),
            lines.all()
        ),
        (
            Some("iterion-sandbox-build:r1"),
            Some("iterion-sandbox-build:r1"),
            true,
            Some(image_config()),
            vec![
                Call::BuildImage(
                    BuildRequest {
                        dockerfile: "Dockerfile".to_owned(),
                        tag: "iterion-sandbox-build:r1".to_owned(),
                        build_args: BTreeMap::from([("V".to_owned(), "1".to_owned())]),
                        labels,
                        network_mode: None,
                    },
                    vec!["Dockerfile".to_owned(), "setup.sh".to_owned()]
                ),
                Call::InspectImage("iterion-sandbox-build:r1".to_owned()),
            ],
            vec![
                (
                    LogLevel::Info,
                    "docker build -f Dockerfile -t iterion-sandbox-build:r1 --label iterion.io/managed=true \
                     --label iterion.io/run-id=r1 --label iterion.io/store=s1 --build-arg V=1 docker"
                        .to_owned()
                ),
                // The build's output, streamed line by line.
                (
                    LogLevel::Info,
                    "sandbox: build: Step 1/1 : FROM iterion-test/busybox:1".to_owned()
                ),
            ]
        )
    );
}

#[tokio::test]
async fn a_failed_build_keeps_the_tail_of_its_output() {
    let ws = build_workspace();
    let (driver, _fake, _lines) = driver([Reply::Build(vec![
        Ok("Step 2/2 : RUN false\n".to_owned()),
        Err(ApiError::Stream {
            message: "The command '/bin/sh -c false' returned a non-zero code: 1".to_owned(),
        }),
    ])]);
    let prepared = driver.prepare(&build_spec(), &NoProgress).await.unwrap();
    let error = driver
        .builder()
        .unwrap()
        .build(prepared, &ws.info)
        .await
        .unwrap_err();
    assert_eq!(
        (error.code(), error.to_string()),
        (
            "SANDBOX_SETUP_FAILED",
            "sandbox: build failed: Step 2/2 : RUN false\nThe command '/bin/sh -c false' returned a non-zero code: 1"
                .to_owned()
        )
    );
}

#[tokio::test]
async fn a_build_outside_the_workspace_is_refused_before_any_call() {
    let ws = build_workspace();
    let (driver, fake, _lines) = driver([]);
    let mut spec = build_spec();
    spec.build = Some(Build {
        dockerfile: "Dockerfile".to_owned(),
        context: Some("..".to_owned()),
        args: BTreeMap::new(),
    });
    let prepared = driver.prepare(&spec, &NoProgress).await.unwrap();
    let error = driver
        .builder()
        .unwrap()
        .build(prepared, &ws.info)
        .await
        .unwrap_err();
    assert_eq!(
        (
            matches!(error, Error::EscapesWorkspace { .. }),
            fake.calls()
        ),
        (true, vec![])
    );
}

#[test]
fn the_docker_proxy_listens_on_a_socket_in_the_run_dir_and_is_dialled_on_3128() {
    let driver = DockerDriver::new(
        Arc::new(FakeContainerApi::default()),
        EngineKind::Docker,
        DockerSettings::default(),
    );
    assert_eq!(
        driver.proxy_addresses(Path::new("/run/x/r1")).unwrap(),
        ProxyAddresses {
            bind: ProxyBind::UnixSocket(PathBuf::from("/run/x/r1/net/proxy.sock")),
            advertise_host: "127.0.0.1".to_owned(),
            advertise_port: AdvertisedPort::Fixed(3128),
        }
    );
}

#[tokio::test]
async fn cleanup_of_a_built_sandbox_removes_its_image_best_effort() {
    let ws = workspace();
    let (driver, fake, lines) = driver([
        Reply::CreateContainer(Ok("c1".to_owned())),
        Reply::StartContainer(Ok(())),
        Reply::RemoveContainer(Ok(())),
        Reply::RemoveImage(Err(status(409))),
        // The run's own intermediates (none left here).
        Reply::ListImages(Ok(vec![])),
        Reply::ListImages(Ok(vec![ListedResource {
            id: "sha256:1".to_owned(),
            name: "iterion-sandbox-build:r0".to_owned(),
            labels: BTreeMap::from([
                ("iterion.io/managed".to_owned(), "true".to_owned()),
                ("iterion.io/store".to_owned(), "s1".to_owned()),
                ("iterion.io/run-id".to_owned(), "r0".to_owned()),
            ]),
        }])),
    ]);
    let run = driver
        .start(prepared(spec("iterion-sandbox-build:r1")), ws.info.clone())
        .await
        .unwrap();
    run.cleanup().await.unwrap();
    let docker = DockerDriver::new(
        Arc::new(fake.clone()),
        EngineKind::Docker,
        DockerSettings::default(),
    );
    let images = docker.list_managed_images("s1").await.unwrap();
    assert_eq!(
        (
            images
                .iter()
                .map(|i| (i.name.as_str(), i.run_id.as_str()))
                .collect::<Vec<_>>(),
            lines.all()[2..].to_vec(),
            fake.calls()[3..].to_vec()
        ),
        (
            vec![("iterion-sandbox-build:r0", "r0")],
            vec![
                (LogLevel::Info, "docker rm --force c1".to_owned()),
                (
                    LogLevel::Info,
                    "docker rmi --no-prune iterion-sandbox-build:r1".to_owned()
                ),
            ],
            vec![
                Call::RemoveImage("iterion-sandbox-build:r1".to_owned()),
                Call::ListImages(vec![format!("iterion.io/run-id={}", ws.info.run_id)]),
                Call::ListImages(vec![
                    "iterion.io/managed=true".to_owned(),
                    "iterion.io/store=s1".to_owned()
                ]),
            ]
        )
    );
}

#[tokio::test]
async fn cancelling_start_during_post_create_still_removes_the_container() {
    let ws = workspace();
    let (driver, fake, _lines) = driver([
        Reply::CreateContainer(Ok("c1".to_owned())),
        Reply::StartContainer(Ok(())),
        Reply::CreateExec(Ok("e1".to_owned())),
        Reply::StartExecHangs,
        Reply::RemoveContainer(Ok(())),
    ]);
    let mut spec = spec("img:1");
    spec.post_create = Some("sleep 3600".to_owned());
    let start = driver.start(prepared(spec), ws.info.clone());
    // The caller gives up (the run was cancelled): the start future is dropped mid-post_create.
    assert!(
        tokio::time::timeout(Duration::from_millis(50), start)
            .await
            .is_err()
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while fake.unused() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(created(&fake).last().cloned(), Some("remove c1".to_owned()));
}

/// Issue 15 item 13: the reaper removes this store's `/nix` volumes whose image is gone, keeps
/// one whose image is present or that the engine refuses (in use), and never looks at another
/// store's.
#[tokio::test]
async fn nix_volumes_are_reaped_once_their_image_is_gone() {
    let volume = |name: &str, store: &str, image: &str| ListedResource {
        id: name.to_owned(),
        name: name.to_owned(),
        labels: BTreeMap::from([
            ("iterion.io/managed".to_owned(), "true".to_owned()),
            ("iterion.io/purpose".to_owned(), "nix-store".to_owned()),
            ("iterion.io/store".to_owned(), store.to_owned()),
            ("iterion.io/image".to_owned(), image.to_owned()),
        ]),
    };
    let fake = FakeContainerApi::new([
        Reply::ListVolumes(Ok(vec![
            volume("iterion-nix-aaaaaaaaaaaa", "s1", "aaaaaaaaaaaa"),
            volume("iterion-nix-bbbbbbbbbbbb", "s1", "bbbbbbbbbbbb"),
            volume("iterion-nix-cccccccccccc", "s1", "cccccccccccc"),
            volume("iterion-nix-dddddddddddd", "s2", "dddddddddddd"),
        ])),
        Reply::InspectImage(Ok(None)),
        Reply::RemoveVolume(Ok(())),
        Reply::InspectImage(Ok(Some(image_config()))),
        Reply::InspectImage(Ok(None)),
        Reply::RemoveVolume(Err(status(409))),
    ]);
    let docker = DockerDriver::new(
        Arc::new(fake.clone()),
        EngineKind::Docker,
        DockerSettings::default(),
    );
    let removed = docker.reap_nix_volumes("s1").await.unwrap();
    assert_eq!(removed, vec!["iterion-nix-aaaaaaaaaaaa".to_owned()]);
    assert_eq!(
        fake.calls(),
        vec![
            Call::ListVolumes(vec![
                "iterion.io/managed=true".to_owned(),
                "iterion.io/store=s1".to_owned(),
                "iterion.io/purpose=nix-store".to_owned(),
            ]),
            Call::InspectImage("aaaaaaaaaaaa".to_owned()),
            Call::RemoveVolume("iterion-nix-aaaaaaaaaaaa".to_owned()),
            Call::InspectImage("bbbbbbbbbbbb".to_owned()),
            Call::InspectImage("cccccccccccc".to_owned()),
            Call::RemoveVolume("iterion-nix-cccccccccccc".to_owned()),
        ]
    );
}

/// Issue 18 item 4: the reaper's warm pool pass removes a claimed entry whose claimer is gone
/// (with its marker), an unclaimed one no live process owns when this process keeps no pool, and
/// one too old; it keeps a live owner's and a live claimer's.
#[tokio::test]
async fn the_reaper_removes_warm_entries_nobody_holds_or_waits_for() {
    let claims = tempfile::tempdir().unwrap();
    let me = crate::warm::owner_of_this_process().to_owned();
    let parts: Vec<&str> = me.split('/').collect();
    let gone = format!("{}/{}/4194304999/1", parts[0], parts[1]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let entry = |id: &str, owner: &str, made: u64| ListedResource {
        id: id.to_owned(),
        name: format!("iterion-warm-{id}"),
        labels: BTreeMap::from([
            ("iterion.io/managed".to_owned(), "true".to_owned()),
            ("iterion.io/store".to_owned(), "s1".to_owned()),
            ("iterion.io/purpose".to_owned(), "warm-pool".to_owned()),
            ("iterion.io/warm-owner".to_owned(), owner.to_owned()),
            ("iterion.io/warm-made".to_owned(), made.to_string()),
            (
                "iterion.io/warm-claims".to_owned(),
                claims.path().to_string_lossy().into_owned(),
            ),
        ]),
    };
    let marker = |id: &str| claims.path().join(format!(".iterion-warm-claim-{id}"));
    std::fs::write(marker("w4"), &me).unwrap();
    std::fs::write(marker("w5"), &gone).unwrap();
    let listed = vec![
        entry("w1", &gone, 1),
        entry("w2", &me, 1),
        entry("w3", &gone, now),
        entry("w4", &gone, now),
        entry("w5", &me, now),
    ];
    let fake = FakeContainerApi::new([
        Reply::ListContainers(Ok(listed.clone())),
        Reply::ListRunningContainers(Ok(listed)),
        Reply::RemoveContainer(Ok(())),
        Reply::RemoveContainer(Ok(())),
        Reply::RemoveContainer(Ok(())),
    ]);
    // No pool here (ITERION_SANDBOX_WARM unset): nothing waits for a claim.
    let driver = DockerDriver::new(
        Arc::new(fake.clone()),
        EngineKind::Docker,
        DockerSettings::default(),
    );
    let removed = driver.reap_warm_entries("s1").await.unwrap();
    assert_eq!(removed, vec!["w1", "w3", "w5"]);
    assert_eq!(
        (
            marker("w4").exists(),
            marker("w5").exists(),
            marker("w1").exists(),
            marker("w3").exists()
        ),
        (true, false, false, false),
        "a live claimer's marker stays; the removed entries' markers go with them"
    );

    // With a pool, an unclaimed young running entry waits for a claim; an old one still goes.
    let listed = vec![entry("w6", &gone, now), entry("w7", &gone, 1)];
    let fake = FakeContainerApi::new([
        Reply::ListContainers(Ok(listed.clone())),
        Reply::ListRunningContainers(Ok(listed)),
        Reply::RemoveContainer(Ok(())),
    ]);
    let driver = DockerDriver::new(
        Arc::new(fake.clone()),
        EngineKind::Docker,
        DockerSettings::default().warm(1),
    );
    assert_eq!(driver.reap_warm_entries("s1").await.unwrap(), vec!["w7"]);
}
