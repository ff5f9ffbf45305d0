//! The engine's side: [`AgentRun`] wraps a started sandbox run and sends its execs through the
//! agent, falling back to the driver's own exec when the agent is gone (or never came up), and
//! for an exec that asks for another user than the agent's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::driver::{
    ExecOpts, ExecResult, RunFilesDrainer, SandboxRun, SecretFileRefresher, WorkspaceExporter,
    WorkspaceFileRefresher, WorkspaceHeadCapturer,
};
use crate::error::{Error, Result};
use crate::exec_agent::attached::AttachedAgent;
use crate::exec_agent::frame::{
    CHUNK, Frame, FrameError, Greeting, PROTOCOL_VERSION, StartRequest,
};
use crate::rules::ArgRule;

/// What the reader hands one exec.
enum Delivery {
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
    Exit(i64),
}

/// How many output chunks may wait for a slow caller before the channel waits for it.
const QUEUED_CHUNKS: usize = 64;

/// The most bytes of the agent's own stderr kept to explain why it did not come up.
const AGENT_STDERR_TAIL: usize = 2048;

struct Channel {
    /// How the agent's own exec ended (`None` while it runs): `Some(code)`, or `Some(None)` when
    /// the driver could not say.
    agent_exit: tokio::sync::watch::Receiver<Option<Option<i64>>>,
    alive: AtomicBool,
    next_id: AtomicU32,
    to_agent: mpsc::UnboundedSender<Frame>,
    slots: Mutex<HashMap<u32, mpsc::Sender<Delivery>>>,
    /// The task writing frames into the agent's stdin: ended when the agent is lost, so the
    /// driver's exec of the agent sees its stdin end and can report how the agent ended.
    writer: Mutex<Option<JoinHandle<()>>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl Channel {
    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<u32, mpsc::Sender<Delivery>>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The agent is gone: later execs fall back; the ones in flight see their slot close.
    fn lose(&self, why: &str) {
        if self.alive.swap(false, Ordering::SeqCst) {
            tracing::debug!("sandbox: exec agent lost ({why}); execs use the driver's exec");
        }
        if let Some(writer) = self
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            writer.abort();
        }
        self.slots().clear();
    }

    fn stop(&self) {
        self.lose("stopped");
        for task in self
            .tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
        {
            task.abort();
        }
    }
}

/// A sandbox run whose execs go through the in-sandbox exec agent (`iterion __exec-agent`).
pub struct AgentRun {
    inner: Arc<dyn SandboxRun>,
    channel: Arc<Channel>,
}

impl AgentRun {
    /// Whether the agent still answers (false once it was lost: execs use the driver's).
    pub fn agent_alive(&self) -> bool {
        self.channel.alive.load(Ordering::SeqCst)
    }
}

impl Drop for AgentRun {
    fn drop(&mut self) {
        self.channel.stop();
    }
}

/// Starts `argv` (the engine binary's `__exec-agent`) through `run`'s own exec and waits up to
/// `ready_within` for its hello.
///
/// # Errors
///
/// Why the agent is not available (it could not start, said nothing, or spoke another
/// version): the caller keeps using `run` as it is.
pub async fn start_exec_agent(
    run: Arc<dyn SandboxRun>,
    argv: Vec<String>,
    ready_within: Duration,
) -> std::result::Result<AgentRun, String> {
    let (to_agent_w, to_agent_r) = tokio::io::duplex(2 * CHUNK);
    let (from_agent_w, mut from_agent_r) = tokio::io::duplex(4 * CHUNK);
    let (err_w, mut err_r) = tokio::io::duplex(AGENT_STDERR_TAIL);
    let opts = ExecOpts {
        stdin: Some(Box::new(to_agent_r)),
        keep_stdin_open: true,
        stdout: Some(Box::new(from_agent_w)),
        stderr: Some(Box::new(err_w)),
        ..ExecOpts::default()
    };
    let exec_run = Arc::clone(&run);
    let (exit_tx, agent_exit) = tokio::sync::watch::channel(None);
    let exec = tokio::spawn(async move {
        let code = match exec_run.exec(&argv, opts).await {
            Ok(result) => {
                tracing::debug!("sandbox: exec agent exited {}", result.exit_code);
                Some(result.exit_code)
            }
            Err(error) => {
                tracing::debug!("sandbox: exec agent exec: {error}");
                None
            }
        };
        let _ = exit_tx.send(Some(code));
    });
    let tail = Arc::new(Mutex::new(Vec::new()));
    let tail_writer = Arc::clone(&tail);
    let stderr_task = tokio::spawn(async move {
        let mut buffer = [0u8; 1024];
        while let Ok(n) = err_r.read(&mut buffer).await {
            if n == 0 {
                break;
            }
            let mut tail = tail_writer.lock().unwrap_or_else(PoisonError::into_inner);
            tail.extend_from_slice(&buffer[..n]);
            let excess = tail.len().saturating_sub(AGENT_STDERR_TAIL);
            tail.drain(..excess);
        }
    });
    let mut to_agent_w = to_agent_w;
    // Started through an exec, the agent inherits the run's env from it: nothing to add.
    let greeted = handshake(
        &mut to_agent_w,
        &mut from_agent_r,
        &Greeting::default(),
        ready_within,
    )
    .await;
    if let Err(why) = greeted {
        exec.abort();
        stderr_task.abort();
        let tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
        let tail = String::from_utf8_lossy(&tail);
        let tail = iterion_vocab::escape_controls(tail.trim());
        return Err(if tail.is_empty() {
            why
        } else {
            format!("{why}: {tail}")
        });
    }
    let tasks = vec![exec, stderr_task];
    Ok(connect(
        run,
        Box::pin(to_agent_w),
        Box::pin(from_agent_r),
        agent_exit,
        tasks,
    ))
}

/// Greets an agent (`sink` its stdin, `source` its stdout) with `greeting` and checks its
/// answer within `within`: the one place the engine judges an agent's first bytes. What a
/// hostile sandbox can send here is one bounded frame ([`frame::MAX_PAYLOAD`](super::frame::MAX_PAYLOAD)):
/// anything but a `Hello` of this version, or nothing in time, is refused.
///
/// # Errors
///
/// Why the agent is not usable, in words for the run log.
pub async fn handshake<W, R>(
    sink: &mut W,
    source: &mut R,
    greeting: &Greeting,
    within: Duration,
) -> std::result::Result<(), String>
where
    W: AsyncWrite + Unpin + ?Sized,
    R: tokio::io::AsyncRead + Unpin + ?Sized,
{
    // An agent that cannot read its greeting (it already exited) may still have said why: its
    // answer is read either way, and judged first.
    let exchange = async {
        let wrote = Frame::Greet(greeting.clone()).write(sink).await;
        let answer = Frame::read(source).await;
        match (answer, wrote) {
            (Ok(None), Err(error)) => Err(error),
            (answer, _) => answer,
        }
    };
    match tokio::time::timeout(within, exchange).await {
        Ok(Ok(Some(Frame::Hello(PROTOCOL_VERSION)))) => Ok(()),
        Ok(Ok(Some(Frame::Hello(other)))) => Err(format!(
            "the exec agent speaks version {other}, not {PROTOCOL_VERSION}"
        )),
        Ok(Ok(Some(_))) => {
            Err("the exec agent did not answer the greeting with a hello".to_owned())
        }
        Ok(Ok(None)) => Err("the exec agent exited before it was ready".to_owned()),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err(format!(
            "the exec agent was not ready within {} ms",
            within.as_millis()
        )),
    }
}

/// `run` with its execs sent through `agent`, the sandbox's own command (no exec started it).
pub fn attach_exec_agent(run: Arc<dyn SandboxRun>, agent: AttachedAgent) -> AgentRun {
    let AttachedAgent {
        to_agent,
        from_agent,
        exited,
    } = agent;
    let (exit_tx, agent_exit) = tokio::sync::watch::channel(None);
    let waiter = tokio::spawn(async move {
        let code = exited.await;
        let _ = exit_tx.send(Some(code));
    });
    connect(run, to_agent, from_agent, agent_exit, vec![waiter])
}

type Sink = std::pin::Pin<Box<dyn AsyncWrite + Send>>;
type Source = std::pin::Pin<Box<dyn tokio::io::AsyncRead + Send>>;

/// The channel over a greeted agent's stdin (`sink`) and stdout (`source`).
fn connect(
    run: Arc<dyn SandboxRun>,
    sink: Sink,
    mut from_agent_r: Source,
    agent_exit: tokio::sync::watch::Receiver<Option<Option<i64>>>,
    tasks: Vec<JoinHandle<()>>,
) -> AgentRun {
    let (to_agent, mut outgoing) = mpsc::unbounded_channel::<Frame>();
    let channel = Arc::new(Channel {
        agent_exit,
        alive: AtomicBool::new(true),
        next_id: AtomicU32::new(1),
        to_agent,
        slots: Mutex::new(HashMap::new()),
        writer: Mutex::new(None),
        tasks: Mutex::new(Vec::new()),
    });
    let writer_channel = Arc::clone(&channel);
    let writer = tokio::spawn(async move {
        let mut sink = sink;
        while let Some(frame) = outgoing.recv().await {
            if let Err(error) = frame.write(&mut sink).await {
                writer_channel.lose(&error.to_string());
                return;
            }
        }
    });
    *channel
        .writer
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = Some(writer);
    let reader_channel = Arc::clone(&channel);
    let reader = tokio::spawn(async move {
        let why = read_deliveries(&reader_channel, &mut from_agent_r).await;
        reader_channel.lose(&why);
    });
    channel
        .tasks
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .extend(tasks.into_iter().chain([reader]));
    AgentRun {
        inner: run,
        channel,
    }
}

/// Hands each output and exit frame to its exec until the channel ends; returns why it ended.
async fn read_deliveries(channel: &Channel, source: &mut Source) -> String {
    loop {
        let frame = match Frame::read(source).await {
            Ok(Some(frame)) => frame,
            Ok(None) => return "the exec agent exited".to_owned(),
            Err(error) => return error.to_string(),
        };
        let (id, delivery) = match frame {
            Frame::Stdout(id, bytes) => (id, Delivery::Stdout(bytes)),
            Frame::Stderr(id, bytes) => (id, Delivery::Stderr(bytes)),
            Frame::Exit(id, code) => (id, Delivery::Exit(code)),
            // The agent sends nothing else: a frame only the engine sends is a broken agent.
            other => {
                return FrameError::Malformed(format!("unexpected frame {other:?}")).to_string();
            }
        };
        let exit = matches!(delivery, Delivery::Exit(_));
        let slot = {
            let mut slots = channel.slots();
            if exit {
                slots.remove(&id)
            } else {
                slots.get(&id).cloned()
            }
        };
        // An exec the engine no longer waits for (dropped, killed): its frames are dropped.
        if let Some(slot) = slot {
            let _ = slot.send(delivery).await;
        }
    }
}

/// Kills an exec that is dropped before its exit arrived (a cancelled or timed-out node).
struct InFlight<'a> {
    channel: &'a Channel,
    id: u32,
    feeder: Option<JoinHandle<()>>,
    done: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Some(feeder) = self.feeder.take() {
            feeder.abort();
        }
        if !self.done {
            self.channel.slots().remove(&self.id);
            let _ = self.channel.to_agent.send(Frame::Kill(self.id));
        }
    }
}

/// How long a lost channel waits for the driver to say how the agent's exec ended.
const AGENT_EXIT_WAIT: Duration = Duration::from_secs(5);

impl AgentRun {
    /// The agent's exit code when a signal killed it (> 128), once the driver says; else `None`.
    async fn killed_agent_code(&self) -> Option<i64> {
        let mut exit = self.channel.agent_exit.clone();
        let ended = tokio::time::timeout(AGENT_EXIT_WAIT, exit.wait_for(Option::is_some)).await;
        let code = match ended {
            Ok(Ok(code)) => (*code).flatten(),
            Ok(Err(_)) | Err(_) => None,
        };
        code.filter(|code| *code > 128)
    }

    async fn exec_via_agent(&self, argv: &[String], opts: ExecOpts) -> Result<ExecResult> {
        let channel = &*self.channel;
        let ExecOpts {
            env,
            workdir,
            stdin,
            stdout,
            stderr,
            keep_stdin_open,
            user: _,
        } = opts;
        let id = channel.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, mut rx) = mpsc::channel(QUEUED_CHUNKS);
        channel.slots().insert(id, tx);
        let mut flight = InFlight {
            channel,
            id,
            feeder: None,
            done: false,
        };
        let request = StartRequest {
            argv: argv.to_vec(),
            env,
            workdir,
            stdin: stdin.is_some() || keep_stdin_open,
        };
        if channel.to_agent.send(Frame::Start(id, request)).is_err() {
            flight.done = true;
            channel.slots().remove(&id);
            return Err(lost(
                self.inner.driver(),
                "the exec agent's channel is closed",
            ));
        }
        if let Some(mut reader) = stdin {
            let to_agent = channel.to_agent.clone();
            flight.feeder = Some(tokio::spawn(async move {
                let mut buffer = vec![0u8; CHUNK];
                loop {
                    match reader.read(&mut buffer).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if to_agent
                                .send(Frame::Stdin(id, buffer[..n].to_vec()))
                                .is_err()
                            {
                                return;
                            }
                        }
                    }
                }
                if !keep_stdin_open {
                    let _ = to_agent.send(Frame::StdinEnd(id));
                }
            }));
        }
        let program = std::path::PathBuf::from(&argv[0]);
        let sink_error = |operation: &'static str| {
            let path = program.clone();
            move |source| Error::Io {
                operation,
                path,
                source,
            }
        };
        let (mut stdout, mut stderr) = (stdout, stderr);
        let mut out_buf = stdout.is_none().then(Vec::new);
        let mut err_buf = stderr.is_none().then(Vec::new);
        let exit_code = loop {
            let Some(delivery) = rx.recv().await else {
                flight.done = true;
                // An agent killed by a signal (the container killed, the cgroup OOM-killed) took
                // the command with it: report what the driver's exec would have, 128 + signal.
                match self.killed_agent_code().await {
                    Some(code) => break code,
                    None => {
                        return Err(lost(
                            self.inner.driver(),
                            "the exec agent went away while the command ran",
                        ));
                    }
                }
            };
            let (bytes, sink, buffer, label) = match delivery {
                Delivery::Exit(code) => break code,
                Delivery::Stdout(bytes) => (bytes, &mut stdout, &mut out_buf, "write stdout of"),
                Delivery::Stderr(bytes) => (bytes, &mut stderr, &mut err_buf, "write stderr of"),
            };
            match (sink.as_mut(), buffer.as_mut()) {
                (Some(sink), _) => sink.write_all(&bytes).await.map_err(sink_error(label))?,
                (None, Some(buffer)) => buffer.extend_from_slice(&bytes),
                (None, None) => {}
            }
        };
        flight.done = true;
        for (sink, label) in [(stdout, "close stdout of"), (stderr, "close stderr of")] {
            if let Some(mut sink) = sink {
                close(&mut sink).await.map_err(sink_error(label))?;
            }
        }
        Ok(ExecResult {
            exit_code,
            stdout: out_buf.map(Bytes::from),
            stderr: err_buf.map(Bytes::from),
        })
    }
}

fn lost(driver: &str, why: &str) -> Error {
    Error::Engine {
        driver: driver.to_owned(),
        operation: "exec through the exec agent".to_owned(),
        source: why.to_owned().into(),
    }
}

async fn close<W: AsyncWrite + Unpin + ?Sized>(sink: &mut W) -> std::io::Result<()> {
    sink.flush().await?;
    sink.shutdown().await
}

#[async_trait]
impl SandboxRun for AgentRun {
    fn driver(&self) -> &str {
        self.inner.driver()
    }

    fn id(&self) -> &str {
        self.inner.id()
    }

    fn egress_enforced(&self) -> Option<bool> {
        self.inner.egress_enforced()
    }

    /// Through the agent while it answers and the exec keeps the agent's user; else the
    /// driver's exec. An empty argv is refused either way.
    async fn exec(&self, argv: &[String], opts: ExecOpts) -> Result<ExecResult> {
        if argv.is_empty() {
            return Err(Error::InvalidArgument {
                label: "argv".to_owned(),
                value: String::new(),
                rule: ArgRule::Empty,
            });
        }
        if opts.user.is_some() || !self.agent_alive() {
            return self.inner.exec(argv, opts).await;
        }
        self.exec_via_agent(argv, opts).await
    }

    /// Ends the agent (its stdin closes: it kills what it started), then the sandbox.
    async fn cleanup(&self) -> Result<()> {
        self.channel.stop();
        self.inner.cleanup().await
    }

    fn secret_file_refresher(&self) -> Option<&dyn SecretFileRefresher> {
        self.inner.secret_file_refresher()
    }

    fn workspace_file_refresher(&self) -> Option<&dyn WorkspaceFileRefresher> {
        self.inner.workspace_file_refresher()
    }

    fn workspace_exporter(&self) -> Option<&dyn WorkspaceExporter> {
        self.inner.workspace_exporter()
    }

    fn workspace_head_capturer(&self) -> Option<&dyn WorkspaceHeadCapturer> {
        self.inner.workspace_head_capturer()
    }

    fn run_files_drainer(&self) -> Option<&dyn RunFilesDrainer> {
        self.inner.run_files_drainer()
    }
}
