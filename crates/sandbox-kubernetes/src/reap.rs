//! The cloud half of the reaper (SANDBOX.md §12.2): list this store's pods, Secrets and
//! NetworkPolicies by label, ask the engine's [`ReapJudge`] about each run id, delete what it
//! frees. [`Reaper`] on [`KubeRsApi`]: the API of the runner's namespace is what reaps it.
//!
//! The predicate is the engine's (`sandbox_resource_reapable`, one for local containers and cloud
//! objects alike): this crate knows no store. Deletions use background propagation, grace 0, and
//! do not wait; "not found" is success; the first error is returned, the others logged.

use std::collections::HashMap;

use async_trait::async_trait;
use futures_util::StreamExt;
use iterion_sandbox::{
    ReapError, ReapJudge, ReapReport, Reaper, ResourceKind, Result, filter_managed, managed_filters,
};

use crate::api::{KubeApi, KubeError, KubeRsApi, ObjectKind};

/// How many deletions are in flight at once.
const DELETE_CONCURRENCY: usize = 16;

fn resource_kind(kind: ObjectKind) -> ResourceKind {
    match kind {
        ObjectKind::Pod => ResourceKind::Pod,
        ObjectKind::Secret => ResourceKind::Secret,
        ObjectKind::NetworkPolicy => ResourceKind::NetworkPolicy,
    }
}

/// Whether a pass deletes what it frees or only reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pass {
    /// Delete (`Reaper::reap`).
    Reap,
    /// Report only (`Reaper::survey`).
    Survey,
}

/// One reaper pass over `api`'s namespace. `judge.reapable(run_id)` decides each distinct run id
/// once per pass (`""` for an object without the label); `true` deletes.
///
/// # Errors
///
/// The first list or delete failure, with the report of what was done anyway (a failed list
/// skips its kind; the other kinds are still walked).
async fn reap_kubernetes_objects(
    api: &dyn KubeApi,
    store_id: &str,
    judge: &dyn ReapJudge,
    pass: Pass,
) -> std::result::Result<ReapReport, ReapError> {
    let selector = managed_filters(store_id).join(",");
    let mut verdicts: HashMap<String, bool> = HashMap::new();
    let mut report = ReapReport::default();
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
                    let reap = judge.reapable(&object.run_id).await;
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
        if pass == Pass::Survey {
            report
                .deleted
                .extend(doomed.into_iter().map(|name| (resource_kind(kind), name)));
            continue;
        }
        let mut deletions = futures_util::stream::iter(doomed)
            .map(|name| async move {
                let outcome = api.delete(kind, &name).await;
                (name, outcome)
            })
            .buffer_unordered(DELETE_CONCURRENCY);
        while let Some((name, outcome)) = deletions.next().await {
            match outcome {
                Ok(()) => report.deleted.push((resource_kind(kind), name)),
                Err(error) if error.is_not_found() => {
                    report.deleted.push((resource_kind(kind), name));
                }
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
        Some((operation, source)) => Err(ReapError {
            driver: crate::run::DRIVER.to_owned(),
            operation,
            source: Box::new(source),
            report,
        }),
    }
}

#[async_trait]
impl Reaper for KubeRsApi {
    async fn reap(
        &self,
        store_id: &str,
        judge: &dyn ReapJudge,
    ) -> std::result::Result<ReapReport, ReapError> {
        reap_kubernetes_objects(self, store_id, judge, Pass::Reap).await
    }

    async fn survey(
        &self,
        store_id: &str,
        judge: &dyn ReapJudge,
    ) -> std::result::Result<ReapReport, ReapError> {
        reap_kubernetes_objects(self, store_id, judge, Pass::Survey).await
    }

    /// Nothing: a cancelled setup deletes its objects itself (the driver's drop guard, in
    /// `run.rs`), and what a crash leaves is the next pass's.
    async fn remove_run(&self, _store_id: &str, _run_id: &str) -> Result<usize> {
        Ok(0)
    }
}
