//! The one reaper predicate (SANDBOX.md §12.1) against real store states, on SQLite and on
//! PostgreSQL (`ITERION_IT_POSTGRES_URL`; skipped without it, a failure under
//! `ITERION_IT_DOCKER=1`), and the cloud pass against a FAKE Kubernetes API server
//! (`crates/sandbox-kubernetes/tests/support/fake_kube.rs`) with a real store behind the predicate.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use iterion_engine::{LivenessSource, Verdict, reap_cloud, sandbox_resource_reapable};
use iterion_sandbox::{ReapJudge, Reaper, ResourceKind};
use iterion_sandbox_kubernetes::KubeRsApi;
use iterion_store::{
    InitialStatus, Liveness, ManualClock, NewRun, PgOptions, PgStore, RunId, RunStatus,
    SqliteOptions, SqliteStore, Store, Timestamp,
};
use pretty_assertions::assert_eq;

use crate::suite::fake_kube::{FakeKube, Kind};

const TTL: Duration = Duration::from_secs(30);

fn clock() -> ManualClock {
    ManualClock::new(Timestamp::from_millis(1_793_525_400_000))
}

async fn sqlite() -> (Arc<dyn Store>, ManualClock) {
    let clock = clock();
    let store = SqliteStore::in_memory(SqliteOptions::default().clock(Arc::new(clock.clone())))
        .await
        .unwrap();
    (Arc::new(store), clock)
}

#[allow(clippy::print_stderr)]
async fn postgres() -> Option<(Arc<dyn Store>, ManualClock)> {
    let url = match std::env::var("ITERION_IT_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => url,
        _ => {
            assert!(
                std::env::var("ITERION_IT_DOCKER").as_deref() != Ok("1"),
                "ITERION_IT_DOCKER=1 but ITERION_IT_POSTGRES_URL is unset"
            );
            eprintln!("skipped: set ITERION_IT_POSTGRES_URL=postgres://… to run PostgreSQL tests");
            return None;
        }
    };
    let clock = clock();
    let schema = format!("it_{}", RunId::generate().as_str().replace('-', ""));
    let options = PgOptions::default()
        .clock(Arc::new(clock.clone()))
        .schema(&schema)
        .unwrap()
        .pool_size(2);
    Some((
        Arc::new(PgStore::connect_with(&url, options).await.unwrap()),
        clock,
    ))
}

/// A run created in `status`, through the store's own transitions.
async fn run_in(store: &dyn Store, status: RunStatus, leased: bool) -> RunId {
    let mut new = NewRun::new("review", "sha256:ab12", "flows/review.iter");
    if status == RunStatus::Queued {
        new = new.status(InitialStatus::Queued);
    }
    if leased {
        new = new.lease("runner-a", TTL);
    }
    let run = store.create_run(new).await.unwrap();
    if status != run.status {
        let mut next = run.clone();
        next.status = status;
        if matches!(status, RunStatus::Failed | RunStatus::FailedResumable) {
            next.failure_code = Some("SANDBOX_SETUP_FAILED".to_owned());
        }
        store.save_run(&next, run.version).await.unwrap();
    }
    run.id
}

/// A real store whose `liveness` fails for the listed runs (a forced lease-check error, a
/// transient load error); every other answer is the store's own.
struct Faulty {
    store: Arc<dyn Store>,
    failing: BTreeSet<RunId>,
}

#[async_trait]
impl LivenessSource for Faulty {
    async fn liveness(&self, run_id: &RunId) -> Result<Liveness, iterion_store::Error> {
        if self.failing.contains(run_id) {
            return Err(iterion_store::Error::HomeUnset);
        }
        Store::liveness(self.store.as_ref(), run_id).await
    }
}

async fn predicate_table(store: Arc<dyn Store>, clock: ManualClock) {
    let s = store.as_ref();
    // A run whose lease lapsed: still `running` (crash recovery has not moved it yet): keep.
    let lapsed = run_in(s, RunStatus::Running, true).await;
    clock.advance(TTL + Duration::from_secs(1));
    let rows: Vec<(&str, String)> = vec![
        (
            "leased running",
            run_in(s, RunStatus::Running, true)
                .await
                .as_str()
                .to_owned(),
        ),
        ("lapsed running", lapsed.as_str().to_owned()),
        (
            "paused",
            run_in(s, RunStatus::Paused, false)
                .await
                .as_str()
                .to_owned(),
        ),
        (
            "queued",
            run_in(s, RunStatus::Queued, false)
                .await
                .as_str()
                .to_owned(),
        ),
        (
            "finished",
            run_in(s, RunStatus::Finished, false)
                .await
                .as_str()
                .to_owned(),
        ),
        (
            "failed",
            run_in(s, RunStatus::Failed, false)
                .await
                .as_str()
                .to_owned(),
        ),
        (
            "failed_resumable",
            run_in(s, RunStatus::FailedResumable, false)
                .await
                .as_str()
                .to_owned(),
        ),
        (
            "cancelled",
            run_in(s, RunStatus::Cancelled, false)
                .await
                .as_str()
                .to_owned(),
        ),
        ("absent", RunId::generate().as_str().to_owned()),
        ("empty label", String::new()),
        ("not a run id", "not-a-run-id".to_owned()),
        (
            "lease check error on a leased run",
            run_in(s, RunStatus::Running, true)
                .await
                .as_str()
                .to_owned(),
        ),
        (
            "transient load error on a finished run",
            run_in(s, RunStatus::Finished, false)
                .await
                .as_str()
                .to_owned(),
        ),
    ];
    let failing: BTreeSet<RunId> = rows
        .iter()
        .filter(|(name, _)| name.contains("error"))
        .map(|(_, id)| RunId::parse(id).unwrap())
        .collect();
    let source = Faulty {
        store: Arc::clone(&store),
        failing,
    };
    let mut got = Vec::new();
    for (name, run_id) in &rows {
        got.push((*name, sandbox_resource_reapable(&source, run_id).await));
    }
    use Verdict::{Keep, Reap};
    assert_eq!(
        got,
        vec![
            ("leased running", Keep),
            ("lapsed running", Keep),
            ("paused", Keep),
            ("queued", Keep),
            ("finished", Reap),
            ("failed", Reap),
            ("failed_resumable", Reap),
            ("cancelled", Reap),
            ("absent", Reap),
            ("empty label", Reap),
            ("not a run id", Reap),
            ("lease check error on a leased run", Keep),
            ("transient load error on a finished run", Keep),
        ]
    );
    // Without the fault, the store's own answers for those two: keep (leased) and reap.
    let direct = [
        sandbox_resource_reapable(store.as_ref(), &rows[11].1).await,
        sandbox_resource_reapable(store.as_ref(), &rows[12].1).await,
    ];
    assert_eq!(direct, [Keep, Reap]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reaper_predicate_table_on_sqlite() {
    let (store, clock) = sqlite().await;
    predicate_table(store, clock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reaper_predicate_table_on_postgres() {
    if let Some((store, clock)) = postgres().await {
        predicate_table(store, clock).await;
    }
}

fn labels(store_id: &str, run_id: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("iterion.io/managed".to_owned(), "true".to_owned()),
        ("iterion.io/store".to_owned(), store_id.to_owned()),
        ("iterion.io/run-id".to_owned(), run_id.to_owned()),
    ])
}

/// A judge that frees exactly the runs it names.
struct Frees(Vec<String>);

#[async_trait]
impl ReapJudge for Frees {
    async fn reapable(&self, run_id: &str) -> bool {
        self.0.iter().any(|r| r == run_id)
    }

    async fn claims(&self, _run_id: &str) -> bool {
        false
    }
}

async fn cloud_pass(store: Arc<dyn Store>) {
    let fake = FakeKube::start("iterion").await;
    let api = KubeRsApi::new(fake.client(), fake.namespace());
    let s = store.as_ref();
    let live = run_in(s, RunStatus::Running, true).await;
    let done = run_in(s, RunStatus::Finished, false).await;
    let absent = RunId::generate();
    let id = store.store_id().to_owned();
    for (kind, prefix) in [
        (Kind::Pod, "pod"),
        (Kind::Secret, "secret"),
        (Kind::NetworkPolicy, "np"),
    ] {
        fake.insert(kind, &format!("{prefix}-live"), labels(&id, live.as_str()));
        fake.insert(kind, &format!("{prefix}-done"), labels(&id, done.as_str()));
        fake.insert(
            kind,
            &format!("{prefix}-absent"),
            labels(&id, absent.as_str()),
        );
        fake.insert(kind, &format!("{prefix}-unlabelled"), labels(&id, ""));
        // Another store's finished-looking run: never ours to reap.
        fake.insert(
            kind,
            &format!("{prefix}-other"),
            labels("other-store", done.as_str()),
        );
    }
    let mut purpose = labels(&id, done.as_str());
    purpose.insert("iterion.io/purpose".to_owned(), "nix-store".to_owned());
    fake.insert(Kind::Secret, "secret-purpose", purpose);

    // `prune --dry-run`'s question first: the same answers, and nothing is deleted.
    let survey = api
        .survey(
            &id,
            &Frees(vec![done.to_string(), absent.to_string(), String::new()]),
        )
        .await
        .unwrap();
    assert_eq!((survey.deleted.len(), survey.kept), (9, 3), "{survey:?}");
    assert!(
        survey
            .deleted
            .contains(&(ResourceKind::Pod, "pod-done".to_owned()))
    );
    assert_eq!(
        [Kind::Pod, Kind::Secret, Kind::NetworkPolicy].map(|k| fake.names(k).len()),
        [5, 6, 5],
        "a survey deleted something"
    );

    let report = reap_cloud(s, &api).await.unwrap();
    assert_eq!(
        (report.deleted.len(), report.kept),
        (9, 3),
        "done, absent and unlabelled go; live stays ({report:?})"
    );
    assert_eq!(
        [Kind::Pod, Kind::Secret, Kind::NetworkPolicy].map(|k| fake.names(k)),
        [
            vec!["pod-live".to_owned(), "pod-other".to_owned()],
            vec![
                "secret-live".to_owned(),
                "secret-other".to_owned(),
                "secret-purpose".to_owned()
            ],
            vec!["np-live".to_owned(), "np-other".to_owned()],
        ]
    );
    assert!(
        report
            .deleted
            .contains(&(ResourceKind::Pod, "pod-done".to_owned()))
    );
    // A second pass finds nothing more to do.
    let again = reap_cloud(s, &api).await.unwrap();
    assert_eq!((again.deleted.len(), again.kept), (0, 3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reaper_cloud_pass_on_sqlite() {
    let (store, _clock) = sqlite().await;
    cloud_pass(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reaper_cloud_pass_on_postgres() {
    if let Some((store, _clock)) = postgres().await {
        cloud_pass(store).await;
    }
}
