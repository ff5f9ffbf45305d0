//! The noop driver (SANDBOX.md §3.5): host passthrough. It isolates nothing, so the factory never
//! hands it to an active spec unless an embedder pinned it, and it refuses file secrets, whose
//! only delivery channel is a mount.
//!
//! `exec` runs argv directly on the host (tokio::process), with cwd = the exec's workdir or the
//! workspace and env = the host env followed by the exec's env. Output streams to the caller's
//! writers as it is produced. Each exec leads a process group of its own, and the run ends every
//! process it started — the group's background jobs and grandchildren included — when an exec
//! is cancelled, at cleanup, and when the run is dropped (`noop_procs.rs`): with no container to
//! end them, nothing else would.

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::process::Command;

use crate::capabilities::Capabilities;
use crate::driver::{
    Driver, DriverConstructor, ExecOpts, ExecOutput, ExecResult, PreparedSpec, Progress, RunInfo,
    SandboxRun,
};
use crate::error::{Error, Result};
use crate::rules::ArgRule;
use crate::spec::Spec;

use crate::noop_procs::HostProcesses;

const NAME: &str = "noop";

/// The host-passthrough driver: all capabilities false, always constructible.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoopDriver;

/// Constructs [`NoopDriver`]; never fails.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoopConstructor;

#[async_trait]
impl DriverConstructor for NoopConstructor {
    async fn construct(&self) -> Result<Arc<dyn Driver>> {
        Ok(Arc::new(NoopDriver))
    }
}

/// Refuses file secrets on a driver that cannot mount them (SANDBOX.md §3.5, step M14).
///
/// # Errors
///
/// [`Error::FileSecretsUnsupported`] when `spec` has any.
pub(crate) fn noop_file_secret_gate(spec: &Spec) -> Result<()> {
    if spec.secret_files.is_empty() {
        Ok(())
    } else {
        Err(Error::FileSecretsUnsupported)
    }
}

#[async_trait]
impl Driver for NoopDriver {
    fn name(&self) -> &str {
        NAME
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::NONE
    }

    async fn prepare(&self, spec: &Spec, _progress: &dyn Progress) -> Result<PreparedSpec> {
        spec.validate()?;
        noop_file_secret_gate(spec)?;
        let mut prepared = PreparedSpec::new(NAME, spec.clone());
        if spec.mode.is_active() {
            prepared.skipped_reason = Some(format!(
                "noop driver does not implement mode={}; falling back to host execution",
                spec.mode
            ));
        }
        Ok(prepared)
    }

    async fn start(&self, prepared: PreparedSpec, info: RunInfo) -> Result<Box<dyn SandboxRun>> {
        prepared.check_driver(NAME)?;
        noop_file_secret_gate(&prepared.spec)?;
        Ok(Box::new(NoopRun {
            processes: Arc::new(HostProcesses::new(&info.run_id)),
            id: info.run_id,
            workspace: info.workspace_path,
            closed: AtomicBool::new(false),
        }))
    }
}

/// A noop "sandbox": the host, with the workspace as default cwd.
#[derive(Debug)]
struct NoopRun {
    id: String,
    /// Every process the run's execs started (ended on cancel, cleanup and drop).
    processes: Arc<HostProcesses>,
    workspace: PathBuf,
    closed: AtomicBool,
}

#[async_trait]
impl SandboxRun for NoopRun {
    fn driver(&self) -> &str {
        NAME
    }

    fn id(&self) -> &str {
        &self.id
    }

    async fn exec(&self, argv: &[String], opts: ExecOpts) -> Result<ExecResult> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::SandboxClosed {
                driver: NAME.to_owned(),
                sandbox_id: self.id.clone(),
            });
        }
        let Some((program, args)) = argv.split_first() else {
            return Err(Error::InvalidArgument {
                label: "argv".to_owned(),
                value: String::new(),
                rule: ArgRule::Empty,
            });
        };
        let io_error = |operation| {
            let program = PathBuf::from(program);
            move |source| Error::Io {
                operation,
                path: program,
                source,
            }
        };
        let ExecOpts {
            env,
            workdir,
            stdin,
            stdout,
            stderr,
            keep_stdin_open,
            user,
        } = opts;
        if let Some(user) = user {
            tracing::debug!(
                "sandbox: noop: exec user {user:?} ignored; commands run as the host user"
            );
        }
        let wants_stdin = stdin.is_some() || keep_stdin_open;
        let marker = self.processes.marker_env();
        let mut child = Command::new(program)
            .args(args)
            .current_dir(workdir.map_or_else(|| self.workspace.clone(), PathBuf::from))
            .envs(env)
            .env(&marker.0, &marker.1)
            // Its own process group: a kill reaches its background jobs, not only the shell.
            .process_group(0)
            .stdin(if wants_stdin {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(io_error("spawn"))?;
        // Declared after `child`, so dropped first: a cancelled exec's group is ended.
        let group = self.processes.track(child.id().unwrap_or(0), marker.1);

        let child_stdin = child.stdin.take();
        let feed = async move {
            let Some(mut pipe) = child_stdin else {
                return Ok(None);
            };
            if let Some(mut input) = stdin {
                match tokio::io::copy(&mut input, &mut pipe).await {
                    Ok(_) => {}
                    // The process exited without reading all of it: not an exec failure.
                    Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => {}
                    Err(error) => return Err(error),
                }
            }
            // Keep the pipe (and so the process's stdin) open until the exec ends, or close it.
            Ok(keep_stdin_open.then_some(pipe))
        };
        let out = pump(child.stdout.take(), stdout);
        let err = pump(child.stderr.take(), stderr);
        let (fed, out, err, status) = tokio::join!(feed, out, err, child.wait());
        group.finished();
        let status = status.map_err(io_error("wait"))?;
        drop(fed.map_err(io_error("write stdin of"))?);
        Ok(ExecResult {
            exit_code: exit_code(status),
            stdout: out.map_err(io_error("read stdout of"))?,
            stderr: err.map_err(io_error("read stderr of"))?,
        })
    }

    async fn cleanup(&self) -> Result<()> {
        self.closed.store(true, Ordering::SeqCst);
        let processes = Arc::clone(&self.processes);
        let _ = tokio::task::spawn_blocking(move || processes.terminate_all()).await;
        Ok(())
    }
}

/// Copies a child's output into the caller's writer, or buffers it when there is none.
async fn pump<R>(pipe: Option<R>, sink: Option<ExecOutput>) -> std::io::Result<Option<Bytes>>
where
    R: AsyncRead + Unpin,
{
    let Some(mut pipe) = pipe else {
        return Ok(sink.is_none().then(Bytes::new));
    };
    match sink {
        Some(mut sink) => {
            tokio::io::copy(&mut pipe, &mut sink).await?;
            flush(&mut sink).await?;
            Ok(None)
        }
        None => {
            let mut buffer = Vec::new();
            pipe.read_to_end(&mut buffer).await?;
            Ok(Some(Bytes::from(buffer)))
        }
    }
}

async fn flush<W: AsyncWrite + Unpin + ?Sized>(sink: &mut W) -> std::io::Result<()> {
    sink.flush().await?;
    sink.shutdown().await
}

/// The exit code, or 128 + the signal for a process killed by one (the shell's convention).
fn exit_code(status: ExitStatus) -> i64 {
    if let Some(code) = status.code() {
        return i64::from(code);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return 128 + i64::from(signal);
        }
    }
    -1
}

#[cfg(test)]
#[path = "noop_tests.rs"]
mod tests;
