//! The repository's devcontainer and everything that turns it into a run's [`Spec`](crate::Spec)
//! under mode `auto` (SANDBOX.md §7, §15): reading the file, host variable expansion, the
//! `runArgs` screen, conversion, fusion with the workflow block, the env deny class, the
//! operator overlay, network defaulting and the devbox provisioning plan.
//!
//! **The devcontainer is untrusted input.** The working tree may be a stranger's pull request, so:
//!
//! - `${localEnv:NAME}` reads only the allow-listed host variables of §7.4; any other name is
//!   never even looked up, so a repository cannot pull a host secret into its container;
//! - its mounts go through the same screening as every other author mount (§5.2), and `runArgs`
//!   that ask for host privileges refuse the run (§7.2) instead of falling back to another image;
//! - the variables it sets are stripped when they could redirect the engine's own traffic or
//!   inject code (§7.7), and the operator overlay may override them (§7.8);
//! - a spec it defines egresses through the `iterion-default` allowlist unless the workflow names
//!   a network mode (§7.9);
//! - `initializeCommand` (a host command) is recorded, never run.
//!
//! Shape: a thin I/O shell ([`read_from_repo`], [`read_devbox_config`]) hands text to a pure
//! core ([`parse_devcontainer`], [`to_sandbox_spec`](convert::to_sandbox_spec), [`fuse_devcontainer_spec`](fuse::fuse_devcontainer_spec),
//! [`merge_environment_overlay`](overlay::merge_environment_overlay), [`resolve_sandbox_spec_with_fallback`], [`plan_devbox`]). The
//! engine emits the events; the functions return the facts it needs (denied keys sorted, network
//! defaulted, the source-label detail, run-log lines).

mod convert;
mod devbox;
mod env_deny;
mod expand;
mod fuse;
mod overlay;
mod read;
mod resolve;
pub(crate) mod run_args;

pub use devbox::{
    DEVBOX_BASE_PATH, DEVBOX_BOT_STAGE_DIR, DEVBOX_BUNDLE_DIR, DevboxConfig, DevboxInputs,
    DevboxPlan, DevboxRead, DevboxSource, ITERION_REPO_DEVBOX, RepoDevbox, apply_devbox_plan,
    plan_devbox, read_devbox_config, resolve_repo_devbox,
};
pub use expand::{LocalVars, expand_local_vars};
pub use overlay::{EnvOverlay, ITERION_SANDBOX_ENV_FILE, parse_env_file, parse_env_pairs};
pub use read::{
    CommandForm, Devcontainer, DevcontainerBuild, DevcontainerText, LifecycleCommand,
    parse_devcontainer, read_from_repo,
};
pub use resolve::{
    AutoInputs, NO_DEVCONTAINER_NO_DEFAULT_IMAGE, ResolvedSpec, resolve_sandbox_spec_with_fallback,
};

#[cfg(test)]
mod corpus_tests;
#[cfg(test)]
mod devbox_tests;
#[cfg(test)]
mod expand_tests;
#[cfg(test)]
mod fuse_tests;
#[cfg(test)]
mod property_tests;
#[cfg(test)]
mod read_tests;
#[cfg(test)]
mod run_args_tests;
