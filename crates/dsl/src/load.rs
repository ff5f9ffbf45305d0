//! Reading a workflow file: bounded in size, beneath the repository when there is one, and the
//! typed reasons a read fails ([`LoadError`] for callers, `ReadFailure` for the subbot loader,
//! which reports one failure under every spelling that names the file).

/// The largest source the loader accepts (DSL.md §1.1); bigger is a [`LoadError::TooLarge`].
pub const MAX_SOURCE_BYTES: u64 = 10 * 1024 * 1024;

/// Why a file could not be read (exit 2 in the CLI; no diagnostic, DSL.md §1.1).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The repository-file reader refused it (issue 15 item 12): not a regular file (a FIFO,
    /// `/dev/stdin`), outside the repository, or not read in time. The message names the rule.
    #[error("cannot read {path}: {message}")]
    Refused {
        /// The path as given.
        path: String,
        /// The rule ([`iterion_repofile::RepoFileError::rule`]).
        rule: &'static str,
        /// The reader's message.
        message: String,
    },
    /// The file could not be opened or read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path as given.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is over [`MAX_SOURCE_BYTES`].
    #[error("{path} is {size} bytes; the limit is {limit} bytes (10 MiB)")]
    TooLarge {
        /// The path as given.
        path: String,
        /// Its size in bytes.
        size: u64,
        /// The limit.
        limit: u64,
    },
}

impl LoadError {
    /// A stable code for machines.
    pub fn code(&self) -> &'static str {
        match self {
            LoadError::Io { .. } => "READ_FAILED",
            LoadError::TooLarge { .. } => "FILE_TOO_LARGE",
            LoadError::Refused { .. } => "FILE_REFUSED",
        }
    }
}

/// The workflow file a path names: the path itself, or for a bundle directory (upstream's
/// layout: `main.bot` at the directory's root, `skills/`, `prompts/` beside it) its `main.bot`.
/// A directory without `main.bot` is returned as is, and fails to load as a directory.
pub fn workflow_file(path: &std::path::Path) -> std::path::PathBuf {
    if path.is_dir() {
        let main = path.join(BUNDLE_MAIN);
        if main.is_file() {
            return main;
        }
    }
    path.to_path_buf()
}

/// The workflow file of a bundle directory.
pub const BUNDLE_MAIN: &str = "main.bot";

/// Reads a workflow file, refusing one over [`MAX_SOURCE_BYTES`] before reading it whole.
pub fn load(path: &std::path::Path) -> Result<Vec<u8>, LoadError> {
    read_bounded(path).map_err(|failure| failure.into_error(path))
}

/// Why a read failed, without the path: the subbot loader reads each file once (by canonical
/// path) and reports a failure under the spelling of each `source` that names it.
#[derive(Debug)]
pub(crate) enum ReadFailure {
    /// The file could not be opened or read.
    Io(std::io::Error),
    /// The file is over [`MAX_SOURCE_BYTES`]; `size` is what was seen.
    TooLarge {
        /// Its size in bytes.
        size: u64,
    },
    /// The repository-file reader refused it.
    Refused {
        /// The rule.
        rule: &'static str,
        /// The reader's message.
        message: String,
    },
}

impl ReadFailure {
    /// The [`LoadError`] for this failure when the file was named `path`.
    pub(crate) fn into_error(self, path: &std::path::Path) -> LoadError {
        let path = path.display().to_string();
        match self {
            ReadFailure::Io(source) => LoadError::Io { path, source },
            ReadFailure::TooLarge { size } => LoadError::TooLarge {
                path,
                size,
                limit: MAX_SOURCE_BYTES,
            },
            ReadFailure::Refused { rule, message } => LoadError::Refused {
                path,
                rule,
                message,
            },
        }
    }

    /// [`Self::into_error`] for a failure kept to be reported again: the copy of the I/O error
    /// has the same kind and the same text.
    pub(crate) fn error_at(&self, path: &std::path::Path) -> LoadError {
        let copy = match self {
            ReadFailure::Io(e) => ReadFailure::Io(e.raw_os_error().map_or_else(
                || std::io::Error::new(e.kind(), e.to_string()),
                std::io::Error::from_raw_os_error,
            )),
            ReadFailure::TooLarge { size } => ReadFailure::TooLarge { size: *size },
            ReadFailure::Refused { rule, message } => ReadFailure::Refused {
                rule,
                message: message.clone(),
            },
        };
        copy.into_error(path)
    }

    fn from_repo_file(error: iterion_repofile::RepoFileError, size: u64) -> ReadFailure {
        use iterion_repofile::RepoFileError as E;
        match error {
            E::TooLarge { .. } => ReadFailure::TooLarge {
                size: size.max(MAX_SOURCE_BYTES + 1),
            },
            E::Io { source, .. } => ReadFailure::Io(source),
            E::NotFound { .. } => {
                ReadFailure::Io(std::io::Error::from(std::io::ErrorKind::NotFound))
            }
            other @ (E::OutsideRepository { .. }
            | E::Symlink { .. }
            | E::NotRegular { .. }
            | E::TimedOut { .. }) => ReadFailure::Refused {
                rule: other.rule(),
                message: other.to_string(),
            },
        }
    }
}

/// [`load`] without the path in the error: a regular file (never a FIFO or a device, so the read
/// cannot block), at most [`MAX_SOURCE_BYTES`], within the reader's timeout.
pub(crate) fn read_bounded(path: &std::path::Path) -> Result<Vec<u8>, ReadFailure> {
    let size = precheck_size(path)?;
    iterion_repofile::read_regular(path, MAX_SOURCE_BYTES)
        .map_err(|e| ReadFailure::from_repo_file(e, size))
}

/// [`read_bounded`] of a file that must lie beneath the repository `root` (`canon` is its
/// canonical path): opened beneath the root, so a component swapped for a symlink after
/// canonicalisation cannot lead out (issue 15 items 12, 15).
pub(crate) fn read_beneath(
    root: &std::path::Path,
    canon: &std::path::Path,
) -> Result<Vec<u8>, ReadFailure> {
    let relative = iterion_repofile::relative_to(root, canon)
        .map_err(|e| ReadFailure::from_repo_file(e, 0))?;
    let size = precheck_size(canon)?;
    iterion_repofile::read_beneath(root, &relative, MAX_SOURCE_BYTES)
        .map_err(|e| ReadFailure::from_repo_file(e, size))
}

/// The size `stat` reports, refused early when over the limit (so the error shows it).
fn precheck_size(path: &std::path::Path) -> Result<u64, ReadFailure> {
    let size = std::fs::metadata(path).map_err(ReadFailure::Io)?.len();
    if size > MAX_SOURCE_BYTES {
        return Err(ReadFailure::TooLarge { size });
    }
    Ok(size)
}
