//! The store's one error type. Every variant is a reason someone can act on, and names the run,
//! the lease holder or the database file involved.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::model::{InvalidRunId, RunId, RunStatus};
use crate::time::Timestamp;

/// A boxed error from the database driver, kept as the `source` of [`Error::Backend`] and
/// [`Error::CannotOpen`] so the public API does not name the driver's types.
pub type BackendError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Where a store keeps its data, as shown in messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DbLocation {
    /// An SQLite database file.
    File(PathBuf),
    /// A private in-memory SQLite database (tests).
    Memory,
    /// A PostgreSQL database, named by its URL with the password and query removed.
    Postgres {
        /// `postgres://user@host:port/db`, never the password.
        redacted_url: String,
    },
}

impl fmt::Display for DbLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File(path) => write!(f, "{}", path.display()),
            Self::Memory => f.write_str(":memory:"),
            Self::Postgres { redacted_url } => f.write_str(redacted_url),
        }
    }
}

/// Why a store operation failed.
///
/// [`Error::code`] gives each variant a stable code (`STORE_…`) for logs and JSON output.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Text that should have been a run id is not a UUID.
    #[error(
        "{value:?} is not a run id (expected a UUID such as 0190b4c6-1d2e-7f00-8000-000000000001)"
    )]
    InvalidRunId {
        /// What was given.
        value: String,
    },

    /// No run with this id exists.
    #[error("no run {run_id} in the store; `iterion ps --all` lists the runs there are")]
    RunNotFound {
        /// The id asked for.
        run_id: RunId,
    },

    /// Text that should have named a run is neither a run id, a prefix of one, nor `last`.
    #[error(
        "{value:?} does not name a run: give a run id, the start of one (hex digits and `-`), or \
         `last` for the newest run; `iterion ps --all` lists them"
    )]
    InvalidRunRef {
        /// What was given.
        value: String,
    },

    /// No run's id starts with the prefix given (or `last` in an empty store).
    #[error("no run matches {reference:?}; `iterion ps --all` lists the runs there are")]
    NoRunMatches {
        /// The prefix, or `last`.
        reference: String,
    },

    /// Several runs' ids start with the prefix given.
    #[error(
        "{prefix:?} is ambiguous: it starts {} run ids ({}{}); type more of the id",
        candidates.len() + more,
        candidates.iter().map(RunId::as_str).collect::<Vec<_>>().join(", "),
        if *more > 0 { format!(" and {more} more") } else { String::new() }
    )]
    AmbiguousRunRef {
        /// The prefix.
        prefix: String,
        /// The newest runs it matches (at most [`AMBIGUOUS_SHOWN`](crate::AMBIGUOUS_SHOWN)).
        candidates: Vec<RunId>,
        /// How many more it matches.
        more: usize,
    },

    /// The run (or a run below it) may be executing, so its records cannot be removed.
    #[error(
        "run {run_id} is {status}; it cannot be removed while it may be executing (wait for it, \
         or stop it first)"
    )]
    RunActive {
        /// The active run.
        run_id: RunId,
        /// Its status (`queued` or `running`).
        status: RunStatus,
    },

    /// `create_run` was given an id that is already taken.
    #[error("run {run_id} already exists; let the store generate the id")]
    RunExists {
        /// The taken id.
        run_id: RunId,
    },

    /// `create_run` named a parent run that does not exist.
    #[error("cannot create run {run_id}: its parent run {parent_run_id} is not in the store")]
    ParentNotFound {
        /// The run being created.
        run_id: RunId,
        /// The missing parent.
        parent_run_id: RunId,
    },

    /// `create_run` asked for a trusted child of an untrusted parent; trust only propagates
    /// down (SANDBOX.md §10).
    #[error("cannot create run {run_id} trusted: its parent run {parent_run_id} is untrusted")]
    TrustRaised {
        /// The run being created.
        run_id: RunId,
        /// Its untrusted parent.
        parent_run_id: RunId,
    },

    /// A compare-and-swap save lost: someone saved the run since it was loaded.
    #[error(
        "run {run_id} changed since it was loaded (expected version {expected}, found {actual}); \
         reload it and apply the change again"
    )]
    Conflict {
        /// The run.
        run_id: RunId,
        /// The version the caller loaded.
        expected: u64,
        /// The version in the store now.
        actual: u64,
    },

    /// A save would move the run along an edge its state machine does not have.
    #[error("run {run_id} cannot go from {from} to {to}")]
    IllegalTransition {
        /// The run.
        run_id: RunId,
        /// Its stored status.
        from: RunStatus,
        /// The status the save asked for.
        to: RunStatus,
    },

    /// A save changed a field that is fixed at creation.
    #[error("run {run_id}: {field} is fixed when the run is created and cannot be saved changed")]
    ImmutableField {
        /// The run.
        run_id: RunId,
        /// The field (`trust`, `workflow_hash`, …).
        field: &'static str,
    },

    /// A failure code or message on a status that cannot carry one (SANDBOX.md §9.2).
    #[error(
        "run {run_id}: a failure code or message is only kept on failed, failed_resumable or \
         cancelled runs, not on {status}; clear it when the run moves on"
    )]
    FailureOnStatus {
        /// The run.
        run_id: RunId,
        /// The status that cannot carry one.
        status: RunStatus,
    },

    /// A path field is not valid UTF-8, which the store cannot keep faithfully.
    #[error("run {run_id}: {field} is not valid UTF-8; use a UTF-8 path")]
    NonUtf8Path {
        /// The run.
        run_id: RunId,
        /// The field (`file_path`, `worktree_path`).
        field: &'static str,
    },

    /// A lease duration of zero (the lease would be born expired) or one too long to represent.
    #[error("a lease must last between 1 ms and {max_days} days, not {ttl:?}")]
    InvalidLeaseTtl {
        /// What was asked for.
        ttl: Duration,
        /// The upper bound, in days.
        max_days: u64,
    },

    /// Another process holds the run's lease.
    #[error(
        "run {run_id} is leased to {holder} until {expires_at}; it is being executed elsewhere"
    )]
    LeaseHeld {
        /// The run.
        run_id: RunId,
        /// The current holder.
        holder: String,
        /// When its lease lapses unless renewed.
        expires_at: Timestamp,
    },

    /// A heartbeat for a lease this holder no longer has (it lapsed and was taken, or was
    /// released): stop executing the run.
    #[error("{holder} no longer holds the lease on run {run_id}; stop executing it")]
    LeaseLost {
        /// The run.
        run_id: RunId,
        /// The holder that lost it.
        holder: String,
    },

    /// Neither `ITERION_HOME` nor `HOME` is set, so there is no default place for the store.
    #[error("cannot place the run store: set ITERION_HOME (or HOME, for the default ~/.iterion)")]
    HomeUnset,

    /// The directory that holds the database could not be created.
    #[error("cannot create {}: {source}; create it or set ITERION_HOME to a writable directory", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },

    /// The database file cannot be opened or written (missing directory, permissions,
    /// read-only file system).
    #[error("cannot open the run store {db}: {source}; check its permissions or set ITERION_HOME")]
    CannotOpen {
        /// The database.
        db: DbLocation,
        /// The driver's error.
        #[source]
        source: BackendError,
    },

    /// The PostgreSQL server could not be reached, refused the connection, or dropped it.
    #[error(
        "cannot reach the run store {db}: {source}; check that the server is up and that \
         ITERION_STORE_URL names it"
    )]
    Unreachable {
        /// The database.
        db: DbLocation,
        /// The driver's error.
        #[source]
        source: BackendError,
    },

    /// `ITERION_STORE_URL` names a kind of database iterion has no backend for.
    #[error(
        "ITERION_STORE_URL={url} is not a postgres:// or postgresql:// URL; unset it to use \
         SQLite under ITERION_HOME"
    )]
    UnsupportedStoreUrl {
        /// The URL, redacted.
        url: String,
    },

    /// Another process kept the database locked for longer than the busy timeout.
    #[error(
        "the run store {db} is locked by another process (waited {busy_timeout:?}); let the other \
         iterion finish, or stop it, and try again"
    )]
    Locked {
        /// The database.
        db: DbLocation,
        /// How long this process waited.
        busy_timeout: Duration,
    },

    /// The file is not an SQLite database, or its pages are damaged.
    #[error(
        "the run store {db} is corrupt ({detail}); move it aside (e.g. `mv {db} {db}.corrupt`) and \
         iterion starts an empty store"
    )]
    Corrupt {
        /// The database.
        db: DbLocation,
        /// What SQLite said.
        detail: String,
    },

    /// The database was written by a newer iterion, with a schema this one does not know.
    #[error(
        "the run store {db} has schema version {found}, newer than this iterion understands \
         ({supported}); upgrade iterion, or point ITERION_HOME elsewhere"
    )]
    SchemaTooNew {
        /// The database.
        db: DbLocation,
        /// The schema version in the file.
        found: i64,
        /// The newest version this build knows.
        supported: i64,
    },

    /// A stored value does not decode (an unknown status, JSON that does not parse): the row
    /// was written by something other than iterion, or damaged.
    #[error("the run store {db} holds a bad {column} for {key}: {detail}")]
    CorruptRecord {
        /// The database.
        db: DbLocation,
        /// The column (`runs.status`, `events.data`, …).
        column: &'static str,
        /// The row's key (a run id, `run id #seq`).
        key: String,
        /// What is wrong.
        detail: String,
    },

    /// A value could not be encoded as JSON for storage.
    #[error("run {run_id}: {field} cannot be encoded as JSON: {source}")]
    Encode {
        /// The run.
        run_id: RunId,
        /// The field.
        field: &'static str,
        /// Why.
        #[source]
        source: serde_json::Error,
    },

    /// Any other database failure (disk full, I/O error, …), with the operation it interrupted.
    #[error("the run store {db} failed while {op}: {source}")]
    Backend {
        /// The database.
        db: DbLocation,
        /// What the store was doing (`appending events`, …).
        op: &'static str,
        /// The driver's error.
        #[source]
        source: BackendError,
    },

    /// The store's worker could not run the operation because the async runtime is shutting
    /// down.
    #[error("the run store {db} is shutting down with the runtime; the operation did not run")]
    ShuttingDown {
        /// The database.
        db: DbLocation,
    },
}

impl From<InvalidRunId> for Error {
    fn from(err: InvalidRunId) -> Self {
        Self::InvalidRunId { value: err.value }
    }
}

impl Error {
    /// The stable code of this error. Codes never change once shipped.
    pub const fn code(&self) -> &'static str {
        // No `_` arm: a new variant must choose its code.
        match self {
            Self::InvalidRunId { .. } => InvalidRunId::CODE,
            Self::RunNotFound { .. } => "STORE_RUN_NOT_FOUND",
            Self::InvalidRunRef { .. } => "STORE_INVALID_RUN_REF",
            Self::NoRunMatches { .. } => "STORE_NO_RUN_MATCHES",
            Self::AmbiguousRunRef { .. } => "STORE_AMBIGUOUS_RUN_REF",
            Self::RunActive { .. } => "STORE_RUN_ACTIVE",
            Self::RunExists { .. } => "STORE_RUN_EXISTS",
            Self::ParentNotFound { .. } => "STORE_PARENT_NOT_FOUND",
            Self::TrustRaised { .. } => "STORE_TRUST_RAISED",
            Self::Conflict { .. } => "STORE_CONFLICT",
            Self::IllegalTransition { .. } => "STORE_ILLEGAL_TRANSITION",
            Self::ImmutableField { .. } => "STORE_IMMUTABLE_FIELD",
            Self::FailureOnStatus { .. } => "STORE_FAILURE_ON_STATUS",
            Self::NonUtf8Path { .. } => "STORE_NON_UTF8_PATH",
            Self::InvalidLeaseTtl { .. } => "STORE_INVALID_LEASE_TTL",
            Self::LeaseHeld { .. } => "STORE_LEASE_HELD",
            Self::LeaseLost { .. } => "STORE_LEASE_LOST",
            Self::HomeUnset => "STORE_HOME_UNSET",
            Self::CreateDir { .. } => "STORE_CREATE_DIR",
            Self::CannotOpen { .. } => "STORE_CANNOT_OPEN",
            Self::Unreachable { .. } => "STORE_UNREACHABLE",
            Self::UnsupportedStoreUrl { .. } => "STORE_UNSUPPORTED_URL",
            Self::Locked { .. } => "STORE_LOCKED",
            Self::Corrupt { .. } => "STORE_CORRUPT",
            Self::SchemaTooNew { .. } => "STORE_SCHEMA_TOO_NEW",
            Self::CorruptRecord { .. } => "STORE_CORRUPT_RECORD",
            Self::Encode { .. } => "STORE_ENCODE",
            Self::Backend { .. } => "STORE_BACKEND",
            Self::ShuttingDown { .. } => "STORE_SHUTTING_DOWN",
        }
    }
}

/// `Result` with the store's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
#[path = "error_tests.rs"]
mod tests;
