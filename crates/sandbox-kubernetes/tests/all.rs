//! The one integration-test binary of iterion-sandbox-kubernetes (STYLE.md §5.12): each topic is a
//! module in `suite/`, fixtures in `support/`. The driver runs against a FAKE Kubernetes API server
//! on loopback (`support/fake_kube.rs`), so no cluster is needed.

mod suite;
mod support;
