//! The SQLite schema and its migrations.
//!
//! The schema version is SQLite's `user_version`. [`MIGRATIONS`] is append-only: step `i`
//! (0-based) takes a database from version `i` to `i + 1`, and is never edited once shipped. Each
//! step runs in its own `BEGIN IMMEDIATE` transaction that first re-reads the version, so two
//! processes opening a fresh database at once apply each step exactly once. A database whose
//! version is above `MIGRATIONS.len()` was written by a newer iterion and is refused
//! ([`Error::SchemaTooNew`]) rather than guessed at.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

use super::env::Env;
use crate::error::{Error, Result};

/// Version 1: runs, events, run logs, leases, and the store's own metadata.
///
/// - `STRICT` tables: a value of the wrong type is an error, not a silent conversion.
/// - Events and log lines are append-only, enforced by triggers as well as by the API.
/// - Timestamps are unix milliseconds (`*_ms`); JSON columns hold text.
const V1: &str = "
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;

CREATE TABLE runs (
    id                  TEXT PRIMARY KEY,
    workflow            TEXT NOT NULL,
    workflow_hash       TEXT NOT NULL,
    file_path           TEXT NOT NULL,
    status              TEXT NOT NULL,
    trust               TEXT NOT NULL,
    admission           TEXT,
    failure_code        TEXT,
    failure_message     TEXT,
    parent_run_id       TEXT REFERENCES runs (id),
    root_run_id         TEXT NOT NULL,
    worktree_path       TEXT,
    vars                TEXT NOT NULL,
    last_completed_node TEXT,
    checkpoint          TEXT,
    deliveries          INTEGER NOT NULL DEFAULT 0,
    available_at_ms     INTEGER,
    created_at_ms       INTEGER NOT NULL,
    updated_at_ms       INTEGER NOT NULL,
    finished_at_ms      INTEGER,
    version             INTEGER NOT NULL
) STRICT;
CREATE INDEX runs_by_creation ON runs (created_at_ms DESC, id DESC);
CREATE INDEX runs_by_status ON runs (status, created_at_ms, id);
CREATE INDEX runs_by_parent ON runs (parent_run_id) WHERE parent_run_id IS NOT NULL;

CREATE TABLE events (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq    INTEGER NOT NULL,
    ts_ms  INTEGER NOT NULL,
    type   TEXT NOT NULL,
    data   TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) STRICT;
CREATE TRIGGER events_append_only BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;

CREATE TABLE run_logs (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq    INTEGER NOT NULL,
    ts_ms  INTEGER NOT NULL,
    stream TEXT NOT NULL,
    line   TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) STRICT;
CREATE TRIGGER run_logs_append_only BEFORE UPDATE ON run_logs
BEGIN SELECT RAISE(ABORT, 'run logs are append-only'); END;

CREATE TABLE leases (
    run_id        TEXT PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    holder        TEXT NOT NULL,
    expires_at_ms INTEGER NOT NULL
) STRICT;
";

/// Version 2: `node_logs`, what each node printed, per stream, in chunks of lines (issue 19).
/// A row holds one or more complete lines of one node's stream (the engine batches them);
/// `truncated = 1` marks the last chunk stored before the engine's bound for that node and
/// stream. Append-only like the other logs.
const V2: &str = "
CREATE TABLE node_logs (
    run_id    TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq       INTEGER NOT NULL,
    ts_ms     INTEGER NOT NULL,
    node      TEXT NOT NULL,
    stream    TEXT NOT NULL,
    text      TEXT NOT NULL,
    truncated INTEGER NOT NULL,
    PRIMARY KEY (run_id, seq)
) STRICT;
CREATE INDEX node_logs_by_node ON node_logs (run_id, node, seq);
CREATE TRIGGER node_logs_append_only BEFORE UPDATE ON node_logs
BEGIN SELECT RAISE(ABORT, 'node logs are append-only'); END;
";

/// The migration steps, oldest first. Append only.
pub(crate) const MIGRATIONS: &[&str] = &[V1, V2];

/// The schema version this build writes and reads.
pub(crate) const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// The database's schema version.
pub(crate) fn user_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("PRAGMA user_version", [], |row| row.get(0))
}

/// Brings the database up to `steps.len()`, one step per transaction. Returns the version it
/// found.
pub(crate) fn migrate(conn: &mut Connection, env: Env<'_>, steps: &[&str]) -> Result<i64> {
    let supported = i64::try_from(steps.len()).unwrap_or(i64::MAX);
    let found = user_version(conn).map_err(env.sql("reading the schema version"))?;
    if found > supported {
        return Err(env.schema_too_new(found, supported));
    }
    for (index, step) in steps.iter().enumerate() {
        let from = i64::try_from(index).unwrap_or(i64::MAX);
        if from < found {
            continue;
        }
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(env.sql("migrating the schema"))?;
        // Another process may have migrated while we waited for the write lock.
        let now = user_version(&tx).map_err(env.sql("migrating the schema"))?;
        if now > supported {
            return Err(env.schema_too_new(now, supported));
        }
        if now > from {
            continue;
        }
        tx.execute_batch(step)
            .and_then(|()| tx.pragma_update(None, "user_version", from + 1))
            .and_then(|()| tx.commit())
            .map_err(env.sql("migrating the schema"))?;
        tracing::debug!(db = %env.db, version = from + 1, "run store schema migrated");
    }
    Ok(found)
}

/// The store id, generated and recorded on first use.
pub(crate) fn ensure_store_id(conn: &Connection, env: Env<'_>) -> Result<String> {
    let read = |conn: &Connection| {
        conn.query_row("SELECT value FROM meta WHERE key = 'store_id'", [], |row| {
            row.get::<_, String>(0)
        })
        .optional()
    };
    if let Some(id) = read(conn).map_err(env.sql("reading the store id"))? {
        return Ok(id);
    }
    let fresh = uuid::Uuid::now_v7().hyphenated().to_string();
    // OR IGNORE: a concurrent opener may have won; then its id is the id.
    conn.execute(
        "INSERT OR IGNORE INTO meta (key, value) VALUES ('store_id', ?1)",
        [&fresh],
    )
    .map_err(env.sql("recording the store id"))?;
    let id = read(conn).map_err(env.sql("reading the store id"))?;
    Ok(id.unwrap_or(fresh))
}

impl Env<'_> {
    fn schema_too_new(self, found: i64, supported: i64) -> Error {
        Error::SchemaTooNew {
            db: self.db.clone(),
            found,
            supported,
        }
    }
}

#[cfg(test)]
#[path = "schema_tests.rs"]
mod tests;
