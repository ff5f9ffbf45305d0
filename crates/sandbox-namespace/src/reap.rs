//! The namespace driver's reaper (SANDBOX.md §12): a sandbox's processes die with the engine
//! (the parent-death signal), but the cgroup its limits live in ([`crate::cgroup`]) stays
//! behind when the engine crashed before removing it. This reaper finds those by name
//! (`iterion-<run id>-<nonce>`, in every hierarchy a sandbox's cgroup is made in) and removes
//! the empty ones whose run the engine's judge frees.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use iterion_sandbox::{
    ReapError, ReapJudge, ReapReport, Reaper, ReaperConstructor, ResourceKind, Result,
};

use crate::cgroup::Leftover;

/// How old a cgroup must be before it is reaped: one made by a start in progress elsewhere is
/// empty for the few milliseconds before its init enters it.
pub const REAP_GRACE: Duration = Duration::from_secs(10);

/// The reaper of leftover sandbox cgroups.
#[derive(Clone, Debug)]
pub struct NamespaceReaper {
    grace: Duration,
}

impl Default for NamespaceReaper {
    fn default() -> Self {
        NamespaceReaper { grace: REAP_GRACE }
    }
}

impl NamespaceReaper {
    /// A reaper that waits `grace` after a cgroup was made (tests: zero).
    pub fn with_grace(grace: Duration) -> NamespaceReaper {
        NamespaceReaper { grace }
    }

    /// The leftovers worth judging: empty (a cgroup holding a process belongs to a live
    /// sandbox, and the kernel would refuse its removal anyway) and past the grace.
    async fn candidates(&self) -> Vec<Leftover> {
        let grace = self.grace;
        tokio::task::spawn_blocking(move || {
            crate::cgroup::leftovers()
                .into_iter()
                .filter(|l| l.empty && l.age >= grace)
                .collect()
        })
        .await
        .unwrap_or_default()
    }

    async fn pass(&self, judge: &dyn ReapJudge, remove: bool) -> ReapReport {
        let mut report = ReapReport::default();
        for leftover in self.candidates().await {
            if !judge.reapable(&leftover.run_id).await {
                report.kept += 1;
                continue;
            }
            let path = leftover.path.display().to_string();
            if remove {
                let removal =
                    tokio::task::spawn_blocking(move || crate::cgroup::remove_leftover(&leftover))
                        .await;
                match removal {
                    Ok(Ok(())) => {}
                    Ok(Err(error)) => {
                        tracing::warn!("namespace reaper: rmdir {path}: {error}");
                        continue;
                    }
                    Err(_) => continue,
                }
            }
            report.deleted.push((ResourceKind::Cgroup, path));
        }
        report
    }
}

#[async_trait]
impl Reaper for NamespaceReaper {
    /// Removes the empty leftover cgroups of runs `judge` frees. The store's id is not in a
    /// cgroup's name: a run of another store is "absent" to this one, but its live sandbox's
    /// cgroup is never empty, and the grace covers a start's first milliseconds.
    async fn reap(
        &self,
        _store_id: &str,
        judge: &dyn ReapJudge,
    ) -> std::result::Result<ReapReport, ReapError> {
        Ok(self.pass(judge, true).await)
    }

    async fn survey(
        &self,
        _store_id: &str,
        judge: &dyn ReapJudge,
    ) -> std::result::Result<ReapReport, ReapError> {
        Ok(self.pass(judge, false).await)
    }

    async fn remove_run(&self, _store_id: &str, run_id: &str) -> Result<usize> {
        let run_id = run_id.to_owned();
        Ok(tokio::task::spawn_blocking(move || {
            crate::cgroup::leftovers()
                .into_iter()
                .filter(|l| l.empty && l.run_id == run_id)
                .filter(|l| crate::cgroup::remove_leftover(l).is_ok())
                .count()
        })
        .await
        .unwrap_or(0))
    }
}

/// Builds [`NamespaceReaper`]: always available (the cgroup filesystem needs no daemon).
#[derive(Clone, Debug, Default)]
pub struct NamespaceReaperConstructor;

#[async_trait]
impl ReaperConstructor for NamespaceReaperConstructor {
    async fn reaper(&self) -> Result<Arc<dyn Reaper>> {
        Ok(Arc::new(NamespaceReaper::default()))
    }

    fn host_local(&self) -> bool {
        true
    }
}
