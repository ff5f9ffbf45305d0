//! The process environment, read once at the edge.
//!
//! The binary's entry points (the CLI, the in-container runner) take one snapshot with
//! [`Environment::from_process`] and hand it down; no other crate reads the process environment.
//! A test builds the environment it wants with [`Environment::from_pairs`] instead of mutating
//! the process's, so tests cannot leak settings into each other.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::sync::Arc;

/// A snapshot of environment variables. Cheap to clone (shared).
///
/// `Debug` prints the names only: values include secrets.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Environment {
    vars: Arc<BTreeMap<OsString, OsString>>,
}

impl Environment {
    /// The process environment, now. The one place iterion reads it: call it at an entry point.
    pub fn from_process() -> Self {
        Self {
            vars: Arc::new(std::env::vars_os().collect()),
        }
    }

    /// An environment holding exactly `pairs`.
    ///
    /// ```
    /// let env = iterion_vocab::Environment::from_pairs([("HOME", "/home/a")]);
    /// assert_eq!(env.get("HOME").as_deref(), Some("/home/a"));
    /// assert_eq!(env.get("PATH"), None);
    /// ```
    pub fn from_pairs<K, V>(pairs: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: Into<OsString>,
        V: Into<OsString>,
    {
        Self {
            vars: Arc::new(
                pairs
                    .into_iter()
                    .map(|(k, v)| (k.into(), v.into()))
                    .collect(),
            ),
        }
    }

    /// No variable at all.
    pub fn empty() -> Self {
        Self::default()
    }

    /// This environment with `name` set to `value`.
    #[must_use]
    pub fn with(&self, name: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        let mut vars = (*self.vars).clone();
        vars.insert(name.into(), value.into());
        Self {
            vars: Arc::new(vars),
        }
    }

    /// This environment without `name`.
    #[must_use]
    pub fn without(&self, name: impl AsRef<OsStr>) -> Self {
        let mut vars = (*self.vars).clone();
        vars.remove(name.as_ref());
        Self {
            vars: Arc::new(vars),
        }
    }

    /// The value of `name` as text (a value that is not UTF-8 is converted lossily), or `None`
    /// when it is not set.
    pub fn get(&self, name: &str) -> Option<String> {
        self.vars
            .get(OsStr::new(name))
            .map(|v| v.to_string_lossy().into_owned())
    }

    /// The value of `name` as it is.
    pub fn get_os(&self, name: &str) -> Option<&OsStr> {
        self.vars.get(OsStr::new(name)).map(OsString::as_os_str)
    }

    /// Whether `name` is set (to anything, the empty string included).
    pub fn contains(&self, name: &str) -> bool {
        self.vars.contains_key(OsStr::new(name))
    }

    /// Every variable, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&OsStr, &OsStr)> {
        self.vars
            .iter()
            .map(|(k, v)| (k.as_os_str(), v.as_os_str()))
    }

    /// A lookup closure over this snapshot, for the pure functions that take one
    /// (`|name| env.get(name)`).
    pub fn lookup(&self) -> impl Fn(&str) -> Option<String> + Send + Sync + 'static {
        let env = self.clone();
        move |name| env.get(name)
    }
}

impl fmt::Debug for Environment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set()
            .entries(self.vars.keys().map(|k| k.to_string_lossy()))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_is_a_value_and_its_debug_form_never_shows_a_value() {
        let env = Environment::from_pairs([("API_KEY", "s3cr3t"), ("HOME", "/h")]);
        let more = env.with("PATH", "/bin").without("HOME");
        assert_eq!(env.get("HOME").as_deref(), Some("/h"));
        assert_eq!(more.get("HOME"), None);
        assert_eq!(more.get("PATH").as_deref(), Some("/bin"));
        assert!(!format!("{env:?}").contains("s3cr3t"));
        assert!(format!("{env:?}").contains("API_KEY"));
        assert_eq!((env.lookup())("API_KEY").as_deref(), Some("s3cr3t"));
        assert!(Environment::from_pairs([("EMPTY", "")]).contains("EMPTY"));
    }
}
