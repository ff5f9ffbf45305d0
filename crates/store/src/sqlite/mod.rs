//! The embedded backend: one SQLite file (`$ITERION_HOME/iterion.db`) in WAL mode.
//!
//! How it stays off the runtime's threads: the store owns one connection behind a mutex, and
//! every operation runs as a closure on tokio's blocking pool (`spawn_blocking`). SQLite allows
//! one writer at a time anyway, so one connection per process costs little; concurrency between
//! processes comes from WAL (readers never wait for the writer) and `busy_timeout` (a writer
//! waits its turn, then fails with [`Error::Locked`]). Every write is a `BEGIN IMMEDIATE`
//! transaction: it takes the write lock up front, so a read-then-write (compare-and-swap,
//! sequence numbers) cannot be interleaved with another process's and never hits SQLite's
//! no-wait deadlock error.
//!
//! Durability: `synchronous = NORMAL` by default. In WAL mode a commit is atomic and survives a
//! crash of the process; an OS crash or power cut can lose the last few commits (never corrupt
//! the file). [`Synchronous::Full`] fsyncs every commit, at a cost BENCHMARKS.md measures.

mod append;
mod classify;
mod env;
pub(crate) mod leases;
pub(crate) mod rows;
mod runs;
mod schema;

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{Connection, OpenFlags, config::DbConfig};

use self::env::Env;
use crate::error::{DbLocation, Error, Result};
use crate::model::{
    Claim, Event, Lease, Liveness, LogLine, LogStream, NewEvent, NewLogLine, NewNodeLog, NewRun,
    NodeLog, NodeLogQuery, Run, RunId,
};
use crate::store::{RunQuery, Store};
use crate::time::{Clock, SystemClock, Timestamp};

/// How hard SQLite works to make a commit durable (`PRAGMA synchronous`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Synchronous {
    /// fsync at checkpoints only: commits survive a process crash; an OS crash can lose the
    /// last ones. The default.
    #[default]
    Normal,
    /// fsync the WAL at every commit: commits survive an OS crash too.
    Full,
}

/// Options for [`SqliteStore::open`]; a builder whose setters state their defaults.
#[derive(Clone, Debug)]
pub struct SqliteOptions {
    busy_timeout: Duration,
    synchronous: Synchronous,
    clock: Arc<dyn Clock>,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            busy_timeout: Duration::from_secs(5),
            synchronous: Synchronous::default(),
            clock: Arc::new(SystemClock),
        }
    }
}

impl SqliteOptions {
    /// How long a write waits for another process's lock before failing with
    /// [`Error::Locked`]. Default 5 s.
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// Commit durability. Default [`Synchronous::Normal`].
    pub fn synchronous(mut self, synchronous: Synchronous) -> Self {
        self.synchronous = synchronous;
        self
    }

    /// Where timestamps and lease expiry come from. Default the wall clock.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }
}

/// The SQLite [`Store`].
///
/// Cheap to clone: clones share one connection. Must be used from within a tokio runtime.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    conn: Mutex<Connection>,
    db: DbLocation,
    busy_timeout: Duration,
    clock: Arc<dyn Clock>,
    store_id: String,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("db", &self.inner.db)
            .field("store_id", &self.inner.store_id)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// The schema version this build reads and writes.
    pub const SCHEMA_VERSION: i64 = schema::SCHEMA_VERSION;

    /// Opens (creating when absent) the store at `path`, typically
    /// [`db_path`](crate::db_path)`(&`[`iterion_home_from_env`](crate::iterion_home_from_env)`(env)?)`.
    /// Creates the parent directory (mode 0700) and the file (mode 0600) when missing, turns on
    /// WAL, `busy_timeout` and foreign keys, and migrates the schema.
    ///
    /// # Errors
    /// - [`Error::CreateDir`] / [`Error::CannotOpen`] when the directory or file cannot be made
    ///   or opened;
    /// - [`Error::Corrupt`] when the file is not an SQLite database;
    /// - [`Error::SchemaTooNew`] when a newer iterion wrote it;
    /// - [`Error::Locked`] when another process holds it locked past the busy timeout.
    pub async fn open(path: impl Into<PathBuf>, options: SqliteOptions) -> Result<Self> {
        let path = path.into();
        let db = DbLocation::File(path.clone());
        run_blocking(db.clone(), move || {
            prepare_file(&path)?;
            let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX;
            let conn =
                Connection::open_with_flags(&path, flags).map_err(|err| Error::CannotOpen {
                    db: DbLocation::File(path.clone()),
                    source: Box::new(err),
                })?;
            Self::init(conn, DbLocation::File(path), options)
        })
        .await
    }

    /// A private in-memory store (for tests): same schema and behaviour, gone when dropped.
    ///
    /// # Errors
    /// Backend errors only.
    pub async fn in_memory(options: SqliteOptions) -> Result<Self> {
        run_blocking(DbLocation::Memory, move || {
            let conn = Connection::open_in_memory().map_err(|err| Error::CannotOpen {
                db: DbLocation::Memory,
                source: Box::new(err),
            })?;
            Self::init(conn, DbLocation::Memory, options)
        })
        .await
    }

    /// Where the data lives.
    pub fn location(&self) -> &DbLocation {
        &self.inner.db
    }

    fn init(mut conn: Connection, db: DbLocation, options: SqliteOptions) -> Result<Self> {
        let env = Env {
            db: &db,
            busy_timeout: options.busy_timeout,
            clock: options.clock.as_ref(),
        };
        conn.busy_timeout(options.busy_timeout)
            .map_err(env.sql("setting the busy timeout"))?;
        // Room for every statement the store prepares, so none is ever re-parsed.
        conn.set_prepared_statement_cache_capacity(64);
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
            .map_err(env.sql("turning on WAL"))?;
        if db != DbLocation::Memory && !mode.eq_ignore_ascii_case("wal") {
            tracing::warn!(%db, journal_mode = %mode, "the run store could not use WAL; readers will wait for writers");
        }
        let synchronous = match options.synchronous {
            Synchronous::Normal => "NORMAL",
            Synchronous::Full => "FULL",
        };
        // No checkpoint when the connection closes: the checkpoint would fsync the WAL and the
        // database at every process exit (and the next writer would recreate, fsync and
        // dir-fsync a fresh WAL): four fsyncs per `iterion run`, ~6 ms of a 40 ms run
        // (BENCHMARKS.md "Namespace driver"). What a commit promises does not change: it is in
        // the WAL, which survives a process crash and is checkpointed by the next writer (every
        // 1,000 pages, SQLite's default), exactly as `Synchronous::Normal` says.
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)
            .map_err(env.sql("configuring the connection"))?;
        conn.pragma_update(None, "synchronous", synchronous)
            .and_then(|()| conn.pragma_update(None, "foreign_keys", "ON"))
            .map_err(env.sql("configuring the connection"))?;
        schema::migrate(&mut conn, env, schema::MIGRATIONS)?;
        let store_id = schema::ensure_store_id(&conn, env)?;
        Ok(Self {
            inner: Arc::new(Inner {
                conn: Mutex::new(conn),
                db,
                busy_timeout: options.busy_timeout,
                clock: options.clock,
                store_id,
            }),
        })
    }

    /// Runs `op` on the blocking pool with the connection.
    async fn call<T, F>(&self, op: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection, Env<'_>) -> Result<T> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        run_blocking(self.inner.db.clone(), move || {
            // A panic inside an earlier operation rolled its transaction back while unwinding;
            // the connection itself is still sound.
            let mut conn = inner.conn.lock().unwrap_or_else(PoisonError::into_inner);
            let env = Env {
                db: &inner.db,
                busy_timeout: inner.busy_timeout,
                clock: inner.clock.as_ref(),
            };
            op(&mut conn, env)
        })
        .await
    }
}

/// Runs `f` on tokio's blocking pool. A panic in `f` is resumed on the caller; a runtime that is
/// shutting down gives [`Error::ShuttingDown`].
async fn run_blocking<T, F>(db: DbLocation, f: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T> + Send + 'static,
{
    match tokio::task::spawn_blocking(f).await {
        Ok(result) => result,
        Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
        Err(_) => Err(Error::ShuttingDown { db }),
    }
}

/// Creates the database's directory (0700) and file (0600) when missing, so run data is private
/// to the user from the first byte. Leaves existing ones as they are.
fn prepare_file(path: &Path) -> Result<()> {
    if let Some(dir) = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty() && !d.exists())
    {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(dir).map_err(|source| Error::CreateDir {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    if !path.exists() {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(false);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        options.open(path).map_err(|source| Error::CannotOpen {
            db: DbLocation::File(path.to_path_buf()),
            source: Box::new(source),
        })?;
    }
    Ok(())
}

#[async_trait]
impl Store for SqliteStore {
    fn store_id(&self) -> &str {
        &self.inner.store_id
    }

    async fn create_run(&self, new: NewRun) -> Result<Run> {
        self.call(move |conn, env| runs::create(conn, env, new))
            .await
    }

    async fn get_run(&self, id: &RunId) -> Result<Option<Run>> {
        let id = id.clone();
        self.call(move |conn, env| runs::get(conn, env, &id)).await
    }

    async fn list_runs(&self, query: &RunQuery) -> Result<Vec<Run>> {
        let query = *query;
        self.call(move |conn, env| runs::list(conn, env, query))
            .await
    }

    async fn runs_by_id_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<Run>> {
        let prefix = prefix.to_owned();
        self.call(move |conn, env| runs::by_id_prefix(conn, env, &prefix, limit))
            .await
    }

    async fn runs_finished_before(&self, before: Timestamp, limit: usize) -> Result<Vec<Run>> {
        self.call(move |conn, env| runs::finished_before(conn, env, before, limit))
            .await
    }

    async fn delete_run(&self, id: &RunId) -> Result<Vec<RunId>> {
        let id = id.clone();
        self.call(move |conn, env| runs::delete(conn, env, &id))
            .await
    }

    async fn save_run(&self, run: &Run, expected_version: u64) -> Result<u64> {
        let run = run.clone();
        self.call(move |conn, env| runs::save(conn, env, &run, expected_version))
            .await
    }

    async fn claim_next_queued(&self, holder: &str, ttl: Duration) -> Result<Option<Claim>> {
        let holder = holder.to_owned();
        self.call(move |conn, env| runs::claim_next(conn, env, &holder, ttl))
            .await
    }

    async fn append_event(&self, run_id: &RunId, event: NewEvent) -> Result<Event> {
        let run_id = run_id.clone();
        self.call(move |conn, env| append::event(conn, env, run_id, event))
            .await
    }

    async fn append_events(&self, run_id: &RunId, events: Vec<NewEvent>) -> Result<Range<u64>> {
        let run_id = run_id.clone();
        self.call(move |conn, env| append::events(conn, env, &run_id, &events))
            .await
    }

    async fn events(&self, run_id: &RunId, after_seq: u64) -> Result<Vec<Event>> {
        let run_id = run_id.clone();
        self.call(move |conn, env| append::read_events(conn, env, &run_id, after_seq))
            .await
    }

    async fn append_log(&self, run_id: &RunId, stream: LogStream, line: String) -> Result<LogLine> {
        let run_id = run_id.clone();
        self.call(move |conn, env| append::log(conn, env, run_id, stream, line))
            .await
    }

    async fn append_logs(&self, run_id: &RunId, lines: Vec<NewLogLine>) -> Result<Range<u64>> {
        let run_id = run_id.clone();
        self.call(move |conn, env| append::logs(conn, env, &run_id, &lines))
            .await
    }

    async fn logs(&self, run_id: &RunId, after_seq: u64) -> Result<Vec<LogLine>> {
        let run_id = run_id.clone();
        self.call(move |conn, env| append::read_logs(conn, env, &run_id, after_seq))
            .await
    }

    async fn append_node_logs(
        &self,
        run_id: &RunId,
        chunks: Vec<NewNodeLog>,
    ) -> Result<Range<u64>> {
        let run_id = run_id.clone();
        self.call(move |conn, env| append::node_logs(conn, env, &run_id, &chunks))
            .await
    }

    async fn node_logs(&self, run_id: &RunId, query: &NodeLogQuery) -> Result<Vec<NodeLog>> {
        let (run_id, query) = (run_id.clone(), query.clone());
        self.call(move |conn, env| append::read_node_logs(conn, env, &run_id, &query))
            .await
    }

    async fn acquire_lease(&self, run_id: &RunId, holder: &str, ttl: Duration) -> Result<Lease> {
        let (run_id, holder) = (run_id.clone(), holder.to_owned());
        self.call(move |conn, env| leases::acquire(conn, env, run_id, holder, ttl))
            .await
    }

    async fn heartbeat(&self, run_id: &RunId, holder: &str, ttl: Duration) -> Result<Lease> {
        let (run_id, holder) = (run_id.clone(), holder.to_owned());
        self.call(move |conn, env| leases::heartbeat(conn, env, run_id, holder, ttl))
            .await
    }

    async fn release_lease(&self, run_id: &RunId, holder: &str) -> Result<bool> {
        let (run_id, holder) = (run_id.clone(), holder.to_owned());
        self.call(move |conn, env| leases::release(conn, env, &run_id, &holder))
            .await
    }

    async fn lease_held(&self, run_id: &RunId) -> Result<bool> {
        let run_id = run_id.clone();
        self.call(move |conn, env| leases::held(conn, env, &run_id))
            .await
    }

    async fn liveness(&self, run_id: &RunId) -> Result<Liveness> {
        let run_id = run_id.clone();
        self.call(move |conn, env| leases::liveness(conn, env, run_id))
            .await
    }
}
