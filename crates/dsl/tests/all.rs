//! The dsl crate's one integration binary (STYLE.md §5.12): the normative fixtures of DSL.md §9.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report
mod suite;
