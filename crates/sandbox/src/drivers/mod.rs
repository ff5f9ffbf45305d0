//! The drivers. Each lives in its own module and is reached through the [`Driver`](crate::Driver)
//! trait and a [`DriverConstructor`](crate::DriverConstructor) registered with the
//! [`Registry`](crate::Registry):
//!
//! - [`noop`]: host passthrough, always constructible, isolates nothing;
//! - [`docker`]: docker and podman through the Engine API (bollard), one long-lived container
//!   per run;
//! - [`kubernetes`]: one pod per run in the runner's namespace (kube-rs).
//!
//! What a container driver takes from the core rather than re-deciding:
//!
//! - `prepare` starts with [`Spec::validate`](crate::Spec::validate) and bounds slow I/O with
//!   [`run_with_phase_timeout`](crate::run_with_phase_timeout) and
//!   [`phase_timeout_from_env`](crate::phase_timeout_from_env);
//! - `start` checks [`PreparedSpec::check_driver`](crate::PreparedSpec::check_driver), screens the
//!   spec with [`validate_spec_mounts`](crate::validate_spec_mounts) over a
//!   [`ScreenContext`](crate::ScreenContext) and binds each
//!   [`ScreenedMount::host_source`](crate::ScreenedMount) (the canonical path, never the written
//!   one); names and labels come from [`container_name`](crate::container_name) and
//!   [`managed_labels`](crate::managed_labels); `post_create` goes through
//!   [`run_post_create`](crate::run_post_create);
//! - a `Builder` checks its context and Dockerfile with
//!   [`validate_contains_workspace`](crate::validate_contains_workspace) and tags with
//!   [`build_image_tag`](crate::build_image_tag);
//! - the reaper's listing filters through [`filter_managed`](crate::filter_managed) with
//!   [`managed_filters`](crate::managed_filters);
//! - "engine not reachable" is [`Error::Unavailable`](crate::Error::Unavailable) from the
//!   constructor, never a policy decision.

pub(crate) mod docker;
pub(crate) mod kubernetes;
pub(crate) mod noop;
mod noop_procs;
pub use noop_procs::{HOST_RUN_MARKER, ProcessGroupGuard};
