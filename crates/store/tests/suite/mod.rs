//! Topics, and the fixtures they share.
//!
//! Most checks are written once, as `async fn check(store: Arc<dyn Store>, clock: ManualClock)`,
//! and listed in [`on_both_backends!`], which runs each on SQLite and on PostgreSQL.

/// Runs each named `async fn(Arc<dyn Store>, ManualClock)` on both backends, as the tests
/// `NAME::sqlite` (an in-memory store) and `NAME::postgres` (a fresh schema of the database
/// `ITERION_IT_POSTGRES_URL` names; skipped without it, failed under `ITERION_IT_DOCKER=1`).
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let (store, clock) = crate::suite::memory_store().await;
                super::$name(std::sync::Arc::new(store), clock).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                if let Some((store, clock)) = crate::suite::postgres::fresh_store().await {
                    super::$name(store, clock).await;
                }
            }
        }
    )*};
}

mod cas;
mod events;
mod leases;
mod node_logs;
mod open;
mod postgres;
mod queue;
mod removal;
mod runs;
mod serde_forms;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use iterion_store::{ManualClock, NewRun, SqliteOptions, SqliteStore, Timestamp};

/// 2026-11-01T09:30:00Z: every test clock starts here, so timestamps are exact.
pub const T0: i64 = 1_793_525_400_000;

/// A stopped clock at [`T0`].
pub fn clock() -> ManualClock {
    ManualClock::new(Timestamp::from_millis(T0))
}

/// Options with `clock` and a short busy timeout (tests never wait long for a lock).
pub fn options(clock: &ManualClock) -> SqliteOptions {
    SqliteOptions::default()
        .clock(Arc::new(clock.clone()))
        .busy_timeout(Duration::from_secs(5))
}

/// An in-memory store on a manual clock.
pub async fn memory_store() -> (SqliteStore, ManualClock) {
    let clock = clock();
    let store = SqliteStore::in_memory(options(&clock)).await.unwrap();
    (store, clock)
}

/// A file store at `dir/iterion.db` on `clock`.
pub async fn file_store(dir: &Path, clock: &ManualClock) -> SqliteStore {
    SqliteStore::open(db_file(dir), options(clock))
        .await
        .unwrap()
}

/// The database file of a home directory.
pub fn db_file(dir: &Path) -> PathBuf {
    iterion_store::db_path(dir)
}

/// The run every test starts from.
pub fn review() -> NewRun {
    NewRun::new("review", "sha256:ab12", "flows/review.iter")
}
