use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use iterion_sandbox::{NotSandboxedCause, Sandboxing, Source};
use iterion_store::{
    Claim, Event, Lease, Liveness, LogLine, LogStream, NewEvent, NewLogLine, NewNodeLog, NewRun,
    NodeLog, NodeLogQuery, RunQuery, SqliteOptions, SqliteStore,
};
use pretty_assertions::assert_eq;

use super::*;

fn verdict(
    yes: bool,
    mode: Mode,
    source: Source,
    cause: Option<NotSandboxedCause>,
) -> SandboxVerdict {
    SandboxVerdict {
        answer: match cause.filter(|_| !yes) {
            None => Sandboxing::Sandboxed,
            Some(cause) => Sandboxing::NotSandboxed(cause),
        },
        mode,
        source,
    }
}

#[test]
fn an_untrusted_run_without_a_container_is_denied_naming_the_tier() {
    let now = Timestamp::from_millis(0);
    let denied = decide_untrusted(
        &verdict(
            false,
            Mode::None,
            Source::CliFlag,
            Some(NotSandboxedCause::OptedOut),
        ),
        None,
        now,
    );
    assert_eq!(
        (denied.decision, denied.code.as_str(), denied.phase.as_str()),
        (
            AdmissionDecision::Denied,
            "untrusted_without_sandbox",
            "pre_model"
        )
    );
    assert!(
        denied.reason.starts_with(
            "run refused: trust=untrusted requires a per-run sandbox, but this run resolves to no container: opted out (mode none from cli flag --sandbox; no ITERION_SANDBOX_OVERRIDE is set)."
        ),
        "{}",
        denied.reason
    );
    let overridden = decide_untrusted(
        &verdict(
            false,
            Mode::None,
            Source::CliFlag,
            Some(NotSandboxedCause::OverrideNone),
        ),
        Some(SandboxFlag::None),
        now,
    );
    assert!(overridden.reason.contains(
        "override none (mode none from cli flag --sandbox; the ITERION_SANDBOX_OVERRIDE=\"none\" override is set)"
    ));
    let allowed = decide_untrusted(
        &verdict(true, Mode::Auto, Source::GlobalDefault, None),
        None,
        now,
    );
    assert_eq!(
        (allowed.decision, allowed.code.as_str()),
        (AdmissionDecision::Allowed, "untrusted_sandboxed")
    );
}

/// A store whose next `conflicts` saves lose their compare-and-swap.
#[derive(Debug)]
struct Conflicting {
    inner: SqliteStore,
    conflicts: AtomicU32,
    saves: AtomicU32,
}

#[async_trait]
impl Store for Conflicting {
    fn store_id(&self) -> &str {
        self.inner.store_id()
    }
    async fn create_run(&self, new: NewRun) -> iterion_store::Result<Run> {
        self.inner.create_run(new).await
    }
    async fn get_run(&self, id: &RunId) -> iterion_store::Result<Option<Run>> {
        self.inner.get_run(id).await
    }
    async fn list_runs(&self, query: &RunQuery) -> iterion_store::Result<Vec<Run>> {
        self.inner.list_runs(query).await
    }
    async fn runs_by_id_prefix(
        &self,
        prefix: &str,
        limit: usize,
    ) -> iterion_store::Result<Vec<Run>> {
        self.inner.runs_by_id_prefix(prefix, limit).await
    }
    async fn runs_finished_before(
        &self,
        before: iterion_store::Timestamp,
        limit: usize,
    ) -> iterion_store::Result<Vec<Run>> {
        self.inner.runs_finished_before(before, limit).await
    }
    async fn delete_run(&self, id: &RunId) -> iterion_store::Result<Vec<RunId>> {
        self.inner.delete_run(id).await
    }
    async fn save_run(&self, run: &Run, expected_version: u64) -> iterion_store::Result<u64> {
        self.saves.fetch_add(1, Ordering::SeqCst);
        let left = self.conflicts.load(Ordering::SeqCst);
        if left > 0 {
            self.conflicts.store(left - 1, Ordering::SeqCst);
            // Someone else saved first: bump the stored version, then report the conflict.
            let stored = self.inner.get_run(&run.id).await?.unwrap();
            let actual = self.inner.save_run(&stored, stored.version).await?;
            return Err(iterion_store::Error::Conflict {
                run_id: run.id.clone(),
                expected: expected_version,
                actual,
            });
        }
        self.inner.save_run(run, expected_version).await
    }
    async fn claim_next_queued(
        &self,
        holder: &str,
        ttl: Duration,
    ) -> iterion_store::Result<Option<Claim>> {
        self.inner.claim_next_queued(holder, ttl).await
    }
    async fn append_event(&self, run_id: &RunId, event: NewEvent) -> iterion_store::Result<Event> {
        self.inner.append_event(run_id, event).await
    }
    async fn append_events(
        &self,
        run_id: &RunId,
        events: Vec<NewEvent>,
    ) -> iterion_store::Result<Range<u64>> {
        self.inner.append_events(run_id, events).await
    }
    async fn events(&self, run_id: &RunId, after_seq: u64) -> iterion_store::Result<Vec<Event>> {
        self.inner.events(run_id, after_seq).await
    }
    async fn append_log(
        &self,
        run_id: &RunId,
        stream: LogStream,
        line: String,
    ) -> iterion_store::Result<LogLine> {
        self.inner.append_log(run_id, stream, line).await
    }
    async fn append_logs(
        &self,
        run_id: &RunId,
        lines: Vec<NewLogLine>,
    ) -> iterion_store::Result<Range<u64>> {
        self.inner.append_logs(run_id, lines).await
    }
    async fn logs(&self, run_id: &RunId, after_seq: u64) -> iterion_store::Result<Vec<LogLine>> {
        self.inner.logs(run_id, after_seq).await
    }
    async fn append_node_logs(
        &self,
        run_id: &RunId,
        chunks: Vec<NewNodeLog>,
    ) -> iterion_store::Result<Range<u64>> {
        self.inner.append_node_logs(run_id, chunks).await
    }

    async fn node_logs(
        &self,
        run_id: &RunId,
        query: &NodeLogQuery,
    ) -> iterion_store::Result<Vec<NodeLog>> {
        self.inner.node_logs(run_id, query).await
    }

    async fn acquire_lease(
        &self,
        run_id: &RunId,
        holder: &str,
        ttl: Duration,
    ) -> iterion_store::Result<Lease> {
        self.inner.acquire_lease(run_id, holder, ttl).await
    }
    async fn heartbeat(
        &self,
        run_id: &RunId,
        holder: &str,
        ttl: Duration,
    ) -> iterion_store::Result<Lease> {
        self.inner.heartbeat(run_id, holder, ttl).await
    }
    async fn release_lease(&self, run_id: &RunId, holder: &str) -> iterion_store::Result<bool> {
        self.inner.release_lease(run_id, holder).await
    }
    async fn lease_held(&self, run_id: &RunId) -> iterion_store::Result<bool> {
        self.inner.lease_held(run_id).await
    }
    async fn liveness(&self, run_id: &RunId) -> iterion_store::Result<Liveness> {
        self.inner.liveness(run_id).await
    }
}

async fn store_with_conflicts(conflicts: u32) -> (Arc<Conflicting>, Run) {
    let inner = SqliteStore::in_memory(SqliteOptions::default())
        .await
        .unwrap();
    let run = inner
        .create_run(NewRun::new("w", "sha256:0", "/w.iter"))
        .await
        .unwrap();
    let store = Arc::new(Conflicting {
        inner,
        conflicts: AtomicU32::new(conflicts),
        saves: AtomicU32::new(0),
    });
    (store, run)
}

#[tokio::test]
async fn an_admission_conflicted_twice_still_persists_on_the_third_attempt() {
    let (store, run) = store_with_conflicts(2).await;
    let admission = allowed_trusted(Timestamp::from_millis(7));
    let saved = persist_admission(store.as_ref(), &run, &admission, &|_| {})
        .await
        .unwrap();
    let stored = store.get_run(&run.id).await.unwrap().unwrap();
    assert_eq!(
        (
            store.saves.load(Ordering::SeqCst),
            stored.admission,
            saved.version
        ),
        (3, Some(admission), stored.version)
    );
}

#[tokio::test]
async fn an_admission_conflicted_three_times_returns_the_cas_error() {
    let (store, run) = store_with_conflicts(3).await;
    let err = persist_admission(
        store.as_ref(),
        &run,
        &allowed_trusted(Timestamp::from_millis(7)),
        &|_| {},
    )
    .await
    .unwrap_err();
    assert_eq!(err.to_string(), "admission CAS conflicted after 3 attempts");
    let stored = store.get_run(&run.id).await.unwrap().unwrap();
    assert_eq!(stored.admission, None);
}
