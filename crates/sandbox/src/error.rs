//! The crate's error types (STYLE.md §5.5): [`Error`], and [`DevcontainerError`] folded into it
//! as [`Error::Devcontainer`] (the two name each other, so they live together).
//!
//! Each variant is a precise, fixable reason with the fields an operator needs (the mount, the
//! path, the driver, the phase). [`Error::code`] maps every variant to its stable failure code
//! (SANDBOX.md §9.2) through an exhaustive `match`: a new variant does not compile until it has
//! chosen one. There is no catch-all variant.
//!
//! No variant ever carries a secret value or an env *value*: messages name keys, paths and mounts
//! only (invariant I6). Values that come from outside are rendered with control characters
//! escaped, so an error cannot forge a log line.

use std::path::PathBuf;
use std::time::Duration;

use iterion_vocab::FailureCode;

use crate::phase::{Phase, format_duration};
use crate::rules::{ArgRule, EnvRule, KubernetesRule, MountRule, RunArgRule};
use crate::text::escape_controls;

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A boxed error from a container engine or an orchestrator client, kept as the source of
/// [`Error::Engine`].
pub type EngineError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Failure code: an active mode found no container-runtime driver (inline is refused and parked).
pub(crate) const SANDBOX_DRIVER_UNAVAILABLE: &str = FailureCode::SandboxDriverUnavailable.as_str();
/// Failure code: a setup phase overran its bound (redelivered to a healthy runner).
pub(crate) const SANDBOX_SETUP_TIMEOUT: &str = FailureCode::SandboxSetupTimeout.as_str();
/// Failure code: the orchestrator could not place the sandbox (redelivered).
pub(crate) const SANDBOX_CAPACITY: &str = FailureCode::SandboxCapacity.as_str();
/// Failure code: every other setup error (refused mount or workspace, invalid spec, pull or build
/// error, post_create failure, engine binary, noop file-secret gate).
pub(crate) const SANDBOX_SETUP_FAILED: &str = FailureCode::SandboxSetupFailed.as_str();

/// The remediation shown under a [`Error::DriverUnavailable`] (SANDBOX.md §3.3).
pub(crate) const DRIVER_UNAVAILABLE_HINT: &str = "install and start Docker or Podman (local), or run inside a Kubernetes pod with a service account (cloud)";

/// One driver the factory tried, and why it could not be constructed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriverAttempt {
    /// The driver's registry name (`docker`, `podman`, `kubernetes`).
    pub driver: String,
    /// Why it was skipped, as its constructor said.
    pub reason: String,
}

/// Why a sandbox could not be described, selected, set up or used. Codes are part of the CLI
/// contract (SANDBOX.md §9.2); see [`Error::code`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A [`Spec`](crate::Spec) field breaks a rule of SANDBOX.md §1.3; `field` names it
    /// (`image`, `network.preset`, `secret_files[1].mount_path`, …). Fix the workflow block.
    #[error("sandbox: invalid spec: {field}: {reason}")]
    InvalidSpec {
        /// The offending field, in the spec's own spelling.
        field: String,
        /// What is wrong and what is accepted.
        reason: String,
    },

    /// A driver constructor's "skip me": its engine is not reachable here. The factory collects
    /// these into [`Error::DriverUnavailable`].
    #[error("sandbox driver \"{driver}\" unavailable: {reason}")]
    Unavailable {
        /// The driver that could not be constructed.
        driver: String,
        /// Why (endpoint tried, error seen).
        reason: String,
    },

    /// No container-runtime driver is available for an active mode. A capability report, never a
    /// policy (invariant I1): the engine decides whether auto degrades or inline refuses.
    /// Remediation: `DRIVER_UNAVAILABLE_HINT`; [`Error::obstacle`] lists what was tried.
    #[error("sandbox: no container-runtime driver available")]
    DriverUnavailable {
        /// Each driver tried, in preference order, with its reason.
        tried: Vec<DriverAttempt>,
    },

    /// Driver selection failed; the cause keeps its own code (SANDBOX.md §3.6).
    #[error("sandbox: select driver: {0}")]
    SelectDriver(#[source] Box<Error>),

    /// An operator variable holds a value outside its grammar. Entry points turn this into exit
    /// code 2 before any run exists.
    #[error("{variable}={}: want {want}", quoted(value))]
    InvalidSetting {
        /// The variable, e.g. `ITERION_SANDBOX_DEFAULT`.
        variable: &'static str,
        /// The value found.
        value: String,
        /// What is accepted.
        want: &'static str,
    },

    /// A setup phase overran its budget (SANDBOX.md §16.1). Retried elsewhere; raise the phase's
    /// env knob ([`Phase::env_var`]) if the budget is too tight.
    #[error(
        "sandbox: {phase} phase timed out after {} (deadline {} exceeded)",
        format_duration(*elapsed),
        format_duration(*budget)
    )]
    PhaseTimeout {
        /// The phase that overran.
        phase: Phase,
        /// How long it ran.
        elapsed: Duration,
        /// Its budget.
        budget: Duration,
    },

    /// The orchestrator could not place the sandbox (SANDBOX.md §16.3); retried elsewhere.
    #[error("sandbox not placed — {why}")]
    Capacity {
        /// Why, as the orchestrator reported it.
        why: String,
    },

    /// An author mount was refused (SANDBOX.md §5.1–§5.2): fix or remove the mount.
    #[error("sandbox: mount refused: {}: {rule}", escape_controls(mount))]
    MountRefused {
        /// The mount as written.
        mount: String,
        /// The rule it breaks.
        rule: MountRule,
    },

    /// The workspace (or the bundle dir) may not be bound (SANDBOX.md §5.3): run from a project
    /// directory instead.
    #[error("workspace {} may not be bound: {rule}", path.display())]
    WorkspaceRefused {
        /// The canonical workspace path.
        path: PathBuf,
        /// The rule it breaks.
        rule: MountRule,
    },

    /// A build input resolves outside the workspace (SANDBOX.md §5.4).
    #[error("{label} {} escapes the workspace", path.display())]
    EscapesWorkspace {
        /// What the path is (`build context`, `dockerfile`).
        label: String,
        /// The canonical path.
        path: PathBuf,
    },

    /// The kubernetes driver refuses the spec (SANDBOX.md §5.5); the rule names the field to fix.
    #[error("sandbox: {rule}")]
    KubernetesRefused {
        /// The rule the spec breaks.
        rule: KubernetesRule,
    },

    /// A plain argument (image, user, workdir, tmpfs entry, argv) is refused (SANDBOX.md §5.1).
    #[error("sandbox: {label} {} refused: {rule}", quoted(value))]
    InvalidArgument {
        /// What the value is (`image`, `user`, …).
        label: String,
        /// The value as written.
        value: String,
        /// The rule it breaks.
        rule: ArgRule,
    },

    /// An env pair is refused (SANDBOX.md §5.1). Only the key is named, never the value.
    #[error("sandbox: env {} refused: {rule}", quoted(key))]
    InvalidEnv {
        /// The key as written.
        key: String,
        /// The rule it breaks.
        rule: EnvRule,
    },

    /// The noop driver was selected for a spec with file secrets: their mount is their only
    /// delivery channel (SANDBOX.md §3.5). Install a container runtime or drop the `as: file`.
    #[error("file secrets require a real sandbox driver; noop cannot mount secret files")]
    FileSecretsUnsupported,

    /// `start` was handed a [`PreparedSpec`](crate::PreparedSpec) from another driver.
    #[error("sandbox: {driver}: prepared spec comes from driver \"{prepared_by}\"")]
    ForeignPreparedSpec {
        /// The driver asked to start it.
        driver: String,
        /// The driver that prepared it.
        prepared_by: String,
    },

    /// A repository file the engine reads was refused by the one repository-file reader
    /// (issue 15 item 12): outside the repository, not a regular file, too large, not read in time.
    #[error("sandbox: {source}")]
    RepoFile {
        /// The rule it broke, naming the file.
        #[source]
        source: iterion_repofile::RepoFileError,
    },

    /// A step of the namespace sandbox's setup failed (issue 18): the sandbox was not started,
    /// and nothing ran unsandboxed.
    #[error("sandbox: namespace: {step}: {reason}")]
    NamespaceSetup {
        /// The step (`unshare`, `uid_map`, `mount /proc`, `seccomp`, …).
        step: String,
        /// What the kernel (or the init) said.
        reason: String,
    },

    /// A host filesystem or process operation failed.
    #[error("sandbox: {operation} {}: {source}", path.display())]
    Io {
        /// What was attempted (`canonicalize`, `spawn`, …).
        operation: &'static str,
        /// The path (or program) involved.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },

    /// A container-engine or orchestrator API call failed.
    #[error("sandbox: {driver}: {operation}: {source}")]
    Engine {
        /// The driver whose API failed.
        driver: String,
        /// The operation, in readable form (`create container iterion-…`).
        operation: String,
        /// The client's error.
        #[source]
        source: EngineError,
    },

    /// Pulling an image failed for a reason other than a timeout (SANDBOX.md §4.3).
    #[error("sandbox: pull {image}: {reason}")]
    PullFailed {
        /// The image reference.
        image: String,
        /// The registry's or engine's answer.
        reason: String,
    },

    /// Building a `build:` spec failed (SANDBOX.md §4.4).
    #[error("sandbox: build failed: {tail}")]
    BuildFailed {
        /// The last 4096 bytes of the build output.
        tail: String,
    },

    /// The Dockerfile lies outside its build context (SANDBOX.md §4.4).
    #[error("dockerfile outside build context")]
    DockerfileOutsideContext {
        /// The canonical Dockerfile path.
        dockerfile: PathBuf,
        /// The canonical context path.
        context: PathBuf,
    },

    /// `post_create` exited non-zero (SANDBOX.md §4.1); the container has been removed.
    #[error("{driver}: postCreate failed: {tail}")]
    PostCreateFailed {
        /// The driver (`docker`, `podman`, `kubernetes`).
        driver: String,
        /// Its exit code.
        exit_code: i64,
        /// The last 4096 bytes of stdout and stderr.
        tail: String,
    },

    /// The egress bridge exited before it was ready (SANDBOX.md §4.6).
    #[error("sandbox: egress bridge failed: {tail}")]
    EgressBridgeFailed {
        /// The bridge's stderr tail.
        tail: String,
    },

    /// The engine binary cannot run in the image (SANDBOX.md §4.3 step 6): point `ITERION_BIN`
    /// at a Linux ELF of the image's architecture.
    #[error("sandbox: engine binary {} (ITERION_BIN): {reason}", path.display())]
    EngineBinary {
        /// The binary's host path.
        path: PathBuf,
        /// Missing, not ELF, or the architecture mismatch.
        reason: String,
    },

    /// A trusted run asks to `build:` its image under a network policy that is not `open`
    /// (issue 15 item 16): the build's own egress is not policed by the per-run proxy, so it
    /// would bypass the policy. Pin an `image:` (build it beforehand), or set `network: open`.
    #[error(
        "sandbox: build: is refused under network mode {mode}: a devcontainer build's egress is \
         not policed by the run's proxy; pin an image: instead (build it beforehand), or set \
         sandbox network mode: open"
    )]
    BuildNeedsOpenNetwork {
        /// The resolved network mode (`allowlist`, `none`, …).
        mode: String,
    },

    /// The runtime root exists with another owner or group/other bits (SANDBOX.md §4.5).
    #[error("runtime root {} is not private", path.display())]
    RuntimeRootNotPrivate {
        /// The runtime root.
        path: PathBuf,
    },

    /// The engine could not report an exec's exit code (SANDBOX.md §4.7).
    #[error("exit code unavailable")]
    ExitCodeUnavailable {
        /// The sandbox the exec ran in.
        sandbox_id: String,
    },

    /// Setting a sandbox up failed after something was created, and removing it failed too.
    /// Both are kept; the code is the original failure's. What was left carries the run's labels,
    /// so the reaper collects it.
    #[error("{error}; cleanup also failed: {cleanup}")]
    CleanupFailed {
        /// The failure that made the driver clean up.
        error: Box<Error>,
        /// Why the cleanup failed.
        cleanup: Box<Error>,
    },

    /// The repository's devcontainer is unusable or refuses the run (SANDBOX.md §7); the inner
    /// error says which, and keeps its own code.
    #[error(transparent)]
    Devcontainer(Box<DevcontainerError>),

    /// The sandbox was already cleaned up; nothing more can run in it.
    #[error("sandbox: {driver} sandbox {sandbox_id} is cleaned up")]
    SandboxClosed {
        /// The driver.
        driver: String,
        /// The sandbox id (container id, pod name).
        sandbox_id: String,
    },
}

impl From<iterion_vocab::UnknownWord> for Error {
    /// A word outside the shared vocabulary, written in a spec field.
    fn from(word: iterion_vocab::UnknownWord) -> Self {
        Error::InvalidSpec {
            field: word.field.to_owned(),
            reason: word.to_string(),
        }
    }
}

impl Error {
    /// The stable failure code (SANDBOX.md §9.2). Codes never change once shipped.
    pub fn code(&self) -> &'static str {
        match self {
            // No `_` arm: a new variant must choose its code.
            Error::Unavailable { .. } | Error::DriverUnavailable { .. } => {
                SANDBOX_DRIVER_UNAVAILABLE
            }
            Error::SelectDriver(cause) => cause.code(),
            Error::CleanupFailed { error, .. } => error.code(),
            Error::Devcontainer(error) => error.code(),
            Error::PhaseTimeout { .. } => SANDBOX_SETUP_TIMEOUT,
            Error::Capacity { .. } => SANDBOX_CAPACITY,
            Error::InvalidSpec { .. }
            | Error::InvalidSetting { .. }
            | Error::MountRefused { .. }
            | Error::WorkspaceRefused { .. }
            | Error::EscapesWorkspace { .. }
            | Error::InvalidArgument { .. }
            | Error::KubernetesRefused { .. }
            | Error::InvalidEnv { .. }
            | Error::FileSecretsUnsupported
            | Error::ForeignPreparedSpec { .. }
            | Error::NamespaceSetup { .. }
            | Error::Io { .. }
            | Error::RepoFile { .. }
            | Error::Engine { .. }
            | Error::PullFailed { .. }
            | Error::BuildFailed { .. }
            | Error::DockerfileOutsideContext { .. }
            | Error::PostCreateFailed { .. }
            | Error::EgressBridgeFailed { .. }
            | Error::EngineBinary { .. }
            | Error::RuntimeRootNotPrivate { .. }
            | Error::BuildNeedsOpenNetwork { .. }
            | Error::ExitCodeUnavailable { .. }
            | Error::SandboxClosed { .. } => SANDBOX_SETUP_FAILED,
        }
    }

    /// The error under any [`Error::SelectDriver`] context.
    pub fn root(&self) -> &Error {
        match self {
            Error::SelectDriver(cause) => cause.root(),
            other => other,
        }
    }

    /// Whether this is (or wraps) [`Error::DriverUnavailable`]: the one error the engine's
    /// degrade-or-refuse split keys on.
    pub fn is_driver_unavailable(&self) -> bool {
        matches!(self.root(), Error::DriverUnavailable { .. })
    }

    /// The obstacle in words, for `sandbox_skipped.reason` (SANDBOX.md §9.1):
    /// `no container-runtime driver available (tried: docker: …; podman: …)` for
    /// [`Error::DriverUnavailable`], the message otherwise.
    pub fn obstacle(&self) -> String {
        match self.root() {
            Error::DriverUnavailable { tried } if tried.is_empty() => {
                "no container-runtime driver available".to_owned()
            }
            Error::DriverUnavailable { tried } => {
                let tried: Vec<String> = tried
                    .iter()
                    .map(|attempt| format!("{}: {}", attempt.driver, attempt.reason))
                    .collect();
                format!(
                    "no container-runtime driver available (tried: {})",
                    tried.join("; ")
                )
            }
            other => other.to_string(),
        }
    }

    /// The remediation line, when the error has a fixed one.
    pub fn hint(&self) -> Option<&'static str> {
        match self.root() {
            Error::DriverUnavailable { .. } => Some(DRIVER_UNAVAILABLE_HINT),
            _ => None,
        }
    }
}

fn quoted(value: &str) -> String {
    format!("\"{}\"", escape_controls(value))
}

/// Why a devcontainer could not be used, or why it refuses the run.
///
/// Two families matter to resolution (SANDBOX.md §7.2, §7.5): a *shape* failure makes the file
/// unusable and auto falls back to the default image ([`DevcontainerError::is_unusable`]); a
/// *security* failure refuses the run with no fallback, because a repository asking for host
/// privileges must not be silently replaced by another image. Messages name the file, the field
/// and the entry, never an env value.
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

    /// The file is larger than `MAX_DEVCONTAINER_BYTES`.
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

impl From<DevcontainerError> for Error {
    fn from(error: DevcontainerError) -> Self {
        Error::Devcontainer(Box::new(error))
    }
}

#[cfg(test)]
#[path = "error_tests.rs"]
mod tests;
