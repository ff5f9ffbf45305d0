//! The one integration-test binary of iterion-store (STYLE.md §5.12): each topic is a module in
//! `suite/`. Every test runs against real SQLite — in memory, or a file in a temporary directory.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod suite;
