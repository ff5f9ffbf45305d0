//! The binary's one integration test target (STYLE.md §5.12): commands as a user runs them.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report
mod suite;
