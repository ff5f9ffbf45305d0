//! iterion-engine: runs a compiled workflow.
//!
//! `Engine::run` admits a run, resolves and starts its sandbox (the seed's steps 3–19), executes
//! nodes, records every decision as an event and tears everything down. It is the only crate that
//! knows both the workflow (`iterion-dsl`) and the sandbox (`iterion-sandbox`), and the only place
//! that decides degrade versus refuse.
#![deny(missing_docs)]

pub use iterion_dsl as dsl;
