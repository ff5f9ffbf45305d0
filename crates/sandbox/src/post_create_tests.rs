use super::*;
use crate::driver::{Driver, NoProgress, RunInfo};
use crate::noop::NoopDriver;
use crate::spec::Spec;
use pretty_assertions::assert_eq;

#[derive(Default)]
struct RecordingLog(Mutex<Vec<(LogLevel, String)>>);

impl RunLog for RecordingLog {
    fn line(&self, level: LogLevel, line: &str) {
        self.0.lock().unwrap().push((level, line.to_owned()));
    }
}

impl RecordingLog {
    fn lines(&self) -> Vec<(LogLevel, String)> {
        self.0.lock().unwrap().clone()
    }
}

async fn noop_run(workspace: &std::path::Path) -> Box<dyn SandboxRun> {
    let prepared = NoopDriver
        .prepare(&Spec::default(), &NoProgress)
        .await
        .unwrap();
    NoopDriver
        .start(prepared, RunInfo::new("r", "s", workspace, "/nonexistent"))
        .await
        .unwrap()
}

fn line(level: LogLevel, text: &str) -> (LogLevel, String) {
    (level, format!("sandbox: postCreate: {text}"))
}

#[tokio::test]
async fn each_output_line_lands_in_the_run_log_at_its_level() {
    let ws = tempfile::tempdir().unwrap();
    let run = noop_run(ws.path()).await;
    let log = Arc::new(RecordingLog::default());
    run_post_create(
        run.as_ref(),
        "echo one; echo warn >&2; printf 'two\\r\\nlast'",
        log.clone(),
        Duration::from_secs(20),
    )
    .await
    .unwrap();
    let mut lines = log.lines();
    // stdout and stderr are two streams: order within each is what counts.
    lines.sort_by_key(|(level, _)| *level);
    assert_eq!(
        lines,
        vec![
            line(LogLevel::Info, "one"),
            line(LogLevel::Info, "two"),
            line(LogLevel::Info, "last"),
            line(LogLevel::Warn, "warn"),
        ]
    );
}

#[tokio::test]
async fn a_failing_snippet_is_a_typed_error_with_the_output_tail() {
    let ws = tempfile::tempdir().unwrap();
    let run = noop_run(ws.path()).await;
    let log = Arc::new(RecordingLog::default());
    let error = run_post_create(
        run.as_ref(),
        "head -c 6000 /dev/zero | tr '\\0' x; echo; echo 'npm ERR! missing' >&2; exit 3",
        log,
        Duration::from_secs(20),
    )
    .await
    .err()
    .unwrap();
    let Error::PostCreateFailed {
        driver,
        exit_code,
        tail,
    } = &error
    else {
        panic!("not PostCreateFailed: {error}");
    };
    let (err_tail, out_tail) = tail.split_once('\n').unwrap();
    assert_eq!(
        (
            driver.as_str(),
            *exit_code,
            err_tail,
            out_tail.len(),
            error.code()
        ),
        (
            "noop",
            3,
            "npm ERR! missing",
            OUTPUT_TAIL_BYTES - 1,
            "SANDBOX_SETUP_FAILED"
        )
    );
    assert!(
        error
            .to_string()
            .starts_with("noop: postCreate failed: npm ERR! missing")
    );
}

#[tokio::test]
async fn a_silent_failure_names_its_exit_code() {
    let ws = tempfile::tempdir().unwrap();
    let run = noop_run(ws.path()).await;
    let error = run_post_create(
        run.as_ref(),
        "exit 9",
        Arc::new(RecordingLog::default()),
        Duration::from_secs(20),
    )
    .await
    .err()
    .unwrap();
    assert_eq!(error.to_string(), "noop: postCreate failed: exit code 9");
}

#[tokio::test]
async fn a_snippet_over_its_budget_times_out_as_the_post_create_phase() {
    let ws = tempfile::tempdir().unwrap();
    let run = noop_run(ws.path()).await;
    let started = std::time::Instant::now();
    let error = run_post_create(
        run.as_ref(),
        "echo starting; sleep 30",
        Arc::new(RecordingLog::default()),
        Duration::from_millis(200),
    )
    .await
    .err()
    .unwrap();
    let phase = match &error {
        Error::PhaseTimeout { phase, .. } => Some(*phase),
        _ => None,
    };
    assert_eq!(
        (
            phase,
            error.code(),
            started.elapsed() < Duration::from_secs(10)
        ),
        (Some(Phase::PostCreate), "SANDBOX_SETUP_TIMEOUT", true)
    );
}
