//! iterion-sandbox: what a run's sandbox is and how a container engine provides one.
//!
//! This crate owns the sandbox vocabulary of SANDBOX.md — `Mode`, `Spec`, the precedence
//! functions, the host-kind factory, mount screening and the drivers (docker/podman, kubernetes,
//! noop). It reports *capability* (`DriverUnavailable`) and never *policy*: whether an absent
//! runtime degrades or refuses is the engine's decision (ARCHITECTURE.md §2, invariant I1).
//!
//! It deliberately depends on none of the other iterion crates: the engine translates the
//! workflow's IR into a `Spec`, so this crate can be tested and benchmarked alone.
#![deny(missing_docs)]
