//! Between rows and records: the column list, reading a row as raw SQLite values, and decoding
//! those into typed records (where a bad value becomes [`Error::CorruptRecord`]).

use std::path::{Path, PathBuf};

use rusqlite::Row;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::Env;
use crate::error::{DbLocation, Error, Result};
use crate::model::{Admission, Run, RunId, RunStatus, Trust};
use crate::time::Timestamp;

/// The columns of a run, in the order [`RawRun::read`] expects them.
pub(crate) const RUN_COLUMNS: &str = "id, workflow, workflow_hash, file_path, status, trust, \
     admission, failure_code, failure_message, parent_run_id, root_run_id, worktree_path, vars, \
     last_completed_node, checkpoint, deliveries, available_at_ms, created_at_ms, updated_at_ms, \
     finished_at_ms, version";

/// How many columns [`RUN_COLUMNS`] names (a query may select more after them).
pub(crate) const RUN_COLUMN_COUNT: usize = 21;

/// A run row as SQLite values, read inside a query closure (which can only fail with SQLite's
/// error) and decoded afterwards.
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
    pub(crate) fn read(row: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: row.get(0)?,
            workflow: row.get(1)?,
            workflow_hash: row.get(2)?,
            file_path: row.get(3)?,
            status: row.get(4)?,
            trust: row.get(5)?,
            admission: row.get(6)?,
            failure_code: row.get(7)?,
            failure_message: row.get(8)?,
            parent_run_id: row.get(9)?,
            root_run_id: row.get(10)?,
            worktree_path: row.get(11)?,
            vars: row.get(12)?,
            last_completed_node: row.get(13)?,
            checkpoint: row.get(14)?,
            deliveries: row.get(15)?,
            available_at_ms: row.get(16)?,
            created_at_ms: row.get(17)?,
            updated_at_ms: row.get(18)?,
            finished_at_ms: row.get(19)?,
            version: row.get(20)?,
        })
    }

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
    env: Env<'_>,
    column: &'static str,
    key: impl FnOnce() -> String,
    text: &str,
) -> Result<T> {
    serde_json::from_str(text).map_err(|e| Error::CorruptRecord {
        db: env.db().clone(),
        column,
        key: key(),
        detail: e.to_string(),
    })
}

/// A stored sequence number or version (non-negative by construction).
pub(crate) fn to_u64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// A sequence number or version for storage (SQLite integers are signed).
pub(crate) fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
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
