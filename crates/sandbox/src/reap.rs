//! Reaping, a driver capability (SANDBOX.md §12): what a driver leaves behind when its engine
//! crashed mid-run, and how it is collected.
//!
//! The split is the one of invariant I1, capability here and policy in the engine: a [`Reaper`]
//! (implemented by each driver crate) lists this store's managed resources by label and removes
//! what the engine's [`ReapJudge`] frees; the judge (the engine's predicate over its store) knows
//! nothing of containers or pods. A [`ReaperConstructor`] connects a reaper when a pass begins,
//! so an engine that is down at one pass is tried again at the next.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;

use crate::error::{EngineError, Result};

/// What a reaper removed, across drivers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ResourceKind {
    /// A run's container (docker/podman).
    Container,
    /// A built image, or a build's intermediate (docker/podman).
    Image,
    /// A shared `/nix` volume whose image is gone (docker/podman).
    Volume,
    /// A run's pod (kubernetes).
    Pod,
    /// A run's Secret (kubernetes).
    Secret,
    /// A run's NetworkPolicy (kubernetes).
    NetworkPolicy,
    /// A sandbox's cgroup (the namespace driver's resource limits, issue 18).
    Cgroup,
}

impl ResourceKind {
    /// `container`, `image`, `volume`, `pod`, `secret`, `networkpolicy` or `cgroup`.
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceKind::Container => "container",
            ResourceKind::Image => "image",
            ResourceKind::Volume => "volume",
            ResourceKind::Pod => "pod",
            ResourceKind::Secret => "secret",
            ResourceKind::NetworkPolicy => "networkpolicy",
            ResourceKind::Cgroup => "cgroup",
        }
    }
}

impl fmt::Display for ResourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one reaper pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReapReport {
    /// The resources deleted (or found already gone), by kind and id: a container or image id,
    /// a volume or object name.
    pub deleted: Vec<(ResourceKind, String)>,
    /// How many managed resources were judged and kept.
    pub kept: usize,
}

impl ReapReport {
    /// How many resources of `kind` were deleted.
    pub fn count(&self, kind: ResourceKind) -> usize {
        self.deleted.iter().filter(|(k, _)| *k == kind).count()
    }

    /// Adds `other`'s deletions and kept count to this report.
    pub fn merge(&mut self, other: ReapReport) {
        self.deleted.extend(other.deleted);
        self.kept += other.kept;
    }
}

/// Why a pass stopped short; what it did before (and despite) the failure is in `report`.
#[derive(Debug, thiserror::Error)]
#[error("{driver} reaper: {operation}: {source}")]
pub struct ReapError {
    /// The driver whose pass failed (`docker`, `podman`, `kubernetes`).
    pub driver: String,
    /// `list pod`, `delete secret/x`, `list managed containers`, ….
    pub operation: String,
    /// The engine's answer.
    #[source]
    pub source: EngineError,
    /// What the pass did anyway.
    pub report: ReapReport,
}

/// The engine's predicate over its store (SANDBOX.md §12.1), as a reaper asks it. This crate
/// knows no store: liveness, leases and run status stay on the engine's side.
#[async_trait]
pub trait ReapJudge: Send + Sync {
    /// Whether the resources labelled with run `run_id` (`""` when the label is absent) may be
    /// removed.
    async fn reapable(&self, run_id: &str) -> bool;

    /// Whether a resource that names run `run_id` but carries no store label (a classic build's
    /// intermediate image, SANDBOX.md §4.10) is this store's to judge at all: the store holds the
    /// run and nobody holds its lease. Another store's build in progress is never claimed.
    async fn claims(&self, run_id: &str) -> bool;
}

/// A driver's reaping capability (SANDBOX.md §12), implemented by each driver crate.
#[async_trait]
pub trait Reaper: Send + Sync {
    /// One pass over this store's managed resources: each is put to `judge` by its run id, and
    /// what it frees is removed ("already gone" is success). Failures are logged where they
    /// happen and the pass goes on where it can.
    ///
    /// # Errors
    ///
    /// The first failure, with what the pass did anyway in [`ReapError::report`].
    async fn reap(
        &self,
        store_id: &str,
        judge: &dyn ReapJudge,
    ) -> std::result::Result<ReapReport, ReapError>;

    /// What [`Reaper::reap`] would remove now, removing nothing (`iterion prune --dry-run`):
    /// the same listing and the same questions to `judge`, the answers reported in
    /// [`ReapReport::deleted`].
    ///
    /// # Errors
    ///
    /// The first listing failure, with what was found before it.
    async fn survey(
        &self,
        store_id: &str,
        judge: &dyn ReapJudge,
    ) -> std::result::Result<ReapReport, ReapError>;

    /// Removes the live resources of one run whose setup was cancelled, where the driver's own
    /// cleanup may not have run. Returns how many there were.
    ///
    /// # Errors
    ///
    /// The first listing or removal failure.
    async fn remove_run(&self, store_id: &str, run_id: &str) -> Result<usize>;
}

/// Connects a driver's [`Reaper`] when a pass begins.
#[async_trait]
pub trait ReaperConstructor: Send + Sync {
    /// The reaper, its engine connected.
    ///
    /// # Errors
    ///
    /// [`Error::Unavailable`](crate::Error::Unavailable) when the engine is not reachable.
    async fn reaper(&self) -> Result<Arc<dyn Reaper>>;

    /// Whether this reaper collects what the engine leaves on the host itself (the namespace
    /// driver's cgroups), asked on every pass beside the one container engine that answers,
    /// rather than being an alternative to it.
    fn host_local(&self) -> bool {
        false
    }
}
