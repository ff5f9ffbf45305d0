//! iterion-netproxy: the per-run egress proxy.
//!
//! The rule matcher, presets, the CONNECT/HTTP proxy with per-run token auth, the ephemeral CA
//! for TLS inspection and secret placeholder rewriting (SANDBOX.md §6). The policy (`decide`) is
//! pure and testable without DNS; resolution happens in the I/O shell around it.
//!
//! It depends on no other iterion crate.
#![deny(missing_docs)]
