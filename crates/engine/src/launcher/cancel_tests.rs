use std::sync::Arc;
use std::time::Duration;

use iterion_store::{
    InitialStatus, NewEvent, NewRun, Run, RunStatus, SqliteOptions, SqliteStore, Store,
};
use pretty_assertions::assert_eq;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::*;

async fn store() -> Arc<SqliteStore> {
    Arc::new(
        SqliteStore::in_memory(SqliteOptions::default())
            .await
            .unwrap(),
    )
}

async fn run_in(store: &SqliteStore, new: NewRun, status: RunStatus) -> Run {
    let mut run = store.create_run(new).await.unwrap();
    if run.status != status {
        let version = run.version;
        run.status = status;
        if status.allows_failure() {
            run.failure_code = Some("EXECUTION_FAILED".into());
        }
        store.save_run(&run, version).await.unwrap();
    }
    store.get_run(&run.id).await.unwrap().unwrap()
}

fn new_run() -> NewRun {
    NewRun::new("w", "sha256:0", "/w.iter")
}

async fn kinds(store: &SqliteStore, run: &Run) -> Vec<(String, serde_json::Value)> {
    store
        .events(&run.id, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.kind, e.data))
        .collect()
}

#[tokio::test]
async fn a_run_that_is_over_is_refused_and_left_alone() {
    let store = store().await;
    for status in [RunStatus::Finished, RunStatus::Failed, RunStatus::Cancelled] {
        let run = run_in(&store, new_run(), status).await;
        let err = request_cancel(store.as_ref(), &run.id, "test")
            .await
            .unwrap_err();
        assert!(
            matches!(err, CancelError::Over { status: s, .. } if s == status),
            "{err}"
        );
        assert!(err.to_string().contains("nothing to cancel"), "{err}");
        assert_eq!(kinds(&store, &run).await, []);
        let after = store.get_run(&run.id).await.unwrap().unwrap();
        assert_eq!(after.version, run.version);
    }
    let missing = iterion_store::RunId::parse("0190a000-0000-7000-8000-00000000dead").unwrap();
    let err = request_cancel(store.as_ref(), &missing, "test")
        .await
        .unwrap_err();
    assert!(
        matches!(err, CancelError::Store(StoreError::RunNotFound { .. })),
        "{err}"
    );
}

#[tokio::test]
async fn a_run_nobody_executes_is_cancelled_at_once() {
    let store = store().await;
    for (new, status, phase) in [
        (
            new_run().status(InitialStatus::Queued),
            RunStatus::Queued,
            "queued",
        ),
        (new_run(), RunStatus::Paused, "execution"),
        (new_run(), RunStatus::FailedResumable, "execution"),
        // Running, but its process is gone (no lease).
        (new_run(), RunStatus::Running, "execution"),
    ] {
        let run = run_in(&store, new, status).await;
        let outcome = request_cancel(store.as_ref(), &run.id, "studio")
            .await
            .unwrap();
        let CancelOutcome::Cancelled(saved) = outcome else {
            panic!("{status}: {outcome:?}");
        };
        assert_eq!(saved.status, RunStatus::Cancelled, "{status}");
        assert_eq!(saved.failure_code.as_deref(), Some("CANCELLED"));
        assert!(saved.finished_at.is_some());
        assert_eq!(
            kinds(&store, &run).await,
            [
                ("cancel_requested".to_owned(), json!({"by": "studio"})),
                (
                    "run_cancelled".to_owned(),
                    json!({"reason": "the run was cancelled (by studio)", "phase": phase})
                ),
            ],
            "{status}"
        );
        // Twice: refused, it is over now.
        assert!(matches!(
            request_cancel(store.as_ref(), &run.id, "studio").await,
            Err(CancelError::Over { .. })
        ));
    }
}

#[tokio::test]
async fn a_leased_run_gets_a_request_its_watch_sees() {
    let store = store().await;
    let run = run_in(
        &store,
        new_run().lease("engine-a", Duration::from_secs(30)),
        RunStatus::Running,
    )
    .await;
    // An older attempt's request, then this attempt's run_started: not pending.
    for kind in [
        "run_started",
        "cancel_requested",
        "run_failed",
        "run_started",
    ] {
        store
            .append_event(&run.id, NewEvent::new(kind, json!({})))
            .await
            .unwrap();
    }
    let (requested, done) = (CancellationToken::new(), CancellationToken::new());
    CancelWatch::start(
        store.clone(),
        run.id.clone(),
        requested.clone(),
        done.clone(),
    );
    tokio::time::sleep(CANCEL_POLL * 3).await;
    assert!(!requested.is_cancelled(), "an older attempt's request");

    let outcome = request_cancel(store.as_ref(), &run.id, "iterion cancel")
        .await
        .unwrap();
    assert!(
        matches!(outcome, CancelOutcome::Requested(_)),
        "{outcome:?}"
    );
    // The run is left to its process: still running, one request recorded.
    let after = store.get_run(&run.id).await.unwrap().unwrap();
    assert_eq!(after.status, RunStatus::Running);
    assert_eq!(
        kinds(&store, &run).await.last().unwrap(),
        &(
            "cancel_requested".to_owned(),
            json!({"by": "iterion cancel"})
        )
    );
    tokio::time::timeout(CANCEL_POLL * 4, requested.cancelled())
        .await
        .expect("the watch saw the request");
    done.cancel();
}

#[tokio::test]
async fn the_watch_ends_with_its_attempt() {
    let store = store().await;
    let run = run_in(&store, new_run(), RunStatus::Running).await;
    let (requested, done) = (CancellationToken::new(), CancellationToken::new());
    CancelWatch::start(
        store.clone(),
        run.id.clone(),
        requested.clone(),
        done.clone(),
    );
    done.cancel();
    tokio::time::sleep(CANCEL_POLL).await;
    for kind in ["run_started", "cancel_requested"] {
        store
            .append_event(&run.id, NewEvent::new(kind, json!({})))
            .await
            .unwrap();
    }
    tokio::time::sleep(CANCEL_POLL * 3).await;
    assert!(!requested.is_cancelled());
}
