//! Whether this process runs in a pod with a service account (SANDBOX.md §5.6), and the client of
//! its namespace's API: the one detection the driver's constructor, the doctor's probe and the
//! runner's cloud reaper share.

use std::path::Path;

use iterion_vocab::Environment;

use crate::api::KubeRsApi;

/// The service-account namespace file (SANDBOX.md §5.6).
pub(crate) const SERVICE_ACCOUNT_NAMESPACE: &str =
    "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
/// The service-account token file.
pub(crate) const SERVICE_ACCOUNT_TOKEN: &str =
    "/var/run/secrets/kubernetes.io/serviceaccount/token";
/// The in-cluster facts the constructor reads, as values (STYLE.md §5.3).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct InClusterSignals {
    /// `KUBERNETES_SERVICE_HOST`.
    pub service_host: Option<String>,
    /// The namespace file's content, when readable.
    pub namespace: Option<String>,
    /// Whether the service-account token file exists.
    pub token_present: bool,
}

impl InClusterSignals {
    /// Reads the variable (from `env`) and the service-account files.
    pub(crate) fn from_env(env: &Environment) -> InClusterSignals {
        InClusterSignals {
            service_host: env.get(iterion_sandbox::KUBERNETES_SERVICE_HOST),
            namespace: std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE).ok(),
            token_present: Path::new(SERVICE_ACCOUNT_TOKEN).is_file(),
        }
    }
}

/// Why this process cannot reach (or did not hear from) its cluster's API. The `Display` is the
/// reason the constructor gives ([`Error::Unavailable`](iterion_sandbox::Error::Unavailable)) and
/// the doctor shows.
#[derive(Debug, thiserror::Error)]
pub enum InClusterError {
    /// Not in a pod.
    #[error("KUBERNETES_SERVICE_HOST is not set (not running in a pod)")]
    NotInPod,
    /// The service-account namespace file is missing or empty.
    #[error("{SERVICE_ACCOUNT_NAMESPACE} is missing or empty")]
    NoNamespace,
    /// The service-account token file is missing.
    #[error("{SERVICE_ACCOUNT_TOKEN} is missing (automountServiceAccountToken is off?)")]
    NoToken,
    /// The in-cluster configuration could not be read.
    #[error("in-cluster config: {0}")]
    Config(#[source] kube::config::InClusterError),
    /// The client could not be built.
    #[error("client: {0}")]
    Client(#[source] kube::Error),
    /// The API server did not answer `GET /version`.
    #[error("GET /version: {0}")]
    Version(#[source] kube::Error),
}

/// Whether this process runs in a pod with a service account (SANDBOX.md §5.6): the namespace, or
/// why not.
///
/// # Errors
///
/// [`InClusterError::NotInPod`], [`InClusterError::NoNamespace`] or
/// [`InClusterError::NoToken`].
pub(crate) fn detect_in_cluster(signals: &InClusterSignals) -> Result<String, InClusterError> {
    if signals
        .service_host
        .as_deref()
        .is_none_or(|h| h.trim().is_empty())
    {
        return Err(InClusterError::NotInPod);
    }
    let namespace = signals
        .namespace
        .as_deref()
        .map(str::trim)
        .filter(|ns| !ns.is_empty())
        .ok_or(InClusterError::NoNamespace)?;
    if !signals.token_present {
        return Err(InClusterError::NoToken);
    }
    Ok(namespace.to_owned())
}

/// The client of this pod's cluster, and its namespace: [`detect_in_cluster`] on the signals of
/// `env` and the service-account files, then the in-cluster configuration.
///
/// # Errors
///
/// Why not, as an [`InClusterError`].
pub(crate) fn in_cluster_client(
    env: &Environment,
) -> Result<(kube::Client, String), InClusterError> {
    let namespace = detect_in_cluster(&InClusterSignals::from_env(env))?;
    let config = kube::Config::incluster().map_err(InClusterError::Config)?;
    let client = kube::Client::try_from(config).map_err(InClusterError::Client)?;
    Ok((client, namespace))
}

/// The API of this pod's namespace, for the runner's cloud reaper (SANDBOX.md §12.2): the same
/// detection as the driver's constructor.
///
/// # Errors
///
/// Why not, as an [`InClusterError`].
pub fn in_cluster_api(env: &Environment) -> Result<KubeRsApi, InClusterError> {
    let (client, namespace) = in_cluster_client(env)?;
    Ok(KubeRsApi::new(client, namespace))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn in_cluster_detection_needs_the_host_the_namespace_and_the_token() {
        let signals = |host: Option<&str>, ns: Option<&str>, token| InClusterSignals {
            service_host: host.map(str::to_owned),
            namespace: ns.map(str::to_owned),
            token_present: token,
        };
        assert_eq!(
            [
                detect_in_cluster(&signals(Some("10.0.0.1"), Some("iterion\n"), true)),
                detect_in_cluster(&signals(None, Some("iterion"), true)),
                detect_in_cluster(&signals(Some("10.0.0.1"), Some("  "), true)),
                detect_in_cluster(&signals(Some("10.0.0.1"), Some("iterion"), false)),
            ]
            .map(|r| r.map_err(|why| why
                .to_string()
                .split(' ')
                .next()
                .unwrap_or_default()
                .to_owned())),
            [
                Ok("iterion".to_owned()),
                Err("KUBERNETES_SERVICE_HOST".to_owned()),
                Err(SERVICE_ACCOUNT_NAMESPACE.to_owned()),
                Err(SERVICE_ACCOUNT_TOKEN.to_owned()),
            ]
        );
    }
}
