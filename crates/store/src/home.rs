//! Where the embedded store lives: `$ITERION_HOME/iterion.db`, with `ITERION_HOME` defaulting to
//! `~/.iterion` (ARCHITECTURE.md §4). The decision takes values; only [`iterion_home_from_env`]
//! reads an environment (the snapshot its caller took).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The variable that moves all of iterion's data (SANDBOX.md §17.1).
pub const ITERION_HOME: &str = "ITERION_HOME";

/// The database's file name inside the iterion home.
pub const DB_FILE_NAME: &str = "iterion.db";

/// The iterion home from the values of `ITERION_HOME` and `HOME`: `ITERION_HOME` when set and
/// non-empty, else `HOME/.iterion`.
///
/// # Errors
/// [`Error::HomeUnset`] when neither is set (or both are empty).
///
/// ```
/// use iterion_store::resolve_iterion_home;
/// use std::ffi::OsStr;
/// use std::path::PathBuf;
/// let home = resolve_iterion_home(None, Some(OsStr::new("/home/ada")))?;
/// assert_eq!(home, PathBuf::from("/home/ada/.iterion"));
/// # Ok::<(), iterion_store::Error>(())
/// ```
pub fn resolve_iterion_home(iterion_home: Option<&OsStr>, home: Option<&OsStr>) -> Result<PathBuf> {
    match (iterion_home, home) {
        (Some(dir), _) if !dir.is_empty() => Ok(PathBuf::from(dir)),
        (_, Some(home)) if !home.is_empty() => Ok(Path::new(home).join(".iterion")),
        _ => Err(Error::HomeUnset),
    }
}

/// [`resolve_iterion_home`] with the values of `ITERION_HOME` and `HOME` from `env` (the
/// process environment as the entry point read it).
///
/// # Errors
/// [`Error::HomeUnset`] when neither is set.
pub fn iterion_home_from_env(env: &iterion_vocab::Environment) -> Result<PathBuf> {
    resolve_iterion_home(env.get_os(ITERION_HOME), env.get_os("HOME"))
}

/// The database file inside an iterion home.
pub fn db_path(iterion_home: &Path) -> PathBuf {
    iterion_home.join(DB_FILE_NAME)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn iterion_home_wins_then_home_then_nothing() {
        let os = |s: &'static str| Some(OsStr::new(s));
        let cases = [
            (os("/srv/it"), os("/home/ada"), Some("/srv/it")),
            (os("rel/dir"), None, Some("rel/dir")),
            (os(""), os("/home/ada"), Some("/home/ada/.iterion")),
            (None, os("/home/ada"), Some("/home/ada/.iterion")),
            (None, os(""), None),
            (None, None, None),
        ];
        for (iterion_home, home, want) in cases {
            let got = resolve_iterion_home(iterion_home, home);
            match (got, want) {
                (Ok(path), Some(want)) => assert_eq!(path, PathBuf::from(want)),
                (Err(err), None) => assert_eq!(err.code(), "STORE_HOME_UNSET"),
                (got, want) => panic!("{iterion_home:?}, {home:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn the_database_is_iterion_db_in_the_home() {
        assert_eq!(
            db_path(Path::new("/home/ada/.iterion")),
            PathBuf::from("/home/ada/.iterion/iterion.db")
        );
    }
}
