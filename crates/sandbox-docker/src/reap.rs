//! The local half of the reaper (SANDBOX.md §12.1, issue 15 item 13): this store's containers,
//! then its built images and a build's unattributed intermediates, then the shared `/nix` volumes
//! whose image is gone, each judged by the engine's [`ReapJudge`].
//!
//! Failures are logged where they happen and the pass goes on where it can: a failed container
//! listing ends the pass; an image the engine refuses to remove (still in use, still a parent)
//! is kept quietly, because only leftovers are meant to go.

use async_trait::async_trait;
use iterion_sandbox::{Error, ReapError, ReapJudge, ReapReport, Reaper, ResourceKind, Result};

use crate::driver::DockerDriver;

impl DockerDriver {
    fn reap_error(&self, operation: &str, error: Error, report: ReapReport) -> ReapError {
        ReapError {
            driver: self.engine().as_str().to_owned(),
            operation: operation.to_owned(),
            source: Box::new(error),
            report,
        }
    }

    /// Images: this store's built images of reapable runs, then the managed images no store
    /// label attributes (a classic build's intermediates) that `judge` claims — the engine
    /// refuses to remove one still in use or still a parent, so only leftovers go.
    async fn reap_images(
        &self,
        store_id: &str,
        judge: &dyn ReapJudge,
        report: &mut ReapReport,
    ) -> Option<(&'static str, Error)> {
        let mut first = None;
        let mut candidates = match self.list_managed_images(store_id).await {
            Ok(images) => images,
            Err(error) => {
                tracing::warn!("reaper: {}: {error}", self.engine());
                return Some(("list managed images", error));
            }
        };
        // An intermediate carries no store label, so it may be another store's build in progress
        // (seen: a concurrent run's boot reap removed a build's fresh layer, "No such image").
        // Only one whose run this store knows, and has ended, is ours to remove.
        match self.list_unattributed_images().await {
            Ok(images) => {
                for image in images {
                    if judge.claims(&image.run_id).await {
                        candidates.push(image);
                    }
                }
            }
            Err(error) => {
                tracing::warn!("reaper: {}: {error}", self.engine());
                first = Some(("list unattributed images", error));
            }
        }
        for image in candidates {
            if !judge.reapable(&image.run_id).await {
                report.kept += 1;
                continue;
            }
            match self.remove_image(&image.id).await {
                Ok(()) => report.deleted.push((ResourceKind::Image, image.id)),
                Err(error) => tracing::debug!("reaper: keep image {}: {error}", image.id),
            }
        }
        first
    }
}

/// A warm pool entry the reaper removes: its id, name, slots and claim marker, and whether it
/// must claim it first (nobody holds it yet).
struct DoomedEntry {
    id: String,
    name: String,
    slots: Vec<std::path::PathBuf>,
    marker: Option<std::path::PathBuf>,
    unclaimed: bool,
}

impl DockerDriver {
    /// Issue 18 item 4: this store's warm pool entries the reaper removes, as
    /// [`crate::warm::judge`] rules: a claimed entry whose claimer is gone, an unclaimed one no
    /// live process owns that is not waiting for a claim (stopped, too old, or this process
    /// keeps no pool). An entry of a live owner or claimer, or of one this host cannot judge,
    /// is kept.
    async fn orphaned_warm_entries(&self, store_id: &str) -> Result<Vec<DoomedEntry>> {
        let mut filters = iterion_sandbox::managed_filters(store_id);
        filters.push(format!(
            "{}={}",
            iterion_sandbox::LABEL_PURPOSE,
            crate::warm::WARM_PURPOSE
        ));
        let listed = self
            .shared
            .api
            .list_containers(filters.clone())
            .await
            .map_err(self.shared.engine_error("list warm pool entries"))?;
        if listed.is_empty() {
            return Ok(Vec::new());
        }
        let running: std::collections::BTreeSet<String> = self
            .shared
            .api
            .list_running_containers(filters)
            .await
            .map_err(self.shared.engine_error("list warm pool entries"))?
            .into_iter()
            .map(|entry| entry.id)
            .collect();
        let pool_enabled = self.shared.pool.enabled();
        let judged = tokio::task::spawn_blocking(move || {
            listed
                .into_iter()
                .filter_map(|entry| {
                    let label = |key: &str| entry.labels.get(key).map(String::as_str);
                    if label(iterion_sandbox::LABEL_STORE).is_none()
                        || label(iterion_sandbox::LABEL_PURPOSE) != Some(crate::warm::WARM_PURPOSE)
                    {
                        return None;
                    }
                    let marker = crate::warm::claim_marker_of(&entry.id, &entry.labels);
                    let holder = marker.as_deref().and_then(|marker| {
                        marker
                            .parent()
                            .and_then(|dir| crate::warm::claim_holder(dir, &entry.id))
                    });
                    let facts = crate::warm::EntryFacts {
                        owner_gone: label(crate::warm::LABEL_WARM_OWNER)
                            .is_some_and(crate::warm::owner_is_gone),
                        claim_holder_gone: holder.as_deref().map(crate::warm::owner_is_gone),
                        running: running.contains(&entry.id),
                        age: crate::warm::age_of(&entry.labels),
                        pool_enabled,
                    };
                    match crate::warm::judge(&facts) {
                        crate::warm::Verdict::Keep => None,
                        crate::warm::Verdict::Remove { claimed } => Some(DoomedEntry {
                            slots: crate::warm::slots_of(&entry.labels),
                            id: entry.id,
                            name: entry.name,
                            marker,
                            unclaimed: !claimed,
                        }),
                    }
                })
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        Ok(judged)
    }

    /// Removes the orphaned warm pool entries (see [`Self::orphaned_warm_entries`]) with their
    /// slots and markers; returns the ids removed. An unclaimed one is claimed first, so a run
    /// claiming it at the same moment gets it and the reaper leaves it alone.
    pub(crate) async fn reap_warm_entries(&self, store_id: &str) -> Result<Vec<String>> {
        let mut removed = Vec::new();
        for doomed in self.orphaned_warm_entries(store_id).await? {
            let DoomedEntry {
                id,
                name,
                mut slots,
                marker,
                unclaimed,
            } = doomed;
            if unclaimed && let Some(marker) = &marker {
                let (dir, claim_id) = (marker.parent().map(std::path::Path::to_owned), id.clone());
                let staked = tokio::task::spawn_blocking(move || {
                    dir.map(|dir| {
                        crate::warm::stake_claim(
                            &dir,
                            &claim_id,
                            crate::warm::owner_of_this_process(),
                        )
                    })
                })
                .await;
                // Held by another (a run claimed it just now): its claimer removes it. A marker
                // that cannot be written (another host's claims dir) does not keep it.
                if matches!(staked, Ok(Some(Ok(None)))) {
                    continue;
                }
            }
            slots.extend(marker);
            match self.remove(&id).await {
                Ok(()) => {
                    let _ = tokio::task::spawn_blocking(move || {
                        crate::warm::remove_slots(slots.iter().map(std::path::PathBuf::as_path));
                    })
                    .await;
                    removed.push(id);
                }
                Err(error) => tracing::warn!("reaper: remove warm pool entry {name}: {error}"),
            }
        }
        Ok(removed)
    }
}

#[async_trait]
impl Reaper for DockerDriver {
    /// Containers, then images, then `/nix` volumes (each removal can free the next kind).
    async fn reap(
        &self,
        store_id: &str,
        judge: &dyn ReapJudge,
    ) -> std::result::Result<ReapReport, ReapError> {
        let mut report = ReapReport::default();
        let listed = match self.list_managed(store_id).await {
            Ok(listed) => listed,
            Err(error) => {
                tracing::warn!("reaper: {}: {error}", self.engine());
                return Err(self.reap_error("list managed containers", error, report));
            }
        };
        let mut first: Option<(&str, Error)> = None;
        match self.reap_warm_entries(store_id).await {
            Ok(ids) => report
                .deleted
                .extend(ids.into_iter().map(|id| (ResourceKind::Container, id))),
            Err(error) => {
                tracing::warn!("reaper: {}: {error}", self.engine());
                first = Some(("list warm pool entries", error));
            }
        }
        for resource in listed {
            if !judge.reapable(&resource.run_id).await {
                report.kept += 1;
                continue;
            }
            match self.remove(&resource.id).await {
                Ok(()) => report.deleted.push((ResourceKind::Container, resource.id)),
                Err(error) => {
                    tracing::warn!("reaper: remove {}: {error}", resource.name);
                    first.get_or_insert(("remove container", error));
                }
            }
        }
        if let Some(failed) = self.reap_images(store_id, judge, &mut report).await {
            first.get_or_insert(failed);
        }
        match self.reap_nix_volumes(store_id).await {
            Ok(volumes) => report.deleted.extend(
                volumes
                    .into_iter()
                    .map(|volume| (ResourceKind::Volume, volume)),
            ),
            Err(error) => {
                tracing::warn!("reaper: {}: {error}", self.engine());
                first.get_or_insert(("list managed volumes", error));
            }
        }
        match first {
            None => Ok(report),
            Some((operation, error)) => Err(self.reap_error(operation, error, report)),
        }
    }

    /// What `reap` would remove, removing nothing: the containers and images `judge` frees,
    /// and the `/nix` volumes whose image is gone or would be.
    async fn survey(
        &self,
        store_id: &str,
        judge: &dyn ReapJudge,
    ) -> std::result::Result<ReapReport, ReapError> {
        let mut report = ReapReport::default();
        let containers = match self.list_managed(store_id).await {
            Ok(listed) => listed,
            Err(error) => return Err(self.reap_error("list managed containers", error, report)),
        };
        match self.orphaned_warm_entries(store_id).await {
            Ok(entries) => report.deleted.extend(
                entries
                    .into_iter()
                    .map(|doomed| (ResourceKind::Container, doomed.name)),
            ),
            Err(error) => return Err(self.reap_error("list warm pool entries", error, report)),
        }
        for resource in containers {
            if judge.reapable(&resource.run_id).await {
                report
                    .deleted
                    .push((ResourceKind::Container, resource.name));
            } else {
                report.kept += 1;
            }
        }
        let mut images = match self.list_managed_images(store_id).await {
            Ok(images) => images,
            Err(error) => return Err(self.reap_error("list managed images", error, report)),
        };
        if let Ok(unattributed) = self.list_unattributed_images().await {
            for image in unattributed {
                if judge.claims(&image.run_id).await {
                    images.push(image);
                }
            }
        }
        let mut doomed_images = Vec::new();
        for image in images {
            if judge.reapable(&image.run_id).await {
                doomed_images.push(image.id.clone());
                report.deleted.push((ResourceKind::Image, image.id));
            } else {
                report.kept += 1;
            }
        }
        let volumes = match self.list_nix_volumes(store_id).await {
            Ok(volumes) => volumes,
            Err(error) => return Err(self.reap_error("list managed volumes", error, report)),
        };
        for (name, prefix) in volumes {
            let Some(prefix) = prefix else { continue };
            let hex = |id: &str| id.strip_prefix("sha256:").unwrap_or(id).to_owned();
            let goes_with_an_image = doomed_images.iter().any(|id| hex(id).starts_with(&prefix));
            if goes_with_an_image || self.image_is_gone(&prefix).await {
                report.deleted.push((ResourceKind::Volume, name));
            } else {
                report.kept += 1;
            }
        }
        Ok(report)
    }

    async fn remove_run(&self, store_id: &str, run_id: &str) -> Result<usize> {
        DockerDriver::remove_run(self, store_id, run_id).await
    }
}
