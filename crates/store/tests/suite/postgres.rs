//! The PostgreSQL backend against the same contract as SQLite (ARCHITECTURE.md §5, decision 8).
//!
//! Each check is written once against `Arc<dyn Store>` and run on both backends: a fresh
//! in-memory (or file) SQLite store, and a fresh schema in the database that
//! `ITERION_IT_POSTGRES_URL` names (scripts/test.sh starts the cluster and sets it), so tests
//! running in parallel never see each other's runs. Without the variable the PostgreSQL tests
//! are skipped — unless `ITERION_IT_DOCKER=1` (CI), where a missing database is a failure.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use iterion_store::{
    Error, InitialStatus, Lease, Liveness, ManualClock, NewEvent, PgOptions, PgStore, RunId,
    RunQuery, RunStatus, Store, Timestamp, open_store,
};
use pretty_assertions::assert_eq;
use serde_json::json;
use tokio::sync::Barrier;

use super::{T0, clock, file_store, memory_store, review};

const TTL: Duration = Duration::from_secs(30);

/// The database URL for PostgreSQL tests, or `None` to skip them (never under CI).
#[allow(clippy::print_stderr)] // the skip is said where the test runner shows it
fn postgres_url() -> Option<String> {
    match std::env::var("ITERION_IT_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var("ITERION_IT_DOCKER").as_deref() != Ok("1"),
                "ITERION_IT_DOCKER=1 but ITERION_IT_POSTGRES_URL is unset: PostgreSQL tests \
                 must run (scripts/test.sh starts the cluster and sets it)"
            );
            eprintln!("skipped: set ITERION_IT_POSTGRES_URL=postgres://… to run PostgreSQL tests");
            None
        }
    }
}

/// A fresh schema's name, unique to one test.
fn fresh_schema() -> String {
    format!("it_{}", RunId::generate().as_str().replace('-', ""))
}

/// A store (one connection pool) on `schema`, on `clock`.
async fn pg_store(url: &str, schema: &str, clock: &ManualClock) -> Arc<dyn Store> {
    let options = PgOptions::default()
        .clock(Arc::new(clock.clone()))
        .schema(schema)
        .unwrap()
        .pool_size(4);
    Arc::new(PgStore::connect_with(url, options).await.unwrap())
}

/// A store on a fresh schema and a stopped clock at [`T0`], or `None` to skip (see
/// [`postgres_url`]).
pub async fn fresh_store() -> Option<(Arc<dyn Store>, ManualClock)> {
    let url = postgres_url()?;
    let clock = clock();
    let store = pg_store(&url, &fresh_schema(), &clock).await;
    Some((store, clock))
}

/// The backends a contract test runs on: makes `n` stores sharing one database and one clock.
enum Backend {
    Sqlite(tempfile::TempDir),
    Postgres { url: String, schema: String },
}

impl Backend {
    fn postgres() -> Option<Self> {
        postgres_url().map(|url| Self::Postgres {
            url,
            schema: fresh_schema(),
        })
    }

    fn sqlite() -> Self {
        Self::Sqlite(tempfile::tempdir().unwrap())
    }

    async fn stores(&self, n: usize, clock: &ManualClock) -> Vec<Arc<dyn Store>> {
        let mut stores = Vec::new();
        for _ in 0..n {
            stores.push(match self {
                Self::Sqlite(dir) => {
                    Arc::new(file_store(dir.path(), clock).await) as Arc<dyn Store>
                }
                Self::Postgres { url, schema } => pg_store(url, schema, clock).await,
            });
        }
        stores
    }
}

// --- contract checks, written once -----------------------------------------------------------

async fn crud(backend: Backend) {
    let clock = clock();
    let store = backend.stores(1, &clock).await.remove(0);
    let run = store.create_run(review()).await.unwrap();
    assert_eq!(store.get_run(&run.id).await.unwrap(), Some(run.clone()));
    assert_eq!(store.get_run(&RunId::generate()).await.unwrap(), None);

    let taken = store
        .create_run(review().id(run.id.clone()))
        .await
        .unwrap_err();
    assert_eq!(taken.code(), "STORE_RUN_EXISTS");
    let orphan = store
        .create_run(review().child_of(&{
            let mut ghost = run.clone();
            ghost.id = RunId::generate();
            ghost
        }))
        .await
        .unwrap_err();
    assert_eq!(orphan.code(), "STORE_PARENT_NOT_FOUND");

    clock.advance(Duration::from_millis(5));
    let child = store.create_run(review().child_of(&run)).await.unwrap();
    assert_eq!(child.root_run_id, run.id);
    let listed: Vec<RunId> = store
        .list_runs(&RunQuery::newest(10))
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(listed, [child.id.clone(), run.id.clone()]);

    let mut saved = run.clone();
    saved.status = RunStatus::Failed;
    saved.failure_code = Some("E_NODE".into());
    saved.vars.insert("k".into(), json!([1, "two"]));
    saved.checkpoint = Some(json!({"node": "review"}));
    assert_eq!(store.save_run(&saved, 1).await.unwrap(), 2);
    let mut want = saved.clone();
    want.version = 2;
    want.updated_at = Timestamp::from_millis(T0 + 5);
    want.finished_at = Some(Timestamp::from_millis(T0 + 5));
    assert_eq!(store.get_run(&run.id).await.unwrap(), Some(want.clone()));
    let failed_only = store
        .list_runs(&RunQuery::newest(10).status(RunStatus::Failed))
        .await
        .unwrap();
    assert_eq!(failed_only, [want.clone()]);

    // Same refusals, same codes as SQLite.
    let mut illegal = want.clone();
    illegal.status = RunStatus::Queued;
    illegal.failure_code = None;
    let err = store.save_run(&illegal, 2).await.unwrap_err();
    assert_eq!(err.code(), "STORE_ILLEGAL_TRANSITION");
    let mut renamed = want.clone();
    renamed.workflow = "other".into();
    let err = store.save_run(&renamed, 2).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::ImmutableField {
                field: "workflow",
                ..
            }
        ),
        "{err:?}"
    );
    let mut coded = want.clone();
    coded.status = RunStatus::Running;
    let err = store.save_run(&coded, 2).await.unwrap_err();
    assert_eq!(err.code(), "STORE_FAILURE_ON_STATUS");
    let mut ghost = want.clone();
    ghost.id = RunId::generate();
    let err = store.save_run(&ghost, 2).await.unwrap_err();
    assert_eq!(err.code(), "STORE_RUN_NOT_FOUND");
}

async fn cas_between_two_connections(backend: Backend) {
    let clock = clock();
    let stores = backend.stores(2, &clock).await;
    let run = stores[0].create_run(review()).await.unwrap();
    let barrier = Arc::new(Barrier::new(2));
    let tasks: Vec<_> = stores
        .iter()
        .zip([RunStatus::Paused, RunStatus::Cancelled])
        .map(|(store, status)| {
            let (store, barrier, id) = (Arc::clone(store), Arc::clone(&barrier), run.id.clone());
            tokio::spawn(async move {
                let mut run = store.get_run(&id).await.unwrap().unwrap();
                barrier.wait().await;
                run.status = status;
                store.save_run(&run, run.version).await
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await.unwrap());
    }
    let wins = outcomes.iter().filter(|o| o.is_ok()).count();
    assert_eq!(wins, 1, "{outcomes:?}");
    let loser = outcomes.into_iter().find_map(Result::err).unwrap();
    match loser {
        Error::Conflict {
            run_id,
            expected,
            actual,
        } => assert_eq!((run_id, expected, actual), (run.id.clone(), 1, 2)),
        other => panic!("the loser should conflict: {other:?}"),
    }
    // update_run's retry loop lands on top of the winner.
    let landed = iterion_store::update_run(stores[1].as_ref(), &run.id, 3, |r| {
        r.last_completed_node = Some("n1".into());
    })
    .await
    .unwrap();
    assert_eq!(landed.version, 3);
}

async fn gap_free_concurrent_sequences(backend: Backend) {
    let clock = clock();
    let stores = backend.stores(4, &clock).await;
    let run = stores[0].create_run(review()).await.unwrap();
    let per_writer = 25_u64;
    let mut tasks = Vec::new();
    for (writer, store) in (0_u64..).zip(stores.iter().cloned()) {
        let id = run.id.clone();
        tasks.push(tokio::spawn(async move {
            let event = |i: u64| NewEvent::new("tick", json!({"writer": writer, "index": i}));
            let mut i = 0;
            while i < per_writer {
                if i % 2 == 0 || i + 3 > per_writer {
                    store.append_event(&id, event(i)).await.unwrap();
                    i += 1;
                } else {
                    let range = store
                        .append_events(&id, (i..i + 3).map(event).collect())
                        .await
                        .unwrap();
                    assert_eq!(range.end - range.start, 3);
                    i += 3;
                }
                store
                    .append_log(&id, iterion_store::LogStream::Stdout, format!("{writer}"))
                    .await
                    .unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let events = stores[3].events(&run.id, 0).await.unwrap();
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=4 * per_writer).collect::<Vec<_>>());
    for writer in 0..4 {
        let indexes: Vec<u64> = events
            .iter()
            .filter(|e| e.data["writer"] == writer)
            .map(|e| e.data["index"].as_u64().unwrap())
            .collect();
        assert_eq!(
            indexes,
            (0..per_writer).collect::<Vec<_>>(),
            "writer {writer}"
        );
    }
    let log_seqs: Vec<u64> = stores[2]
        .logs(&run.id, 0)
        .await
        .unwrap()
        .iter()
        .map(|l| l.seq)
        .collect();
    let n_logs = log_seqs.len() as u64;
    assert_eq!(log_seqs, (1..=n_logs).collect::<Vec<_>>());
    assert_eq!(stores[1].events(&run.id, 98).await.unwrap().len(), 2);
    let err = stores[0]
        .append_event(&RunId::generate(), NewEvent::new("x", json!({})))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "STORE_RUN_NOT_FOUND");
}

async fn leases_and_liveness(backend: Backend) {
    let clock = clock();
    let stores = backend.stores(2, &clock).await;
    let (a, b) = (&stores[0], &stores[1]);
    let run = a.create_run(review()).await.unwrap();
    let lease = |holder: &str, offset: i64| Lease {
        run_id: run.id.clone(),
        holder: holder.into(),
        expires_at: Timestamp::from_millis(T0 + offset),
    };
    assert_eq!(
        a.liveness(&run.id).await.unwrap(),
        Liveness::Unleased {
            status: RunStatus::Running
        }
    );
    assert_eq!(
        a.acquire_lease(&run.id, "host-a:1", TTL).await.unwrap(),
        lease("host-a:1", 30_000)
    );
    assert!(b.lease_held(&run.id).await.unwrap());
    match b.acquire_lease(&run.id, "host-b:2", TTL).await.unwrap_err() {
        Error::LeaseHeld {
            holder, expires_at, ..
        } => assert_eq!(
            (holder.as_str(), expires_at),
            ("host-a:1", Timestamp::from_millis(T0 + 30_000))
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        b.liveness(&run.id).await.unwrap(),
        Liveness::Leased(lease("host-a:1", 30_000))
    );
    clock.advance(Duration::from_secs(10));
    assert_eq!(
        a.heartbeat(&run.id, "host-a:1", TTL).await.unwrap(),
        lease("host-a:1", 40_000)
    );
    // Lapsed: taken over, and the old holder's heartbeat is refused.
    clock.advance(Duration::from_secs(31));
    assert!(!a.lease_held(&run.id).await.unwrap());
    assert_eq!(
        a.liveness(&run.id).await.unwrap(),
        Liveness::Unleased {
            status: RunStatus::Running
        }
    );
    b.acquire_lease(&run.id, "host-b:2", TTL).await.unwrap();
    let err = a.heartbeat(&run.id, "host-a:1", TTL).await.unwrap_err();
    assert_eq!(err.code(), "STORE_LEASE_LOST");
    assert!(!a.release_lease(&run.id, "host-a:1").await.unwrap());
    assert!(b.release_lease(&run.id, "host-b:2").await.unwrap());
    assert!(!b.release_lease(&run.id, "host-b:2").await.unwrap());
    assert_eq!(
        a.liveness(&RunId::generate()).await.unwrap(),
        Liveness::Absent
    );
    let err = a
        .acquire_lease(&run.id, "h", Duration::ZERO)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "STORE_INVALID_LEASE_TTL");
    let err = a
        .acquire_lease(&RunId::generate(), "h", TTL)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "STORE_RUN_NOT_FOUND");
    // Two acquirers at once on a free run: exactly one gets it.
    let barrier = Arc::new(Barrier::new(2));
    let tasks: Vec<_> = [(a, "x"), (b, "y")]
        .into_iter()
        .map(|(store, holder)| {
            let (store, barrier, id) = (Arc::clone(store), Arc::clone(&barrier), run.id.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                store.acquire_lease(&id, holder, TTL).await
            })
        })
        .collect();
    let mut won = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(_) => won += 1,
            Err(err) => assert_eq!(err.code(), "STORE_LEASE_HELD"),
        }
    }
    assert_eq!(won, 1);
}

async fn four_claimers_never_share_a_run(backend: Backend) {
    let clock = clock();
    let stores = backend.stores(4, &clock).await;
    let mut created = BTreeSet::new();
    for _ in 0..40 {
        let run = stores[0]
            .create_run(review().status(InitialStatus::Queued))
            .await
            .unwrap();
        created.insert(run.id);
        clock.advance(Duration::from_millis(1));
    }
    let barrier = Arc::new(Barrier::new(4));
    let mut tasks = Vec::new();
    for (n, store) in stores.iter().cloned().enumerate() {
        let barrier = Arc::clone(&barrier);
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let mut mine = Vec::new();
            while let Some(claim) = store
                .claim_next_queued(&format!("runner-{n}"), TTL)
                .await
                .unwrap()
            {
                assert_eq!(
                    (claim.run.status, claim.run.deliveries, claim.run.version),
                    (RunStatus::Running, 1, 2)
                );
                assert_eq!(claim.lease.holder, format!("runner-{n}"));
                mine.push(claim.run.id);
            }
            mine
        }));
    }
    let mut claimed = Vec::new();
    for task in tasks {
        claimed.extend(task.await.unwrap());
    }
    let unique: BTreeSet<RunId> = claimed.iter().cloned().collect();
    assert_eq!(claimed.len(), unique.len(), "a run was claimed twice");
    assert_eq!(unique, created);
    assert!(
        stores[0]
            .claim_next_queued("late", TTL)
            .await
            .unwrap()
            .is_none()
    );
}

/// A runner claiming from the queue while another process takes leases on the same runs
/// directly: every run ends up leased to exactly one of them, and neither side errs otherwise.
async fn claims_and_direct_leases_never_share_a_run(backend: Backend) {
    let clock = clock();
    let stores = backend.stores(2, &clock).await;
    let mut ids = Vec::new();
    for _ in 0..30 {
        let run = stores[0]
            .create_run(review().status(InitialStatus::Queued))
            .await
            .unwrap();
        ids.push(run.id);
        clock.advance(Duration::from_millis(1));
    }
    let barrier = Arc::new(Barrier::new(2));
    let claimer = {
        let (store, barrier) = (Arc::clone(&stores[0]), Arc::clone(&barrier));
        tokio::spawn(async move {
            barrier.wait().await;
            let mut claimed = BTreeSet::new();
            while let Some(claim) = store.claim_next_queued("runner", TTL).await.unwrap() {
                claimed.insert(claim.run.id);
            }
            claimed
        })
    };
    let leaser = {
        let (store, barrier, ids) = (Arc::clone(&stores[1]), Arc::clone(&barrier), ids.clone());
        tokio::spawn(async move {
            barrier.wait().await;
            let mut leased = BTreeSet::new();
            for id in ids {
                match store.acquire_lease(&id, "manual", TTL).await {
                    Ok(_) => {
                        leased.insert(id);
                    }
                    Err(err) => assert_eq!(err.code(), "STORE_LEASE_HELD", "{err}"),
                }
            }
            leased
        })
    };
    let (claimed, leased) = (claimer.await.unwrap(), leaser.await.unwrap());
    assert_eq!(
        claimed.intersection(&leased).count(),
        0,
        "a run went to both"
    );
    for id in &ids {
        let want = if claimed.contains(id) {
            "runner"
        } else {
            "manual"
        };
        match stores[0].liveness(id).await.unwrap() {
            Liveness::Leased(lease) => assert_eq!(lease.holder, want, "{id}"),
            other => panic!("{id} should be leased: {other:?}"),
        }
    }
}

// --- SQLite ------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn contract_sqlite_crud() {
    crud(Backend::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn contract_sqlite_cas_between_two_connections() {
    cas_between_two_connections(Backend::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn contract_sqlite_gap_free_concurrent_sequences() {
    gap_free_concurrent_sequences(Backend::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn contract_sqlite_leases_and_liveness() {
    leases_and_liveness(Backend::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn contract_sqlite_four_claimers_never_share_a_run() {
    four_claimers_never_share_a_run(Backend::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn contract_sqlite_claims_and_direct_leases_never_share_a_run() {
    claims_and_direct_leases_never_share_a_run(Backend::sqlite()).await;
}

// --- PostgreSQL --------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_crud() {
    if let Some(backend) = Backend::postgres() {
        crud(backend).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_cas_conflict_between_two_connections() {
    if let Some(backend) = Backend::postgres() {
        cas_between_two_connections(backend).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_concurrent_appenders_get_gap_free_sequences() {
    if let Some(backend) = Backend::postgres() {
        gap_free_concurrent_sequences(backend).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_leases_and_liveness_follow_the_store_clock() {
    if let Some(backend) = Backend::postgres() {
        leases_and_liveness(backend).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_four_concurrent_claimers_never_share_a_run() {
    if let Some(backend) = Backend::postgres() {
        four_claimers_never_share_a_run(backend).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_claims_and_direct_leases_never_share_a_run() {
    if let Some(backend) = Backend::postgres() {
        claims_and_direct_leases_never_share_a_run(backend).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_reconnecting_keeps_the_store_id_and_the_data() {
    let Some(url) = postgres_url() else { return };
    let schema = fresh_schema();
    let clock = clock();
    let options = || {
        PgOptions::default()
            .clock(Arc::new(clock.clone()))
            .schema(&schema)
            .unwrap()
    };
    let first = PgStore::connect_with(&url, options()).await.unwrap();
    let run = first.create_run(review()).await.unwrap();
    let second = PgStore::connect_with(&url, options()).await.unwrap();
    assert_eq!(second.store_id(), first.store_id());
    assert_eq!(second.get_run(&run.id).await.unwrap(), Some(run));
    assert_eq!(PgStore::SCHEMA_VERSION, 2);
    // The URL shown in messages carries no password.
    assert!(!first.location().to_string().contains("@@"));
}

#[tokio::test]
async fn postgres_unreachable_server_is_a_typed_error_naming_the_redacted_url() {
    // Nothing listens on port 1.
    let err = PgStore::connect_with(
        "postgres://it:hunter2@127.0.0.1:1/iterion",
        PgOptions::default().connect_timeout(Duration::from_secs(2)),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), "STORE_UNREACHABLE");
    let message = err.to_string();
    assert!(
        message.contains("postgres://it@127.0.0.1:1/iterion"),
        "{message}"
    );
    assert!(!message.contains("hunter2"), "{message}");
}

#[tokio::test]
async fn open_store_picks_sqlite_for_a_home_directory() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path().to_str().unwrap()).await.unwrap();
    store.create_run(review()).await.unwrap();
    assert!(super::db_file(dir.path()).exists());
    let (memory, _) = memory_store().await;
    assert_ne!(memory.store_id(), store.store_id());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_runners_connecting_at_once_to_a_fresh_schema_migrate_it_once() {
    let Some(url) = postgres_url() else { return };
    let schema = fresh_schema();
    let clock = clock();
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let (url, schema, clock) = (url.clone(), schema.clone(), clock.clone());
            tokio::spawn(async move {
                let options = PgOptions::default()
                    .clock(Arc::new(clock))
                    .schema(&schema)
                    .unwrap();
                PgStore::connect_with(&url, options).await
            })
        })
        .collect();
    let mut ids = BTreeSet::new();
    for task in tasks {
        ids.insert(task.await.unwrap().unwrap().store_id().to_owned());
    }
    assert_eq!(ids.len(), 1, "one store id for one schema: {ids:?}");
}

#[test]
fn a_schema_name_that_is_not_a_plain_identifier_is_refused() {
    for bad in ["", "Public", "a-b", "1abc", "x\"; DROP TABLE runs; --"] {
        let err = PgOptions::default().schema(bad).unwrap_err();
        assert_eq!(err.code(), "STORE_UNSUPPORTED_URL", "{bad:?}");
    }
    assert!(PgOptions::default().schema("it_0190ab").is_ok());
}
