//! Integration tests of the egress proxy over real loopback sockets.
#![allow(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] fns: a failed fixture should panic the test"
)]

mod suite;
