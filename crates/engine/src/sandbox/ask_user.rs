//! The per-run ask-user listener (seed step 18): how a delegate CLI's `ask_user` reaches the
//! engine. The CLI is given one MCP server, `iterion` (`iterion __mcp-ask-user`, a stdio server
//! run by the CLI itself, inside the sandbox when the run has one); its one tool, `ask_user
//! {question}`, sends the question here, over a Unix socket or a TCP connection ([`Reach`]):
//!
//! - in a docker, podman or namespace sandbox, `<run dir>/net/ask-user.sock`, which the driver
//!   binds read-only at `/run/iterion/net` with the proxy's socket ([`CONTAINER_SOCKET`]); the
//!   decision that the run needs it ([`iterion_sandbox::RunInfo::listener_planned`]) is made
//!   before the container is created, because the mount is part of its shape;
//! - on the host (an unsandboxed run), in a fresh 0700 directory of the host's temp dir;
//! - a driver without a host-shared run dir (kubernetes: its proxy is on TCP, reached over the
//!   pod network) gets a TCP listener bound where the proxy binds (`0.0.0.0:0`), advertised
//!   where the proxy is (`ITERION_POD_IP:<port>`): the pod's NetworkPolicy admits the runner pod
//!   on every port, and nothing else.
//!
//! **What it accepts.** One JSON line, [`AskRequest`] `{token, run, node, question}`, at most
//! [`REQUEST_MAX_BYTES`], within [`REQUEST_TIMEOUT`]; one JSON line back, [`AskReply`]. The
//! token is minted per listener ([`AskUserListener::bind`]) and compared in constant time; a
//! request with another token (a second run's, a guess) is refused. The question is bounded
//! ([`QUESTION_MAX_BYTES`]). The node must hold an open [`Slot`]: the engine opens one for an
//! `interaction: ask` delegate node while its CLI runs, keyed by the run it belongs to and its
//! name (a subbot child adopting its parent's sandbox shares the parent's listener, so a child's
//! `asker` and its parent's `asker` are two slots), and only that node's question reaches that
//! node ([`AskUserListener::open`]) — a non-interactive node, a node that is not running, or a
//! node of another run of the tree, is refused even with the right token. Every refusal is a
//! run-log line.
//!
//! The socket is world-connectable (0666) because the container's user is the workflow's
//! choice; the token and the slot are the gate, the directory (the run dir, or a 0700 dir on the
//! host) is where it can be reached from. The TCP listener has no directory: the token and the
//! slot are the whole gate there, as the proxy's token is on the same address.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use iterion_netproxy::ProxyToken;
use iterion_sandbox::{LogLevel, RunLog};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// The socket's name in the run's `net/` dir.
pub const SOCKET_NAME: &str = "ask-user.sock";
/// Where the socket is inside a sandbox that binds the run's `net/` dir.
pub const CONTAINER_SOCKET: &str = "/run/iterion/net/ask-user.sock";
/// The variable naming the socket, for `iterion __mcp-ask-user` (a Unix socket's path).
pub const SOCKET_ENV: &str = "ITERION_ASK_USER_SOCKET";
/// The variable naming the listener's TCP address (`IP:PORT`), for `iterion __mcp-ask-user`
/// where no socket can be shared (kubernetes). Exactly one of it and [`SOCKET_ENV`] is set.
pub const ADDR_ENV: &str = "ITERION_ASK_USER_ADDR";
/// The variable naming the run the asking node belongs to, for `iterion __mcp-ask-user`.
pub const RUN_ENV: &str = "ITERION_ASK_USER_RUN";
/// The variable carrying the run's token, for `iterion __mcp-ask-user`.
pub const TOKEN_ENV: &str = "ITERION_ASK_USER_TOKEN";
/// The variable naming the asking node, for `iterion __mcp-ask-user`.
pub const NODE_ENV: &str = "ITERION_ASK_USER_NODE";
/// The MCP server's name as the CLI sees it (claude names its tool `mcp__iterion__ask_user`).
pub const MCP_SERVER_NAME: &str = "iterion";
/// The hidden subcommand that runs the MCP server.
pub const MCP_SUBCOMMAND: &str = "__mcp-ask-user";
/// The longest question accepted, in bytes.
pub const QUESTION_MAX_BYTES: usize = 8 * 1024;
/// The longest request line accepted, in bytes (the question, JSON-escaped, and the rest).
pub const REQUEST_MAX_BYTES: usize = 64 * 1024;
/// How long a connection has to send its request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The most connections the listener holds at once. One more is closed as soon as it is
/// accepted: a sandbox opening connections by the thousand (each held up to
/// [`REQUEST_TIMEOUT`]) would otherwise take the engine's file descriptors, and with them the
/// store, every other socket and the run.
pub const MAX_CONNECTIONS: usize = 32;

/// The connections one network peer may hold open at once on a TCP listener (kubernetes, where
/// any pod that reaches the runner can connect): a peer that holds its share cannot take the
/// others', so the sandbox's own asking node still gets through. A question is one connection.
pub const MAX_CONNECTIONS_PER_PEER: usize = 4;

/// What each TCP peer holds open now; an entry goes when its last connection ends.
#[derive(Default)]
struct Peers(std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>);

/// One connection of a peer; dropping it gives the peer's share back.
struct PeerPermit {
    peers: Arc<Peers>,
    ip: std::net::IpAddr,
}

impl Peers {
    /// A permit for one more connection of `ip`, or `None` when it holds its share already.
    fn take(self: &Arc<Self>, ip: std::net::IpAddr) -> Option<PeerPermit> {
        let mut held = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let count = held.entry(ip).or_insert(0);
        if *count >= MAX_CONNECTIONS_PER_PEER {
            return None;
        }
        *count += 1;
        Some(PeerPermit {
            peers: Arc::clone(self),
            ip,
        })
    }
}

impl Drop for PeerPermit {
    fn drop(&mut self) {
        let mut held = self.peers.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = held.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.ip);
            }
        }
    }
}
/// The most refusals one listener writes to the run log; past it, one line says so and the rest
/// are only answered (each refusal is the sandbox's to provoke, as often as it likes).
pub const LOGGED_REFUSALS_MAX: usize = 100;
/// The most bytes of a run or node name a refusal quotes (the log line is the sandbox's to
/// provoke, as often as it likes: each stays small).
const QUOTED_NAME_MAX: usize = 80;

/// Whether `wf` needs the listener: some agent node of a delegate backend asks the operator
/// (`interaction: ask`), in `wf` itself or in a subbot child that would run in its sandbox. A
/// claw node's `ask_user` travels over the runner channel instead.
///
/// Children are compiled into the workflow's IR (`SubbotNode.child`), so every child a run can
/// launch is known before `Driver::start`. A child that declares sandbox fields of its own
/// (SANDBOX.md §14 rule 1) is a launch of its own with its own listener, so it is not counted;
/// one that adopts (its own children counted the same way) shares this one.
pub(crate) fn wanted(wf: &iterion_dsl::ir::Workflow) -> bool {
    use iterion_dsl::ir::{Interaction, NodeBody};
    wf.nodes.iter().any(|n| match &n.body {
        NodeBody::Agent(a) => a.backend.is_delegate() && a.interaction == Interaction::Ask,
        NodeBody::Subbot(s) => s
            .child
            .as_deref()
            .is_some_and(|child| child.declared_sandbox_fields.is_empty() && wanted(child)),
        _ => false,
    })
}

/// How a process where the CLI runs reaches the listener: what `iterion __mcp-ask-user` is
/// told ([`Reach::env`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reach {
    /// A Unix socket at this path.
    Unix(String),
    /// A TCP address, `IP:PORT`.
    Tcp(String),
}

impl Reach {
    /// The variable naming it ([`SOCKET_ENV`] or [`ADDR_ENV`]) and its value.
    pub fn env(&self) -> (&'static str, String) {
        match self {
            Reach::Unix(path) => (SOCKET_ENV, path.clone()),
            Reach::Tcp(addr) => (ADDR_ENV, addr.clone()),
        }
    }
}

/// One question, as `iterion __mcp-ask-user` sends it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AskRequest {
    /// The listener's token.
    pub token: String,
    /// The run the asking node belongs to (a subbot child's own run id, in its parent's
    /// listener).
    pub run: String,
    /// The asking node.
    pub node: String,
    /// The question.
    pub question: String,
}

impl std::fmt::Debug for AskRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AskRequest")
            .field("run", &self.run)
            .field("node", &self.node)
            .field("question", &self.question)
            .finish_non_exhaustive()
    }
}

/// The listener's answer to one request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AskReply {
    /// The operator answered at once (an interactive terminal): the tool's result.
    Answer {
        /// The answer.
        text: String,
    },
    /// Nobody can answer now: the run pauses, the CLI session ends and is resumed with the
    /// answer (`iterion resume RUN --answer TEXT`).
    Paused,
    /// The request was refused.
    Refused {
        /// Why.
        reason: String,
    },
}

/// A question that reached an open slot, waiting for its reply.
pub(crate) struct Asked {
    /// The question.
    pub question: String,
    /// Where the reply goes (the asking connection).
    pub reply: oneshot::Sender<AskReply>,
}

/// A slot's key: the run the node belongs to, and the node.
type SlotKey = (String, String);
type Slots = Arc<Mutex<HashMap<SlotKey, mpsc::Sender<Asked>>>>;

/// A node's permission to ask, while its CLI runs: the questions it sends arrive on `asked`.
/// Dropping it closes the slot (a later question from that node is refused).
pub(crate) struct Slot {
    key: SlotKey,
    slots: Slots,
    /// The questions of this node.
    pub asked: mpsc::Receiver<Asked>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.key);
    }
}

/// The listener of one run.
pub(crate) struct AskUserListener {
    token: ProxyToken,
    /// The socket's host path; `None` for a TCP listener.
    path: Option<PathBuf>,
    /// How the CLI reaches it where it runs.
    reach: Reach,
    /// A host dir made for the socket (an unsandboxed run), removed at shutdown.
    own_dir: Option<PathBuf>,
    slots: Slots,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for AskUserListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AskUserListener")
            .field("path", &self.path)
            .field("reach", &self.reach)
            .finish_non_exhaustive()
    }
}

/// Why the listener could not be bound.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ListenError {
    /// The token could not be minted.
    #[error("ask-user token: {0}")]
    Token(String),
    /// The TCP listener could not be bound.
    #[error("ask-user listener on {addr}: {source}")]
    Tcp {
        /// The address.
        addr: std::net::SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// The socket (or its directory) could not be made.
    #[error("ask-user socket {}: {source}", path.display())]
    Socket {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

impl AskUserListener {
    /// Mints the run's token (told to `redactor`, so no record shows it) and listens on
    /// `<dir>/ask-user.sock`, making `dir` (0755) when missing. `seen_at` is the socket's path
    /// where the CLI runs (in the sandbox); `None`: the host path itself.
    pub(crate) async fn bind(
        dir: &Path,
        seen_at: Option<&str>,
        redactor: &crate::records::secrets::Redactor,
        run_log: Arc<dyn RunLog>,
    ) -> Result<AskUserListener, ListenError> {
        use std::os::unix::fs::PermissionsExt as _;
        let token = ProxyToken::generate().map_err(|e| ListenError::Token(e.to_string()))?;
        redactor.add_token(token.reveal());
        let socket_error = |path: &Path, source| ListenError::Socket {
            path: path.to_owned(),
            source,
        };
        if !dir.exists() {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|e| socket_error(dir, e))?;
            tokio::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
                .await
                .map_err(|e| socket_error(dir, e))?;
        }
        let path = dir.join(SOCKET_NAME);
        let _ = tokio::fs::remove_file(&path).await;
        let listener = UnixListener::bind(&path).map_err(|e| socket_error(&path, e))?;
        // The container's user is the workflow's choice: the token is the gate.
        tokio::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666))
            .await
            .map_err(|e| socket_error(&path, e))?;
        let slots: Slots = Arc::default();
        let task = tokio::spawn(accept_loop(
            Accept::Unix(listener),
            Arc::new(token.clone()),
            Arc::clone(&slots),
            run_log,
        ));
        let reach =
            Reach::Unix(seen_at.map_or_else(|| path.to_string_lossy().into_owned(), str::to_owned));
        Ok(AskUserListener {
            token,
            path: Some(path),
            reach,
            own_dir: None,
            slots,
            task,
        })
    }

    /// Mints the run's token (as [`bind`](Self::bind)) and listens on TCP `addr` (the proxy's
    /// bind address: `0.0.0.0:0` on kubernetes), advertised as `<advertise_host>:<port>`, the
    /// host the sandbox reaches the proxy at.
    pub(crate) async fn bind_tcp(
        addr: std::net::SocketAddr,
        advertise_host: &str,
        redactor: &crate::records::secrets::Redactor,
        run_log: Arc<dyn RunLog>,
    ) -> Result<AskUserListener, ListenError> {
        let token = ProxyToken::generate().map_err(|e| ListenError::Token(e.to_string()))?;
        redactor.add_token(token.reveal());
        let tcp_error = |source| ListenError::Tcp { addr, source };
        let listener = TcpListener::bind(addr).await.map_err(tcp_error)?;
        let port = listener.local_addr().map_err(tcp_error)?.port();
        let host = match advertise_host.parse::<std::net::IpAddr>() {
            Ok(std::net::IpAddr::V6(v6)) => format!("[{v6}]"),
            _ => advertise_host.to_owned(),
        };
        let slots: Slots = Arc::default();
        let task = tokio::spawn(accept_loop(
            Accept::Tcp(listener),
            Arc::new(token.clone()),
            Arc::clone(&slots),
            run_log,
        ));
        Ok(AskUserListener {
            token,
            path: None,
            reach: Reach::Tcp(format!("{host}:{port}")),
            own_dir: None,
            slots,
            task,
        })
    }

    /// [`bind`](Self::bind) in a new 0700 directory under `tmp` (an unsandboxed run: the CLI and
    /// its MCP server run as this user), removed at shutdown.
    pub(crate) async fn bind_on_host(
        tmp: &Path,
        redactor: &crate::records::secrets::Redactor,
        run_log: Arc<dyn RunLog>,
    ) -> Result<AskUserListener, ListenError> {
        use std::os::unix::fs::DirBuilderExt as _;
        let dir = tmp.join(format!("iterion-ask-{}", uuid::Uuid::now_v7().simple()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|source| ListenError::Socket {
                path: dir.clone(),
                source,
            })?;
        match AskUserListener::bind(&dir, None, redactor, run_log).await {
            Ok(mut listener) => {
                listener.own_dir = Some(dir);
                Ok(listener)
            }
            Err(error) => {
                let _ = std::fs::remove_dir_all(&dir);
                Err(error)
            }
        }
    }

    /// The run's token. Never log it.
    pub(crate) fn token(&self) -> &str {
        self.token.reveal()
    }

    /// The socket's host path (`None`: a TCP listener).
    #[cfg(test)]
    pub(crate) fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// How the CLI reaches the listener where it runs.
    pub(crate) fn reach(&self) -> &Reach {
        &self.reach
    }

    /// Opens the slot of node `node` of run `run`: from now until the slot is dropped, its
    /// questions arrive on [`Slot::asked`]. A node of a run holds at most one (a second open
    /// replaces the first); a node of the same name in another run of the tree (a subbot child
    /// in its parent's sandbox) has a slot of its own.
    pub(crate) fn open(&self, run: &str, node: &str) -> Slot {
        let (tx, rx) = mpsc::channel(4);
        let key = (run.to_owned(), node.to_owned());
        self.slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.clone(), tx);
        Slot {
            key,
            slots: Arc::clone(&self.slots),
            asked: rx,
        }
    }

    /// Stops listening and removes the socket (and the host dir made for it).
    pub(crate) async fn shutdown(&self) {
        self.task.abort();
        if let Some(path) = &self.path {
            let _ = tokio::fs::remove_file(path).await;
        }
        if let Some(dir) = &self.own_dir {
            let _ = tokio::fs::remove_dir_all(dir).await;
        }
    }
}

/// The listener's run log: at most [`LOGGED_REFUSALS_MAX`] lines, then one saying so.
struct CappedLog {
    inner: Arc<dyn RunLog>,
    written: std::sync::atomic::AtomicUsize,
}

impl RunLog for CappedLog {
    fn line(&self, level: LogLevel, line: &str) {
        let n = self
            .written
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if n < LOGGED_REFUSALS_MAX {
            self.inner.line(level, line);
        } else if n == LOGGED_REFUSALS_MAX {
            self.inner.line(
                LogLevel::Warn,
                &format!(
                    "ask-user: {LOGGED_REFUSALS_MAX} refusals logged; further ones are refused without a log line"
                ),
            );
        }
    }
}

/// What the listener accepts on.
enum Accept {
    Unix(UnixListener),
    Tcp(TcpListener),
}

async fn accept_loop(
    listener: Accept,
    token: Arc<ProxyToken>,
    slots: Slots,
    run_log: Arc<dyn RunLog>,
) {
    let run_log: Arc<dyn RunLog> = Arc::new(CappedLog {
        inner: run_log,
        written: std::sync::atomic::AtomicUsize::new(0),
    });
    let held = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let peers = Arc::new(Peers::default());
    let mut turned_away = false;
    loop {
        let (token, slots, run_log) =
            (Arc::clone(&token), Arc::clone(&slots), Arc::clone(&run_log));
        // Over the bound, the connection is closed at once (dropped unserved).
        let admit = |run_log: &dyn RunLog, turned_away: &mut bool| {
            let permit = Arc::clone(&held).try_acquire_owned().ok();
            if permit.is_none() && !std::mem::replace(turned_away, true) {
                run_log.line(
                    LogLevel::Warn,
                    &format!(
                        "ask-user: {MAX_CONNECTIONS} connections open already; closing further ones until one ends"
                    ),
                );
            } else if permit.is_some() {
                *turned_away = false;
            }
            permit
        };
        let accepted = match &listener {
            Accept::Unix(l) => l.accept().await.map(|(stream, _)| {
                if let Some(permit) = admit(run_log.as_ref(), &mut turned_away) {
                    tokio::spawn(async move {
                        serve(stream, &token, &slots, run_log.as_ref()).await;
                        drop(permit);
                    });
                }
            }),
            Accept::Tcp(l) => l.accept().await.map(|(stream, peer)| {
                // The peer's share first: a peer over it never takes one of the shared permits.
                let Some(share) = peers.take(peer.ip()) else {
                    return;
                };
                if let Some(permit) = admit(run_log.as_ref(), &mut turned_away) {
                    tokio::spawn(async move {
                        serve(stream, &token, &slots, run_log.as_ref()).await;
                        drop((permit, share));
                    });
                }
            }),
        };
        if accepted.is_err() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Reads one request line of at most `max` bytes (without its newline); `Err` names why not.
async fn read_request<S: AsyncRead + Unpin>(stream: &mut S, max: usize) -> Result<Vec<u8>, String> {
    let mut line = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = stream
            .read(&mut buf)
            .await
            .map_err(|e| format!("the request could not be read: {e}"))?;
        if n == 0 {
            return Ok(line);
        }
        if let Some(end) = buf[..n].iter().position(|b| *b == b'\n') {
            line.extend_from_slice(&buf[..end]);
            return if line.len() > max {
                Err(format!("the request is over {max} bytes"))
            } else {
                Ok(line)
            };
        }
        line.extend_from_slice(&buf[..n]);
        if line.len() > max {
            return Err(format!("the request is over {max} bytes"));
        }
    }
}

/// A name from a request, as a refusal quotes it: at most [`QUOTED_NAME_MAX`] bytes.
fn quoted(name: &str) -> String {
    let kept = iterion_agent::text::truncate_bytes(name, QUOTED_NAME_MAX);
    if kept.len() < name.len() {
        format!("{kept}…")
    } else {
        name.to_owned()
    }
}

/// The verdict on one request: the slot it goes to, or why it is refused. The checks, in order:
/// the token (constant time), the question's size and content, an open slot for the node of
/// that run.
fn admit(
    request: &AskRequest,
    token: &ProxyToken,
    slots: &Slots,
) -> Result<mpsc::Sender<Asked>, String> {
    let bearer = format!("Bearer {}", request.token);
    if request.token.is_empty() || !token.authorizes(Some(bearer.as_bytes())) {
        return Err("the token is not this run's".to_owned());
    }
    if request.question.len() > QUESTION_MAX_BYTES {
        return Err(format!(
            "the question is over {QUESTION_MAX_BYTES} bytes ({} bytes)",
            request.question.len()
        ));
    }
    if request.question.trim().is_empty() {
        return Err("the question is empty".to_owned());
    }
    slots
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&(request.run.clone(), request.node.clone()))
        .cloned()
        .ok_or_else(|| {
            format!(
                "node {:?} of run {:?} may not ask: it is not an interaction: ask delegate node running now",
                quoted(&request.node),
                quoted(&request.run)
            )
        })
}

async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    token: &ProxyToken,
    slots: &Slots,
    run_log: &dyn RunLog,
) {
    let read = tokio::time::timeout(
        REQUEST_TIMEOUT,
        read_request(&mut stream, REQUEST_MAX_BYTES),
    )
    .await
    .unwrap_or_else(|_| Err("no request within the time allowed".to_owned()));
    let verdict = read.and_then(|line| {
        let request: AskRequest = serde_json::from_slice(&line)
            .map_err(|e| format!("the request is not an ask-user request: {e}"))?;
        let slot = admit(&request, token, slots)?;
        Ok((request, slot))
    });
    let reply = match verdict {
        Err(reason) => {
            run_log.line(
                LogLevel::Warn,
                &format!("ask-user: refused a request: {reason}"),
            );
            AskReply::Refused { reason }
        }
        Ok((request, slot)) => {
            let (tx, rx) = oneshot::channel();
            let asked = Asked {
                question: request.question,
                reply: tx,
            };
            match slot.send(asked).await {
                Ok(()) => rx.await.unwrap_or(AskReply::Refused {
                    reason: "the node ended before it could be asked".to_owned(),
                }),
                Err(_) => AskReply::Refused {
                    reason: format!("node {:?} is no longer running", quoted(&request.node)),
                },
            }
        }
    };
    let mut line = serde_json::to_vec(&reply).unwrap_or_default();
    line.push(b'\n');
    let _ = stream.write_all(&line).await;
    let _ = stream.shutdown().await;
    // A refused oversized request may still be arriving: closing with it unread would reset the
    // connection and lose the refusal. Read (and drop) what is left, bounded in time and size.
    let drain = async {
        let mut buf = [0u8; 8192];
        let mut left = 4 * REQUEST_MAX_BYTES;
        while left > 0 {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), drain).await;
}

#[cfg(test)]
#[path = "ask_user_tests.rs"]
mod tests;
