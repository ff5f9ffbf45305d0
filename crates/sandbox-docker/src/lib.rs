//! iterion-sandbox-docker: the docker/podman driver (SANDBOX.md §4) — one long-lived container per
//! run, through the Engine API (bollard; our decision 7). Podman is the same driver on podman's
//! Docker-compatible socket; `/version` tells which engine answers, and that is the driver's name.
//!
//! Its one job is to carry out, on a container engine, what the core crate (`iterion-sandbox`)
//! decided. From the core it takes the [`Driver`](iterion_sandbox::Driver) and
//! [`Reaper`](iterion_sandbox::Reaper) traits it implements, the [`Spec`](iterion_sandbox::Spec),
//! the mount screening and staging, the labels and names, the phases and `post_create`, and the
//! one [`Error`](iterion_sandbox::Error); it decides no policy of its own.
//!
//! How it is built:
//!
//! - **Plan, then execute** (STYLE.md §5.3). `create_plan`, `exec_plan` and `build_request`
//!   decide what to ask for; `render` turns each request into the `docker …` line the run log
//!   keeps; the driver only sequences calls on a [`ContainerApi`].
//! - **One narrow seam** ([`ContainerApi`]): the bollard calls we make and nothing else, with
//!   [`BollardApi`] as the real implementation and a recording fake in the unit tests.
//! - **The core decides, the driver obeys**: `prepare` starts with
//!   [`Spec::validate`](iterion_sandbox::Spec::validate); `start` screens every mount with
//!   [`validate_spec_mounts`](iterion_sandbox::validate_spec_mounts) before the first API call and binds
//!   only canonical sources; phases are bounded by
//!   [`run_with_phase_timeout`](iterion_sandbox::run_with_phase_timeout).
//!
//! Lifecycle guarantees: anything created is removed when a later step fails — on a fresh
//! [`CLEANUP_TIMEOUT`](iterion_sandbox::CLEANUP_TIMEOUT) budget, and by a drop guard when the caller cancels `start` — and the
//! error keeps a cleanup failure next to the original one ([`Error::CleanupFailed`](iterion_sandbox::Error::CleanupFailed)).
//! [`SandboxRun::cleanup`](iterion_sandbox::SandboxRun::cleanup) force-removes the container (already gone is success) and is
//! idempotent.
//!
//! Deliberate differences from SANDBOX.md, each documented where it happens:
//!
//! - cleanup does not `stop --time 5` first: PID 1 is `sleep infinity`, which has no SIGTERM
//!   handler, so the kernel ignores the signal for a namespace's init and every stop would wait
//!   the full 5 s before killing. A force remove kills at once; nothing in the container is
//!   owed a graceful shutdown (node execs are already over or being cancelled).
//!
//! Reaping ([`Reaper`](iterion_sandbox::Reaper) on [`DockerDriver`], `reap.rs`) lists this
//! store's containers, images and `/nix` volumes by label and removes what the engine's judge
//! frees; [`DockerConstructor`] is also the reaper's [`ReaperConstructor`](iterion_sandbox::ReaperConstructor).
//!
//! File secrets are files in the per-run dir bound read-only (`secret_plan`, SANDBOX.md §8.7),
//! refreshed in place through the run's [`SecretFileRefresher`](iterion_sandbox::SecretFileRefresher).
//!
//! The egress bridge (§4.6) is not started here: a proxied run gets `--network none` and the
//! `net/` mount from this driver, and the engine execs `iterion __egress-bridge` right after
//! [`Driver::start`](iterion_sandbox::Driver::start) returns (crates/engine `sandbox/egress.rs`). Until the
//! bridge is ready there is no route at all, which fails closed.

#![deny(missing_docs)]
#![warn(unreachable_pub)]

mod agent;
mod api;
mod bollard_api;
mod build;
mod connect;
mod context;
mod driver;
mod endpoints;
mod engine_binary;
mod plan;
mod probe;
mod reap;
mod render;
mod run;
mod secrets;
mod settings;
mod shared;
mod warm;

pub use api::{
    ApiError, BuildRequest, ContainerApi, EngineKind, EngineVersion, ExecAttachment, ExecChunk,
    ExecRequest, ExecState,
};
pub use bollard_api::{BollardApi, ConnectError, ConnectStep};
pub use connect::DockerConstructor;
pub use context::tar_context;
pub use driver::{DockerDriver, ca_host_path};
pub use endpoints::{EndpointVars, endpoints_for};
pub use engine_binary::{ENGINE_BINARY_PURPOSE, elf_problem};

pub use probe::{EngineProbe, NoEngine, endpoint_is_local, probe_endpoints};

pub use settings::DockerSettings;
pub use warm::{FILL_SUBCOMMAND, install_warm_filler, run_fill_job};

#[cfg(test)]
mod driver_tests;
#[cfg(test)]
mod fake;
#[cfg(test)]
mod plan_tests;
