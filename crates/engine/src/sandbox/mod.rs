//! Sandbox orchestration: everything the engine does around a driver for one run.
//!
//! - [`resolve`]: the spec a run asks for (precedence, the repository's devcontainer, the
//!   operator overlay); [`start`]: `resolve_and_start_sandbox`, the seed's steps 5–14 and the one
//!   place where degrade (auto) or refuse (inline) is decided; [`active`]: the running sandbox
//!   and the teardown every outcome goes through; [`error`]: a setup failure, classified.
//! - What a start is made of: [`mounts`] (the mount plan), [`egress`] (the per-run proxy and its
//!   bridge), [`gateway`] (model keys as gateway credentials), [`devbox`], [`scratch`],
//!   [`rundir`] (the per-run host dir), [`engine_binary`] (the binary bound in), [`finalize`].
//! - The workspace: [`workspace`] (the repository root), [`worktree`] (`worktree: auto`),
//!   [`copy`] (an untrusted run's copy) and [`landing`] (landing it back as a branch), over
//!   [`git`] (host git, hardened) and [`nofollow`] (file access that follows no link).
//! - [`attachments`]: the files attached at launch (M1), staged, copied and bound read-only.
//! - [`host`]: the noop driver's host run, for an unsandboxed run and for the agent's `bash`.
//!
//! Under a proxy the container has no network (`--network none`) and reaches the proxy's Unix
//! socket only through the egress bridge: `sandbox_started` says `proxy: true`,
//! `egress_enforced: true` (a driver without the bridged shape reports `null`: nothing stops its
//! processes from ignoring the proxy). An `open` workflow without inspection gets the engine's
//! default network, no proxy and `egress_enforced: null`. Any failure after the proxy started
//! shuts it down, and teardown does too (the socket goes with it).

pub(crate) mod active;
pub(crate) mod ask_user;
pub(crate) mod attachments;
pub(crate) mod copy;
pub(crate) mod devbox;
pub(crate) mod egress;
pub(crate) mod engine_binary;
pub(crate) mod error;
pub(crate) mod exec_agent;
pub(crate) mod finalize;
pub(crate) mod forfait;
pub(crate) mod gateway;
pub(crate) mod git;
pub(crate) mod host;
pub(crate) mod host_services;
pub(crate) mod landing;
pub(crate) mod mounts;
pub(crate) mod nofollow;
pub(crate) mod readback;
pub(crate) mod registry;
pub(crate) mod resolve;
pub(crate) mod rundir;
pub(crate) mod scratch;
pub(crate) mod skills;
pub(crate) mod start;
pub(crate) mod start_ctx;
pub(crate) mod workspace;
pub(crate) mod worktree;
