//! Leases: one row per leased run, `(run_id, holder, expires_at_ms)`; held while
//! `expires_at_ms > now`.

use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::env::Env;
use super::rows::run_exists;
use crate::codec::lease_expiry;
use crate::error::{Error, Result};
use crate::model::{Lease, Liveness, RunId, RunStatus};
use crate::time::Timestamp;

/// Writes `holder`'s lease unconditionally (the caller has decided it may).
pub(crate) fn upsert(
    conn: &Connection,
    run_id: &RunId,
    holder: &str,
    expires_at: Timestamp,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO leases (run_id, holder, expires_at_ms) VALUES (?1, ?2, ?3) \
         ON CONFLICT (run_id) DO UPDATE SET holder = excluded.holder, \
         expires_at_ms = excluded.expires_at_ms",
    )?
    .execute(params![run_id.as_str(), holder, expires_at.as_millis()])
    .map(drop)
}

pub(crate) fn acquire(
    conn: &mut Connection,
    env: Env<'_>,
    run_id: RunId,
    holder: String,
    ttl: Duration,
) -> Result<Lease> {
    let now = env.now();
    let expires_at = lease_expiry(now, ttl)?;
    let op = "acquiring a lease";
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(env.sql(op))?;
    if !run_exists(&tx, &run_id).map_err(env.sql(op))? {
        return Err(Error::RunNotFound { run_id });
    }
    // Taken only when free, lapsed, or already ours.
    let changed = tx
        .execute(
            "INSERT INTO leases (run_id, holder, expires_at_ms) VALUES (?1, ?2, ?3) \
             ON CONFLICT (run_id) DO UPDATE SET holder = excluded.holder, \
             expires_at_ms = excluded.expires_at_ms \
             WHERE leases.holder = excluded.holder OR leases.expires_at_ms <= ?4",
            params![
                run_id.as_str(),
                holder,
                expires_at.as_millis(),
                now.as_millis()
            ],
        )
        .map_err(env.sql(op))?;
    if changed == 0 {
        let current = current_lease(&tx, &run_id).map_err(env.sql(op))?;
        let (holder, expires_at) = current.unwrap_or((holder, expires_at));
        return Err(Error::LeaseHeld {
            run_id,
            holder,
            expires_at,
        });
    }
    tx.commit().map_err(env.sql(op))?;
    Ok(Lease {
        run_id,
        holder,
        expires_at,
    })
}

pub(crate) fn heartbeat(
    conn: &Connection,
    env: Env<'_>,
    run_id: RunId,
    holder: String,
    ttl: Duration,
) -> Result<Lease> {
    let expires_at = lease_expiry(env.now(), ttl)?;
    let changed = conn
        .prepare_cached("UPDATE leases SET expires_at_ms = ?3 WHERE run_id = ?1 AND holder = ?2")
        .and_then(|mut stmt| stmt.execute(params![run_id.as_str(), holder, expires_at.as_millis()]))
        .map_err(env.sql("renewing a lease"))?;
    if changed == 0 {
        return Err(Error::LeaseLost { run_id, holder });
    }
    Ok(Lease {
        run_id,
        holder,
        expires_at,
    })
}

pub(crate) fn release(
    conn: &Connection,
    env: Env<'_>,
    run_id: &RunId,
    holder: &str,
) -> Result<bool> {
    conn.prepare_cached("DELETE FROM leases WHERE run_id = ?1 AND holder = ?2")
        .and_then(|mut stmt| stmt.execute(params![run_id.as_str(), holder]))
        .map(|changed| changed > 0)
        .map_err(env.sql("releasing a lease"))
}

pub(crate) fn held(conn: &Connection, env: Env<'_>, run_id: &RunId) -> Result<bool> {
    live_lease(conn, run_id, env.now())
        .map(|lease| lease.is_some())
        .map_err(env.sql("checking a lease"))
}

pub(crate) fn liveness(conn: &mut Connection, env: Env<'_>, run_id: RunId) -> Result<Liveness> {
    let op = "checking a run's liveness";
    // One read transaction: the lease and the status come from the same snapshot.
    let tx = conn.transaction().map_err(env.sql(op))?;
    if let Some((holder, expires_at)) = live_lease(&tx, &run_id, env.now()).map_err(env.sql(op))? {
        return Ok(Liveness::Leased(Lease {
            run_id,
            holder,
            expires_at,
        }));
    }
    let status: Option<String> = tx
        .prepare_cached("SELECT status FROM runs WHERE id = ?1")
        .and_then(|mut stmt| {
            stmt.query_row([run_id.as_str()], |row| row.get(0))
                .optional()
        })
        .map_err(env.sql(op))?;
    let liveness = match status {
        None => Liveness::Absent,
        Some(text) => Liveness::Unleased {
            status: RunStatus::parse(&text).ok_or_else(|| Error::CorruptRecord {
                db: env.db().clone(),
                column: "runs.status",
                key: run_id.to_string(),
                detail: format!("unknown status {text:?}"),
            })?,
        },
    };
    tx.commit().map_err(env.sql(op))?;
    Ok(liveness)
}

fn current_lease(
    conn: &Connection,
    run_id: &RunId,
) -> rusqlite::Result<Option<(String, Timestamp)>> {
    conn.prepare_cached("SELECT holder, expires_at_ms FROM leases WHERE run_id = ?1")?
        .query_row([run_id.as_str()], |row| {
            Ok((row.get(0)?, Timestamp::from_millis(row.get(1)?)))
        })
        .optional()
}

fn live_lease(
    conn: &Connection,
    run_id: &RunId,
    now: Timestamp,
) -> rusqlite::Result<Option<(String, Timestamp)>> {
    Ok(current_lease(conn, run_id)?.filter(|(_, expires_at)| *expires_at > now))
}
