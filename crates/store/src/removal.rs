//! The rules both backends share for listing and removing finished runs.

use crate::error::{DbLocation, Error, Result};
use crate::model::{RunId, RunStatus};
use crate::time::Timestamp;

/// One run of a tree being removed: `(id, status, lease holder, lease expiry ms)`.
pub(crate) type TreeRow = (String, String, Option<String>, Option<i64>);

/// The terminal statuses ([`RunStatus::is_terminal`]) as an SQL list of literals, derived so
/// a new status cannot be forgotten.
pub(crate) fn terminal_statuses_sql() -> String {
    RunStatus::ALL
        .into_iter()
        .filter(|s| s.is_terminal())
        .map(|s| format!("'{}'", s.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The rule of [`Store::delete_run`](crate::Store::delete_run), over the tree's rows `(id,
/// status, lease holder, lease expiry ms)`, `id` first: every run is neither `queued` nor
/// `running` nor leased. Returns the ids, `id` first.
pub(crate) fn check_removable(
    db: &DbLocation,
    id: &RunId,
    rows: Vec<TreeRow>,
    now: Timestamp,
) -> Result<Vec<RunId>> {
    if rows.is_empty() {
        return Err(Error::RunNotFound { run_id: id.clone() });
    }
    let mut tree = Vec::with_capacity(rows.len());
    for (run, status, holder, expires_at) in rows {
        let corrupt = |detail: String| Error::CorruptRecord {
            db: db.clone(),
            column: "runs.status",
            key: run.clone(),
            detail,
        };
        let run_id = RunId::parse(&run).map_err(|e| corrupt(e.to_string()))?;
        let status = RunStatus::parse(&status)
            .ok_or_else(|| corrupt(format!("unknown status {status:?}")))?;
        if matches!(status, RunStatus::Queued | RunStatus::Running) {
            return Err(Error::RunActive { run_id, status });
        }
        if let (Some(holder), Some(expires_at)) = (holder, expires_at.map(Timestamp::from_millis))
            && expires_at > now
        {
            return Err(Error::LeaseHeld {
                run_id,
                holder,
                expires_at,
            });
        }
        tree.push(run_id);
    }
    Ok(tree)
}
