mod bindless;
mod budget;
mod copy_based;
mod devbox_host;
/// The FAKE Kubernetes API server, shared with the kubernetes driver's own tests.
#[path = "../../../sandbox-kubernetes/tests/support/fake_kube.rs"]
mod fake_kube;
mod fanout;
mod fleet;
mod kube_ask_user;
mod loops;
mod reaper;
mod record_secrets;
mod resume;
mod routing;
mod subbots;
mod support;
mod tools;
mod worktree;
