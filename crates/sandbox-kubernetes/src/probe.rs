//! The doctor's `k8s-context` probe (SANDBOX.md §11.3): the in-cluster detection the constructor
//! does (§5.6), then the API server's `GET /version`. Read-only; the caller bounds it.

use super::{InClusterSignals, detect_in_cluster};

/// `API server v1.33.1 (namespace iterion)`, or why the API cannot be asked or did not answer.
///
/// # Errors
///
/// No in-cluster configuration (not in a pod, no namespace or token), a client that cannot be
/// built, or a failed `GET /version`, in words.
pub async fn probe_api_version() -> Result<String, String> {
    let namespace = detect_in_cluster(&InClusterSignals::from_env())?;
    let config = kube::Config::incluster().map_err(|e| format!("in-cluster config: {e}"))?;
    let client = kube::Client::try_from(config).map_err(|e| format!("client: {e}"))?;
    let info = client
        .apiserver_version()
        .await
        .map_err(|e| format!("GET /version: {e}"))?;
    Ok(format!(
        "API server {} (namespace {namespace})",
        info.git_version
    ))
}
