//! Capturing a tool's stdout and stderr (DSL.md §6.1 step 3).
//!
//! Each stream gets a [`Capture`]: an [`AsyncWrite`] handed to the exec, which keeps the bytes the
//! engine needs and forwards complete lines to the run log as they arrive.
//!
//! - stdout is kept whole up to [`STDOUT_CAP`]. One byte more and the writer refuses the write:
//!   the driver stops reading, the process gets `EPIPE`/`SIGPIPE` instead of filling memory, and
//!   the node fails with `EXECUTION_FAILED`.
//! - stderr keeps only its last [`STDERR_KEPT`] bytes (for the failure tail).
//! - The run log (and the console) receive at most [`LOG_CAP`] bytes (1 MiB) of each stream per
//!   node execution, redacted line by line, then the cut is marked (`node_logs.truncated`) and
//!   noted in an engine line. Recorded text stays bounded however much a tool prints.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use tokio::io::AsyncWrite;

use crate::records::secrets::Redactor;
use crate::records::sink::{LogLine, RunLogSink};
use iterion_vocab::LogStream;

/// stdout over this fails the node (16 MiB).
pub(crate) const STDOUT_CAP: usize = 16 * 1024 * 1024;
/// The bytes of each stream recorded in the run log per node execution (1 MiB); the records
/// room owns it, so that the setup output it records is bounded alike.
pub(crate) use crate::records::sink::LOG_CAP;
/// The bytes of stderr kept for the failure tail.
const STDERR_KEPT: usize = 64 * 1024;

/// How much of the stream to keep in memory.
#[derive(Clone, Copy, Debug)]
enum Keep {
    /// Everything, refusing writes past the cap.
    Head(usize),
    /// The last bytes only.
    Tail(usize),
}

struct State {
    node: String,
    stream: LogStream,
    keep: Keep,
    kept: Vec<u8>,
    overflowed: bool,
    line: Vec<u8>,
    logged: usize,
    log_cut: bool,
    log: Arc<dyn RunLogSink>,
    redactor: Arc<Redactor>,
}

impl State {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.keep {
            Keep::Head(cap) => {
                if self.kept.len() + buf.len() > cap {
                    self.overflowed = true;
                    return Err(io::Error::other(format!(
                        "{} went over {} bytes",
                        self.stream.as_str(),
                        cap
                    )));
                }
                self.kept.extend_from_slice(buf);
            }
            Keep::Tail(keep) => {
                self.kept.extend_from_slice(buf);
                if self.kept.len() > keep {
                    let cut = self.kept.len() - keep;
                    self.kept.drain(..cut);
                }
            }
        }
        for chunk in buf.split_inclusive(|b| *b == b'\n') {
            if self.log_cut {
                break;
            }
            if self.line.len() < LOG_CAP {
                let room = LOG_CAP - self.line.len();
                let body = chunk.strip_suffix(b"\n").unwrap_or(chunk);
                self.line
                    .extend_from_slice(body.get(..room.min(body.len())).unwrap_or(body));
            }
            if chunk.ends_with(b"\n") {
                self.flush_line();
            }
        }
        Ok(buf.len())
    }

    fn flush_line(&mut self) {
        if self.log_cut {
            self.line.clear();
            return;
        }
        let text = String::from_utf8_lossy(&self.line).into_owned();
        self.line.clear();
        self.logged += text.len() + 1;
        self.log.line(LogLine {
            node: self.node.clone(),
            stream: self.stream,
            text: self.redactor.redact(&text),
        });
        if self.logged >= LOG_CAP {
            self.log_cut = true;
            self.log.truncated(&self.node, self.stream);
            self.log.line(LogLine {
                node: self.node.clone(),
                stream: LogStream::System,
                text: format!(
                    "{}: further output not recorded ({} KiB per stream and node execution)",
                    self.stream.as_str(),
                    LOG_CAP / 1024
                ),
            });
        }
    }
}

/// One captured stream.
#[derive(Clone)]
pub(crate) struct Capture {
    state: Arc<Mutex<State>>,
}

/// What a capture kept.
pub(crate) struct Captured {
    /// The kept bytes (all of stdout, the tail of stderr).
    pub bytes: Vec<u8>,
    /// stdout went over its cap.
    pub overflowed: bool,
}

impl Capture {
    fn new(
        node: &str,
        stream: LogStream,
        keep: Keep,
        log: Arc<dyn RunLogSink>,
        redactor: Arc<Redactor>,
    ) -> Capture {
        Capture {
            state: Arc::new(Mutex::new(State {
                node: node.to_owned(),
                stream,
                keep,
                kept: Vec::new(),
                overflowed: false,
                line: Vec::new(),
                logged: 0,
                log_cut: false,
                log,
                redactor,
            })),
        }
    }

    /// stdout: kept whole up to [`STDOUT_CAP`].
    pub(crate) fn stdout(node: &str, log: Arc<dyn RunLogSink>, redactor: Arc<Redactor>) -> Self {
        Capture::new(
            node,
            LogStream::Stdout,
            Keep::Head(STDOUT_CAP),
            log,
            redactor,
        )
    }

    /// stderr: its tail kept.
    pub(crate) fn stderr(node: &str, log: Arc<dyn RunLogSink>, redactor: Arc<Redactor>) -> Self {
        Capture::new(
            node,
            LogStream::Stderr,
            Keep::Tail(STDERR_KEPT),
            log,
            redactor,
        )
    }

    #[cfg(test)]
    fn with_cap(node: &str, cap: usize, log: Arc<dyn RunLogSink>) -> Self {
        Capture::new(
            node,
            LogStream::Stdout,
            Keep::Head(cap),
            log,
            Arc::new(Redactor::default()),
        )
    }

    /// A writer for the exec.
    pub(crate) fn writer(&self) -> Box<dyn AsyncWrite + Send + Unpin> {
        Box::new(self.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Logs a last unterminated line and returns what was kept.
    pub(crate) fn finish(&self) -> Captured {
        let mut st = self.lock();
        if !st.line.is_empty() {
            st.flush_line();
        }
        Captured {
            bytes: std::mem::take(&mut st.kept),
            overflowed: st.overflowed,
        }
    }
}

impl AsyncWrite for Capture {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Poll::Ready(self.lock().write(buf))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut st = self.lock();
        if !st.line.is_empty() {
            st.flush_line();
        }
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::sink::MemoryRunLog;
    use pretty_assertions::assert_eq;
    use tokio::io::AsyncWriteExt;

    fn lines(log: &MemoryRunLog) -> Vec<(LogStream, String)> {
        log.lines()
            .into_iter()
            .map(|l| (l.stream, l.text))
            .collect()
    }

    #[tokio::test]
    async fn lines_are_logged_as_they_complete_and_the_rest_at_finish() {
        let log = MemoryRunLog::new();
        let cap = Capture::with_cap("n", 100, Arc::new(log.clone()));
        let mut w = cap.writer();
        w.write_all(b"one\ntw").await.unwrap();
        assert_eq!(lines(&log), vec![(LogStream::Stdout, "one".to_owned())]);
        w.write_all(b"o\nthree").await.unwrap();
        let got = cap.finish();
        assert_eq!(
            (got.bytes, got.overflowed, lines(&log)),
            (
                b"one\ntwo\nthree".to_vec(),
                false,
                vec![
                    (LogStream::Stdout, "one".to_owned()),
                    (LogStream::Stdout, "two".to_owned()),
                    (LogStream::Stdout, "three".to_owned()),
                ]
            )
        );
    }

    #[tokio::test]
    async fn a_write_past_the_cap_is_refused() {
        let cap = Capture::with_cap("n", 4, Arc::new(crate::records::sink::NullRunLog));
        let mut w = cap.writer();
        w.write_all(b"abcd").await.unwrap();
        let err = w.write_all(b"e").await.unwrap_err();
        assert_eq!(err.to_string(), "stdout went over 4 bytes");
        let got = cap.finish();
        assert_eq!((got.bytes, got.overflowed), (b"abcd".to_vec(), true));
    }

    #[tokio::test]
    async fn stderr_keeps_its_tail_and_the_log_stops_at_its_cap() {
        let log = MemoryRunLog::new();
        let cap = Capture::stderr("n", Arc::new(log.clone()), Arc::new(Redactor::default()));
        let mut w = cap.writer();
        let line = format!("{}\n", "x".repeat(1023));
        for _ in 0..(LOG_CAP / 1024 + 36) {
            w.write_all(line.as_bytes()).await.unwrap();
        }
        let got = cap.finish();
        let logged = log.lines();
        assert_eq!(
            (
                got.bytes.len(),
                logged.len(),
                logged.last().map(|l| (l.stream, l.text.clone()))
            ),
            (
                STDERR_KEPT,
                LOG_CAP / 1024 + 1,
                Some((
                    LogStream::System,
                    "stderr: further output not recorded (1024 KiB per stream and node execution)"
                        .to_owned()
                ))
            )
        );
    }
}
