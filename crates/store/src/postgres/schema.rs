//! The PostgreSQL schema and its migrations.
//!
//! The schema version lives in `meta` (`key = 'schema_version'`). [`MIGRATIONS`] is append-only,
//! like SQLite's: step `i` takes the schema from version `i` to `i + 1`. All of a migration runs
//! in one transaction that first takes a transaction-scoped advisory lock, so runners starting
//! together against a fresh database apply each step exactly once (the others wait, then find
//! the work done). A version above `MIGRATIONS.len()` is refused ([`Error::SchemaTooNew`]).

use tokio_postgres::Client;

use super::ctx::Ctx;
use crate::error::{Error, Result};

/// The advisory lock key every iterion migration takes ("iterion" in ASCII).
const MIGRATION_LOCK: i64 = 0x0069_7465_7269_6f6e;

/// Version 1: the same tables as SQLite's version 1. Timestamps are unix milliseconds from the
/// store's clock (`*_ms BIGINT`), JSON columns hold text (so a value reads back byte for byte),
/// events and log lines are append-only by trigger as well as by the API, and run ids compare
/// bytewise (`COLLATE "C"`) whatever the database's locale, so ties in `list_runs` break as in
/// SQLite.
const V1: &str = r#"
CREATE TABLE runs (
    id                  TEXT COLLATE "C" PRIMARY KEY,
    workflow            TEXT NOT NULL,
    workflow_hash       TEXT NOT NULL,
    file_path           TEXT NOT NULL,
    status              TEXT NOT NULL,
    trust               TEXT NOT NULL,
    admission           TEXT,
    failure_code        TEXT,
    failure_message     TEXT,
    parent_run_id       TEXT COLLATE "C" REFERENCES runs (id),
    root_run_id         TEXT COLLATE "C" NOT NULL,
    worktree_path       TEXT,
    vars                TEXT NOT NULL,
    last_completed_node TEXT,
    checkpoint          TEXT,
    deliveries          BIGINT NOT NULL DEFAULT 0,
    available_at_ms     BIGINT,
    created_at_ms       BIGINT NOT NULL,
    updated_at_ms       BIGINT NOT NULL,
    finished_at_ms      BIGINT,
    version             BIGINT NOT NULL
);
CREATE INDEX runs_by_creation ON runs (created_at_ms DESC, id DESC);
CREATE INDEX runs_by_status ON runs (status, created_at_ms, id);
CREATE INDEX runs_by_parent ON runs (parent_run_id) WHERE parent_run_id IS NOT NULL;

CREATE TABLE events (
    run_id TEXT COLLATE "C" NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq    BIGINT NOT NULL,
    ts_ms  BIGINT NOT NULL,
    type   TEXT NOT NULL,
    data   TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE run_logs (
    run_id TEXT COLLATE "C" NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq    BIGINT NOT NULL,
    ts_ms  BIGINT NOT NULL,
    stream TEXT NOT NULL,
    line   TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE FUNCTION iterion_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION '% are append-only', TG_TABLE_NAME; END $$;
CREATE TRIGGER events_append_only BEFORE UPDATE ON events
    FOR EACH ROW EXECUTE FUNCTION iterion_append_only();
CREATE TRIGGER run_logs_append_only BEFORE UPDATE ON run_logs
    FOR EACH ROW EXECUTE FUNCTION iterion_append_only();

CREATE TABLE leases (
    run_id        TEXT COLLATE "C" PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    holder        TEXT NOT NULL,
    expires_at_ms BIGINT NOT NULL
);
"#;

/// Version 2: `node_logs`, as in SQLite's version 2 (one row per chunk of lines of one node's
/// stream; `truncated` marks the last chunk stored before the engine's bound).
const V2: &str = r#"
CREATE TABLE node_logs (
    run_id    TEXT COLLATE "C" NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq       BIGINT NOT NULL,
    ts_ms     BIGINT NOT NULL,
    node      TEXT NOT NULL,
    stream    TEXT NOT NULL,
    text      TEXT NOT NULL,
    truncated BOOLEAN NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE INDEX node_logs_by_node ON node_logs (run_id, node, seq);
CREATE TRIGGER node_logs_append_only BEFORE UPDATE ON node_logs
    FOR EACH ROW EXECUTE FUNCTION iterion_append_only();
"#;

/// The migration steps, oldest first. Append only.
pub(crate) const MIGRATIONS: &[&str] = &[V1, V2];

/// The schema version this build writes and reads.
pub(crate) const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Creates `schema` when given, brings the tables up to date and returns the store id — all in
/// one transaction under the migration lock.
pub(crate) async fn migrate(
    client: &mut Client,
    ctx: &Ctx,
    schema: Option<&str>,
    steps: &[&str],
) -> Result<String> {
    let op = "migrating the schema";
    let supported = i64::try_from(steps.len()).unwrap_or(i64::MAX);
    let tx = client.transaction().await.map_err(ctx.sql(op))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(ctx.sql(op))?;
    if let Some(schema) = schema {
        // `schema` is a checked identifier (PgOptions::schema), safe to quote into DDL.
        tx.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\""))
            .await
            .map_err(ctx.sql(op))?;
    }
    tx.batch_execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        .await
        .map_err(ctx.sql(op))?;
    let found: i64 = tx
        .query_opt("SELECT value FROM meta WHERE key = 'schema_version'", &[])
        .await
        .map_err(ctx.sql(op))?
        .map(|row| row.try_get::<_, String>(0))
        .transpose()
        .map_err(ctx.sql(op))?
        .map(|text| {
            text.parse::<i64>().map_err(|e| Error::CorruptRecord {
                db: ctx.db.clone(),
                column: "meta.value",
                key: "schema_version".into(),
                detail: e.to_string(),
            })
        })
        .transpose()?
        .unwrap_or(0);
    if found > supported {
        return Err(Error::SchemaTooNew {
            db: ctx.db.clone(),
            found,
            supported,
        });
    }
    for (index, step) in steps.iter().enumerate() {
        let from = i64::try_from(index).unwrap_or(i64::MAX);
        if from < found {
            continue;
        }
        tx.batch_execute(step).await.map_err(ctx.sql(op))?;
        tracing::debug!(db = %ctx.db, version = from + 1, "run store schema migrated");
    }
    tx.execute(
        "INSERT INTO meta (key, value) VALUES ('schema_version', $1) \
         ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
        &[&supported.max(found).to_string()],
    )
    .await
    .map_err(ctx.sql(op))?;
    let fresh = uuid::Uuid::now_v7().hyphenated().to_string();
    tx.execute(
        "INSERT INTO meta (key, value) VALUES ('store_id', $1) ON CONFLICT (key) DO NOTHING",
        &[&fresh],
    )
    .await
    .map_err(ctx.sql(op))?;
    let store_id: String = tx
        .query_one("SELECT value FROM meta WHERE key = 'store_id'", &[])
        .await
        .and_then(|row| row.try_get(0))
        .map_err(ctx.sql(op))?;
    tx.commit().await.map_err(ctx.sql(op))?;
    Ok(store_id)
}
