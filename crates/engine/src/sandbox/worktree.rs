//! `worktree: auto` (DSL.md §7.6) and the workspace of `worktree: none` (§6.1), with the `git` CLI.
//!
//! - [`create_worktree`] makes `<ITERION_HOME>/worktrees/<run-id>` with `git worktree add
//!   --detach` from `HEAD` of the repository holding the current directory. Uncommitted changes
//!   are not carried over. No repository, or one without a commit, is a typed refusal (the launch
//!   exits 2).
//! - On `done`, [`RunWorktree::finish_done`] commits every change, untracked non-ignored files
//!   included, as `iterion run <run-id>` on a new branch `iterion/<workflow>/<run-id>`, then
//!   removes the worktree. The user's branch is not touched. Nothing changed: no commit, no branch.
//!   The commit is `git fast-import` of a walk of the worktree ([`crate::sandbox::landing`]): no `git add`,
//!   no hook, fsmonitor, filter or signing; the identity is the repository's `user.*`, else
//!   `iterion <iterion@localhost>`.
//! - On failure the worktree is kept: [`RunWorktree::keep`] returns its path for the run record.
//!
//! Every `git` here runs through [`crate::sandbox::git::HostGit`] (no hooks, no system/global config, no
//! drivers), as a child process through tokio, killed if the future is dropped.

use std::path::{Path, PathBuf};

use iterion_vocab::Environment;

/// Why a worktree could not be made or landed.
#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    /// The current directory is not inside a git repository.
    #[error(
        "worktree: auto needs a git repository, and {cwd} is not inside one; run from a repository or set worktree: none"
    )]
    NoRepository {
        /// The directory searched from.
        cwd: PathBuf,
    },
    /// The repository has no commit for the worktree to start from.
    #[error(
        "worktree: auto needs a commit to start from, and the repository at {repo} has none; commit first or set worktree: none"
    )]
    NoCommit {
        /// The repository.
        repo: PathBuf,
    },
    /// `git` could not be started.
    #[error("cannot run git: {source}")]
    Spawn {
        /// The spawn error.
        #[source]
        source: std::io::Error,
    },
    /// A `git` command failed.
    #[error("git {command} failed with status {status}: {stderr}")]
    Git {
        /// The arguments, space-joined.
        command: String,
        /// Its exit code (-1 when killed by a signal).
        status: i32,
        /// Its stderr, trimmed.
        stderr: String,
    },
    /// Landing the worktree's tree as a commit failed.
    #[error("landing the worktree: {0}")]
    Landing(#[from] crate::sandbox::landing::LandingError),
    /// Creating `<ITERION_HOME>/worktrees` failed.
    #[error("cannot create {path}: {source}")]
    Io {
        /// The directory.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

impl WorktreeError {
    /// A stable code.
    pub fn code(&self) -> &'static str {
        match self {
            WorktreeError::NoRepository { .. } => "WORKTREE_NO_REPOSITORY",
            WorktreeError::NoCommit { .. } => "WORKTREE_NO_COMMIT",
            WorktreeError::Spawn { .. }
            | WorktreeError::Git { .. }
            | WorktreeError::Io { .. }
            | WorktreeError::Landing(_) => "WORKTREE_GIT_FAILED",
        }
    }
}

/// Runs `git -C dir args…` through the hardened host runner ([`crate::sandbox::git::HostGit::plain`]: for
/// commands that apply no attributes to a work tree); its trimmed stdout, or the failure.
pub(crate) async fn git(
    dir: &Path,
    args: &[&str],
    host: &Environment,
) -> Result<String, WorktreeError> {
    crate::sandbox::git::HostGit::plain(dir, host)
        .run(args)
        .await
        .map_err(WorktreeError::from)
}

impl From<crate::sandbox::git::GitError> for WorktreeError {
    fn from(error: crate::sandbox::git::GitError) -> Self {
        use crate::sandbox::git::GitError;
        match error {
            GitError::Spawn { source } => WorktreeError::Spawn { source },
            GitError::Failed {
                command,
                status,
                stderr,
            } => WorktreeError::Git {
                command,
                status,
                stderr,
            },
            GitError::Timeout { command, seconds } => WorktreeError::Git {
                command,
                status: -1,
                stderr: format!("did not finish within {seconds} s"),
            },
        }
    }
}

/// The root of the git repository holding `cwd`, or `None` outside one.
async fn repository_root(cwd: &Path, host: &Environment) -> Result<Option<PathBuf>, WorktreeError> {
    match git(cwd, &["rev-parse", "--show-toplevel"], host).await {
        Ok(top) => Ok(Some(PathBuf::from(top))),
        Err(WorktreeError::Git { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The workspace of a `worktree: none` run on the host (DSL.md §6.1): the root of the git
/// repository holding `cwd`, or `cwd` itself when there is none (or git is missing). Git runs
/// without the `GIT_*` variables of `host` (the engine's environment).
pub async fn workspace_root(cwd: &Path, host: &Environment) -> PathBuf {
    match repository_root(cwd, host).await {
        Ok(Some(root)) => root,
        Ok(None) | Err(_) => cwd.to_owned(),
    }
}

/// A run's worktree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunWorktree {
    repo: PathBuf,
    path: PathBuf,
    base_commit: String,
    /// The engine's environment, whose `GIT_*` variables git runs without.
    host: Environment,
}

/// What [`RunWorktree::finish_done`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorktreeLanding {
    /// The changes were committed on a new branch.
    Branch {
        /// `iterion/<workflow>/<run-id>`.
        name: String,
        /// The commit.
        commit: String,
    },
    /// Nothing changed: no commit, no branch.
    Unchanged,
}

/// The branch a finished run's changes land on: `iterion/<workflow>/<run-id>`.
pub fn worktree_branch(workflow: &str, run_id: &str) -> String {
    format!("iterion/{workflow}/{run_id}")
}

/// Creates `<iterion_home>/worktrees/<run_id>` from `HEAD` of the repository holding `cwd`; git
/// runs without the `GIT_*` variables of `host` (the engine's environment).
///
/// # Errors
///
/// [`WorktreeError::NoRepository`], [`WorktreeError::NoCommit`] (launch refusals), or a failure
/// of git or of creating the directory.
pub async fn create_worktree(
    iterion_home: &Path,
    run_id: &str,
    cwd: &Path,
    host: &Environment,
) -> Result<RunWorktree, WorktreeError> {
    let repo = repository_root(cwd, host)
        .await?
        .ok_or_else(|| WorktreeError::NoRepository {
            cwd: cwd.to_owned(),
        })?;
    let base_commit = match git(
        &repo,
        &["rev-parse", "--verify", "-q", "HEAD^{commit}"],
        host,
    )
    .await
    {
        Ok(commit) => commit,
        Err(WorktreeError::Git { .. }) => return Err(WorktreeError::NoCommit { repo }),
        Err(e) => return Err(e),
    };
    let parent = iterion_home.join("worktrees");
    tokio::fs::create_dir_all(&parent)
        .await
        .map_err(|source| WorktreeError::Io {
            path: parent.clone(),
            source,
        })?;
    let path = parent.join(run_id);
    let shown = path.to_string_lossy().into_owned();
    // The checkout applies the repository's attributes: its drivers are blanked.
    crate::sandbox::git::HostGit::open(&repo, host)
        .await
        .run(&["worktree", "add", "--detach", &shown, &base_commit])
        .await?;
    Ok(RunWorktree {
        repo,
        path,
        base_commit,
        host: host.clone(),
    })
}

impl RunWorktree {
    /// The worktree of an earlier attempt (on resume), found from its path; git runs without
    /// the `GIT_*` variables of `host`.
    ///
    /// # Errors
    ///
    /// A failure of git, e.g. when `path` is no longer a worktree.
    pub async fn reopen(path: &Path, host: &Environment) -> Result<RunWorktree, WorktreeError> {
        let common = git(
            path,
            &["rev-parse", "--path-format=absolute", "--git-common-dir"],
            host,
        )
        .await?;
        let common = PathBuf::from(common);
        let repo = match common.file_name() {
            Some(name) if name == ".git" => common.parent().map_or(common.clone(), Path::to_owned),
            _ => common,
        };
        let base_commit = git(path, &["rev-parse", "HEAD"], host).await?;
        Ok(RunWorktree {
            repo,
            path: path.to_owned(),
            base_commit,
            host: host.clone(),
        })
    }

    /// The worktree directory: the run's workspace.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The repository it belongs to.
    pub fn repo(&self) -> &Path {
        &self.repo
    }

    /// The commit it started from.
    pub fn base_commit(&self) -> &str {
        &self.base_commit
    }

    /// On failure: keeps the worktree and returns its path, for the run record.
    pub fn keep(self) -> PathBuf {
        self.path
    }

    /// The worktree's tree as a commit on `iterion/<workflow>/<run_id>` (none when nothing
    /// changed), made by [`crate::sandbox::landing`]: `git fast-import` of a walk of the directory, so no
    /// hook, fsmonitor, filter or attribute of the worktree runs (issue 15 item 2).
    async fn land(&self, workflow: &str, run_id: &str) -> Result<WorktreeLanding, WorktreeError> {
        use crate::sandbox::landing::{Identity, commit_dir, same_tree};
        let git = crate::sandbox::git::HostGit::plain(&self.repo, &self.host);
        let identity = Identity::of(&git).await;
        let message = format!("iterion run {run_id}");
        let commit = commit_dir(
            &git,
            &self.path,
            Some(&self.base_commit),
            &message,
            &identity,
            None,
        )
        .await?;
        if same_tree(&git, Some(&self.base_commit), Some(&commit)).await? {
            return Ok(WorktreeLanding::Unchanged);
        }
        let name = worktree_branch(workflow, run_id);
        git.run(&["update-ref", &format!("refs/heads/{name}"), &commit, ""])
            .await?;
        Ok(WorktreeLanding::Branch { name, commit })
    }

    /// On `done`: commits every change on `iterion/<workflow>/<run_id>` (none when nothing
    /// changed) and removes the worktree.
    ///
    /// # Errors
    ///
    /// A failure of git; the worktree is then left in place.
    pub async fn finish_done(
        self,
        workflow: &str,
        run_id: &str,
    ) -> Result<WorktreeLanding, WorktreeError> {
        let landing = self.land(workflow, run_id).await?;
        let shown = self.path.to_string_lossy().into_owned();
        git(
            &self.repo,
            &["worktree", "remove", "--force", &shown],
            &self.host,
        )
        .await?;
        Ok(landing)
    }
}
