//! Opening the database file: creation, migrations, reopening, and the files we refuse — newer,
//! corrupt, locked.

use std::time::Duration;

use iterion_store::{DbLocation, Error, NewEvent, RunQuery, SqliteOptions, SqliteStore, Store};
use pretty_assertions::assert_eq;
use rusqlite::Connection;
use serde_json::json;

use super::{clock, db_file, file_store, options, review};

fn pragma_i64(conn: &Connection, name: &str) -> i64 {
    conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
        .unwrap()
}

#[tokio::test]
async fn a_fresh_home_gets_a_private_directory_a_private_file_and_the_latest_schema() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("nested").join(".iterion");
    let store = file_store(&home, &clock()).await;
    assert_eq!(store.location(), &DbLocation::File(db_file(&home)));

    let raw = Connection::open(db_file(&home)).unwrap();
    let journal: String = raw
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        (journal.as_str(), pragma_i64(&raw, "user_version")),
        ("wal", SqliteStore::SCHEMA_VERSION)
    );
    let tables: Vec<String> = raw
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert_eq!(
        tables,
        ["events", "leases", "meta", "node_logs", "run_logs", "runs"]
    );

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode(&home), mode(&db_file(&home))), (0o700, 0o600));
    }
}

#[tokio::test]
async fn reopening_keeps_the_data_and_the_store_id_and_migrates_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = clock();
    let (id, store_id) = {
        let store = file_store(tmp.path(), &clock).await;
        let run = store.create_run(review()).await.unwrap();
        store
            .append_event(&run.id, NewEvent::new("run_started", json!({})))
            .await
            .unwrap();
        (run.id, store.store_id().to_owned())
    };
    let again = file_store(tmp.path(), &clock).await;
    let third = file_store(tmp.path(), &clock).await;
    assert_eq!(
        (again.store_id(), third.store_id()),
        (store_id.as_str(), store_id.as_str())
    );
    assert_eq!(
        again.get_run(&id).await.unwrap().map(|r| r.id),
        Some(id.clone())
    );
    assert_eq!(again.events(&id, 0).await.unwrap().len(), 1);
    let raw = Connection::open(db_file(tmp.path())).unwrap();
    assert_eq!(
        pragma_i64(&raw, "user_version"),
        SqliteStore::SCHEMA_VERSION
    );
}

#[tokio::test]
async fn closing_does_not_checkpoint_and_the_next_open_reads_the_wal() {
    // No checkpoint at close (no fsync at every process exit): the commits stay in the WAL,
    // which the next open reads back; nothing is lost.
    let tmp = tempfile::tempdir().unwrap();
    let clock = clock();
    let wal = std::path::PathBuf::from(format!("{}-wal", db_file(tmp.path()).display()));
    let id = {
        let store = file_store(tmp.path(), &clock).await;
        let run = store.create_run(review()).await.unwrap();
        for n in 0..3 {
            store
                .append_event(&run.id, NewEvent::new("node_started", json!({ "n": n })))
                .await
                .unwrap();
        }
        run.id
    };
    let wal_len = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    assert!(
        wal_len > 0,
        "the store's WAL was checkpointed and truncated at close"
    );
    let again = file_store(tmp.path(), &clock).await;
    assert_eq!(again.events(&id, 0).await.unwrap().len(), 3);
}

#[tokio::test]
async fn two_stores_have_different_ids() {
    let a = SqliteStore::in_memory(SqliteOptions::default())
        .await
        .unwrap();
    let b = SqliteStore::in_memory(SqliteOptions::default())
        .await
        .unwrap();
    assert_ne!(a.store_id(), b.store_id());
    assert_eq!(a.list_runs(&RunQuery::default()).await.unwrap(), []);
}

#[tokio::test]
async fn a_database_from_a_newer_iterion_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    drop(file_store(tmp.path(), &clock()).await);
    let raw = Connection::open(db_file(tmp.path())).unwrap();
    raw.pragma_update(None, "user_version", 42).unwrap();
    drop(raw);

    let err = SqliteStore::open(db_file(tmp.path()), SqliteOptions::default())
        .await
        .unwrap_err();
    match err {
        Error::SchemaTooNew {
            db,
            found,
            supported,
        } => assert_eq!(
            (db, found, supported),
            (
                DbLocation::File(db_file(tmp.path())),
                42,
                SqliteStore::SCHEMA_VERSION
            )
        ),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_garbage_file_is_reported_corrupt_with_its_path_and_the_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let path = db_file(tmp.path());
    std::fs::write(
        &path,
        b"this is not an SQLite database, just bytes. ".repeat(200),
    )
    .unwrap();
    let err = SqliteStore::open(&path, SqliteOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "STORE_CORRUPT");
    let p = path.display();
    assert_eq!(
        err.to_string(),
        format!(
            "the run store {p} is corrupt (file is not a database); move it aside (e.g. `mv {p} \
             {p}.corrupt`) and iterion starts an empty store"
        )
    );
}

#[tokio::test]
async fn a_database_whose_pages_are_damaged_is_reported_corrupt() {
    let tmp = tempfile::tempdir().unwrap();
    let path = db_file(tmp.path());
    {
        let store = file_store(tmp.path(), &clock()).await;
        let run = store.create_run(review()).await.unwrap();
        let events = (0..500)
            .map(|i| NewEvent::new("tick", json!({"i": i, "pad": "x".repeat(200)})))
            .collect();
        store.append_events(&run.id, events).await.unwrap();
    }
    // Fold the WAL into the file, then overwrite everything after the header page.
    let raw = Connection::open(&path).unwrap();
    raw.pragma_update(None, "journal_mode", "DELETE").unwrap();
    drop(raw);
    let mut bytes = std::fs::read(&path).unwrap();
    assert!(bytes.len() > 8192, "the database should span several pages");
    for b in &mut bytes[4096..] {
        *b = 0xA5;
    }
    std::fs::write(&path, bytes).unwrap();

    let err = SqliteStore::open(&path, SqliteOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "STORE_CORRUPT", "{err}");
}

#[tokio::test]
async fn a_write_that_waits_past_the_busy_timeout_gets_a_locked_error() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = clock();
    let store = SqliteStore::open(
        db_file(tmp.path()),
        options(&clock).busy_timeout(Duration::from_millis(200)),
    )
    .await
    .unwrap();
    let run = store.create_run(review()).await.unwrap();

    // Another process holds the write lock and does not let go.
    let other = Connection::open(db_file(tmp.path())).unwrap();
    other.execute_batch("BEGIN EXCLUSIVE").unwrap();

    let err = store
        .append_event(&run.id, NewEvent::new("tick", json!({})))
        .await
        .unwrap_err();
    match &err {
        Error::Locked { db, busy_timeout } => assert_eq!(
            (db, *busy_timeout),
            (
                &DbLocation::File(db_file(tmp.path())),
                Duration::from_millis(200)
            )
        ),
        other => panic!("{other:?}"),
    }
    assert!(
        err.to_string().contains("is locked by another process"),
        "{err}"
    );

    // Once the other process lets go, the same store works again.
    other.execute_batch("COMMIT").unwrap();
    let event = store
        .append_event(&run.id, NewEvent::new("tick", json!({})))
        .await
        .unwrap();
    assert_eq!(event.seq, 1);
}

#[tokio::test]
async fn a_database_held_in_exclusive_locking_mode_cannot_even_be_opened() {
    let tmp = tempfile::tempdir().unwrap();
    drop(file_store(tmp.path(), &clock()).await);
    let other = Connection::open(db_file(tmp.path())).unwrap();
    other
        .execute_batch("PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE; COMMIT;")
        .unwrap();

    let err = SqliteStore::open(
        db_file(tmp.path()),
        SqliteOptions::default().busy_timeout(Duration::from_millis(100)),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), "STORE_LOCKED", "{err}");
    drop(other);
}

#[tokio::test]
async fn a_path_under_a_regular_file_cannot_be_opened() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("not-a-dir");
    std::fs::write(&file, b"").unwrap();
    let err = SqliteStore::open(file.join("iterion.db"), SqliteOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "STORE_CANNOT_OPEN", "{err}");
}
