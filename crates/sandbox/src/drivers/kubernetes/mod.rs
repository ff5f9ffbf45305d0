//! The kubernetes driver (SANDBOX.md §5.5–§5.11, §16.2–§16.3): one pod per run, in the runner's
//! own namespace, reached through kube-rs (our decision 7).
//!
//! - [`validate`]: the pure `validate_spec` of §5.5, shared with the doctor and the pre-flight;
//! - [`scheduling`]: the scheduling policy of §16.2, read once from the runner's environment.

pub(crate) mod scheduling;
pub(crate) mod validate;
