//! Finding the engine (SANDBOX.md §4.2): which endpoints the docker and podman constructors try,
//! from the variables that name them.

use iterion_vocab::Environment;

use crate::api::EngineKind;

/// Read by the docker constructor: when set, the only endpoint it tries (SANDBOX.md §4.2).
pub(crate) const DOCKER_HOST: &str = "DOCKER_HOST";
/// Read by the podman constructor: when set, the only endpoint it tries (SANDBOX.md §4.2).
pub(crate) const CONTAINER_HOST: &str = "CONTAINER_HOST";
/// Where rootless sockets live.
pub(crate) const XDG_RUNTIME_DIR: &str = "XDG_RUNTIME_DIR";
/// The endpoints a constructor tries, in order (SANDBOX.md §4.2). Pure: the variables come in
/// as values.
///
/// - docker: `unix:///var/run/docker.sock`, then `unix://$XDG_RUNTIME_DIR/docker.sock`;
/// - podman: `unix://$XDG_RUNTIME_DIR/podman/podman.sock`, then `unix:///run/podman/podman.sock`;
/// - when `DOCKER_HOST` or `CONTAINER_HOST` is set, only the set ones are tried — `DOCKER_HOST`
///   by docker, `CONTAINER_HOST` by podman — and no default socket is probed, so a dead
///   `DOCKER_HOST` means "no engine", as for the CLIs.
pub fn endpoints_for(kind: EngineKind, vars: &EndpointVars) -> Vec<String> {
    let set = |value: &Option<String>| {
        value
            .as_deref()
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    };
    let (docker_host, container_host) = (set(&vars.docker_host), set(&vars.container_host));
    if docker_host.is_some() || container_host.is_some() {
        return match kind {
            EngineKind::Docker => docker_host.into_iter().collect(),
            EngineKind::Podman => container_host.into_iter().collect(),
        };
    }
    let runtime = set(&vars.xdg_runtime_dir).filter(|dir| dir.starts_with('/'));
    match kind {
        EngineKind::Docker => std::iter::once("unix:///var/run/docker.sock".to_owned())
            .chain(runtime.map(|dir| format!("unix://{dir}/docker.sock")))
            .collect(),
        EngineKind::Podman => runtime
            .map(|dir| format!("unix://{dir}/podman/podman.sock"))
            .into_iter()
            .chain(std::iter::once("unix:///run/podman/podman.sock".to_owned()))
            .collect(),
    }
}

/// The variables [`endpoints_for`] reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EndpointVars {
    /// `DOCKER_HOST`.
    pub docker_host: Option<String>,
    /// `CONTAINER_HOST`.
    pub container_host: Option<String>,
    /// `XDG_RUNTIME_DIR`.
    pub xdg_runtime_dir: Option<String>,
}

impl EndpointVars {
    /// Reads the three variables from `env`.
    pub fn from_env(env: &Environment) -> EndpointVars {
        EndpointVars {
            docker_host: env.get(DOCKER_HOST),
            container_host: env.get(CONTAINER_HOST),
            xdg_runtime_dir: env.get(XDG_RUNTIME_DIR),
        }
    }
}

/// How long connecting, negotiating and pinging one endpoint may take (SANDBOX.md §4.2).
pub(crate) const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);
