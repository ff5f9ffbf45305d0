//! The embedded namespace sandbox (issue 18 items 1–2): a [`Driver`](iterion_sandbox::Driver)
//! whose sandboxes need no daemon and no image. The iterion binary itself forks a process that
//! unshares user, mount, pid, network, ipc, uts and cgroup namespaces and builds the run's view
//! of the machine:
//!
//! - the host's root, **read-only**, as the image (its top-level dirs bound into a tmpfs root,
//!   `nosuid`, `nodev`); `/home` and `/root` empty; the paths mount screening protects masked
//!   ([`ScreenContext::masked_paths`](iterion_sandbox::ScreenContext::masked_paths): the
//!   secret system files, the engine sockets and state, the operator's home, the store, the
//!   runtime root); `/run` a fresh tmpfs;
//! - the workspace (an untrusted run's copy, which the engine made) read-write at its own path;
//!   tmpfs `/tmp` and HOME; a fresh `/proc` of the sandbox's pid namespace; a minimal `/dev`
//!   (`null`, `zero`, `full`, `random`, `urandom`, `tty`, its own `pts`, `shm`); `/sys` of its own
//!   network namespace;
//! - the engine's mounts (the static iterion binary, the run files, the `net/` dir with the
//!   proxy socket, file secrets, the egress CA) bound from descriptors opened before the fork,
//!   so what is mounted is what was screened;
//! - no network but loopback: the engine's egress bridge (`iterion __egress-bridge`, exactly as
//!   on docker's `network none`) is the only way out, to the per-run proxy's Unix socket;
//! - one uid and one gid mapped (the run's, onto the engine's own user, or onto the untrusted
//!   copy's owner when the engine is root): no setuid helper, no `/etc/subuid`;
//! - Landlock (write only where the mounts allow it, where the kernel has it), `no_new_privs`,
//!   no capability at all (bounding, ambient, permitted, effective and inheritable sets
//!   emptied), a seccomp filter ([`seccomp`]), no core dumps.
//!
//! The sandbox is one long-lived init per run (pid 1 of its namespace); an exec asks it to fork
//! the command (`init.rs` argues why over `setns`). Teardown kills the init, which takes the
//! whole pid namespace, and the mounts vanish with the mount namespace: nothing is left on the
//! host but what the engine itself made. If the engine dies, the kernel's parent-death signal
//! ends the sandbox the same way.
//!
//! Resource limits ([`cgroup`]): where this host lets the engine make a cgroup (v1 as root, v2
//! where delegated), each sandbox gets its own, with the operator's memory, pids and cpu limits,
//! entered by the init before it unshares the cgroup namespace; teardown removes it, and the
//! reaper ([`NamespaceReaper`]) removes what a crashed engine left.
//!
//! Deliberately not: images or builds (a spec naming one is refused, and the factory never
//! offers this driver for it), named volumes, per-exec users (`ExecOpts::user`: one uid is
//! mapped). It needs Linux ≥ 5.12
//! (`mount_setattr`); an older kernel fails the setup with a typed error, never a weaker sandbox.

pub mod cgroup;
mod driver;
mod init;
mod lockdown;
mod plan;
mod probe;
mod proto;
mod reap;
mod run;
pub mod seccomp;

pub use driver::{HOST_ROOT_IMAGE, NamespaceConstructor, NamespaceDriver};
pub use probe::{UsernsFacts, UsernsReport, judge_userns, read_userns_facts};
pub use reap::{NamespaceReaper, NamespaceReaperConstructor, REAP_GRACE};
