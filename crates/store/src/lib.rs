//! iterion-store: durable run state.
//!
//! The `Store` trait the engine uses — runs (versioned, compare-and-swap), events and run logs —
//! with an embedded SQLite backend by default and PostgreSQL for a fleet of runners
//! (ARCHITECTURE.md §5, decision 8).
//!
//! It depends on no other iterion crate.
//!
//! How it is built, and why:
//!
//! - **One trait, backends behind it.** [`Store`] is what the engine, the CLI, the runner and the
//!   reaper call; [`SqliteStore`] implements it (`$ITERION_HOME/iterion.db`, WAL), and so does
//!   [`PgStore`] (`ITERION_STORE_URL=postgres://…`) with the same contract (CAS saves, gap-free
//!   sequences, leases, the run queue with `FOR UPDATE SKIP LOCKED`). [`store_from_env`] picks
//!   one.
//! - **Compare-and-swap, checked where the data is.** [`Store::save_run`] compares the version,
//!   the status state machine ([`RunStatus::can_transition_to`]) and the identity fields against
//!   the stored row inside one write transaction, so a stale or illegal save is a typed error
//!   ([`Error::Conflict`], [`Error::IllegalTransition`]), never a lost update.
//! - **Liveness is a lease.** A process executing a run holds a [`Lease`] and renews it;
//!   [`Store::liveness`] answers the reaper's question (SANDBOX.md §12.1) from one snapshot.
//! - **Async outside, blocking inside.** SQLite calls run on tokio's blocking pool, never on a
//!   runtime worker thread; PostgreSQL's driver is async over a small connection pool.
//! - **Errors name the file and the fix.** A locked, corrupt or too-new database is its own
//!   [`Error`] variant; [`Error::code`] is stable.
//!
//! What it does not do: decide policy (admission, retries, what is reapable — the engine reads
//! the records and decides), print, or read any environment variable except through
//! [`iterion_home_from_env`] and [`store_from_env`].
#![deny(missing_docs)]

mod codec;
mod error;
mod home;
mod model;
mod postgres;
mod removal;
mod run_ref;
mod save_rules;
mod select;
mod sqlite;
mod store;
mod time;

pub use error::{BackendError, DbLocation, Error, Result};
pub use home::{DB_FILE_NAME, ITERION_HOME, db_path, iterion_home_from_env, resolve_iterion_home};
pub use model::{
    Admission, AdmissionDecision, Claim, Event, InitialStatus, InvalidRunId, Lease, LeaseRequest,
    Liveness, LogLine, LogStream, NewEvent, NewLogLine, NewNodeLog, NewRun, NodeLog, NodeLogQuery,
    Run, RunId, RunStatus, Trust,
};
pub use postgres::{PgOptions, PgStore};
pub use run_ref::{AMBIGUOUS_SHOWN, RunRef, resolve_run};
pub use select::{ITERION_STORE_URL, open_store, store_from_env};
pub use sqlite::{SqliteOptions, SqliteStore, Synchronous};
pub use store::{RunQuery, Store, update_run};
pub use time::{Clock, ManualClock, SystemClock, Timestamp};
