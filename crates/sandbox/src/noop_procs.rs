//! The host processes of a noop run (issue 15 item 17): with no container to end them, the run
//! itself must leave no process behind on cancel, on `max_duration`, or when it is dropped.
//!
//! Two nets, both owned here:
//! - **Process groups.** Every exec leads a process group of its own (`process_group(0)`), so
//!   its background jobs and grandchildren (`sleep 1000 &`, `nohup …`, a double fork) share its
//!   group id. A cancelled exec (its future dropped) gets its group SIGTERMed at once and
//!   SIGKILLed after [`GRACE`]; an exec that ended keeps its group on the run's list while
//!   anything is left in it, as a container keeps an exec's background jobs until the run ends.
//! - **A marker.** Every exec's environment carries [`HOST_RUN_MARKER`] with a value unique to
//!   this run and exec (`<run id>:<engine pid>:<run n>/<exec n>`), so a process that left the
//!   group (`setsid`, `setpgid`) but kept its environment is still found, by
//!   `/proc/<pid>/environ`: a cancelled exec's own, or the whole run's at its end.
//!
//! At cleanup and when the run is dropped, every process either net finds is sent SIGTERM, given
//! [`GRACE`] to exit, then SIGKILL. What neither net catches — a process that both leaves the
//! group and clears its environment — is a residual risk (docs/security.md).

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

/// The environment variable every host exec carries, naming its run.
pub(crate) const HOST_RUN_MARKER: &str = "ITERION_HOST_RUN";

/// How long a SIGTERMed process has before SIGKILL (defined here).
pub(crate) const GRACE: Duration = Duration::from_millis(500);

static NEXT: AtomicU64 = AtomicU64::new(0);

/// The processes of one host run.
#[derive(Debug)]
pub(crate) struct HostProcesses {
    marker: String,
    execs: AtomicU64,
    groups: Mutex<BTreeSet<i32>>,
}

impl HostProcesses {
    pub(crate) fn new(run_id: &str) -> HostProcesses {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        HostProcesses {
            marker: format!("{run_id}:{}:{n}", std::process::id()),
            execs: AtomicU64::new(0),
            groups: Mutex::new(BTreeSet::new()),
        }
    }

    /// The `(name, value)` the next exec of this run carries.
    pub(crate) fn marker_env(&self) -> (String, String) {
        let n = self.execs.fetch_add(1, Ordering::Relaxed);
        (HOST_RUN_MARKER.to_owned(), format!("{}/{n}", self.marker))
    }

    fn with_groups<T>(&self, f: impl FnOnce(&mut BTreeSet<i32>) -> T) -> T {
        match self.groups.lock() {
            Ok(mut groups) => f(&mut groups),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// Records the group an exec leads (its pid) and the marker value it carries; the guard
    /// ends both if the exec is cancelled.
    pub(crate) fn track(&self, pgid: u32, marker: String) -> GroupGuard<'_> {
        let pgid = i32::try_from(pgid).unwrap_or(0);
        if pgid > 0 {
            self.with_groups(|groups| groups.insert(pgid));
        }
        GroupGuard {
            owner: self,
            pgid,
            marker,
            done: false,
        }
    }

    /// Ends every process of the run: SIGTERM, up to [`GRACE`] to exit, SIGKILL. Blocking
    /// (short); safe to call more than once.
    pub(crate) fn terminate_all(&self) {
        let groups: Vec<i32> = self.with_groups(std::mem::take).into_iter().collect();
        let prefix = format!("{}/", self.marker);
        let marked = marked_pids(&prefix);
        if groups.is_empty() && marked.is_empty() {
            return;
        }
        for pgid in &groups {
            let _ = killpg(Pid::from_raw(*pgid), Signal::SIGTERM);
        }
        for pid in &marked {
            let _ = kill(Pid::from_raw(*pid), Signal::SIGTERM);
        }
        let deadline = Instant::now() + GRACE;
        while Instant::now() < deadline
            && (groups.iter().any(|g| group_alive(*g)) || !marked_pids(&prefix).is_empty())
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        for pgid in &groups {
            let _ = killpg(Pid::from_raw(*pgid), Signal::SIGKILL);
        }
        for pid in marked_pids(&prefix) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

/// Live processes (not zombies) whose environment's marker value starts with `prefix` (a run's
/// `<marker>/`, or one exec's whole value); never this process.
fn marked_pids(prefix: &str) -> Vec<i32> {
    let needle = format!("{HOST_RUN_MARKER}={prefix}").into_bytes();
    let exact = !prefix.ends_with('/');
    let me = i32::try_from(std::process::id()).unwrap_or(0);
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
                env.split(|b| *b == 0).any(|var| {
                    if exact {
                        var == needle.as_slice()
                    } else {
                        var.starts_with(&needle)
                    }
                })
            }) && !is_zombie(*pid)
        })
        .collect()
}

impl Drop for HostProcesses {
    fn drop(&mut self) {
        self.terminate_all();
    }
}

fn group_alive(pgid: i32) -> bool {
    !matches!(killpg(Pid::from_raw(pgid), None), Err(Errno::ESRCH))
}

fn is_zombie(pid: i32) -> bool {
    // `/proc/<pid>/stat`: `pid (comm) S …`; comm may hold spaces and parentheses.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

/// One exec's group. Dropped before [`GroupGuard::finished`] (the exec was cancelled or timed
/// out): the group is SIGTERMed now and SIGKILLed after [`GRACE`] on a thread of its own.
pub(crate) struct GroupGuard<'a> {
    owner: &'a HostProcesses,
    pgid: i32,
    marker: String,
    done: bool,
}

impl GroupGuard<'_> {
    /// The exec ended: its group stays on the run's list while anything is left in it.
    pub(crate) fn finished(mut self) {
        self.done = true;
        if self.pgid > 0 && !group_alive(self.pgid) {
            self.owner.with_groups(|groups| groups.remove(&self.pgid));
        }
    }
}

impl Drop for GroupGuard<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let pgid = (self.pgid > 0).then(|| Pid::from_raw(self.pgid));
        let marker = std::mem::take(&mut self.marker);
        let signal_all = move |signal: Signal| {
            if let Some(pgid) = pgid {
                let _ = killpg(pgid, signal);
            }
            for pid in marked_pids(&marker) {
                let _ = kill(Pid::from_raw(pid), signal);
            }
        };
        signal_all(Signal::SIGTERM);
        let _ = std::thread::Builder::new()
            .name("iterion-noop-kill".to_owned())
            .spawn(move || {
                std::thread::sleep(GRACE);
                signal_all(Signal::SIGKILL);
            });
    }
}

/// A host process group the engine started outside a noop run (the host `devbox install`):
/// dropped before [`ProcessGroupGuard::finished`] — the command timed out or its run was
/// cancelled — the whole group is SIGTERMed, then SIGKILLed after `GRACE`.
#[derive(Debug)]
pub struct ProcessGroupGuard {
    pgid: i32,
    done: bool,
}

impl ProcessGroupGuard {
    /// Guards the group led by `pid` (a child spawned with `process_group(0)`).
    pub fn new(pid: Option<u32>) -> ProcessGroupGuard {
        ProcessGroupGuard {
            pgid: pid.and_then(|p| i32::try_from(p).ok()).unwrap_or(0),
            done: false,
        }
    }

    /// The command ended on its own: the guard is disarmed.
    pub fn finished(mut self) {
        self.done = true;
    }
}

impl Drop for ProcessGroupGuard {
    fn drop(&mut self) {
        if self.done || self.pgid <= 0 {
            return;
        }
        let pgid = Pid::from_raw(self.pgid);
        let _ = killpg(pgid, Signal::SIGTERM);
        let _ = std::thread::Builder::new()
            .name("iterion-group-kill".to_owned())
            .spawn(move || {
                std::thread::sleep(GRACE);
                let _ = killpg(pgid, Signal::SIGKILL);
            });
    }
}
