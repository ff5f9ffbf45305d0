//! What a driver can do (SANDBOX.md §3.4). The engine plans mounts, the proxy and the doctor's
//! `driver-capabilities` check from these flags; a driver never decides policy from them.

use serde::Serialize;

/// A driver's capabilities. Serialises with the doctor's keys (`image`, `build`, `mounts`,
/// `host_bind_mounts`, `network_policy`, `post_create`, `remote_user`, `tls_inspection`,
/// `resource_limits`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct Capabilities {
    /// Runs a given image.
    #[serde(rename = "image")]
    pub supports_image: bool,
    /// Builds a `build:` spec (docker/podman, classic builder API).
    #[serde(rename = "build")]
    pub supports_build: bool,
    /// Honours author mounts of some kind.
    #[serde(rename = "mounts")]
    pub supports_mounts: bool,
    /// Binds host paths (false on kubernetes: binds are dropped, §8.8).
    #[serde(rename = "host_bind_mounts")]
    pub supports_host_bind_mounts: bool,
    /// Enforces the egress policy (no network + bridge on docker; NetworkPolicy on kubernetes).
    #[serde(rename = "network_policy")]
    pub supports_network_policy: bool,
    /// Runs `post_create`.
    #[serde(rename = "post_create")]
    pub supports_post_create: bool,
    /// Runs as the spec's user (numeric only on kubernetes).
    #[serde(rename = "remote_user")]
    pub supports_remote_user: bool,
    /// Can install the proxy's ephemeral CA for TLS inspection.
    #[serde(rename = "tls_inspection")]
    pub supports_tls_inspection: bool,
    /// Applies [`Spec::limits`](crate::Spec::limits) (memory, cpus, pids; issue 18).
    #[serde(rename = "resource_limits")]
    pub supports_resource_limits: bool,
}

impl Capabilities {
    /// The noop driver: nothing.
    pub const NONE: Capabilities = Capabilities {
        supports_image: false,
        supports_build: false,
        supports_mounts: false,
        supports_host_bind_mounts: false,
        supports_network_policy: false,
        supports_post_create: false,
        supports_remote_user: false,
        supports_tls_inspection: false,
        supports_resource_limits: false,
    };

    /// Docker and Podman: everything.
    pub const DOCKER: Capabilities = Capabilities {
        supports_image: true,
        supports_build: true,
        supports_mounts: true,
        supports_host_bind_mounts: true,
        supports_network_policy: true,
        supports_post_create: true,
        supports_remote_user: true,
        supports_tls_inspection: true,
        supports_resource_limits: true,
    };

    /// The namespace driver (issue 18): no image and no build (the host's root is the image),
    /// everything else. Resource limits are off here: the driver's own `capabilities()` turns
    /// them on where its cgroup probe finds that this host lets it make a cgroup per sandbox.
    pub const NAMESPACE: Capabilities = Capabilities {
        supports_image: false,
        supports_build: false,
        supports_resource_limits: false,
        ..Capabilities::DOCKER
    };

    /// Kubernetes: no build, no host binds (pvc, configmap and secret mounts only); its limits
    /// are the operator's `ITERION_SANDBOX_K8S_*` resources.
    pub const KUBERNETES: Capabilities = Capabilities {
        supports_build: false,
        supports_resource_limits: false,
        supports_host_bind_mounts: false,
        ..Capabilities::DOCKER
    };
}
