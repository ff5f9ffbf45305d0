//! Where a run's records go: the [`events::Event`] vocabulary every decision is recorded in
//! (SANDBOX.md §9.1), the `sandbox_*` payloads among them ([`sandbox_events`]), its stable
//! [`iterion_vocab::FailureCode`]s (§9.2), a run's status and trust in the store's words ([`status`]),
//! the event and run-log sinks, the store-backed sinks and the [`record::RunObserver`] a caller
//! watches a run through, and redaction — the [`secrets::Redactor`] and the store wrapper that
//! applies it to everything written.
//!
//! Nothing here runs a node or a sandbox; every other room records through this one.

pub(crate) mod agent_events;
pub(crate) mod events;
pub(crate) mod record;
pub(crate) mod redacting_store;
pub(crate) mod sandbox_events;
pub(crate) mod secrets;
pub(crate) mod sink;
pub(crate) mod status;
