//! The operator's env overlay (SANDBOX.md §7.8): `--sandbox-env K=V` (repeatable) over the file
//! named by [`ITERION_SANDBOX_ENV_FILE`]. The operator may override what a repository set, but
//! never what the workflow author wrote. Parsing takes values; the CLI reads the file.

use std::collections::{BTreeMap, BTreeSet};

use crate::spec::Spec;
use crate::text::is_env_name;

use crate::error::DevcontainerError;

/// The operator overlay file: `KEY=VALUE` lines, `#` comments, blank lines (§7.8, §17.1).
pub const ITERION_SANDBOX_ENV_FILE: &str = "ITERION_SANDBOX_ENV_FILE";

/// Operator-chosen container variables, by key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EnvOverlay {
    /// The pairs.
    pub vars: BTreeMap<String, String>,
}

impl EnvOverlay {
    /// `self` with `over`'s keys winning, key by key (`--sandbox-env` over the file).
    pub fn overridden_by(mut self, over: EnvOverlay) -> EnvOverlay {
        self.vars.extend(over.vars);
        self
    }

    /// Whether there is nothing to apply.
    pub fn is_empty(&self) -> bool {
        self.vars.is_empty()
    }
}

/// Parses the content of the overlay file (SANDBOX.md §7.8): one `KEY=VALUE` per line; lines that
/// are blank or start with `#` (after leading whitespace) are skipped. No interpolation and no
/// quote stripping: the value is everything after the first `=` (a trailing `\r` dropped). The
/// key is trimmed and must match `[A-Za-z_][A-Za-z0-9_]*`.
///
/// # Errors
///
/// [`DevcontainerError::InvalidOverlay`] naming `<origin>:<line>` and the key (exit code 2).
pub fn parse_env_file(origin: &str, content: &str) -> Result<EnvOverlay, DevcontainerError> {
    let mut overlay = EnvOverlay::default();
    for (index, line) in content.lines().enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let (key, value) = pair(&format!("{origin}:{}", index + 1), line)?;
        overlay.vars.insert(key, value);
    }
    Ok(overlay)
}

/// Parses `--sandbox-env K=V` values, in order (a later one wins a key).
///
/// # Errors
///
/// [`DevcontainerError::InvalidOverlay`] naming the entry's key (exit code 2).
pub fn parse_env_pairs(pairs: &[String]) -> Result<EnvOverlay, DevcontainerError> {
    let mut overlay = EnvOverlay::default();
    for entry in pairs {
        let (key, value) = pair("--sandbox-env", entry)?;
        overlay.vars.insert(key, value);
    }
    Ok(overlay)
}

fn pair(origin: &str, entry: &str) -> Result<(String, String), DevcontainerError> {
    let invalid = |key: &str| DevcontainerError::InvalidOverlay {
        origin: origin.to_owned(),
        entry: key.to_owned(),
    };
    let Some((key, value)) = entry.split_once('=') else {
        return Err(invalid(entry.trim()));
    };
    let key = key.trim();
    if !is_env_name(key) {
        return Err(invalid(key));
    }
    Ok((key.to_owned(), value.to_owned()))
}

/// Applies the overlay to `spec.env` (SANDBOX.md §7.8) and returns the keys it set, sorted. A key
/// fills a gap, **overwrites** a key the repository contributed (`repo_env`), and never
/// overwrites a workflow-authored key. With no repository (`repo_env` empty) it only fills gaps.
pub(super) fn merge_environment_overlay(
    spec: &mut Spec,
    overlay: &EnvOverlay,
    repo_env: &BTreeSet<String>,
) -> Vec<String> {
    let mut applied = Vec::new();
    for (key, value) in &overlay.vars {
        // Precedence: workflow > operator overlay > repository.
        if !spec.env.contains_key(key) || repo_env.contains(key) {
            spec.env.insert(key.clone(), value.clone());
            applied.push(key.clone());
        }
    }
    applied
}
