//! The per-run host dir (SANDBOX.md §4.5): `<runtime root>/<run id>`, mode 0700, created at L8
//! and removed at teardown (the docker driver's `cleanup()` removes it too).
//!
//! The runtime root is `$XDG_RUNTIME_DIR/iterion` (from the engine's environment) when that
//! variable is absolute and the dir is
//! owned by this uid, else `<temp dir>/iterion-<uid>`; it must be private (0700, ours). Each run
//! dir holds a `.store` file naming the store that owns it (defined here): several stores (one
//! per `ITERION_HOME`) share the root, and the reaper only collects dirs of its own store.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use iterion_vocab::Environment;

use crate::sandbox::error::SetupError;

/// The file inside a run dir that names its store.
pub(crate) const STORE_MARKER: &str = ".store";

fn uid() -> u32 {
    std::fs::metadata("/proc/self").map_or(0, |m| m.uid())
}

/// The runtime root (not created), `XDG_RUNTIME_DIR` read from `env`.
pub fn runtime_root(env: &Environment) -> PathBuf {
    let uid = uid();
    if let Some(dir) = env.get_os("XDG_RUNTIME_DIR").map(PathBuf::from)
        && dir.is_absolute()
        && std::fs::metadata(&dir).is_ok_and(|m| m.uid() == uid)
    {
        return dir.join("iterion");
    }
    std::env::temp_dir().join(format!("iterion-{uid}"))
}

/// The parent of the untrusted runs' workspace copies (issue 15): `<root>/copies`, 0700. A copy
/// outlives the container (the driver's cleanup removes the run dir), so it is landed after.
pub(crate) const COPIES_DIR: &str = "copies";

/// Where an untrusted run's copy lives: `<root>/copies/<run id>` (made by [`create_copy_dir`]).
pub(crate) fn copy_dir(run_id: &str, env: &Environment) -> PathBuf {
    runtime_root(env).join(COPIES_DIR).join(run_id)
}

/// Creates [`copy_dir`] (0700) with its store marker, for an untrusted run's copy.
pub(crate) async fn create_copy_dir(
    run_id: &str,
    store_id: &str,
    env: &Environment,
) -> Result<PathBuf, SetupError> {
    let root = runtime_root(env);
    private_root(&root).await?;
    let copies = root.join(COPIES_DIR);
    private_root(&copies).await?;
    // A copy left by an attempt of this run that died (the caller holds the run now): it is
    // stale, and a fresh copy replaces it.
    remove(&copies.join(run_id)).await;
    make_run_dir(&copies, run_id, store_id).await
}

/// Creates `<root>/<run id>` (0700) with its store marker, and `net/` (0755) when asked.
pub(crate) async fn create(
    run_id: &str,
    store_id: &str,
    with_net: bool,
    env: &Environment,
) -> Result<PathBuf, SetupError> {
    let root = runtime_root(env);
    private_root(&root).await?;
    let dir = make_run_dir(&root, run_id, store_id).await?;
    if with_net {
        let net = dir.join("net");
        tokio::fs::create_dir_all(&net)
            .await
            .map_err(|e| fail("create", &net, e))?;
        tokio::fs::set_permissions(&net, std::fs::Permissions::from_mode(0o755))
            .await
            .map_err(|e| fail("chmod", &net, e))?;
    }
    Ok(dir)
}

fn fail(what: &str, path: &Path, e: std::io::Error) -> SetupError {
    SetupError::failed(format!("cannot {what} {}: {e}", path.display()))
}

/// `root` exists, is ours and is private (made 0700 when missing).
async fn private_root(root: &Path) -> Result<(), SetupError> {
    match tokio::fs::metadata(root).await {
        Ok(meta) => {
            if meta.uid() != uid() || meta.mode() & 0o077 != 0 {
                return Err(SetupError::failed(format!(
                    "runtime root {} is not private",
                    root.display()
                )));
            }
        }
        Err(_) => {
            tokio::fs::create_dir_all(root)
                .await
                .map_err(|e| fail("create", root, e))?;
            tokio::fs::set_permissions(root, std::fs::Permissions::from_mode(0o700))
                .await
                .map_err(|e| fail("chmod", root, e))?;
        }
    }
    Ok(())
}

/// `<parent>/<run id>`, 0700, with its store marker.
async fn make_run_dir(parent: &Path, run_id: &str, store_id: &str) -> Result<PathBuf, SetupError> {
    let dir = parent.join(run_id);
    tokio::fs::create_dir_all(&dir)
        .await
        .map_err(|e| fail("create", &dir, e))?;
    tokio::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
        .await
        .map_err(|e| fail("chmod", &dir, e))?;
    tokio::fs::write(dir.join(STORE_MARKER), store_id)
        .await
        .map_err(|e| fail("write", &dir, e))?;
    Ok(dir)
}

/// Removes a run dir; already gone is fine, anything else is logged. Staged mounts (issue 15
/// item 1) are detached first and never emptied ([`iterion_sandbox::remove_run_dir`]).
pub(crate) async fn remove(dir: &Path) {
    let owned = dir.to_owned();
    match tokio::task::spawn_blocking(move || iterion_sandbox::remove_run_dir(&owned)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!("cannot remove {}: {e}", dir.display()),
        Err(e) => tracing::warn!("cannot remove {}: {e}", dir.display()),
    }
}
