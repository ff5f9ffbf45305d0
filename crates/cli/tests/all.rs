//! The binary's one integration test target (STYLE.md §5.12): commands as a user runs them.
mod suite;
