//! The agent's side (`iterion __exec-agent`, run inside the sandbox): reads [`Frame`]s from the
//! engine on stdin, runs each `Start` as a process of its own group, streams its output back in
//! chunks and ends it with an `Exit`. It adds nothing to what the exec it was started by could
//! do: it runs as that exec's user, with its environment, in its working directory.
//!
//! It makes itself non-dumpable first, so the processes it starts (the same user) cannot open
//! its `/proc/<pid>/fd` to write forged frames into its channel or read other execs' output.
//! It then writes nothing until the engine greets ([`Frame::Greet`]): the greeting's env goes in
//! front of every exec's own (never into the agent's own environment), and the agent answers
//! `Hello`. A warm pool entry's agent waits there, unattached, until a run claims it.
//! When the engine's side ends (stdin closes), every process it started is killed and it exits.

use std::collections::HashMap;
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::exec_agent::frame::{
    CHUNK, Frame, FrameError, Greeting, PROTOCOL_VERSION, StartRequest,
};

type Sink<W> = Arc<tokio::sync::Mutex<W>>;

/// How long output is still read after the process exited, for a background job that holds
/// its pipes (what the process itself wrote is in the pipe already and read at once).
const DRAIN_AFTER_EXIT: std::time::Duration = std::time::Duration::from_millis(200);

/// A started process: its group, and where its stdin frames go.
struct Running {
    pgid: Option<i32>,
    stdin: Option<mpsc::UnboundedSender<Option<Vec<u8>>>>,
}

type Table = Arc<Mutex<HashMap<u32, Running>>>;

/// Serves the engine on `input`/`output` until `input` ends: waits for its greeting, answers
/// it, then runs what it asks.
///
/// # Errors
///
/// The channel broke: the first frame was not a greeting, the hello could not be written, or
/// a frame could not be read.
pub async fn serve<R, W>(mut input: R, output: W) -> Result<(), FrameError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    // Best effort: a kernel that refuses leaves the agent as protected as the exec was.
    let _ = nix::sys::prctl::set_dumpable(false);
    let Greeting { env: base_env } = match Frame::read(&mut input).await? {
        Some(Frame::Greet(greeting)) => greeting,
        // Nobody ever greeted (an unclaimed pool entry removed): nothing to serve.
        None => return Ok(()),
        Some(other) => {
            return Err(FrameError::Malformed(format!(
                "the engine's first frame is not a greeting: {other:?}"
            )));
        }
    };
    let base_env = Arc::new(base_env);
    let sink: Sink<W> = Arc::new(tokio::sync::Mutex::new(output));
    Frame::Hello(PROTOCOL_VERSION)
        .write(&mut *sink.lock().await)
        .await?;
    let table: Table = Arc::new(Mutex::new(HashMap::new()));
    // The execs' tasks belong to this call: when it ends (or its future is dropped) they are
    // aborted, and with them their processes (`kill_on_drop`) and the output sink.
    let mut execs = tokio::task::JoinSet::new();
    let ended = loop {
        while execs.try_join_next().is_some() {}
        let frame = match Frame::read(&mut input).await {
            Ok(Some(frame)) => frame,
            Ok(None) => break Ok(()),
            Err(error) => break Err(error),
        };
        match frame {
            Frame::Start(id, request) => {
                start(id, request, &base_env, &table, &sink, &mut execs);
            }
            Frame::Stdin(id, bytes) => feed(&table, id, Some(bytes)),
            Frame::StdinEnd(id) => feed(&table, id, None),
            Frame::Kill(id) => {
                let pgid = lock(&table).get(&id).and_then(|r| r.pgid);
                if let Some(pgid) = pgid {
                    let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
                }
            }
            // Frames only the agent sends, or a second greeting: ignored (the first one holds).
            Frame::Greet(_)
            | Frame::Hello(_)
            | Frame::Stdout(..)
            | Frame::Stderr(..)
            | Frame::Exit(..) => {}
        }
    };
    let groups: Vec<i32> = lock(&table).values().filter_map(|r| r.pgid).collect();
    for pgid in groups {
        let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
    }
    ended
}

/// What an agent that is the sandbox's PID 1 does once its channel ended: it stays, so the
/// sandbox (and the driver's exec, the engine's fallback) lives on until the driver removes it,
/// and reaps what is reparented to it. Never returns.
pub fn idle_as_init() -> ! {
    loop {
        match nix::sys::wait::waitpid(None, None) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            // Nothing to reap now: an orphan may come later.
            Err(_) => std::thread::sleep(std::time::Duration::from_secs(1)),
        }
    }
}

fn lock(table: &Table) -> std::sync::MutexGuard<'_, HashMap<u32, Running>> {
    table.lock().unwrap_or_else(PoisonError::into_inner)
}

fn feed(table: &Table, id: u32, bytes: Option<Vec<u8>>) {
    let mut table = lock(table);
    let Some(running) = table.get_mut(&id) else {
        return;
    };
    let end = bytes.is_none();
    if let Some(tx) = &running.stdin {
        let _ = tx.send(bytes);
    }
    if end {
        running.stdin = None;
    }
}

fn start<W>(
    id: u32,
    request: StartRequest,
    base_env: &[(String, String)],
    table: &Table,
    sink: &Sink<W>,
    execs: &mut tokio::task::JoinSet<()>,
) where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let StartRequest {
        argv,
        env,
        workdir,
        stdin,
    } = request;
    let mut command = tokio::process::Command::new(&argv[0]);
    // The run's env first, the exec's own over it (later pairs of one key win).
    command
        .args(&argv[1..])
        .envs(base_env.iter().map(|(k, v)| (k, v)))
        .envs(env)
        // Its own group: a kill reaches its background jobs too, as a cancelled exec must.
        .process_group(0)
        .stdin(if stdin { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(dir) = &workdir {
        command.current_dir(dir);
    }
    let sink = Arc::clone(sink);
    let table = Arc::clone(table);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) => {
            // What a shell answers for a program it cannot start: 127 not found, 126 otherwise.
            let code = if error.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            let message = format!("iterion exec agent: cannot start {:?}: {error}\n", argv[0]);
            execs.spawn(async move {
                let mut sink = sink.lock().await;
                let _ = Frame::Stderr(id, message.into_bytes())
                    .write(&mut *sink)
                    .await;
                let _ = Frame::Exit(id, code).write(&mut *sink).await;
            });
            return;
        }
    };
    let pgid = child.id().and_then(|pid| i32::try_from(pid).ok());
    let (tx, rx) = mpsc::unbounded_channel();
    let child_stdin = child.stdin.take();
    lock(&table).insert(
        id,
        Running {
            pgid,
            stdin: child_stdin.is_some().then_some(tx),
        },
    );
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    execs.spawn(async move {
        let feeder = child_stdin.map(|pipe| AbortOnDrop(tokio::spawn(write_stdin(pipe, rx))));
        let out = pump(stdout, &sink, |bytes| Frame::Stdout(id, bytes));
        let err = pump(stderr, &sink, |bytes| Frame::Stderr(id, bytes));
        let mut pumps = std::pin::pin!(async {
            tokio::join!(out, err);
        });
        let mut pumped = false;
        let status = loop {
            tokio::select! {
                status = child.wait() => break status,
                () = &mut pumps, if !pumped => pumped = true,
            }
        };
        // The exec ends with its process, as a driver's does: what it wrote is read, but a
        // background job that keeps the pipes open does not hold the exec.
        if !pumped {
            let _ = tokio::time::timeout(DRAIN_AFTER_EXIT, &mut pumps).await;
        }
        drop(feeder);
        let code = match status {
            Ok(status) => status
                .code()
                .map(i64::from)
                .or_else(|| status.signal().map(|s| 128 + i64::from(s)))
                .unwrap_or(1),
            Err(_) => 1,
        };
        lock(&table).remove(&id);
        let _ = Frame::Exit(id, code).write(&mut *sink.lock().await).await;
    });
}

/// A task that ends with its owner.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn write_stdin(
    mut pipe: tokio::process::ChildStdin,
    mut rx: mpsc::UnboundedReceiver<Option<Vec<u8>>>,
) {
    while let Some(Some(bytes)) = rx.recv().await {
        if pipe.write_all(&bytes).await.is_err() {
            return;
        }
        let _ = pipe.flush().await;
    }
    // `None` (end of stdin) or the engine's side gone: the pipe closes here.
}

async fn pump<R, W>(pipe: Option<R>, sink: &Sink<W>, frame: impl Fn(Vec<u8>) -> Frame)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send,
{
    let Some(mut pipe) = pipe else {
        return;
    };
    let mut buffer = vec![0u8; CHUNK];
    loop {
        match pipe.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if frame(buffer[..n].to_vec())
                    .write(&mut *sink.lock().await)
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
    }
}
