//! The fleet against a real store (SQLite, and PostgreSQL with `ITERION_IT_POSTGRES_URL`;
//! skipped without it, a failure under `ITERION_IT_DOCKER=1`): `submit` queues, two concurrent
//! workers take distinct runs and execute them to the end, and a run whose runner died (its
//! lease lapsed) is redelivered to a healthy worker.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use crate::suite::support::sqlite_store;
use iterion_engine::dsl::{CompileOptions, compile};
use iterion_engine::{
    Engine, LaunchOptions, NoObserver, RunRequest, WorkerOptions, redeliver_interrupted,
    run_worker, workflow_hash,
};
use iterion_sandbox::{Registry, SandboxFlag, Trust};
use iterion_store::{PgOptions, PgStore, RunId, RunQuery, RunStatus, Store};
use pretty_assertions::assert_eq;
use tokio_util::sync::CancellationToken;

const SRC: &str = "tool greet:\n  command: `echo '{\"ok\": true}'`\n\nworkflow fleet:\n  entry: greet\n  greet -> done\n";

#[allow(clippy::print_stderr)]
/// On the system clock: the lease test waits out a real 1 s lease.
async fn postgres() -> Option<Arc<dyn Store>> {
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
    let schema = format!("it_{}", RunId::generate().as_str().replace('-', ""));
    let options = PgOptions::default().schema(&schema).unwrap().pool_size(4);
    Some(Arc::new(
        PgStore::connect_with(&url, options).await.unwrap(),
    ))
}

fn engine(store: &Arc<dyn Store>, home: &std::path::Path) -> Engine {
    Engine::new(Arc::clone(store), home).with_registry(Registry::with_noop())
}

/// Writes the workflow and submits it `n` times.
async fn submit(engine: &Engine, ws: &std::path::Path, n: usize) -> BTreeSet<String> {
    let file = ws.join("fleet.iter");
    std::fs::write(&file, SRC).unwrap();
    let mut ids = BTreeSet::new();
    for _ in 0..n {
        let compiled = compile(SRC.as_bytes(), &CompileOptions::default());
        let run = engine
            .submit(RunRequest {
                workflow: compiled.workflow.unwrap(),
                workflow_hash: workflow_hash(SRC.as_bytes()),
                file_path: file.clone(),
                vars: serde_json::Map::new(),
                secrets: Vec::new(),
                trust: Trust::Trusted,
                options: LaunchOptions {
                    sandbox: Some(SandboxFlag::None),
                    cwd: ws.to_owned(),
                    ..LaunchOptions::default()
                },
            })
            .await
            .unwrap();
        assert_eq!(run.status, RunStatus::Queued);
        ids.insert(run.id.as_str().to_owned());
    }
    ids
}

async fn statuses(store: &dyn Store) -> Vec<RunStatus> {
    store
        .list_runs(&RunQuery::newest(100))
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.status)
        .collect()
}

async fn two_workers_take_distinct_runs(store: Arc<dyn Store>) {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let engine = Arc::new(engine(&store, home.path()));
    let submitted = submit(&engine, ws.path(), 6).await;
    let shutdown = CancellationToken::new();
    let worker = |name: &str| {
        let (engine, shutdown) = (Arc::clone(&engine), shutdown.clone());
        let mut options = WorkerOptions::new(name);
        options.poll_interval = Duration::from_millis(20);
        tokio::spawn(
            async move { run_worker(&engine, &options, shutdown, Arc::new(NoObserver)).await },
        )
    };
    let (a, b) = (worker("runner-a"), worker("runner-b"));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while statuses(store.as_ref())
        .await
        .iter()
        .any(|s| *s != RunStatus::Finished)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:?}",
            statuses(store.as_ref()).await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    shutdown.cancel();
    let (a, b) = (a.await.unwrap(), b.await.unwrap());
    let taken_a: BTreeSet<String> = a.taken.iter().cloned().collect();
    let taken_b: BTreeSet<String> = b.taken.iter().cloned().collect();
    assert_eq!(
        (
            taken_a.len() + taken_b.len(),
            taken_a.intersection(&taken_b).count(),
            taken_a.union(&taken_b).cloned().collect::<BTreeSet<_>>()
        ),
        (6, 0, submitted),
        "every run taken exactly once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_two_workers_take_distinct_runs_on_sqlite_store() {
    let dir = tempfile::tempdir().unwrap();
    two_workers_take_distinct_runs(sqlite_store(dir.path()).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_two_workers_take_distinct_runs_on_postgres() {
    if let Some(store) = postgres().await {
        two_workers_take_distinct_runs(store).await;
    }
}

async fn lease_expiry_redelivers(store: Arc<dyn Store>) {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let engine = engine(&store, home.path());
    let submitted = submit(&engine, ws.path(), 1).await;
    // A runner claims the run with a short lease, then dies: no heartbeat, no settle.
    let claim = store
        .claim_next_queued("runner-dead", Duration::from_secs(1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claim.run.deliveries, 1);
    // While the lease is held, nothing is redelivered.
    assert_eq!(
        redeliver_interrupted(store.as_ref()).await,
        Vec::<String>::new()
    );
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    // A healthy runner notices the lapsed lease, requeues, and runs it to the end.
    let mut options = WorkerOptions::new("runner-healthy");
    options.poll_interval = Duration::from_millis(20);
    options.max_runs = Some(1);
    let report = tokio::time::timeout(
        Duration::from_secs(60),
        run_worker(
            &engine,
            &options,
            CancellationToken::new(),
            Arc::new(NoObserver),
        ),
    )
    .await
    .expect("the healthy runner takes the run within 60 s");
    assert_eq!(
        report.taken.iter().cloned().collect::<BTreeSet<_>>(),
        submitted
    );
    let run = store.get_run(&claim.run.id).await.unwrap().unwrap();
    assert_eq!((run.status, run.deliveries), (RunStatus::Finished, 2));
    let kinds: Vec<String> = store
        .events(&claim.run.id, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .filter(|k| k == "run_failed" || k == "run_finished")
        .collect();
    assert_eq!(
        kinds,
        vec!["run_failed".to_owned(), "run_finished".to_owned()]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_lease_expiry_redelivers_to_a_healthy_runner_on_sqlite_store() {
    let dir = tempfile::tempdir().unwrap();
    lease_expiry_redelivers(sqlite_store(dir.path()).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_lease_expiry_redelivers_to_a_healthy_runner_on_postgres() {
    if let Some(store) = postgres().await {
        lease_expiry_redelivers(store).await;
    }
}

const SLOW: &str =
    "tool wait:\n  command: `sleep 30`\n\nworkflow slow:\n  entry: wait\n  wait -> done\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_shutdown_interrupts_the_run_in_hand_and_redelivers_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite_store(dir.path()).await;
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let engine = Arc::new(engine(&store, home.path()));
    let file = ws.path().join("slow.iter");
    std::fs::write(&file, SLOW).unwrap();
    let compiled = compile(SLOW.as_bytes(), &CompileOptions::default());
    let run = engine
        .submit(RunRequest {
            workflow: compiled.workflow.unwrap(),
            workflow_hash: workflow_hash(SLOW.as_bytes()),
            file_path: file,
            vars: serde_json::Map::new(),
            secrets: Vec::new(),
            trust: Trust::Trusted,
            options: LaunchOptions {
                sandbox: Some(SandboxFlag::None),
                cwd: ws.path().to_owned(),
                ..LaunchOptions::default()
            },
        })
        .await
        .unwrap();
    let shutdown = CancellationToken::new();
    let worker = {
        let (engine, shutdown) = (Arc::clone(&engine), shutdown.clone());
        let mut options = WorkerOptions::new("runner-a");
        options.poll_interval = Duration::from_millis(20);
        tokio::spawn(
            async move { run_worker(&engine, &options, shutdown, Arc::new(NoObserver)).await },
        )
    };
    // Wait until the tool node runs, then shut the runner down (SIGTERM in `iterion runner`).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let events = store.events(&run.id, 0).await.unwrap();
        if events.iter().any(|e| e.kind == "node_started") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the node never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    shutdown.cancel();
    let report = tokio::time::timeout(Duration::from_secs(20), worker)
        .await
        .expect("the worker stops promptly")
        .unwrap();
    assert_eq!((report.taken.len(), report.redelivered), (1, 1));
    let after = store.get_run(&run.id).await.unwrap().unwrap();
    assert_eq!(
        (after.status, after.deliveries, after.failure_code),
        (RunStatus::Queued, 1, None)
    );
    let failed: Vec<serde_json::Value> = store
        .events(&run.id, 0)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "run_failed")
        .map(|e| e.data["code"].clone())
        .collect();
    assert_eq!(failed, vec![serde_json::json!("INTERRUPTED")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_requeues_an_interrupted_queue_run_but_never_a_local_one_or_a_child() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite_store(dir.path()).await;
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let engine = engine(&store, home.path());
    submit(&engine, ws.path(), 1).await;
    // A queue run another process's boot recovery already moved (delivered once).
    let claim = store
        .claim_next_queued("runner-dead", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    // A local `iterion run` that was interrupted (never delivered).
    let local = store
        .create_run(
            iterion_store::NewRun::new("local", "sha256:00", "local.iter")
                .lease("laptop", Duration::from_secs(30)),
        )
        .await
        .unwrap();
    // A subbot child of the queue run, interrupted with it: its parent's redelivery runs the
    // subbot node again, so the child itself is never requeued.
    let child = store
        .create_run(
            iterion_store::NewRun::new("child", "sha256:01", "child.iter")
                .child_of(&claim.run)
                .lease("runner-dead", Duration::from_secs(30)),
        )
        .await
        .unwrap();
    for (run, holder) in [
        (&claim.run, "runner-dead"),
        (&local, "laptop"),
        (&child, "runner-dead"),
    ] {
        let mut next = run.clone();
        next.status = RunStatus::FailedResumable;
        next.failure_code = Some("INTERRUPTED".to_owned());
        store.save_run(&next, run.version).await.unwrap();
        store.release_lease(&run.id, holder).await.unwrap();
    }
    let redelivered = redeliver_interrupted(store.as_ref()).await;
    assert_eq!(redelivered, vec![claim.run.id.as_str().to_owned()]);
    let status = |id| {
        let store = Arc::clone(&store);
        async move { store.get_run(&id).await.unwrap().unwrap().status }
    };
    assert_eq!(
        (
            status(claim.run.id.clone()).await,
            status(local.id.clone()).await,
            status(child.id.clone()).await
        ),
        (
            RunStatus::Queued,
            RunStatus::FailedResumable,
            RunStatus::FailedResumable
        )
    );
}
