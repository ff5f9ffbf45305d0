//! What the delegate nodes of one run share ([`DelegateState`]): the CLI session each backend
//! left last (for `session: inherit | fork`) and the host config directory of an unsandboxed
//! run. A leaf: the agent environment holds it, the delegate backend uses it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

/// What delegate nodes of one run share: the last session each backend left, and the host
/// config directory of an unsandboxed run (removed when the run's agent environment is).
#[derive(Default)]
pub(crate) struct DelegateState {
    sessions: Mutex<BTreeMap<&'static str, String>>,
    host_root: Mutex<Option<HostDir>>,
}

/// A 0700 directory this run made; removed on drop.
struct HostDir(PathBuf);

impl Drop for HostDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl DelegateState {
    pub(crate) fn session(&self, backend: &'static str) -> Option<String> {
        self.sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(backend)
            .cloned()
    }

    pub(crate) fn keep_session(&self, backend: &'static str, id: String) {
        self.sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(backend, id);
    }

    /// The run's host config root, made on first use: a new directory (never an existing one,
    /// so no other local user can have prepared it), mode 0700.
    pub(crate) fn host_root(&self, tmp: Option<String>, run_id: &str) -> std::io::Result<PathBuf> {
        use std::os::unix::fs::DirBuilderExt;
        let mut guard = self
            .host_root
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(dir) = guard.as_ref() {
            return Ok(dir.0.clone());
        }
        let base = PathBuf::from(tmp.filter(|t| !t.is_empty()).unwrap_or("/tmp".to_owned()));
        let dir = base.join(format!(
            "iterion-delegate-{run_id}-{}",
            uuid::Uuid::now_v7().simple()
        ));
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        *guard = Some(HostDir(dir.clone()));
        Ok(dir)
    }
}
