//! Turning SQLite's errors into the store's: a locked or corrupt database gets its own variant
//! naming the file and what to do; everything else keeps the operation it interrupted.

use std::time::Duration;

use rusqlite::ErrorCode;

use crate::error::{DbLocation, Error};

/// Classifies `err`, raised while the store was doing `op` on `db`.
pub(crate) fn classify(
    db: &DbLocation,
    busy_timeout: Duration,
    op: &'static str,
    err: rusqlite::Error,
) -> Error {
    if let rusqlite::Error::SqliteFailure(failure, message) = &err {
        // No `_ =>` shortcut would tell us when SQLite grows a code, but ErrorCode is
        // non-exhaustive; the codes that matter to a user are named here, the rest are Backend.
        match failure.code {
            ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => {
                return Error::Locked {
                    db: db.clone(),
                    busy_timeout,
                };
            }
            ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase => {
                return Error::Corrupt {
                    db: db.clone(),
                    detail: message.clone().unwrap_or_else(|| failure.to_string()),
                };
            }
            ErrorCode::CannotOpen | ErrorCode::PermissionDenied | ErrorCode::ReadOnly => {
                return Error::CannotOpen {
                    db: db.clone(),
                    source: Box::new(err),
                };
            }
            _ => {}
        }
    }
    Error::Backend {
        db: db.clone(),
        op,
        source: Box::new(err),
    }
}
