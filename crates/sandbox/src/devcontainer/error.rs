//! The devcontainer module's error (STYLE.md §5.5), folded into the crate's
//! [`Error::Devcontainer`](crate::Error::Devcontainer).
//!
//! Two families matter to resolution (SANDBOX.md §7.2, §7.5): a *shape* failure makes the file
//! unusable and auto falls back to the default image ([`DevcontainerError::is_unusable`]); a
//! *security* failure refuses the run with no fallback, because a repository asking for host
//! privileges must not be silently replaced by another image. Messages name the file, the field
//! and the entry, never an env value.

use std::path::PathBuf;

use crate::error::{Error, SANDBOX_SETUP_FAILED};
use crate::text::escape_controls;

use super::run_args::RunArgRule;

/// Why a devcontainer could not be used, or why it refuses the run.
#[derive(Debug, thiserror::Error)]
pub enum DevcontainerError {
    /// The file exists but could not be read (permission, a directory, an I/O error). Unusable.
    #[error("{}: {error}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The OS error, in words.
        error: String,
    },

    /// The file resolves (through a symlink) outside the repository root (our decision 2).
    /// Unusable.
    #[error("{}: resolves to {} outside the repository", path.display(), resolved.display())]
    OutsideRepository {
        /// The file as found.
        path: PathBuf,
        /// Where it resolves.
        resolved: PathBuf,
    },

    /// The repository file reader refused it (issue 15 item 12): outside the repository, through
    /// a symlink leaving it, not a regular file (a FIFO, `/dev/stdin`), or not read in time.
    /// Unusable.
    #[error("{source}")]
    Refused {
        /// The rule it broke, naming the file.
        #[source]
        source: iterion_repofile::RepoFileError,
    },

    /// The file is larger than [`MAX_DEVCONTAINER_BYTES`](super::MAX_DEVCONTAINER_BYTES).
    /// Unusable.
    #[error("{}: larger than {limit_bytes} bytes", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The bound.
        limit_bytes: u64,
    },

    /// The text is not JSONC (comments and trailing commas allowed; unquoted keys and single
    /// quotes refused). Unusable.
    #[error("{}: not JSONC: {error}", path.display())]
    NotJsonc {
        /// The file.
        path: PathBuf,
        /// The parser's message, with line and column.
        error: String,
    },

    /// A field has the wrong shape (SANDBOX.md §7.2): neither or both of `image` and `build`, a
    /// `build` without `dockerfile`, a relative `workspaceFolder`, a value of the wrong type, an
    /// unknown key in an object mount. Unusable.
    #[error("{}: {field}: {reason}", path.display())]
    Shape {
        /// The file.
        path: PathBuf,
        /// The field, in the file's spelling (`build.dockerfile`, `mounts[1].consistency`).
        field: String,
        /// What is wrong and what is accepted.
        reason: String,
    },

    /// A `runArgs` entry asks for host privileges (SANDBOX.md §7.2). Refuses the run.
    #[error("{}: runArgs entry \"{}\" refused: {rule}", path.display(), escape_controls(arg))]
    RunArgRefused {
        /// The file.
        path: PathBuf,
        /// The entry as written (with its value when the value was the next entry).
        arg: String,
        /// Why.
        rule: RunArgRule,
    },

    /// A mount from the file failed screening (SANDBOX.md §5.1–§5.2). Refuses the run.
    #[error("{}: mounts: {source}", path.display())]
    MountRefused {
        /// The file.
        path: PathBuf,
        /// The screening error ([`Error::MountRefused`] naming the mount and the rule).
        source: Box<Error>,
    },

    /// auto found no devcontainer and the engine has no default image (SANDBOX.md §7.5).
    #[error("mode=auto but no .devcontainer/devcontainer.json found")]
    NoDefaultImage,

    /// mode inline without a workflow `sandbox:` block (SANDBOX.md §7.5).
    #[error("mode inline needs a workflow sandbox: block")]
    InlineWithoutBlock,

    /// An operator overlay key (`--sandbox-env`, `ITERION_SANDBOX_ENV_FILE`) is not a variable
    /// name, or a line has no `=` (SANDBOX.md §7.8). An input error: the entry point exits 2.
    #[error(
        "{origin}: {}: want KEY=VALUE with KEY matching [A-Za-z_][A-Za-z0-9_]*",
        quoted(entry)
    )]
    InvalidOverlay {
        /// Where it came from (`--sandbox-env`, or the file and line).
        origin: String,
        /// The entry as written, up to its `=` (never the value).
        entry: String,
    },
}

impl DevcontainerError {
    /// The stable failure code (SANDBOX.md §9.2).
    pub fn code(&self) -> &'static str {
        match self {
            // No `_` arm: a new variant must choose its code.
            DevcontainerError::Unreadable { .. }
            | DevcontainerError::OutsideRepository { .. }
            | DevcontainerError::Refused { .. }
            | DevcontainerError::TooLarge { .. }
            | DevcontainerError::NotJsonc { .. }
            | DevcontainerError::Shape { .. }
            | DevcontainerError::RunArgRefused { .. }
            | DevcontainerError::MountRefused { .. }
            | DevcontainerError::NoDefaultImage
            | DevcontainerError::InlineWithoutBlock
            | DevcontainerError::InvalidOverlay { .. } => SANDBOX_SETUP_FAILED,
        }
    }

    /// Whether this is a *shape* failure: auto falls back to the default image and says why in
    /// the source label (SANDBOX.md §7.5). Security failures are not: they refuse the run.
    pub fn is_unusable(&self) -> bool {
        match self {
            DevcontainerError::Unreadable { .. }
            | DevcontainerError::OutsideRepository { .. }
            | DevcontainerError::Refused { .. }
            | DevcontainerError::TooLarge { .. }
            | DevcontainerError::NotJsonc { .. }
            | DevcontainerError::Shape { .. } => true,
            DevcontainerError::RunArgRefused { .. }
            | DevcontainerError::MountRefused { .. }
            | DevcontainerError::NoDefaultImage
            | DevcontainerError::InlineWithoutBlock
            | DevcontainerError::InvalidOverlay { .. } => false,
        }
    }

    /// Whether the operator's input is at fault (exit code 2 before any run exists).
    pub fn is_input_error(&self) -> bool {
        matches!(self, DevcontainerError::InvalidOverlay { .. })
    }
}

fn quoted(value: &str) -> String {
    format!("\"{}\"", escape_controls(value))
}

impl From<DevcontainerError> for Error {
    fn from(error: DevcontainerError) -> Self {
        Error::Devcontainer(Box::new(error))
    }
}
