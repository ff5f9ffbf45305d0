//! iterion-store: durable run state.
//!
//! The `Store` trait the engine uses — runs (versioned, compare-and-swap), events and run logs —
//! with an embedded SQLite backend by default and PostgreSQL for a fleet of runners
//! (ARCHITECTURE.md §5, decision 8).
//!
//! It depends on no other iterion crate.
#![deny(missing_docs)]
