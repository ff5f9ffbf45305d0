//! Events and log lines: append-only, numbered per run.
//!
//! Sequence numbers are `MAX(seq) + 1` read inside the `BEGIN IMMEDIATE` transaction that
//! inserts: the write lock serialises appenders (threads and processes alike), so numbers are
//! gap-free and follow commit order. The `(run_id, seq)` primary key makes `MAX` an index probe.
//! (PostgreSQL will lock the run row, `SELECT … FOR UPDATE`, for the same effect; a database
//! sequence would leave gaps.)

use std::ops::Range;

use rusqlite::{Connection, Transaction, TransactionBehavior, params};

use super::env::Env;
use crate::codec::{
    NODE_LOG_COLUMNS, Table, decode_log_line, decode_node_log, from_json, json_text, to_i64, to_u64,
};
use crate::error::{Error, Result};
use crate::model::{
    Event, LogLine, LogStream, NewEvent, NewLogLine, NewNodeLog, NodeLog, NodeLogQuery, RunId,
};
use crate::time::Timestamp;

/// The statement reading whether the run exists and `table`'s last `seq` for it.
fn max_seq_sql(table: Table) -> String {
    format!(
        "SELECT (SELECT 1 FROM runs WHERE id = ?1), \
         (SELECT COALESCE(MAX(seq), 0) FROM {} WHERE run_id = ?1)",
        table.name()
    )
}

/// The statement inserting one row into `table`.
fn insert_sql(table: Table) -> String {
    format!(
        "INSERT INTO {} ({}) VALUES (?1, ?2, ?3, ?4, ?5)",
        table.name(),
        table.columns()
    )
}

/// Inserts `rows` (two text columns each) after the run's last `seq`, in one transaction.
/// Returns the first `seq` used and the timestamp given to all of them.
fn append_rows<'r>(
    conn: &mut Connection,
    env: Env<'_>,
    table: Table,
    run_id: &RunId,
    rows: impl Iterator<Item = (&'r str, &'r str)>,
) -> Result<(u64, Timestamp)> {
    let op = table.op();
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(env.sql(op))?;
    let last = last_seq(&tx, table, run_id).map_err(env.sql(op))?;
    let Some(last) = last else {
        return Err(Error::RunNotFound {
            run_id: run_id.clone(),
        });
    };
    let ts = env.now();
    let first = last + 1;
    {
        let mut insert = tx.prepare_cached(&insert_sql(table)).map_err(env.sql(op))?;
        for (offset, (a, b)) in (0_u64..).zip(rows) {
            insert
                .execute(params![
                    run_id.as_str(),
                    to_i64(first + offset),
                    ts.as_millis(),
                    a,
                    b
                ])
                .map_err(env.sql(op))?;
        }
    }
    tx.commit().map_err(env.sql(op))?;
    Ok((first, ts))
}

/// The run's last `seq`, or `None` when the run does not exist (one statement for both).
fn last_seq(tx: &Transaction<'_>, table: Table, run_id: &RunId) -> rusqlite::Result<Option<u64>> {
    let (exists, max): (Option<i64>, i64) = tx
        .prepare_cached(&max_seq_sql(table))?
        .query_row([run_id.as_str()], |row| Ok((row.get(0)?, row.get(1)?)))?;
    Ok(exists.map(|_| to_u64(max)))
}

pub(crate) fn event(
    conn: &mut Connection,
    env: Env<'_>,
    run_id: RunId,
    event: NewEvent,
) -> Result<Event> {
    let data = json_text(&run_id, "event data", &event.data)?;
    let rows = std::iter::once((event.kind.as_str(), data.as_str()));
    let (seq, ts) = append_rows(conn, env, Table::Events, &run_id, rows)?;
    Ok(Event {
        run_id,
        seq,
        ts,
        kind: event.kind,
        data: event.data,
    })
}

pub(crate) fn events(
    conn: &mut Connection,
    env: Env<'_>,
    run_id: &RunId,
    events: &[NewEvent],
) -> Result<Range<u64>> {
    // Encoded before the write lock is taken.
    let encoded = events
        .iter()
        .map(|e| Ok((e.kind.as_str(), json_text(run_id, "event data", &e.data)?)))
        .collect::<Result<Vec<_>>>()?;
    let rows = encoded.iter().map(|(kind, data)| (*kind, data.as_str()));
    let (first, _) = append_rows(conn, env, Table::Events, run_id, rows)?;
    Ok(first..first + events.len() as u64)
}

pub(crate) fn log(
    conn: &mut Connection,
    env: Env<'_>,
    run_id: RunId,
    stream: LogStream,
    line: String,
) -> Result<LogLine> {
    let rows = std::iter::once((stream.as_str(), line.as_str()));
    let (seq, ts) = append_rows(conn, env, Table::RunLogs, &run_id, rows)?;
    Ok(LogLine {
        run_id,
        seq,
        ts,
        stream,
        line,
    })
}

pub(crate) fn logs(
    conn: &mut Connection,
    env: Env<'_>,
    run_id: &RunId,
    lines: &[NewLogLine],
) -> Result<Range<u64>> {
    let rows = lines.iter().map(|l| (l.stream.as_str(), l.line.as_str()));
    let (first, _) = append_rows(conn, env, Table::RunLogs, run_id, rows)?;
    Ok(first..first + lines.len() as u64)
}

pub(crate) fn read_events(
    conn: &Connection,
    env: Env<'_>,
    run_id: &RunId,
    after_seq: u64,
) -> Result<Vec<Event>> {
    let op = "reading events";
    let rows: Vec<(i64, i64, String, String)> = conn
        .prepare_cached(
            "SELECT seq, ts_ms, type, data FROM events WHERE run_id = ?1 AND seq > ?2 ORDER BY seq",
        )
        .and_then(|mut stmt| {
            stmt.query_map(params![run_id.as_str(), to_i64(after_seq)], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
            })?
            .collect()
        })
        .map_err(env.sql(op))?;
    rows.into_iter()
        .map(|(seq, ts, kind, data)| {
            let data = from_json(
                env.db(),
                "events.data",
                || format!("{run_id} #{seq}"),
                &data,
            )?;
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

pub(crate) fn read_logs(
    conn: &Connection,
    env: Env<'_>,
    run_id: &RunId,
    after_seq: u64,
) -> Result<Vec<LogLine>> {
    let op = "reading log lines";
    let rows: Vec<(i64, i64, String, String)> = conn
        .prepare_cached(
            "SELECT seq, ts_ms, stream, line FROM run_logs WHERE run_id = ?1 AND seq > ?2 \
             ORDER BY seq",
        )
        .and_then(|mut stmt| {
            stmt.query_map(params![run_id.as_str(), to_i64(after_seq)], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
            })?
            .collect()
        })
        .map_err(env.sql(op))?;
    rows.into_iter()
        .map(|row| decode_log_line(env.db(), run_id, row))
        .collect()
}

/// Appends `chunks` to the run's node log in one transaction.
pub(crate) fn node_logs(
    conn: &mut Connection,
    env: Env<'_>,
    run_id: &RunId,
    chunks: &[NewNodeLog],
) -> Result<Range<u64>> {
    let table = Table::NodeLogs;
    let op = table.op();
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(env.sql(op))?;
    let Some(last) = last_seq(&tx, table, run_id).map_err(env.sql(op))? else {
        return Err(Error::RunNotFound {
            run_id: run_id.clone(),
        });
    };
    let ts = env.now();
    let first = last + 1;
    {
        let sql = format!(
            "INSERT INTO {} ({}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            table.name(),
            table.columns()
        );
        let mut insert = tx.prepare_cached(&sql).map_err(env.sql(op))?;
        for (offset, chunk) in (0_u64..).zip(chunks) {
            insert
                .execute(params![
                    run_id.as_str(),
                    to_i64(first + offset),
                    ts.as_millis(),
                    chunk.node,
                    chunk.stream.as_str(),
                    chunk.text,
                    i64::from(chunk.truncated),
                ])
                .map_err(env.sql(op))?;
        }
    }
    tx.commit().map_err(env.sql(op))?;
    Ok(first..first + chunks.len() as u64)
}

pub(crate) fn read_node_logs(
    conn: &Connection,
    env: Env<'_>,
    run_id: &RunId,
    query: &NodeLogQuery,
) -> Result<Vec<NodeLog>> {
    let op = "reading node output";
    let sql = format!(
        "SELECT {NODE_LOG_COLUMNS} FROM node_logs WHERE run_id = ?1 AND seq > ?2 \
         AND (?3 IS NULL OR node = ?3) AND (?4 IS NULL OR stream = ?4) ORDER BY seq LIMIT ?5"
    );
    type Row = (i64, i64, String, String, String, bool);
    let rows: Vec<Row> = conn
        .prepare_cached(&sql)
        .and_then(|mut stmt| {
            stmt.query_map(
                params![
                    run_id.as_str(),
                    to_i64(query.after_seq),
                    query.node.as_deref(),
                    query.stream.map(LogStream::as_str),
                    i64::try_from(query.limit).unwrap_or(i64::MAX),
                ],
                |row| {
                    Ok((
                        row.get(0)?,
                        row.get(1)?,
                        row.get(2)?,
                        row.get(3)?,
                        row.get(4)?,
                        row.get::<_, i64>(5)? != 0,
                    ))
                },
            )?
            .collect()
        })
        .map_err(env.sql(op))?;
    rows.into_iter()
        .map(|row| decode_node_log(env.db(), run_id, row))
        .collect()
}
