//! Reading a run row as raw SQLite values, inside a query closure (which can only fail with
//! SQLite's error); [`crate::codec::RawRun::decode`] turns them into a record afterwards.

use rusqlite::{Connection, Row};

use crate::codec::RawRun;
use crate::model::RunId;

/// The run row `row` (selected with [`crate::codec::RUN_COLUMNS`] first) as raw values.
pub(crate) fn raw_run(row: &Row<'_>) -> rusqlite::Result<RawRun> {
    Ok(RawRun {
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

/// Whether run `id` exists.
pub(crate) fn run_exists(conn: &Connection, id: &RunId) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM runs WHERE id = ?1)")?
        .query_row([id.as_str()], |row| row.get(0))
}
