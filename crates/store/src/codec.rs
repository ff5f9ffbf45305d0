//! The backend-neutral row codec: the run columns, a run row as raw column values (each backend
//! reads its own driver's row into a [`RawRun`]), decoding those into typed records (a bad value
//! becomes [`Error::CorruptRecord`]), the text and integer forms values are stored in, the
//! append tables, and the record a fresh run starts as. SQLite and PostgreSQL store the same
//! values the same way, so a record decodes identically from either.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

use crate::error::{DbLocation, Error, Result};
use std::time::Duration;

use crate::model::{Admission, LogLine, LogStream, NewRun, NodeLog, Run, RunId, RunStatus, Trust};
use crate::time::Timestamp;

/// The columns of a run, in the order a backend reads them into a [`RawRun`].
pub(crate) const RUN_COLUMNS: &str = "id, workflow, workflow_hash, file_path, status, trust, \
     admission, failure_code, failure_message, parent_run_id, root_run_id, worktree_path, vars, \
     last_completed_node, checkpoint, deliveries, available_at_ms, created_at_ms, updated_at_ms, \
     finished_at_ms, version";

/// How many columns [`RUN_COLUMNS`] names (a query may select more after them).
pub(crate) const RUN_COLUMN_COUNT: usize = 21;

/// A run row as raw column values, read inside a backend's query (which can only fail with the
/// driver's error) and decoded afterwards.
pub(crate) struct RawRun {
    pub(crate) id: String,
    pub(crate) workflow: String,
    pub(crate) workflow_hash: String,
    pub(crate) file_path: String,
    pub(crate) status: String,
    pub(crate) trust: String,
    pub(crate) admission: Option<String>,
    pub(crate) failure_code: Option<String>,
    pub(crate) failure_message: Option<String>,
    pub(crate) parent_run_id: Option<String>,
    pub(crate) root_run_id: String,
    pub(crate) worktree_path: Option<String>,
    pub(crate) vars: String,
    pub(crate) last_completed_node: Option<String>,
    pub(crate) checkpoint: Option<String>,
    pub(crate) deliveries: i64,
    pub(crate) available_at_ms: Option<i64>,
    pub(crate) created_at_ms: i64,
    pub(crate) updated_at_ms: i64,
    pub(crate) finished_at_ms: Option<i64>,
    pub(crate) version: i64,
}

impl RawRun {
    pub(crate) fn decode(self, db: &DbLocation) -> Result<Run> {
        let bad = |column: &'static str, detail: String| Error::CorruptRecord {
            db: db.clone(),
            column,
            key: self.id.clone(),
            detail,
        };
        let id = RunId::parse(&self.id).map_err(|e| bad("runs.id", e.to_string()))?;
        let status = RunStatus::parse(&self.status)
            .ok_or_else(|| bad("runs.status", format!("unknown status {:?}", self.status)))?;
        let parent_run_id = self
            .parent_run_id
            .as_deref()
            .map(RunId::parse)
            .transpose()
            .map_err(|e| bad("runs.parent_run_id", e.to_string()))?;
        let root_run_id =
            RunId::parse(&self.root_run_id).map_err(|e| bad("runs.root_run_id", e.to_string()))?;
        let admission = self
            .admission
            .as_deref()
            .map(serde_json::from_str::<Admission>)
            .transpose()
            .map_err(|e| bad("runs.admission", e.to_string()))?;
        let vars: Map<String, Value> =
            serde_json::from_str(&self.vars).map_err(|e| bad("runs.vars", e.to_string()))?;
        let checkpoint = self
            .checkpoint
            .as_deref()
            .map(serde_json::from_str::<Value>)
            .transpose()
            .map_err(|e| bad("runs.checkpoint", e.to_string()))?;
        let deliveries = u32::try_from(self.deliveries).map_err(|_| {
            bad(
                "runs.deliveries",
                format!("{} is out of range", self.deliveries),
            )
        })?;
        let version = u64::try_from(self.version)
            .map_err(|_| bad("runs.version", format!("{} is out of range", self.version)))?;
        Ok(Run {
            id,
            workflow: self.workflow,
            workflow_hash: self.workflow_hash,
            file_path: PathBuf::from(self.file_path),
            status,
            trust: Trust::from_stored(&self.trust),
            admission,
            failure_code: self.failure_code,
            failure_message: self.failure_message,
            parent_run_id,
            root_run_id,
            worktree_path: self.worktree_path.map(PathBuf::from),
            vars,
            last_completed_node: self.last_completed_node,
            checkpoint,
            deliveries,
            available_at: self.available_at_ms.map(Timestamp::from_millis),
            created_at: Timestamp::from_millis(self.created_at_ms),
            updated_at: Timestamp::from_millis(self.updated_at_ms),
            finished_at: self.finished_at_ms.map(Timestamp::from_millis),
            version,
        })
    }
}

/// A path as UTF-8 text for storage.
pub(crate) fn path_text<'p>(
    run_id: &RunId,
    field: &'static str,
    path: &'p Path,
) -> Result<&'p str> {
    path.to_str().ok_or_else(|| Error::NonUtf8Path {
        run_id: run_id.clone(),
        field,
    })
}

/// A value as JSON text for storage.
pub(crate) fn json_text<T: serde::Serialize + ?Sized>(
    run_id: &RunId,
    field: &'static str,
    value: &T,
) -> Result<String> {
    serde_json::to_string(value).map_err(|source| Error::Encode {
        run_id: run_id.clone(),
        field,
        source,
    })
}

/// JSON text from storage.
pub(crate) fn from_json<T: DeserializeOwned>(
    db: &DbLocation,
    column: &'static str,
    key: impl FnOnce() -> String,
    text: &str,
) -> Result<T> {
    serde_json::from_str(text).map_err(|e| Error::CorruptRecord {
        db: db.clone(),
        column,
        key: key(),
        detail: e.to_string(),
    })
}

/// A stored sequence number or version (non-negative by construction).
pub(crate) fn to_u64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// A sequence number or version for storage (SQL integers are signed).
pub(crate) fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// The longest lease the store grants. A run's lease is renewed every 10 s; a day-long TTL is
/// already a mistake, a year certainly is.
const MAX_TTL_DAYS: u64 = 365;

/// When a lease taken at `now` for `ttl` lapses.
pub(crate) fn lease_expiry(now: Timestamp, ttl: Duration) -> Result<Timestamp> {
    let max = Duration::from_secs(MAX_TTL_DAYS * 86_400);
    if ttl < Duration::from_millis(1) || ttl > max {
        return Err(Error::InvalidLeaseTtl {
            ttl,
            max_days: MAX_TTL_DAYS,
        });
    }
    Ok(now.saturating_add(ttl))
}

/// A [`NewRun`]'s values in their stored forms, computed (and checked) before any transaction.
pub(crate) struct NewRunRow<'n> {
    pub(crate) id: RunId,
    pub(crate) file_path: &'n str,
    pub(crate) worktree_path: Option<&'n str>,
    pub(crate) vars: String,
    pub(crate) status: RunStatus,
    pub(crate) lease_expiry: Option<Timestamp>,
}

impl<'n> NewRunRow<'n> {
    /// Encodes `new` as created at `now`.
    pub(crate) fn encode(new: &'n NewRun, now: Timestamp) -> Result<Self> {
        let id = new.id.clone().unwrap_or_else(RunId::generate);
        let file_path = path_text(&id, "file_path", &new.file_path)?;
        let worktree_path = new
            .worktree_path
            .as_deref()
            .map(|p| path_text(&id, "worktree_path", p))
            .transpose()?;
        let vars = json_text(&id, "vars", &new.vars)?;
        let lease_expiry = new
            .lease
            .as_ref()
            .map(|l| lease_expiry(now, l.ttl))
            .transpose()?;
        Ok(Self {
            id,
            file_path,
            worktree_path,
            vars,
            status: new.status.status(),
            lease_expiry,
        })
    }
}

/// The record a run created at `now` starts as: version 1, nothing recorded yet.
pub(crate) fn fresh_run(
    new: NewRun,
    id: RunId,
    status: RunStatus,
    root_run_id: RunId,
    now: Timestamp,
) -> Run {
    Run {
        id,
        workflow: new.workflow,
        workflow_hash: new.workflow_hash,
        file_path: new.file_path,
        status,
        trust: new.trust,
        admission: None,
        failure_code: None,
        failure_message: None,
        parent_run_id: new.parent_run_id,
        root_run_id,
        worktree_path: new.worktree_path,
        vars: new.vars,
        last_completed_node: None,
        checkpoint: None,
        deliveries: 0,
        available_at: None,
        created_at: now,
        updated_at: now,
        finished_at: None,
        version: 1,
    }
}

/// A run-log row, `(seq, ts_ms, stream, line)` as stored, decoded.
pub(crate) fn decode_log_line(
    db: &DbLocation,
    run_id: &RunId,
    (seq, ts, stream, line): (i64, i64, String, String),
) -> Result<LogLine> {
    let stream = LogStream::parse(&stream).ok_or_else(|| Error::CorruptRecord {
        db: db.clone(),
        column: "run_logs.stream",
        key: format!("{run_id} #{seq}"),
        detail: format!("unknown stream {stream:?}"),
    })?;
    Ok(LogLine {
        run_id: run_id.clone(),
        seq: to_u64(seq),
        ts: Timestamp::from_millis(ts),
        stream,
        line,
    })
}

/// A node-log row, `(seq, ts_ms, node, stream, text, truncated)` as stored, decoded.
pub(crate) fn decode_node_log(
    db: &DbLocation,
    run_id: &RunId,
    (seq, ts, node, stream, text, truncated): (i64, i64, String, String, String, bool),
) -> Result<NodeLog> {
    let stream = LogStream::parse(&stream).ok_or_else(|| Error::CorruptRecord {
        db: db.clone(),
        column: "node_logs.stream",
        key: format!("{run_id} #{seq}"),
        detail: format!("unknown stream {stream:?}"),
    })?;
    Ok(NodeLog {
        run_id: run_id.clone(),
        seq: to_u64(seq),
        ts: Timestamp::from_millis(ts),
        node,
        stream,
        text,
        truncated,
    })
}

/// The node-log columns a read selects, in the order [`decode_node_log`] takes them.
pub(crate) const NODE_LOG_COLUMNS: &str = "seq, ts_ms, node, stream, text, truncated";

/// The append-only tables, which share their numbering rule.
#[derive(Clone, Copy)]
pub(crate) enum Table {
    /// `events (run_id, seq, ts_ms, type, data)`.
    Events,
    /// `run_logs (run_id, seq, ts_ms, stream, line)`.
    RunLogs,
    /// `node_logs (run_id, seq, ts_ms, node, stream, text, truncated)`.
    NodeLogs,
}

impl Table {
    /// The table's name.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Self::Events => "events",
            Self::RunLogs => "run_logs",
            Self::NodeLogs => "node_logs",
        }
    }

    /// Its columns, in insertion order.
    pub(crate) const fn columns(self) -> &'static str {
        match self {
            Self::Events => "run_id, seq, ts_ms, type, data",
            Self::RunLogs => "run_id, seq, ts_ms, stream, line",
            Self::NodeLogs => "run_id, seq, ts_ms, node, stream, text, truncated",
        }
    }

    /// What appending to it is called in errors.
    pub(crate) const fn op(self) -> &'static str {
        match self {
            Self::Events => "appending events",
            Self::RunLogs => "appending log lines",
            Self::NodeLogs => "appending node output",
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn run_column_count_matches_the_column_list() {
        assert_eq!(
            super::RUN_COLUMNS.split(',').count(),
            super::RUN_COLUMN_COUNT
        );
    }
}
