//! A running kubernetes sandbox (SANDBOX.md §5.11): exec over the pod's websocket subresource,
//! workspace copy-in and export (tar through an exec), file and workspace refreshers, and an
//! idempotent cleanup.
//!
//! Nothing here depends on stdin EOF (§13): the v4 exec protocol cannot signal it, so every
//! command fed through stdin reads a length it is told (`head -c <n>`) rather than to the end.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use iterion_sandbox::{
    CLEANUP_TIMEOUT, DrainReason, DrainReport, EngineError, Error, ExecOpts, ExecResult, LogLevel,
    RUN_FILES_DRAIN_TIMEOUT, Result, RunFilesDrainer, RunInfo, RunLog, SandboxRun, SecretBytes,
    SecretFileMount, SecretFileRefresher, WorkspaceExporter, WorkspaceFileRefresher,
    WorkspaceHeadCapturer, unpack_screened,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::api::{ExecSession, KubeApi, KubeError, KubeObject, ObjectKind};
use crate::manifest::{PodPlan, RunnerOwner, WORKLOAD_CONTAINER, secret_files_secret};

/// The driver's name.
pub(crate) const DRIVER: &str = "kubernetes";
/// Teardown bound of `export_workspace` (SANDBOX.md §16.1).
pub(crate) const EXPORT_TIMEOUT: Duration = Duration::from_secs(300);
/// Teardown bound of `capture_workspace_head`.
pub(crate) const HEAD_CAPTURE_TIMEOUT: Duration = Duration::from_secs(30);

/// What a run shares with its drop guard and its refreshers.
pub(crate) struct RunShared {
    pub(crate) api: Arc<dyn KubeApi>,
    pub(crate) log: Arc<dyn RunLog>,
    pub(crate) pod: String,
    pub(crate) workspace_folder: String,
    /// The objects to delete at cleanup, in order (pod first: it holds the others' mounts).
    pub(crate) objects: Vec<(ObjectKind, String)>,
    pub(crate) closed: AtomicBool,
    pub(crate) apply_timeout: Duration,
    /// The ordered file-secret snapshot (re-applied whole on refresh).
    pub(crate) secrets: Mutex<Vec<SecretFileMount>>,
    pub(crate) info: RunInfo,
    pub(crate) owner: Option<RunnerOwner>,
}

pub(crate) fn engine_error(operation: impl Into<String>, source: impl Into<EngineError>) -> Error {
    Error::Engine {
        driver: DRIVER.to_owned(),
        operation: operation.into(),
        source: source.into(),
    }
}

pub(crate) fn kube_error(operation: impl Into<String>) -> impl FnOnce(KubeError) -> Error {
    let operation = operation.into();
    move |source| engine_error(operation, source)
}

impl RunShared {
    pub(crate) fn new(
        api: Arc<dyn KubeApi>,
        log: Arc<dyn RunLog>,
        plan: &PodPlan,
        secrets: Vec<SecretFileMount>,
        info: RunInfo,
        owner: Option<RunnerOwner>,
        apply_timeout: Duration,
    ) -> RunShared {
        let mut objects = vec![(ObjectKind::Pod, plan.pod_name.clone())];
        if let Some(policy) = &plan.network_policy {
            objects.push((
                ObjectKind::NetworkPolicy,
                policy.metadata.name.clone().unwrap_or_default(),
            ));
        }
        for secret in [&plan.ca, &plan.secret_files].into_iter().flatten() {
            objects.push((
                ObjectKind::Secret,
                secret.metadata.name.clone().unwrap_or_default(),
            ));
        }
        RunShared {
            api,
            log,
            pod: plan.pod_name.clone(),
            workspace_folder: plan.workspace_folder.clone(),
            objects,
            closed: AtomicBool::new(false),
            apply_timeout,
            secrets: Mutex::new(secrets),
            info,
            owner,
        }
    }

    pub(crate) fn log(&self, level: LogLevel, line: &str) {
        self.log.line(level, line);
    }

    /// Deletes every object of the run, ignoring "not found", each bounded by the apply budget
    /// and all by [`CLEANUP_TIMEOUT`]. Errors are logged at debug: a leftover carries the run's
    /// labels, and the reaper collects it. Idempotent.
    pub(crate) async fn delete_all(&self) {
        let work = async {
            for (kind, name) in &self.objects {
                self.log(
                    LogLevel::Info,
                    &format!("kubectl delete {kind} {name} --wait=false --grace-period=0"),
                );
                match tokio::time::timeout(self.apply_timeout, self.api.delete(*kind, name)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(error)) if error.is_not_found() => {}
                    Ok(Err(error)) => {
                        tracing::debug!(kind = %kind, name, %error, "kubernetes cleanup: delete failed");
                    }
                    Err(_) => {
                        tracing::debug!(kind = %kind, name, "kubernetes cleanup: delete timed out");
                    }
                }
            }
        };
        if tokio::time::timeout(CLEANUP_TIMEOUT, work).await.is_err() {
            tracing::debug!(pod = %self.pod, "kubernetes cleanup: deadline exceeded");
        }
    }

    /// Runs `argv` and pumps its streams. `stdin` (when given) is any byte source, copied as it
    /// yields (a buffer, or a pipe a producer fills: the copy-in's tar) and held open until the
    /// process exits; a process that exits without reading it all ends the feed. A `stdout` or
    /// `stderr` sink that fails ends the exec with that error (the session is dropped).
    pub(crate) async fn exec_raw(
        &self,
        argv: Vec<String>,
        stdin: Option<Box<dyn AsyncRead + Send + Unpin>>,
        keep_stdin_open: bool,
        stdout: Option<Box<dyn AsyncWrite + Send + Unpin>>,
        stderr: Option<Box<dyn AsyncWrite + Send + Unpin>>,
    ) -> Result<ExecResult> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::SandboxClosed {
                driver: DRIVER.to_owned(),
                sandbox_id: self.pod.clone(),
            });
        }
        let attach_stdin = stdin.is_some() || keep_stdin_open;
        let ExecSession {
            stdin: session_stdin,
            stdout: out,
            stderr: err,
            exit,
        } = self
            .api
            .exec(&self.pod, WORKLOAD_CONTAINER, argv, attach_stdin)
            .await
            .map_err(kube_error(format!("exec in pod {}", self.pod)))?;
        // Stdin is never closed before the process exits: on the v4 protocol a close ends the
        // whole exec (status lost), and nothing here depends on EOF (SANDBOX.md §5.11, §13):
        // whatever reads stdin is told a length. `keep_stdin_open` is therefore always honoured.
        let feed = async move {
            let (Some(mut source), Some(mut sink)) = (stdin, session_stdin) else {
                return Ok::<_, std::io::Error>(None);
            };
            tokio::io::copy(&mut source, &mut sink).await?;
            sink.flush().await?;
            Ok(Some(sink))
        };
        // A failed pump (its sink gone) ends the exec at once, and so does a failed exit (the
        // stream died): kube-rs may then leave a stream neither fed nor closed, so waiting for
        // the rest would wait forever. Dropping the session ends the exec.
        let outputs = async {
            let pumps = async {
                tokio::try_join!(
                    async {
                        pump(out, stdout)
                            .await
                            .map_err(|e| engine_error("read exec stdout", e))
                    },
                    async {
                        pump(err, stderr)
                            .await
                            .map_err(|e| engine_error("read exec stderr", e))
                    },
                )
            };
            let exit = async {
                exit.await
                    .map_err(kube_error(format!("exec in pod {}", self.pod)))
            };
            tokio::pin!(pumps, exit);
            tokio::select! {
                pumped = &mut pumps => {
                    let (out, err) = pumped?;
                    Ok::<_, Error>((out, err, exit.await?))
                }
                code = &mut exit => {
                    // A clean exit comes after kube-rs closed both streams: the pumps end.
                    let code = code?;
                    let (out, err) = pumps.await?;
                    Ok((out, err, code))
                }
            }
        };
        tokio::pin!(feed, outputs);
        // The process may exit without reading all its stdin: the feed is then abandoned (kube-rs
        // drops its end of the stdin pipe without waking a blocked writer), not awaited.
        let mut held = None;
        let mut feeding = true;
        let outcome = loop {
            tokio::select! {
                fed = &mut feed, if feeding => {
                    feeding = false;
                    match fed {
                        Ok(sink) => held = sink,
                        Err(error) => {
                            tracing::debug!(%error, "kubernetes exec: stdin not fully written");
                        }
                    }
                }
                outcome = &mut outputs => break outcome,
            }
        };
        drop(held);
        let (out, err, code) = outcome?;
        Ok(ExecResult {
            exit_code: code,
            stdout: out,
            stderr: err,
        })
    }

    /// Runs `argv`, buffered, with `stdin` bytes; non-zero exit is an error naming `operation`.
    pub(crate) async fn exec_checked(
        &self,
        operation: &str,
        argv: Vec<String>,
        stdin: Option<Vec<u8>>,
    ) -> Result<Bytes> {
        let input = stdin.map(|bytes| {
            Box::new(std::io::Cursor::new(bytes)) as Box<dyn AsyncRead + Send + Unpin>
        });
        let result = self.exec_raw(argv, input, false, None, None).await?;
        if result.exit_code != 0 {
            return Err(exit_error(operation, &result));
        }
        Ok(result.stdout.unwrap_or_default())
    }
}

/// A non-zero exit as an error naming `operation`, with the tail of stderr.
pub(crate) fn exit_error(operation: &str, result: &ExecResult) -> Error {
    let tail = result
        .stderr
        .as_ref()
        .map(|b| String::from_utf8_lossy(&b[b.len().saturating_sub(4096)..]).into_owned())
        .unwrap_or_default();
    engine_error(
        operation.to_owned(),
        format!("exit code {}: {}", result.exit_code, tail.trim()),
    )
}

async fn pump(
    mut from: Box<dyn AsyncRead + Send + Unpin>,
    to: Option<Box<dyn AsyncWrite + Send + Unpin>>,
) -> std::io::Result<Option<Bytes>> {
    match to {
        Some(mut sink) => {
            tokio::io::copy(&mut from, &mut sink).await?;
            sink.flush().await?;
            Ok(None)
        }
        None => {
            let mut buffer = Vec::new();
            from.read_to_end(&mut buffer).await?;
            Ok(Some(Bytes::from(buffer)))
        }
    }
}

/// The argv of an exec (SANDBOX.md §5.11): plain when the workdir and env are the defaults, else
/// `env K=V… sh -c 'cd "$1" && shift && exec "$@"' sh <workdir> argv…`. Invalid env pairs are
/// skipped and returned.
pub(crate) fn exec_argv(
    argv: &[String],
    env: &[(String, String)],
    workdir: Option<&str>,
    workspace_folder: &str,
) -> (Vec<String>, Vec<String>) {
    let mut skipped = Vec::new();
    let mut pairs = Vec::new();
    for (key, value) in env {
        if key.is_empty() || key.contains(['=', '\0', '\n', '\r']) || value.contains('\0') {
            skipped.push(key.clone());
        } else {
            pairs.push(format!("{key}={value}"));
        }
    }
    let workdir = workdir.filter(|w| !w.is_empty());
    if pairs.is_empty() && workdir.is_none_or(|w| w == workspace_folder) {
        return (argv.to_vec(), skipped);
    }
    let mut wrapped = vec!["env".to_owned()];
    wrapped.extend(pairs);
    wrapped.extend(
        [
            "sh",
            "-c",
            "cd \"$1\" && shift && exec \"$@\"",
            "sh",
            workdir.unwrap_or(workspace_folder),
        ]
        .map(str::to_owned),
    );
    wrapped.extend(argv.iter().cloned());
    (wrapped, skipped)
}

/// A running pod. The caller must call [`SandboxRun::cleanup`].
pub(crate) struct KubernetesRun {
    pub(crate) shared: Arc<RunShared>,
    /// The egress probe's verdict: `Some(true)` when it saw the direct connection blocked.
    pub(crate) egress_enforced: Option<bool>,
}

impl std::fmt::Debug for KubernetesRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubernetesRun")
            .field("pod", &self.shared.pod)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl SandboxRun for KubernetesRun {
    fn driver(&self) -> &str {
        DRIVER
    }

    fn egress_enforced(&self) -> Option<bool> {
        self.egress_enforced
    }

    /// Stdin is never closed before the process exits (the v4 protocol, see `exec_raw`).
    fn exec_stdin_reaches_eof(&self) -> bool {
        false
    }

    fn id(&self) -> &str {
        &self.shared.pod
    }

    async fn exec(&self, argv: &[String], opts: ExecOpts) -> Result<ExecResult> {
        if let Some(user) = &opts.user {
            tracing::debug!(
                user,
                "kubernetes exec ignores ExecOpts.user (the pod has one user)"
            );
        }
        let (argv, skipped) = exec_argv(
            argv,
            &opts.env,
            opts.workdir.as_deref(),
            &self.shared.workspace_folder,
        );
        for key in skipped {
            self.shared.log(
                LogLevel::Warn,
                &format!("sandbox: exec env {key:?} skipped (invalid pair)"),
            );
        }
        self.shared
            .exec_raw(
                argv,
                opts.stdin,
                opts.keep_stdin_open,
                opts.stdout,
                opts.stderr,
            )
            .await
    }

    async fn cleanup(&self) -> Result<()> {
        if self.shared.closed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        self.shared.delete_all().await;
        Ok(())
    }

    fn secret_file_refresher(&self) -> Option<&dyn SecretFileRefresher> {
        Some(self)
    }

    fn workspace_file_refresher(&self) -> Option<&dyn WorkspaceFileRefresher> {
        Some(self)
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
impl SecretFileRefresher for KubernetesRun {
    async fn refresh_secret_file(&self, name: &str, value: &SecretBytes) -> Result<()> {
        if value.is_empty() {
            return Err(Error::InvalidSpec {
                field: format!("secret_files.{name}"),
                reason: "a refresh with an empty value is refused".to_owned(),
            });
        }
        let secret = {
            let mut secrets =
                self.shared.secrets.lock().map_err(|_| {
                    engine_error("refresh secret", "the secret snapshot is poisoned")
                })?;
            let Some(slot) = secrets.iter_mut().find(|s| s.name == name) else {
                return Err(Error::InvalidSpec {
                    field: "secret_files".to_owned(),
                    reason: format!("no file secret named {name:?}"),
                });
            };
            slot.value = value.clone();
            secret_files_secret(
                &self.shared.pod,
                &secrets,
                &self.shared.info,
                self.shared.owner.as_ref(),
            )
        };
        let Some(secret) = secret else {
            return Ok(());
        };
        // Note: `subPath` mounts (custom paths) are not refreshed by the kubelet (SANDBOX.md §5.9).
        tokio::time::timeout(
            self.shared.apply_timeout,
            self.shared.api.apply(&KubeObject::Secret(Box::new(secret))),
        )
        .await
        .map_err(|_| engine_error("apply secret", "deadline exceeded"))?
        .map_err(kube_error("apply secret"))
    }
}

/// Whether `rel` is a clean relative path (SANDBOX.md §5.11): not empty, `.`, `..` or `../…`, no
/// absolute path, no `.`/`..`/empty component, no control character.
pub(crate) fn is_clean_relative(rel: &str) -> bool {
    !rel.is_empty()
        && !rel.starts_with('/')
        && !rel.chars().any(char::is_control)
        && rel
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
}

#[async_trait]
impl WorkspaceFileRefresher for KubernetesRun {
    async fn refresh_workspace_file(&self, rel: &str, value: &[u8]) -> Result<()> {
        if !is_clean_relative(rel) {
            return Err(Error::InvalidSpec {
                field: "workspace file".to_owned(),
                reason: format!("{rel:?} is not a clean relative path"),
            });
        }
        let target = format!("{}/{rel}", self.shared.workspace_folder);
        let script = "set -e; mkdir -p \"$(dirname \"$2\")\"; t=\"$2.iterion-tmp.$$\"; \
                      head -c \"$1\" > \"$t\"; mv -f \"$t\" \"$2\"";
        let argv = ["sh", "-c", script, "sh", &value.len().to_string(), &target]
            .map(str::to_owned)
            .to_vec();
        self.shared
            .exec_checked("write workspace file", argv, Some(value.to_vec()))
            .await
            .map(drop)
    }
}

#[async_trait]
impl WorkspaceExporter for KubernetesRun {
    /// SANDBOX.md §5.11. When the host workspace's `.git` is a gitfile (a linked worktree), the
    /// refs live in the repository's shared git dir, which the export never touches: no loose
    /// ref is deleted, and `./.git` is excluded so the host's gitfile stays whatever the pod made
    /// of its copy (SANDBOX.md §5.7 step 8, `worktree.rs`).
    async fn export_workspace(&self, dest: &Path) -> Result<()> {
        let work = async {
            let gitfile = tokio::fs::symlink_metadata(dest.join(".git"))
                .await
                .is_ok_and(|m| m.is_file());
            if !gitfile {
                remove_loose_refs(dest).await?;
            }
            let argv = export_argv(&self.shared.workspace_folder, gitfile);
            self.shared.log(
                LogLevel::Info,
                &format!(
                    "kubectl exec {} -c {WORKLOAD_CONTAINER} -- {}  # into {}",
                    self.shared.pod,
                    argv.join(" "),
                    dest.display()
                ),
            );
            self.shared.export_into(argv, dest).await
        };
        tokio::time::timeout(EXPORT_TIMEOUT, work)
            .await
            .map_err(|_| engine_error("export workspace", "deadline (5m) exceeded"))?
    }
}

/// The export's argv (SANDBOX.md §5.11): the workspace without `.git/config`, and without `.git`
/// at all when the host's `.git` is a gitfile.
pub fn export_argv(workspace_folder: &str, gitfile: bool) -> Vec<String> {
    let mut argv = vec![
        "tar".to_owned(),
        "-C".to_owned(),
        workspace_folder.to_owned(),
        "--exclude=./.git/config".to_owned(),
    ];
    if gitfile {
        argv.push("--exclude=./.git".to_owned());
    }
    argv.extend(["-cf", "-", "."].map(str::to_owned));
    argv
}

async fn remove_loose_refs(dest: &Path) -> Result<()> {
    let refs = dest.join(".git").join("refs");
    match tokio::fs::remove_dir_all(&refs).await {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(Error::Io {
            operation: "remove loose refs",
            path: refs,
            source,
        }),
    }
}

/// The drain script's exit code when the directory does not exist in the pod.
const DRAIN_ABSENT_EXIT: i64 = 4;

#[async_trait]
impl RunFilesDrainer for KubernetesRun {
    /// SANDBOX.md §5.11: `tar -C <from> -cf - .` in the pod, streamed (never held whole) through
    /// [`unpack_screened`] into `dest`. The exec and the unpacking share the 2 min bound: when it
    /// fires, the exec is dropped, the unpacker sees the stream end, and what it wrote stays.
    async fn drain_run_files(&self, from: &str, dest: &Path) -> DrainReport {
        let mut report = DrainReport::default();
        if let Err(error) = tokio::fs::create_dir_all(dest).await {
            report.fail(
                DrainReason::WriteFailed,
                format!("create {}: {error}", dest.display()),
            );
            return report;
        }
        report.stale = match tokio::fs::read_dir(dest).await {
            Ok(mut entries) => entries.next_entry().await.ok().flatten().is_some(),
            Err(_) => false,
        };
        self.shared.log(
            LogLevel::Info,
            &format!(
                "kubectl exec {} -c {WORKLOAD_CONTAINER} -- tar -C {from} -cf - .  # into {}",
                self.shared.pod,
                dest.display()
            ),
        );
        let stale = report.stale;
        let (writer, reader) = tokio::io::duplex(256 * 1024);
        let reader = tokio_util::io::SyncIoBridge::new(reader);
        let unpack_dest = dest.to_owned();
        let unpacking = tokio::task::spawn_blocking(move || {
            unpack_screened(reader, &unpack_dest, &mut report);
            report
        });
        let script =
            format!("[ -d \"$1\" ] || exit {DRAIN_ABSENT_EXIT}; exec tar -C \"$1\" -cf - .");
        let argv = ["sh", "-c", &script, "sh", from]
            .map(str::to_owned)
            .to_vec();
        let exec = tokio::time::timeout(
            RUN_FILES_DRAIN_TIMEOUT,
            self.shared
                .exec_raw(argv, None, false, Some(Box::new(writer)), None),
        )
        .await;
        // The exec (finished or dropped by the deadline) has dropped the writer: the unpacker
        // reaches the end of its stream.
        let mut report = match unpacking.await {
            Ok(report) => report,
            Err(error) => {
                let mut report = DrainReport {
                    stale,
                    ..DrainReport::default()
                };
                report.fail(DrainReason::WriteFailed, format!("unpacking: {error}"));
                report
            }
        };
        match exec {
            Err(_) => report.fail(
                DrainReason::ExecFailed,
                format!(
                    "deadline ({}) exceeded",
                    iterion_sandbox::format_duration(RUN_FILES_DRAIN_TIMEOUT)
                ),
            ),
            Ok(Err(error)) => report.fail(DrainReason::ExecFailed, error.to_string()),
            Ok(Ok(result)) if result.exit_code == DRAIN_ABSENT_EXIT => report.found = false,
            Ok(Ok(result)) if result.exit_code != 0 => {
                report.found = true;
                let stderr = result.stderr.unwrap_or_default();
                let tail = String::from_utf8_lossy(&stderr[stderr.len().saturating_sub(4096)..])
                    .trim()
                    .to_owned();
                report.fail(
                    DrainReason::ExecFailed,
                    format!("tar exited {}: {tail}", result.exit_code),
                );
            }
            Ok(Ok(_)) => report.found = true,
        }
        report
    }
}

#[async_trait]
impl WorkspaceHeadCapturer for KubernetesRun {
    async fn capture_workspace_head(&self) -> Result<Option<String>> {
        let argv = [
            "git",
            "-C",
            &self.shared.workspace_folder,
            "rev-parse",
            "HEAD",
        ]
        .map(str::to_owned)
        .to_vec();
        let result = tokio::time::timeout(
            HEAD_CAPTURE_TIMEOUT,
            self.shared.exec_raw(argv, None, false, None, None),
        )
        .await
        .map_err(|_| engine_error("capture workspace HEAD", "deadline (30s) exceeded"))??;
        if result.exit_code != 0 {
            return Ok(None);
        }
        let head = result
            .stdout
            .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
            .filter(|h| !h.is_empty());
        Ok(head)
    }
}

/// Deletes the run's objects when `start` is dropped (the caller was cancelled) before it
/// returned a run.
pub(crate) struct CleanupOnDrop {
    pub(crate) shared: Option<Arc<RunShared>>,
}

impl Drop for CleanupOnDrop {
    fn drop(&mut self) {
        let Some(shared) = self.shared.take() else {
            return;
        };
        if shared.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(async move { shared.delete_all().await });
            }
            Err(_) => tracing::debug!(
                pod = %shared.pod,
                "kubernetes: start dropped outside a runtime; the reaper will collect the pod"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn exec_argv_is_plain_unless_workdir_or_env_differ() {
        let argv = s(&["git", "status"]);
        let env = vec![
            ("A".to_owned(), "1".to_owned()),
            ("B=C".to_owned(), "x".to_owned()),
        ];
        assert_eq!(
            [
                exec_argv(&argv, &[], None, "/ws"),
                exec_argv(&argv, &[], Some("/ws"), "/ws"),
                exec_argv(&argv, &env, None, "/ws"),
                exec_argv(&argv, &[], Some("/ws/sub"), "/ws"),
            ],
            [
                (argv.clone(), vec![]),
                (argv.clone(), vec![]),
                (
                    s(&[
                        "env",
                        "A=1",
                        "sh",
                        "-c",
                        "cd \"$1\" && shift && exec \"$@\"",
                        "sh",
                        "/ws",
                        "git",
                        "status"
                    ]),
                    vec!["B=C".to_owned()]
                ),
                (
                    s(&[
                        "env",
                        "sh",
                        "-c",
                        "cd \"$1\" && shift && exec \"$@\"",
                        "sh",
                        "/ws/sub",
                        "git",
                        "status"
                    ]),
                    vec![]
                ),
            ]
        );
    }

    #[test]
    fn only_clean_relative_paths_may_be_refreshed() {
        let got: Vec<(&str, bool)> = [
            "a", "a/b.txt", "", ".", "..", "../x", "a/../b", "/abs", "a//b", "a\nb",
        ]
        .iter()
        .map(|p| (*p, is_clean_relative(p)))
        .collect();
        assert_eq!(
            got,
            vec![
                ("a", true),
                ("a/b.txt", true),
                ("", false),
                (".", false),
                ("..", false),
                ("../x", false),
                ("a/../b", false),
                ("/abs", false),
                ("a//b", false),
                ("a\nb", false),
            ]
        );
    }
}
