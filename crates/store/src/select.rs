//! Choosing the backend: `ITERION_STORE_URL=postgres://…` selects PostgreSQL; otherwise the
//! embedded SQLite store at `$ITERION_HOME/iterion.db` (ARCHITECTURE.md §5, decision 8).

use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::home::{db_path, iterion_home_from_env};
use crate::postgres::{PgStore, redact_url};
use crate::sqlite::{SqliteOptions, SqliteStore};
use crate::store::Store;

/// The variable that selects a PostgreSQL store for a fleet of runners.
pub const ITERION_STORE_URL: &str = "ITERION_STORE_URL";

/// Opens the store `location` names: a `postgres://` or `postgresql://` URL is a [`PgStore`];
/// anything else is an iterion home directory, whose `iterion.db` is a [`SqliteStore`].
///
/// # Errors
/// Those of [`PgStore::connect`] or [`SqliteStore::open`].
pub async fn open_store(location: &str) -> Result<Arc<dyn Store>> {
    if is_postgres_url(location) {
        return Ok(Arc::new(PgStore::connect(location).await?));
    }
    let store = SqliteStore::open(db_path(Path::new(location)), SqliteOptions::default()).await?;
    Ok(Arc::new(store))
}

/// The store this process should use: `env`'s `ITERION_STORE_URL` when set and non-empty (it must
/// be a PostgreSQL URL), else SQLite under [`iterion_home_from_env`].
///
/// # Errors
/// [`Error::UnsupportedStoreUrl`] for a URL of another kind; [`Error::HomeUnset`]; and those of
/// opening the store.
pub async fn store_from_env(env: &iterion_vocab::Environment) -> Result<Arc<dyn Store>> {
    match env.get(ITERION_STORE_URL) {
        Some(url) if !url.is_empty() => {
            if !is_postgres_url(&url) {
                return Err(Error::UnsupportedStoreUrl {
                    url: redact_url(&url),
                });
            }
            Ok(Arc::new(PgStore::connect(&url).await?))
        }
        _ => {
            let home = iterion_home_from_env(env)?;
            let store = SqliteStore::open(db_path(&home), SqliteOptions::default()).await?;
            Ok(Arc::new(store))
        }
    }
}

fn is_postgres_url(text: &str) -> bool {
    text.starts_with("postgres://") || text.starts_with("postgresql://")
}
