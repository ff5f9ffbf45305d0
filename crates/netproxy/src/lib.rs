//! iterion-netproxy: the per-run egress proxy.
//!
//! The rule matcher, presets, the CONNECT/HTTP proxy with per-run token auth, the ephemeral CA
//! for TLS inspection and secret placeholder rewriting (SANDBOX.md §6). The policy ([`decide`])
//! is pure and testable without DNS; resolution happens in the I/O shell around it, through a
//! [`Resolver`], and the proxy connects only to the addresses it vetted, never resolving twice.
//!
//! It depends on no other iterion crate: the engine hands it a compiled [`Policy`], a run id, a
//! token, where to listen, the secrets with their hosts and a `network_blocked` callback, and
//! gets back a [`RunningProxy`] with its endpoints and CA PEM. It does not decide *whether* a run
//! needs a proxy (SANDBOX.md §6.1, the engine's start rules), it does not enforce that the
//! container has no other route (the driver's `--network none` and egress bridge do), and it
//! never writes a secret value or the token to a log.
#![deny(missing_docs)]

mod decide;
mod error;
mod host;
mod matcher;
mod preset;

pub use decide::{BlockReason, Decision, DecisionSource, Verdict, decide, is_non_public};
pub use error::NetProxyError;
pub use host::canonical_host;
pub use matcher::{HostPattern, NetworkMode, Policy, Rule, compile};
pub use preset::{
    ITERION_DEFAULT_PRESET, ITERION_DEFAULT_RULES, SILENT_DENY_HOSTS, compile_with_preset,
    is_silent_deny, preset_rules,
};
