//! Mount screening (SANDBOX.md §5.1–§5.4, our decision 2): mounts are judged by what they do,
//! not by how they are written.
//!
//! - [`grammar`]: the `--mount` grammar and the syntax checks (pure);
//! - [`screen`]: resolving a source and judging it against the sensitive-path rules, the
//!   workspace screen and build containment (resolves paths on the host filesystem);
//! - the typed refusal reasons are [`crate::rules`]'s (a leaf the crate's error names too);
//! - [`stage`]: pinning a screened bind source, so the container engine mounts exactly what
//!   was screened (issue 15 item 1).

mod grammar;
mod screen;
mod stage;

pub(crate) use grammar::check_target;
pub use grammar::{
    BindPropagation, MountSpec, mount_is_host_bind, parse_mount, validate_plain_arg,
};
pub use screen::{
    MountRequest, MountScope, ScreenContext, ScreenedMount, validate_contains_workspace,
    validate_mount, validate_spec_mounts,
};
pub use stage::{STAGE_DIR, Stager, remove_run_dir};

#[cfg(test)]
mod grammar_tests;
#[cfg(test)]
mod property_tests;
#[cfg(test)]
mod screen_tests;
#[cfg(test)]
mod trust_tests;
