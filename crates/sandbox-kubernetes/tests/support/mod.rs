//! Fixtures of this test binary.
pub mod fake_kube;
