//! The sandbox's processes: the fork out of the engine, the namespace setup, and the init that
//! serves execs (issue 18 item 1).
//!
//! # Shape
//!
//! ```text
//! engine ── keeper thread ──fork──▶ P1: unshare(user|mnt|pid|net|ipc|uts|cgroup), waits for its
//!                                        uid/gid maps (written by the keeper), forks P2, waits
//!                                   P2: pid 1 of the new pid namespace: builds the root, applies
//!                                        Landlock, no_new_privs, drops every capability, installs
//!                                        seccomp, says `ready`, then serves execs until killed
//! ```
//!
//! # Why an init that forks, not `setns`
//!
//! An exec could instead `setns` into the sandbox's namespaces from the engine. It cannot be done
//! from the engine itself (a multithreaded process may not join a user namespace), and a forked
//! helper that joins them would still have to fork once more to enter the pid namespace, then
//! re-apply Landlock, seccomp, no_new_privs and the capability drop, each a step that could be
//! forgotten on one path. Here every command is a child of the init: it inherits the whole
//! confinement by construction, is reaped by it, and dies with it. The request travels over a
//! `SOCK_SEQPACKET` socket pair, with the command's stdin, stdout and stderr pipes and a status
//! socket passed as file descriptors; the init answers `exit N` on the status socket, and kills
//! the command's process group when the engine drops its end (a cancelled or timed-out exec).
//! An exec costs one `fork` + `execve` inside the sandbox, no daemon round trip.
//!
//! # The fork of a multithreaded process
//!
//! The fork happens on a dedicated thread of the engine (the "keeper", which then waits for P1:
//! P1's parent-death signal is tied to that thread, so it must outlive the sandbox). In the
//! child only the forking thread exists; everything the child needs (the plan, the C strings,
//! the seccomp programs, the bind sources opened `O_PATH`) is made before the fork. The child
//! still allocates (paths, the exec requests): glibc's `fork` resets the allocator's locks in
//! the child, and no other lock of the engine (logging, stdio) is ever taken there.
//!
//! # Failing closed
//!
//! Every step returns its error; the first one is written to the setup pipe as
//! `error <step>: <reason>` and the process exits. The engine turns it into
//! [`Error::NamespaceSetup`](iterion_sandbox::Error::NamespaceSetup) and tears down what is
//! left. No step is optional except the ones the issue makes so (Landlock where the kernel has
//! it, a fresh `/sys`), and those are reported.
#![allow(unsafe_code)]

use std::collections::BTreeMap;
use std::ffi::CString;
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path};

use nix::errno::Errno;
use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sched::{CloneFlags, unshare};
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, SigmaskHow, Signal};
use nix::sys::signalfd::SignalFd;
use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, fork, pivot_root, sethostname};

use crate::plan::{Object, Plan};
use crate::proto::ExecRequest;
use crate::seccomp::Programs;

/// Where the old root is kept while the new one is built.
const OLD_ROOT: &str = "/.iterion-oldroot";
/// The empty read-only file bound over masked files.
const EMPTY_FILE: &str = "/.iterion-empty";
/// The device nodes the minimal `/dev` shows, bound from the host's.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];
/// The largest exec request (argv + env, JSON).
pub(crate) const MAX_REQUEST_BYTES: usize = 8 * 1024 * 1024;

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;

/// `struct mount_attr` of `mount_setattr(2)` (libc has the call number, not the struct).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// A failed step: its name and what the kernel said.
pub(crate) struct Fail {
    pub step: String,
    pub reason: String,
}

fn fail(step: impl Into<String>) -> impl FnOnce(Errno) -> Fail {
    let step = step.into();
    move |errno| Fail {
        step,
        reason: errno.desc().to_owned(),
    }
}

fn io_fail(step: impl Into<String>) -> impl FnOnce(std::io::Error) -> Fail {
    let step = step.into();
    move |error| Fail {
        step,
        reason: error.to_string(),
    }
}

/// What the child needs, made before the fork.
pub(crate) struct ChildInputs {
    pub plan: Plan,
    /// The bind sources as screened, in the order of `plan.binds`.
    pub bind_sources: Vec<Pinned>,
    /// The host `/dev` nodes, in the order of [`DEVICES`].
    pub devices: Vec<Option<Pinned>>,
    /// The directory the new root's tmpfs is mounted on (in the sandbox's own mount namespace:
    /// the host does not see it). `/tmp`: it exists and any uid may reach it.
    pub staging: CString,
    pub programs: Programs,
    /// The engine's pid: P1 exits if its parent is no longer it.
    pub engine_pid: Pid,
    /// Whether the engine runs as root: P1 then drops its supplementary groups.
    pub engine_is_root: bool,
    /// The `cgroup.procs` of the sandbox's cgroup, one per hierarchy (none without limits):
    /// P1 writes itself into each before it unshares ([`enter_cgroup`]).
    pub cgroup_procs: Vec<RawFd>,
}

/// A bind source as the engine screened it: its host path and the inode found there. The init
/// mounts the path and checks that the inode it mounted is that one, so a source swapped after
/// screening (a symlink, a rename) fails the setup instead of being mounted.
#[derive(Clone, Debug)]
pub(crate) struct Pinned {
    pub path: String,
    pub dev: u64,
    pub ino: u64,
    pub is_dir: bool,
}

impl Pinned {
    /// Stats `path` (not following a final symlink).
    pub(crate) fn new(path: &Path) -> std::io::Result<Pinned> {
        use std::os::unix::fs::MetadataExt as _;
        let meta = std::fs::symlink_metadata(path)?;
        if meta.file_type().is_symlink() {
            return Err(std::io::Error::other("is a symlink"));
        }
        Ok(Pinned {
            path: path.to_string_lossy().into_owned(),
            dev: meta.dev(),
            ino: meta.ino(),
            is_dir: meta.is_dir(),
        })
    }

    fn check(&self, target: &str) -> Result<(), Fail> {
        use std::os::unix::fs::MetadataExt as _;
        let meta = std::fs::symlink_metadata(target).map_err(io_fail(format!("stat {target}")))?;
        if (meta.dev(), meta.ino()) == (self.dev, self.ino) {
            Ok(())
        } else {
            Err(Fail {
                step: format!("bind {target}"),
                reason: format!("{} changed since it was screened", self.path),
            })
        }
    }
}

const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;

/// `open_tree(path, OPEN_TREE_CLONE | AT_RECURSIVE)`: a detached copy of the mount at `path`.
/// Only a root engine can: it then clones every source before entering the user namespace,
/// because an untrusted run's uid cannot traverse the root-only runtime root to reach them.
fn clone_tree(path: &str) -> Result<OwnedFd, Fail> {
    let c = cstr(path)?;
    // SAFETY: a valid C string; the result is a new descriptor or -1.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            c.as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | libc::AT_RECURSIVE as libc::c_uint,
        )
    };
    let fd = Errno::result(rc).map_err(fail(format!("open_tree {path}")))?;
    let fd = RawFd::try_from(fd).map_err(|_| Fail {
        step: format!("open_tree {path}"),
        reason: "bad descriptor".to_owned(),
    })?;
    // SAFETY: the kernel just gave us this descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Mounts `source` at `target`: the detached clone when there is one, else the path under the
/// old root; then checks the inode.
fn attach(source: &Pinned, detached: Option<&OwnedFd>, target: &str) -> Result<(), Fail> {
    match detached {
        Some(fd) => {
            let empty = cstr("")?;
            let to = cstr(target)?;
            // SAFETY: valid descriptors and C strings.
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_move_mount,
                    fd.as_raw_fd(),
                    empty.as_ptr(),
                    libc::AT_FDCWD,
                    to.as_ptr(),
                    MOVE_MOUNT_F_EMPTY_PATH,
                )
            };
            Errno::result(rc)
                .map(drop)
                .map_err(fail(format!("move_mount {target}")))?;
        }
        None => bind(&format!("{OLD_ROOT}{}", source.path), target)?,
    }
    source.check(target)
}

/// The detached clones a root engine makes before the user namespace (bind sources, devices).
struct Detached {
    binds: Vec<OwnedFd>,
    devices: Vec<Option<OwnedFd>>,
}

/// The file descriptors of one sandbox's start.
pub(crate) struct Channels {
    /// Child → keeper: `userns`, `pid N`, `ready …` or `error …` lines.
    pub setup_w: OwnedFd,
    /// Keeper → P1: one byte once the maps are written.
    pub go_r: OwnedFd,
    /// The init's end of the exec socket.
    pub ctl: OwnedFd,
}

/// Forks P1. In the child this never returns.
///
/// # Safety
///
/// See the module doc: called on the keeper thread with everything prepared; the child touches
/// no lock of the engine.
pub(crate) fn spawn(
    inputs: &ChildInputs,
    channels: &Channels,
    close_in_child: &[RawFd],
) -> Result<Pid, Errno> {
    // SAFETY: the child only runs `p1`, which ends in `_exit`; see the module doc.
    match unsafe { fork() }? {
        ForkResult::Parent { child } => Ok(child),
        ForkResult::Child => {
            for fd in close_in_child {
                // SAFETY: closing the parent's ends of the pipes in the child's copy of the table.
                unsafe { libc::close(*fd) };
            }
            let code = match p1(inputs, channels) {
                Ok(never) => match never {},
                Err(failure) => {
                    report(channels.setup_w.as_fd(), &failure);
                    1
                }
            };
            // SAFETY: ends the child without running the engine's atexit handlers or destructors.
            unsafe { libc::_exit(code) }
        }
    }
}

/// An uninhabited type: the init's serve loop never returns.
pub(crate) enum Never {}

fn report(fd: BorrowedFd<'_>, failure: &Fail) {
    let reason = failure.reason.replace('\n', " ");
    let line = format!("error {}: {reason}\n", failure.step);
    let _ = nix::unistd::write(fd, line.as_bytes());
}

fn reset_signals() {
    for signal in Signal::iterator() {
        if matches!(signal, Signal::SIGKILL | Signal::SIGSTOP) {
            continue;
        }
        let default = SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty());
        // SAFETY: installing the default disposition runs no handler code of ours.
        let _ = unsafe { nix::sys::signal::sigaction(signal, &default) };
    }
    let _ = nix::sys::signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None);
}

/// A fork keeps every descriptor of the engine, close-on-exec or not (the store, the proxy's
/// sockets, other sandboxes' channels): the sandbox's processes keep only their own channels,
/// and 0, 1 and 2 become `/dev/null`.
fn close_inherited(keep: &[RawFd]) -> Result<(), Fail> {
    let open: Vec<RawFd> = std::fs::read_dir("/proc/self/fd")
        .map_err(io_fail("list descriptors"))?
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    let null = nix::fcntl::open(
        "/dev/null",
        nix::fcntl::OFlag::O_RDWR,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(fail("open /dev/null"))?;
    for fd in 0..3 {
        // SAFETY: dup2 onto the standard descriptors.
        unsafe { libc::dup2(null.as_raw_fd(), fd) };
    }
    drop(null);
    for fd in open {
        if fd > 2 && !keep.contains(&fd) {
            // SAFETY: closing a descriptor this process will never use; its owner (the engine)
            // is another process after the fork.
            unsafe { libc::close(fd) };
        }
    }
    Ok(())
}

/// Writes this process into each `cgroup.procs` descriptor (`0` names the writer), closing
/// them: the sandbox keeps no handle on its cgroup.
fn enter_cgroup(fds: &[RawFd]) -> Result<(), Fail> {
    let mut result = Ok(());
    for fd in fds {
        // SAFETY: the engine opened these before the fork and kept them open for this process;
        // this copy of the table owns them from here, and each is closed once, here.
        let owned = unsafe { OwnedFd::from_raw_fd(*fd) };
        if result.is_ok()
            && let Err(errno) = nix::unistd::write(owned.as_fd(), b"0")
        {
            result = Err(fail("enter the sandbox's cgroup (cgroup.procs)")(errno));
        }
    }
    result
}

/// P1: namespaces, maps, then P2.
fn p1(inputs: &ChildInputs, channels: &Channels) -> Result<Never, Fail> {
    reset_signals();
    let mut keep = vec![
        channels.setup_w.as_raw_fd(),
        channels.go_r.as_raw_fd(),
        channels.ctl.as_raw_fd(),
    ];
    keep.extend(&inputs.cgroup_procs);
    close_inherited(&keep)?;
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(fail("prctl PDEATHSIG"))?;
    if nix::unistd::getppid() != inputs.engine_pid {
        return Err(Fail {
            step: "start".to_owned(),
            reason: "the engine went away".to_owned(),
        });
    }
    // Into the sandbox's cgroup before anything else, and before the cgroup namespace: its root
    // is then this cgroup, and every process of the sandbox is a descendant of this one.
    enter_cgroup(&inputs.cgroup_procs)?;
    let detached = if inputs.engine_is_root {
        nix::unistd::setgroups(&[]).map_err(fail("setgroups"))?;
        Some(Detached {
            binds: inputs
                .bind_sources
                .iter()
                .map(|s| clone_tree(&s.path))
                .collect::<Result<Vec<_>, Fail>>()?,
            devices: inputs
                .devices
                .iter()
                .map(|d| d.as_ref().and_then(|d| clone_tree(&d.path).ok()))
                .collect(),
        })
    } else {
        None
    };
    unshare(
        CloneFlags::CLONE_NEWUSER
            | CloneFlags::CLONE_NEWNS
            | CloneFlags::CLONE_NEWPID
            | CloneFlags::CLONE_NEWNET
            | CloneFlags::CLONE_NEWIPC
            | CloneFlags::CLONE_NEWUTS
            | CloneFlags::CLONE_NEWCGROUP,
    )
    .map_err(fail("unshare"))?;
    nix::unistd::write(channels.setup_w.as_fd(), b"userns\n").map_err(fail("setup pipe"))?;
    let mut go = [0u8; 1];
    match nix::unistd::read(channels.go_r.as_fd(), &mut go) {
        Ok(1) if go[0] == b'1' => {}
        Ok(_) => {
            return Err(Fail {
                step: "uid_map".to_owned(),
                reason: "the engine could not write the uid/gid maps".to_owned(),
            });
        }
        Err(errno) => return Err(fail("uid_map")(errno)),
    }
    // Become the mapped ids: a root engine's own uid is not mapped for an untrusted run, and a
    // process whose uid has no mapping cannot create a file. The capabilities of the new user
    // namespace survive the change (the old uid was not the namespace's root).
    let ids = inputs.plan.ids;
    let gid = nix::unistd::Gid::from_raw(ids.inside_gid);
    let uid = nix::unistd::Uid::from_raw(ids.inside_uid);
    nix::unistd::setresgid(gid, gid, gid).map_err(fail("setresgid"))?;
    nix::unistd::setresuid(uid, uid, uid).map_err(fail("setresuid"))?;
    // SAFETY: P1 is single-threaded; the child runs `p2`, which ends in `_exit`.
    match unsafe { fork() }.map_err(fail("fork init"))? {
        ForkResult::Parent { child } => {
            let line = format!("pid {child}\n");
            nix::unistd::write(channels.setup_w.as_fd(), line.as_bytes())
                .map_err(fail("setup pipe"))?;
            // SAFETY: P1 keeps nothing but the wait below.
            unsafe { libc::close(channels.setup_w.as_raw_fd()) };
            unsafe { libc::close(channels.ctl.as_raw_fd()) };
            let code = loop {
                match waitpid(child, None) {
                    Ok(WaitStatus::Exited(_, code)) => break code,
                    Ok(WaitStatus::Signaled(_, signal, _)) => break 128 + signal as i32,
                    Ok(_) | Err(Errno::EINTR) => continue,
                    Err(_) => break 1,
                }
            };
            // SAFETY: ends P1 without running the engine's atexit handlers.
            unsafe { libc::_exit(code) }
        }
        ForkResult::Child => {
            let code = match p2(inputs, channels, detached.as_ref()) {
                Ok(never) => match never {},
                Err(failure) => {
                    report(channels.setup_w.as_fd(), &failure);
                    1
                }
            };
            // SAFETY: as above.
            unsafe { libc::_exit(code) }
        }
    }
}

/// P2, pid 1 of the sandbox: the setup, then the serve loop.
fn p2(
    inputs: &ChildInputs,
    channels: &Channels,
    detached: Option<&Detached>,
) -> Result<Never, Fail> {
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(fail("prctl PDEATHSIG"))?;
    let plan = &inputs.plan;
    build_root(inputs, detached)?;
    sethostname(&plan.hostname).map_err(fail("sethostname"))?;
    loopback_up()?;
    if plan.unprivileged_ports {
        unprivileged_ports()?;
    }
    nix::unistd::chdir(Path::new(&plan.workdir))
        .map_err(fail(format!("chdir {}", plan.workdir)))?;
    limits()?;
    let landlock = crate::lockdown::restrict(&plan.writable).map_err(|reason| Fail {
        step: "landlock".to_owned(),
        reason,
    })?;
    drop_capabilities()?;
    nix::sys::prctl::set_no_new_privs().map_err(fail("no_new_privs"))?;
    nix::sys::prctl::set_dumpable(false).map_err(fail("prctl DUMPABLE"))?;
    seccompiler::apply_filter(&inputs.programs.deny).map_err(|e| Fail {
        step: "seccomp".to_owned(),
        reason: e.to_string(),
    })?;
    seccompiler::apply_filter(&inputs.programs.clone3).map_err(|e| Fail {
        step: "seccomp clone3".to_owned(),
        reason: e.to_string(),
    })?;
    let mut mask = SigSet::empty();
    mask.add(Signal::SIGCHLD);
    nix::sys::signal::sigprocmask(SigmaskHow::SIG_BLOCK, Some(&mask), None)
        .map_err(fail("sigprocmask"))?;
    let sigchld = SignalFd::new(&mask).map_err(fail("signalfd"))?;
    let line = format!("ready landlock={landlock}\n");
    nix::unistd::write(channels.setup_w.as_fd(), line.as_bytes()).map_err(fail("setup pipe"))?;
    // SAFETY: the setup pipe is not used again; the engine sees its end close.
    unsafe { libc::close(channels.setup_w.as_raw_fd()) };
    serve(channels.ctl.as_fd(), &sigchld)
}

fn cstr(path: &str) -> Result<CString, Fail> {
    CString::new(path).map_err(|_| Fail {
        step: format!("path {}", path.escape_default()),
        reason: "contains NUL".to_owned(),
    })
}

fn setattr(path: &str, set: u64, recursive: bool) -> Result<(), Fail> {
    let c = cstr(path)?;
    let attr = MountAttr {
        attr_set: set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive { libc::AT_RECURSIVE } else { 0 };
    // SAFETY: a valid C string and a `struct mount_attr` of the size passed.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    Errno::result(rc)
        .map(drop)
        .map_err(fail(format!("mount_setattr {path}")))
}

fn bind(source: &str, target: &str) -> Result<(), Fail> {
    mount(
        Some(source),
        target,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(fail(format!("bind {target}")))
}

fn tmpfs(target: &str, options: &str) -> Result<(), Fail> {
    mount(
        Some("tmpfs"),
        target,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(options),
    )
    .map_err(fail(format!("tmpfs {target}")))
}

/// `mkdir -p` inside the new root, refusing any component that is a symlink (a target may not be
/// redirected by a link in the tree it lands in).
fn mkdir_p(path: &str) -> Result<(), Fail> {
    let mut current = std::path::PathBuf::from("/");
    for component in Path::new(path).components() {
        let Component::Normal(name) = component else {
            continue;
        };
        current.push(name);
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(Fail {
                    step: format!("mount target {path}"),
                    reason: format!("{} is a symlink", current.display()),
                });
            }
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(Fail {
                    step: format!("mount target {path}"),
                    reason: format!("{} is not a directory", current.display()),
                });
            }
            Err(_) => std::fs::DirBuilder::new()
                .mode(0o755)
                .create(&current)
                .map_err(io_fail(format!("mkdir {}", current.display())))?,
        }
    }
    Ok(())
}

/// A file mount point: its parent made, the file created empty when missing.
fn touch(path: &str) -> Result<(), Fail> {
    if let Some(parent) = Path::new(path).parent() {
        mkdir_p(&parent.to_string_lossy())?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() || meta.is_dir() => Err(Fail {
            step: format!("mount target {path}"),
            reason: "is a symlink or a directory, not a file".to_owned(),
        }),
        Ok(_) => Ok(()),
        Err(_) => std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(path)
            .map(drop)
            .map_err(io_fail(format!("create {path}"))),
    }
}

fn mask(path: &str) -> Result<(), Fail> {
    match std::fs::symlink_metadata(path) {
        Err(_) => Ok(()),
        Ok(meta) if meta.file_type().is_symlink() => Ok(()),
        Ok(meta) if meta.is_dir() => tmpfs(path, "mode=0755,size=1m"),
        Ok(_) => {
            bind(EMPTY_FILE, path)?;
            setattr(
                path,
                MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                false,
            )
        }
    }
}

/// The new root: a tmpfs holding the host's top-level dirs bound read-only, fresh `/proc`,
/// `/dev`, `/sys`, `/tmp`, `/run`, empty homes, the masks, the binds; then the old root is
/// detached and the tmpfs made read-only.
fn build_root(inputs: &ChildInputs, detached: Option<&Detached>) -> Result<(), Fail> {
    let plan = &inputs.plan;
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(fail("make / private"))?;
    let staging = inputs.staging.to_string_lossy().into_owned();
    tmpfs(&staging, "mode=0755")?;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(format!("{staging}{OLD_ROOT}"))
        .map_err(io_fail("mkdir old root"))?;
    nix::unistd::chdir(staging.as_str()).map_err(fail("chdir new root"))?;
    pivot_root(".", &OLD_ROOT[1..]).map_err(fail("pivot_root"))?;
    nix::unistd::chdir("/").map_err(fail("chdir /"))?;

    // The host's top level, read-only.
    let entries = std::fs::read_dir(OLD_ROOT).map_err(io_fail("read the host root"))?;
    for entry in entries {
        let entry = entry.map_err(io_fail("read the host root"))?;
        let name = entry.file_name();
        let name_str = name.to_string_lossy().into_owned();
        if crate::plan::REPLACED_TOP_LEVEL.contains(&name_str.as_str())
            || format!("/{name_str}") == OLD_ROOT
        {
            continue;
        }
        let host = format!("{OLD_ROOT}/{name_str}");
        let inside = format!("/{name_str}");
        let meta = std::fs::symlink_metadata(&host).map_err(io_fail(format!("stat {host}")))?;
        if meta.file_type().is_symlink() {
            let link = std::fs::read_link(&host).map_err(io_fail(format!("readlink {host}")))?;
            std::os::unix::fs::symlink(&link, &inside)
                .map_err(io_fail(format!("symlink {inside}")))?;
        } else if meta.is_dir() {
            std::fs::DirBuilder::new()
                .mode(0o755)
                .create(&inside)
                .map_err(io_fail(format!("mkdir {inside}")))?;
            bind(&host, &inside)?;
            setattr(
                &inside,
                MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                true,
            )?;
        } else if meta.is_file() {
            touch(&inside)?;
            bind(&host, &inside)?;
            setattr(
                &inside,
                MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                false,
            )?;
        }
    }
    for dir in ["proc", "dev", "sys", "tmp", "run", "home", "root"] {
        let path = format!("/{dir}");
        if std::fs::symlink_metadata(&path).is_err() {
            std::fs::DirBuilder::new()
                .mode(0o755)
                .create(&path)
                .map_err(io_fail(format!("mkdir {path}")))?;
        }
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o444)
        .open(EMPTY_FILE)
        .map_err(io_fail("create the mask file"))?;
    tmpfs("/run", "mode=0755")?;

    // The masks on the read-only root.
    for path in &plan.masks_before {
        mask(&path.to_string_lossy())?;
    }

    // Fresh /proc (this pid namespace's), minimal /dev, this network namespace's /sys.
    mount(
        Some("proc"),
        "/proc",
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(fail("mount /proc"))?;
    build_dev(inputs, detached)?;
    if mount(
        Some("sysfs"),
        "/sys",
        Some("sysfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC | MsFlags::MS_RDONLY,
        None::<&str>,
    )
    .is_err()
    {
        // Left an empty directory: stricter, never wider.
    }

    // The tmpfs mounts, then the binds (from the sources opened before the fork).
    for entry in &plan.tmpfs {
        mkdir_p(&entry.target)?;
        tmpfs(&entry.target, &entry.options)?;
    }
    for (index, (bind_plan, source)) in plan.binds.iter().zip(&inputs.bind_sources).enumerate() {
        match bind_plan.object {
            Object::Dir => mkdir_p(&bind_plan.target)?,
            Object::File => touch(&bind_plan.target)?,
        }
        let clone = detached.and_then(|d| d.binds.get(index));
        attach(source, clone, &bind_plan.target).map_err(|f| Fail {
            step: format!("{} ({})", f.step, bind_plan.purpose),
            reason: f.reason,
        })?;
        let mut attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
        if bind_plan.read_only {
            attrs |= MOUNT_ATTR_RDONLY;
        }
        setattr(&bind_plan.target, attrs, true)?;
    }
    for path in &plan.masks_after {
        mask(path)?;
    }

    umount2(OLD_ROOT, MntFlags::MNT_DETACH).map_err(fail("detach the host root"))?;
    std::fs::remove_dir(OLD_ROOT).map_err(io_fail("remove the old root dir"))?;
    // Read-only from here: the root tmpfs, /run, /dev, the masks.
    let ro = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    setattr("/", ro, false)?;
    setattr("/run", ro, false)?;
    setattr("/dev", ro, false)?;
    for path in plan
        .masks_before
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .chain(plan.masks_after.iter().cloned())
    {
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
            setattr(&path, ro, false)?;
        }
    }
    Ok(())
}

fn build_dev(inputs: &ChildInputs, detached: Option<&Detached>) -> Result<(), Fail> {
    tmpfs("/dev", "mode=0755")?;
    for (index, (name, device)) in DEVICES.iter().zip(&inputs.devices).enumerate() {
        let Some(device) = device else { continue };
        let path = format!("/dev/{name}");
        touch(&path)?;
        let clone = detached
            .and_then(|d| d.devices.get(index))
            .and_then(Option::as_ref);
        attach(device, clone, &path)?;
        setattr(&path, MOUNT_ATTR_NOSUID, false)?;
    }
    mkdir_p("/dev/pts")?;
    mount(
        Some("devpts"),
        "/dev/pts",
        Some("devpts"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=0620"),
    )
    .map_err(fail("mount /dev/pts"))?;
    std::os::unix::fs::symlink("pts/ptmx", "/dev/ptmx").map_err(io_fail("symlink /dev/ptmx"))?;
    mkdir_p("/dev/shm")?;
    tmpfs("/dev/shm", "mode=1777")?;
    for (link, target) in [
        ("/dev/fd", "/proc/self/fd"),
        ("/dev/stdin", "/proc/self/fd/0"),
        ("/dev/stdout", "/proc/self/fd/1"),
        ("/dev/stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(target, link).map_err(io_fail(format!("symlink {link}")))?;
    }
    std::fs::set_permissions("/dev", std::fs::Permissions::from_mode(0o755))
        .map_err(io_fail("chmod /dev"))?;
    Ok(())
}

/// `ip link set lo up`, with the one ioctl it takes.
fn loopback_up() -> Result<(), Fail> {
    // SAFETY: a plain socket, closed below through OwnedFd.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    let fd = Errno::result(raw).map_err(fail("socket for lo"))?;
    // SAFETY: `fd` is a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain data; zeroed is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, byte) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *slot = *byte as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS fills `ifr_flags` of the ifreq we pass.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) };
    Errno::result(rc).map_err(fail("SIOCGIFFLAGS lo"))?;
    // SAFETY: the union member SIOCGIFFLAGS just wrote.
    unsafe { req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short };
    // SAFETY: SIOCSIFFLAGS reads the ifreq we pass.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCSIFFLAGS, &req) };
    Errno::result(rc).map_err(fail("SIOCSIFFLAGS lo"))?;
    Ok(())
}

/// `net.ipv4.ip_unprivileged_port_start = 0` in the sandbox's own network namespace, while the
/// init still holds `CAP_NET_ADMIN` there (issue 22: the egress bridge binds 53, 80 and 443 on
/// loopback after every capability is gone).
fn unprivileged_ports() -> Result<(), Fail> {
    std::fs::write("/proc/sys/net/ipv4/ip_unprivileged_port_start", b"0")
        .map_err(io_fail("write net.ipv4.ip_unprivileged_port_start"))
}

/// No core dumps (a dump would land in the workspace, readable by the next node).
fn limits() -> Result<(), Fail> {
    nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_CORE, 0, 0)
        .map_err(fail("setrlimit CORE"))
}

/// Empties the bounding, ambient, inheritable, permitted and effective sets: the init and every
/// command it spawns hold no capability, even as uid 0 of the namespace.
fn drop_capabilities() -> Result<(), Fail> {
    for cap in 0..64 {
        // SAFETY: prctl with integer arguments.
        let rc = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) };
        if rc != 0 {
            let errno = Errno::last();
            if errno == Errno::EINVAL {
                break;
            }
            return Err(fail("drop the bounding set")(errno));
        }
    }
    // SAFETY: prctl with integer arguments.
    let rc = unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    };
    Errno::result(rc).map_err(fail("clear ambient capabilities"))?;
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let header = Header {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset with a v3 header and its two data structs.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &header as *const Header, data.as_ptr()) };
    Errno::result(rc).map(drop).map_err(fail("capset"))
}

/// One running exec: its status socket.
struct Running {
    status: OwnedFd,
    killed: bool,
}

/// The init's loop: exec requests on `ctl`, children's exits on `sigchld`, cancellations as a
/// hang-up of a status socket. Ends the sandbox when the engine's end of `ctl` closes.
fn serve(ctl: BorrowedFd<'_>, sigchld: &SignalFd) -> Result<Never, Fail> {
    let mut running: BTreeMap<i32, Running> = BTreeMap::new();
    let mut buffer = vec![0u8; MAX_REQUEST_BYTES];
    loop {
        let pids: Vec<i32> = running.keys().copied().collect();
        let mut fds = vec![
            PollFd::new(ctl, PollFlags::POLLIN),
            PollFd::new(sigchld.as_fd(), PollFlags::POLLIN),
        ];
        for pid in &pids {
            if let Some(run) = running.get(pid) {
                fds.push(PollFd::new(run.status.as_fd(), PollFlags::POLLIN));
            }
        }
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(Errno::EINTR) => continue,
            Err(errno) => return Err(fail("poll")(errno)),
        }
        let revents: Vec<PollFlags> = fds
            .iter()
            .map(|fd| fd.revents().unwrap_or(PollFlags::empty()))
            .collect();
        drop(fds);
        // A status socket readable or hung up before its command exited: the engine gave up on
        // the exec. Kill its process group.
        for (index, pid) in pids.iter().enumerate() {
            if revents[index + 2]
                .intersects(PollFlags::POLLIN | PollFlags::POLLHUP | PollFlags::POLLERR)
                && let Some(run) = running.get_mut(pid)
                && !run.killed
            {
                let _ = nix::sys::signal::killpg(Pid::from_raw(*pid), Signal::SIGKILL);
                let _ = nix::sys::signal::kill(Pid::from_raw(*pid), Signal::SIGKILL);
                run.killed = true;
            }
        }
        if revents[1].contains(PollFlags::POLLIN) {
            let _ = sigchld.read_signal();
            reap(&mut running);
        }
        if revents[0].intersects(PollFlags::POLLHUP | PollFlags::POLLERR)
            && !revents[0].contains(PollFlags::POLLIN)
        {
            end_sandbox();
        }
        if revents[0].contains(PollFlags::POLLIN) {
            match receive(ctl, &mut buffer) {
                Received::Request(request, stdio, status) => {
                    if let Some(pid) = start_exec(&request, stdio) {
                        running.insert(
                            pid,
                            Running {
                                status,
                                killed: false,
                            },
                        );
                    } else {
                        let _ = nix::unistd::write(status.as_fd(), b"exit 126\n");
                    }
                }
                Received::Bad => {}
                Received::Closed => end_sandbox(),
            }
        }
    }
}

fn end_sandbox() -> ! {
    // Every process of the namespace but this one, then this one (which takes the namespace).
    let _ = nix::sys::signal::kill(Pid::from_raw(-1), Signal::SIGKILL);
    // SAFETY: ends the init.
    unsafe { libc::_exit(0) }
}

fn reap(running: &mut BTreeMap<i32, Running>) {
    loop {
        let (pid, code) = match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) => (pid, code),
            Ok(WaitStatus::Signaled(pid, signal, _)) => (pid, 128 + signal as i32),
            Ok(WaitStatus::StillAlive) | Err(_) => return,
            Ok(_) => continue,
        };
        if let Some(run) = running.remove(&pid.as_raw()) {
            let line = format!("exit {code}\n");
            let _ = nix::unistd::write(run.status.as_fd(), line.as_bytes());
        }
    }
}

enum Received {
    Request(ExecRequest, [OwnedFd; 3], OwnedFd),
    Bad,
    Closed,
}

fn receive(ctl: BorrowedFd<'_>, buffer: &mut [u8]) -> Received {
    let mut cmsg = nix::cmsg_space!([RawFd; 5]);
    let mut iov = [IoSliceMut::new(buffer)];
    let (bytes, fds) = match recvmsg::<()>(
        ctl.as_raw_fd(),
        &mut iov,
        Some(&mut cmsg),
        MsgFlags::MSG_CMSG_CLOEXEC,
    ) {
        Ok(msg) => {
            let mut fds: Vec<OwnedFd> = Vec::new();
            if let Ok(cmsgs) = msg.cmsgs() {
                for c in cmsgs {
                    if let ControlMessageOwned::ScmRights(raw) = c {
                        for fd in raw {
                            // SAFETY: SCM_RIGHTS gave us these descriptors; we own them now.
                            fds.push(unsafe { OwnedFd::from_raw_fd(fd) });
                        }
                    }
                }
            }
            (msg.bytes, fds)
        }
        Err(Errno::EINTR | Errno::EAGAIN) => return Received::Bad,
        Err(_) => return Received::Closed,
    };
    if bytes == 0 && fds.is_empty() {
        return Received::Closed;
    }
    let mut fds = fds.into_iter();
    let (Some(stdin), Some(stdout), Some(stderr), Some(status), Some(body)) =
        (fds.next(), fds.next(), fds.next(), fds.next(), fds.next())
    else {
        return Received::Bad;
    };
    // The request is in the memfd: read it whole (up to the cap).
    let mut read = 0;
    while read < buffer.len() {
        match nix::sys::uio::pread(&body, &mut buffer[read..], read as libc::off_t) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(Errno::EINTR) => continue,
            Err(_) => return Received::Bad,
        }
    }
    let Ok(request) = serde_json::from_slice::<ExecRequest>(&buffer[..read]) else {
        return Received::Bad;
    };
    Received::Request(request, [stdin, stdout, stderr], status)
}

/// Forks and execs one command; `None` when the fork failed.
fn start_exec(request: &ExecRequest, stdio: [OwnedFd; 3]) -> Option<i32> {
    let argv: Vec<CString> = request
        .argv
        .iter()
        .filter_map(|a| CString::new(a.as_bytes()).ok())
        .collect();
    if argv.len() != request.argv.len() || argv.is_empty() {
        return None;
    }
    let env: Vec<CString> = request
        .env
        .iter()
        .filter_map(|(k, v)| CString::new(format!("{k}={v}")).ok())
        .collect();
    let path_var = request
        .env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let program = resolve(&request.argv[0], &path_var);
    let cwd = CString::new(request.cwd.as_bytes()).ok()?;
    // SAFETY: the init is single-threaded; the child only calls async-signal-safe functions
    // until execve (the strings were built above).
    match unsafe { fork() } {
        Ok(ForkResult::Parent { child }) => Some(child.as_raw()),
        Ok(ForkResult::Child) => {
            let _ = nix::unistd::setsid();
            reset_signals();
            // SAFETY: dup2 onto 0/1/2, then close everything else.
            unsafe {
                libc::dup2(stdio[0].as_raw_fd(), 0);
                libc::dup2(stdio[1].as_raw_fd(), 1);
                libc::dup2(stdio[2].as_raw_fd(), 2);
                libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
            }
            // SAFETY: a valid C string.
            if unsafe { libc::chdir(cwd.as_ptr()) } != 0 {
                let errno = Errno::last();
                let line = format!("iterion: cannot enter {}: {}\n", request.cwd, errno.desc());
                // SAFETY: fd 2 is the exec's stderr.
                let _ = nix::unistd::write(unsafe { BorrowedFd::borrow_raw(2) }, line.as_bytes());
                // SAFETY: ends the child.
                unsafe { libc::_exit(126) }
            }
            let errno = match program {
                Some(program) => {
                    let _ = nix::unistd::execve(&program, &argv, &env);
                    Errno::last()
                }
                None => Errno::ENOENT,
            };
            let line = format!(
                "iterion: cannot run {}: {}\n",
                request.argv[0].escape_default(),
                errno.desc()
            );
            // SAFETY: fd 2 is the exec's stderr.
            let _ = nix::unistd::write(unsafe { BorrowedFd::borrow_raw(2) }, line.as_bytes());
            let code = if errno == Errno::ENOENT { 127 } else { 126 };
            // SAFETY: ends the child.
            unsafe { libc::_exit(code) }
        }
        Err(_) => None,
    }
}

/// `argv[0]` as execvp finds it, on the request's `PATH`.
fn resolve(name: &str, path_var: &str) -> Option<CString> {
    if name.contains('/') {
        return CString::new(name).ok();
    }
    for dir in path_var.split(':').filter(|d| !d.is_empty()) {
        let candidate = Path::new(dir).join(name);
        let c = CString::new(candidate.as_os_str().as_bytes()).ok()?;
        // SAFETY: a valid C string.
        if unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0 && !candidate.is_dir() {
            return Some(c);
        }
    }
    None
}

/// Sends one exec request: its stdin, stdout, stderr, status socket and the memfd holding the
/// request (engine side).
pub(crate) fn send_request(ctl: BorrowedFd<'_>, fds: &[RawFd; 5]) -> Result<(), Errno> {
    let iov = [IoSlice::new(b"x")];
    let cmsg = [nix::sys::socket::ControlMessage::ScmRights(fds)];
    nix::sys::socket::sendmsg::<()>(ctl.as_raw_fd(), &iov, &cmsg, MsgFlags::MSG_NOSIGNAL, None)
        .map(drop)
}

/// The device names of the minimal `/dev`.
pub(crate) fn device_names() -> &'static [&'static str] {
    DEVICES
}

/// `pidfd_open(2)`: a descriptor that names the process `pid` for as long as it is held, so a
/// later kill cannot reach a recycled pid.
pub(crate) fn pidfd_open(pid: i32) -> Result<OwnedFd, Errno> {
    // SAFETY: a plain syscall with integer arguments.
    let rc = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let fd = Errno::result(rc)?;
    let fd = RawFd::try_from(fd).map_err(|_| Errno::EBADF)?;
    // SAFETY: the kernel just gave us this descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// SIGKILL through a pidfd.
pub(crate) fn pidfd_kill(pidfd: BorrowedFd<'_>) -> Result<(), Errno> {
    // SAFETY: a plain syscall on a pidfd we hold.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            libc::SIGKILL,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    Errno::result(rc).map(drop)
}

/// Whether this process may create the sandbox's namespaces: a child tries the same `unshare`
/// the sandbox does and exits at once. Returns the errno when it could not.
pub(crate) fn probe_unshare() -> Result<(), Errno> {
    // SAFETY: the child calls only unshare and _exit.
    match unsafe { fork() }? {
        ForkResult::Child => {
            let flags = CloneFlags::CLONE_NEWUSER
                | CloneFlags::CLONE_NEWNS
                | CloneFlags::CLONE_NEWPID
                | CloneFlags::CLONE_NEWNET
                | CloneFlags::CLONE_NEWIPC
                | CloneFlags::CLONE_NEWUTS
                | CloneFlags::CLONE_NEWCGROUP;
            let code = match unshare(flags) {
                Ok(()) => 0,
                Err(errno) => (errno as i32).clamp(1, 255),
            };
            // SAFETY: ends the probe child.
            unsafe { libc::_exit(code) }
        }
        ForkResult::Parent { child } => loop {
            match waitpid(child, None) {
                Ok(WaitStatus::Exited(_, 0)) => return Ok(()),
                Ok(WaitStatus::Exited(_, code)) => return Err(Errno::from_raw(code)),
                Ok(WaitStatus::Signaled(..)) => return Err(Errno::EINTR),
                Ok(_) | Err(Errno::EINTR) => continue,
                Err(errno) => return Err(errno),
            }
        },
    }
}
