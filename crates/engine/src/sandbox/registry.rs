//! The product's drivers (SANDBOX.md §3.2, §12): the one place the engine names the concrete
//! driver crates. [`product_registry`] is what the factory selects from; [`local_reapers`] is what
//! the local reaper asks, in the same order, so it looks where runs are created.

use std::sync::Arc;

use iterion_sandbox::{DriverKind, ReaperConstructor, Registry};
use iterion_sandbox_docker::{
    DockerConstructor, DockerSettings, EndpointVars, EngineKind, endpoints_for,
};
use iterion_sandbox_kubernetes::KubernetesConstructor;
use iterion_sandbox_namespace::{NamespaceConstructor, NamespaceReaperConstructor};
use iterion_vocab::Environment;

/// The product registry: docker and podman (one bollard driver, endpoints from `env`,
/// SANDBOX.md §4.2), kubernetes (in-cluster only, §5.6), the embedded namespace driver (issue 18:
/// no daemon, no image) and noop. Which of them a host tries, and in what order, is the
/// factory's preference order (§3.2): docker, podman, namespace, noop locally; kubernetes on
/// cloud hosts.
pub(crate) fn product_registry(env: &Environment) -> Registry {
    Registry::with_noop()
        .register(DriverKind::Kubernetes, KubernetesConstructor::from_env(env))
        .register(DriverKind::Docker, DockerConstructor::docker_from_env(env))
        .register(DriverKind::Podman, DockerConstructor::podman_from_env(env))
        .register(DriverKind::Namespace, NamespaceConstructor::from_env(env))
}

/// `installed` when an embedder or a test gave one, else [`product_registry`] over `env`.
pub(crate) fn registry_or_product(installed: Option<&Registry>, env: &Environment) -> Registry {
    installed.cloned().unwrap_or_else(|| product_registry(env))
}

/// The local container engines runs are created on, in the factory's order (SANDBOX.md §3.2):
/// docker, else podman. The reaper asks the first that answers, and only it: probing a second
/// engine on every `iterion run` costs more than the run (podman's API answers in hundreds of
/// milliseconds), and with both present the factory never creates containers on the second one.
/// Then the namespace driver's, host-local (the cgroups a crashed engine left, issue 18), asked
/// on every pass. Used by the reaper and to remove a run's container by label when its setup was
/// cancelled.
pub fn local_reapers(env: &Environment) -> Vec<Arc<dyn ReaperConstructor>> {
    let vars = EndpointVars::from_env(env);
    [
        (DriverKind::Docker, EngineKind::Docker),
        (DriverKind::Podman, EngineKind::Podman),
    ]
    .into_iter()
    .map(|(kind, engine)| {
        // The operator's settings: the warm pool's size decides which entries wait for a claim.
        Arc::new(DockerConstructor::with_endpoints(
            kind,
            endpoints_for(engine, &vars),
            DockerSettings::from_env(env),
        )) as Arc<dyn ReaperConstructor>
    })
    .chain(std::iter::once(
        Arc::new(NamespaceReaperConstructor) as Arc<dyn ReaperConstructor>
    ))
    .collect()
}
