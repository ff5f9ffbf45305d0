//! What the engine reads back out of a sandbox through an exec: every exec's output it did not
//! stream somewhere itself (a setup `mkdir`, a probe, a seeding `cp`), and a paused delegate
//! CLI's session files (kept in the checkpoint, written back on resume). Every byte of it is the
//! sandbox's to choose — a file's size, how many there are, their names, and (with a hostile
//! image) what `sh`, `mkdir`, `true`, `head` or `cat` print. This file owns the policy:
//!
//! - a started sandbox is handed to the engine as a [`BoundedRun`]: an exec whose caller gives
//!   no sink of its own has its stdout kept to [`DEFAULT_STDOUT_MAX`] and its stderr to
//!   [`DEFAULT_STDERR_MAX`] (the rest counted and dropped), where a driver (or the exec agent's
//!   client) would otherwise buffer all of it in the engine's memory;
//! - every such exec's output is captured into a [`BoundedSink`] on the engine's side, never
//!   buffered whole by the driver ([`exec_capped`]); past the bound it is counted and dropped, and
//!   the read is refused; each exec has [`READ_TIMEOUT`];
//! - a session's files are at most [`SESSION_MAX_FILES`], [`SESSION_MAX_BYTES`] together; each
//!   is read with `head -c` (a well-behaved image stops there, the sink stops a hostile one);
//! - a name is a plain relative path of the shape the CLI uses (`projects/<dir>/<id>.jsonl`,
//!   `sessions/Y/M/D/rollout-…<id>.jsonl`; [`session_file_name`]), with no control character (a
//!   newline in a directory name would split one listed name into two), checked when it is read
//!   and again when a checkpoint's files are written back; a symlink is not listed.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use iterion_agent::shell::BoundedSink;
use iterion_sandbox::{ExecOpts, ExecResult, SandboxRun};

/// The most stdout of an exec without a sink of its own the engine keeps.
pub(crate) const DEFAULT_STDOUT_MAX: usize = 16 * 1024 * 1024;
/// The most stderr of an exec without a sink of its own the engine keeps.
pub(crate) const DEFAULT_STDERR_MAX: usize = 1024 * 1024;

/// A started sandbox as the engine uses it: every exec's unsunk output bounded (module doc).
pub(crate) struct BoundedRun(pub(crate) Arc<dyn SandboxRun>);

/// `run`, its execs' unsunk output bounded.
pub(crate) fn bounded(run: Arc<dyn SandboxRun>) -> Arc<dyn SandboxRun> {
    Arc::new(BoundedRun(run))
}

#[async_trait]
impl SandboxRun for BoundedRun {
    fn driver(&self) -> &str {
        self.0.driver()
    }
    fn id(&self) -> &str {
        self.0.id()
    }
    fn egress_enforced(&self) -> Option<bool> {
        self.0.egress_enforced()
    }
    fn exec_spawns_directly(&self) -> bool {
        self.0.exec_spawns_directly()
    }
    fn exec_stdin_reaches_eof(&self) -> bool {
        self.0.exec_stdin_reaches_eof()
    }
    fn take_attached_agent(&self) -> Option<iterion_sandbox::exec_agent::AttachedAgent> {
        self.0.take_attached_agent()
    }
    fn only_user(&self) -> Option<String> {
        self.0.only_user()
    }
    async fn exec(
        &self,
        argv: &[String],
        mut opts: ExecOpts,
    ) -> iterion_sandbox::Result<ExecResult> {
        let out = opts
            .stdout
            .is_none()
            .then(|| BoundedSink::new(DEFAULT_STDOUT_MAX));
        let err = opts
            .stderr
            .is_none()
            .then(|| BoundedSink::new(DEFAULT_STDERR_MAX));
        if let Some(sink) = &out {
            opts.stdout = Some(Box::new(sink.clone()));
        }
        if let Some(sink) = &err {
            opts.stderr = Some(Box::new(sink.clone()));
        }
        let mut result = self.0.exec(argv, opts).await?;
        if let Some(sink) = out {
            result.stdout = Some(sink.kept().0.into());
        }
        if let Some(sink) = err {
            result.stderr = Some(sink.kept().0.into());
        }
        Ok(result)
    }
    async fn cleanup(&self) -> iterion_sandbox::Result<()> {
        self.0.cleanup().await
    }
    fn secret_file_refresher(&self) -> Option<&dyn iterion_sandbox::SecretFileRefresher> {
        self.0.secret_file_refresher()
    }
    fn workspace_file_refresher(&self) -> Option<&dyn iterion_sandbox::WorkspaceFileRefresher> {
        self.0.workspace_file_refresher()
    }
    fn workspace_exporter(&self) -> Option<&dyn iterion_sandbox::WorkspaceExporter> {
        self.0.workspace_exporter()
    }
    fn workspace_head_capturer(&self) -> Option<&dyn iterion_sandbox::WorkspaceHeadCapturer> {
        self.0.workspace_head_capturer()
    }
    fn run_files_drainer(&self) -> Option<&dyn iterion_sandbox::RunFilesDrainer> {
        self.0.run_files_drainer()
    }
}

/// The most a paused session's files may hold, all together.
pub(crate) const SESSION_MAX_BYTES: usize = 16 * 1024 * 1024;
/// The most files a paused session may keep.
pub(crate) const SESSION_MAX_FILES: usize = 64;
/// The longest listing of a session's files read back (names, a newline each).
const LISTING_MAX_BYTES: usize = 64 * 1024;
/// How long one read-back exec may take.
pub(crate) const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `argv` in `run` with its stdout captured up to `max` bytes (stderr up to 4 KiB, dropped).
/// `Ok((exit code, stdout))`; `Err` when the exec failed, timed out or printed more than `max`.
pub(crate) async fn exec_capped(
    run: &dyn SandboxRun,
    argv: &[String],
    max: usize,
) -> Result<(i64, Vec<u8>), String> {
    let stdout = BoundedSink::new(max);
    let opts = ExecOpts {
        stdout: Some(Box::new(stdout.clone())),
        stderr: Some(Box::new(BoundedSink::new(4 * 1024))),
        ..ExecOpts::default()
    };
    let result = tokio::time::timeout(READ_TIMEOUT, run.exec(argv, opts))
        .await
        .map_err(|_| format!("it took over {} s", READ_TIMEOUT.as_secs()))?
        .map_err(|e| e.to_string())?;
    let (bytes, dropped) = stdout.kept();
    if dropped > 0 {
        return Err(format!("it is over {max} bytes"));
    }
    Ok((result.exit_code, bytes))
}

/// Whether `name` may be one of session `session`'s files: a plain relative path
/// (`projects/<dir>/<session>.jsonl` or `sessions/<y>/<m>/<d>/rollout-<…><session>.jsonl`), no
/// `.`/`..`, no control character, at most 1 KiB.
pub(crate) fn session_file_name(name: &str, session: &str) -> bool {
    let parts: Vec<&str> = name.split('/').collect();
    let plain = name.len() <= 1024
        && !name.chars().any(char::is_control)
        && parts
            .iter()
            .all(|p| !p.is_empty() && *p != "." && *p != "..");
    let file = format!("{session}.jsonl");
    plain
        && match parts.as_slice() {
            ["projects", _, last] => *last == file,
            ["sessions", _, _, _, last] => last.starts_with("rollout-") && last.ends_with(&file),
            _ => false,
        }
}

/// The files of CLI session `session` under `config_dir` in `run` (names relative to it, their
/// text), within the bounds above. `session` is one word (the caller checked it).
pub(crate) async fn session_files(
    run: &dyn SandboxRun,
    config_dir: &str,
    session: &str,
) -> Result<Vec<(String, String)>, String> {
    // claude: projects/<cwd>/<id>.jsonl; codex: sessions/Y/M/D/rollout-<time>-<id>.jsonl.
    let list = [
        "sh".to_owned(),
        "-c".to_owned(),
        "cd \"$1\" 2>/dev/null || exit 0; for f in projects/*/\"$2\".jsonl sessions/*/*/*/rollout-*\"$2\".jsonl; do [ -f \"$f\" ] && [ ! -L \"$f\" ] && printf '%s\\n' \"$f\"; done; exit 0".to_owned(),
        "sh".to_owned(),
        config_dir.to_owned(),
        session.to_owned(),
    ];
    let (_, listed) = exec_capped(run, &list, LISTING_MAX_BYTES)
        .await
        .map_err(|e| format!("the session's listing could not be read: {e}"))?;
    let listed = String::from_utf8_lossy(&listed).into_owned();
    let names: Vec<&str> = listed.lines().filter(|n| !n.is_empty()).collect();
    if names.len() > SESSION_MAX_FILES {
        return Err(format!(
            "the session has over {SESSION_MAX_FILES} files ({})",
            names.len()
        ));
    }
    let mut files = Vec::new();
    let mut left = SESSION_MAX_BYTES;
    for name in names {
        if !session_file_name(name, session) {
            return Err(format!(
                "the session file {:?} is not a plain name of its session",
                iterion_agent::text::truncate_bytes(name, 200)
            ));
        }
        let head = [
            "head".to_owned(),
            "-c".to_owned(),
            (left + 1).to_string(),
            format!("{config_dir}/{name}"),
        ];
        let (code, bytes) = exec_capped(run, &head, left).await.map_err(|e| {
            format!(
                "the session is over {} MiB together, or {name} could not be read: {e}",
                SESSION_MAX_BYTES / (1024 * 1024)
            )
        })?;
        if code != 0 {
            return Err(format!("{name} could not be read (exit {code})"));
        }
        left -= bytes.len();
        files.push((
            name.to_owned(),
            String::from_utf8_lossy(&bytes).into_owned(),
        ));
    }
    Ok(files)
}

#[cfg(test)]
#[path = "readback_tests.rs"]
mod tests;
