//! A workspace whose `.git` is a gitfile (a linked worktree, or a submodule) on a copy-based
//! sandbox (SANDBOX.md §5.7 step 8).
//!
//! The gitfile says `gitdir: <path>`, and `<path>` is on the host: copied into the pod as is, it
//! names nothing there and every `git` command fails. The repository's git dir is therefore copied
//! in too, to the path at which the gitfile resolves in the pod: the same absolute path when the
//! gitfile names an absolute one (git's default), or the same path relative to the pod's
//! workspace folder when it names a relative one (`git worktree add --relative-paths`). The
//! gitfile itself is left untouched, so nothing has to be rewritten and nothing rewritten can leak
//! back to the host.
//!
//! Which dir: for a linked worktree, the gitfile names `<repo>/.git/worktrees/<name>`, whose
//! `commondir` names the repository's common git dir (`../..`); that whole dir goes (it holds the
//! objects, the refs and `worktrees/<name>`). Without `commondir` (a submodule, a
//! `--separate-git-dir` checkout), the named git dir itself goes.
//!
//! Only a git dir that names the workspace back is copied (a linked worktree's `gitdir` file, a
//! submodule's `core.worktree`): the gitfile is workspace content, and a `gitdir:` naming any
//! other directory (a key dir, another repository) must not land in a sandbox running untrusted
//! code. A `--separate-git-dir` checkout has no back-link, so its git dir is not copied.
//!
//! The destination is an `emptyDir` volume (`worktree-git`) mounted at that path: a non-root pod
//! user can create nothing at `/home/…` or `/var/…`, and the kubelet creates the mount point.
//!
//! What does not come back: the export (§5.11) brings back the working tree, never the git dir
//! (it is shared with the user's checkout and with other runs' worktrees; overwriting it from one
//! pod would clobber their refs). Commits made in the pod therefore stay in the pod; their
//! content comes back as working-tree changes (which `worktree: auto` commits on the host at
//! `done`). The host's gitfile is excluded from the export.

use std::path::{Component, Path, PathBuf};

/// The `emptyDir` volume holding the copied git dir.
pub(crate) const WORKTREE_GIT_VOLUME: &str = "worktree-git";

/// The git dir a gitfile workspace needs in the pod: where it is on the host, and where the
/// gitfile resolves in the pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GitDirCopy {
    /// The dir to copy, on the host.
    pub host: PathBuf,
    /// Where it goes in the pod.
    pub pod: String,
}

/// `<path>` of a gitfile's `gitdir: <path>` line, or `None` when the content is not a gitfile.
pub fn parse_gitfile(content: &str) -> Option<&str> {
    let path = content.lines().next()?.strip_prefix("gitdir:")?.trim();
    (!path.is_empty()).then_some(path)
}

/// `path` with `.` and `..` components folded away, lexically (no symlink is resolved: the
/// path must keep naming what the gitfile names). `None` when `..` climbs past the root or past
/// the start of a relative path.
pub(crate) fn lexical_clean(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    let mut depth = 0usize;
    for component in path.components() {
        match component {
            Component::RootDir | Component::Prefix(_) => out.push(component.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                if depth == 0 {
                    return None;
                }
                out.pop();
                depth -= 1;
            }
            Component::Normal(part) => {
                out.push(part);
                depth += 1;
            }
        }
    }
    Some(out)
}

/// Where the git dir of a gitfile workspace is on the host and in the pod (pure).
///
/// `gitfile` is the content of `<host_workspace>/.git`; `commondir` the content of
/// `<git dir>/commondir` when that file exists. `None` when the gitfile does not parse or a path
/// does not clean (a `..` past the root).
pub(crate) fn git_dir_copy(
    host_workspace: &Path,
    pod_workspace: &str,
    gitfile: &str,
    commondir: Option<&str>,
) -> Option<GitDirCopy> {
    let named = Path::new(parse_gitfile(gitfile)?);
    let (host_git_dir, pod_git_dir) = if named.is_absolute() {
        (named.to_owned(), named.to_owned())
    } else {
        (
            host_workspace.join(named),
            Path::new(pod_workspace).join(named),
        )
    };
    let (host, pod) = match commondir.map(str::trim).filter(|c| !c.is_empty()) {
        None => (host_git_dir, pod_git_dir),
        Some(common) if Path::new(common).is_absolute() => (common.into(), common.into()),
        Some(common) => (host_git_dir.join(common), pod_git_dir.join(common)),
    };
    let pod = lexical_clean(&pod)?;
    Some(GitDirCopy {
        host: lexical_clean(&host)?,
        pod: pod.to_str()?.to_owned(),
    })
}

/// Why a git dir copy is not mounted where it should be (the run goes on without it, warned).
pub(crate) fn git_dir_target_problem(pod_dir: &str, pod_workspace: &str) -> Option<&'static str> {
    let dir = Path::new(pod_dir);
    let workspace = Path::new(pod_workspace);
    if !dir.is_absolute() || dir.parent().is_none() {
        Some("it is not an absolute path below /")
    } else if dir.starts_with("/run/iterion") {
        Some("it lies under /run/iterion (engine-reserved)")
    } else if dir.starts_with(workspace) || workspace.starts_with(dir) {
        Some("it overlaps the workspace folder")
    } else {
        None
    }
}

/// Whether the git dir a gitfile names is this workspace's: a linked worktree's git dir names
/// the gitfile back in its `gitdir` file (git writes it), a submodule's names the workspace as
/// `core.worktree` in its `config`. The gitfile is content of the workspace; without the
/// back-link a `gitdir: /home/me/.ssh` (or another repository's git dir) would be copied into
/// a sandbox that runs untrusted code.
async fn links_back(git_dir: &Path, dot_git: &Path) -> bool {
    let canonical = |p: PathBuf| async move { tokio::fs::canonicalize(&p).await.ok() };
    let Some(dot_git) = canonical(dot_git.to_owned()).await else {
        return false;
    };
    if let Some(back) = read_git_file(None, git_dir.join("gitdir")).await {
        let back = git_dir.join(back.trim());
        return canonical(back).await.is_some_and(|b| b == dot_git);
    }
    let Some(config) = read_git_file(None, git_dir.join("config")).await else {
        return false;
    };
    let Some(worktree) = core_worktree(&config) else {
        return false;
    };
    let workspace = dot_git.parent().map(Path::to_owned);
    canonical(git_dir.join(worktree))
        .await
        .is_some_and(|w| Some(w) == workspace)
}

/// The largest git metadata file read here (defined here).
const MAX_GIT_FILE_BYTES: u64 = 64 * 1024;

/// Reads a small git metadata file through the repository-file reader (issue 15 item 12): a
/// regular file (never a FIFO or a device that could hang setup), capped, time-bounded; beneath
/// `root` when given (the workspace's own `.git`). `None` on any refusal.
async fn read_git_file(root: Option<&Path>, path: PathBuf) -> Option<String> {
    let root = root.map(Path::to_owned);
    let read = tokio::task::spawn_blocking(move || match root {
        Some(root) => iterion_repofile::read_text_beneath(&root, &path, MAX_GIT_FILE_BYTES),
        None => iterion_repofile::read_regular(&path, MAX_GIT_FILE_BYTES).and_then(|bytes| {
            String::from_utf8(bytes).map_err(|error| iterion_repofile::RepoFileError::Io {
                path: path.clone(),
                source: std::io::Error::new(std::io::ErrorKind::InvalidData, error),
            })
        }),
    });
    match read.await {
        Ok(Ok(text)) => Some(text),
        Ok(Err(error)) => {
            tracing::debug!("sandbox: git metadata not read: {error}");
            None
        }
        Err(_) => None,
    }
}

/// `core.worktree` of a git config's text (the `[core]` section's `worktree = …`).
fn core_worktree(config: &str) -> Option<&str> {
    let mut in_core = false;
    for line in config.lines().map(str::trim) {
        if line.starts_with('[') {
            in_core = line.eq_ignore_ascii_case("[core]");
        } else if in_core
            && let Some((key, value)) = line.split_once('=')
            && key.trim().eq_ignore_ascii_case("worktree")
        {
            return Some(value.trim());
        }
    }
    None
}

/// Reads the workspace's gitfile and the git dir's `commondir` on the host. `None` when `.git`
/// is absent, a directory, or unreadable, and when the git dir it names is not a directory.
pub(crate) async fn read_git_dir_copy(
    host_workspace: &Path,
    pod_workspace: &str,
) -> Option<GitDirCopy> {
    let dot_git = host_workspace.join(".git");
    if !tokio::fs::symlink_metadata(&dot_git)
        .await
        .is_ok_and(|m| m.is_file())
    {
        return None;
    }
    let gitfile = read_git_file(Some(host_workspace), PathBuf::from(".git")).await?;
    let named = host_workspace.join(parse_gitfile(&gitfile)?);
    if !links_back(&named, &dot_git).await {
        tracing::warn!(
            "sandbox: {} names {} as its git dir, which does not name this workspace back; \
             the git dir is not copied into the pod",
            dot_git.display(),
            named.display()
        );
        return None;
    }
    let commondir = read_git_file(None, named.join("commondir")).await;
    let copy = git_dir_copy(
        host_workspace,
        pod_workspace,
        &gitfile,
        commondir.as_deref(),
    )?;
    tokio::fs::metadata(&copy.host)
        .await
        .is_ok_and(|m| m.is_dir())
        .then_some(copy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_git_dir_is_copied_where_the_gitfile_resolves_in_the_pod() {
        let host = Path::new("/home/u/wt");
        let copy = |gitfile: &str, commondir: Option<&str>| {
            git_dir_copy(host, "/workspace", gitfile, commondir)
                .map(|c| (c.host.display().to_string(), c.pod))
        };
        let pair = |h: &str, p: &str| Some((h.to_owned(), p.to_owned()));
        assert_eq!(
            [
                // A linked worktree, absolute (git's default): the common dir, same path.
                copy("gitdir: /home/u/repo/.git/worktrees/wt\n", Some("../..\n")),
                // Relative (`--relative-paths`): relative to each side's workspace.
                copy("gitdir: ../repo/.git/worktrees/wt", Some("../..")),
                // A submodule: no commondir, the named git dir itself.
                copy("gitdir: ../.git/modules/lib\n", None),
                // An absolute commondir wins over the git dir's location.
                copy("gitdir: /g/worktrees/wt", Some("/srv/repo.git")),
                // Not a gitfile; a path that climbs past the root.
                copy("ref: refs/heads/main", None),
                copy("gitdir: ../../../../x", None),
            ],
            [
                pair("/home/u/repo/.git", "/home/u/repo/.git"),
                pair("/home/u/repo/.git", "/repo/.git"),
                pair("/home/u/.git/modules/lib", "/.git/modules/lib"),
                pair("/srv/repo.git", "/srv/repo.git"),
                None,
                None,
            ]
        );
    }

    #[test]
    fn a_git_dir_target_may_not_overlap_the_workspace_or_the_engine_paths() {
        let got = [
            "/home/u/repo/.git",
            "/",
            "relative/.git",
            "/run/iterion/x",
            "/workspace/.git",
            "/",
        ]
        .map(|dir| git_dir_target_problem(dir, "/workspace"));
        assert_eq!(
            got,
            [
                None,
                Some("it is not an absolute path below /"),
                Some("it is not an absolute path below /"),
                Some("it lies under /run/iterion (engine-reserved)"),
                Some("it overlaps the workspace folder"),
                Some("it is not an absolute path below /"),
            ]
        );
        assert_eq!(
            git_dir_target_problem("/srv", "/srv/ws"),
            Some("it overlaps the workspace folder")
        );
    }

    /// ATTACK: the gitfile is workspace content. A `gitdir:` naming a directory that does not
    /// name this workspace back (a key dir, another repository's git dir) is not copied in; a
    /// real linked worktree's and a submodule's are.
    #[tokio::test]
    async fn a_git_dir_that_does_not_name_the_workspace_back_is_not_copied() {
        let root = tempfile::tempdir().unwrap();
        let ws = root.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let secrets = root.path().join("secrets");
        std::fs::create_dir(&secrets).unwrap();
        std::fs::write(secrets.join("id_rsa"), "PRIVATE KEY").unwrap();
        let gitfile = |target: &Path| {
            std::fs::write(ws.join(".git"), format!("gitdir: {}\n", target.display())).unwrap();
        };

        gitfile(&secrets);
        assert_eq!(read_git_dir_copy(&ws, "/workspace").await, None);

        // Another repository's worktree git dir, naming its own worktree back.
        let other = root.path().join("other/.git/worktrees/x");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("gitdir"), "/elsewhere/x/.git\n").unwrap();
        std::fs::write(other.join("commondir"), "../..\n").unwrap();
        gitfile(&other);
        assert_eq!(read_git_dir_copy(&ws, "/workspace").await, None);

        // The same layout naming this workspace back: copied (the common dir).
        std::fs::write(
            other.join("gitdir"),
            format!("{}\n", ws.join(".git").display()),
        )
        .unwrap();
        let copy = read_git_dir_copy(&ws, "/workspace")
            .await
            .expect("a linked worktree");
        assert_eq!(copy.host, root.path().join("other/.git"));

        // A submodule's git dir names the workspace as core.worktree.
        let module = root.path().join("super/.git/modules/ws");
        std::fs::create_dir_all(&module).unwrap();
        let up = "../../../../ws";
        std::fs::write(
            module.join("config"),
            format!("[core]\n\tworktree = {up}\n"),
        )
        .unwrap();
        gitfile(&module);
        let copy = read_git_dir_copy(&ws, "/workspace")
            .await
            .expect("a submodule");
        assert_eq!(copy.host, module);
    }
}
