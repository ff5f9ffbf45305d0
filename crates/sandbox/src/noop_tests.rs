use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};
use std::time::Duration;

use super::*;
use crate::driver::NoProgress;
use crate::mode::Mode;
use crate::spec::{SecretBytes, SecretFileMount};
use pretty_assertions::assert_eq;

/// An `AsyncWrite` whose bytes the test reads after the exec; counts writes.
#[derive(Clone, Default)]
struct SharedSink(Arc<Mutex<(Vec<u8>, usize)>>);

impl SharedSink {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap().0).into_owned()
    }
    fn len(&self) -> usize {
        self.0.lock().unwrap().0.len()
    }
}

impl AsyncWrite for SharedSink {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let mut inner = self.0.lock().unwrap();
        inner.0.extend_from_slice(buf);
        inner.1 += 1;
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

fn sh(script: &str) -> Vec<String> {
    argv(&["sh", "-c", script])
}

async fn started(workspace: &std::path::Path) -> Box<dyn SandboxRun> {
    let prepared = NoopDriver
        .prepare(&Spec::default(), &NoProgress)
        .await
        .unwrap();
    NoopDriver
        .start(
            prepared,
            RunInfo::new("run-1", "store-1", workspace, "/nonexistent"),
        )
        .await
        .unwrap()
}

fn with_secret(mode: Mode) -> Spec {
    Spec {
        mode,
        image: Some("alpine".to_owned()),
        secret_files: vec![SecretFileMount {
            name: "token".to_owned(),
            mount_path: "/run/iterion/secrets/token".to_owned(),
            env: None,
            value: SecretBytes::from("t0ken"),
        }],
        ..Spec::default()
    }
}

#[tokio::test]
async fn prepare_validates_and_records_why_an_active_mode_is_not_isolated() {
    let inline = Spec {
        mode: Mode::Inline,
        image: Some("alpine".to_owned()),
        ..Spec::default()
    };
    let prepared = NoopDriver.prepare(&inline, &NoProgress).await.unwrap();
    let inactive = NoopDriver
        .prepare(&Spec::default(), &NoProgress)
        .await
        .unwrap();
    let invalid = NoopDriver
        .prepare(
            &Spec {
                mode: Mode::Inline,
                ..Spec::default()
            },
            &NoProgress,
        )
        .await
        .map_err(|e| e.to_string());
    assert_eq!(
        (
            prepared.skipped_reason.as_deref(),
            prepared.driver.as_str(),
            inactive.skipped_reason,
            invalid.err()
        ),
        (
            Some("noop driver does not implement mode=inline; falling back to host execution"),
            "noop",
            None,
            Some("sandbox: invalid spec: image: mode inline needs image or build".to_owned())
        )
    );
    assert_eq!(
        (NoopDriver.name(), NoopDriver.capabilities()),
        ("noop", Capabilities::NONE)
    );
}

#[tokio::test]
async fn file_secrets_are_a_hard_error_on_noop() {
    let error = NoopDriver
        .prepare(&with_secret(Mode::Inline), &NoProgress)
        .await
        .err()
        .unwrap();
    // Also when a prepared spec gained secrets after Prepare.
    let mut prepared = NoopDriver
        .prepare(&Spec::default(), &NoProgress)
        .await
        .unwrap();
    prepared.spec.secret_files = with_secret(Mode::Inline).secret_files;
    let at_start = NoopDriver
        .start(prepared, RunInfo::new("r", "s", "/", "/"))
        .await
        .err()
        .unwrap();
    let message = "file secrets require a real sandbox driver; noop cannot mount secret files";
    assert_eq!(
        (error.code(), error.to_string(), at_start.to_string()),
        (
            "SANDBOX_SETUP_FAILED",
            message.to_owned(),
            message.to_owned()
        )
    );
}

#[tokio::test]
async fn start_refuses_a_spec_prepared_by_another_driver() {
    let foreign = PreparedSpec::new("docker", Spec::default());
    let error = NoopDriver
        .start(foreign, RunInfo::new("r", "s", "/", "/"))
        .await
        .err()
        .unwrap();
    assert_eq!(
        error.to_string(),
        "sandbox: noop: prepared spec comes from driver \"docker\""
    );
}

#[tokio::test]
async fn a_non_zero_exit_is_a_result_not_an_error() {
    let ws = tempfile::tempdir().unwrap();
    let run = started(ws.path()).await;
    let result = run
        .exec(&sh("echo out; echo err >&2; exit 7"), ExecOpts::default())
        .await
        .unwrap();
    assert_eq!(
        result,
        ExecResult {
            exit_code: 7,
            stdout: Some(Bytes::from_static(b"out\n")),
            stderr: Some(Bytes::from_static(b"err\n")),
        }
    );
    assert_eq!((run.driver(), run.id()), ("noop", "run-1"));
}

#[tokio::test]
async fn exec_runs_in_the_workspace_unless_told_otherwise_with_the_env_appended() {
    let ws = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let run = started(ws.path()).await;
    let script =
        sh(r#"printf '%s|%s|%s|%s' "$PWD" "$SANDBOX_T_A" "${SANDBOX_T_B-unset}" "${HOME:+home}""#);
    let default_dir = run
        .exec(
            &script,
            ExecOpts {
                env: vec![
                    ("SANDBOX_T_A".to_owned(), "1".to_owned()),
                    ("SANDBOX_T_B".to_owned(), String::new()),
                ],
                ..ExecOpts::default()
            },
        )
        .await
        .unwrap();
    let elsewhere = run
        .exec(
            &script,
            ExecOpts {
                workdir: Some(other.path().to_string_lossy().into_owned()),
                ..ExecOpts::default()
            },
        )
        .await
        .unwrap();
    let text = |r: &ExecResult| String::from_utf8_lossy(r.stdout.as_deref().unwrap()).into_owned();
    let host_home = if std::env::var_os("HOME").is_some() {
        "home"
    } else {
        ""
    };
    assert_eq!(
        (text(&default_dir), text(&elsewhere)),
        (
            format!("{}|1||{host_home}", ws.path().display()),
            format!("{}||unset|{host_home}", other.path().display())
        )
    );
}

#[tokio::test]
async fn stdin_is_passed_through_and_closed() {
    let ws = tempfile::tempdir().unwrap();
    let run = started(ws.path()).await;
    let result = run
        .exec(
            &argv(&["cat"]),
            ExecOpts {
                stdin: Some(Box::new(std::io::Cursor::new(b"hello stdin".to_vec()))),
                ..ExecOpts::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        (result.exit_code, result.stdout),
        (0, Some(Bytes::from_static(b"hello stdin")))
    );
}

#[tokio::test]
async fn output_streams_to_the_callers_writers_without_being_buffered() {
    let ws = tempfile::tempdir().unwrap();
    let run = started(ws.path()).await;
    let (out, err) = (SharedSink::default(), SharedSink::default());
    let result = run
        .exec(
            &sh("head -c 5000000 /dev/zero; echo oops >&2"),
            ExecOpts {
                stdout: Some(Box::new(out.clone())),
                stderr: Some(Box::new(err.clone())),
                ..ExecOpts::default()
            },
        )
        .await
        .unwrap();
    let writes = out.0.lock().unwrap().1;
    assert_eq!(
        (result, out.len(), writes > 1, err.text()),
        (
            ExecResult {
                exit_code: 0,
                stdout: None,
                stderr: None
            },
            5_000_000,
            true,
            "oops\n".to_owned()
        )
    );
}

#[tokio::test]
async fn a_process_killed_by_a_signal_reports_128_plus_the_signal() {
    let ws = tempfile::tempdir().unwrap();
    let run = started(ws.path()).await;
    let result = run
        .exec(&sh("kill -9 $$"), ExecOpts::default())
        .await
        .unwrap();
    assert_eq!(result.exit_code, 137);
}

#[tokio::test]
async fn bad_argv_and_missing_programs_are_typed_errors() {
    let ws = tempfile::tempdir().unwrap();
    let run = started(ws.path()).await;
    let empty = run.exec(&[], ExecOpts::default()).await.err().unwrap();
    let missing = run
        .exec(
            &argv(&["/nonexistent/iterion-test-binary"]),
            ExecOpts::default(),
        )
        .await
        .err()
        .unwrap();
    assert_eq!(
        (empty.to_string(), missing.code()),
        (
            "sandbox: argv \"\" refused: empty".to_owned(),
            "SANDBOX_SETUP_FAILED"
        )
    );
    assert!(
        missing
            .to_string()
            .starts_with("sandbox: spawn /nonexistent/iterion-test-binary: "),
        "{missing}"
    );
}

#[tokio::test]
async fn cleanup_is_idempotent_and_closes_the_sandbox() {
    let ws = tempfile::tempdir().unwrap();
    let run = started(ws.path()).await;
    run.cleanup().await.unwrap();
    run.cleanup().await.unwrap();
    let error = run
        .exec(&argv(&["true"]), ExecOpts::default())
        .await
        .err()
        .unwrap();
    assert_eq!(
        error.to_string(),
        "sandbox: noop sandbox run-1 is cleaned up"
    );
}

#[tokio::test]
async fn the_noop_constructor_always_succeeds() {
    let driver = NoopConstructor.construct().await.unwrap();
    assert_eq!(driver.name(), "noop");
}

/// The pids of live (not zombie) processes whose argv is `sleep <token>`.
fn sleepers(token: &str) -> Vec<i32> {
    let want = format!("sleep\0{token}\0").into_bytes();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want)
                && std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                    s.rsplit_once(')')
                        .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
                })
        })
        .collect()
}

/// Waits up to `within` for `check` to hold.
async fn eventually(within: Duration, check: impl Fn() -> bool) -> bool {
    let deadline = std::time::Instant::now() + within;
    while std::time::Instant::now() < deadline {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    check()
}

/// A unique `sleep` argument per test process, so parallel tests never see each other's.
fn token(n: u32) -> String {
    format!("{}{n:02}", 100_000 + std::process::id() % 100_000)
}

/// A script leaving every kind of process behind: a background job, a grandchild in a subshell,
/// a `nohup`ed one, one that left the process group with `setsid`, then the foreground sleep.
fn leaver(tokens: &[String; 5]) -> Vec<String> {
    let [bg, sub, nohup, setsid, fg] = tokens;
    sh(&format!(
        "sleep {bg} & (sleep {sub} &); nohup sleep {nohup} >/dev/null 2>&1 & setsid sleep {setsid} & sleep {fg}"
    ))
}

/// Issue 15 item 17: a cancelled (or timed-out) host exec leaves no process behind — its
/// background jobs, grandchildren and a `setsid` escapee included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_exec_leaves_no_process_of_its_own_behind() {
    let ws = tempfile::tempdir().unwrap();
    let run = started(ws.path()).await;
    let tokens: [String; 5] = std::array::from_fn(|i| token(10 + i as u32));
    let script = leaver(&tokens);
    let exec = run.exec(&script, ExecOpts::default());
    let all_up = async {
        assert!(
            eventually(Duration::from_secs(10), || tokens
                .iter()
                .all(|t| !sleepers(t).is_empty()))
            .await,
            "every sleeper started"
        );
    };
    tokio::select! {
        _ = exec => panic!("the exec ended on its own"),
        () = all_up => {}
    }
    // The exec future is dropped here: a cancel, or `max_duration`'s timeout.
    let left = || tokens.iter().flat_map(|t| sleepers(t)).collect::<Vec<_>>();
    assert!(
        eventually(Duration::from_secs(5), || left().is_empty()).await,
        "still alive after the cancel: {:?}",
        left()
    );
}

/// Issue 15 item 17: what an exec that ended left running (a background job, a `setsid`ed
/// daemon) dies when the run ends — dropped (a cancelled run) or cleaned up — and a process that
/// ignores SIGTERM is SIGKILLed after the grace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_jobs_of_finished_execs_die_with_the_run() {
    for ending in ["drop", "cleanup"] {
        let ws = tempfile::tempdir().unwrap();
        let run = started(ws.path()).await;
        let base = if ending == "drop" { 20 } else { 30 };
        let tokens: [String; 4] = std::array::from_fn(|i| token(base + i as u32));
        let [bg, setsid, stubborn, nohup] = &tokens;
        let result = tokio::time::timeout(Duration::from_secs(20), run
            .exec(
                &sh(&format!(
                    "exec >/dev/null 2>&1; sleep {bg} & setsid sleep {setsid} & (trap '' TERM; exec sleep {stubborn}) & nohup sleep {nohup} & exit 0"
                )),
                ExecOpts::default(),
            ))
            .await
            .expect("the exec ends")
            .unwrap();
        assert_eq!(result.exit_code, 0);
        assert!(
            eventually(Duration::from_secs(10), || tokens
                .iter()
                .all(|t| !sleepers(t).is_empty()))
            .await,
            "{ending}: every sleeper started and outlived its exec"
        );
        match ending {
            "drop" => drop(run),
            _ => run.cleanup().await.unwrap(),
        }
        let left = || tokens.iter().flat_map(|t| sleepers(t)).collect::<Vec<_>>();
        assert!(
            eventually(Duration::from_secs(5), || left().is_empty()).await,
            "{ending}: still alive after the run ended: {:?}",
            left()
        );
    }
}
