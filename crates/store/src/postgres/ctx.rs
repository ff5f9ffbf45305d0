//! What every PostgreSQL operation needs besides a connection, and how a driver error becomes a
//! store [`Error`].

use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::error::SqlState;

use crate::error::{DbLocation, Error};
use crate::time::Clock;

/// What every operation needs besides a connection.
pub(crate) struct Ctx {
    pub(crate) db: DbLocation,
    pub(crate) lock_timeout: Duration,
    pub(crate) clock: Arc<dyn Clock>,
}

impl Ctx {
    /// Maps a driver error raised while doing `op`.
    pub(crate) fn sql(&self, op: &'static str) -> impl FnOnce(tokio_postgres::Error) -> Error + '_ {
        move |err| classify(&self.db, self.lock_timeout, op, err)
    }
}

/// Classifies `err`, raised while the store was doing `op` on `db`.
pub(crate) fn classify(
    db: &DbLocation,
    lock_timeout: Duration,
    op: &'static str,
    err: tokio_postgres::Error,
) -> Error {
    if let Some(code) = err.code() {
        let locked = [
            SqlState::T_R_SERIALIZATION_FAILURE,
            SqlState::T_R_DEADLOCK_DETECTED,
            SqlState::LOCK_NOT_AVAILABLE,
        ];
        let unreachable = [
            SqlState::INVALID_PASSWORD,
            SqlState::INVALID_AUTHORIZATION_SPECIFICATION,
            SqlState::INVALID_CATALOG_NAME,
            SqlState::CANNOT_CONNECT_NOW,
            SqlState::ADMIN_SHUTDOWN,
            SqlState::CRASH_SHUTDOWN,
            SqlState::TOO_MANY_CONNECTIONS,
        ];
        if locked.contains(code) {
            return Error::Locked {
                db: db.clone(),
                busy_timeout: lock_timeout,
            };
        }
        if [SqlState::DATA_CORRUPTED, SqlState::INDEX_CORRUPTED].contains(code) {
            let detail = err
                .as_db_error()
                .map_or_else(|| err.to_string(), |e| e.message().to_owned());
            return Error::Corrupt {
                db: db.clone(),
                detail,
            };
        }
        if unreachable.contains(code) {
            return Error::Unreachable {
                db: db.clone(),
                source: Box::new(err),
            };
        }
    } else if err.is_closed() || err.as_db_error().is_none() {
        // No SQLSTATE: the socket failed, timed out or was closed.
        return Error::Unreachable {
            db: db.clone(),
            source: Box::new(err),
        };
    }
    Error::Backend {
        db: db.clone(),
        op,
        source: Box::new(err),
    }
}
