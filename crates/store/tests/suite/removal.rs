//! Naming runs the way people do (prefixes, `last`), listing finished runs, and removing a run
//! tree: all of it or none of it.

use std::sync::Arc;
use std::time::Duration;

use iterion_store::{
    Error, InitialStatus, ManualClock, NewEvent, Run, RunId, RunStatus, Store, Timestamp,
    resolve_run,
};
use pretty_assertions::assert_eq;

use super::{T0, review};

fn id(text: &str) -> RunId {
    RunId::parse(text).unwrap()
}

async fn finish(store: &Arc<dyn Store>, run: &Run, status: RunStatus) -> Run {
    let mut next = store.get_run(&run.id).await.unwrap().unwrap();
    next.status = status;
    store.save_run(&next, next.version).await.unwrap();
    store.get_run(&run.id).await.unwrap().unwrap()
}

async fn prefixes_and_last_resolve_and_an_ambiguous_prefix_lists_its_candidates(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let a = id("0190b4c6-1d2e-7f00-8000-0000000000aa");
    let b = id("0190b4c6-1d2e-7f00-8000-0000000000ab");
    let c = id("0290b4c6-1d2e-7f00-8000-0000000000cc");
    for run in [&a, &b, &c] {
        store.create_run(review().id(run.clone())).await.unwrap();
        clock.advance(Duration::from_secs(1));
    }
    // A child created last is never `last`.
    let parent = store.get_run(&a).await.unwrap().unwrap();
    let child = store
        .create_run(
            review()
                .id(id("0190b4c6-1d2e-7f00-8000-0000000000ad"))
                .child_of(&parent),
        )
        .await
        .unwrap();

    assert_eq!(resolve_run(&*store, "last").await.unwrap(), c);
    assert_eq!(resolve_run(&*store, "02").await.unwrap(), c);
    assert_eq!(
        resolve_run(&*store, "0190B4C6-1D2E-7F00-8000-0000000000AB")
            .await
            .unwrap(),
        b
    );
    assert_eq!(
        resolve_run(&*store, "0190b4c61d2e7f0080000000000000ab")
            .await
            .unwrap(),
        b
    );
    assert_eq!(
        resolve_run(&*store, "0190b4c6-1d2e-7f00-8000-0000000000a")
            .await
            .map_err(|e| e.code()),
        Err("STORE_AMBIGUOUS_RUN_REF")
    );
    match resolve_run(&*store, "0190b4c6").await {
        Err(Error::AmbiguousRunRef {
            prefix,
            candidates,
            more,
        }) => {
            assert_eq!(prefix, "0190b4c6");
            // Newest first: the child is the newest.
            assert_eq!(candidates, vec![child.id.clone(), b.clone(), a.clone()]);
            assert_eq!(more, 0);
        }
        other => panic!("{other:?}"),
    }
    let codes = |r: Result<RunId, Error>| r.map_err(|e| e.code());
    assert_eq!(
        codes(resolve_run(&*store, "ff").await),
        Err("STORE_NO_RUN_MATCHES")
    );
    assert_eq!(
        codes(resolve_run(&*store, "0190b4c6-1d2e-7f00-8000-0000000000ff").await),
        Err("STORE_RUN_NOT_FOUND")
    );
    // Nothing that is not hex digits and `-` reaches a query: no wildcard, no path.
    for hostile in ["%", "_", "../x", "", "01' OR '1'='1", "lastx"] {
        assert_eq!(
            codes(resolve_run(&*store, hostile).await),
            Err("STORE_INVALID_RUN_REF"),
            "{hostile:?}"
        );
    }
}

async fn last_in_an_empty_store_matches_nothing(store: Arc<dyn Store>, _clock: ManualClock) {
    assert_eq!(
        resolve_run(&*store, "last").await.map_err(|e| e.code()),
        Err("STORE_NO_RUN_MATCHES")
    );
}

async fn finished_before_lists_old_terminal_top_level_runs_oldest_first(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let old = store.create_run(review()).await.unwrap();
    let old = finish(&store, &old, RunStatus::Finished).await;
    let parked = store.create_run(review()).await.unwrap();
    let _ = store.create_run(review().child_of(&parked)).await.unwrap();
    let parked = finish(&store, &parked, RunStatus::FailedResumable).await;
    let _running = store.create_run(review()).await.unwrap();
    let _queued = store
        .create_run(review().status(InitialStatus::Queued))
        .await
        .unwrap();
    clock.advance(Duration::from_secs(3600));
    let recent = store.create_run(review()).await.unwrap();
    let _recent = finish(&store, &recent, RunStatus::Failed).await;

    let cutoff = Timestamp::from_millis(T0 + 1_000);
    let found: Vec<RunId> = store
        .runs_finished_before(cutoff, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    let mut want = vec![old.id.clone(), parked.id.clone()];
    want.sort();
    let mut got = found.clone();
    got.sort();
    assert_eq!(got, want);
    assert_eq!(
        store.runs_finished_before(cutoff, 1).await.unwrap().len(),
        1
    );
}

async fn deleting_a_run_removes_its_tree_events_and_logs_and_nothing_else(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    let root = store.create_run(review()).await.unwrap();
    let child = store.create_run(review().child_of(&root)).await.unwrap();
    let grandchild = store.create_run(review().child_of(&child)).await.unwrap();
    let other = store.create_run(review()).await.unwrap();
    for run in [&root, &child, &grandchild, &other] {
        store
            .append_event(
                &run.id,
                NewEvent::new("node_started", serde_json::json!({})),
            )
            .await
            .unwrap();
        store
            .append_log(&run.id, iterion_store::LogStream::Stderr, "line".into())
            .await
            .unwrap();
        store
            .append_node_logs(
                &run.id,
                vec![iterion_store::NewNodeLog::new(
                    "a",
                    iterion_store::LogStream::Stdout,
                    "printed\n",
                )],
            )
            .await
            .unwrap();
    }
    for run in [&grandchild, &child, &root] {
        finish(&store, run, RunStatus::Finished).await;
    }

    let deleted = store.delete_run(&root.id).await.unwrap();
    assert_eq!(
        deleted,
        vec![root.id.clone(), child.id.clone(), grandchild.id.clone()]
    );
    for run in [&root, &child, &grandchild] {
        assert_eq!(store.get_run(&run.id).await.unwrap(), None);
        assert_eq!(store.events(&run.id, 0).await.unwrap().len(), 0);
        assert_eq!(store.logs(&run.id, 0).await.unwrap().len(), 0);
        assert_eq!(
            store
                .node_logs(&run.id, &iterion_store::NodeLogQuery::default())
                .await
                .unwrap()
                .len(),
            0
        );
    }
    assert_eq!(
        store
            .node_logs(&other.id, &iterion_store::NodeLogQuery::default())
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(store.get_run(&other.id).await.unwrap().is_some());
    assert_eq!(store.events(&other.id, 0).await.unwrap().len(), 1);
    assert_eq!(
        store.delete_run(&root.id).await.map_err(|e| e.code()),
        Err("STORE_RUN_NOT_FOUND")
    );
}

async fn a_tree_with_a_running_or_leased_run_is_refused_whole(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let root = store.create_run(review()).await.unwrap();
    let child = store.create_run(review().child_of(&root)).await.unwrap();
    finish(&store, &root, RunStatus::Paused).await;
    // The child still runs: nothing of the tree goes.
    match store.delete_run(&root.id).await {
        Err(Error::RunActive { run_id, status }) => {
            assert_eq!((run_id, status), (child.id.clone(), RunStatus::Running));
        }
        other => panic!("{other:?}"),
    }
    assert!(store.get_run(&root.id).await.unwrap().is_some());
    assert!(store.get_run(&child.id).await.unwrap().is_some());

    // A paused run whose lease is live is refused; once the lease lapses it goes.
    finish(&store, &child, RunStatus::Cancelled).await;
    store
        .acquire_lease(&root.id, "host:1", Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(
        store.delete_run(&root.id).await.map_err(|e| e.code()),
        Err("STORE_LEASE_HELD")
    );
    clock.advance(Duration::from_secs(31));
    assert_eq!(store.delete_run(&root.id).await.unwrap().len(), 2);

    let queued = store
        .create_run(review().status(InitialStatus::Queued))
        .await
        .unwrap();
    assert_eq!(
        store.delete_run(&queued.id).await.map_err(|e| e.code()),
        Err("STORE_RUN_ACTIVE")
    );
}

on_both_backends!(
    prefixes_and_last_resolve_and_an_ambiguous_prefix_lists_its_candidates,
    last_in_an_empty_store_matches_nothing,
    finished_before_lists_old_terminal_top_level_runs_oldest_first,
    deleting_a_run_removes_its_tree_events_and_logs_and_nothing_else,
    a_tree_with_a_running_or_leased_run_is_refused_whole,
);
