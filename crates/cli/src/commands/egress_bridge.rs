//! `iterion __egress-bridge --listen ADDR=SOCKET…` (hidden): the in-container half of egress
//! enforcement (SANDBOX.md §4.6, ARCHITECTURE.md §5 decision 3).
//!
//! Under a proxy the container has no network interface but loopback. The engine execs this
//! command (as `0:0`, from the read-only bind `/run/iterion/bin/iterion`) right after start:
//!
//! ```text
//! /run/iterion/bin/iterion __egress-bridge --listen 127.0.0.1:3128=/run/iterion/net/proxy.sock \
//!     [--listen 127.0.0.1:3129=/run/iterion/net/ask-user.sock]
//! ```
//!
//! It binds every listener, writes the single line `ready` to stdout, then splices each accepted
//! TCP connection to a fresh connection on the matching Unix socket (bind-mounted from
//! `<run dir>/net/` on the host), with half-close passed through in both directions. The proxy
//! behind the socket does the authentication and the policy; the bridge decides nothing.
//!
//! - It reads no environment variable and no secret, and logs to stderr only (no tracing
//!   subscriber: `RUST_LOG` is not read). Stdout carries `ready` and nothing else.
//! - Setup failures exit 1 before `ready` with one `error: …` line naming what is wrong: a
//!   listener that cannot be bound, a socket path that is missing or not a socket. Bad flags exit
//!   2 (clap).
//! - Listeners must be loopback addresses: the bridge is a route out of the sandbox, and a
//!   non-loopback listener would offer that route to whatever else shares the network namespace.
//! - It is never restarted. If it dies, nothing listens on the port and the container has no route
//!   at all: enforcement fails closed.
//! - A connection whose socket cannot be reached (the proxy is gone) is closed at once and logged;
//!   the bridge keeps serving the others.
//!
//! It runs inside images the workflow chooses, so the binary that carries it is built statically
//! (`scripts/build-static.sh`), and the command avoids anything that needs NSS (no name or user
//! lookups).
use std::io::Write as _;
use std::os::unix::fs::FileTypeExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use tokio::net::{TcpListener, TcpStream, UnixStream};

use crate::args::{EgressBridgeArgs, ListenSpec};
use crate::exit::Exit;

/// The line written to stdout once every listener is bound (SANDBOX.md §4.6).
pub const READY_LINE: &str = "ready";

/// Buffer size per direction of one spliced connection: large enough that a bulk transfer is not
/// syscall-bound, small enough that a thousand idle tunnels stay cheap.
const SPLICE_BUFFER_BYTES: usize = 64 * 1024;

/// Pause after a failed `accept` (e.g. out of file descriptors) so that the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Runs the bridge until the process is killed. Returns only on a setup failure (exit 1, with
/// the reason on stderr, before `ready`).
pub fn run(args: EgressBridgeArgs) -> Exit {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: egress bridge: cannot start the async runtime: {e}");
            return Exit::Failed;
        }
    };
    runtime.block_on(run_async(args))
}

/// [`run`] on the caller's runtime.
pub async fn run_async(args: EgressBridgeArgs) -> Exit {
    match serve(args.listen, args.dns).await {
        Ok(never) => match never {},
        Err(e) => {
            eprintln!("error: egress bridge: {e:#}");
            Exit::Failed
        }
    }
}

/// Checks the sockets, binds every listener, prints `ready`, then serves forever.
async fn serve(
    specs: Vec<ListenSpec>,
    dns: Option<ListenSpec>,
) -> anyhow::Result<std::convert::Infallible> {
    if let Some(dns) = dns {
        check_socket(&dns.socket)?;
        let token = read_token().await?;
        crate::commands::transparent::Transparent::new(dns.socket.clone(), token)
            .serve(dns.addr)
            .await?;
    }
    let mut bound = Vec::with_capacity(specs.len());
    for spec in specs {
        check_socket(&spec.socket)?;
        let listener = TcpListener::bind(spec.addr)
            .await
            .with_context(|| format!("cannot listen on {}", spec.addr))?;
        bound.push((listener, spec));
    }
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{READY_LINE}")
            .and_then(|()| stdout.flush())
            .context("cannot write the ready line to stdout")?;
    }
    let mut tasks = tokio::task::JoinSet::new();
    for (listener, spec) in bound {
        tasks.spawn(accept_loop(listener, spec));
    }
    // The accept loops never end; a panic in one would surface here.
    match tasks.join_next().await {
        Some(Err(e)) => bail!("a listener task failed: {e}"),
        Some(Ok(never)) => match never {},
        None => bail!("no listener"),
    }
}

/// The run's proxy token, the first line of stdin (never argv: it would show in `ps`).
async fn read_token() -> anyhow::Result<String> {
    use tokio::io::AsyncBufReadExt as _;
    use tokio::io::AsyncReadExt as _;
    let mut line = String::new();
    tokio::io::BufReader::new(tokio::io::stdin())
        .take(1024)
        .read_line(&mut line)
        .await
        .context("cannot read the proxy token from stdin")?;
    let token = line.trim().to_owned();
    if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
        bail!("--dns needs the run's proxy token on the first line of stdin");
    }
    Ok(token)
}

/// The socket must exist and be a socket: a missing one means the engine mounted the wrong path
/// or the proxy is not listening, which the engine reports as `SANDBOX_SETUP_FAILED`.
fn check_socket(path: &Path) -> anyhow::Result<()> {
    let meta = std::fs::metadata(path).with_context(|| {
        format!(
            "socket {} is not there (is the proxy listening and its socket mounted?)",
            path.display()
        )
    })?;
    if !meta.file_type().is_socket() {
        bail!("{} is not a Unix socket", path.display());
    }
    Ok(())
}

async fn accept_loop(listener: TcpListener, spec: ListenSpec) -> std::convert::Infallible {
    loop {
        match listener.accept().await {
            Ok((tcp, _peer)) => {
                tokio::spawn(splice(tcp, spec.socket.clone()));
            }
            Err(e) => {
                eprintln!("egress bridge: accept on {} failed: {e}", spec.addr);
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
    }
}

/// Carries one connection: bytes both ways until both sides are done, each EOF passed on as a
/// write shutdown of the other side (half-close).
async fn splice(mut tcp: TcpStream, socket: PathBuf) {
    let _ = tcp.set_nodelay(true);
    let mut unix = match UnixStream::connect(&socket).await {
        Ok(unix) => unix,
        Err(e) => {
            // Dropping `tcp` closes the client's connection: no route without the proxy.
            eprintln!("egress bridge: cannot connect to {}: {e}", socket.display());
            return;
        }
    };
    if let Err(e) = tokio::io::copy_bidirectional_with_sizes(
        &mut tcp,
        &mut unix,
        SPLICE_BUFFER_BYTES,
        SPLICE_BUFFER_BYTES,
    )
    .await
    {
        // Resets and broken pipes are how clients and proxies end connections: not worth a line
        // each, but anything else is.
        if !matches!(
            e.kind(),
            std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::BrokenPipe
                | std::io::ErrorKind::ConnectionAborted
                | std::io::ErrorKind::NotConnected
        ) {
            eprintln!("egress bridge: connection to {}: {e}", socket.display());
        }
    }
}
