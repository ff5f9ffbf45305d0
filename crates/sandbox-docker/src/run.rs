//! A started docker/podman sandbox: exec into it (SANDBOX.md §4.7), clean it up (§4.8).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::StreamExt;
use iterion_sandbox::{
    ArgRule, CLEANUP_TIMEOUT, Error, ExecOpts, ExecOutput, ExecResult, LogLevel, Result,
    SandboxRun, SecretBytes, SecretFileRefresher,
};
use tokio::io::{AsyncWrite, AsyncWriteExt};

use iterion_sandbox::exec_agent::AttachedAgent;

use crate::api::{ApiError, ApiStream, ExecAttachment, ExecChunk};
use crate::plan::{ExecInputs, exec_plan};
use crate::render::{render_exec, render_rm, render_rmi};
use crate::secrets::{SecretPlan, refresh_secret};
use crate::shared::{REMOVE_TIMEOUT, Shared};

/// How long to wait, in all, for the engine to report an exec's exit code once its output has
/// ended (engines can lag a few milliseconds behind the stream's end).
const EXIT_CODE_WAIT: Duration = Duration::from_secs(3);

/// Force-removes `id`; already gone is a success. A removal already in progress (the
/// `AutoRemove` race after a kill from outside) is asked again until the container is gone.
/// Each ask is bounded by [`REMOVE_TIMEOUT`].
pub(crate) async fn remove_container(shared: &Shared, id: &str) -> Result<()> {
    shared.log(LogLevel::Info, &render_rm(shared.engine, id));
    let mut conflicts = 0;
    loop {
        let outcome = tokio::time::timeout(REMOVE_TIMEOUT, shared.api.remove_container(id))
            .await
            .unwrap_or_else(|_| {
                Err(ApiError::Transport {
                    message: format!("no answer within {REMOVE_TIMEOUT:?}"),
                })
            });
        match outcome {
            Ok(()) | Err(ApiError::NotFound { .. }) => return Ok(()),
            // 409: the engine is busy with the container (a removal already in progress, or a
            // kill from outside still being processed). Asked again until it is gone, so a
            // container killed from outside is not left behind; a removal someone else finishes
            // answers 404.
            Err(ApiError::Conflict { .. }) if conflicts < REMOVE_CONFLICT_RETRIES => {
                conflicts += 1;
                tokio::time::sleep(REMOVE_CONFLICT_PAUSE * conflicts).await;
            }
            Err(error) => return Err(shared.engine_error(format!("remove container {id}"))(error)),
        }
    }
}

/// How many times a removal answered 409 is asked again, and the pause that grows between them
/// (0.2 s, 0.4 s, … : 3 s in all).
const REMOVE_CONFLICT_RETRIES: u32 = 5;
const REMOVE_CONFLICT_PAUSE: Duration = Duration::from_millis(200);

/// Removes the container `start` created (or the warm pool entry it claimed, with the entry's
/// leftover slots) if `start` does not finish: on its own error path the driver takes both back
/// ([`RemoveOnDrop::take`]) and removes them itself; if the caller drops the `start` future
/// (cancellation), `Drop` spawns the removal on the runtime.
pub(crate) struct RemoveOnDrop {
    shared: Arc<Shared>,
    id: Option<String>,
    slots: Vec<PathBuf>,
}

impl RemoveOnDrop {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        RemoveOnDrop {
            shared,
            id: None,
            slots: Vec::new(),
        }
    }

    pub(crate) fn arm(&mut self, id: &str) {
        self.id = Some(id.to_owned());
    }

    /// Arms for a claimed pool entry: its container and the slots the run did not take over.
    pub(crate) fn arm_claimed(&mut self, id: &str, slots: &[PathBuf]) {
        self.id = Some(id.to_owned());
        self.slots = slots.to_vec();
    }

    pub(crate) fn disarm(&mut self) {
        self.id = None;
        self.slots.clear();
    }

    /// The container to remove and the slots to remove with it.
    pub(crate) fn take(&mut self) -> Option<(String, Vec<PathBuf>)> {
        let slots = std::mem::take(&mut self.slots);
        self.id.take().map(|id| (id, slots))
    }
}

/// Removes `id`, then the pool slots that went with it (only [`crate::warm::SLOT_PREFIX`]
/// paths are touched; the reaper would find them too, but only after this process is gone).
pub(crate) async fn remove_with_slots(
    shared: &Shared,
    id: &str,
    slots: Vec<PathBuf>,
) -> Result<()> {
    let removed = remove_container(shared, id).await;
    if !slots.is_empty() {
        let _ = tokio::task::spawn_blocking(move || {
            crate::warm::remove_slots(slots.iter().map(PathBuf::as_path));
        })
        .await;
    }
    removed
}

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let Some((id, slots)) = self.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                let shared = Arc::clone(&self.shared);
                handle.spawn(async move {
                    let removed = tokio::time::timeout(
                        CLEANUP_TIMEOUT,
                        remove_with_slots(&shared, &id, slots),
                    )
                    .await;
                    if !matches!(removed, Ok(Ok(()))) {
                        tracing::warn!(
                            "sandbox: could not remove container {id} after a cancelled start; the reaper will"
                        );
                    }
                });
            }
            Err(_) => {
                crate::warm::remove_slots(slots.iter().map(PathBuf::as_path));
                tracing::warn!(
                    "sandbox: no runtime to remove container {id} after a cancelled start; the reaper will"
                );
            }
        }
    }
}

/// A running container.
pub(crate) struct DockerRun {
    shared: Arc<Shared>,
    id: String,
    workspace: String,
    spec_user: Option<String>,
    built_image: Option<String>,
    run_dir: PathBuf,
    run_id: String,
    secrets: Arc<SecretPlan>,
    base_env: Vec<(String, String)>,
    warm_leftovers: Vec<PathBuf>,
    claimed: bool,
    attached: std::sync::Mutex<Option<AttachedAgent>>,
    closed: AtomicBool,
    cleaned: tokio::sync::Mutex<bool>,
}

/// What a [`DockerRun`] is made of, besides the driver it shares.
pub(crate) struct RunParts {
    pub(crate) id: String,
    pub(crate) workspace: String,
    pub(crate) spec_user: Option<String>,
    pub(crate) built_image: Option<String>,
    pub(crate) run_dir: PathBuf,
    pub(crate) run_id: String,
    pub(crate) secrets: SecretPlan,
    /// The container env a warm pool entry was created without: put in front of every exec's
    /// own (issue 18 item 4). Empty for a cold container, whose env was set at create.
    pub(crate) base_env: Vec<(String, String)>,
    /// A claimed pool entry's slots that were not renamed into the run's dirs, removed at
    /// cleanup.
    pub(crate) warm_leftovers: Vec<PathBuf>,
    /// Whether the container is a claimed pool entry (its removal may be handed to a filler).
    pub(crate) claimed: bool,
    /// The exec agent running as the container's command, greeted, until the engine takes it.
    pub(crate) attached: Option<AttachedAgent>,
}

impl DockerRun {
    pub(crate) fn new(shared: Arc<Shared>, parts: RunParts) -> Self {
        let RunParts {
            id,
            workspace,
            spec_user,
            built_image,
            run_dir,
            run_id,
            secrets,
            base_env,
            warm_leftovers,
            claimed,
            attached,
        } = parts;
        DockerRun {
            shared,
            id,
            workspace,
            spec_user,
            built_image,
            run_dir,
            run_id,
            secrets: Arc::new(secrets),
            base_env,
            warm_leftovers,
            claimed,
            attached: std::sync::Mutex::new(attached),
            closed: AtomicBool::new(false),
            cleaned: tokio::sync::Mutex::new(false),
        }
    }

    /// This run, with its execs logged at `level` (post_create is an operation the run log
    /// keeps; node execs are debug detail).
    pub(crate) fn logged_at(&self, level: LogLevel) -> LoggedAt<'_> {
        LoggedAt { run: self, level }
    }

    async fn exec_at(
        &self,
        argv: &[String],
        opts: ExecOpts,
        level: LogLevel,
    ) -> Result<ExecResult> {
        let shared = &self.shared;
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::SandboxClosed {
                driver: shared.engine.as_str().to_owned(),
                sandbox_id: self.id.clone(),
            });
        }
        if argv.is_empty() {
            return Err(Error::InvalidArgument {
                label: "argv".to_owned(),
                value: String::new(),
                rule: ArgRule::Empty,
            });
        }
        let ExecOpts {
            env,
            workdir,
            stdin,
            stdout,
            stderr,
            keep_stdin_open,
            user,
        } = opts;
        let env = with_base_env(&self.base_env, env);
        let plan = exec_plan(&ExecInputs {
            argv,
            env: &env,
            workdir: workdir.as_deref(),
            user: user.as_deref(),
            workspace_folder: &self.workspace,
            spec_user: self.spec_user.as_deref(),
            has_stdin: stdin.is_some(),
            keep_stdin_open,
        });
        for key in &plan.skipped_env {
            shared.log(
                LogLevel::Warn,
                &format!(
                    "sandbox: exec env \"{}\" skipped: a key may not be empty or hold =, NUL, CR or LF, nor a value NUL, CR or LF",
                    iterion_vocab::escape_controls(key)
                ),
            );
        }
        shared.log(level, &render_exec(shared.engine, &self.id, &plan.request));
        let attach_stdin = plan.request.attach_stdin;
        let exec_id = shared
            .api
            .create_exec(&self.id, plan.request)
            .await
            .map_err(shared.engine_error(format!("create exec in {}", self.id)))?;
        let ExecAttachment { output, mut input } = shared
            .api
            .start_exec(&exec_id)
            .await
            .map_err(shared.engine_error(format!("start exec {exec_id}")))?;

        let script = plan.stdin_script;
        let feed = async move {
            let written = match (script, stdin) {
                (Some(script), _) => input.write_all(&script).await,
                (None, Some(mut reader)) => {
                    tokio::io::copy(&mut reader, &mut input).await.map(drop)
                }
                (None, None) => Ok(()),
            };
            let written = match written {
                Ok(()) if attach_stdin && !keep_stdin_open => input.shutdown().await,
                other => other,
            };
            // Keep the stream (and so the process's stdin) until the exec ends.
            (written, input)
        };
        let pump = self.pump(output, stdout, stderr, &argv[0]);
        let ((written, input), pumped) = tokio::join!(feed, pump);
        drop(input);
        let (out, err) = pumped?;
        match written {
            Ok(()) => {}
            // The process ended without reading all of its stdin: not an exec failure.
            Err(error)
                if matches!(
                    error.kind(),
                    std::io::ErrorKind::BrokenPipe
                        | std::io::ErrorKind::ConnectionReset
                        | std::io::ErrorKind::NotConnected
                ) => {}
            Err(error) => {
                return Err(Error::Engine {
                    driver: shared.engine.as_str().to_owned(),
                    operation: format!("write stdin of exec {exec_id}"),
                    source: Box::new(error),
                });
            }
        }
        let exit_code = self.exit_code(&exec_id).await?;
        Ok(ExecResult {
            exit_code,
            stdout: out,
            stderr: err,
        })
    }

    /// Copies the demultiplexed output into the caller's sinks as it arrives, or into buffers
    /// for the streams the caller did not supply; closes the sinks at the end.
    async fn pump(
        &self,
        mut output: ApiStream<ExecChunk>,
        mut stdout: Option<ExecOutput>,
        mut stderr: Option<ExecOutput>,
        program: &str,
    ) -> Result<(Option<Bytes>, Option<Bytes>)> {
        let mut out_buf = stdout.is_none().then(Vec::new);
        let mut err_buf = stderr.is_none().then(Vec::new);
        let sink_error = |stream: &'static str| {
            let path = PathBuf::from(program);
            move |source| Error::Io {
                operation: stream,
                path,
                source,
            }
        };
        while let Some(chunk) = output.next().await {
            let chunk = chunk.map_err(
                self.shared
                    .engine_error(format!("read exec output in {}", self.id)),
            )?;
            let (bytes, sink, buffer, label) = match chunk {
                ExecChunk::Stdout(bytes) => (bytes, &mut stdout, &mut out_buf, "write stdout of"),
                ExecChunk::Stderr(bytes) => (bytes, &mut stderr, &mut err_buf, "write stderr of"),
            };
            match (sink.as_mut(), buffer.as_mut()) {
                (Some(sink), _) => sink.write_all(&bytes).await.map_err(sink_error(label))?,
                (None, Some(buffer)) => buffer.extend_from_slice(&bytes),
                (None, None) => {}
            }
        }
        for (sink, label) in [(stdout, "close stdout of"), (stderr, "close stderr of")] {
            if let Some(mut sink) = sink {
                close(&mut sink).await.map_err(sink_error(label))?;
            }
        }
        Ok((out_buf.map(Bytes::from), err_buf.map(Bytes::from)))
    }

    async fn exit_code(&self, exec_id: &str) -> Result<i64> {
        let started = tokio::time::Instant::now();
        let mut delay = Duration::from_millis(2);
        loop {
            let state = self
                .shared
                .api
                .inspect_exec(exec_id)
                .await
                .map_err(self.shared.engine_error(format!("inspect exec {exec_id}")))?;
            if let (false, Some(code)) = (state.running, state.exit_code) {
                return Ok(code);
            }
            if started.elapsed() >= EXIT_CODE_WAIT {
                return Err(Error::ExitCodeUnavailable {
                    sandbox_id: self.id.clone(),
                });
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_millis(100));
        }
    }

    /// Issue 15 item 13: the intermediate images of this run's build — every image labelled
    /// with its run id (the classic builder commits one per `LABEL` step). The run id is unique,
    /// so no other build's cache is among them; children go before parents, so removal repeats
    /// while it makes progress. Best effort: the reaper collects what is left.
    async fn remove_run_intermediates(&self) {
        let filter = vec![format!("{}={}", iterion_sandbox::LABEL_RUN_ID, self.run_id)];
        for _ in 0..8 {
            let Ok(images) = self.shared.api.list_images(filter.clone()).await else {
                return;
            };
            if images.is_empty() {
                return;
            }
            let mut removed = false;
            for image in images {
                removed |= self.shared.api.remove_image(&image.id).await.is_ok();
            }
            if !removed {
                return;
            }
        }
    }

    async fn remove_run_dir(&self) {
        // Only ever the per-run dir: its last component is the run id (SANDBOX.md §4.5). A
        // run dir that is not one is left alone rather than risk removing something else.
        if self.run_dir.file_name().and_then(|n| n.to_str()) != Some(self.run_id.as_str()) {
            tracing::debug!(
                "sandbox: not removing {}: not a per-run dir of run {}",
                self.run_dir.display(),
                self.run_id
            );
            return;
        }
        // Secret dirs are read-only once filled; reopen them so a non-root engine can empty them.
        for dir in ["secrets", "secrets-custom"] {
            use std::os::unix::fs::PermissionsExt;
            let _ = tokio::fs::set_permissions(
                self.run_dir.join(dir),
                std::fs::Permissions::from_mode(0o700),
            )
            .await;
        }
        // Staged mounts (issue 15 item 1) are detached first; the dir is never emptied
        // through one.
        let run_dir = self.run_dir.clone();
        match tokio::task::spawn_blocking(move || iterion_sandbox::remove_run_dir(&run_dir)).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::debug!(
                "sandbox: could not remove the per-run dir {}: {error}",
                self.run_dir.display()
            ),
            Err(join) => tracing::debug!(
                "sandbox: could not remove the per-run dir {}: {join}",
                self.run_dir.display()
            ),
        }
    }
}

/// An exec's env with the run's base env in front: every base pair whose key the exec does not
/// set itself, then the exec's own pairs in order.
fn with_base_env(base: &[(String, String)], env: Vec<(String, String)>) -> Vec<(String, String)> {
    if base.is_empty() {
        return env;
    }
    let mut merged: Vec<(String, String)> = base
        .iter()
        .filter(|(key, _)| !env.iter().any(|(own, _)| own == key))
        .cloned()
        .collect();
    merged.extend(env);
    merged
}

async fn close<W: AsyncWrite + Unpin + ?Sized>(sink: &mut W) -> std::io::Result<()> {
    sink.flush().await?;
    sink.shutdown().await
}

#[async_trait]
impl SandboxRun for DockerRun {
    fn driver(&self) -> &str {
        self.shared.engine.as_str()
    }

    fn id(&self) -> &str {
        &self.id
    }

    /// SANDBOX.md §4.7. Output streams to the caller's writers as it arrives; a non-zero exit is
    /// not an error. Dropping the future detaches; the process ends at cleanup at the latest.
    async fn exec(&self, argv: &[String], opts: ExecOpts) -> Result<ExecResult> {
        self.exec_at(argv, opts, LogLevel::Debug).await
    }

    /// SANDBOX.md §4.8: force-remove the container (already gone is success), then the built
    /// image (best effort) and the per-run dir. Idempotent; a failed removal is returned and
    /// retried by the next call.
    ///
    /// When the operator keeps a warm pool and a detached filler is installed (issue 18:
    /// `iterion` itself; [`crate::warm::WarmPool::hands_off`]), the container — a claimed warm
    /// pool entry or a cold one, unless its image was built for the run and goes with it — is
    /// frozen instead (`pause`: no process of it runs again, nothing more is
    /// written to the workspace) and its removal, with a claimed entry's slots and claim
    /// marker, is handed to a filler; the run does not wait for the engine's kill and removal.
    /// When either step fails it is removed here, as any container.
    async fn cleanup(&self) -> Result<()> {
        self.closed.store(true, Ordering::SeqCst);
        let mut cleaned = self.cleaned.lock().await;
        if *cleaned {
            return Ok(());
        }
        if self.built_image.is_none() && self.shared.pool.hands_off() {
            match self.shared.api.pause_container(&self.id).await {
                Ok(()) => {
                    let handed = self
                        .shared
                        .pool
                        .hand_off_removal(&self.id, self.warm_leftovers.clone())
                        .await;
                    match handed {
                        Ok(()) => {
                            self.shared.log(
                                LogLevel::Info,
                                &format!(
                                    "sandbox: {} {} frozen; its removal is handed to the filler",
                                    if self.claimed {
                                        "warm pool entry"
                                    } else {
                                        "container"
                                    },
                                    self.id
                                ),
                            );
                            *cleaned = true;
                            self.remove_run_dir().await;
                            return Ok(());
                        }
                        Err(error) => tracing::debug!(
                            "sandbox: hand the removal of {} to a filler: {error}",
                            self.id
                        ),
                    }
                }
                Err(error) => {
                    tracing::debug!("sandbox: pause {} before handing it off: {error}", self.id);
                }
            }
        }
        remove_container(&self.shared, &self.id).await?;
        *cleaned = true;
        if let Some(image) = &self.built_image {
            self.shared
                .log(LogLevel::Info, &render_rmi(self.shared.engine, image));
            if let Err(error) = self.shared.api.remove_image(image).await {
                tracing::debug!("sandbox: could not remove the built image {image}: {error}");
            }
            self.remove_run_intermediates().await;
        }
        self.remove_run_dir().await;
        if !self.warm_leftovers.is_empty() {
            let slots = self.warm_leftovers.clone();
            let _ = tokio::task::spawn_blocking(move || {
                crate::warm::remove_slots(slots.iter().map(PathBuf::as_path));
            })
            .await;
        }
        Ok(())
    }

    fn take_attached_agent(&self) -> Option<AttachedAgent> {
        self.attached
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    fn secret_file_refresher(&self) -> Option<&dyn SecretFileRefresher> {
        (!self.secrets.files.is_empty()).then_some(self as &dyn SecretFileRefresher)
    }
}

#[async_trait]
impl SecretFileRefresher for DockerRun {
    /// SANDBOX.md §4.8: the new value replaces the file the container sees, with no empty-file
    /// window. An empty value or an unknown name is refused.
    async fn refresh_secret_file(&self, name: &str, value: &SecretBytes) -> Result<()> {
        let (plan, name, value) = (Arc::clone(&self.secrets), name.to_owned(), value.clone());
        let run_dir = self.run_dir.clone();
        tokio::task::spawn_blocking(move || refresh_secret(&plan, &name, &value))
            .await
            .map_err(|join| Error::Io {
                operation: "refresh secret file in",
                path: run_dir,
                source: std::io::Error::other(join.to_string()),
            })?
    }
}

/// A [`DockerRun`] whose execs are logged at a given level.
pub(crate) struct LoggedAt<'a> {
    run: &'a DockerRun,
    level: LogLevel,
}

#[async_trait]
impl SandboxRun for LoggedAt<'_> {
    fn driver(&self) -> &str {
        self.run.driver()
    }

    fn id(&self) -> &str {
        self.run.id()
    }

    async fn exec(&self, argv: &[String], opts: ExecOpts) -> Result<ExecResult> {
        self.run.exec_at(argv, opts, self.level).await
    }

    async fn cleanup(&self) -> Result<()> {
        self.run.cleanup().await
    }
}
