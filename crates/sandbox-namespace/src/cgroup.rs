//! Resource limits for a namespace sandbox (issue 18 item 1: "cgroup v2 limits where
//! delegated"): each sandbox gets its own child cgroup, with the operator's memory, pids and cpu
//! limits ([`Limits`]) written into it, and its init placed in it before it unshares the cgroup
//! namespace.
//!
//! This file owns the whole cgroup policy:
//!
//! - **where** a sandbox's cgroup can go on this host ([`probe`], once per process:
//!   [`support`]), decided by pure functions over what `/proc/self/mountinfo`,
//!   `/proc/self/cgroup` and the cgroup files say ([`locate_v1`], [`locate_v2`],
//!   [`decide_v2`]);
//! - **what** is written ([`writes`], pure);
//! - making, filling and removing one sandbox's cgroup through directory handles
//!   ([`SandboxCgroup`]): the parent is opened once, the child made with `mkdirat`, every file
//!   written with `openat` relative to the child, the child removed with `unlinkat`;
//! - finding what a crashed engine left ([`leftovers`]) for the reaper.
//!
//! # cgroup v1
//!
//! The child goes under the engine's **own** cgroup in each of the `memory`, `pids` and `cpu`
//! hierarchies (the path `/proc/self/cgroup` gives, under the hierarchy's mount), never the root:
//! the engine may itself be confined (a container, a job's cgroup) and the sandbox must stay
//! inside that. v1 has no safe delegation: in practice only a root engine can write there.
//!
//! # cgroup v2
//!
//! The engine's own cgroup must be delegated to it: writable (`cgroup.procs`,
//! `cgroup.subtree_control`) with `memory`, `pids` and `cpu` in its `cgroup.controllers`. The
//! "no internal processes" rule forbids enabling controllers for children of a cgroup that holds
//! processes, and the engine is in it. So, as nsjail and podman's rootless cgroupfs mode do, the
//! engine first moves itself into a leaf of its own (`<own>/iterion-engine`), then enables the
//! controllers in `<own>/cgroup.subtree_control`, and each sandbox's cgroup is a sibling of that
//! leaf. It does so only when the engine is the only process there (`systemd-run --user --scope
//! -p Delegate=yes iterion …` gives exactly that); a cgroup shared with other processes (a login
//! shell's session scope) is refused with that remedy. A cgroup beside the engine's (under its
//! parent) is never used: systemd owns the slices, and only a delegated unit's subtree is ours.
//!
//! # Inside the sandbox
//!
//! The init writes itself into the cgroup (through `cgroup.procs` descriptors the engine opened
//! before the fork) and only then unshares the cgroup namespace: `/proc/self/cgroup` inside
//! shows `/`, and every process of the sandbox is a descendant, so inside the cgroup from its
//! first instruction. No cgroup filesystem is mounted inside (its `/sys` is a fresh sysfs),
//! `mount` is denied by seccomp and no capability is held, so the sandbox can neither raise its
//! limits nor move itself out.

use std::io::Write as _;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use iterion_sandbox::Limits;
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::Mode;
use serde::Serialize;

/// The prefix of every cgroup this driver makes (`iterion-<run id>-<nonce>` per sandbox,
/// `iterion-probe-<nonce>` for the probe's trial, `iterion-engine` for the engine's v2 leaf).
pub const CGROUP_PREFIX: &str = "iterion-";
/// The engine's own leaf on cgroup v2 (see the module doc). Never reaped: the engine is in it.
pub const ENGINE_LEAF: &str = "iterion-engine";
/// The cpu period written with a quota (docker's).
pub const CPU_PERIOD_US: u64 = 100_000;
/// The controllers a sandbox's limits need, in the order the files are written.
pub const CONTROLLERS: [&str; 3] = ["memory", "pids", "cpu"];
/// How long teardown retries `rmdir` while the last processes finish exiting.
const RMDIR_PATIENCE: Duration = Duration::from_secs(2);
/// The remedy of a non-delegated cgroup v2.
const V2_REMEDY: &str = "run iterion under a delegated cgroup of its own: systemd-run --user --scope -p Delegate=yes iterion … (as root: systemd-run --scope -p Delegate=yes iterion …), or use docker or podman";
/// The remedy of an unwritable cgroup v1.
const V1_REMEDY: &str = "cgroup v1 has no delegation: run the engine as root, boot with cgroup v2 (systemd.unified_cgroup_hierarchy=1) and run it under a delegated cgroup, or use docker or podman";

/// The cgroup version limits go through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Version {
    /// One hierarchy per controller (`memory`, `pids`, `cpu` mounted apart or together).
    V1,
    /// The unified hierarchy.
    V2,
}

/// One hierarchy a sandbox's cgroup is made in: the directory its child goes under.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Parent {
    /// The controllers of that hierarchy among [`CONTROLLERS`] (`memory`; `cpu`; all three on v2).
    pub controllers: Vec<String>,
    /// The engine's own cgroup there (v2: after the engine's leaf, the cgroup the leaf is in).
    pub dir: PathBuf,
}

/// Where a sandbox's cgroup goes on this host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Placement {
    /// v1 or v2.
    pub version: Version,
    /// One entry per hierarchy (v2: exactly one).
    pub parents: Vec<Parent>,
    /// v2: what the engine does once, before its first sandbox with limits.
    pub prepare: Option<V2Prepare>,
}

/// The one-time preparation of a delegated cgroup v2 (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct V2Prepare {
    /// Move the engine into `<dir>/iterion-engine` first.
    pub engine_leaf: bool,
    /// The controllers to enable in `<dir>/cgroup.subtree_control`.
    pub enable: Vec<String>,
}

/// Whether this host lets the namespace driver apply limits, and how or why not.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum CgroupSupport {
    /// Limits apply: each sandbox gets a child cgroup there.
    Ready(Placement),
    /// No cgroup can be made: the reason names the hierarchy, the file and the remedy.
    Refused(String),
}

impl CgroupSupport {
    /// Whether limits will be applied.
    pub fn is_ready(&self) -> bool {
        matches!(self, CgroupSupport::Ready(_))
    }

    /// One line for `sandbox doctor` and the driver's refusal.
    pub fn describe(&self) -> String {
        match self {
            CgroupSupport::Ready(placement) => {
                let version = match placement.version {
                    Version::V1 => "cgroup v1",
                    Version::V2 => "cgroup v2 (delegated)",
                };
                let parents: Vec<String> = placement
                    .parents
                    .iter()
                    .map(|p| format!("{} under {}", p.controllers.join(","), p.dir.display()))
                    .collect();
                let prepare = match &placement.prepare {
                    Some(V2Prepare {
                        engine_leaf: true, ..
                    }) => format!(
                        "; the engine first moves itself into {ENGINE_LEAF} there (no internal processes) and enables the controllers"
                    ),
                    Some(_) => "; the engine first enables the controllers there".to_owned(),
                    None => String::new(),
                };
                format!(
                    "applied: {version}, a child cgroup {CGROUP_PREFIX}<run id>-<nonce> per sandbox ({}){prepare}",
                    parents.join("; ")
                )
            }
            CgroupSupport::Refused(reason) => format!("NOT applied: {reason}"),
        }
    }
}

/// What this process can do, probed once ([`probe`]).
pub fn support() -> &'static CgroupSupport {
    static SUPPORT: OnceLock<CgroupSupport> = OnceLock::new();
    SUPPORT.get_or_init(probe)
}

/// Reads where a sandbox's cgroup would go and tries it: a trial child is made and removed in
/// each hierarchy, and its limit files must be there. Blocking. Side effects: the trial cgroups
/// only (the v2 preparation is done at the first sandbox, not here).
pub fn probe() -> CgroupSupport {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let placement = match locate(&mountinfo, &own) {
        Ok(Located::V1(parents)) => Placement {
            version: Version::V1,
            parents,
            prepare: None,
        },
        Ok(Located::V2(dir)) => match decide_v2(&read_v2_facts(&dir)) {
            Ok(placement) => placement,
            Err(reason) => return CgroupSupport::Refused(reason),
        },
        Err(reason) => return CgroupSupport::Refused(reason),
    };
    match trial(&placement) {
        Ok(()) => CgroupSupport::Ready(placement),
        Err(reason) => CgroupSupport::Refused(reason),
    }
}

/// Where the hierarchies are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Located {
    /// v1: one parent per hierarchy holding the controllers.
    V1(Vec<Parent>),
    /// v2: the engine's own cgroup directory.
    V2(PathBuf),
}

/// One cgroup mount of `/proc/self/mountinfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Mount {
    root: String,
    mountpoint: PathBuf,
    v2: bool,
    controllers: Vec<String>,
}

/// `\040` and friends of mountinfo.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && let Ok(byte) = u8::from_str_radix(&field[i + 1..i + 4], 8)
        {
            out.push(byte);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn cgroup_mounts(mountinfo: &str) -> Vec<Mount> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (head, tail) = line.split_once(" - ")?;
            let head: Vec<&str> = head.split(' ').collect();
            let tail: Vec<&str> = tail.split(' ').collect();
            let fstype = *tail.first()?;
            let super_options = tail.get(2).copied().unwrap_or("");
            let (root, mountpoint) = (head.get(3)?, head.get(4)?);
            let v2 = match fstype {
                "cgroup2" => true,
                "cgroup" => false,
                _ => return None,
            };
            Some(Mount {
                root: unescape(root),
                mountpoint: PathBuf::from(unescape(mountpoint)),
                v2,
                controllers: super_options
                    .split(',')
                    .filter(|o| CONTROLLERS.contains(o))
                    .map(str::to_owned)
                    .collect(),
            })
        })
        .collect()
}

/// The directory of cgroup `path` of a hierarchy mounted at `mount`, or `None` when the mount
/// does not show it (a bind of another subtree).
fn dir_under(mount: &Mount, path: &str) -> Option<PathBuf> {
    let relative = if mount.root == "/" {
        path
    } else {
        let rest = path.strip_prefix(mount.root.as_str())?;
        if !rest.is_empty() && !rest.starts_with('/') {
            return None;
        }
        rest
    };
    let relative = relative.trim_start_matches('/');
    if relative.split('/').any(|c| c == "..") {
        return None;
    }
    Some(if relative.is_empty() {
        mount.mountpoint.clone()
    } else {
        mount.mountpoint.join(relative)
    })
}

/// Decides v1 or v2 and finds the engine's own cgroup in each hierarchy. Pure.
///
/// v2 when a `cgroup2` mount carries the controllers (a pure v2 host: `/sys/fs/cgroup` is
/// `cgroup2`), v1 when each of them is in a v1 hierarchy. A controller serves one hierarchy
/// only: systemd's hybrid `unified` mount carries none of them and is ignored.
///
/// # Errors
///
/// Why the engine's cgroup cannot be found, with the remedy.
pub fn locate(mountinfo: &str, proc_cgroup: &str) -> Result<Located, String> {
    let mounts = cgroup_mounts(mountinfo);
    let v1_has = |c: &str| {
        mounts
            .iter()
            .any(|m| !m.v2 && m.controllers.iter().any(|x| x == c))
    };
    if CONTROLLERS.iter().all(|c| !v1_has(c)) {
        return locate_v2(&mounts, proc_cgroup);
    }
    locate_v1(&mounts, proc_cgroup)
}

fn locate_v2(mounts: &[Mount], proc_cgroup: &str) -> Result<Located, String> {
    let Some(mount) = mounts.iter().find(|m| m.v2) else {
        return Err(format!(
            "no cgroup filesystem is mounted with the memory, pids and cpu controllers (neither a cgroup2 mount nor v1 hierarchies); {V2_REMEDY}"
        ));
    };
    let Some(own) = proc_cgroup
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
    else {
        return Err(
            "cgroup v2: /proc/self/cgroup has no `0::` line for the unified hierarchy".to_owned(),
        );
    };
    let own = own.trim();
    dir_under(mount, own).map(Located::V2).ok_or_else(|| {
        format!(
            "cgroup v2: the engine's cgroup {own} is not visible under {} (mounted from {}); {V2_REMEDY}",
            mount.mountpoint.display(),
            mount.root
        )
    })
}

fn locate_v1(mounts: &[Mount], proc_cgroup: &str) -> Result<Located, String> {
    let mut parents: Vec<Parent> = Vec::new();
    for controller in CONTROLLERS {
        if parents
            .iter()
            .any(|p| p.controllers.iter().any(|c| c == controller))
        {
            continue;
        }
        let Some(mount) = mounts
            .iter()
            .find(|m| !m.v2 && m.controllers.iter().any(|c| c == controller))
        else {
            return Err(format!(
                "cgroup v1: no hierarchy carries the {controller} controller (it is not mounted, or it lives in the unified hierarchy beside v1 ones, which iterion does not mix); {V1_REMEDY}"
            ));
        };
        let own = proc_cgroup.lines().find_map(|line| {
            let mut fields = line.splitn(3, ':');
            let (_, names, path) = (fields.next()?, fields.next()?, fields.next()?);
            names
                .split(',')
                .any(|n| n == controller)
                .then(|| path.trim().to_owned())
        });
        let Some(own) = own else {
            return Err(format!(
                "cgroup v1: /proc/self/cgroup names no cgroup of the {controller} hierarchy"
            ));
        };
        let dir = dir_under(mount, &own).ok_or_else(|| {
            format!(
                "cgroup v1: the engine's {controller} cgroup {own} is not visible under {} (mounted from {}); {V1_REMEDY}",
                mount.mountpoint.display(),
                mount.root
            )
        })?;
        parents.push(Parent {
            controllers: mount
                .controllers
                .iter()
                .filter(|c| CONTROLLERS.contains(&c.as_str()))
                .cloned()
                .collect(),
            dir,
        });
    }
    Ok(Located::V1(parents))
}

/// What the cgroup v2 decision reads of the engine's own cgroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct V2Facts {
    /// The engine's own cgroup directory.
    pub dir: PathBuf,
    /// Whether the engine may write the directory, its `cgroup.procs` and its
    /// `cgroup.subtree_control`; `Err` names the first that it may not.
    pub writable: Result<(), String>,
    /// `cgroup.controllers`.
    pub controllers: Vec<String>,
    /// `cgroup.subtree_control`.
    pub subtree_control: Vec<String>,
    /// `cgroup.procs`.
    pub procs: Vec<i32>,
    /// Whether `dir` is the hierarchy's root (exempt from the no-internal-processes rule).
    pub is_root: bool,
    /// The engine's pid.
    pub engine_pid: i32,
}

/// Reads [`V2Facts`] of `dir`.
pub fn read_v2_facts(dir: &Path) -> V2Facts {
    let words = |file: &str| -> Vec<String> {
        std::fs::read_to_string(dir.join(file))
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    let writable = ["", "cgroup.procs", "cgroup.subtree_control"]
        .into_iter()
        .try_for_each(|file| {
            let path = if file.is_empty() {
                dir.to_owned()
            } else {
                dir.join(file)
            };
            nix::unistd::access(&path, nix::unistd::AccessFlags::W_OK)
                .map_err(|e| format!("{} ({})", path.display(), e.desc()))
        });
    V2Facts {
        dir: dir.to_owned(),
        writable,
        controllers: words("cgroup.controllers"),
        subtree_control: words("cgroup.subtree_control"),
        procs: words("cgroup.procs")
            .iter()
            .filter_map(|p| p.parse().ok())
            .collect(),
        // The root has no cgroup.type (nor cgroup.procs restrictions).
        is_root: !dir.join("cgroup.type").exists(),
        engine_pid: i32::try_from(std::process::id()).unwrap_or(-1),
    }
}

/// Where a sandbox's cgroup goes on a cgroup v2 host, from the engine's own cgroup (see the
/// module doc). Pure.
///
/// # Errors
///
/// Why not: not writable (not delegated), a controller not delegated, or other processes
/// sharing the engine's cgroup; each with the remedy.
pub fn decide_v2(facts: &V2Facts) -> Result<Placement, String> {
    let dir = facts.dir.display();
    if let Err(what) = &facts.writable {
        return Err(format!(
            "cgroup v2: the engine's cgroup {dir} is not delegated to it ({what} is not writable); {V2_REMEDY}"
        ));
    }
    let missing: Vec<&str> = CONTROLLERS
        .into_iter()
        .filter(|c| !facts.controllers.iter().any(|have| have == c))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "cgroup v2: {dir}/cgroup.controllers lacks {} (the parent cgroup does not delegate {}); {V2_REMEDY} (systemd delegates memory, pids and cpu with Delegate=yes)",
            missing.join(", "),
            if missing.len() == 1 { "it" } else { "them" },
        ));
    }
    let enable: Vec<String> = CONTROLLERS
        .into_iter()
        .filter(|c| !facts.subtree_control.iter().any(|have| have == c))
        .map(str::to_owned)
        .collect();
    let parents = vec![Parent {
        controllers: CONTROLLERS.map(str::to_owned).to_vec(),
        dir: facts.dir.clone(),
    }];
    let prepare = if enable.is_empty() {
        None
    } else if facts.is_root {
        Some(V2Prepare {
            engine_leaf: false,
            enable,
        })
    } else {
        let others: Vec<String> = facts
            .procs
            .iter()
            .filter(|p| **p != facts.engine_pid)
            .map(i32::to_string)
            .collect();
        if !others.is_empty() {
            return Err(format!(
                "cgroup v2: {dir} holds other processes besides the engine (pids {}), so its controllers cannot be enabled for children (the no-internal-processes rule) and the engine will not move them; {V2_REMEDY}",
                others.join(", ")
            ));
        }
        Some(V2Prepare {
            engine_leaf: true,
            enable,
        })
    };
    Ok(Placement {
        version: Version::V2,
        parents,
        prepare,
    })
}

/// The files written into a sandbox's cgroup for `limits`, in order, per controller: the
/// optional ones (swap) are skipped when the kernel does not have them. Pure.
pub fn writes(version: Version, limits: &Limits) -> Vec<Write> {
    let mut out = Vec::new();
    let quota = |nano: u64| (u128::from(nano) * u128::from(CPU_PERIOD_US) / 1_000_000_000) as u64;
    match version {
        Version::V1 => {
            if let Some(bytes) = limits.memory_bytes {
                out.push(Write::required("memory", "memory.limit_in_bytes", bytes));
                // No swap beyond the limit (memsw is memory + swap); absent without swap
                // accounting, where there is nothing to bound.
                out.push(Write::optional(
                    "memory",
                    "memory.memsw.limit_in_bytes",
                    bytes,
                ));
            }
            if let Some(pids) = limits.pids {
                out.push(Write::required("pids", "pids.max", pids));
            }
            if let Some(nano) = limits.nano_cpus {
                out.push(Write::required("cpu", "cpu.cfs_period_us", CPU_PERIOD_US));
                out.push(Write::required("cpu", "cpu.cfs_quota_us", quota(nano)));
            }
        }
        Version::V2 => {
            if let Some(bytes) = limits.memory_bytes {
                out.push(Write::required("memory", "memory.max", bytes));
                out.push(Write::optional("memory", "memory.swap.max", 0));
            }
            if let Some(pids) = limits.pids {
                out.push(Write::required("pids", "pids.max", pids));
            }
            if let Some(nano) = limits.nano_cpus {
                out.push(Write {
                    controller: "cpu",
                    file: "cpu.max",
                    value: format!("{} {CPU_PERIOD_US}", quota(nano)),
                    optional: false,
                });
            }
        }
    }
    out
}

/// One file of a sandbox's cgroup and what goes in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    /// The controller it belongs to (which hierarchy, on v1).
    pub controller: &'static str,
    /// The file.
    pub file: &'static str,
    /// Its content.
    pub value: String,
    /// Skipped when the kernel has no such file.
    pub optional: bool,
}

impl Write {
    fn required(controller: &'static str, file: &'static str, value: u64) -> Write {
        Write {
            controller,
            file,
            value: value.to_string(),
            optional: false,
        }
    }

    fn optional(controller: &'static str, file: &'static str, value: u64) -> Write {
        Write {
            optional: true,
            ..Write::required(controller, file, value)
        }
    }
}

/// A failed cgroup step: which file of which hierarchy, and what the kernel said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupError {
    /// `mkdir`, `write memory.limit_in_bytes`, `place`, ….
    pub step: String,
    /// The path involved.
    pub path: PathBuf,
    /// The kernel's answer.
    pub reason: String,
}

impl std::fmt::Display for CgroupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.step, self.path.display(), self.reason)
    }
}

fn cerr(step: impl Into<String>, path: &Path) -> impl FnOnce(Errno) -> CgroupError {
    let (step, path) = (step.into(), path.to_owned());
    move |errno| CgroupError {
        step,
        path,
        reason: errno.desc().to_owned(),
    }
}

fn open_dir(path: &Path) -> Result<OwnedFd, Errno> {
    nix::fcntl::open(
        path,
        OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW,
        Mode::empty(),
    )
}

fn open_dir_at(dir: &OwnedFd, name: &str) -> Result<OwnedFd, Errno> {
    nix::fcntl::openat(
        dir,
        name,
        OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW,
        Mode::empty(),
    )
}

/// Whether `name` exists in `dir` (not following a link).
fn exists_at(dir: &OwnedFd, name: &str) -> bool {
    nix::sys::stat::fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW).is_ok()
}

/// Writes `value` to the file `name` of `dir` (one `write`, as the kernel wants it).
fn write_at(dir: &OwnedFd, name: &str, value: &str) -> Result<(), Errno> {
    let fd = nix::fcntl::openat(
        dir,
        name,
        // O_TRUNC as a shell's `>` does (the kernel ignores it on cgroup files).
        OFlag::O_WRONLY | OFlag::O_TRUNC | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW,
        Mode::empty(),
    )?;
    let mut file = std::fs::File::from(fd);
    file.write_all(value.as_bytes())
        .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))
}

/// `rmdir name` in `dir`, retried while the cgroup still holds exiting processes (`EBUSY`).
/// Already gone is success.
fn rmdir_at(dir: &OwnedFd, name: &str, patience: Duration) -> Result<(), Errno> {
    let start = std::time::Instant::now();
    loop {
        match nix::unistd::unlinkat(dir, name, nix::unistd::UnlinkatFlags::RemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => return Ok(()),
            Err(Errno::EBUSY | Errno::EAGAIN) if start.elapsed() < patience => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(errno) => return Err(errno),
        }
    }
}

/// A fresh nonce for a cgroup name.
fn nonce() -> String {
    let mut bytes = [0u8; 4];
    if getrandom::fill(&mut bytes).is_err() {
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .subsec_nanos();
        bytes = (nanos ^ std::process::id()).to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The name of a sandbox's cgroup. A run id is a UUID (validated by the engine), and anything
/// that could leave the directory is replaced.
pub fn sandbox_name(run_id: &str, nonce: &str) -> String {
    let clean: String = run_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    format!("{CGROUP_PREFIX}{clean}-{nonce}")
}

/// The run id a cgroup's name carries (`""` for the probe's trial), or `None` when the name is
/// not one this driver makes (the engine's leaf included: never reaped).
pub fn run_id_of(name: &str) -> Option<String> {
    let rest = name.strip_prefix(CGROUP_PREFIX)?;
    if rest.strip_prefix("probe-").is_some_and(is_nonce) {
        return Some(String::new());
    }
    let (run, nonce) = rest.rsplit_once('-')?;
    (is_nonce(nonce) && !run.is_empty() && run != "engine").then(|| run.to_owned())
}

fn is_nonce(text: &str) -> bool {
    text.len() == 8 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// One hierarchy's half of a sandbox's cgroup.
struct Made {
    parent: OwnedFd,
    name: String,
    dir: OwnedFd,
    path: PathBuf,
    controllers: Vec<String>,
}

/// A sandbox's cgroup, made and filled, removed when dropped (after its processes are gone).
pub(crate) struct SandboxCgroup {
    made: Vec<Made>,
    /// `cgroup.procs` of each hierarchy, opened for the init to write itself in.
    procs: Vec<OwnedFd>,
}

impl std::fmt::Debug for SandboxCgroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SandboxCgroup")
            .field("paths", &self.paths())
            .finish_non_exhaustive()
    }
}

impl SandboxCgroup {
    /// Makes the cgroup `iterion-<run id>-<nonce>` in each hierarchy of `placement` and writes
    /// `limits` ([`writes`]). Any failure removes what was made and names the file.
    ///
    /// # Errors
    ///
    /// [`CgroupError`] naming the step, the file and the kernel's answer.
    pub(crate) fn create(
        placement: &Placement,
        run_id: &str,
        limits: &Limits,
    ) -> Result<SandboxCgroup, CgroupError> {
        if let Some(prepare) = &placement.prepare {
            prepare_v2_once(&placement.parents[0].dir, prepare)?;
        }
        let mut cgroup = SandboxCgroup::make(placement, run_id)?;
        cgroup.fill(placement.version, limits)?;
        cgroup.open_procs()?;
        Ok(cgroup)
    }

    /// Makes the (empty) cgroup in each hierarchy.
    pub(crate) fn make(placement: &Placement, run_id: &str) -> Result<SandboxCgroup, CgroupError> {
        let mut cgroup = SandboxCgroup {
            made: Vec::new(),
            procs: Vec::new(),
        };
        let nonce = nonce();
        for parent in &placement.parents {
            let parent_fd = open_dir(&parent.dir).map_err(cerr("open", &parent.dir))?;
            let name = sandbox_name(run_id, &nonce);
            let path = parent.dir.join(&name);
            nix::sys::stat::mkdirat(&parent_fd, name.as_str(), Mode::from_bits_truncate(0o755))
                .map_err(cerr("mkdir", &path))?;
            let dir = match open_dir_at(&parent_fd, &name) {
                Ok(dir) => dir,
                Err(errno) => {
                    let _ = rmdir_at(&parent_fd, &name, Duration::ZERO);
                    return Err(cerr("open", &path)(errno));
                }
            };
            cgroup.made.push(Made {
                parent: parent_fd,
                name,
                dir,
                path,
                controllers: parent.controllers.clone(),
            });
        }
        Ok(cgroup)
    }

    /// Opens each `cgroup.procs` for the init.
    fn open_procs(&mut self) -> Result<(), CgroupError> {
        for made in &self.made {
            let fd = nix::fcntl::openat(
                &made.dir,
                "cgroup.procs",
                OFlag::O_WRONLY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW,
                Mode::empty(),
            )
            .map_err(cerr("open", &made.path.join("cgroup.procs")))?;
            self.procs.push(fd);
        }
        Ok(())
    }

    /// Writes the limit files into the cgroups already made.
    pub(crate) fn fill(&self, version: Version, limits: &Limits) -> Result<(), CgroupError> {
        for write in writes(version, limits) {
            let Some(made) = self
                .made
                .iter()
                .find(|m| m.controllers.iter().any(|c| c == write.controller))
            else {
                return Err(CgroupError {
                    step: format!("write {}", write.file),
                    path: PathBuf::new(),
                    reason: format!("no {} hierarchy was made", write.controller),
                });
            };
            if write.optional && !exists_at(&made.dir, write.file) {
                continue;
            }
            write_at(&made.dir, write.file, &write.value).map_err(|errno| CgroupError {
                step: format!("write {} = {}", write.file, write.value),
                path: made.path.join(write.file),
                reason: errno.desc().to_owned(),
            })?;
        }
        Ok(())
    }

    /// The `cgroup.procs` descriptors the init writes itself into (before it unshares).
    pub(crate) fn procs_fds(&self) -> Vec<RawFd> {
        self.procs.iter().map(AsRawFd::as_raw_fd).collect()
    }

    /// The cgroup's directories, one per hierarchy.
    pub(crate) fn paths(&self) -> Vec<PathBuf> {
        self.made.iter().map(|m| m.path.clone()).collect()
    }

    /// Removes the cgroups (the processes must be gone; `EBUSY` is retried for a while).
    pub(crate) fn remove(&mut self) -> Vec<CgroupError> {
        self.procs.clear();
        let mut failed = Vec::new();
        for made in self.made.drain(..) {
            let Made {
                parent, name, path, ..
            } = made;
            if let Err(errno) = rmdir_at(&parent, &name, RMDIR_PATIENCE) {
                failed.push(cerr("rmdir", &path)(errno));
            }
        }
        failed
    }
}

impl Drop for SandboxCgroup {
    fn drop(&mut self) {
        for error in self.remove() {
            tracing::warn!(
                "namespace sandbox: cgroup left behind ({error}); the reaper removes it once its processes are gone"
            );
        }
    }
}

/// The v2 preparation (see the module doc), done at most once per process.
fn prepare_v2_once(dir: &Path, prepare: &V2Prepare) -> Result<(), CgroupError> {
    static DONE: std::sync::Mutex<bool> = std::sync::Mutex::new(false);
    let mut done = DONE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if *done {
        return Ok(());
    }
    prepare_v2(dir, prepare, std::process::id())?;
    *done = true;
    Ok(())
}

/// Moves `pid` (the engine) into `<dir>/iterion-engine` when asked, then enables the
/// controllers in `<dir>/cgroup.subtree_control`.
pub(crate) fn prepare_v2(dir: &Path, prepare: &V2Prepare, pid: u32) -> Result<(), CgroupError> {
    let fd = open_dir(dir).map_err(cerr("open", dir))?;
    if prepare.engine_leaf {
        let leaf = dir.join(ENGINE_LEAF);
        match nix::sys::stat::mkdirat(&fd, ENGINE_LEAF, Mode::from_bits_truncate(0o755)) {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(errno) => return Err(cerr("mkdir", &leaf)(errno)),
        }
        let leaf_fd = open_dir_at(&fd, ENGINE_LEAF).map_err(cerr("open", &leaf))?;
        write_at(&leaf_fd, "cgroup.procs", &pid.to_string())
            .map_err(cerr("move the engine into", &leaf.join("cgroup.procs")))?;
    }
    if !prepare.enable.is_empty() {
        let value = prepare
            .enable
            .iter()
            .map(|c| format!("+{c}"))
            .collect::<Vec<_>>()
            .join(" ");
        write_at(&fd, "cgroup.subtree_control", &value).map_err(|errno| CgroupError {
            step: format!("enable {value}"),
            path: dir.join("cgroup.subtree_control"),
            reason: errno.desc().to_owned(),
        })?;
    }
    Ok(())
}

/// The probe's trial: a child made, its limit files checked, removed, in each hierarchy.
fn trial(placement: &Placement) -> Result<(), String> {
    let version = match placement.version {
        Version::V1 => "cgroup v1",
        Version::V2 => "cgroup v2",
    };
    for parent in &placement.parents {
        let remedy = match placement.version {
            Version::V1 => V1_REMEDY,
            Version::V2 => V2_REMEDY,
        };
        let fd = open_dir(&parent.dir).map_err(|e| {
            format!(
                "{version}: cannot open {} ({}); {remedy}",
                parent.dir.display(),
                e.desc()
            )
        })?;
        let name = format!("{CGROUP_PREFIX}probe-{}", nonce());
        let path = parent.dir.join(&name);
        if let Err(errno) =
            nix::sys::stat::mkdirat(&fd, name.as_str(), Mode::from_bits_truncate(0o755))
        {
            return Err(format!(
                "{version}: the engine cannot make a child cgroup in {} ({}: mkdir {}); {remedy}",
                parent.dir.display(),
                errno.desc(),
                path.display()
            ));
        }
        let checked = (|| -> Result<(), String> {
            // On v2 the controllers' files appear only once enabled: the preparation does it.
            if placement.version == Version::V2 {
                return Ok(());
            }
            let child = open_dir_at(&fd, &name).map_err(|e| e.desc().to_owned())?;
            let needed = writes(
                placement.version,
                &Limits {
                    memory_bytes: Some(1),
                    nano_cpus: Some(1),
                    pids: Some(1),
                },
            );
            for write in needed
                .iter()
                .filter(|w| !w.optional && parent.controllers.iter().any(|c| c == w.controller))
            {
                if !exists_at(&child, write.file) {
                    return Err(format!(
                        "{version}: a child cgroup of {} has no {} (the {} controller is not active there); {remedy}",
                        parent.dir.display(),
                        write.file,
                        write.controller
                    ));
                }
                if nix::unistd::faccessat(
                    &child,
                    write.file,
                    nix::unistd::AccessFlags::W_OK,
                    AtFlags::empty(),
                )
                .is_err()
                {
                    return Err(format!(
                        "{version}: {} of a child cgroup of {} is not writable by the engine; {remedy}",
                        write.file,
                        parent.dir.display()
                    ));
                }
            }
            Ok(())
        })();
        let _ = rmdir_at(&fd, &name, Duration::from_millis(200));
        checked?;
    }
    Ok(())
}

/// A cgroup a sandbox (or the probe) of some engine made and nobody removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leftover {
    /// Its directory.
    pub path: PathBuf,
    /// The run id its name carries (`""` for a probe's trial).
    pub run_id: String,
    /// Whether it holds no process.
    pub empty: bool,
    /// How long ago it was made (its ctime).
    pub age: Duration,
}

/// The most directories [`leftovers`] looks at, and how deep.
const WALK_LIMIT: usize = 20_000;
const WALK_DEPTH: usize = 12;

/// Every cgroup named like this driver's ([`run_id_of`]) in the hierarchies a sandbox's cgroup
/// is made in, found by walking each from its mount (an engine that crashed may have run in
/// another cgroup than this one: a v1 `memory` cgroup per session, another service). Blocking.
pub fn leftovers() -> Vec<Leftover> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mounts = cgroup_mounts(&mountinfo);
    let v1 = mounts.iter().any(|m| !m.v2 && !m.controllers.is_empty());
    let mut roots: Vec<PathBuf> = mounts
        .iter()
        .filter(|m| {
            if v1 {
                !m.v2 && !m.controllers.is_empty()
            } else {
                m.v2
            }
        })
        .map(|m| m.mountpoint.clone())
        .collect();
    roots.dedup();
    let mut found = Vec::new();
    for root in roots {
        walk(&root, 0, &mut 0, &mut found);
    }
    found
}

/// The leftovers under `root` (tests walk a fake tree).
pub fn leftovers_under(root: &Path) -> Vec<Leftover> {
    let mut found = Vec::new();
    walk(root, 0, &mut 0, &mut found);
    found
}

fn walk(dir: &Path, depth: usize, seen: &mut usize, found: &mut Vec<Leftover>) {
    if depth > WALK_DEPTH || *seen > WALK_LIMIT {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if !kind.is_dir() {
            continue;
        }
        *seen += 1;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if let Some(run_id) = run_id_of(&name) {
            let empty = std::fs::read_to_string(path.join("cgroup.procs"))
                .map(|p| p.trim().is_empty())
                .unwrap_or(false);
            let age = std::fs::symlink_metadata(&path)
                .ok()
                .and_then(|m| {
                    use std::os::unix::fs::MetadataExt as _;
                    let made = SystemTime::UNIX_EPOCH
                        + Duration::from_secs(u64::try_from(m.ctime()).unwrap_or(0));
                    SystemTime::now().duration_since(made).ok()
                })
                .unwrap_or_default();
            found.push(Leftover {
                path,
                run_id,
                empty,
                age,
            });
            // A sandbox cannot make cgroups of its own: nothing below to look at.
            continue;
        }
        walk(&path, depth + 1, seen, found);
    }
}

/// Removes a leftover cgroup: only an empty one, only by a name this driver makes. The kernel
/// refuses to remove a cgroup that still holds a process (`EBUSY`), so a live sandbox is safe
/// even from a wrong verdict.
///
/// # Errors
///
/// The kernel's answer.
pub fn remove_leftover(leftover: &Leftover) -> std::io::Result<()> {
    let name = leftover
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let Some(parent) = leftover.path.parent() else {
        return Err(std::io::Error::other("no parent"));
    };
    if run_id_of(&name).is_none() {
        return Err(std::io::Error::other("not an iterion sandbox cgroup"));
    }
    let fd = open_dir(parent).map_err(std::io::Error::from)?;
    rmdir_at(&fd, &name, Duration::from_millis(100)).map_err(std::io::Error::from)
}

#[cfg(test)]
#[path = "cgroup_tests.rs"]
mod tests;
