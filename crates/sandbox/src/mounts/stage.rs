//! Pinning an author bind source (issue 15 item 1): what the container engine mounts is exactly
//! what was screened.
//!
//! Screening judges a *path*; the container engine resolves the path again when it mounts, and
//! a sandbox that can write a directory on the way (a SANDBOX.md §14 child under a bind-mount
//! parent shares the parent's workspace) can swap a component for a symlink in between. So
//! [`Stager::pin`]:
//!
//! 1. opens the screened canonical source from `/` with `openat2(O_PATH | O_NOFOLLOW,
//!    RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH)` (a component-by-component
//!    `O_PATH | O_NOFOLLOW` walk where `openat2` is missing): any symlink met refuses the mount;
//! 2. judges the opened object: a directory or a regular file, whose kernel name (read back from
//!    `/proc/self/fd/<n>`) is still the screened path;
//! 3. bind-mounts the fd (`/proc/self/fd/<n>`, plain `MS_BIND`, so nothing mounted below the
//!    source comes along) onto `<run dir>/stage/<n>` — under the per-run dir, inside the private
//!    runtime root, where no sandbox reaches — and hands the container engine that path. A
//!    read-only mount is also remounted read-only there.
//!
//! The stage is released ([`Stager::release`], [`release_staged`]) once the container has
//! started (its mount namespace holds its own reference), and on every failure path; the run dir
//! is only ever removed through [`remove_run_dir`], which detaches any staged mount first and
//! never recurses into one.
//!
//! An engine without the privilege to mount (not root) cannot stage: [`Stager::pin`] then
//! refuses a source inside a directory a live sandbox can write
//! ([`MountScope::sandbox_writable`](crate::MountScope)) and binds any other source by its
//! verified canonical path.

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag, open, openat, openat2};
use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat};

use crate::error::{Error, Result};
use crate::mounts::screen::ScreenContext;
use crate::rules::MountRule;

/// The staging dir inside a run dir.
pub const STAGE_DIR: &str = "stage";

/// Whether the engine may mount (decided once per [`Stager`], by trying).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Privilege {
    Unknown,
    CanMount,
    CannotMount,
}

/// The staging mounts of one run's author binds.
#[derive(Debug)]
pub struct Stager {
    dir: PathBuf,
    staged: Vec<PathBuf>,
    privilege: Privilege,
}

impl Stager {
    /// A stager for the run dir `run_dir` (which exists, private to the engine).
    pub fn new(run_dir: &Path) -> Stager {
        Stager {
            dir: run_dir.join(STAGE_DIR),
            staged: Vec::new(),
            privilege: Privilege::Unknown,
        }
    }

    /// A stager that never mounts, as an engine without the privilege would (tests of the
    /// fallback).
    pub fn without_mount_privilege(run_dir: &Path) -> Stager {
        let mut stager = Stager::new(run_dir);
        stager.privilege = Privilege::CannotMount;
        stager
    }

    /// The paths staged so far.
    pub fn staged(&self) -> &[PathBuf] {
        &self.staged
    }

    /// Pins the screened canonical source `canonical` of the author mount `mount` (see the
    /// module docs) and returns the path to hand the container engine: the staging mount, or,
    /// on an engine that cannot mount, the verified canonical path.
    ///
    /// # Errors
    ///
    /// [`Error::MountRefused`] when a symlink is met, the object is neither a directory nor a
    /// regular file, it moved, or (without mount privilege) it lies where a live sandbox writes;
    /// [`Error::Io`] when staging fails.
    pub fn pin(
        &mut self,
        mount: &str,
        canonical: &Path,
        read_only: bool,
        ctx: &ScreenContext,
    ) -> Result<PathBuf> {
        self.pin_inner(mount, canonical, read_only, ctx, true)
    }

    /// Pins an engine bind whose source lies inside a directory a live sandbox can write (a
    /// SANDBOX.md §14 child's bundle dir in the shared workspace): the source as the engine
    /// wrote it must be reached without any symlink, and is staged like an author bind. Engine
    /// mounts skip the sensitive-path judgement (SANDBOX.md §5.2), not the pin.
    ///
    /// # Errors
    ///
    /// As [`Stager::pin`].
    pub fn pin_engine(
        &mut self,
        mount: &str,
        source: &Path,
        read_only: bool,
        ctx: &ScreenContext,
    ) -> Result<PathBuf> {
        self.pin_inner(mount, source, read_only, ctx, false)
    }

    fn pin_inner(
        &mut self,
        mount: &str,
        canonical: &Path,
        read_only: bool,
        ctx: &ScreenContext,
        judge: bool,
    ) -> Result<PathBuf> {
        let refuse = |rule| Error::MountRefused {
            mount: mount.to_owned(),
            rule,
        };
        let fd = open_no_symlinks(canonical).map_err(|errno| {
            refuse(match errno {
                Errno::ELOOP | Errno::ENOENT | Errno::ENOTDIR | Errno::EXDEV => {
                    MountRule::SourceChanged(canonical.to_owned())
                }
                other => MountRule::SourceUnresolvable {
                    path: canonical.to_owned(),
                    error: other.desc().to_owned(),
                },
            })
        })?;
        let stat = fstat(fd.as_fd()).map_err(|errno| {
            refuse(MountRule::SourceUnresolvable {
                path: canonical.to_owned(),
                error: errno.desc().to_owned(),
            })
        })?;
        let kind = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
        let is_dir = kind == SFlag::S_IFDIR;
        if kind == SFlag::S_IFLNK {
            return Err(refuse(MountRule::SourceChanged(canonical.to_owned())));
        }
        if !is_dir && kind != SFlag::S_IFREG {
            return Err(refuse(MountRule::SourceNotFileOrDirectory(
                canonical.to_owned(),
            )));
        }
        let proc_path = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
        let named = std::fs::read_link(&proc_path).map_err(|source| Error::Io {
            operation: "read the kernel's name of",
            path: canonical.to_owned(),
            source,
        })?;
        if named != canonical {
            return Err(refuse(MountRule::SourceChanged(canonical.to_owned())));
        }
        if judge && let Some(rule) = ctx.judge_pinned(&named, read_only) {
            return Err(refuse(rule));
        }
        if self.privilege != Privilege::CannotMount {
            match self.stage(&proc_path, &stat, is_dir, read_only) {
                Ok(staged) => {
                    self.privilege = Privilege::CanMount;
                    return Ok(staged);
                }
                Err(StageError::NoPrivilege) if self.privilege == Privilege::Unknown => {
                    self.privilege = Privilege::CannotMount;
                }
                Err(StageError::NoPrivilege) => {
                    return Err(Error::Io {
                        operation: "stage",
                        path: canonical.to_owned(),
                        source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
                    });
                }
                Err(StageError::Io { path, source }) => {
                    return Err(Error::Io {
                        operation: "stage",
                        path,
                        source,
                    });
                }
            }
        }
        if let Some(dir) = ctx.sandbox_writable_dir(&named) {
            return Err(refuse(MountRule::InSandboxWritable {
                path: named.clone(),
                dir: dir.to_owned(),
            }));
        }
        Ok(named)
    }

    fn stage(
        &mut self,
        proc_path: &Path,
        stat: &FileStat,
        is_dir: bool,
        read_only: bool,
    ) -> std::result::Result<PathBuf, StageError> {
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| StageError::Io { path, source }
        };
        if !self.dir.exists() {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&self.dir)
                .map_err(io(&self.dir))?;
        }
        let target = self.dir.join(self.staged.len().to_string());
        if is_dir {
            std::fs::create_dir(&target).map_err(io(&target))?;
        } else {
            File::create_new(&target).map_err(io(&target))?;
        }
        let removed = |target: &Path| {
            let _ = if is_dir {
                std::fs::remove_dir(target)
            } else {
                std::fs::remove_file(target)
            };
        };
        match mount(
            Some(proc_path),
            &target,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        ) {
            Ok(()) => {}
            Err(Errno::EPERM | Errno::EACCES) => {
                removed(&target);
                return Err(StageError::NoPrivilege);
            }
            Err(errno) => {
                removed(&target);
                return Err(StageError::Io {
                    path: target,
                    source: errno.into(),
                });
            }
        }
        self.staged.push(target.clone());
        // The staging mount is the very object that was opened.
        let meta = std::fs::symlink_metadata(&target).map_err(io(&target))?;
        let same = meta.dev() == stat.st_dev && meta.ino() == stat.st_ino;
        if !same {
            return Err(StageError::Io {
                path: target,
                source: std::io::Error::other("the staging mount is not the opened source"),
            });
        }
        if read_only {
            mount(
                None::<&str>,
                &target,
                None::<&str>,
                MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY,
                None::<&str>,
            )
            .map_err(|errno| StageError::Io {
                path: target.clone(),
                source: errno.into(),
            })?;
        }
        Ok(target)
    }

    /// Detaches and removes every staging mount (the container, once started, keeps its own).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] naming the first staging path that could not be released.
    pub fn release(&mut self) -> Result<()> {
        self.staged.clear();
        release_staged_dir(&self.dir)
    }
}

impl Drop for Stager {
    fn drop(&mut self) {
        if !self.staged.is_empty()
            && let Err(error) = self.release()
        {
            tracing::warn!("sandbox: releasing staged mounts: {error}");
        }
    }
}

enum StageError {
    NoPrivilege,
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Opens `path` (absolute, canonical) as an `O_PATH` fd without following any symlink.
fn open_no_symlinks(path: &Path) -> std::result::Result<OwnedFd, Errno> {
    let root = open(
        "/",
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    let relative = path.strip_prefix("/").map_err(|_| Errno::EINVAL)?;
    if relative.as_os_str().is_empty() {
        return Err(Errno::EINVAL);
    }
    // No O_NOFOLLOW: with it, RESOLVE_NO_SYMLINKS hands back an fd of a trailing symlink
    // itself; without it, any symlink, trailing included, is ELOOP.
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
        .resolve(
            ResolveFlag::RESOLVE_NO_SYMLINKS
                | ResolveFlag::RESOLVE_NO_MAGICLINKS
                | ResolveFlag::RESOLVE_BENEATH,
        );
    match openat2(root.as_fd(), relative, how) {
        Err(Errno::ENOSYS) => walk_no_symlinks(root, relative),
        other => other,
    }
}

/// The `openat2`-less fallback: one `O_PATH | O_NOFOLLOW` component at a time, refusing any
/// symlink (`O_PATH | O_NOFOLLOW` opens a symlink itself, so each step is `fstat`ed).
fn walk_no_symlinks(root: OwnedFd, relative: &Path) -> std::result::Result<OwnedFd, Errno> {
    let mut current = root;
    for component in relative.components() {
        let Component::Normal(name) = component else {
            return Err(Errno::EINVAL);
        };
        let next = openat(
            current.as_fd(),
            name,
            OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        let kind = SFlag::from_bits_truncate(fstat(next.as_fd())?.st_mode) & SFlag::S_IFMT;
        if kind == SFlag::S_IFLNK {
            return Err(Errno::ELOOP);
        }
        current = next;
    }
    Ok(current)
}

/// Detaches (`MNT_DETACH`) and removes every entry of `<run dir>/stage`, then the dir: never
/// recursively, so a staging mount that would not detach is left in place (and reported) rather
/// than emptied. Absent is fine.
///
/// # Errors
///
/// [`Error::Io`] naming the first entry that could not be released.
pub(super) fn release_staged(run_dir: &Path) -> Result<()> {
    release_staged_dir(&run_dir.join(STAGE_DIR))
}

fn release_staged_dir(dir: &Path) -> Result<()> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| Error::Io {
            operation: "release staged mount",
            path,
            source,
        }
    };
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(io(dir)(error)),
    };
    let mut first_error = None;
    for entry in entries {
        let path = match entry {
            Ok(entry) => entry.path(),
            Err(error) => {
                first_error.get_or_insert_with(|| io(dir)(error));
                continue;
            }
        };
        // Detach whatever is mounted there (EINVAL: nothing is; EPERM: we could not have
        // mounted it either).
        match umount2(&path, MntFlags::MNT_DETACH | MntFlags::UMOUNT_NOFOLLOW) {
            Ok(()) | Err(Errno::EINVAL | Errno::EPERM | Errno::ENOENT) => {}
            Err(errno) => {
                first_error.get_or_insert_with(|| io(&path)(errno.into()));
                continue;
            }
        }
        let removed = match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => std::fs::remove_dir(&path),
            Ok(_) => std::fs::remove_file(&path),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(error),
        };
        if let Err(error) = removed {
            first_error.get_or_insert_with(|| io(&path)(error));
        }
    }
    if let Some(error) = first_error {
        return Err(error);
    }
    match std::fs::remove_dir(dir) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(io(dir)(error)),
    }
}

/// Removes a run dir: staged mounts first (`release_staged`), and only when they are all gone
/// the dir itself, recursively. Absent is fine.
///
/// # Errors
///
/// [`Error::Io`]: a staged mount could not be released (the dir is then left in place), or the
/// removal failed.
pub fn remove_run_dir(run_dir: &Path) -> Result<()> {
    release_staged(run_dir)?;
    match std::fs::remove_dir_all(run_dir) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(Error::Io {
            operation: "remove",
            path: run_dir.to_owned(),
            source,
        }),
    }
}
