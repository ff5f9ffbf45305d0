//! Where the agent's `bash` runs: a [`Shell`] the embedder gives — the engine passes the noop
//! driver's host run, in the engine process or inside the container — so this crate starts no
//! process of its own. [`BoundedSink`] is the bounded buffer a command's output streams into.

use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use async_trait::async_trait;
use tokio::io::AsyncWrite;

/// One command for a [`Shell`].
pub struct Command<'a> {
    /// The program and its arguments.
    pub argv: &'a [String],
    /// Appended to the shell's environment, in order.
    pub env: Vec<(String, String)>,
    /// Where it runs.
    pub workdir: &'a Path,
    /// Receives its stdout as it is produced.
    pub stdout: BoundedSink,
    /// Receives its stderr as it is produced.
    pub stderr: BoundedSink,
}

/// Runs the agent's commands.
#[async_trait]
pub trait Shell: Send + Sync {
    /// Runs `command`, streaming its output into its sinks. Returns its exit code (128 + signal
    /// when killed by one), or why it could not be run; a non-zero exit is not an error.
    async fn exec(&self, command: Command<'_>) -> Result<i64, ShellError>;
}

/// Opens the runner's [`Shell`] once its task named the workspace.
#[async_trait]
pub trait OpenShell: Send + Sync {
    /// A shell for session `session` whose commands run in `workdir` unless told otherwise.
    async fn open(&self, session: &str, workdir: &Path) -> Result<Arc<dyn Shell>, ShellError>;
}

/// Why a [`Shell`] could not run a command, or could not be opened: the embedder's error, kept
/// as the source.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct ShellError(Box<dyn std::error::Error + Send + Sync + 'static>);

impl ShellError {
    /// Wraps the embedder's error.
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        ShellError(Box::new(error))
    }
}

/// An [`AsyncWrite`] that keeps the first `max` bytes and counts the rest.
#[derive(Clone)]
pub struct BoundedSink {
    inner: Arc<Mutex<(Vec<u8>, usize)>>,
    max: usize,
}

impl BoundedSink {
    /// A sink that keeps `max` bytes.
    pub fn new(max: usize) -> BoundedSink {
        BoundedSink {
            inner: Arc::new(Mutex::new((Vec::new(), 0))),
            max,
        }
    }

    /// The kept text, with the omitted-bytes suffix when something was dropped.
    pub fn text(&self) -> String {
        let guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let text = String::from_utf8_lossy(&guard.0).into_owned();
        if guard.1 > 0 {
            format!("{text}…[iterion: {} bytes omitted]", guard.1)
        } else {
            text
        }
    }
}

impl BoundedSink {
    /// The kept bytes, and how many were dropped past the bound.
    pub fn kept(&self) -> (Vec<u8>, usize) {
        let guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        (guard.0.clone(), guard.1)
    }
}

impl AsyncWrite for BoundedSink {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let mut guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let room = self.max.saturating_sub(guard.0.len());
        let take = room.min(buf.len());
        guard.0.extend_from_slice(&buf[..take]);
        guard.1 += buf.len() - take;
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
