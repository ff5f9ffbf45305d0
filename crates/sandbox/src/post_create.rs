//! `run_post_create` (SANDBOX.md §4.1): the one-time setup snippet, shared by every driver.
//!
//! It execs `["sh", "-c", snippet]`, logs each stdout line at info and each stderr line at warn
//! (prefixed `sandbox: postCreate: `), keeps the last 4096 bytes of each stream for the error, and
//! is bounded by the `post_create` phase.

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::AsyncWrite;

use crate::driver::{ExecOpts, LogLevel, RunLog, SandboxRun};
use crate::error::{Error, Result};
use crate::phase::Phase;
use crate::timeout::run_with_phase_timeout;

/// The prefix of every post_create log line.
pub(crate) const POST_CREATE_LOG_PREFIX: &str = "sandbox: postCreate: ";

/// How much of each stream a failure keeps.
pub const OUTPUT_TAIL_BYTES: usize = 4096;

/// Runs `snippet` once in `run` with `sh -c`, logging its output line by line to `log`, under
/// the `post_create` phase budget.
///
/// # Errors
///
/// [`Error::PostCreateFailed`] with the output tails on a non-zero exit;
/// [`Error::PhaseTimeout`] past `budget`; the exec's own error otherwise.
pub async fn run_post_create(
    run: &dyn SandboxRun,
    snippet: &str,
    log: Arc<dyn RunLog>,
    budget: Duration,
) -> Result<()> {
    let stdout = LineLog::new(Arc::clone(&log), LogLevel::Info);
    let stderr = LineLog::new(log, LogLevel::Warn);
    let argv = ["sh", "-c", snippet].map(str::to_owned);
    let opts = ExecOpts {
        stdout: Some(Box::new(stdout.clone())),
        stderr: Some(Box::new(stderr.clone())),
        ..ExecOpts::default()
    };
    let result = run_with_phase_timeout(Phase::PostCreate, budget, run.exec(&argv, opts)).await;
    let (out_tail, err_tail) = (stdout.finish(), stderr.finish());
    let result = result?;
    if result.exit_code == 0 {
        return Ok(());
    }
    let tail = [err_tail, out_tail]
        .iter()
        .map(|tail| tail.trim_end())
        .filter(|tail| !tail.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    Err(Error::PostCreateFailed {
        driver: run.driver().to_owned(),
        exit_code: result.exit_code,
        tail: if tail.is_empty() {
            format!("exit code {}", result.exit_code)
        } else {
            tail
        },
    })
}

#[derive(Default)]
struct LineState {
    partial: Vec<u8>,
    tail: Vec<u8>,
}

/// An `AsyncWrite` that logs complete lines and keeps a tail of everything written.
#[derive(Clone)]
struct LineLog {
    log: Arc<dyn RunLog>,
    level: LogLevel,
    state: Arc<Mutex<LineState>>,
}

impl LineLog {
    fn new(log: Arc<dyn RunLog>, level: LogLevel) -> Self {
        LineLog {
            log,
            level,
            state: Arc::default(),
        }
    }

    fn state(&self) -> MutexGuard<'_, LineState> {
        match self.state.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn emit(&self, line: &[u8]) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        self.log.line(
            self.level,
            &format!("{POST_CREATE_LOG_PREFIX}{}", String::from_utf8_lossy(line)),
        );
    }

    fn write_bytes(&self, buf: &[u8]) {
        let mut state = self.state();
        state.tail.extend_from_slice(buf);
        let excess = state.tail.len().saturating_sub(OUTPUT_TAIL_BYTES);
        state.tail.drain(..excess);
        state.partial.extend_from_slice(buf);
        while let Some(newline) = state.partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = state.partial.drain(..=newline).collect();
            self.emit(&line[..line.len() - 1]);
        }
    }

    fn flush_partial(&self) {
        let partial = std::mem::take(&mut self.state().partial);
        if !partial.is_empty() {
            self.emit(&partial);
        }
    }

    /// Logs any unterminated last line and returns the tail.
    fn finish(&self) -> String {
        self.flush_partial();
        String::from_utf8_lossy(&self.state().tail).into_owned()
    }
}

impl AsyncWrite for LineLog {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.write_bytes(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.flush_partial();
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
#[path = "post_create_tests.rs"]
mod tests;
