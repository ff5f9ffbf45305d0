//! The one reader of files a repository contributes to a run's setup (issue 15 item 12): the
//! devcontainer, `devbox.json` and its lock, `.dockerignore` and the build context's files,
//! subbot sources.
//!
//! A repository is written by whoever opened the pull request, so every such file is read by
//! these rules, and a breach is a typed [`RepoFileError`] naming the file and the rule:
//!
//! 1. **Beneath the repository.** The file is opened relative to a handle on the repository root
//!    with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`: the kernel resolves every
//!    component, and any `..`, absolute symlink or relative symlink that leaves the root fails
//!    (a symlink that stays inside is followed). There is no window between a check and the open
//!    for a swap to use: what is read is what was resolved. Where `openat2` is unavailable
//!    (kernels before 5.6, seccomp profiles that hide it) the walk is done component by component
//!    with `O_NOFOLLOW`, refusing every symlink and every `..`.
//! 2. **A regular file.** The open never blocks (`O_NONBLOCK`, so a FIFO with no writer cannot
//!    hang it) and the *opened fd* is `fstat`ed: a FIFO, a socket, a device (`/dev/stdin`,
//!    `/dev/zero`), a directory is refused.
//! 3. **Size-capped.** At most `limit` bytes are read; one byte more is [`RepoFileError::TooLarge`].
//! 4. **Time-bounded.** [`read_beneath`] and [`read_regular`] give up after [`READ_TIMEOUT`]
//!    (a file on a stalled network filesystem); the reading thread is abandoned, never joined.
//!
//! [`read_regular`] applies rules 2–4 to a file with no repository around it (a workflow named
//! on the command line that lies outside any repository).

use std::fs::File;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileTypeExt;
use std::path::{Component, Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag, open, openat, openat2};
use nix::sys::stat::Mode;

/// How long one read may take before it is abandoned (defined here).
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a repository file was not read. Every variant names the file (as the caller spelled it)
/// and the rule it broke.
#[derive(Debug, thiserror::Error)]
pub enum RepoFileError {
    /// Nothing at that path (a dangling symlink inside the repository included).
    #[error("{path}: not found", path = .path.display())]
    NotFound {
        /// The file.
        path: PathBuf,
    },
    /// The path, or a symlink on it, leads outside the repository root.
    #[error(
        "{path}: refused: it resolves outside the repository {root} (a repository file must lie inside the repository; `..` and symlinks may not leave it)",
        path = .path.display(),
        root = .root.display()
    )]
    OutsideRepository {
        /// The file.
        path: PathBuf,
        /// The repository root.
        root: PathBuf,
    },
    /// A symlink on the path, where symlinks cannot be checked (the `O_NOFOLLOW` fallback).
    #[error(
        "{path}: refused: a symlink on the path (a repository file must be reached without symlinks on this kernel)",
        path = .path.display()
    )]
    Symlink {
        /// The file.
        path: PathBuf,
    },
    /// Not a regular file.
    #[error(
        "{path}: refused: a {kind}, not a regular file (a repository file must be a regular file)",
        path = .path.display()
    )]
    NotRegular {
        /// The file.
        path: PathBuf,
        /// `directory`, `fifo`, `socket`, `character device`, `block device`.
        kind: &'static str,
    },
    /// Larger than the caller's cap.
    #[error(
        "{path}: refused: larger than {limit} bytes (the cap for this file)",
        path = .path.display()
    )]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The cap.
        limit: u64,
    },
    /// The read did not finish within [`READ_TIMEOUT`].
    #[error(
        "{path}: refused: not read within {secs} s (a repository file must be readable at once)",
        path = .path.display(),
        secs = .timeout.as_secs()
    )]
    TimedOut {
        /// The file.
        path: PathBuf,
        /// The bound.
        timeout: Duration,
    },
    /// Any other I/O error.
    #[error("{path}: {source}", path = .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl RepoFileError {
    /// A stable name of the rule that refused the file.
    pub fn rule(&self) -> &'static str {
        match self {
            RepoFileError::NotFound { .. } => "not_found",
            RepoFileError::OutsideRepository { .. } => "outside_repository",
            RepoFileError::Symlink { .. } => "symlink",
            RepoFileError::NotRegular { .. } => "not_regular",
            RepoFileError::TooLarge { .. } => "too_large",
            RepoFileError::TimedOut { .. } => "timed_out",
            RepoFileError::Io { .. } => "io",
        }
    }

    /// Whether the file is simply absent.
    pub fn is_not_found(&self) -> bool {
        matches!(self, RepoFileError::NotFound { .. })
    }
}

/// `path` relative to `root`, lexically (no filesystem access): the form [`open_beneath`] takes.
/// A path that is not below `root` as written is [`RepoFileError::OutsideRepository`].
///
/// # Errors
///
/// [`RepoFileError::OutsideRepository`].
pub fn relative_to(root: &Path, path: &Path) -> Result<PathBuf, RepoFileError> {
    if path.is_relative() {
        return Ok(path.to_owned());
    }
    path.strip_prefix(root)
        .map(Path::to_path_buf)
        .map_err(|_| RepoFileError::OutsideRepository {
            path: path.to_owned(),
            root: root.to_owned(),
        })
}

/// A directory held open by its fd: every file opened through it is resolved beneath *that*
/// directory, whatever its path points at later (a workspace component flipped to a symlink
/// after the root was opened cannot redirect the opens).
#[derive(Debug)]
pub struct RepoRoot {
    fd: OwnedFd,
    path: PathBuf,
}

impl RepoRoot {
    /// Opens the directory `path` (the operator's path; it may be a symlink).
    ///
    /// # Errors
    ///
    /// [`RepoFileError::NotFound`], [`RepoFileError::Io`] (not a directory included).
    pub fn open(path: &Path) -> Result<RepoRoot, RepoFileError> {
        let fd = open(
            path,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|errno| io_error(path, errno))?;
        Ok(RepoRoot {
            fd,
            path: path.to_owned(),
        })
    }

    /// The path it was opened at (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory `relative` beneath this one, held open by its own fd (rule 1).
    ///
    /// # Errors
    ///
    /// As [`RepoRoot::open_file`]; a non-directory is [`RepoFileError::NotRegular`].
    pub fn open_dir(&self, relative: &Path) -> Result<RepoRoot, RepoFileError> {
        if relative.as_os_str().is_empty() || relative == Path::new(".") {
            let fd = self.fd.try_clone().map_err(|source| RepoFileError::Io {
                path: self.path.clone(),
                source,
            })?;
            return Ok(RepoRoot {
                fd,
                path: self.path.clone(),
            });
        }
        let shown = self.path.join(relative);
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        match self.resolve(relative, flags, &shown) {
            Ok(fd) => Ok(RepoRoot { fd, path: shown }),
            Err(RepoFileError::Io { source, .. })
                if source.raw_os_error() == Some(Errno::ENOTDIR as i32) =>
            {
                Err(RepoFileError::NotRegular {
                    path: shown,
                    kind: "non-directory",
                })
            }
            Err(other) => Err(other),
        }
    }

    /// Opens `relative` beneath this directory by rules 1 and 2 and returns the open regular
    /// file.
    ///
    /// # Errors
    ///
    /// Every [`RepoFileError`] but `TooLarge` and `TimedOut`.
    pub fn open_file(&self, relative: &Path) -> Result<File, RepoFileError> {
        let shown = self.path.join(relative);
        let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY | OFlag::O_CLOEXEC;
        let fd = self.resolve(relative, flags, &shown)?;
        regular(File::from(fd), &shown)
    }

    /// Reads `relative` beneath this directory: rules 1–3 (the file is regular, so the read
    /// cannot block on a pipe or a device).
    ///
    /// # Errors
    ///
    /// Every [`RepoFileError`] but `TimedOut`.
    pub fn read(&self, relative: &Path, limit: u64) -> Result<Vec<u8>, RepoFileError> {
        let file = self.open_file(relative)?;
        read_capped(file, limit, &self.path.join(relative))
    }

    fn resolve(
        &self,
        relative: &Path,
        flags: OFlag,
        shown: &Path,
    ) -> Result<OwnedFd, RepoFileError> {
        let outside = || RepoFileError::OutsideRepository {
            path: shown.to_owned(),
            root: self.path.clone(),
        };
        if relative.is_absolute() {
            return Err(outside());
        }
        let how = OpenHow::new()
            .flags(flags)
            .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS);
        match openat2(&self.fd, relative, how) {
            Ok(fd) => Ok(fd),
            Err(Errno::EXDEV) => Err(outside()),
            Err(Errno::ELOOP) => Err(RepoFileError::Symlink {
                path: shown.to_owned(),
            }),
            Err(Errno::ENOSYS | Errno::EPERM | Errno::E2BIG) => {
                let root_fd = self.fd.try_clone().map_err(|source| RepoFileError::Io {
                    path: shown.to_owned(),
                    source,
                })?;
                walk_without_symlinks(root_fd, relative, flags, shown, &self.path)
            }
            Err(errno) => Err(io_error(shown, errno)),
        }
    }
}

/// Opens `relative` beneath `root` by the rules of the module (1 and 2) and returns the open
/// regular file. `root` itself is the operator's path (it may be a symlink).
///
/// # Errors
///
/// Every [`RepoFileError`] but `TooLarge` and `TimedOut`.
pub fn open_beneath(root: &Path, relative: &Path) -> Result<File, RepoFileError> {
    RepoRoot::open(root)
        .map_err(|error| match error {
            RepoFileError::NotFound { .. } => RepoFileError::NotFound {
                path: root.join(relative),
            },
            other => other,
        })?
        .open_file(relative)
}

/// The fallback of rule 1: one component at a time, each `O_NOFOLLOW`; `..` refused.
fn walk_without_symlinks(
    root_fd: OwnedFd,
    relative: &Path,
    flags: OFlag,
    shown: &Path,
    root: &Path,
) -> Result<OwnedFd, RepoFileError> {
    let parts: Vec<&std::ffi::OsStr> = relative
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(Ok(name)),
            Component::CurDir => None,
            _ => Some(Err(())),
        })
        .collect::<Result<_, ()>>()
        .map_err(|()| RepoFileError::OutsideRepository {
            path: shown.to_owned(),
            root: root.to_owned(),
        })?;
    let Some((last, dirs)) = parts.split_last() else {
        return Err(RepoFileError::NotRegular {
            path: shown.to_owned(),
            kind: "directory",
        });
    };
    let mut dir = root_fd;
    for name in dirs {
        dir = openat(
            &dir,
            *name,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|errno| symlink_or_io(shown, errno))?;
    }
    openat(&dir, *last, flags | OFlag::O_NOFOLLOW, Mode::empty())
        .map_err(|errno| symlink_or_io(shown, errno))
}

fn symlink_or_io(path: &Path, errno: Errno) -> RepoFileError {
    match errno {
        // O_NOFOLLOW on a symlink: ELOOP; O_DIRECTORY|O_NOFOLLOW on one: ENOTDIR.
        Errno::ELOOP | Errno::ENOTDIR => RepoFileError::Symlink {
            path: path.to_owned(),
        },
        other => io_error(path, other),
    }
}

fn io_error(path: &Path, errno: Errno) -> RepoFileError {
    if errno == Errno::ENOENT {
        return RepoFileError::NotFound {
            path: path.to_owned(),
        };
    }
    // open(2) of a unix socket.
    if errno == Errno::ENXIO {
        return RepoFileError::NotRegular {
            path: path.to_owned(),
            kind: "socket",
        };
    }
    RepoFileError::Io {
        path: path.to_owned(),
        source: std::io::Error::from(errno),
    }
}

/// Rule 2 on the opened fd.
fn regular(file: File, shown: &Path) -> Result<File, RepoFileError> {
    let meta = file.metadata().map_err(|source| RepoFileError::Io {
        path: shown.to_owned(),
        source,
    })?;
    let kind = meta.file_type();
    if kind.is_file() {
        return Ok(file);
    }
    let kind = if kind.is_dir() {
        "directory"
    } else if kind.is_fifo() {
        "fifo"
    } else if kind.is_socket() {
        "socket"
    } else if kind.is_char_device() {
        "character device"
    } else if kind.is_block_device() {
        "block device"
    } else {
        "special file"
    };
    Err(RepoFileError::NotRegular {
        path: shown.to_owned(),
        kind,
    })
}

/// Rule 3: at most `limit` bytes of an open file.
fn read_capped(mut file: File, limit: u64, shown: &Path) -> Result<Vec<u8>, RepoFileError> {
    let mut bytes = Vec::new();
    (&mut file)
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|source| RepoFileError::Io {
            path: shown.to_owned(),
            source,
        })?;
    if bytes.len() as u64 > limit {
        return Err(RepoFileError::TooLarge {
            path: shown.to_owned(),
            limit,
        });
    }
    Ok(bytes)
}

/// Rule 4: `read` on its own thread, abandoned after [`READ_TIMEOUT`].
fn bounded(
    shown: PathBuf,
    read: impl FnOnce() -> Result<Vec<u8>, RepoFileError> + Send + 'static,
) -> Result<Vec<u8>, RepoFileError> {
    let (tx, rx) = mpsc::sync_channel(1);
    let spawned = std::thread::Builder::new()
        .name("iterion-repofile".to_owned())
        .spawn(move || {
            let _ = tx.send(read());
        });
    if let Err(source) = spawned {
        return Err(RepoFileError::Io {
            path: shown,
            source,
        });
    }
    match rx.recv_timeout(READ_TIMEOUT) {
        Ok(result) => result,
        Err(_) => Err(RepoFileError::TimedOut {
            path: shown,
            timeout: READ_TIMEOUT,
        }),
    }
}

/// Reads `relative` beneath the repository `root` by every rule of the module.
///
/// # Errors
///
/// Any [`RepoFileError`].
pub fn read_beneath(root: &Path, relative: &Path, limit: u64) -> Result<Vec<u8>, RepoFileError> {
    let (root, relative) = (root.to_owned(), relative.to_owned());
    let shown = root.join(&relative);
    let inner = shown.clone();
    bounded(shown, move || {
        let file = open_beneath(&root, &relative)?;
        read_capped(file, limit, &inner)
    })
}

/// [`read_beneath`] as UTF-8 text.
///
/// # Errors
///
/// Any [`RepoFileError`]; invalid UTF-8 is [`RepoFileError::Io`] of kind `InvalidData`.
pub fn read_text_beneath(
    root: &Path,
    relative: &Path,
    limit: u64,
) -> Result<String, RepoFileError> {
    let bytes = read_beneath(root, relative, limit)?;
    String::from_utf8(bytes).map_err(|error| RepoFileError::Io {
        path: root.join(relative),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, error),
    })
}

/// Rules 2–4 for a file outside any repository (symlinks followed: the operator named it).
///
/// # Errors
///
/// Any [`RepoFileError`] but `OutsideRepository` and `Symlink`.
pub fn read_regular(path: &Path, limit: u64) -> Result<Vec<u8>, RepoFileError> {
    let shown = path.to_owned();
    let inner = shown.clone();
    bounded(shown, move || {
        let fd = open(
            &inner,
            OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|errno| io_error(&inner, errno))?;
        let file = regular(File::from(fd), &inner)?;
        read_capped(file, limit, &inner)
    })
}

#[cfg(test)]
mod tests;
