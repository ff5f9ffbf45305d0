//! What a blocking SQLite operation needs besides the connection.

use std::time::Duration;

use super::classify;
use crate::error::{DbLocation, Error};
use crate::time::{Clock, Timestamp};

/// What a blocking operation needs besides the connection. `Copy`, so it can be used while the
/// connection is mutably borrowed by a transaction.
#[derive(Clone, Copy)]
pub(crate) struct Env<'a> {
    pub(crate) db: &'a DbLocation,
    pub(crate) busy_timeout: Duration,
    pub(crate) clock: &'a dyn Clock,
}

impl<'a> Env<'a> {
    /// Maps an SQLite error raised while doing `op`.
    pub(crate) fn sql(self, op: &'static str) -> impl FnOnce(rusqlite::Error) -> Error + 'a {
        move |err| classify::classify(self.db, self.busy_timeout, op, err)
    }

    pub(crate) fn now(self) -> Timestamp {
        self.clock.now()
    }

    pub(crate) fn db(self) -> &'a DbLocation {
        self.db
    }
}
