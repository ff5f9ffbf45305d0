//! iterion-test-support: fixtures shared by the workspace's tests (never shipped).
#![deny(missing_docs)]
