//! The engine's integration tests: real workflows compiled from `.iter` text, executed on the host
//! through the noop driver (no container engine needed), plus the worktree helpers on temp repos.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

mod suite;
