//! A directory a run worked in comes back as a git commit made **without running anything of
//! the directory's** (issue 15 item 2): no `git add`, no hooks, no attributes, no filters. The
//! tree is walked here, file by file without following a symlink, and streamed into
//! `git fast-import` on the host through [`HostGit`].
//!
//! What goes into the tree is what `git add -A` would take: every path the parent commit tracks
//! that still exists, plus every path the directory's own `.gitignore` files do not ignore
//! (parsed by the `ignore` crate, never executed). Regular files keep the executable bit (100755
//! or 100644, nothing else: setuid and ownership do not exist in git), symlinks are recorded as
//! symlinks (their target as text, never followed), submodule entries of the parent are kept,
//! `.git` entries and special files (fifos, sockets, devices) are left out. Bounded by
//! [`MAX_FILES`] and [`MAX_BYTES`].

use std::collections::{BTreeMap, HashSet};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use tokio::io::AsyncWriteExt;

use crate::records::secrets::Redactor;
use crate::sandbox::git::{GitError, HostGit};

/// At most this many files are landed from one directory.
pub(crate) const MAX_FILES: usize = 200_000;
/// At most this many bytes of file content are landed from one directory.
pub(crate) const MAX_BYTES: u64 = 2 * 1024 * 1024 * 1024;
/// The empty tree's id (SHA-1 repositories).
const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

/// Why a directory could not be landed.
#[derive(Debug, thiserror::Error)]
pub enum LandingError {
    /// A git command failed.
    #[error(transparent)]
    Git(#[from] GitError),
    /// Reading the directory failed.
    #[error("reading {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The directory holds more than the bounds allow.
    #[error("the result is too large to land: more than {what}")]
    TooLarge {
        /// Which bound (`200000 files`, `2147483648 bytes`).
        what: String,
    },
    /// `git fast-import` failed.
    #[error("git fast-import failed: {0}")]
    Import(String),
}

/// The author and committer of a landed commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Identity {
    pub name: String,
    pub email: String,
}

impl Identity {
    /// The repository's `user.name` / `user.email`, else `iterion <iterion@localhost>`; stripped
    /// of what would break a fast-import ident line (`<`, `>`, control characters).
    pub(crate) async fn of(git: &HostGit) -> Identity {
        let clean = |v: Option<String>, default: &str| {
            let v: String = v
                .unwrap_or_default()
                .chars()
                .filter(|c| !c.is_control() && *c != '<' && *c != '>')
                .collect();
            let v = v.trim().to_owned();
            if v.is_empty() { default.to_owned() } else { v }
        };
        Identity {
            name: clean(git.config("user.name").await, "iterion"),
            email: clean(git.config("user.email").await, "iterion@localhost"),
        }
    }
}

/// One entry of a commit's tree (`git ls-tree -r`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TreeEntry {
    pub mode: String,
    pub object: String,
}

/// Every path `commit` tracks, with its mode and object. Empty for `None`.
pub(crate) async fn tracked(
    git: &HostGit,
    commit: Option<&str>,
) -> Result<BTreeMap<Vec<u8>, TreeEntry>, LandingError> {
    let Some(commit) = commit else {
        return Ok(BTreeMap::new());
    };
    let out = git
        .run_bytes(&["ls-tree", "-r", "-z", "--full-tree", commit])
        .await?;
    Ok(parse_ls_tree(&out))
}

/// `<mode> SP <type> SP <object> TAB <path> NUL`, repeated. Pure.
pub(crate) fn parse_ls_tree(out: &[u8]) -> BTreeMap<Vec<u8>, TreeEntry> {
    let mut map = BTreeMap::new();
    for record in out.split(|b| *b == 0) {
        let Some(tab) = record.iter().position(|b| *b == b'\t') else {
            continue;
        };
        let head = String::from_utf8_lossy(&record[..tab]);
        let mut parts = head.split(' ');
        let (Some(mode), Some(_kind), Some(object)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        map.insert(
            record[tab + 1..].to_vec(),
            TreeEntry {
                mode: mode.to_owned(),
                object: object.to_owned(),
            },
        );
    }
    map
}

/// The tree id of `commit`.
pub(crate) async fn tree_of(git: &HostGit, commit: Option<&str>) -> Result<String, LandingError> {
    match commit {
        Some(commit) => Ok(git
            .run(&["rev-parse", "--verify", "-q", &format!("{commit}^{{tree}}")])
            .await?),
        None => Ok(EMPTY_TREE.to_owned()),
    }
}

/// Commits the tree of `dir` (see the module doc) with `parent` as its parent, and returns the
/// new commit's id. The commit is reachable from no branch: the caller names it.
pub(crate) async fn commit_dir(
    git: &HostGit,
    dir: &Path,
    parent: Option<&str>,
    message: &str,
    identity: &Identity,
    redactor: Option<&Arc<Redactor>>,
) -> Result<String, LandingError> {
    let redactor = redactor.cloned();
    let parent_tree = tracked(git, parent).await?;
    let temp_ref = format!("refs/iterion/landing/{}", uuid::Uuid::now_v7());
    let mut header = Vec::new();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    header.extend_from_slice(format!("commit {temp_ref}\n").as_bytes());
    for role in ["author", "committer"] {
        header.extend_from_slice(
            format!(
                "{role} {} <{}> {now} +0000\n",
                identity.name, identity.email
            )
            .as_bytes(),
        );
    }
    header.extend_from_slice(format!("data {}\n{message}\n", message.len()).as_bytes());
    if let Some(parent) = parent {
        header.extend_from_slice(format!("from {parent}\n").as_bytes());
    }
    header.extend_from_slice(b"deleteall\n");

    let mut child = git
        .command(&["fast-import", "--quiet", "--done"])
        .stdin(Stdio::piped())
        .spawn()
        .map_err(|source| GitError::Spawn { source })?;
    let Some(mut stdin) = child.stdin.take() else {
        return Err(LandingError::Import("no stdin".to_owned()));
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(8);
    let walk_dir = dir.to_owned();
    let walker = tokio::task::spawn_blocking(move || {
        let mut sink = |chunk: Vec<u8>| tx.blocking_send(chunk).is_ok();
        if !sink(header) {
            return Ok(());
        }
        walk_tree(&walk_dir, &parent_tree, redactor.as_deref(), &mut sink)?;
        sink(b"\ndone\n".to_vec());
        Ok::<(), LandingError>(())
    });
    let mut write_failed = false;
    while let Some(chunk) = rx.recv().await {
        if stdin.write_all(&chunk).await.is_err() {
            write_failed = true;
            break;
        }
    }
    drop(rx);
    drop(stdin);
    let walked = walker
        .await
        .map_err(|e| LandingError::Import(format!("walker: {e}")))?;
    let out = tokio::time::timeout(crate::sandbox::git::GIT_TIMEOUT, child.wait_with_output())
        .await
        .map_err(|_| LandingError::Import("timed out".to_owned()))?
        .map_err(|source| GitError::Spawn { source })?;
    if let Err(error) = walked {
        let _ = git.run(&["update-ref", "-d", &temp_ref]).await;
        return Err(error);
    }
    if !out.status.success() || write_failed {
        let _ = git.run(&["update-ref", "-d", &temp_ref]).await;
        return Err(LandingError::Import(
            iterion_agent::text::truncate_bytes(String::from_utf8_lossy(&out.stderr).trim(), 2_000)
                .to_owned(),
        ));
    }
    let commit = git.run(&["rev-parse", "--verify", "-q", &temp_ref]).await?;
    git.run(&["update-ref", "-d", &temp_ref]).await?;
    Ok(commit)
}

/// Whether `a` and `b` have the same tree.
pub(crate) async fn same_tree(
    git: &HostGit,
    a: Option<&str>,
    b: Option<&str>,
) -> Result<bool, LandingError> {
    Ok(tree_of(git, a).await? == tree_of(git, b).await?)
}

/// The ignore matchers in force in one directory of the walk, deepest last.
struct Frame {
    matcher: Option<Gitignore>,
}

/// Walks `root` depth-first in name order and emits one fast-import `M` command per landed path.
fn walk_tree(
    root: &Path,
    parent: &BTreeMap<Vec<u8>, TreeEntry>,
    redactor: Option<&Redactor>,
    sink: &mut dyn FnMut(Vec<u8>) -> bool,
) -> Result<(), LandingError> {
    // Every directory prefix of a tracked path, so an ignored directory is entered only for
    // what it tracks.
    let mut tracked_dirs: HashSet<Vec<u8>> = HashSet::new();
    for path in parent.keys() {
        for (i, b) in path.iter().enumerate() {
            if *b == b'/' {
                tracked_dirs.insert(path[..i].to_vec());
            }
        }
    }
    let mut state = Walk {
        root,
        parent,
        tracked_dirs: &tracked_dirs,
        files: 0,
        bytes: 0,
        redactor,
        sink,
    };
    let mut frames = Vec::new();
    state.dir(Vec::new(), &mut frames, false)
}

struct Walk<'a> {
    root: &'a Path,
    parent: &'a BTreeMap<Vec<u8>, TreeEntry>,
    tracked_dirs: &'a HashSet<Vec<u8>>,
    files: usize,
    bytes: u64,
    /// An untrusted run's: every secret value (in every form) a file or link holds is replaced
    /// before it lands, so the branch and the patch never carry one.
    redactor: Option<&'a Redactor>,
    sink: &'a mut dyn FnMut(Vec<u8>) -> bool,
}

impl Walk<'_> {
    fn abs(&self, rel: &[u8]) -> PathBuf {
        if rel.is_empty() {
            self.root.to_owned()
        } else {
            self.root.join(std::ffi::OsStr::from_bytes(rel))
        }
    }

    fn io(&self, rel: &[u8], source: std::io::Error) -> LandingError {
        LandingError::Io {
            path: self.abs(rel),
            source,
        }
    }

    /// Whether `rel` is ignored by the frames (deepest decides), `is_dir` as git sees it.
    fn ignored(frames: &[Frame], abs: &Path, is_dir: bool) -> bool {
        for frame in frames.iter().rev() {
            if let Some(matcher) = &frame.matcher {
                match matcher.matched(abs, is_dir) {
                    Match::Ignore(_) => return true,
                    Match::Whitelist(_) => return false,
                    Match::None => {}
                }
            }
        }
        false
    }

    fn dir(
        &mut self,
        rel: Vec<u8>,
        frames: &mut Vec<Frame>,
        in_ignored: bool,
    ) -> Result<(), LandingError> {
        let abs = self.abs(&rel);
        let gitignore = abs.join(".gitignore");
        let matcher = match std::fs::symlink_metadata(&gitignore) {
            Ok(meta) if meta.is_file() && meta.len() <= 1024 * 1024 => {
                let mut builder = GitignoreBuilder::new(&abs);
                // A line the parser refuses is skipped, as git does.
                let _ = builder.add(&gitignore);
                builder.build().ok()
            }
            _ => None,
        };
        frames.push(Frame { matcher });
        let mut names: Vec<std::ffi::OsString> = Vec::new();
        for entry in std::fs::read_dir(&abs).map_err(|e| self.io(&rel, e))? {
            names.push(entry.map_err(|e| self.io(&rel, e))?.file_name());
        }
        names.sort();
        for name in names {
            if is_git_dir_name(name.as_bytes()) {
                continue;
            }
            let mut child = rel.clone();
            if !child.is_empty() {
                child.push(b'/');
            }
            child.extend_from_slice(name.as_bytes());
            let child_abs = abs.join(&name);
            let meta = std::fs::symlink_metadata(&child_abs).map_err(|e| self.io(&child, e))?;
            let tracked = self.parent.get(&child);
            if let Some(entry) = tracked.filter(|e| e.mode == "160000") {
                // A submodule: kept at the parent's commit, never entered.
                let line = format!("M 160000 {} ", entry.object);
                let mut cmd = line.into_bytes();
                cmd.extend_from_slice(&quote_path(&child));
                cmd.push(b'\n');
                self.count()?;
                self.emit(cmd)?;
                continue;
            }
            let kind = meta.file_type();
            if kind.is_dir() {
                let ignored = in_ignored || Self::ignored(frames, &child_abs, true);
                if ignored && !self.tracked_dirs.contains(&child) {
                    continue;
                }
                self.dir(child, frames, ignored)?;
                continue;
            }
            let ignored = in_ignored || Self::ignored(frames, &child_abs, false);
            if ignored && tracked.is_none() {
                continue;
            }
            if kind.is_symlink() {
                if is_git_control_file(name.as_bytes()) {
                    // git itself refuses a symlinked `.gitmodules` and the like: it would be
                    // read through the link on the operator's checkout.
                    continue;
                }
                let target = std::fs::read_link(&child_abs).map_err(|e| self.io(&child, e))?;
                self.blob("120000", &child, target.as_os_str().as_bytes().to_vec())?;
            } else if kind.is_file() {
                let mode = if meta.permissions().mode() & 0o111 != 0 {
                    "100755"
                } else {
                    "100644"
                };
                let data = self.read_file(&child, &child_abs, meta.len())?;
                self.blob(mode, &child, data)?;
            }
            // fifos, sockets, devices: not content git can hold.
        }
        frames.pop();
        Ok(())
    }

    /// Reads a regular file without following a symlink put in its place, within the bounds.
    fn read_file(&mut self, rel: &[u8], abs: &Path, len: u64) -> Result<Vec<u8>, LandingError> {
        let budget = MAX_BYTES.saturating_sub(self.bytes);
        if len > budget {
            return Err(LandingError::TooLarge {
                what: format!("{MAX_BYTES} bytes"),
            });
        }
        let Some(file) =
            crate::sandbox::nofollow::open_regular(abs).map_err(|e| self.io(rel, e))?
        else {
            return Ok(Vec::new());
        };
        let mut data = Vec::new();
        file.take(budget + 1)
            .read_to_end(&mut data)
            .map_err(|e| self.io(rel, e))?;
        if data.len() as u64 > budget {
            return Err(LandingError::TooLarge {
                what: format!("{MAX_BYTES} bytes"),
            });
        }
        self.bytes += data.len() as u64;
        Ok(data)
    }

    fn blob(&mut self, mode: &str, rel: &[u8], data: Vec<u8>) -> Result<(), LandingError> {
        self.count()?;
        let data = match self.redactor.and_then(|r| r.redact_bytes(&data)) {
            Some(redacted) => redacted,
            None => data,
        };
        let mut cmd = format!("M {mode} inline ").into_bytes();
        cmd.extend_from_slice(&quote_path(rel));
        cmd.extend_from_slice(format!("\ndata {}\n", data.len()).as_bytes());
        self.emit(cmd)?;
        let mut data = data;
        data.push(b'\n');
        self.emit(data)
    }

    fn count(&mut self) -> Result<(), LandingError> {
        self.files += 1;
        if self.files > MAX_FILES {
            return Err(LandingError::TooLarge {
                what: format!("{MAX_FILES} files"),
            });
        }
        Ok(())
    }

    fn emit(&mut self, chunk: Vec<u8>) -> Result<(), LandingError> {
        if (self.sink)(chunk) {
            Ok(())
        } else {
            Err(LandingError::Import(
                "git fast-import stopped reading".to_owned(),
            ))
        }
    }
}

/// `name` with what case-insensitive, NTFS and HFS+ filesystems ignore taken away: ASCII case,
/// trailing dots and spaces, and the Unicode code points HFS+ skips (zero-width and
/// direction marks). Pure.
fn fold_name(name: &[u8]) -> String {
    const IGNORED: &[char] = &[
        '\u{200c}', '\u{200d}', '\u{200e}', '\u{200f}', '\u{202a}', '\u{202b}', '\u{202c}',
        '\u{202d}', '\u{202e}', '\u{206a}', '\u{206b}', '\u{206c}', '\u{206d}', '\u{206e}',
        '\u{206f}', '\u{feff}',
    ];
    let text: String = String::from_utf8_lossy(name)
        .chars()
        .filter(|c| !IGNORED.contains(c))
        .collect();
    text.trim_end_matches(['.', ' ']).to_ascii_lowercase()
}

/// Whether a path component would be a repository's `.git` on some filesystem the branch may be
/// checked out on (`.git`, `.GIT`, `.git.`, `.git `, `git~1`, `.g\u{200c}it`): never landed, so a
/// result cannot plant hooks or config for a later checkout (the CVE-2014-9390 class). Pure.
pub(crate) fn is_git_dir_name(name: &[u8]) -> bool {
    matches!(fold_name(name).as_str(), ".git" | "git~1")
}

/// Whether a path component names one of the files git reads from the tree itself.
fn is_git_control_file(name: &[u8]) -> bool {
    matches!(
        fold_name(name).as_str(),
        ".gitmodules" | ".gitattributes" | ".gitignore" | ".mailmap"
    )
}

/// A path as a fast-import C-style quoted string: `"`, `\` and control bytes escaped, other
/// bytes as they are. Pure.
pub(crate) fn quote_path(path: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(path.len() + 2);
    out.push(b'"');
    for &b in path {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\{b:03o}").as_bytes()),
            _ => out.push(b),
        }
    }
    out.push(b'"');
    out
}

/// What [`land`] made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Landed {
    /// The result differs from where it started: a branch (in a repository) and a patch.
    Changes {
        /// The branch created in the host repository (`None` without one).
        branch: Option<String>,
        /// The result's commit.
        commit: String,
        /// The commit the result's diff is against.
        base: String,
        /// The patch file (`git diff-tree -p --binary base commit`).
        patch: PathBuf,
    },
    /// Nothing changed: no commit, no branch, no patch.
    Unchanged,
}

/// What to land and where.
pub(crate) struct LandingPlan<'a> {
    /// The host repository (its root), or `None` when the workspace is not in one: the commits
    /// are then made in a throwaway bare repository at `scratch_repo` and only the patch stays.
    pub repo: Option<&'a Path>,
    /// Where the throwaway repository goes when there is no host repository.
    pub scratch_repo: &'a Path,
    /// The commit the run started from (`HEAD` of the repository), if any.
    pub head: Option<&'a str>,
    /// The host workspace as the run was given it (a copy was made of it): its uncommitted state
    /// becomes the base the result is diffed against. `None`: `head` is the base.
    pub start: Option<&'a Path>,
    /// The directory holding the result.
    pub result: &'a Path,
    /// The branch to create (in a repository).
    pub branch: &'a str,
    /// The patch file to write.
    pub patch: &'a Path,
    /// The commit message.
    pub message: &'a str,
    /// The run's redactor: no secret value is landed.
    pub redactor: Option<&'a Arc<Redactor>>,
    /// The engine's environment, whose `GIT_*` variables git runs without.
    pub host: &'a iterion_vocab::Environment,
}

/// Lands `plan.result` as a commit on a new branch plus a patch file, diffed against the state
/// the run started from (see the module doc: nothing of the result's runs on the host).
pub(crate) async fn land(plan: &LandingPlan<'_>) -> Result<Landed, LandingError> {
    let git = match plan.repo {
        Some(repo) => HostGit::open(repo, plan.host).await,
        None => {
            let scratch = HostGit::plain(
                plan.scratch_repo.parent().unwrap_or(plan.scratch_repo),
                plan.host,
            );
            let shown = plan.scratch_repo.to_string_lossy().into_owned();
            scratch.run(&["init", "--bare", "-q", &shown]).await?;
            HostGit::bare(plan.scratch_repo, plan.host)
        }
    };
    let identity = Identity::of(&git).await;
    let head = if plan.repo.is_some() { plan.head } else { None };
    let base = match plan.start {
        Some(start) => {
            let made = commit_dir(
                &git,
                start,
                head,
                "iterion: the workspace as the run started",
                &identity,
                plan.redactor,
            )
            .await?;
            if head.is_some() && same_tree(&git, head, Some(&made)).await? {
                head.map(str::to_owned)
            } else {
                Some(made)
            }
        }
        None => head.map(str::to_owned),
    };
    let commit = commit_dir(
        &git,
        plan.result,
        base.as_deref(),
        plan.message,
        &identity,
        plan.redactor,
    )
    .await?;
    if same_tree(&git, base.as_deref(), Some(&commit)).await? {
        return Ok(Landed::Unchanged);
    }
    let base_shown = base.clone().unwrap_or_else(|| EMPTY_TREE.to_owned());
    let patch = git
        .run_bytes(&[
            "diff-tree",
            "-p",
            "--binary",
            "--full-index",
            "--no-ext-diff",
            "--no-textconv",
            "--no-color",
            "-r",
            &base_shown,
            &commit,
        ])
        .await?;
    write_private(plan.patch, &patch).map_err(|source| LandingError::Io {
        path: plan.patch.to_owned(),
        source,
    })?;
    let branch = match plan.repo {
        Some(_) => Some(create_branch(&git, plan.branch, &commit).await?),
        None => None,
    };
    Ok(Landed::Changes {
        branch,
        commit,
        base: base_shown,
        patch: plan.patch.to_owned(),
    })
}

/// Creates `name` at `commit`, never moving an existing branch: a name that is taken (an earlier
/// attempt of the same run landed there, or the operator made it) gives way to `name-2`,
/// `name-3`, …; the name created is returned.
async fn create_branch(git: &HostGit, name: &str, commit: &str) -> Result<String, LandingError> {
    let mut last = None;
    for n in 1..=MAX_BRANCH_SUFFIX {
        let candidate = if n == 1 {
            name.to_owned()
        } else {
            format!("{name}-{n}")
        };
        // The empty old value: created only if it does not exist.
        match git
            .run(&["update-ref", &format!("refs/heads/{candidate}"), commit, ""])
            .await
        {
            Ok(_) => return Ok(candidate),
            Err(error) => last = Some(error),
        }
    }
    Err(last.map_or_else(
        || LandingError::Import("no branch name".to_owned()),
        LandingError::Git,
    ))
}

/// How many `-<n>` suffixes [`create_branch`] tries.
const MAX_BRANCH_SUFFIX: usize = 100;

/// Writes `data` to `path` (parents made), readable by the owner only.
fn write_private(path: &Path, data: &[u8]) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut file = crate::sandbox::nofollow::create(path, 0o600, false)?;
    std::io::Write::write_all(&mut file, data)
}

#[cfg(test)]
#[path = "landing_tests.rs"]
mod tests;
