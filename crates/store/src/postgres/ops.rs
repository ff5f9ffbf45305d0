//! The store's operations in SQL: runs (create, read, list, CAS save, claim), events and log
//! lines (gap-free per run), and leases. Each write is one transaction.

use std::ops::Range;
use std::sync::LazyLock;
use std::time::Duration;

use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, GenericClient, Row};

use super::ctx::Ctx;
use crate::codec::{
    NODE_LOG_COLUMNS, NewRunRow, RUN_COLUMN_COUNT, RUN_COLUMNS, RawRun, Table, decode_log_line,
    decode_node_log, fresh_run, json_text, lease_expiry, to_i64, to_u64,
};
use crate::error::{Error, Result};
use crate::model::{
    Claim, Event, InvalidRunId, Lease, Liveness, LogLine, LogStream, NewEvent, NewLogLine,
    NewNodeLog, NewRun, NodeLog, NodeLogQuery, Run, RunId, RunStatus, Trust,
};
use crate::removal::{TreeRow, check_removable, terminal_statuses_sql};
use crate::save_rules::{StoredRun, check_save, encode_for_save};
use crate::store::RunQuery;
use crate::time::Timestamp;

fn raw_run(row: &Row) -> std::result::Result<RawRun, tokio_postgres::Error> {
    Ok(RawRun {
        id: row.try_get(0)?,
        workflow: row.try_get(1)?,
        workflow_hash: row.try_get(2)?,
        file_path: row.try_get(3)?,
        status: row.try_get(4)?,
        trust: row.try_get(5)?,
        admission: row.try_get(6)?,
        failure_code: row.try_get(7)?,
        failure_message: row.try_get(8)?,
        parent_run_id: row.try_get(9)?,
        root_run_id: row.try_get(10)?,
        worktree_path: row.try_get(11)?,
        vars: row.try_get(12)?,
        last_completed_node: row.try_get(13)?,
        checkpoint: row.try_get(14)?,
        deliveries: row.try_get(15)?,
        available_at_ms: row.try_get(16)?,
        created_at_ms: row.try_get(17)?,
        updated_at_ms: row.try_get(18)?,
        finished_at_ms: row.try_get(19)?,
        version: row.try_get(20)?,
    })
}

fn bad_id(ctx: &Ctx, column: &'static str, raw: &str, err: &InvalidRunId) -> Error {
    Error::CorruptRecord {
        db: ctx.db.clone(),
        column,
        key: raw.to_owned(),
        detail: err.to_string(),
    }
}

fn bad_status(ctx: &Ctx, run_id: &RunId, text: &str) -> Error {
    Error::CorruptRecord {
        db: ctx.db.clone(),
        column: "runs.status",
        key: run_id.to_string(),
        detail: format!("unknown status {text:?}"),
    }
}

async fn upsert_lease(
    client: &impl GenericClient,
    run_id: &RunId,
    holder: &str,
    expires_at: Timestamp,
) -> std::result::Result<u64, tokio_postgres::Error> {
    client
        .execute(
            "INSERT INTO leases (run_id, holder, expires_at_ms) VALUES ($1, $2, $3) \
             ON CONFLICT (run_id) DO UPDATE SET holder = EXCLUDED.holder, \
             expires_at_ms = EXCLUDED.expires_at_ms",
            &[&run_id.as_str(), &holder, &expires_at.as_millis()],
        )
        .await
}

/// How many runs one `claim_next_queued` tries before reporting an empty queue.
const CLAIM_ATTEMPTS: usize = 8;

/// Writes `holder`'s lease only when the run has none, when it lapsed (`expires_at_ms <= now`),
/// or when `holder` already holds it. Returns the rows written (0: someone else holds it). A
/// concurrent writer of the same lease makes this wait for its commit, then re-check.
async fn take_lease(
    client: &impl GenericClient,
    run_id: &str,
    holder: &str,
    expires_at: Timestamp,
    now: Timestamp,
) -> std::result::Result<u64, tokio_postgres::Error> {
    client
        .execute(
            "INSERT INTO leases (run_id, holder, expires_at_ms) VALUES ($1, $2, $3) \
             ON CONFLICT (run_id) DO UPDATE SET holder = EXCLUDED.holder, \
             expires_at_ms = EXCLUDED.expires_at_ms \
             WHERE leases.holder = EXCLUDED.holder OR leases.expires_at_ms <= $4",
            &[&run_id, &holder, &expires_at.as_millis(), &now.as_millis()],
        )
        .await
}

pub(crate) async fn create(client: &mut Client, ctx: &Ctx, new: NewRun) -> Result<Run> {
    let now = ctx.clock.now();
    let NewRunRow {
        id,
        file_path,
        worktree_path,
        vars,
        status,
        lease_expiry,
    } = NewRunRow::encode(&new, now)?;

    let op = "creating a run";
    let tx = client.transaction().await.map_err(ctx.sql(op))?;
    let exists = tx
        .query_opt("SELECT 1 FROM runs WHERE id = $1", &[&id.as_str()])
        .await
        .map_err(ctx.sql(op))?;
    if exists.is_some() {
        return Err(Error::RunExists { run_id: id });
    }
    let parent_root = match &new.parent_run_id {
        None => None,
        Some(parent) => {
            let found = tx
                .query_opt(
                    "SELECT root_run_id, trust FROM runs WHERE id = $1",
                    &[&parent.as_str()],
                )
                .await
                .map_err(ctx.sql(op))?;
            let Some(row) = found else {
                return Err(Error::ParentNotFound {
                    run_id: id,
                    parent_run_id: parent.clone(),
                });
            };
            let (root, parent_trust): (String, String) = (
                row.try_get(0).map_err(ctx.sql(op))?,
                row.try_get(1).map_err(ctx.sql(op))?,
            );
            // Trust propagates to children (SANDBOX.md §10): never more trusted than the parent.
            if Trust::from_stored(&parent_trust) == Trust::Untrusted && new.trust == Trust::Trusted
            {
                return Err(Error::TrustRaised {
                    run_id: id,
                    parent_run_id: parent.clone(),
                });
            }
            Some(
                RunId::parse(&root)
                    .map_err(|e| bad_id(ctx, "runs.root_run_id", parent.as_str(), &e))?,
            )
        }
    };
    let root_run_id = new
        .root_run_id
        .clone()
        .or(parent_root)
        .unwrap_or_else(|| id.clone());
    let inserted = tx
        .execute(
            "INSERT INTO runs (id, workflow, workflow_hash, file_path, status, trust, \
             parent_run_id, root_run_id, worktree_path, vars, created_at_ms, updated_at_ms, \
             version) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11, 1)",
            &[
                &id.as_str(),
                &new.workflow,
                &new.workflow_hash,
                &file_path,
                &status.as_str(),
                &new.trust.as_str(),
                &new.parent_run_id.as_ref().map(RunId::as_str),
                &root_run_id.as_str(),
                &worktree_path,
                &vars,
                &now.as_millis(),
            ],
        )
        .await;
    match inserted {
        // A concurrent create with the same id committed first.
        Err(err) if err.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
            return Err(Error::RunExists { run_id: id });
        }
        other => other.map_err(ctx.sql(op))?,
    };
    if let (Some(lease), Some(expires_at)) = (&new.lease, lease_expiry) {
        upsert_lease(&tx, &id, &lease.holder, expires_at)
            .await
            .map_err(ctx.sql(op))?;
    }
    tx.commit().await.map_err(ctx.sql(op))?;

    Ok(fresh_run(new, id, status, root_run_id, now))
}

pub(crate) async fn get(client: &impl GenericClient, ctx: &Ctx, id: &RunId) -> Result<Option<Run>> {
    let op = "reading a run";
    let sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = $1");
    let row = client
        .query_opt(&sql, &[&id.as_str()])
        .await
        .map_err(ctx.sql(op))?;
    row.map(|row| raw_run(&row).map_err(ctx.sql(op))?.decode(&ctx.db))
        .transpose()
}

pub(crate) async fn list(client: &Client, ctx: &Ctx, query: RunQuery) -> Result<Vec<Run>> {
    let limit = i64::try_from(query.limit).unwrap_or(i64::MAX);
    let top = if query.top_level {
        "parent_run_id IS NULL"
    } else {
        "TRUE"
    };
    let sql = format!(
        "SELECT {RUN_COLUMNS} FROM runs WHERE ($1::TEXT IS NULL OR status = $1) AND {top} \
         ORDER BY created_at_ms DESC, id DESC LIMIT $2"
    );
    let status = query.status.map(RunStatus::as_str);
    query_runs(client, ctx, "listing runs", &sql, &[&status, &limit]).await
}

async fn query_runs(
    client: &Client,
    ctx: &Ctx,
    op: &'static str,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Run>> {
    let rows = client.query(sql, params).await.map_err(ctx.sql(op))?;
    rows.iter()
        .map(|row| raw_run(row).map_err(ctx.sql(op))?.decode(&ctx.db))
        .collect()
}

pub(crate) async fn by_id_prefix(
    client: &Client,
    ctx: &Ctx,
    prefix: &str,
    limit: usize,
) -> Result<Vec<Run>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    // starts_with on the "C"-collated id: byte for byte, no wildcard in what a person typed.
    let sql = format!(
        "SELECT {RUN_COLUMNS} FROM runs WHERE starts_with(id, $1) \
         ORDER BY created_at_ms DESC, id DESC LIMIT $2"
    );
    query_runs(
        client,
        ctx,
        "finding runs by id prefix",
        &sql,
        &[&prefix, &limit],
    )
    .await
}

pub(crate) async fn finished_before(
    client: &Client,
    ctx: &Ctx,
    before: Timestamp,
    limit: usize,
) -> Result<Vec<Run>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let terminal = terminal_statuses_sql();
    let sql = format!(
        "SELECT {RUN_COLUMNS} FROM runs WHERE parent_run_id IS NULL \
         AND status IN ({terminal}) AND finished_at_ms IS NOT NULL AND finished_at_ms < $1 \
         ORDER BY finished_at_ms, id LIMIT $2"
    );
    query_runs(
        client,
        ctx,
        "listing finished runs",
        &sql,
        &[&before.as_millis(), &limit],
    )
    .await
}

/// The run `$1` and every run below it, `$1` first, locked against concurrent saves and claims.
const TREE_SQL: &str = "WITH RECURSIVE tree (id, depth) AS ( \
     SELECT id, 0 FROM runs WHERE id = $1 \
     UNION ALL SELECT r.id, t.depth + 1 FROM runs AS r JOIN tree AS t ON r.parent_run_id = t.id) \
     SELECT r.id, r.status, l.holder, l.expires_at_ms FROM tree AS t JOIN runs AS r ON r.id = t.id \
     LEFT JOIN leases AS l ON l.run_id = r.id ORDER BY t.depth, r.id FOR UPDATE OF r";

pub(crate) async fn delete(client: &mut Client, ctx: &Ctx, id: &RunId) -> Result<Vec<RunId>> {
    let op = "removing a run";
    let tx = client.transaction().await.map_err(ctx.sql(op))?;
    let rows = tx
        .query(TREE_SQL, &[&id.as_str()])
        .await
        .map_err(ctx.sql(op))?;
    let mut tree_rows: Vec<TreeRow> = Vec::with_capacity(rows.len());
    for row in &rows {
        tree_rows.push((
            row.try_get(0).map_err(ctx.sql(op))?,
            row.try_get(1).map_err(ctx.sql(op))?,
            row.try_get(2).map_err(ctx.sql(op))?,
            row.try_get(3).map_err(ctx.sql(op))?,
        ));
    }
    let tree = check_removable(&ctx.db, id, tree_rows, ctx.clock.now())?;
    let ids: Vec<&str> = tree.iter().map(RunId::as_str).collect();
    // One statement: the parent reference (no cascade) is checked at its end, when the whole
    // tree is gone. Events, log lines and leases cascade.
    tx.execute("DELETE FROM runs WHERE id = ANY($1)", &[&ids])
        .await
        .map_err(ctx.sql(op))?;
    tx.commit().await.map_err(ctx.sql(op))?;
    Ok(tree)
}

pub(crate) async fn save(
    client: &mut Client,
    ctx: &Ctx,
    run: &Run,
    expected_version: u64,
) -> Result<u64> {
    let id = &run.id;
    // Checks that need no database come first, before any lock.
    let encoded = encode_for_save(run)?;

    let op = "saving a run";
    let tx = client.transaction().await.map_err(ctx.sql(op))?;
    // The row lock makes read-check-write atomic against every other saver, claimer and
    // appender of this run.
    let row = tx
        .query_opt(
            "SELECT version, status, workflow, workflow_hash, file_path, trust, parent_run_id, \
             root_run_id, finished_at_ms FROM runs WHERE id = $1 FOR NO KEY UPDATE",
            &[&id.as_str()],
        )
        .await
        .map_err(ctx.sql(op))?
        .ok_or_else(|| Error::RunNotFound { run_id: id.clone() })?;
    let get_text = |i: usize| row.try_get::<_, String>(i).map_err(ctx.sql(op));
    let stored = StoredRun {
        version: to_u64(row.try_get(0).map_err(ctx.sql(op))?),
        status: get_text(1)?,
        workflow: get_text(2)?,
        workflow_hash: get_text(3)?,
        file_path: get_text(4)?,
        trust: get_text(5)?,
        parent_run_id: row.try_get(6).map_err(ctx.sql(op))?,
        root_run_id: get_text(7)?,
        finished_at_ms: row.try_get(8).map_err(ctx.sql(op))?,
    };
    let now = ctx.clock.now();
    let parse_status =
        |status: &str| RunStatus::parse(status).ok_or_else(|| bad_status(ctx, id, status));
    let stamp = check_save(run, &encoded, expected_version, &stored, parse_status, now)?;
    tx.execute(
        "UPDATE runs SET status = $2, admission = $3, failure_code = $4, failure_message = $5, \
         worktree_path = $6, vars = $7, last_completed_node = $8, checkpoint = $9, \
         available_at_ms = $10, updated_at_ms = $11, finished_at_ms = $12, version = $13 \
         WHERE id = $1",
        &[
            &id.as_str(),
            &run.status.as_str(),
            &encoded.admission,
            &run.failure_code,
            &run.failure_message,
            &encoded.worktree_path,
            &encoded.vars,
            &run.last_completed_node,
            &encoded.checkpoint,
            &run.available_at.map(Timestamp::as_millis),
            &now.as_millis(),
            &stamp.finished_at_ms,
            &to_i64(stamp.new_version),
        ],
    )
    .await
    .map_err(ctx.sql(op))?;
    tx.commit().await.map_err(ctx.sql(op))?;
    Ok(stamp.new_version)
}

pub(crate) async fn claim_next(
    client: &deadpool_postgres::ClientWrapper,
    ctx: &Ctx,
    holder: &str,
    ttl: Duration,
) -> Result<Option<Claim>> {
    let now = ctx.clock.now();
    let expires_at = lease_expiry(now, ttl)?;
    let op = "claiming a queued run";
    // One statement, so one round trip and one commit per claim (the queue's rate is bound by
    // them, BENCHMARKS.md "Run queue"):
    // - `next`: SKIP LOCKED passes over a run another claimer is taking right now instead of
    //   waiting for it. NO KEY UPDATE (FOR UPDATE's weaker form) still excludes other claimers
    //   and savers, but not the key-share lock a concurrent lease insert takes on the run row
    //   for its foreign key, so a claim and an acquire_lease on the same run cannot deadlock.
    // - `lease`: taken only if still free (take_lease's rule); an acquire_lease that committed
    //   since the snapshot wins, `claimed` is then empty, and the next run is tried.
    // - `claimed`: the run row as it is after the claim.
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "WITH next AS (\
             SELECT id FROM runs AS r WHERE status = $2 \
             AND (available_at_ms IS NULL OR available_at_ms <= $1) \
             AND NOT EXISTS (SELECT 1 FROM leases AS l \
                             WHERE l.run_id = r.id AND l.expires_at_ms > $1) \
             ORDER BY created_at_ms, id LIMIT 1 FOR NO KEY UPDATE OF r SKIP LOCKED), \
         lease AS (\
             INSERT INTO leases (run_id, holder, expires_at_ms) SELECT id, $3, $4 FROM next \
             ON CONFLICT (run_id) DO UPDATE SET holder = EXCLUDED.holder, \
             expires_at_ms = EXCLUDED.expires_at_ms \
             WHERE leases.holder = EXCLUDED.holder OR leases.expires_at_ms <= $1 \
             RETURNING run_id), \
         claimed AS (\
             UPDATE runs SET status = $5, deliveries = deliveries + 1, available_at_ms = NULL, \
             updated_at_ms = $1, finished_at_ms = NULL, version = version + 1 \
             FROM lease WHERE runs.id = lease.run_id RETURNING {RUN_COLUMNS}) \
         SELECT claimed.*, next.id FROM next LEFT JOIN claimed ON claimed.id = next.id"
        )
    });
    // Prepared once per pooled connection: an unprepared query costs a second round trip.
    let statement = client.prepare_cached(&SQL).await.map_err(ctx.sql(op))?;
    // The last column is the run `next` picked; the others are NULL when its lease was lost.
    let picked = RUN_COLUMN_COUNT;
    for _ in 0..CLAIM_ATTEMPTS {
        let row = client
            .query_opt(
                &statement,
                &[
                    &now.as_millis(),
                    &RunStatus::Queued.as_str(),
                    &holder,
                    &expires_at.as_millis(),
                    &RunStatus::Running.as_str(),
                ],
            )
            .await
            .map_err(ctx.sql(op))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let claimed: Option<String> = row.try_get(0).map_err(ctx.sql(op))?;
        if claimed.is_none() {
            let lost: String = row.try_get(picked).map_err(ctx.sql(op))?;
            tracing::debug!(run_id = %lost, "lease taken since the claim's snapshot; trying the next run");
            continue;
        }
        let run = raw_run(&row).map_err(ctx.sql(op))?.decode(&ctx.db)?;
        let run_id = run.id.clone();
        return Ok(Some(Claim {
            run,
            lease: Lease {
                run_id,
                holder: holder.to_owned(),
                expires_at,
            },
        }));
    }
    Ok(None)
}

/// The statement reading `table`'s last `seq` for a run.
fn max_seq_sql(table: Table) -> String {
    format!(
        "SELECT COALESCE(MAX(seq), 0) FROM {} WHERE run_id = $1",
        table.name()
    )
}

/// The statement inserting one row into `table`.
fn insert_sql(table: Table) -> String {
    format!(
        "INSERT INTO {} ({}) VALUES ($1, $2, $3, $4, $5)",
        table.name(),
        table.columns()
    )
}

/// Inserts `rows` after the run's last `seq` in one transaction, holding the run row's lock so
/// that appenders everywhere take turns. Returns the first `seq` used and the timestamp.
async fn append_rows(
    client: &mut Client,
    ctx: &Ctx,
    table: Table,
    run_id: &RunId,
    rows: &[(&str, &str)],
) -> Result<(u64, Timestamp)> {
    let op = table.op();
    let tx = client.transaction().await.map_err(ctx.sql(op))?;
    let (first, ts) = next_seq(&tx, ctx, table, run_id).await?;
    if !rows.is_empty() {
        let insert = tx.prepare(&insert_sql(table)).await.map_err(ctx.sql(op))?;
        for (offset, (a, b)) in (0_u64..).zip(rows) {
            let params: [&(dyn ToSql + Sync); 5] = [
                &run_id.as_str(),
                &to_i64(first + offset),
                &ts.as_millis(),
                a,
                b,
            ];
            tx.execute(&insert, &params).await.map_err(ctx.sql(op))?;
        }
    }
    tx.commit().await.map_err(ctx.sql(op))?;
    Ok((first, ts))
}

/// Inside `tx`: locks the run row (appenders everywhere take turns) and returns the next `seq`
/// of `table` for the run and the timestamp its rows get.
async fn next_seq(
    tx: &tokio_postgres::Transaction<'_>,
    ctx: &Ctx,
    table: Table,
    run_id: &RunId,
) -> Result<(u64, Timestamp)> {
    let op = table.op();
    let locked = tx
        .query_opt(
            "SELECT 1 FROM runs WHERE id = $1 FOR NO KEY UPDATE",
            &[&run_id.as_str()],
        )
        .await
        .map_err(ctx.sql(op))?;
    if locked.is_none() {
        return Err(Error::RunNotFound {
            run_id: run_id.clone(),
        });
    }
    let last: i64 = tx
        .query_one(&max_seq_sql(table), &[&run_id.as_str()])
        .await
        .and_then(|row| row.try_get(0))
        .map_err(ctx.sql(op))?;
    Ok((to_u64(last) + 1, ctx.clock.now()))
}

/// Appends `chunks` to the run's node log in one transaction.
pub(crate) async fn node_logs(
    client: &mut Client,
    ctx: &Ctx,
    run_id: &RunId,
    chunks: &[NewNodeLog],
) -> Result<Range<u64>> {
    let table = Table::NodeLogs;
    let op = table.op();
    let tx = client.transaction().await.map_err(ctx.sql(op))?;
    let (first, ts) = next_seq(&tx, ctx, table, run_id).await?;
    if !chunks.is_empty() {
        let sql = format!(
            "INSERT INTO {} ({}) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            table.name(),
            table.columns()
        );
        let insert = tx.prepare(&sql).await.map_err(ctx.sql(op))?;
        for (offset, chunk) in (0_u64..).zip(chunks) {
            let params: [&(dyn ToSql + Sync); 7] = [
                &run_id.as_str(),
                &to_i64(first + offset),
                &ts.as_millis(),
                &chunk.node,
                &chunk.stream.as_str(),
                &chunk.text,
                &chunk.truncated,
            ];
            tx.execute(&insert, &params).await.map_err(ctx.sql(op))?;
        }
    }
    tx.commit().await.map_err(ctx.sql(op))?;
    Ok(first..first + chunks.len() as u64)
}

pub(crate) async fn read_node_logs(
    client: &Client,
    ctx: &Ctx,
    run_id: &RunId,
    query: &NodeLogQuery,
) -> Result<Vec<NodeLog>> {
    let op = "reading node output";
    let sql = format!(
        "SELECT {NODE_LOG_COLUMNS} FROM node_logs WHERE run_id = $1 AND seq > $2 \
         AND ($3::TEXT IS NULL OR node = $3) AND ($4::TEXT IS NULL OR stream = $4) \
         ORDER BY seq LIMIT $5"
    );
    let node = query.node.as_deref();
    let stream = query.stream.map(LogStream::as_str);
    let limit = i64::try_from(query.limit).unwrap_or(i64::MAX);
    let rows = client
        .query(
            &sql,
            &[
                &run_id.as_str(),
                &to_i64(query.after_seq),
                &node,
                &stream,
                &limit,
            ],
        )
        .await
        .map_err(ctx.sql(op))?;
    rows.iter()
        .map(|row| {
            let raw = (
                row.try_get(0).map_err(ctx.sql(op))?,
                row.try_get(1).map_err(ctx.sql(op))?,
                row.try_get(2).map_err(ctx.sql(op))?,
                row.try_get(3).map_err(ctx.sql(op))?,
                row.try_get(4).map_err(ctx.sql(op))?,
                row.try_get(5).map_err(ctx.sql(op))?,
            );
            decode_node_log(&ctx.db, run_id, raw)
        })
        .collect()
}

pub(crate) async fn event(
    client: &mut Client,
    ctx: &Ctx,
    run_id: &RunId,
    event: NewEvent,
) -> Result<Event> {
    let data = json_text(run_id, "event data", &event.data)?;
    let rows = [(event.kind.as_str(), data.as_str())];
    let (seq, ts) = append_rows(client, ctx, Table::Events, run_id, &rows).await?;
    Ok(Event {
        run_id: run_id.clone(),
        seq,
        ts,
        kind: event.kind,
        data: event.data,
    })
}

pub(crate) async fn events(
    client: &mut Client,
    ctx: &Ctx,
    run_id: &RunId,
    events: &[NewEvent],
) -> Result<Range<u64>> {
    let encoded = events
        .iter()
        .map(|e| Ok((e.kind.as_str(), json_text(run_id, "event data", &e.data)?)))
        .collect::<Result<Vec<_>>>()?;
    let rows: Vec<(&str, &str)> = encoded
        .iter()
        .map(|(kind, data)| (*kind, data.as_str()))
        .collect();
    let (first, _) = append_rows(client, ctx, Table::Events, run_id, &rows).await?;
    Ok(first..first + events.len() as u64)
}

pub(crate) async fn log(
    client: &mut Client,
    ctx: &Ctx,
    run_id: &RunId,
    stream: LogStream,
    line: String,
) -> Result<LogLine> {
    let rows = [(stream.as_str(), line.as_str())];
    let (seq, ts) = append_rows(client, ctx, Table::RunLogs, run_id, &rows).await?;
    Ok(LogLine {
        run_id: run_id.clone(),
        seq,
        ts,
        stream,
        line,
    })
}

pub(crate) async fn logs(
    client: &mut Client,
    ctx: &Ctx,
    run_id: &RunId,
    lines: &[NewLogLine],
) -> Result<Range<u64>> {
    let rows: Vec<(&str, &str)> = lines
        .iter()
        .map(|l| (l.stream.as_str(), l.line.as_str()))
        .collect();
    let (first, _) = append_rows(client, ctx, Table::RunLogs, run_id, &rows).await?;
    Ok(first..first + lines.len() as u64)
}

pub(crate) async fn read_events(
    client: &Client,
    ctx: &Ctx,
    run_id: &RunId,
    after_seq: u64,
) -> Result<Vec<Event>> {
    let op = "reading events";
    let rows = client
        .query(
            "SELECT seq, ts_ms, type, data FROM events WHERE run_id = $1 AND seq > $2 ORDER BY seq",
            &[&run_id.as_str(), &to_i64(after_seq)],
        )
        .await
        .map_err(ctx.sql(op))?;
    rows.iter()
        .map(|row| {
            let seq: i64 = row.try_get(0).map_err(ctx.sql(op))?;
            let ts: i64 = row.try_get(1).map_err(ctx.sql(op))?;
            let kind: String = row.try_get(2).map_err(ctx.sql(op))?;
            let data: String = row.try_get(3).map_err(ctx.sql(op))?;
            let data = serde_json::from_str(&data).map_err(|e| Error::CorruptRecord {
                db: ctx.db.clone(),
                column: "events.data",
                key: format!("{run_id} #{seq}"),
                detail: e.to_string(),
            })?;
            Ok(Event {
                run_id: run_id.clone(),
                seq: to_u64(seq),
                ts: Timestamp::from_millis(ts),
                kind,
                data,
            })
        })
        .collect()
}

pub(crate) async fn read_logs(
    client: &Client,
    ctx: &Ctx,
    run_id: &RunId,
    after_seq: u64,
) -> Result<Vec<LogLine>> {
    let op = "reading log lines";
    let rows = client
        .query(
            "SELECT seq, ts_ms, stream, line FROM run_logs WHERE run_id = $1 AND seq > $2 \
             ORDER BY seq",
            &[&run_id.as_str(), &to_i64(after_seq)],
        )
        .await
        .map_err(ctx.sql(op))?;
    rows.iter()
        .map(|row| {
            let seq: i64 = row.try_get(0).map_err(ctx.sql(op))?;
            let ts: i64 = row.try_get(1).map_err(ctx.sql(op))?;
            let stream: String = row.try_get(2).map_err(ctx.sql(op))?;
            let line: String = row.try_get(3).map_err(ctx.sql(op))?;
            decode_log_line(&ctx.db, run_id, (seq, ts, stream, line))
        })
        .collect()
}

async fn current_lease(
    client: &impl GenericClient,
    ctx: &Ctx,
    op: &'static str,
    run_id: &RunId,
) -> Result<Option<(String, Timestamp)>> {
    let row = client
        .query_opt(
            "SELECT holder, expires_at_ms FROM leases WHERE run_id = $1",
            &[&run_id.as_str()],
        )
        .await
        .map_err(ctx.sql(op))?;
    row.map(|row| {
        Ok((
            row.try_get(0).map_err(ctx.sql(op))?,
            Timestamp::from_millis(row.try_get(1).map_err(ctx.sql(op))?),
        ))
    })
    .transpose()
}

pub(crate) async fn acquire(
    client: &mut Client,
    ctx: &Ctx,
    run_id: &RunId,
    holder: &str,
    ttl: Duration,
) -> Result<Lease> {
    let now = ctx.clock.now();
    let expires_at = lease_expiry(now, ttl)?;
    let op = "acquiring a lease";
    let tx = client.transaction().await.map_err(ctx.sql(op))?;
    let exists = tx
        .query_opt("SELECT 1 FROM runs WHERE id = $1", &[&run_id.as_str()])
        .await
        .map_err(ctx.sql(op))?;
    if exists.is_none() {
        return Err(Error::RunNotFound {
            run_id: run_id.clone(),
        });
    }
    // Taken only when free, lapsed, or already ours.
    let changed = take_lease(&tx, run_id.as_str(), holder, expires_at, now)
        .await
        .map_err(ctx.sql(op))?;
    if changed == 0 {
        let current = current_lease(&tx, ctx, op, run_id).await?;
        let (holder, expires_at) = current.unwrap_or((holder.to_owned(), expires_at));
        return Err(Error::LeaseHeld {
            run_id: run_id.clone(),
            holder,
            expires_at,
        });
    }
    tx.commit().await.map_err(ctx.sql(op))?;
    Ok(Lease {
        run_id: run_id.clone(),
        holder: holder.to_owned(),
        expires_at,
    })
}

pub(crate) async fn heartbeat(
    client: &Client,
    ctx: &Ctx,
    run_id: &RunId,
    holder: &str,
    ttl: Duration,
) -> Result<Lease> {
    let expires_at = lease_expiry(ctx.clock.now(), ttl)?;
    let changed = client
        .execute(
            "UPDATE leases SET expires_at_ms = $3 WHERE run_id = $1 AND holder = $2",
            &[&run_id.as_str(), &holder, &expires_at.as_millis()],
        )
        .await
        .map_err(ctx.sql("renewing a lease"))?;
    if changed == 0 {
        return Err(Error::LeaseLost {
            run_id: run_id.clone(),
            holder: holder.to_owned(),
        });
    }
    Ok(Lease {
        run_id: run_id.clone(),
        holder: holder.to_owned(),
        expires_at,
    })
}

pub(crate) async fn release(
    client: &Client,
    ctx: &Ctx,
    run_id: &RunId,
    holder: &str,
) -> Result<bool> {
    client
        .execute(
            "DELETE FROM leases WHERE run_id = $1 AND holder = $2",
            &[&run_id.as_str(), &holder],
        )
        .await
        .map(|changed| changed > 0)
        .map_err(ctx.sql("releasing a lease"))
}

pub(crate) async fn held(client: &Client, ctx: &Ctx, run_id: &RunId) -> Result<bool> {
    let now = ctx.clock.now();
    let lease = current_lease(client, ctx, "checking a lease", run_id).await?;
    Ok(lease.is_some_and(|(_, expires_at)| expires_at > now))
}

pub(crate) async fn liveness(client: &Client, ctx: &Ctx, run_id: &RunId) -> Result<Liveness> {
    let op = "checking a run's liveness";
    let now = ctx.clock.now();
    // One statement, so the lease and the status come from one snapshot.
    let row = client
        .query_opt(
            "SELECT r.status, l.holder, l.expires_at_ms FROM runs AS r \
             LEFT JOIN leases AS l ON l.run_id = r.id WHERE r.id = $1",
            &[&run_id.as_str()],
        )
        .await
        .map_err(ctx.sql(op))?;
    let Some(row) = row else {
        return Ok(Liveness::Absent);
    };
    let status: String = row.try_get(0).map_err(ctx.sql(op))?;
    let holder: Option<String> = row.try_get(1).map_err(ctx.sql(op))?;
    let expires_at: Option<i64> = row.try_get(2).map_err(ctx.sql(op))?;
    if let (Some(holder), Some(expires_at)) = (holder, expires_at.map(Timestamp::from_millis))
        && expires_at > now
    {
        return Ok(Liveness::Leased(Lease {
            run_id: run_id.clone(),
            holder,
            expires_at,
        }));
    }
    let status = RunStatus::parse(&status).ok_or_else(|| bad_status(ctx, run_id, &status))?;
    Ok(Liveness::Unleased { status })
}
