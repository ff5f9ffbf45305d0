//! The compare-and-swap rules of [`Store::save_run`](crate::Store::save_run), shared by every
//! backend so SQLite and PostgreSQL cannot drift: a backend only reads the stored row under its own
//! lock and writes the result.

use crate::codec::{json_text, path_text};
use crate::error::{Error, Result};
use crate::model::{Run, RunId, RunStatus, Trust};
use crate::time::Timestamp;

/// A run's columns encoded for the UPDATE, after the checks that need no database.
pub(crate) struct EncodedRun<'r> {
    pub file_path: &'r str,
    pub worktree_path: Option<&'r str>,
    pub admission: Option<String>,
    pub vars: String,
    pub checkpoint: Option<String>,
}

/// Checks that need no database (a failure code only on a status that allows one), then encodes
/// the columns. Runs before any lock is taken.
pub(crate) fn encode_for_save(run: &Run) -> Result<EncodedRun<'_>> {
    let id = &run.id;
    if !run.status.allows_failure() && (run.failure_code.is_some() || run.failure_message.is_some())
    {
        return Err(Error::FailureOnStatus {
            run_id: id.clone(),
            status: run.status,
        });
    }
    Ok(EncodedRun {
        file_path: path_text(id, "file_path", &run.file_path)?,
        worktree_path: run
            .worktree_path
            .as_deref()
            .map(|p| path_text(id, "worktree_path", p))
            .transpose()?,
        admission: run
            .admission
            .as_ref()
            .map(|a| json_text(id, "admission", a))
            .transpose()?,
        vars: json_text(id, "vars", &run.vars)?,
        checkpoint: run
            .checkpoint
            .as_ref()
            .map(|c| json_text(id, "checkpoint", c))
            .transpose()?,
    })
}

/// The stored identity and state a save is checked against (read under the backend's lock).
pub(crate) struct StoredRun {
    pub version: u64,
    pub status: String,
    pub workflow: String,
    pub workflow_hash: String,
    pub file_path: String,
    pub trust: String,
    pub parent_run_id: Option<String>,
    pub root_run_id: String,
    pub finished_at_ms: Option<i64>,
}

/// What the UPDATE writes besides the run's own columns.
pub(crate) struct SaveStamp {
    pub finished_at_ms: Option<i64>,
    pub new_version: u64,
}

/// The checks against the stored row, in this order: the version (else `Conflict`), the identity
/// fields (else `ImmutableField`), the stored status (`parse_status` reports a corrupt one in the
/// backend's terms), the state machine (else `IllegalTransition`). Then the stamps: entering a
/// terminal status stamps `finished_at`, staying terminal keeps the first stamp, leaving (a
/// resume) clears it.
pub(crate) fn check_save(
    run: &Run,
    encoded: &EncodedRun<'_>,
    expected_version: u64,
    stored: &StoredRun,
    parse_status: impl FnOnce(&str) -> Result<RunStatus>,
    now: Timestamp,
) -> Result<SaveStamp> {
    let id: &RunId = &run.id;
    if stored.version != expected_version {
        return Err(Error::Conflict {
            run_id: id.clone(),
            expected: expected_version,
            actual: stored.version,
        });
    }
    let immutable = [
        ("workflow", stored.workflow == run.workflow),
        ("workflow_hash", stored.workflow_hash == run.workflow_hash),
        ("file_path", stored.file_path == encoded.file_path),
        ("trust", Trust::from_stored(&stored.trust) == run.trust),
        (
            "parent_run_id",
            stored.parent_run_id.as_deref() == run.parent_run_id.as_ref().map(RunId::as_str),
        ),
        (
            "root_run_id",
            stored.root_run_id == run.root_run_id.as_str(),
        ),
    ];
    if let Some((field, _)) = immutable.iter().find(|(_, same)| !same) {
        return Err(Error::ImmutableField {
            run_id: id.clone(),
            field,
        });
    }
    let from = parse_status(&stored.status)?;
    if !from.can_transition_to(run.status) {
        return Err(Error::IllegalTransition {
            run_id: id.clone(),
            from,
            to: run.status,
        });
    }
    let finished_at_ms = match (from.is_terminal(), run.status.is_terminal()) {
        (_, false) => None,
        (true, true) if from == run.status => stored.finished_at_ms,
        (_, true) => Some(now.as_millis()),
    };
    Ok(SaveStamp {
        finished_at_ms,
        new_version: expected_version + 1,
    })
}
