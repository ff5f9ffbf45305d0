//! The engine's side of one namespace sandbox: starting it (the keeper thread, the uid/gid maps,
//! waiting for `ready`), exec'ing in it, tearing it down.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::io::{BufRead as _, BufReader, Write as _};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use iterion_sandbox::{Error, ExecOpts, ExecResult, LogLevel, Result, RunLog, SandboxRun};
use nix::fcntl::OFlag;
use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::init::{Channels, ChildInputs};
use crate::plan::Plan;
use crate::proto::{ExecRequest, parse_exit};

/// The driver's name, in events and errors.
pub(crate) const DRIVER: &str = "namespace";
/// How long the setup may take before the sandbox is killed and the start fails.
const SETUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long teardown waits for the namespace to be gone.
const TEARDOWN_TIMEOUT: Duration = Duration::from_secs(5);

fn setup_error(step: &str, reason: impl Into<String>) -> Error {
    Error::NamespaceSetup {
        step: step.to_owned(),
        reason: reason.into(),
    }
}

/// What the engine keeps of a started sandbox.
pub(crate) struct NamespaceRun {
    id: String,
    plan: Plan,
    ctl: Mutex<Option<OwnedFd>>,
    /// A pidfd of the init (pid 1 of the namespace): killing it ends every process in it.
    init: OwnedFd,
    /// Signalled by the keeper once P1 (and so the whole namespace) is gone.
    gone: Arc<tokio::sync::Notify>,
    gone_flag: Arc<AtomicBool>,
    /// What the start made under the run dir, removed at teardown.
    made: Vec<PathBuf>,
    closed: AtomicBool,
    log: Arc<dyn RunLog>,
    /// `full`, `partial` or `none`.
    pub landlock: String,
    /// The sandbox's cgroup, one directory per hierarchy (empty without limits).
    pub cgroup_paths: Vec<PathBuf>,
}

/// What [`start`] is given besides the plan.
pub(crate) struct StartInputs {
    pub run_id: String,
    pub plan: Plan,
    pub staging: PathBuf,
    pub made: Vec<PathBuf>,
    pub log: Arc<dyn RunLog>,
    /// The sandbox's cgroup, made and filled (`None`: no limit asked, or none can be applied).
    /// The keeper removes it once the sandbox's processes are gone.
    pub cgroup: Option<crate::cgroup::SandboxCgroup>,
}

/// Starts the sandbox: opens the bind sources, forks on a keeper thread, writes the maps, waits
/// for the init's `ready`. Blocking (call it on a blocking thread).
///
/// # Errors
///
/// [`Error::NamespaceSetup`] naming the step that failed; nothing is left running.
pub(crate) fn start(inputs: StartInputs) -> Result<NamespaceRun> {
    let StartInputs {
        run_id,
        mut plan,
        staging,
        made,
        log,
        cgroup,
    } = inputs;
    let cgroup_paths = cgroup
        .as_ref()
        .map(crate::cgroup::SandboxCgroup::paths)
        .unwrap_or_default();
    let bind_sources = plan
        .binds
        .iter()
        .map(|b| {
            crate::init::Pinned::new(&b.source).map_err(|e| {
                setup_error(
                    &format!("bind source {} ({})", b.source.display(), b.purpose),
                    e.to_string(),
                )
            })
        })
        .collect::<Result<Vec<_>>>()?;
    // What a bind mounts is what the source is, found when it was pinned.
    for (bind, pinned) in plan.binds.iter_mut().zip(&bind_sources) {
        bind.object = if pinned.is_dir {
            crate::plan::Object::Dir
        } else {
            crate::plan::Object::File
        };
    }
    let devices = crate::init::device_names()
        .iter()
        .map(|name| crate::init::Pinned::new(&Path::new("/dev").join(name)).ok())
        .collect();
    let programs = crate::seccomp::compile().map_err(|e| setup_error("seccomp", e))?;
    let staging_c = CString::new(staging.as_os_str().as_bytes())
        .map_err(|_| setup_error("staging dir", "contains NUL"))?;
    let (setup_r, setup_w) =
        nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| setup_error("pipe", e.desc()))?;
    let (go_r, go_w) =
        nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| setup_error("pipe", e.desc()))?;
    let (ctl_engine, ctl_init) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|e| setup_error("socketpair", e.desc()))?;
    let ids = plan.ids;
    let child_inputs = ChildInputs {
        plan: plan.clone(),
        bind_sources,
        devices,
        staging: staging_c,
        programs,
        engine_pid: nix::unistd::getpid(),
        engine_is_root: nix::unistd::geteuid().is_root(),
        cgroup_procs: cgroup
            .as_ref()
            .map(crate::cgroup::SandboxCgroup::procs_fds)
            .unwrap_or_default(),
    };
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(OwnedFd, String)>>();
    let gone = Arc::new(tokio::sync::Notify::new());
    let gone_flag = Arc::new(AtomicBool::new(false));
    let (gone_k, flag_k) = (Arc::clone(&gone), Arc::clone(&gone_flag));
    let close_in_child: [RawFd; 3] = [
        setup_r.as_raw_fd(),
        go_w.as_raw_fd(),
        ctl_engine.as_raw_fd(),
    ];
    std::thread::Builder::new()
        .name(format!(
            "iterion-ns-{}",
            &run_id.chars().take(8).collect::<String>()
        ))
        .spawn(move || {
            let channels = Channels {
                setup_w,
                go_r,
                ctl: ctl_init,
            };
            let p1 = match crate::init::spawn(&child_inputs, &channels, &close_in_child) {
                Ok(pid) => pid,
                Err(errno) => {
                    drop(cgroup);
                    let _ = ready_tx.send(Err(setup_error("fork", errno.desc())));
                    return;
                }
            };
            drop(channels);
            drop(child_inputs);
            let answer = handshake(p1, ids, setup_r, go_w);
            let failed = answer.is_err();
            let _ = ready_tx.send(answer);
            if failed {
                let _ = nix::sys::signal::kill(p1, nix::sys::signal::Signal::SIGKILL);
            }
            while let Err(nix::errno::Errno::EINTR) = nix::sys::wait::waitpid(p1, None) {}
            // P1 reaped P2, the pid namespace's init, whose death took every other process of
            // the sandbox: the cgroup can go (its removal retries while the last ones exit).
            drop(cgroup);
            flag_k.store(true, Ordering::SeqCst);
            gone_k.notify_waiters();
        })
        .map_err(|e| setup_error("keeper thread", e.to_string()))?;
    let (init, landlock) = match ready_rx.recv_timeout(SETUP_TIMEOUT + Duration::from_secs(1)) {
        Ok(Ok(ready)) => ready,
        Ok(Err(error)) => return Err(error),
        Err(_) => return Err(setup_error("setup", "the init did not answer in time")),
    };
    Ok(NamespaceRun {
        id: format!("ns-{run_id}"),
        plan,
        ctl: Mutex::new(Some(ctl_engine)),
        init,
        gone,
        gone_flag,
        made,
        closed: AtomicBool::new(false),
        log,
        landlock,
        cgroup_paths,
    })
}

/// The keeper's half of the setup: the maps once P1 has unshared, then P2's pid (as a pidfd)
/// and its `ready`.
fn handshake(
    p1: nix::unistd::Pid,
    ids: crate::plan::Ids,
    setup_r: OwnedFd,
    go_w: OwnedFd,
) -> Result<(OwnedFd, String)> {
    let mut lines = BufReader::new(std::fs::File::from(setup_r));
    let mut line = String::new();
    let mut next = |line: &mut String| -> Result<String> {
        line.clear();
        match lines.read_line(line) {
            Ok(0) => Err(setup_error("setup", "the sandbox exited during its setup")),
            Ok(_) => {
                let text = line.trim_end().to_owned();
                if let Some(rest) = text.strip_prefix("error ") {
                    let (step, reason) = rest.split_once(": ").unwrap_or((rest, ""));
                    return Err(setup_error(step, reason));
                }
                Ok(text)
            }
            Err(e) => Err(setup_error("setup pipe", e.to_string())),
        }
    };
    if next(&mut line)? != "userns" {
        return Err(setup_error("unshare", "unexpected answer"));
    }
    let write_map = |file: &str, text: &str| -> Result<()> {
        std::fs::OpenOptions::new()
            .write(true)
            .open(format!("/proc/{p1}/{file}"))
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .map_err(|e| setup_error(file, format!("{text:?}: {e}")))
    };
    write_map("setgroups", "deny")?;
    write_map(
        "uid_map",
        &format!("{} {} 1\n", ids.inside_uid, ids.host_uid),
    )?;
    write_map(
        "gid_map",
        &format!("{} {} 1\n", ids.inside_gid, ids.host_gid),
    )?;
    let mut go = std::fs::File::from(go_w);
    go.write_all(b"1")
        .map_err(|e| setup_error("setup pipe", e.to_string()))?;
    let pid_line = next(&mut line)?;
    let pid: i32 = pid_line
        .strip_prefix("pid ")
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| setup_error("fork init", format!("unexpected answer {pid_line:?}")))?;
    let pidfd = crate::init::pidfd_open(pid).map_err(|e| setup_error("pidfd_open", e.desc()))?;
    let ready = next(&mut line)?;
    let landlock = ready
        .strip_prefix("ready landlock=")
        .ok_or_else(|| setup_error("setup", format!("unexpected answer {ready:?}")))?
        .to_owned();
    Ok((pidfd, landlock))
}

impl NamespaceRun {
    /// The workspace inside the sandbox.
    pub(crate) fn workdir(&self) -> &str {
        &self.plan.workdir
    }

    fn closed_error(&self) -> Error {
        Error::SandboxClosed {
            driver: DRIVER.to_owned(),
            sandbox_id: self.id.clone(),
        }
    }

    fn kill(&self) {
        let _ = crate::init::pidfd_kill(self.init.as_fd());
    }
}

/// `(read end, write end)` of a pipe, both close-on-exec.
fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| Error::Io {
        operation: "pipe",
        path: PathBuf::from("/"),
        source: std::io::Error::from(e),
    })
}

/// How long output is still read once the command has exited: what it wrote is in the pipe
/// already; a background process it left holding the pipe must not hold the exec open.
const OUTPUT_GRACE: Duration = Duration::from_millis(100);

/// Reads a command's output into `sink` (or a buffer) until EOF, or until [`OUTPUT_GRACE`]
/// passes without data once `exited` is true.
async fn drain(
    fd: OwnedFd,
    sink: Option<iterion_sandbox::ExecOutput>,
    mut exited: tokio::sync::watch::Receiver<bool>,
) -> std::io::Result<Option<Bytes>> {
    let mut receiver = tokio::net::unix::pipe::Receiver::from_owned_fd(fd)?;
    let mut buffered = Vec::new();
    let mut sink = sink;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = if *exited.borrow() {
            match tokio::time::timeout(OUTPUT_GRACE, receiver.read(&mut buf)).await {
                Ok(read) => read?,
                Err(_) => break,
            }
        } else {
            tokio::select! {
                read = receiver.read(&mut buf) => read?,
                _ = exited.changed() => continue,
            }
        };
        if n == 0 {
            break;
        }
        match sink.as_mut() {
            Some(sink) => sink.write_all(&buf[..n]).await?,
            None => buffered.extend_from_slice(&buf[..n]),
        }
    }
    match sink {
        Some(mut sink) => {
            sink.flush().await?;
            let _ = sink.shutdown().await;
            Ok(None)
        }
        None => Ok(Some(Bytes::from(buffered))),
    }
}

#[async_trait]
impl SandboxRun for NamespaceRun {
    fn driver(&self) -> &str {
        DRIVER
    }

    fn id(&self) -> &str {
        &self.id
    }

    /// The sandbox's network namespace has loopback and nothing else: the only route out is the
    /// egress bridge, which the engine starts (as on docker's `network none`).
    fn egress_enforced(&self) -> Option<bool> {
        Some(true)
    }

    /// An exec is one request on the control socket and a `fork` + `execve` by the sandbox's
    /// init: the exec agent would spawn the same way after paying its own start.
    fn exec_spawns_directly(&self) -> bool {
        true
    }

    fn only_user(&self) -> Option<String> {
        Some(format!(
            "{}:{}",
            self.plan.ids.inside_uid, self.plan.ids.inside_gid
        ))
    }

    /// Runs `argv` as a child of the sandbox's init, as the one user the namespace maps (the
    /// run's, see the crate doc): an `opts.user` naming another is refused.
    async fn exec(&self, argv: &[String], opts: ExecOpts) -> Result<ExecResult> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(self.closed_error());
        }
        if let Some(user) = opts.user.as_deref() {
            crate::plan::check_exec_user(&self.plan.ids, user)?;
        }
        let mut env: BTreeMap<String, String> = self.plan.env.iter().cloned().collect();
        for (key, value) in opts.env {
            env.insert(key, value);
        }
        let request = ExecRequest {
            argv: argv.to_vec(),
            env: env.into_iter().collect(),
            cwd: opts.workdir.unwrap_or_else(|| self.plan.workdir.clone()),
        };
        let body =
            serde_json::to_vec(&request).map_err(|e| setup_error("exec request", e.to_string()))?;
        if body.len() > crate::init::MAX_REQUEST_BYTES {
            return Err(setup_error(
                "exec request",
                format!("{} bytes of argv and env (at most 8 MiB)", body.len()),
            ));
        }
        // The request travels in a memfd: a script in argv may be far larger than a datagram.
        let request_fd =
            nix::sys::memfd::memfd_create("iterion-exec", nix::sys::memfd::MFdFlags::MFD_CLOEXEC)
                .map_err(|e| setup_error("exec request", e.desc()))?;
        {
            let mut file = std::fs::File::from(
                request_fd
                    .try_clone()
                    .map_err(|e| setup_error("exec request", e.to_string()))?,
            );
            file.write_all(&body)
                .map_err(|e| setup_error("exec request", e.to_string()))?;
        }
        let (stdin_r, stdin_w) = pipe()?;
        let (stdout_r, stdout_w) = pipe()?;
        let (stderr_r, stderr_w) = pipe()?;
        let (status_engine, status_init) = socketpair(
            AddressFamily::Unix,
            SockType::Stream,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .map_err(|e| Error::Io {
            operation: "socketpair",
            path: PathBuf::from("/"),
            source: std::io::Error::from(e),
        })?;
        {
            let guard = self.ctl.lock().unwrap_or_else(PoisonError::into_inner);
            let Some(ctl) = guard.as_ref() else {
                return Err(self.closed_error());
            };
            let fds = [
                stdin_r.as_raw_fd(),
                stdout_w.as_raw_fd(),
                stderr_w.as_raw_fd(),
                status_init.as_raw_fd(),
                request_fd.as_raw_fd(),
            ];
            crate::init::send_request(ctl.as_fd(), &fds).map_err(|_| self.closed_error())?;
        }
        drop((stdin_r, stdout_w, stderr_w, status_init, request_fd));
        self.log.line(
            LogLevel::Debug,
            &format!(
                "namespace exec {}: {}",
                self.id,
                argv.first().map_or("", String::as_str)
            ),
        );
        let std_status = std::os::unix::net::UnixStream::from(status_engine);
        std_status
            .set_nonblocking(true)
            .map_err(|source| Error::Io {
                operation: "status socket",
                path: PathBuf::from("/"),
                source,
            })?;
        let mut status =
            tokio::net::UnixStream::from_std(std_status).map_err(|source| Error::Io {
                operation: "status socket",
                path: PathBuf::from("/"),
                source,
            })?;
        let keep_open = opts.keep_stdin_open;
        let (exited_tx, exited_rx) = tokio::sync::watch::channel(false);
        let stdin_task = {
            let mut sender =
                tokio::net::unix::pipe::Sender::from_owned_fd(stdin_w).map_err(|source| {
                    Error::Io {
                        operation: "stdin pipe",
                        path: PathBuf::from("/"),
                        source,
                    }
                })?;
            let input = opts.stdin;
            let mut exited = exited_rx.clone();
            async move {
                if let Some(mut input) = input {
                    // A command that exits without reading all of its stdin ends the copy.
                    tokio::select! {
                        _ = tokio::io::copy(&mut input, &mut sender) => {}
                        _ = exited.wait_for(|done| *done) => {}
                    }
                }
                if keep_open { Some(sender) } else { None }
            }
        };
        let io = async {
            let (held, out, err) = tokio::join!(
                stdin_task,
                drain(stdout_r, opts.stdout, exited_rx.clone()),
                drain(stderr_r, opts.stderr, exited_rx)
            );
            (held, out, err)
        };
        let wait = async {
            let mut text = String::new();
            let _ = status.read_to_string(&mut text).await;
            let _ = exited_tx.send(true);
            text
        };
        let ((held, out, err), text) = tokio::join!(io, wait);
        drop(held);
        let exit_code = parse_exit(&text).ok_or_else(|| Error::ExitCodeUnavailable {
            sandbox_id: self.id.clone(),
        })?;
        let io_error = |source| Error::Io {
            operation: "exec output",
            path: PathBuf::from("/"),
            source,
        };
        Ok(ExecResult {
            exit_code,
            stdout: out.map_err(io_error)?,
            stderr: err.map_err(io_error)?,
        })
    }

    async fn cleanup(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let notified = self.gone.notified();
        self.kill();
        drop(
            self.ctl
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        if !self.gone_flag.load(Ordering::SeqCst) {
            let _ = tokio::time::timeout(TEARDOWN_TIMEOUT, notified).await;
        }
        for path in &self.made {
            let _ = tokio::fs::remove_dir_all(path).await;
            let _ = tokio::fs::remove_file(path).await;
        }
        self.log.line(
            LogLevel::Info,
            &format!("sandbox removed: driver={DRIVER} sandbox={}", self.id),
        );
        Ok(())
    }
}

impl Drop for NamespaceRun {
    /// A run dropped without `cleanup` still takes its namespace with it.
    fn drop(&mut self) {
        if !self.closed.load(Ordering::SeqCst) {
            self.kill();
        }
    }
}
