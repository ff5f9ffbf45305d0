//! The distributed backend: PostgreSQL, for a fleet of runners sharing one run queue
//! (ARCHITECTURE.md §5, decision 8). Selected by `ITERION_STORE_URL=postgres://…`.
//!
//! Same contract as SQLite, enforced the PostgreSQL way:
//!
//! - **CAS**: `save_run` locks the run row (`SELECT … FOR NO KEY UPDATE`), makes SQLite's checks
//!   (version, [`RunStatus::can_transition_to`](crate::RunStatus::can_transition_to), identity
//!   fields, failure code on a status that can carry one), then updates, in one transaction.
//! - **Gap-free sequences**: an append locks the run row, reads `MAX(seq) + 1` and inserts; the
//!   row lock serialises appenders across processes. No database sequence (it would leave gaps).
//! - **The queue**: `claim_next_queued` picks the oldest available run with
//!   `FOR NO KEY UPDATE SKIP LOCKED` (the form of `FOR UPDATE` that does not block foreign-key
//!   checks, so a concurrent `acquire_lease` cannot deadlock with it), so concurrent claimers skip each other's rows instead of waiting,
//!   and moves it to `running` and upserts the lease in the same transaction.
//! - **Time**: every timestamp and lease expiry comes from the injected [`Clock`] (like SQLite),
//!   never the server's `now()`, so one runner's view of "expired" does not depend on which
//!   clock it reads. Runners' clocks are assumed NTP-synchronised to well within a lease TTL.
//! - **Errors**: deadlocks, serialisation failures and lock timeouts become
//!   [`Error::Locked`]; a server that cannot be reached becomes [`Error::Unreachable`]; the URL
//!   in messages has its password removed ([`DbLocation::Postgres`]).

mod ctx;
mod ops;
mod schema;

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{
    Manager, ManagerConfig, Object, Pool, PoolError, RecyclingMethod, Runtime,
};
use tokio_postgres::NoTls;

use self::ctx::{Ctx, classify};
use crate::error::{DbLocation, Error, Result};
use crate::model::{
    Claim, Event, Lease, Liveness, LogLine, LogStream, NewEvent, NewLogLine, NewNodeLog, NewRun,
    NodeLog, NodeLogQuery, Run, RunId,
};
use crate::store::{RunQuery, Store};
use crate::time::{Clock, SystemClock, Timestamp};

/// Options for [`PgStore::connect_with`]; a builder whose setters state their defaults.
#[derive(Clone, Debug)]
pub struct PgOptions {
    clock: Arc<dyn Clock>,
    schema: Option<String>,
    pool_size: usize,
    lock_timeout: Duration,
    connect_timeout: Duration,
}

impl Default for PgOptions {
    fn default() -> Self {
        Self {
            clock: Arc::new(SystemClock),
            schema: None,
            pool_size: 8,
            lock_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(10),
        }
    }
}

impl PgOptions {
    /// Where timestamps and lease expiry come from. Default the wall clock.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Keeps the tables in this schema (created when missing) instead of the connection's
    /// default (`public`), so several stores can share one database — tests use one schema each.
    /// Default none.
    ///
    /// # Errors
    /// [`Error::UnsupportedStoreUrl`] when `name` is not a plain identifier
    /// (`[a-z_][a-z0-9_]*`, at most 63 bytes): it is put into DDL.
    pub fn schema(mut self, name: &str) -> Result<Self> {
        let ok = !name.is_empty()
            && name.len() <= 63
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            && !name.as_bytes()[0].is_ascii_digit();
        if !ok {
            return Err(Error::UnsupportedStoreUrl {
                url: format!("(schema {name:?} is not a lowercase identifier)"),
            });
        }
        self.schema = Some(name.to_owned());
        Ok(self)
    }

    /// At most this many connections per store. Default 8.
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = size.max(1);
        self
    }

    /// How long a statement waits for a row lock before failing with [`Error::Locked`]
    /// (PostgreSQL's `lock_timeout`). Default 5 s.
    pub fn lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = timeout;
        self
    }

    /// How long opening a connection may take before [`Error::Unreachable`]. Default 10 s.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }
}

/// The PostgreSQL [`Store`].
///
/// Cheap to clone: clones share one connection pool. Must be used from within a tokio runtime.
#[derive(Clone)]
pub struct PgStore {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Pool,
    ctx: Ctx,
    store_id: String,
}

impl fmt::Debug for PgStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgStore")
            .field("db", &self.inner.ctx.db)
            .field("store_id", &self.inner.store_id)
            .finish_non_exhaustive()
    }
}

impl PgStore {
    /// The schema version this build reads and writes.
    pub const SCHEMA_VERSION: i64 = schema::SCHEMA_VERSION;

    /// Connects to `url` (`postgres://user:password@host:port/db`) with default options and
    /// migrates the schema.
    ///
    /// ```no_run
    /// # async fn demo() -> iterion_store::Result<()> {
    /// use iterion_store::{PgStore, Store};
    /// let store = PgStore::connect("postgres://iterion:secret@db.internal:5432/iterion").await?;
    /// // Messages name the database without its password.
    /// assert_eq!(store.location().to_string(), "postgres://iterion@db.internal:5432/iterion");
    /// # let _ = store.store_id();
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// See [`PgStore::connect_with`].
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_with(url, PgOptions::default()).await
    }

    /// Connects to `url`, checks that the server answers, and migrates the schema (under an
    /// advisory lock, so concurrent first connections are safe).
    ///
    /// # Errors
    /// - [`Error::UnsupportedStoreUrl`] when `url` does not parse;
    /// - [`Error::Unreachable`] when the server cannot be reached in time or refuses the login;
    /// - [`Error::SchemaTooNew`] when a newer iterion migrated the database.
    pub async fn connect_with(url: &str, options: PgOptions) -> Result<Self> {
        let db = DbLocation::Postgres {
            redacted_url: redact_url(url),
        };
        let mut config: tokio_postgres::Config =
            url.parse().map_err(|_| Error::UnsupportedStoreUrl {
                url: redact_url(url),
            })?;
        let mut server_options = config.get_options().unwrap_or_default().to_owned();
        server_options.push_str(&format!(
            " -c lock_timeout={}",
            options.lock_timeout.as_millis().max(1)
        ));
        if let Some(schema) = &options.schema {
            server_options.push_str(&format!(" -c search_path={schema}"));
        }
        config.options(server_options.trim());
        config.connect_timeout(options.connect_timeout);
        if config.get_application_name().is_none() {
            config.application_name("iterion");
        }
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size)
            .runtime(Runtime::Tokio1)
            .create_timeout(Some(options.connect_timeout))
            .build()
            .map_err(|err| Error::Unreachable {
                db: db.clone(),
                source: Box::new(err),
            })?;
        let ctx = Ctx {
            db,
            lock_timeout: options.lock_timeout,
            clock: options.clock,
        };
        let mut client = get(&pool, &ctx).await?;
        let store_id = schema::migrate(
            &mut client,
            &ctx,
            options.schema.as_deref(),
            schema::MIGRATIONS,
        )
        .await?;
        drop(client);
        Ok(Self {
            inner: Arc::new(Inner {
                pool,
                ctx,
                store_id,
            }),
        })
    }

    /// Where the data lives.
    pub fn location(&self) -> &DbLocation {
        &self.inner.ctx.db
    }

    async fn client(&self) -> Result<Object> {
        get(&self.inner.pool, &self.inner.ctx).await
    }
}

async fn get(pool: &Pool, ctx: &Ctx) -> Result<Object> {
    pool.get().await.map_err(|err| match err {
        PoolError::Backend(err) => classify(&ctx.db, ctx.lock_timeout, "connecting", err),
        other => Error::Unreachable {
            db: ctx.db.clone(),
            source: Box::new(other),
        },
    })
}

/// `url` without its password and query string, for messages and logs.
pub(crate) fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        // A key=value connection string: keep only the keys that locate the server.
        return url
            .split_whitespace()
            .filter(|kv| {
                ["host=", "port=", "dbname=", "user="]
                    .iter()
                    .any(|k| kv.starts_with(k))
            })
            .collect::<Vec<_>>()
            .join(" ");
    };
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or_default();
            format!("{user}@{host}")
        }
        None => authority.to_owned(),
    };
    format!("{scheme}://{authority}{path}")
}

#[async_trait]
impl Store for PgStore {
    fn store_id(&self) -> &str {
        &self.inner.store_id
    }

    async fn create_run(&self, new: NewRun) -> Result<Run> {
        ops::create(&mut **self.client().await?, &self.inner.ctx, new).await
    }

    async fn get_run(&self, id: &RunId) -> Result<Option<Run>> {
        ops::get(&**self.client().await?, &self.inner.ctx, id).await
    }

    async fn list_runs(&self, query: &RunQuery) -> Result<Vec<Run>> {
        ops::list(&**self.client().await?, &self.inner.ctx, *query).await
    }

    async fn runs_by_id_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<Run>> {
        ops::by_id_prefix(&**self.client().await?, &self.inner.ctx, prefix, limit).await
    }

    async fn runs_finished_before(&self, before: Timestamp, limit: usize) -> Result<Vec<Run>> {
        ops::finished_before(&**self.client().await?, &self.inner.ctx, before, limit).await
    }

    async fn delete_run(&self, id: &RunId) -> Result<Vec<RunId>> {
        ops::delete(&mut **self.client().await?, &self.inner.ctx, id).await
    }

    async fn save_run(&self, run: &Run, expected_version: u64) -> Result<u64> {
        ops::save(
            &mut **self.client().await?,
            &self.inner.ctx,
            run,
            expected_version,
        )
        .await
    }

    async fn claim_next_queued(&self, holder: &str, ttl: Duration) -> Result<Option<Claim>> {
        let client = self.client().await?;
        ops::claim_next(&client, &self.inner.ctx, holder, ttl).await
    }

    async fn append_event(&self, run_id: &RunId, event: NewEvent) -> Result<Event> {
        ops::event(&mut **self.client().await?, &self.inner.ctx, run_id, event).await
    }

    async fn append_events(&self, run_id: &RunId, events: Vec<NewEvent>) -> Result<Range<u64>> {
        ops::events(
            &mut **self.client().await?,
            &self.inner.ctx,
            run_id,
            &events,
        )
        .await
    }

    async fn events(&self, run_id: &RunId, after_seq: u64) -> Result<Vec<Event>> {
        ops::read_events(&**self.client().await?, &self.inner.ctx, run_id, after_seq).await
    }

    async fn append_log(&self, run_id: &RunId, stream: LogStream, line: String) -> Result<LogLine> {
        ops::log(
            &mut **self.client().await?,
            &self.inner.ctx,
            run_id,
            stream,
            line,
        )
        .await
    }

    async fn append_logs(&self, run_id: &RunId, lines: Vec<NewLogLine>) -> Result<Range<u64>> {
        ops::logs(&mut **self.client().await?, &self.inner.ctx, run_id, &lines).await
    }

    async fn logs(&self, run_id: &RunId, after_seq: u64) -> Result<Vec<LogLine>> {
        ops::read_logs(&**self.client().await?, &self.inner.ctx, run_id, after_seq).await
    }

    async fn append_node_logs(
        &self,
        run_id: &RunId,
        chunks: Vec<NewNodeLog>,
    ) -> Result<Range<u64>> {
        ops::node_logs(
            &mut **self.client().await?,
            &self.inner.ctx,
            run_id,
            &chunks,
        )
        .await
    }

    async fn node_logs(&self, run_id: &RunId, query: &NodeLogQuery) -> Result<Vec<NodeLog>> {
        ops::read_node_logs(&**self.client().await?, &self.inner.ctx, run_id, query).await
    }

    async fn acquire_lease(&self, run_id: &RunId, holder: &str, ttl: Duration) -> Result<Lease> {
        ops::acquire(
            &mut **self.client().await?,
            &self.inner.ctx,
            run_id,
            holder,
            ttl,
        )
        .await
    }

    async fn heartbeat(&self, run_id: &RunId, holder: &str, ttl: Duration) -> Result<Lease> {
        ops::heartbeat(
            &**self.client().await?,
            &self.inner.ctx,
            run_id,
            holder,
            ttl,
        )
        .await
    }

    async fn release_lease(&self, run_id: &RunId, holder: &str) -> Result<bool> {
        ops::release(&**self.client().await?, &self.inner.ctx, run_id, holder).await
    }

    async fn lease_held(&self, run_id: &RunId) -> Result<bool> {
        ops::held(&**self.client().await?, &self.inner.ctx, run_id).await
    }

    async fn liveness(&self, run_id: &RunId) -> Result<Liveness> {
        ops::liveness(&**self.client().await?, &self.inner.ctx, run_id).await
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::redact_url;

    #[test]
    fn a_url_loses_its_password_and_query_in_messages() {
        let cases = [
            (
                "postgres://it:s3cret@db.local:5432/iterion?sslmode=disable",
                "postgres://it@db.local:5432/iterion",
            ),
            (
                "postgresql://db.local/iterion",
                "postgresql://db.local/iterion",
            ),
            ("postgres://it@h", "postgres://it@h"),
            (
                "host=/run/pg user=it password=x dbname=it",
                "host=/run/pg user=it dbname=it",
            ),
        ];
        for (url, want) in cases {
            assert_eq!(redact_url(url), want);
        }
    }
}
