//! The launch-time questions about the directory a run starts in: its git repository root (the
//! anchor `sandbox: auto` needs, SANDBOX.md §7.5) and whether `worktree: auto` can work there
//! (DSL.md §7.6: refused, exit 2, without a repository or a commit).

use std::path::{Path, PathBuf};

use iterion_vocab::Environment;

use crate::sandbox::worktree::WorktreeError;

/// `git -C dir args…`, its trimmed stdout when it succeeded (the one runner lives in `worktree`);
/// it runs without the `GIT_*` variables of `host` (the engine's environment).
async fn git(dir: &Path, args: &[&str], host: &Environment) -> Option<String> {
    crate::sandbox::worktree::git(dir, args, host).await.ok()
}

/// The root of the git repository holding `cwd`; `None` outside one (or without git).
pub(crate) async fn repository_root_of(cwd: &Path, host: &Environment) -> Option<PathBuf> {
    git(cwd, &["rev-parse", "--show-toplevel"], host)
        .await
        .filter(|top| !top.is_empty())
        .map(PathBuf::from)
}

/// The directory a run's sandbox is anchored on (its devcontainer, its workspace bind): the
/// git repository root holding `cwd`, else `cwd` itself. `sandbox: auto` outside a repository
/// is therefore still sandboxed, on the current directory (issue 19): a missing `.git` never
/// sends a run to the host. The workspace screening (`ScreenContext::validate_workspace`) still
/// refuses `/` and the home directory.
pub(crate) async fn sandbox_root_of(cwd: &Path, host: &Environment) -> PathBuf {
    crate::sandbox::worktree::workspace_root(cwd, host).await
}

/// Refuses `worktree: auto` where it cannot work, before any run exists.
///
/// # Errors
///
/// [`WorktreeError::NoRepository`] or [`WorktreeError::NoCommit`].
pub(crate) async fn check_worktree_possible(
    cwd: &Path,
    host: &Environment,
) -> Result<(), WorktreeError> {
    let Some(repo) = repository_root_of(cwd, host).await else {
        return Err(WorktreeError::NoRepository {
            cwd: cwd.to_owned(),
        });
    };
    match git(
        &repo,
        &["rev-parse", "--verify", "-q", "HEAD^{commit}"],
        host,
    )
    .await
    {
        Some(_) => Ok(()),
        None => Err(WorktreeError::NoCommit { repo }),
    }
}
