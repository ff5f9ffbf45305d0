//! The cloud half of the reaper (SANDBOX.md §12.2): list this store's pods, Secrets and
//! NetworkPolicies by label, ask the caller's predicate about each run id, delete what it frees.
//!
//! The predicate is the engine's (`sandbox_resource_reapable`, one for local containers and cloud
//! objects alike): this crate knows no store. Deletions use background propagation, grace 0, and
//! do not wait; "not found" is success; the first error is returned, the others logged.

use std::collections::HashMap;
use std::future::Future;

use futures_util::StreamExt;

use super::api::{KubeApi, KubeError, ObjectKind};
use crate::labels::{filter_managed, managed_filters};

/// How many deletions are in flight at once.
const DELETE_CONCURRENCY: usize = 16;

/// What one pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KubeReapReport {
    /// The objects deleted (or already gone), by kind and name.
    pub deleted: Vec<(ObjectKind, String)>,
    /// How many managed objects were kept.
    pub kept: usize,
}

/// Why a pass stopped short.
#[derive(Debug, thiserror::Error)]
#[error("kubernetes reaper: {operation}: {source}")]
pub struct KubeReapError {
    /// `list pod`, `delete secret/x`, ….
    pub operation: String,
    /// The API's answer.
    #[source]
    pub source: KubeError,
    /// What the pass did before (and despite) the error.
    pub report: KubeReapReport,
}

/// One reaper pass over `api`'s namespace. `reapable(run_id)` decides each distinct run id once
/// per pass (`""` for an object without the label); `true` deletes.
///
/// # Errors
///
/// The first list or delete failure, with the report of what was done anyway (a failed list
/// skips its kind; the other kinds are still walked).
pub async fn reap_kubernetes_objects<F, Fut>(
    api: &dyn KubeApi,
    store_id: &str,
    mut reapable: F,
) -> Result<KubeReapReport, KubeReapError>
where
    F: FnMut(String) -> Fut,
    Fut: Future<Output = bool>,
{
    let selector = managed_filters(store_id).join(",");
    let mut verdicts: HashMap<String, bool> = HashMap::new();
    let mut report = KubeReapReport::default();
    let mut first_error: Option<(String, KubeError)> = None;
    for kind in ObjectKind::ALL {
        let listed = match api.list(kind, &selector).await {
            Ok(listed) => listed,
            Err(error) => {
                tracing::warn!(%kind, %error, "reaper: list failed");
                first_error.get_or_insert((format!("list {kind}"), error));
                continue;
            }
        };
        let mut doomed = Vec::new();
        for object in filter_managed(&listed, store_id) {
            let reap = match verdicts.get(&object.run_id) {
                Some(reap) => *reap,
                None => {
                    let reap = reapable(object.run_id.clone()).await;
                    verdicts.insert(object.run_id.clone(), reap);
                    reap
                }
            };
            if reap {
                doomed.push(object.name);
            } else {
                report.kept += 1;
            }
        }
        let mut deletions = futures_util::stream::iter(doomed)
            .map(|name| async move {
                let outcome = api.delete(kind, &name).await;
                (name, outcome)
            })
            .buffer_unordered(DELETE_CONCURRENCY);
        while let Some((name, outcome)) = deletions.next().await {
            match outcome {
                Ok(()) => report.deleted.push((kind, name)),
                Err(error) if error.is_not_found() => report.deleted.push((kind, name)),
                Err(error) => {
                    tracing::warn!(%kind, name, %error, "reaper: delete failed");
                    first_error.get_or_insert((format!("delete {kind}/{name}"), error));
                }
            }
        }
    }
    report.deleted.sort();
    match first_error {
        None => Ok(report),
        Some((operation, source)) => Err(KubeReapError {
            operation,
            source,
            report,
        }),
    }
}
