//! Mount screening (SANDBOX.md §5.1–§5.4, our decision 2): mounts are judged by what they do,
//! not by how they are written.
//!
//! - [`grammar`]: the `--mount` grammar and the syntax checks (pure);
//! - [`screen`]: resolving a source and judging it against the sensitive-path rules, the
//!   workspace screen and build containment (resolves paths on the host filesystem);
//! - [`rules`]: the typed refusal reasons.

mod grammar;
mod rules;
mod screen;

pub use grammar::{
    BindPropagation, MountSpec, RESERVED_TARGET_ROOT, mount_is_host_bind, parse_mount,
    validate_env_pair, validate_plain_arg,
};
pub use rules::{ArgRule, EnvRule, MountKind, MountRule, Sensitivity};
pub use screen::{
    CREDENTIAL_COMPONENTS, ENGINE_SOCKET_NAMES, SENSITIVE_SYSTEM_ENTRIES, ScreenContext,
    ScreenedMount, validate_contains_workspace, validate_engine_mount, validate_mount,
    validate_spec_mounts,
};

#[cfg(test)]
mod grammar_tests;
#[cfg(test)]
mod property_tests;
#[cfg(test)]
mod screen_tests;
