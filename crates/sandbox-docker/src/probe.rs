//! Read-only probes of a docker/podman engine, for `iterion sandbox doctor` and the strict
//! pre-flight (SANDBOX.md §11): which engine answers where ([`EngineProbe::connect`]), whether an
//! image is in its local cache, and whether the image's registry knows it — asked through the
//! engine (`GET /distribution/<ref>/json`), which reads the manifest and pulls nothing.
//!
//! Nothing here changes or pulls; the one thing created is the never-started container
//! [`EngineProbe::paths_in_image`] stats an image's files through, removed before it returns. The caller bounds every call: [`EngineProbe::connect`]
//! takes its budget, and each other call is one request the caller wraps in its own timeout, so
//! a hung engine makes a check fail instead of the doctor hang.

use std::fmt;
use std::time::Duration;

use iterion_sandbox::ImageConfig;

use crate::api::{ApiResult, ContainerApi, EngineKind, EngineVersion};
use crate::bollard_api::{BollardApi, ConnectError};
use crate::endpoints::{EndpointVars, endpoints_for};

/// Why [`EngineProbe::connect`] found no engine: each endpoint's reason, in order (none when
/// there was no endpoint to try).
#[derive(Debug)]
pub struct NoEngine {
    /// Why each endpoint did not answer.
    pub reasons: Vec<ConnectError>,
}

impl fmt::Display for NoEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.reasons.is_empty() {
            return f.write_str("no endpoint to try");
        }
        for (index, reason) in self.reasons.iter().enumerate() {
            if index > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{reason}")?;
        }
        Ok(())
    }
}

impl std::error::Error for NoEngine {}

/// A connection to the first docker/podman endpoint that answered, and what it said it is.
#[derive(Clone, Debug)]
pub struct EngineProbe {
    api: BollardApi,
    endpoint: String,
    version: EngineVersion,
}

impl EngineProbe {
    /// Tries `endpoints` in order (connect, `/version`, API negotiation, ping — as the driver
    /// connects, SANDBOX.md §4.2) and keeps the first that answers. Each endpoint gets `budget`;
    /// the caller bounds the whole walk.
    ///
    /// # Errors
    ///
    /// Why no endpoint answered ([`NoEngine`]: each endpoint's reason, joined with `; `).
    pub async fn connect(endpoints: &[String], budget: Duration) -> Result<EngineProbe, NoEngine> {
        let mut reasons = Vec::new();
        for endpoint in endpoints {
            match BollardApi::connect(endpoint, budget).await {
                Ok((api, version)) => {
                    return Ok(EngineProbe {
                        api,
                        endpoint: endpoint.clone(),
                        version,
                    });
                }
                Err(reason) => reasons.push(reason),
            }
        }
        Err(NoEngine { reasons })
    }

    /// The endpoint that answered.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// What `/version` said.
    pub fn version(&self) -> &EngineVersion {
        &self.version
    }

    /// `GET /images/{image}/json`: the image's config when it is in the local cache, `None`
    /// when it is not.
    ///
    /// # Errors
    ///
    /// The engine's error, classified.
    pub async fn inspect_image(&self, image: &str) -> ApiResult<Option<ImageConfig>> {
        self.api.inspect_image(image).await
    }

    /// `GET /distribution/{image}/json` ([`BollardApi::inspect_registry_image`]).
    ///
    /// # Errors
    ///
    /// The engine's error, classified.
    pub async fn inspect_registry_image(&self, image: &str) -> ApiResult<()> {
        self.api.inspect_registry_image(image).await
    }

    /// Which of `paths` exist in the local `image` ([`BollardApi::paths_in_image`]).
    ///
    /// # Errors
    ///
    /// The engine's error, classified.
    pub async fn paths_in_image(&self, image: &str, paths: &[String]) -> ApiResult<Vec<bool>> {
        self.api.paths_in_image(image, paths).await
    }
}

/// The endpoints the doctor probes, in the factory's order (SANDBOX.md §3.2, §4.2): docker's,
/// then podman's. Pure.
pub fn probe_endpoints(vars: &EndpointVars) -> Vec<String> {
    let mut endpoints = endpoints_for(EngineKind::Docker, vars);
    for endpoint in endpoints_for(EngineKind::Podman, vars) {
        if !endpoints.contains(&endpoint) {
            endpoints.push(endpoint);
        }
    }
    endpoints
}

/// Whether the engine at `endpoint` shares this host's filesystem as far as we can tell: a unix
/// socket, or TCP on a loopback address (SANDBOX.md §4.2: the doctor warns otherwise, since every
/// bind source is a host path). Pure.
pub fn endpoint_is_local(endpoint: &str) -> bool {
    if endpoint.starts_with("unix://") || endpoint.starts_with('/') {
        return true;
    }
    let Some((_, rest)) = endpoint.split_once("://") else {
        return false;
    };
    let authority = rest.split('/').next().unwrap_or_default();
    let host = match authority.rsplit_once(':') {
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
        _ => authority,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_doctor_probes_docker_then_podman_and_a_set_docker_host_alone() {
        let defaults = EndpointVars {
            xdg_runtime_dir: Some("/run/user/1000".to_owned()),
            ..EndpointVars::default()
        };
        let docker_host = EndpointVars {
            docker_host: Some("unix:///tmp/d.sock".to_owned()),
            ..defaults.clone()
        };
        assert_eq!(
            (probe_endpoints(&defaults), probe_endpoints(&docker_host)),
            (
                vec![
                    "unix:///var/run/docker.sock".to_owned(),
                    "unix:///run/user/1000/docker.sock".to_owned(),
                    "unix:///run/user/1000/podman/podman.sock".to_owned(),
                    "unix:///run/podman/podman.sock".to_owned(),
                ],
                vec!["unix:///tmp/d.sock".to_owned()],
            )
        );
    }

    #[test]
    fn only_unix_sockets_and_loopback_tcp_count_as_local_endpoints() {
        let rows = [
            ("unix:///var/run/docker.sock", true),
            ("tcp://127.0.0.1:2375", true),
            ("tcp://localhost:2376", true),
            ("tcp://[::1]:2375", true),
            ("http://127.0.0.2:2375/", true),
            ("tcp://10.0.0.5:2375", false),
            ("tcp://docker.example.com:2376", false),
            ("ssh://me@host", false),
        ];
        let got: Vec<(&str, bool)> = rows
            .iter()
            .map(|(e, _)| (*e, endpoint_is_local(e)))
            .collect();
        assert_eq!(got, rows.to_vec());
    }
}
