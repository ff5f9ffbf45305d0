//! Events and run logs: append-only, numbered 1, 2, 3, … per run with no gap, also when many
//! writers append at once.

use iterion_store::ManualClock;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use iterion_store::{
    Error, Event, LogLine, LogStream, NewEvent, NewLogLine, RunId, Store, Timestamp,
};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::{T0, clock, db_file, file_store, review};

async fn events_are_numbered_from_one_and_read_back_whole_and_in_order(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let run = store.create_run(review()).await.unwrap();
    let first = store
        .append_event(
            &run.id,
            NewEvent::new("run_started", json!({"workflow": "review"})),
        )
        .await
        .unwrap();
    clock.advance(Duration::from_millis(5));
    let range = store
        .append_events(
            &run.id,
            vec![
                NewEvent::new("node_started", json!({"node": "lint", "kind": "tool"})),
                NewEvent::new("node_finished", json!({"node": "lint", "duration_ms": 12})),
            ],
        )
        .await
        .unwrap();
    assert_eq!(range, 2..4);

    let event = |seq, ts_offset, kind: &str, data| Event {
        run_id: run.id.clone(),
        seq,
        ts: Timestamp::from_millis(T0 + ts_offset),
        kind: kind.into(),
        data,
    };
    let want = vec![
        event(1, 0, "run_started", json!({"workflow": "review"})),
        event(
            2,
            5,
            "node_started",
            json!({"node": "lint", "kind": "tool"}),
        ),
        event(
            3,
            5,
            "node_finished",
            json!({"node": "lint", "duration_ms": 12}),
        ),
    ];
    assert_eq!(first, want[0]);
    assert_eq!(store.events(&run.id, 0).await.unwrap(), want);
    assert_eq!(store.events(&run.id, 2).await.unwrap(), want[2..]);
    assert_eq!(store.events(&run.id, 3).await.unwrap(), []);
}

async fn an_empty_batch_appends_nothing_and_returns_an_empty_range(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    let run = store.create_run(review()).await.unwrap();
    store
        .append_event(&run.id, NewEvent::new("run_started", json!({})))
        .await
        .unwrap();
    assert_eq!(store.append_events(&run.id, vec![]).await.unwrap(), 2..2);
    assert_eq!(store.events(&run.id, 0).await.unwrap().len(), 1);
}

async fn each_run_has_its_own_sequence(store: Arc<dyn Store>, _clock: ManualClock) {
    let a = store.create_run(review()).await.unwrap();
    let b = store.create_run(review()).await.unwrap();
    for run in [&a, &b, &a] {
        store
            .append_event(&run.id, NewEvent::new("tick", json!(null)))
            .await
            .unwrap();
    }
    let seqs = |events: Vec<Event>| events.into_iter().map(|e| e.seq).collect::<Vec<_>>();
    assert_eq!(seqs(store.events(&a.id, 0).await.unwrap()), [1, 2]);
    assert_eq!(seqs(store.events(&b.id, 0).await.unwrap()), [1]);
}

async fn appending_to_an_unknown_run_is_not_found_and_reading_one_is_empty(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    let ghost = RunId::generate();
    let err = store
        .append_event(&ghost, NewEvent::new("tick", json!(1)))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::RunNotFound { run_id } if *run_id == ghost),
        "{err:?}"
    );
    let err = store
        .append_logs(&ghost, vec![NewLogLine::new(LogStream::System, "x")])
        .await
        .unwrap_err();
    assert_eq!(err.code(), "STORE_RUN_NOT_FOUND");
    assert_eq!(store.events(&ghost, 0).await.unwrap(), []);
    assert_eq!(store.logs(&ghost, 0).await.unwrap(), []);
}

/// Checks that `events` are numbered exactly 1..=n, and that each writer saw its own events
/// numbered in the order it appended them.
fn assert_gap_free_and_per_writer_monotonic(events: &[Event], n: u64) {
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=n).collect::<Vec<_>>());
    let mut per_writer: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for event in events {
        let writer = event.data["writer"].as_u64().unwrap();
        let index = event.data["index"].as_u64().unwrap();
        per_writer.entry(writer).or_default().push(index);
    }
    for (writer, indexes) in per_writer {
        let sorted = {
            let mut s = indexes.clone();
            s.sort_unstable();
            s
        };
        assert_eq!(indexes, sorted, "writer {writer}'s events are out of order");
    }
}

/// Each writer appends `per_writer` events, alternating single appends and batches of three.
async fn write_concurrently(stores: Vec<Arc<dyn Store>>, run_id: &RunId, per_writer: u64) {
    let mut tasks = Vec::new();
    for (writer, store) in (0_u64..).zip(stores) {
        let run_id = run_id.clone();
        tasks.push(tokio::spawn(async move {
            let mut index = 0;
            while index < per_writer {
                let event = |i: u64| NewEvent::new("tick", json!({"writer": writer, "index": i}));
                if index % 2 == 0 || index + 3 > per_writer {
                    store.append_event(&run_id, event(index)).await.unwrap();
                    index += 1;
                } else {
                    let batch = (index..index + 3).map(event).collect();
                    let range = store.append_events(&run_id, batch).await.unwrap();
                    assert_eq!(range.end - range.start, 3);
                    index += 3;
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}

async fn concurrent_appenders_on_one_store_get_gap_free_monotonic_seqs(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    let run = store.create_run(review()).await.unwrap();
    let writers = 8;
    let per_writer = 40;
    write_concurrently(vec![Arc::clone(&store); writers], &run.id, per_writer).await;
    let events = store.events(&run.id, 0).await.unwrap();
    assert_gap_free_and_per_writer_monotonic(&events, writers as u64 * per_writer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appenders_on_separate_connections_to_one_file_share_one_gap_free_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let mut stores: Vec<Arc<dyn Store>> = Vec::new();
    for _ in 0..4 {
        stores.push(Arc::new(file_store(dir.path(), &clock).await));
    }
    let run = stores[0].create_run(review()).await.unwrap();
    write_concurrently(stores.clone(), &run.id, 30).await;
    let events = stores[3].events(&run.id, 0).await.unwrap();
    assert_gap_free_and_per_writer_monotonic(&events, 4 * 30);
    assert!(db_file(dir.path()).exists());
}

#[tokio::test]
async fn stored_events_cannot_be_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let store = file_store(dir.path(), &clock()).await;
    let run = store.create_run(review()).await.unwrap();
    store
        .append_event(&run.id, NewEvent::new("run_started", json!({})))
        .await
        .unwrap();
    store
        .append_log(&run.id, LogStream::Stdout, "ok".into())
        .await
        .unwrap();
    let raw = rusqlite::Connection::open(db_file(dir.path())).unwrap();
    let err = raw
        .execute("UPDATE events SET type = 'forged'", [])
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "events are append-only",
        "the trigger refuses rewrites"
    );
    let err = raw
        .execute("UPDATE run_logs SET line = 'forged'", [])
        .unwrap_err();
    assert_eq!(err.to_string(), "run logs are append-only");
}

async fn log_lines_have_their_own_sequence_and_keep_their_stream(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let run = store.create_run(review()).await.unwrap();
    store
        .append_event(&run.id, NewEvent::new("run_started", json!({})))
        .await
        .unwrap();
    let first = store
        .append_log(&run.id, LogStream::System, "docker pull alpine:3".into())
        .await
        .unwrap();
    clock.advance(Duration::from_millis(1));
    let range = store
        .append_logs(
            &run.id,
            vec![
                NewLogLine::new(LogStream::Stdout, "ok"),
                NewLogLine::new(LogStream::Stderr, "warning: x"),
            ],
        )
        .await
        .unwrap();
    assert_eq!(range, 2..4);
    let line = |seq, ts_offset, stream, text: &str| LogLine {
        run_id: run.id.clone(),
        seq,
        ts: Timestamp::from_millis(T0 + ts_offset),
        stream,
        line: text.into(),
    };
    let want = vec![
        line(1, 0, LogStream::System, "docker pull alpine:3"),
        line(2, 1, LogStream::Stdout, "ok"),
        line(3, 1, LogStream::Stderr, "warning: x"),
    ];
    assert_eq!(first, want[0]);
    assert_eq!(store.logs(&run.id, 0).await.unwrap(), want);
    assert_eq!(store.logs(&run.id, 1).await.unwrap(), want[1..]);
}

on_both_backends!(
    events_are_numbered_from_one_and_read_back_whole_and_in_order,
    an_empty_batch_appends_nothing_and_returns_an_empty_range,
    each_run_has_its_own_sequence,
    appending_to_an_unknown_run_is_not_found_and_reading_one_is_empty,
    concurrent_appenders_on_one_store_get_gap_free_monotonic_seqs,
    log_lines_have_their_own_sequence_and_keep_their_stream,
);
