//! An untrusted run works on a copy (issue 15 item 2, overriding SANDBOX.md §5.3's same-path
//! bind): the host checkout and its `.git` are never writable by the sandbox. The copy is made
//! here, under the run's root-only dir, before the container starts; at teardown it is landed
//! back as a branch and a patch by [`crate::sandbox::landing`] — nothing of it is ever written into the
//! checkout.
//!
//! The copy is a walk that never follows a symlink: directories, regular files (permission bits
//! only — no setuid, setgid or sticky bit survives), symlinks as symlinks; fifos, sockets and
//! devices are left out. The repository's `.git` is copied without its `hooks/` and with a
//! fresh minimal `config` (a remote URL with a token, a credential helper or an `include` of the
//! operator's stay on the host); a linked worktree's gitfile becomes a real git dir made of the
//! shared one. When the engine is root, everything is chowned to the sandbox's uid.

use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use iterion_sandbox::{LogLevel, RunLog, Spec};

use crate::records::events::Event;
use crate::records::sandbox_events::{SandboxWorkspaceCopied, SandboxWorkspaceLanded};
use crate::records::sink::EventSink;
use crate::sandbox::error::SetupError;
use crate::sandbox::start_ctx::StartCtx;

/// The uid:gid an untrusted sandbox runs as when the spec names no numeric non-root user and
/// the engine is root (the distroless `nonroot` convention).
pub(crate) const UNTRUSTED_UID: u32 = 65532;

/// Issue 15 item 4: an untrusted sandbox never runs as root. A numeric non-root `user` of the
/// spec is kept; anything else (unset, a name, `0`, `root`) becomes [`UNTRUSTED_UID`] when the
/// engine is root, or the engine's own uid:gid when it is not (a rootless engine's root is that
/// user already). `HOME` defaults to `/tmp` (the uid has no home in the image). Returns the
/// owner to give the workspace copy (root engine only).
pub(crate) fn untrusted_user(spec: &mut Spec) -> Option<(u32, u32)> {
    let engine = crate::sandbox::mounts::host_ids();
    let ids = match (engine, numeric_non_root(spec.user.as_deref())) {
        (Some((0, _)), Some(ids)) => ids,
        (Some((0, _)), None) | (None, _) => (UNTRUSTED_UID, UNTRUSTED_UID),
        (Some(own), _) => own,
    };
    spec.user = Some(format!("{}:{}", ids.0, ids.1));
    spec.env
        .entry("HOME".to_owned())
        .or_insert_with(|| "/tmp".to_owned());
    matches!(engine, Some((0, _))).then_some(ids)
}

/// `uid` or `uid:gid`, both numeric and the uid not 0. Pure.
pub(crate) fn numeric_non_root(user: Option<&str>) -> Option<(u32, u32)> {
    let user = user?.trim();
    let (uid, gid) = match user.split_once(':') {
        Some((u, g)) => (u.parse::<u32>().ok()?, g.parse::<u32>().ok()?),
        None => {
            let uid = user.parse::<u32>().ok()?;
            (uid, uid)
        }
    };
    (uid != 0).then_some((uid, gid))
}

/// An untrusted run's copy and where its result goes (see [`prepare`]).
pub(crate) struct UntrustedLanding {
    /// The host workspace the run was given (read, never written).
    pub source: PathBuf,
    /// The copy: the sandbox's workspace (host-bind drivers) or what a driver copies in.
    pub copy: PathBuf,
    /// What is landed: the copy itself, or the dir a copy-based driver exports into.
    pub result: PathBuf,
    /// The host repository holding `source`, and its `HEAD`.
    pub repo: Option<PathBuf>,
    pub head: Option<String>,
    /// The throwaway repository used without a host one.
    pub scratch_repo: PathBuf,
    /// `<runtime root>/copies/<run id>`, holding both; removed after the landing.
    pub dir: PathBuf,
    pub branch: String,
    pub patch: PathBuf,
    pub message: String,
    pub events: Arc<dyn EventSink>,
    /// The run's redactor: no secret value is landed (issue 15 item 8).
    pub redactor: Arc<crate::records::secrets::Redactor>,
    /// The engine's environment, whose `GIT_*` variables git runs without.
    pub host: iterion_vocab::Environment,
    /// The bundle's skills and what of them went into the copy, taken back before landing.
    pub skills: Vec<iterion_dsl::ir::Skill>,
    pub mirrored: crate::sandbox::skills::Mirrored,
}

/// Plans the copy: screens the checkout, points the sandbox's workspace folder at the host path
/// (the run sees its usual path), and says where the copy goes and what the landing needs.
/// Reads only; [`make`] makes the copy. On a host-bind driver the copy is the sandbox's workspace
/// and what is landed; on a driver that copies in itself (kubernetes) the copy is what it copies
/// in — never the checkout, whose `.git/config` may carry tokens — and its export lands in a
/// fresh empty `result` dir, so a file the run deleted stays deleted.
pub(crate) async fn plan(
    ctx: &StartCtx<'_>,
    spec: &mut Spec,
    host_binds: bool,
) -> Result<UntrustedLanding, SetupError> {
    let source = ctx.mount_inputs.workspace.clone();
    // The checkout is screened as a workspace before anything of it is copied: a copy of a
    // directory holding the store or a runtime root would hand them over as surely as a bind.
    let scope = ctx.mount_inputs.mount_scope();
    let screened = {
        let source = source.clone();
        let env = ctx.mount_inputs.env.clone();
        tokio::task::spawn_blocking(move || {
            iterion_sandbox::ScreenContext::from_env(&source, &env)?
                .for_run(iterion_sandbox::Trust::Untrusted, &scope)
                .validate_workspace(&source)
        })
        .await
    };
    match screened {
        Ok(Ok(_)) => {}
        Ok(Err(error)) => return Err(SetupError::classify(&error)),
        Err(error) => return Err(SetupError::failed(format!("sandbox: {error}"))),
    }
    if spec.workspace_folder.is_none() {
        spec.workspace_folder = Some(source.to_string_lossy().into_owned());
    }
    let dir = crate::sandbox::rundir::copy_dir(ctx.run_id, &ctx.mount_inputs.env);
    let copy = dir.join("workspace");
    let result = if host_binds {
        copy.clone()
    } else {
        dir.join("result")
    };
    let host = &ctx.mount_inputs.env;
    let repo = crate::sandbox::workspace::repository_root_of(&source, host).await;
    let head = match &repo {
        Some(repo) => crate::sandbox::git::HostGit::plain(repo, host)
            .run(&["rev-parse", "--verify", "-q", "HEAD^{commit}"])
            .await
            .ok()
            .filter(|h| !h.is_empty()),
        None => None,
    };
    Ok(UntrustedLanding {
        source,
        copy,
        result,
        repo,
        head,
        scratch_repo: dir.join("landing.git"),
        dir,
        branch: crate::sandbox::worktree::worktree_branch(ctx.workflow, ctx.run_id),
        patch: ctx
            .mount_inputs
            .iterion_home
            .join("runs")
            .join(ctx.run_id)
            .join("changes.patch"),
        message: format!("iterion run {} (untrusted)", ctx.run_id),
        host: host.clone(),
        skills: ctx.skills.to_vec(),
        mirrored: crate::sandbox::skills::Mirrored::default(),
        events: Arc::clone(&ctx.event_sink),
        redactor: Arc::clone(&ctx.redactor),
    })
}

/// Makes the planned copy: `<runtime root>/copies/<run id>` (a stale one of a dead attempt is
/// replaced), the copy owned by `owner`, and the empty `result` dir of a copy-based driver. On a
/// failure nothing of it is left.
pub(crate) async fn make(
    ctx: &StartCtx<'_>,
    landing: &mut UntrustedLanding,
    owner: Option<(u32, u32)>,
) -> Result<(), SetupError> {
    let dir =
        crate::sandbox::rundir::create_copy_dir(ctx.run_id, ctx.store_id, &ctx.mount_inputs.env)
            .await?;
    debug_assert_eq!(dir, landing.dir);
    let stats = match copy_workspace(&landing.source, &landing.copy, owner).await {
        Ok(stats) => stats,
        Err(error) => {
            crate::sandbox::rundir::remove(&dir).await;
            return Err(error);
        }
    };
    ctx.events
        .emit(Event::SandboxWorkspaceCopied(SandboxWorkspaceCopied {
            source: landing.source.to_string_lossy().into_owned(),
            files: stats.files as u64,
            bytes: stats.bytes,
            skipped: stats.skipped as u64,
        }))
        .await;
    if landing.result != landing.copy
        && let Err(e) = std::fs::create_dir(&landing.result)
    {
        crate::sandbox::rundir::remove(&dir).await;
        return Err(SetupError::failed(format!(
            "cannot create {}: {e}",
            landing.result.display()
        )));
    }
    // A bundle's skills go into the copy, owned by its uid, never into the checkout.
    match crate::sandbox::skills::mirror_blocking(&landing.copy, &landing.skills, owner).await {
        Ok(mirrored) => landing.mirrored = mirrored,
        Err(message) => {
            crate::sandbox::rundir::remove(&dir).await;
            return Err(SetupError::failed(message));
        }
    }
    Ok(())
}

impl UntrustedLanding {
    /// Lands the copy (the container is gone) and says what came of it; then the run files
    /// the sandbox wrote are drained into the store, screened.
    pub(crate) async fn land(self, run_log: &dyn RunLog) {
        self.drain_files(run_log).await;
        // The skills the engine put into the copy are not the run's changes.
        crate::sandbox::skills::unmirror_blocking(
            &self.result,
            &self.skills,
            self.mirrored.clone(),
        )
        .await;
        let plan = crate::sandbox::landing::LandingPlan {
            repo: self.repo.as_deref(),
            scratch_repo: &self.scratch_repo,
            head: self.head.as_deref(),
            start: Some(&self.source),
            result: &self.result,
            branch: &self.branch,
            patch: &self.patch,
            message: &self.message,
            redactor: Some(&self.redactor),
            host: &self.host,
        };
        let event = match crate::sandbox::landing::land(&plan).await {
            Ok(crate::sandbox::landing::Landed::Changes {
                branch,
                commit,
                base,
                patch,
            }) => {
                run_log.line(
                    LogLevel::Info,
                    &format!(
                        "sandbox: the untrusted run's changes are on {} ({commit}), patch {}",
                        branch.as_deref().unwrap_or("no branch (no repository)"),
                        patch.display()
                    ),
                );
                SandboxWorkspaceLanded {
                    changed: true,
                    branch,
                    commit: Some(commit),
                    base: Some(base),
                    patch: Some(patch.to_string_lossy().into_owned()),
                    error: None,
                }
            }
            Ok(crate::sandbox::landing::Landed::Unchanged) => SandboxWorkspaceLanded {
                changed: false,
                branch: None,
                commit: None,
                base: None,
                patch: None,
                error: None,
            },
            Err(error) => {
                run_log.line(
                    LogLevel::Warn,
                    &format!("sandbox: landing the untrusted run's copy: {error}"),
                );
                SandboxWorkspaceLanded {
                    changed: false,
                    branch: None,
                    commit: None,
                    base: None,
                    patch: None,
                    error: Some(error.to_string()),
                }
            }
        };
        self.events.emit(Event::SandboxWorkspaceLanded(event)).await;
        crate::sandbox::rundir::remove(&self.dir).await;
    }

    /// `<copy dir>/files` into `<ITERION_HOME>/runs/<run id>/files`: directories and regular
    /// files only (read without following a symlink), bounded like the kubernetes drain;
    /// anything else is named in the run log and left behind.
    async fn drain_files(&self, run_log: &dyn RunLog) {
        let from = self.dir.join(crate::sandbox::mounts::UNTRUSTED_FILES);
        let Some(to) = self.patch.parent().map(|p| p.join("files")) else {
            return;
        };
        let outcome = tokio::task::spawn_blocking(move || {
            let mut drain = Drain::default();
            let result = drain.dir(&from, &to);
            (drain, result)
        })
        .await;
        match outcome {
            Ok((drain, result)) => {
                for name in &drain.declined {
                    run_log.line(
                        LogLevel::Warn,
                        &format!("sandbox: run file {name:?} not drained (not a regular file)"),
                    );
                }
                if let Err(error) = result {
                    run_log.line(
                        LogLevel::Warn,
                        &format!("sandbox: draining the run files: {error}"),
                    );
                }
            }
            Err(error) => run_log.line(
                LogLevel::Warn,
                &format!("sandbox: draining the run files: {error}"),
            ),
        }
    }

    /// A setup that failed after the copy: the copy goes, nothing is landed.
    pub(crate) async fn discard(self) {
        crate::sandbox::rundir::remove(&self.dir).await;
    }
}

/// At most this many bytes of file content are copied for an untrusted run.
pub(crate) const MAX_COPY_BYTES: u64 = 8 * 1024 * 1024 * 1024;
/// At most this many entries are copied.
pub(crate) const MAX_COPY_ENTRIES: usize = 1_000_000;

/// What was copied.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct CopyStats {
    pub files: usize,
    pub bytes: u64,
    /// Special files left out.
    pub skipped: usize,
}

/// Copies the workspace `source` into `dest` (which must not exist), owned by `owner` when
/// given. Blocking work runs on the blocking pool.
pub(crate) async fn copy_workspace(
    source: &Path,
    dest: &Path,
    owner: Option<(u32, u32)>,
) -> Result<CopyStats, SetupError> {
    let (source, dest) = (source.to_owned(), dest.to_owned());
    tokio::task::spawn_blocking(move || {
        let mut copier = Copier {
            owner,
            stats: CopyStats::default(),
            entries: 0,
        };
        copier.copy_root(&source, &dest).map_err(|e| {
            SetupError::failed(format!(
                "sandbox: cannot copy the workspace {} for an untrusted run: {e}",
                source.display()
            ))
        })?;
        Ok(copier.stats)
    })
    .await
    .map_err(|e| SetupError::failed(format!("sandbox: the workspace copy failed: {e}")))?
}

/// Why a copy failed.
#[derive(Debug, thiserror::Error)]
enum CopyError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the workspace is larger than an untrusted run may copy ({what}); run it from a smaller checkout"
    )]
    TooLarge { what: String },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CopyError + '_ {
    move |source| CopyError::Io {
        path: path.to_owned(),
        source,
    }
}

struct Copier {
    owner: Option<(u32, u32)>,
    stats: CopyStats,
    entries: usize,
}

/// The `config` of a copied `.git`: only what git needs to read the repository.
const MINIMAL_GIT_CONFIG: &str =
    "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n";

impl Copier {
    fn copy_root(&mut self, source: &Path, dest: &Path) -> Result<(), CopyError> {
        self.make_dir(dest, 0o755)?;
        self.copy_dir(source, dest, true)
    }

    fn count(&mut self) -> Result<(), CopyError> {
        self.entries += 1;
        if self.entries > MAX_COPY_ENTRIES {
            return Err(CopyError::TooLarge {
                what: format!("more than {MAX_COPY_ENTRIES} entries"),
            });
        }
        Ok(())
    }

    fn make_dir(&mut self, dest: &Path, mode: u32) -> Result<(), CopyError> {
        std::fs::create_dir(dest).map_err(io(dest))?;
        std::fs::set_permissions(dest, std::fs::Permissions::from_mode(mode & 0o777 | 0o700))
            .map_err(io(dest))?;
        self.chown(dest)
    }

    fn chown(&self, path: &Path) -> Result<(), CopyError> {
        if let Some((uid, gid)) = self.owner {
            std::os::unix::fs::lchown(path, Some(uid), Some(gid)).map_err(io(path))?;
        }
        Ok(())
    }

    fn copy_dir(&mut self, source: &Path, dest: &Path, root: bool) -> Result<(), CopyError> {
        for entry in std::fs::read_dir(source).map_err(io(source))? {
            let entry = entry.map_err(io(source))?;
            let name = entry.file_name();
            let from = source.join(&name);
            let to = dest.join(&name);
            if root && name == ".git" {
                self.copy_git(&from, &to)?;
                continue;
            }
            self.copy_entry(&from, &to)?;
        }
        Ok(())
    }

    fn copy_entry(&mut self, from: &Path, to: &Path) -> Result<(), CopyError> {
        self.count()?;
        let meta = std::fs::symlink_metadata(from).map_err(io(from))?;
        let kind = meta.file_type();
        if kind.is_dir() {
            self.make_dir(to, meta.permissions().mode())?;
            self.copy_dir(from, to, false)
        } else if kind.is_symlink() {
            let target = std::fs::read_link(from).map_err(io(from))?;
            std::os::unix::fs::symlink(&target, to).map_err(io(to))?;
            self.chown(to)
        } else if kind.is_file() {
            self.copy_file(from, to)
        } else {
            self.stats.skipped += 1;
            Ok(())
        }
    }

    /// A regular file, opened without following a symlink (and without blocking on a fifo put
    /// in its place), its permission bits only.
    fn copy_file(&mut self, from: &Path, to: &Path) -> Result<(), CopyError> {
        let Some(src) = crate::sandbox::nofollow::open_regular(from).map_err(io(from))? else {
            self.stats.skipped += 1;
            return Ok(());
        };
        let meta = src.metadata().map_err(io(from))?;
        let budget = MAX_COPY_BYTES.saturating_sub(self.stats.bytes);
        let mut dst = crate::sandbox::nofollow::create(to, meta.permissions().mode() & 0o777, true)
            .map_err(io(to))?;
        let copied = std::io::copy(&mut src.take(budget + 1), &mut dst).map_err(io(to))?;
        if copied > budget {
            return Err(CopyError::TooLarge {
                what: format!("more than {MAX_COPY_BYTES} bytes"),
            });
        }
        std::fs::set_permissions(
            to,
            std::fs::Permissions::from_mode(meta.permissions().mode() & 0o777),
        )
        .map_err(io(to))?;
        self.stats.files += 1;
        self.stats.bytes += copied;
        self.chown(to)
    }

    /// The repository's git dir, without `hooks/` (and without a linked worktree's
    /// `worktrees/`), with a minimal `config`.
    fn copy_git(&mut self, from: &Path, to: &Path) -> Result<(), CopyError> {
        let meta = std::fs::symlink_metadata(from).map_err(io(from))?;
        let (common, worktree_dir) = if meta.is_dir() {
            (from.to_owned(), None)
        } else if meta.is_file() {
            // A linked worktree: `gitdir: <dir>`, whose `commondir` names the shared git dir.
            // Followed only when that git dir names this gitfile back (a real linked worktree):
            // a hostile `.git` file naming a key dir or another repository copies nothing.
            let Some(gitdir) = read_small(from)
                .and_then(|t| gitfile_target(&t, from))
                .filter(|gitdir| names_back(gitdir, from))
            else {
                self.stats.skipped += 1;
                return Ok(());
            };
            let common = read_small(&gitdir.join("commondir"))
                .map(|c| gitdir.join(c.trim()))
                .unwrap_or_else(|| gitdir.clone());
            (common, Some(gitdir))
        } else {
            self.stats.skipped += 1;
            return Ok(());
        };
        self.make_dir(to, 0o755)?;
        for entry in std::fs::read_dir(&common).map_err(io(&common))? {
            let entry = entry.map_err(io(&common))?;
            let name = entry.file_name();
            if matches!(
                name.as_bytes(),
                b"hooks" | b"config" | b"worktrees" | b"info"
            ) {
                continue;
            }
            if worktree_dir.is_some() && matches!(name.as_bytes(), b"HEAD" | b"index") {
                continue;
            }
            self.copy_entry(&common.join(&name), &to.join(&name))?;
        }
        if let Some(gitdir) = worktree_dir {
            for name in ["HEAD", "index"] {
                let file = gitdir.join(name);
                if std::fs::symlink_metadata(&file).is_ok_and(|m| m.is_file()) {
                    self.copy_file(&file, &to.join(name))?;
                }
            }
        }
        let config = to.join("config");
        std::fs::write(&config, MINIMAL_GIT_CONFIG).map_err(io(&config))?;
        self.chown(&config)
    }
}

/// A setup that failed after the copy was made: the copy (if any) goes, nothing is landed.
pub(crate) async fn discard(landing: Option<Box<UntrustedLanding>>) {
    if let Some(landing) = landing {
        landing.discard().await;
    }
}

/// The bound of the run-files drain (as SANDBOX.md §5.11's).
const DRAIN_MAX_BYTES: u64 = 256 * 1024 * 1024;

#[derive(Default)]
struct Drain {
    bytes: u64,
    declined: Vec<String>,
}

impl Drain {
    fn dir(&mut self, from: &Path, to: &Path) -> Result<(), CopyError> {
        let entries = match std::fs::read_dir(from) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io(from)(e)),
        };
        std::fs::create_dir_all(to).map_err(io(to))?;
        for entry in entries {
            let entry = entry.map_err(io(from))?;
            let (src, dst) = (from.join(entry.file_name()), to.join(entry.file_name()));
            let meta = std::fs::symlink_metadata(&src).map_err(io(&src))?;
            if meta.is_dir() {
                self.dir(&src, &dst)?;
            } else if meta.is_file() {
                let Some(file) = crate::sandbox::nofollow::open_regular(&src).map_err(io(&src))?
                else {
                    self.declined.push(src.to_string_lossy().into_owned());
                    continue;
                };
                let budget = DRAIN_MAX_BYTES.saturating_sub(self.bytes);
                let mut out =
                    crate::sandbox::nofollow::create(&dst, 0o644, false).map_err(io(&dst))?;
                let copied =
                    std::io::copy(&mut file.take(budget + 1), &mut out).map_err(io(&dst))?;
                if copied > budget {
                    return Err(CopyError::TooLarge {
                        what: format!("run files over {DRAIN_MAX_BYTES} bytes"),
                    });
                }
                self.bytes += copied;
            } else {
                self.declined.push(src.to_string_lossy().into_owned());
            }
        }
        Ok(())
    }
}

/// A small text file's content (a gitfile, a commondir), not following a symlink.
fn read_small(path: &Path) -> Option<String> {
    let file = crate::sandbox::nofollow::open_regular(path).ok()??;
    let mut text = String::new();
    file.take(4096).read_to_string(&mut text).ok()?;
    Some(text)
}

/// Whether `<gitdir>/gitdir` names `gitfile` (both canonical).
fn names_back(gitdir: &Path, gitfile: &Path) -> bool {
    let Some(back) = read_small(&gitdir.join("gitdir")) else {
        return false;
    };
    match (
        std::fs::canonicalize(back.trim()),
        std::fs::canonicalize(gitfile),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// The directory a gitfile names ([`iterion_sandbox_kubernetes::parse_gitfile`]), relative to the
/// gitfile's own directory. Pure.
fn gitfile_target(text: &str, gitfile: &Path) -> Option<PathBuf> {
    let target = Path::new(iterion_sandbox_kubernetes::parse_gitfile(text)?);
    Some(if target.is_absolute() {
        target.to_owned()
    } else {
        gitfile.parent()?.join(target)
    })
}

#[cfg(test)]
#[path = "copy_tests.rs"]
mod tests;
