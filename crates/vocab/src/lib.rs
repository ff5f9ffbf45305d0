//! iterion-vocab: the words every iterion crate shares.
//!
//! A workflow says `host_state: auto`, the sandbox plans from it, the store records the run's
//! trust, the engine labels a node's kind and a log line's stream. Each of these words is one type
//! here, so no crate keeps its own copy and no hand converter can drift from another:
//!
//! - [`Trust`]: how far a run's workflow is trusted (read fail-closed);
//! - [`NetworkMode`] and [`HostState`]: the sandbox's egress mode and host-state setting;
//! - [`NodeKind`]: the five node kinds, as keyword and event label;
//! - [`LogStream`]: where a run-log line came from;
//! - [`FailureCode`]: every stable code a run can end with, whichever layer found it, with the
//!   [`OutcomeStatus`] it gives the run and how a runner treats it ([`Disposition`]);
//! - [`secret_file_name`]: the file a secret is delivered as, for the validator and the drivers
//!   alike;
//! - [`UnknownWord`] and [`escape_controls`]: how a word outside the vocabulary is refused
//!   without letting a hostile value forge a log line.
//!
//! - [`Environment`]: the process environment as a value, read once by the binary's entry
//!   points and handed down.
//!
//! It is the bottom layer: it depends on serde and thiserror only and does no I/O;
//! [`Environment::from_process`] is the one reader of the process environment in the workspace.
#![deny(missing_docs)]

mod environment;
mod failure;
mod host_state;
mod log;
mod network;
mod node;
mod secrets;
mod trust;
mod word;

pub use environment::Environment;
pub use failure::{Disposition, FailureCode, MAX_DELIVERIES, OutcomeStatus};
pub use host_state::HostState;
pub use log::LogStream;
pub use network::{NetworkMode, UPSTREAM_ERROR_HEADER};
pub use node::NodeKind;
pub use secrets::{SECRETS_DIR, default_secret_mount_path, secret_file_name};
pub use trust::Trust;
pub use word::{UnknownWord, escape_controls, has_control};
