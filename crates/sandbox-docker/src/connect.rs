//! The factory's and the reaper's constructor of the docker/podman driver: connects to the first
//! endpoint of [`endpoints_for`] that answers.

use std::sync::Arc;

use async_trait::async_trait;
use iterion_sandbox::{Driver, DriverConstructor, DriverKind, Reaper, ReaperConstructor, Result};
use iterion_vocab::Environment;

use crate::api::EngineKind;
use crate::driver::DockerDriver;
use crate::endpoints::{EndpointVars, endpoints_for};
use crate::settings::DockerSettings;

/// Constructs the docker or podman driver for the factory: tries the endpoints of
/// [`endpoints_for`] (read from the environment snapshot the constructor is made from).
#[derive(Clone, Debug)]
pub struct DockerConstructor {
    kind: DriverKind,
    endpoints: Vec<String>,
    settings: DockerSettings,
}

impl DockerConstructor {
    /// The `docker` registry entry, endpoints from `DOCKER_HOST`/`CONTAINER_HOST`/
    /// `XDG_RUNTIME_DIR`, settings from the `ITERION_SANDBOX_*` knobs, all read from `env`.
    pub fn docker_from_env(env: &Environment) -> DockerConstructor {
        DockerConstructor::with_endpoints(
            DriverKind::Docker,
            endpoints_for(EngineKind::Docker, &EndpointVars::from_env(env)),
            DockerSettings::from_env(env),
        )
    }

    /// The `podman` registry entry, as [`DockerConstructor::docker_from_env`].
    pub fn podman_from_env(env: &Environment) -> DockerConstructor {
        DockerConstructor::with_endpoints(
            DriverKind::Podman,
            endpoints_for(EngineKind::Podman, &EndpointVars::from_env(env)),
            DockerSettings::from_env(env),
        )
    }

    /// A constructor for registry entry `kind` trying exactly `endpoints`.
    pub fn with_endpoints(
        kind: DriverKind,
        endpoints: Vec<String>,
        settings: DockerSettings,
    ) -> DockerConstructor {
        DockerConstructor {
            kind,
            endpoints,
            settings,
        }
    }

    /// The endpoints it tries, in order.
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }
}

#[async_trait]
impl DriverConstructor for DockerConstructor {
    async fn construct(&self) -> Result<Arc<dyn Driver>> {
        let driver =
            DockerDriver::connect(self.kind, &self.endpoints, self.settings.clone()).await?;
        Ok(Arc::new(driver))
    }
}

#[async_trait]
impl ReaperConstructor for DockerConstructor {
    async fn reaper(&self) -> Result<Arc<dyn Reaper>> {
        let driver =
            DockerDriver::connect(self.kind, &self.endpoints, self.settings.clone()).await?;
        Ok(Arc::new(driver))
    }
}
