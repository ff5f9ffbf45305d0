//! Runs: create, read, list, compare-and-swap save, and claiming from the queue.

use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::env::Env;
use super::leases;
use super::rows::{raw_run, run_exists};
use crate::codec::{NewRunRow, RUN_COLUMNS, fresh_run, lease_expiry, to_i64, to_u64};
use crate::error::{Error, Result};
use crate::model::{Claim, Lease, NewRun, Run, RunId, RunStatus, Trust};
use crate::removal::{TreeRow, check_removable, terminal_statuses_sql};
use crate::save_rules::{StoredRun, check_save, encode_for_save};
use crate::store::RunQuery;
use crate::time::Timestamp;

pub(crate) fn create(conn: &mut Connection, env: Env<'_>, new: NewRun) -> Result<Run> {
    let now = env.now();
    let NewRunRow {
        id,
        file_path,
        worktree_path,
        vars,
        status,
        lease_expiry,
    } = NewRunRow::encode(&new, now)?;

    let op = "creating a run";
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(env.sql(op))?;
    if run_exists(&tx, &id).map_err(env.sql(op))? {
        return Err(Error::RunExists { run_id: id });
    }
    // A child's root defaults to its parent's root; a run with no parent is its own root.
    let parent_root = match &new.parent_run_id {
        None => None,
        Some(parent) => {
            let found: Option<(String, String)> = tx
                .query_row(
                    "SELECT root_run_id, trust FROM runs WHERE id = ?1",
                    [parent.as_str()],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .optional()
                .map_err(env.sql(op))?;
            let Some((root, parent_trust)) = found else {
                return Err(Error::ParentNotFound {
                    run_id: id,
                    parent_run_id: parent.clone(),
                });
            };
            // Trust propagates to children (SANDBOX.md §10): never more trusted than the parent.
            if Trust::from_stored(&parent_trust) == Trust::Untrusted && new.trust == Trust::Trusted
            {
                return Err(Error::TrustRaised {
                    run_id: id,
                    parent_run_id: parent.clone(),
                });
            }
            let root = RunId::parse(&root).map_err(|e| Error::CorruptRecord {
                db: env.db().clone(),
                column: "runs.root_run_id",
                key: parent.to_string(),
                detail: e.to_string(),
            })?;
            Some(root)
        }
    };
    let root_run_id = new
        .root_run_id
        .clone()
        .or(parent_root)
        .unwrap_or_else(|| id.clone());
    tx.execute(
        "INSERT INTO runs (id, workflow, workflow_hash, file_path, status, trust, parent_run_id, \
         root_run_id, worktree_path, vars, created_at_ms, updated_at_ms, version) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11, 1)",
        params![
            id.as_str(),
            new.workflow,
            new.workflow_hash,
            file_path,
            status.as_str(),
            new.trust.as_str(),
            new.parent_run_id.as_ref().map(RunId::as_str),
            root_run_id.as_str(),
            worktree_path,
            vars,
            now.as_millis(),
        ],
    )
    .map_err(env.sql(op))?;
    if let (Some(lease), Some(expires_at)) = (&new.lease, lease_expiry) {
        leases::upsert(&tx, &id, &lease.holder, expires_at).map_err(env.sql(op))?;
    }
    tx.commit().map_err(env.sql(op))?;

    Ok(fresh_run(new, id, status, root_run_id, now))
}

pub(crate) fn get(conn: &Connection, env: Env<'_>, id: &RunId) -> Result<Option<Run>> {
    select_run(conn, env, id)
}

fn select_run(conn: &Connection, env: Env<'_>, id: &RunId) -> Result<Option<Run>> {
    let sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1");
    let raw = conn
        .prepare_cached(&sql)
        .and_then(|mut stmt| stmt.query_row([id.as_str()], raw_run).optional())
        .map_err(env.sql("reading a run"))?;
    raw.map(|raw| raw.decode(env.db())).transpose()
}

pub(crate) fn list(conn: &Connection, env: Env<'_>, query: RunQuery) -> Result<Vec<Run>> {
    let limit = i64::try_from(query.limit).unwrap_or(i64::MAX);
    let op = "listing runs";
    let top = if query.top_level {
        "parent_run_id IS NULL"
    } else {
        "1"
    };
    let sql = format!(
        "SELECT {RUN_COLUMNS} FROM runs WHERE (?1 IS NULL OR status = ?1) AND {top} \
         ORDER BY created_at_ms DESC, id DESC LIMIT ?2"
    );
    let status = query.status.map(RunStatus::as_str);
    query_runs(conn, env, op, &sql, params![status, limit])
}

fn query_runs(
    conn: &Connection,
    env: Env<'_>,
    op: &'static str,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<Run>> {
    let raws = conn
        .prepare_cached(sql)
        .and_then(|mut stmt| {
            stmt.query_map(params, raw_run)
                .and_then(Iterator::collect::<rusqlite::Result<Vec<_>>>)
        })
        .map_err(env.sql(op))?;
    raws.into_iter().map(|raw| raw.decode(env.db())).collect()
}

pub(crate) fn by_id_prefix(
    conn: &Connection,
    env: Env<'_>,
    prefix: &str,
    limit: usize,
) -> Result<Vec<Run>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    // substr, not LIKE: byte for byte, no wildcard in what a person typed.
    let sql = format!(
        "SELECT {RUN_COLUMNS} FROM runs WHERE substr(id, 1, length(?1)) = ?1 \
         ORDER BY created_at_ms DESC, id DESC LIMIT ?2"
    );
    query_runs(
        conn,
        env,
        "finding runs by id prefix",
        &sql,
        params![prefix, limit],
    )
}

pub(crate) fn finished_before(
    conn: &Connection,
    env: Env<'_>,
    before: Timestamp,
    limit: usize,
) -> Result<Vec<Run>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let terminal = terminal_statuses_sql();
    let sql = format!(
        "SELECT {RUN_COLUMNS} FROM runs WHERE parent_run_id IS NULL \
         AND status IN ({terminal}) AND finished_at_ms IS NOT NULL AND finished_at_ms < ?1 \
         ORDER BY finished_at_ms, id LIMIT ?2"
    );
    query_runs(
        conn,
        env,
        "listing finished runs",
        &sql,
        params![before.as_millis(), limit],
    )
}

/// The run `id` and every run below it, `id` first: `(id, status, lease holder, lease expiry)`.
const TREE_SQL: &str = "WITH RECURSIVE tree (id, depth) AS ( \
     SELECT id, 0 FROM runs WHERE id = ?1 \
     UNION ALL SELECT r.id, t.depth + 1 FROM runs AS r JOIN tree AS t ON r.parent_run_id = t.id) \
     SELECT r.id, r.status, l.holder, l.expires_at_ms FROM tree AS t JOIN runs AS r ON r.id = t.id \
     LEFT JOIN leases AS l ON l.run_id = r.id ORDER BY t.depth, r.id";

pub(crate) fn delete(conn: &mut Connection, env: Env<'_>, id: &RunId) -> Result<Vec<RunId>> {
    let op = "removing a run";
    let now = env.now();
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(env.sql(op))?;
    let rows: Vec<TreeRow> = tx
        .prepare_cached(TREE_SQL)
        .and_then(|mut stmt| {
            stmt.query_map([id.as_str()], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
            })
            .and_then(Iterator::collect)
        })
        .map_err(env.sql(op))?;
    let tree = check_removable(env.db(), id, rows, now)?;
    for run in tree.iter().rev() {
        // Children first: the parent reference has no cascade. Events, log lines and leases
        // cascade.
        tx.execute("DELETE FROM runs WHERE id = ?1", [run.as_str()])
            .map_err(env.sql(op))?;
    }
    tx.commit().map_err(env.sql(op))?;
    Ok(tree)
}

pub(crate) fn save(
    conn: &mut Connection,
    env: Env<'_>,
    run: &Run,
    expected_version: u64,
) -> Result<u64> {
    let id = &run.id;
    // Checks that need no database come first, outside the write lock.
    let encoded = encode_for_save(run)?;
    let op = "saving a run";
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(env.sql(op))?;
    let stored = tx
        .query_row(
            "SELECT version, status, workflow, workflow_hash, file_path, trust, parent_run_id, \
             root_run_id, finished_at_ms FROM runs WHERE id = ?1",
            [id.as_str()],
            |row| {
                Ok(StoredRun {
                    version: to_u64(row.get(0)?),
                    status: row.get(1)?,
                    workflow: row.get(2)?,
                    workflow_hash: row.get(3)?,
                    file_path: row.get(4)?,
                    trust: row.get(5)?,
                    parent_run_id: row.get(6)?,
                    root_run_id: row.get(7)?,
                    finished_at_ms: row.get(8)?,
                })
            },
        )
        .optional()
        .map_err(env.sql(op))?
        .ok_or_else(|| Error::RunNotFound { run_id: id.clone() })?;
    let now = env.now();
    let parse_status = |status: &str| {
        RunStatus::parse(status).ok_or_else(|| Error::CorruptRecord {
            db: env.db().clone(),
            column: "runs.status",
            key: id.to_string(),
            detail: format!("unknown status {status:?}"),
        })
    };
    let stamp = check_save(run, &encoded, expected_version, &stored, parse_status, now)?;
    tx.execute(
        "UPDATE runs SET status = ?2, admission = ?3, failure_code = ?4, failure_message = ?5, \
         worktree_path = ?6, vars = ?7, last_completed_node = ?8, checkpoint = ?9, \
         available_at_ms = ?10, updated_at_ms = ?11, finished_at_ms = ?12, version = ?13 \
         WHERE id = ?1",
        params![
            id.as_str(),
            run.status.as_str(),
            encoded.admission,
            run.failure_code,
            run.failure_message,
            encoded.worktree_path,
            encoded.vars,
            run.last_completed_node,
            encoded.checkpoint,
            run.available_at.map(|t| t.as_millis()),
            now.as_millis(),
            stamp.finished_at_ms,
            to_i64(stamp.new_version),
        ],
    )
    .map_err(env.sql(op))?;
    tx.commit().map_err(env.sql(op))?;
    Ok(stamp.new_version)
}

pub(crate) fn claim_next(
    conn: &mut Connection,
    env: Env<'_>,
    holder: &str,
    ttl: Duration,
) -> Result<Option<Claim>> {
    let now = env.now();
    let expires_at = lease_expiry(now, ttl)?;
    let op = "claiming a queued run";
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(env.sql(op))?;
    let next: Option<String> = tx
        .query_row(
            "SELECT id FROM runs AS r WHERE status = ?2 \
             AND (available_at_ms IS NULL OR available_at_ms <= ?1) \
             AND NOT EXISTS (SELECT 1 FROM leases AS l WHERE l.run_id = r.id AND l.expires_at_ms > ?1) \
             ORDER BY created_at_ms, id LIMIT 1",
            params![now.as_millis(), RunStatus::Queued.as_str()],
            |row| row.get(0),
        )
        .optional()
        .map_err(env.sql(op))?;
    let Some(raw_id) = next else {
        return Ok(None);
    };
    let run_id = RunId::parse(&raw_id).map_err(|e| Error::CorruptRecord {
        db: env.db().clone(),
        column: "runs.id",
        key: raw_id.clone(),
        detail: e.to_string(),
    })?;
    tx.execute(
        "UPDATE runs SET status = ?3, deliveries = deliveries + 1, available_at_ms = NULL, \
         updated_at_ms = ?2, finished_at_ms = NULL, version = version + 1 WHERE id = ?1",
        params![
            run_id.as_str(),
            now.as_millis(),
            RunStatus::Running.as_str()
        ],
    )
    .map_err(env.sql(op))?;
    leases::upsert(&tx, &run_id, holder, expires_at).map_err(env.sql(op))?;
    let run = select_run(&tx, env, &run_id)?.ok_or_else(|| Error::RunNotFound {
        run_id: run_id.clone(),
    })?;
    tx.commit().map_err(env.sql(op))?;
    Ok(Some(Claim {
        run,
        lease: Lease {
            run_id,
            holder: holder.to_owned(),
            expires_at,
        },
    }))
}
