use std::time::Duration;

use pretty_assertions::assert_eq;

use super::*;
use crate::error::DbLocation;
use crate::time::SystemClock;

const STEPS: &[&str] = &[
    "CREATE TABLE a (x INTEGER) STRICT;",
    "CREATE TABLE b (y INTEGER) STRICT; INSERT INTO a VALUES (1);",
    "ALTER TABLE a ADD COLUMN z TEXT;",
];

fn with_env<T>(f: impl FnOnce(Env<'_>) -> T) -> T {
    let db = DbLocation::Memory;
    f(Env {
        db: &db,
        busy_timeout: Duration::from_millis(10),
        clock: &SystemClock,
    })
}

fn tables(conn: &Connection) -> Vec<String> {
    let mut stmt = conn
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
        .unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

#[test]
fn an_empty_database_gets_every_step_in_order() {
    let mut conn = Connection::open_in_memory().unwrap();
    let found = with_env(|env| migrate(&mut conn, env, STEPS)).unwrap();
    assert_eq!(found, 0);
    assert_eq!(user_version(&conn).unwrap(), 3);
    assert_eq!(tables(&conn), ["a", "b"]);
    let columns: Vec<String> = conn
        .prepare("SELECT name FROM pragma_table_info('a')")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert_eq!(columns, ["x", "z"]);
}

#[test]
fn a_partly_migrated_database_gets_only_the_missing_steps() {
    let mut conn = Connection::open_in_memory().unwrap();
    with_env(|env| migrate(&mut conn, env, &STEPS[..1])).unwrap();
    assert_eq!(user_version(&conn).unwrap(), 1);

    let found = with_env(|env| migrate(&mut conn, env, STEPS)).unwrap();
    assert_eq!(found, 1);
    assert_eq!(user_version(&conn).unwrap(), 3);
    // Step 2's insert ran exactly once.
    let rows: i64 = conn
        .query_row("SELECT COUNT(*) FROM a", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 1);
}

#[test]
fn migrating_an_up_to_date_database_changes_nothing() {
    let mut conn = Connection::open_in_memory().unwrap();
    with_env(|env| migrate(&mut conn, env, STEPS)).unwrap();
    let found = with_env(|env| migrate(&mut conn, env, STEPS)).unwrap();
    assert_eq!((found, user_version(&conn).unwrap()), (3, 3));
    let rows: i64 = conn
        .query_row("SELECT COUNT(*) FROM a", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 1);
}

#[test]
fn a_database_from_a_newer_iterion_is_refused_untouched() {
    let mut conn = Connection::open_in_memory().unwrap();
    conn.pragma_update(None, "user_version", 7).unwrap();
    let err = with_env(|env| migrate(&mut conn, env, STEPS)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the run store :memory: has schema version 7, newer than this iterion understands (3); \
         upgrade iterion, or point ITERION_HOME elsewhere"
    );
    assert_eq!(err.code(), "STORE_SCHEMA_TOO_NEW");
    assert_eq!(tables(&conn), Vec::<String>::new());
}

#[test]
fn a_failing_step_leaves_the_previous_version_in_place() {
    let mut conn = Connection::open_in_memory().unwrap();
    let broken = [
        STEPS[0],
        "CREATE TABLE c (w INTEGER) STRICT; THIS IS NOT SQL;",
    ];
    let err = with_env(|env| migrate(&mut conn, env, &broken)).unwrap_err();
    assert_eq!(err.code(), "STORE_BACKEND");
    assert_eq!(user_version(&conn).unwrap(), 1);
    assert_eq!(tables(&conn), ["a"]);
}

#[test]
fn the_store_id_is_made_once_and_kept() {
    let mut conn = Connection::open_in_memory().unwrap();
    with_env(|env| migrate(&mut conn, env, MIGRATIONS)).unwrap();
    let first = with_env(|env| ensure_store_id(&conn, env)).unwrap();
    let second = with_env(|env| ensure_store_id(&conn, env)).unwrap();
    assert_eq!(first, second);
    assert_eq!(uuid::Uuid::parse_str(&first).unwrap().get_version_num(), 7);
}

#[test]
fn the_shipped_schema_is_version_two() {
    assert_eq!(SCHEMA_VERSION, 2);
}

#[test]
fn a_version_one_database_gains_node_logs_and_keeps_its_rows() {
    let mut conn = Connection::open_in_memory().unwrap();
    with_env(|env| migrate(&mut conn, env, &MIGRATIONS[..1])).unwrap();
    conn.execute_batch(
        "INSERT INTO runs (id, workflow, workflow_hash, file_path, status, trust, root_run_id, \
         vars, created_at_ms, updated_at_ms, version) \
         VALUES ('r', 'w', 'h', 'f', 'running', 'trusted', 'r', '{}', 1, 1, 1);
         INSERT INTO run_logs VALUES ('r', 1, 1, 'system', 'kept');",
    )
    .unwrap();
    let found = with_env(|env| migrate(&mut conn, env, MIGRATIONS)).unwrap();
    assert_eq!(found, 1);
    assert!(tables(&conn).contains(&"node_logs".to_owned()));
    let kept: String = conn
        .query_row("SELECT line FROM run_logs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(kept, "kept");
}
