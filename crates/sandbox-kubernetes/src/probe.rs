//! The doctor's `k8s-context` probe (SANDBOX.md §11.3): the in-cluster detection the constructor
//! does (§5.6), then the API server's `GET /version`. Read-only; the caller bounds it.

use iterion_vocab::Environment;

use crate::in_cluster::{InClusterError, in_cluster_client};

/// `API server v1.33.1 (namespace iterion)`, or why the API cannot be asked or did not answer;
/// the in-cluster detection reads `env`.
///
/// # Errors
///
/// No in-cluster configuration (not in a pod, no namespace or token), a client that cannot be
/// built, or a failed `GET /version` ([`InClusterError::Version`]).
pub async fn probe_api_version(env: &Environment) -> Result<String, InClusterError> {
    let (client, namespace) = in_cluster_client(env)?;
    let info = client
        .apiserver_version()
        .await
        .map_err(InClusterError::Version)?;
    Ok(format!(
        "API server {} (namespace {namespace})",
        info.git_version
    ))
}
