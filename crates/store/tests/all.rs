//! The one integration-test binary of iterion-store (STYLE.md §5.12): each topic is a module in
//! `suite/`. Every test runs against real SQLite — in memory, or a file in a temporary directory —
//! and the checks in `on_both_backends!` and `suite/postgres.rs` against real PostgreSQL too
//! (`ITERION_IT_POSTGRES_URL`, set by scripts/test.sh; required under `ITERION_IT_DOCKER=1`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod suite;
