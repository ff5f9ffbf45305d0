//! iterion-sandbox-kubernetes: the kubernetes driver (SANDBOX.md §5.5–§5.11, §16.2–§16.3) — one
//! pod per run, in the runner's own namespace, through kube-rs (our decision 7).
//!
//! Its one job is to carry out, on a cluster, what the core crate (`iterion-sandbox`) decided.
//! From the core it takes the [`Driver`](iterion_sandbox::Driver) and
//! [`Reaper`](iterion_sandbox::Reaper) traits it implements, the [`Spec`](iterion_sandbox::Spec)
//! and the kubernetes policy ([`kubernetes_validate_spec`](iterion_sandbox::kubernetes_validate_spec),
//! the numeric user), the labels, the phases, `post_create`, the run-files screen and the one
//! [`Error`](iterion_sandbox::Error). Its own: the manifests, the scheduling policy, the tar
//! streams, the worktree git-dir copy, the in-cluster detection and the cloud reaper (`reap.rs`).
//!
//! How it is built:
//!
//! - **Plan, then execute** (STYLE.md §5.3): [`validate_spec`](iterion_sandbox::kubernetes_validate_spec),
//!   `pod_plan` (Pod, Secrets, NetworkPolicy as typed k8s-openapi objects),
//!   `classify_not_ready` and the [`SchedulingPolicy`] are pure; the driver sequences calls on a
//!   [`KubeApi`].
//! - **One narrow seam** ([`KubeApi`]) with [`KubeRsApi`] as the real implementation. Tests run
//!   that implementation against a fake API server on loopback (`tests/support/fake_kube.rs`),
//!   so the kube-rs path, server-side apply and the exec websocket are exercised for real.
//! - **Rollback**: once the first object is applied, any failure (or the caller dropping
//!   `start`) deletes every object of the run, ignoring "not found" (§5.7).
//!
//! Deliberate differences from SANDBOX.md, each documented where it happens:
//!
//! - readiness is polled (`GET` the pod every [`KubernetesSettings::poll_interval`]) rather than
//!   watched: the same bound and classification, without a long-lived watch stream per run;
//! - a terminal pod seen after the `pod ready` timeout keeps the `PhaseTimeout` error (so the
//!   engine classifies it `SANDBOX_SETUP_TIMEOUT`) and its `scheduling: …` detail goes to the run
//!   log at warn, rather than into the error text;
//! - a gitfile workspace (a linked worktree) gets its git dir copied in at the path where its
//!   unchanged gitfile resolves (§5.7 step 8), into an `emptyDir` (`worktree-git`) mounted there,
//!   so that a non-root pod user can have it at `/home/…`; a relative gitfile resolves against the
//!   pod's workspace folder, and a gitfile without `commondir` (a submodule) gets its own git dir.
//!   The export leaves the host's gitfile and the shared git dir alone (`--exclude=./.git`, no
//!   loose-ref deletion): commits made in the pod stay there, their content comes back as
//!   working-tree changes (`worktree.rs`);
//! - the run-files drain (§5.11) streams the tar through a screening unpacker (the core's `runfiles.rs`);
//!   it declines any name *containing* `..` (the spec's words, so `a..b` too), and a file that
//!   would pass the 256 MiB total, while smaller files after it may still be drained.
//!   `ITERION_ARTIFACT_FILES_DIR` stays withdrawn unless a kept mount serves it (§8.8, §17), and
//!   nothing creates `/iterion/artifact-files` in the pod: the drain serves a `pvc` mounted there,
//!   or an image that ships the dir;
//! - an exec's stdin is never closed before the process exits (closing it ends the whole exec on
//!   the v4 protocol); every command the driver feeds reads a length (`head -c <n>`);
//! - the copy-in (the workspace, the git dir too) and the export stream through bounded pipes;
//!   neither archive is held in memory (`tar_stream.rs`). Because stdin is never closed and
//!   `tar -x` reads a pipe to its EOF, the copy-in scans the tree first (stat only) to announce
//!   the archive's exact length to `head -c`; a file whose size changes between the scan and
//!   the read is copied at its scanned size (cut or zero-padded, warned), a member that vanishes
//!   fails the copy, and sockets are left out (warned) where the tar crate refused them. The
//!   archive is built by our own walk (name order, symlinks kept, no sparse-file encoding)
//!   rather than `tar::Builder::append_dir_all`.
//!
//! The hidden `iterion __egress-probe HOST:PORT` (crates/cli) is the probe's other half; the
//! engine exports a copy-based workspace back and drains its run files at teardown (crates/engine
//! `sandbox/mod.rs`).

#![deny(missing_docs)]
#![warn(unreachable_pub)]

mod api;
mod classify;
mod driver;
mod in_cluster;
mod manifest;
mod mounts;
mod probe;
mod reap;
mod run;
mod scheduling;
mod settings;
mod tar_stream;
mod worktree;

pub use api::{ExecSession, KubeApi, KubeError, KubeObject, KubeRsApi, ObjectKind};

pub use driver::{KubernetesConstructor, KubernetesDriver};
pub use in_cluster::{InClusterError, in_cluster_api};

pub use manifest::RunnerOwner;
pub use probe::probe_api_version;
pub use run::export_argv;
pub use scheduling::{Quantity, ResourceQuantities, SchedulingInputs, SchedulingPolicy};
pub use settings::{ITERION_RUNNER_POD_NAME, KubernetesSettings};
pub use tar_stream::{TarWritten, WorkspaceTarPlan};
pub use worktree::parse_gitfile;
