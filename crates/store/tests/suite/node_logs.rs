//! Node output (`node_logs`): chunks of lines per node and stream, with their own gap-free
//! sequence, filtered by node and stream, paged, and append-only.

use std::sync::Arc;
use std::time::Duration;

use iterion_store::{
    LogStream, ManualClock, NewNodeLog, NodeLog, NodeLogQuery, RunId, Store, Timestamp,
};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::{T0, clock, file_store, review};

fn view(chunks: &[NodeLog]) -> Vec<(u64, &str, LogStream, &str, bool)> {
    chunks
        .iter()
        .map(|c| {
            (
                c.seq,
                c.node.as_str(),
                c.stream,
                c.text.as_str(),
                c.truncated,
            )
        })
        .collect()
}

async fn node_output_is_numbered_apart_and_filtered_by_node_and_stream(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let run = store.create_run(review()).await.unwrap();
    // The other sequences do not move this one.
    store
        .append_event(
            &run.id,
            iterion_store::NewEvent::new("run_started", json!({})),
        )
        .await
        .unwrap();
    let range = store
        .append_node_logs(
            &run.id,
            vec![
                NewNodeLog::new("lint", LogStream::Stdout, "one\ntwo"),
                NewNodeLog::new("lint", LogStream::Stderr, "warn: x"),
            ],
        )
        .await
        .unwrap();
    assert_eq!(range, 1..3);
    clock.advance(Duration::from_millis(7));
    let range = store
        .append_node_logs(
            &run.id,
            vec![NewNodeLog::new("test", LogStream::Stdout, "ok").truncated()],
        )
        .await
        .unwrap();
    assert_eq!(range, 3..4);

    let all = store
        .node_logs(&run.id, &NodeLogQuery::default())
        .await
        .unwrap();
    assert_eq!(
        view(&all),
        vec![
            (1, "lint", LogStream::Stdout, "one\ntwo", false),
            (2, "lint", LogStream::Stderr, "warn: x", false),
            (3, "test", LogStream::Stdout, "ok", true),
        ]
    );
    assert_eq!(
        (all[0].ts, all[2].ts, all[0].run_id.clone()),
        (
            Timestamp::from_millis(T0),
            Timestamp::from_millis(T0 + 7),
            run.id.clone()
        )
    );
    assert_eq!(all[0].lines().collect::<Vec<_>>(), ["one", "two"]);

    let lint = store
        .node_logs(&run.id, &NodeLogQuery::default().node("lint"))
        .await
        .unwrap();
    assert_eq!(view(&lint), view(&all[..2]));
    let stdout = store
        .node_logs(&run.id, &NodeLogQuery::default().stream(LogStream::Stdout))
        .await
        .unwrap();
    assert_eq!(view(&stdout), vec![view(&all)[0], view(&all)[2]]);
    let lint_stderr = store
        .node_logs(
            &run.id,
            &NodeLogQuery::default()
                .node("lint")
                .stream(LogStream::Stderr),
        )
        .await
        .unwrap();
    assert_eq!(view(&lint_stderr), vec![view(&all)[1]]);
    let after = store
        .node_logs(&run.id, &NodeLogQuery::after(1))
        .await
        .unwrap();
    assert_eq!(view(&after), view(&all[1..]));
    let page = store
        .node_logs(
            &run.id,
            &NodeLogQuery {
                limit: 1,
                ..NodeLogQuery::after(1)
            },
        )
        .await
        .unwrap();
    assert_eq!(view(&page), vec![view(&all)[1]]);
    // A name that looks like SQL is only a name.
    let none = store
        .node_logs(&run.id, &NodeLogQuery::default().node("lint' OR '1'='1"))
        .await
        .unwrap();
    assert_eq!(none, []);
}

async fn node_output_of_an_unknown_run_is_not_found_to_write_and_empty_to_read(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    let ghost = RunId::generate();
    let err = store
        .append_node_logs(&ghost, vec![NewNodeLog::new("a", LogStream::Stdout, "x")])
        .await
        .unwrap_err();
    assert_eq!(err.code(), "STORE_RUN_NOT_FOUND");
    assert_eq!(
        store
            .node_logs(&ghost, &NodeLogQuery::default())
            .await
            .unwrap(),
        []
    );
    let run = store.create_run(review()).await.unwrap();
    assert_eq!(store.append_node_logs(&run.id, vec![]).await.unwrap(), 1..1);
}

on_both_backends!(
    node_output_is_numbered_apart_and_filtered_by_node_and_stream,
    node_output_of_an_unknown_run_is_not_found_to_write_and_empty_to_read,
);

#[tokio::test]
async fn stored_node_output_cannot_be_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let store = file_store(dir.path(), &clock()).await;
    let run = store.create_run(review()).await.unwrap();
    store
        .append_node_logs(&run.id, vec![NewNodeLog::new("a", LogStream::Stdout, "x")])
        .await
        .unwrap();
    drop(store);
    let raw = rusqlite::Connection::open(super::db_file(dir.path())).unwrap();
    let err = raw
        .execute("UPDATE node_logs SET text = 'forged'", [])
        .unwrap_err();
    assert!(err.to_string().contains("append-only"), "{err}");
}
