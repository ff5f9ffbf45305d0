//! Compare-and-swap: of two writers holding the same version, exactly one wins.

use std::sync::Arc;

use iterion_store::{
    Admission, AdmissionDecision, Error, Run, RunId, RunStatus, SqliteStore, Store, Timestamp,
};
use pretty_assertions::assert_eq;
use tokio::sync::Barrier;

use super::{T0, clock, file_store, memory_store, review};

fn denied() -> Admission {
    Admission {
        decision: AdmissionDecision::Denied,
        phase: "pre_model".into(),
        code: "untrusted_without_sandbox".into(),
        reason: "run refused: trust=untrusted requires a per-run sandbox".into(),
        checked_at: Timestamp::from_millis(T0),
    }
}

/// Both tasks load the run, wait for each other, then save different changes from the same
/// version. Returns the two outcomes, in task order.
async fn race(a: Arc<dyn Store>, b: Arc<dyn Store>, id: RunId) -> Vec<Result<u64, Error>> {
    let barrier = Arc::new(Barrier::new(2));
    let tasks = [(a, RunStatus::Paused), (b, RunStatus::Cancelled)].map(|(store, status)| {
        let (barrier, id) = (Arc::clone(&barrier), id.clone());
        tokio::spawn(async move {
            let mut run = store.get_run(&id).await.unwrap().unwrap();
            barrier.wait().await;
            run.status = status;
            store.save_run(&run, run.version).await
        })
    });
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await.unwrap());
    }
    outcomes
}

fn one_winner(outcomes: &[Result<u64, Error>], id: &RunId) -> usize {
    let winners: Vec<usize> = outcomes
        .iter()
        .enumerate()
        .filter_map(|(i, o)| o.is_ok().then_some(i))
        .collect();
    assert_eq!(winners.len(), 1, "{outcomes:?}");
    let winner = winners[0];
    assert_eq!(outcomes[winner].as_ref().ok(), Some(&2));
    match &outcomes[1 - winner] {
        Err(Error::Conflict {
            run_id,
            expected,
            actual,
        }) => assert_eq!((run_id, *expected, *actual), (id, 1, 2)),
        other => panic!("the loser should conflict: {other:?}"),
    }
    winner
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_saves_from_one_version_through_one_store_one_wins_and_one_conflicts() {
    let (store, _clock) = memory_store().await;
    let run = store.create_run(review()).await.unwrap();
    let store: Arc<dyn Store> = Arc::new(store);
    let outcomes = race(Arc::clone(&store), Arc::clone(&store), run.id.clone()).await;
    let winner = one_winner(&outcomes, &run.id);
    let stored = store.get_run(&run.id).await.unwrap().unwrap();
    let want = [RunStatus::Paused, RunStatus::Cancelled][winner];
    assert_eq!((stored.status, stored.version), (want, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_saves_from_one_version_through_two_connections_one_wins() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let a = file_store(dir.path(), &clock).await;
    let b = file_store(dir.path(), &clock).await;
    let run = a.create_run(review()).await.unwrap();
    let outcomes = race(Arc::new(a), Arc::new(b.clone()), run.id.clone()).await;
    one_winner(&outcomes, &run.id);
    assert_eq!(b.get_run(&run.id).await.unwrap().unwrap().version, 2);
}

/// The admission pattern of SANDBOX.md §10: on a conflict, reload, reapply, save again.
#[tokio::test]
async fn a_conflicted_writer_reloads_reapplies_and_wins_without_losing_the_other_change() {
    let (store, _clock) = memory_store().await;
    let run = store.create_run(review()).await.unwrap();
    let mut stale = run.clone();

    let mut other = run.clone();
    other.last_completed_node = Some("lint".into());
    store.save_run(&other, 1).await.unwrap();

    stale.admission = Some(denied());
    let err = store.save_run(&stale, stale.version).await.unwrap_err();
    assert_eq!(err.code(), "STORE_CONFLICT");

    let mut fresh: Run = store.get_run(&run.id).await.unwrap().unwrap();
    fresh.admission = Some(denied());
    assert_eq!(store.save_run(&fresh, fresh.version).await.unwrap(), 3);
    let stored = store.get_run(&run.id).await.unwrap().unwrap();
    assert_eq!(
        (stored.last_completed_node, stored.admission),
        (Some("lint".into()), Some(denied()))
    );
}

#[tokio::test]
async fn a_stale_version_conflicts_even_when_the_data_is_identical() {
    let (store, _clock) = memory_store().await;
    let run = store.create_run(review()).await.unwrap();
    store.save_run(&run, 1).await.unwrap();
    let err = store.save_run(&run, 1).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "run {} changed since it was loaded (expected version 1, found 2); reload it and \
             apply the change again",
            run.id
        )
    );
}

#[tokio::test]
async fn many_writers_each_retrying_on_conflict_all_land() {
    let (store, _clock) = memory_store().await;
    let store = Arc::new(store);
    let run = store.create_run(review()).await.unwrap();
    let writers = 8;
    let mut tasks = Vec::new();
    for n in 0..writers {
        let (store, id): (Arc<SqliteStore>, RunId) = (Arc::clone(&store), run.id.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let mut run = store.get_run(&id).await.unwrap().unwrap();
                run.vars.insert(format!("w{n}"), serde_json::json!(n));
                match store.save_run(&run, run.version).await {
                    Ok(_) => return,
                    Err(Error::Conflict { .. }) => tokio::task::yield_now().await,
                    Err(other) => panic!("{other:?}"),
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let stored = store.get_run(&run.id).await.unwrap().unwrap();
    let keys: Vec<&String> = stored.vars.keys().collect();
    assert_eq!(
        keys,
        (0..writers)
            .map(|n| format!("w{n}"))
            .collect::<Vec<_>>()
            .iter()
            .collect::<Vec<_>>()
    );
    assert_eq!(stored.version, 1 + writers);
}

/// A file store, one run, and a raw connection that can save "behind the store's back".
async fn contested() -> (tempfile::TempDir, SqliteStore, RunId, rusqlite::Connection) {
    let dir = tempfile::tempdir().unwrap();
    let store = super::file_store(dir.path(), &clock()).await;
    let run = store.create_run(review()).await.unwrap();
    let raw = rusqlite::Connection::open(super::db_file(dir.path())).unwrap();
    (dir, store, run.id, raw)
}

/// Each of the first `conflicts` applications of the change is raced by another writer.
fn racing_change(
    raw: rusqlite::Connection,
    conflicts: u32,
) -> (
    impl FnMut(&mut Run) + Send,
    Arc<std::sync::atomic::AtomicU32>,
) {
    use std::sync::atomic::{AtomicU32, Ordering};
    let calls = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&calls);
    let raw = std::sync::Mutex::new(raw);
    let change = move |run: &mut Run| {
        if counter.fetch_add(1, Ordering::SeqCst) < conflicts {
            raw.lock()
                .unwrap()
                .execute("UPDATE runs SET version = version + 1", [])
                .unwrap();
        }
        run.admission = Some(denied());
    };
    (change, calls)
}

#[tokio::test]
async fn update_run_survives_two_injected_conflicts_within_three_attempts() {
    let (_dir, store, id, raw) = contested().await;
    let (change, calls) = racing_change(raw, 2);
    let saved = iterion_store::update_run(&store, &id, 3, change)
        .await
        .unwrap();
    assert_eq!(
        (
            saved.admission,
            saved.version,
            calls.load(std::sync::atomic::Ordering::SeqCst)
        ),
        (Some(denied()), 4, 3)
    );
}

#[tokio::test]
async fn update_run_gives_up_with_the_conflict_after_three_injected_conflicts() {
    let (_dir, store, id, raw) = contested().await;
    let (change, calls) = racing_change(raw, 3);
    let err = iterion_store::update_run(&store, &id, 3, change)
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            Error::Conflict {
                expected: 3,
                actual: 4,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 3);
    assert_eq!(store.get_run(&id).await.unwrap().unwrap().admission, None);
}
