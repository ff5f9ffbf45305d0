//! The typed reasons a mount, a workspace, a plain argument or an env pair is refused. Each
//! `Display`s as the rule an operator reads after `sandbox: mount refused: <mount>: `.

use std::fmt;
use std::path::PathBuf;

use crate::text::escape_controls;

/// Why a path is sensitive (SANDBOX.md §5.2 (a)–(d)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sensitivity {
    /// (a) equal to, under, or an ancestor of this system entry (`/proc`, the docker socket, …).
    SystemEntry(PathBuf),
    /// (b) its last component is a container-engine socket (`docker.sock`, `podman.sock`, …).
    EngineSocket(String),
    /// (c) a component (or the pair `.config/gcloud`) is a credential store (`.ssh`, `.aws`, …).
    CredentialStore(String),
    /// (d) it is the user's home or an ancestor of it.
    HomeOrAncestor,
    /// (e, ours) it lies inside a home directory (the operator's, or under `/home`) and not
    /// inside the workspace: shell start-up files, tool configs and tokens live there.
    HomeContents(PathBuf),
    /// (f, ours) its last component is a shell or session start-up file (`.bashrc`, `.profile`,
    /// …) outside the workspace: writing one runs code as its owner.
    ShellStartup(String),
    /// (g, ours) a read-write bind under a system tree (`/etc`, `/usr`, `/var`, …) outside the
    /// workspace: writing there runs code on the host.
    WritableSystemTree(PathBuf),
}

impl fmt::Display for Sensitivity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Sensitivity::SystemEntry(entry) => write!(
                f,
                "it is, lies under or contains the sensitive host path {}",
                entry.display()
            ),
            Sensitivity::EngineSocket(name) => {
                write!(f, "{name} is a container-engine socket")
            }
            Sensitivity::CredentialStore(component) => {
                write!(f, "{component} holds credentials")
            }
            Sensitivity::HomeOrAncestor => {
                f.write_str("it is the user's home directory or an ancestor of it")
            }
            Sensitivity::HomeContents(home) => write!(
                f,
                "it lies in the home directory {} and outside the workspace",
                home.display()
            ),
            Sensitivity::ShellStartup(name) => {
                write!(f, "{name} is a shell start-up file")
            }
            Sensitivity::WritableSystemTree(tree) => write!(
                f,
                "a read-write bind under {} would let the sandbox change the host's system files \
                 (mount it readonly)",
                tree.display()
            ),
        }
    }
}

/// What iterion itself keeps on the host that no author mount may reach (issue 15 item 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protected {
    /// The run store (`ITERION_HOME`: its database, `runs/`, worktrees, scratch).
    Store,
    /// The runtime root (`<tmp>/iterion-<uid>`, `$XDG_RUNTIME_DIR/iterion`): every run's
    /// secrets, sockets and staging dirs.
    RuntimeRoot,
    /// The engine binary (or a directory holding it): every sandbox and the host run it.
    EngineBinary,
}

impl fmt::Display for Protected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Protected::Store => "the iterion run store",
            Protected::RuntimeRoot => "the iterion runtime root (every run's secrets and sockets)",
            Protected::EngineBinary => "the iterion engine binary",
        })
    }
}

/// The mount kinds of the `--mount` grammar.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MountKind {
    /// A host path (`type=bind`, or no type but a source).
    Bind,
    /// A named or anonymous engine volume.
    Volume,
    /// An in-memory filesystem.
    Tmpfs,
}

impl MountKind {
    /// `bind`, `volume` or `tmpfs`.
    pub fn as_str(self) -> &'static str {
        match self {
            MountKind::Bind => "bind",
            MountKind::Volume => "volume",
            MountKind::Tmpfs => "tmpfs",
        }
    }
}

impl fmt::Display for MountKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a mount (or the workspace) is refused (SANDBOX.md §5.1–§5.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MountRule {
    /// The mount is empty.
    Empty,
    /// It contains a control character (newline, carriage return, NUL, escape, …).
    ControlCharacter,
    /// It (or a path in it) begins with `-`, which a command line would read as an option.
    LeadingDash,
    /// An empty `key=value` item (`a=b,,c=d`, a trailing comma).
    EmptyItem,
    /// A key outside the grammar.
    UnknownKey(String),
    /// `volume-opt` or `volume-driver`: a local volume driver can turn a volume into a host bind.
    ForbiddenKey(String),
    /// The same key (or an alias of it) twice.
    DuplicateKey(String),
    /// A key whose value is missing or outside its grammar.
    InvalidValue {
        /// The key.
        key: String,
        /// What is accepted.
        want: &'static str,
    },
    /// A `type` other than bind, volume or tmpfs.
    UnsupportedType(String),
    /// A key that does not apply to this kind of mount.
    KeyNotForKind {
        /// The key.
        key: String,
        /// The mount's kind.
        kind: MountKind,
    },
    /// No `target`.
    MissingTarget,
    /// A target (or engine-mount path) that is not absolute and clean.
    TargetNotAbsoluteClean(String),
    /// A target of `/`.
    TargetIsRoot,
    /// A target under `/run/iterion`, which the engine reserves.
    TargetReserved,
    /// A volume name outside `[A-Za-z0-9][A-Za-z0-9_.-]*`.
    InvalidVolumeName,
    /// `type=bind` without a source.
    BindWithoutSource,
    /// `type=tmpfs` with a source.
    TmpfsWithSource,
    /// A relative source that leaves the workspace, lexically or through a symlink.
    RelativeSourceEscapesWorkspace(PathBuf),
    /// The source does not exist.
    SourceMissing(PathBuf),
    /// The source cannot be resolved (permission, loop).
    SourceUnresolvable {
        /// The lexical source path.
        path: PathBuf,
        /// The OS error, in words.
        error: String,
    },
    /// The source (as written or with symlinks resolved) is sensitive.
    Sensitive {
        /// The path judged (lexical or canonical).
        path: PathBuf,
        /// Which rule.
        why: Sensitivity,
    },
    /// The workspace is the filesystem root.
    RootDirectory,
    /// An untrusted run names a host path: its only host binds are the engine's own.
    UntrustedHostPath(String),
    /// An untrusted run names a volume: a named volume outlives the run and can be shared.
    UntrustedNamedVolume(String),
    /// The volume name is iterion's own (`iterion…`: the shared nix store and anything else the
    /// engine makes).
    ReservedVolume(String),
    /// The source is, contains or lies in what iterion keeps on the host.
    Protected {
        /// The path judged.
        path: PathBuf,
        /// What it reaches.
        what: Protected,
    },
    /// The source changed between screening and opening it (a symlink appeared or moved).
    SourceChanged(PathBuf),
    /// The engine cannot pin the source with a staging mount, and a live sandbox can write the
    /// directory it lies in, so it could be swapped between screening and the mount.
    InSandboxWritable {
        /// The source.
        path: PathBuf,
        /// The directory a live sandbox writes.
        dir: PathBuf,
    },
    /// A `runArgs` flag that shares another container's mounts (`--volumes-from`).
    VolumesFrom,
    /// The source is neither a directory nor a regular file (a socket, a device, a fifo).
    SourceNotFileOrDirectory(PathBuf),
}

impl fmt::Display for MountRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MountRule::Empty => f.write_str("empty mount"),
            MountRule::ControlCharacter => f.write_str("contains a control character"),
            MountRule::LeadingDash => f.write_str("begins with -"),
            MountRule::EmptyItem => f.write_str("empty key=value item"),
            MountRule::UnknownKey(key) => write!(f, "unknown key \"{}\"", escape_controls(key)),
            MountRule::ForbiddenKey(key) => write!(
                f,
                "key \"{key}\" is not allowed: a volume driver can turn a volume into a host bind"
            ),
            MountRule::DuplicateKey(key) => write!(f, "key \"{key}\" is given twice"),
            MountRule::InvalidValue { key, want } => {
                write!(f, "invalid value for \"{key}\": want {want}")
            }
            MountRule::UnsupportedType(kind) => write!(
                f,
                "type \"{}\" is not supported: want bind, volume or tmpfs",
                escape_controls(kind)
            ),
            MountRule::KeyNotForKind { key, kind } => {
                write!(f, "\"{key}\" does not apply to a {kind} mount")
            }
            MountRule::MissingTarget => f.write_str("target is required"),
            MountRule::TargetNotAbsoluteClean(target) => write!(
                f,
                "target \"{}\" must be an absolute, clean path",
                escape_controls(target)
            ),
            MountRule::TargetIsRoot => f.write_str("target may not be /"),
            MountRule::TargetReserved => {
                f.write_str("target lies under /run/iterion, which the engine reserves")
            }
            MountRule::InvalidVolumeName => {
                f.write_str("volume name must match [A-Za-z0-9][A-Za-z0-9_.-]*")
            }
            MountRule::BindWithoutSource => f.write_str("a bind mount needs a source"),
            MountRule::TmpfsWithSource => f.write_str("a tmpfs mount takes no source"),
            MountRule::RelativeSourceEscapesWorkspace(path) => write!(
                f,
                "relative source resolves to {}, outside the workspace",
                path.display()
            ),
            MountRule::SourceMissing(path) => {
                write!(f, "source {} does not exist", path.display())
            }
            MountRule::SourceUnresolvable { path, error } => {
                write!(f, "source {} cannot be resolved: {error}", path.display())
            }
            MountRule::Sensitive { path, why } => {
                write!(f, "{} is sensitive: {why}", path.display())
            }
            MountRule::RootDirectory => f.write_str("it is the filesystem root"),
            MountRule::UntrustedHostPath(source) => write!(
                f,
                "an untrusted run may not bind the host path \"{}\" (its only host binds are the \
                 engine's own)",
                escape_controls(source)
            ),
            MountRule::UntrustedNamedVolume(name) => write!(
                f,
                "an untrusted run may not mount the named volume \"{}\" (use tmpfs or an \
                 anonymous volume)",
                escape_controls(name)
            ),
            MountRule::ReservedVolume(name) => write!(
                f,
                "volume \"{}\" is reserved: names starting with iterion are the engine's own",
                escape_controls(name)
            ),
            MountRule::Protected { path, what } => {
                write!(f, "{} reaches {what}", path.display())
            }
            MountRule::SourceChanged(path) => write!(
                f,
                "source {} changed while it was being screened (a symlink in its path)",
                path.display()
            ),
            MountRule::InSandboxWritable { path, dir } => write!(
                f,
                "source {} lies in {}, which a running sandbox can write, and this engine cannot \
                 pin it with a staging mount (run the engine as root, or mount it from elsewhere)",
                path.display(),
                dir.display()
            ),
            MountRule::SourceNotFileOrDirectory(path) => write!(
                f,
                "source {} is neither a directory nor a regular file",
                path.display()
            ),
            MountRule::VolumesFrom => {
                f.write_str("--volumes-from shares another container's mounts")
            }
        }
    }
}

/// Why a plain argument (image, user, workdir, tmpfs entry, argv) is refused (SANDBOX.md §5.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgRule {
    /// Empty where a value is required (argv).
    Empty,
    /// Contains a control character.
    ControlCharacter,
    /// Begins with `-`.
    LeadingDash,
}

impl fmt::Display for ArgRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ArgRule::Empty => "empty",
            ArgRule::ControlCharacter => "contains a control character",
            ArgRule::LeadingDash => "begins with -",
        })
    }
}

/// Why an env pair is refused (SANDBOX.md §5.1). The value is never named.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnvRule {
    /// The key is empty.
    EmptyKey,
    /// The key contains `=`.
    KeyContainsEquals,
    /// The key contains a newline, carriage return or NUL.
    KeyControlCharacter,
    /// The value contains a newline, carriage return or NUL.
    ValueControlCharacter,
}

impl fmt::Display for EnvRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EnvRule::EmptyKey => "empty key",
            EnvRule::KeyContainsEquals => "key contains =",
            EnvRule::KeyControlCharacter => "key contains a newline, carriage return or NUL",
            EnvRule::ValueControlCharacter => "value contains a newline, carriage return or NUL",
        })
    }
}

/// Why a `runArgs` entry refuses the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunArgRule {
    /// `--privileged`, `--cap-add`, `--security-opt` or `--device`, in any form.
    HostPrivilege(&'static str),
    /// `--pid=host`.
    HostPidNamespace,
    /// `--network=host` or `--net=host`.
    HostNetwork,
    /// `-v`, `--volume`, `--mount` or `--volumes-from` asking for what the run may not mount
    /// ([`ScreenContext::admit`](crate::mounts::ScreenContext::admit): sensitive or protected paths for every run; any host path or
    /// named volume for an untrusted one).
    Mount(MountRule),
}

impl fmt::Display for RunArgRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunArgRule::HostPrivilege(flag) => write!(f, "{flag} grants host privileges"),
            RunArgRule::HostPidNamespace => f.write_str("--pid=host shares the host's processes"),
            RunArgRule::HostNetwork => f.write_str("host networking bypasses the egress proxy"),
            RunArgRule::Mount(rule) => write!(f, "mount refused: {rule}"),
        }
    }
}

/// Why the kubernetes driver refuses a spec (SANDBOX.md §5.5). The `Display` is the message of
/// the design, which names the knob to turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KubernetesRule {
    /// `build:` is set; there is no image builder in the cluster.
    BuildIsLocalOnly,
    /// No image is named.
    ImageRequired,
    /// `host_state: auto` asks for host binds, which a pod cannot have.
    HostStateAutoNeedsBinds,
    /// No user is named (the doctor and pre-flight path; the engine path defaults it).
    UserRequired,
    /// The user is a name, or its uid/gid is not all digits.
    UserNotNumeric,
}

impl KubernetesRule {
    /// A stable short id for tests and JSON (`build-local-only`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            KubernetesRule::BuildIsLocalOnly => "build-local-only",
            KubernetesRule::ImageRequired => "image-required",
            KubernetesRule::HostStateAutoNeedsBinds => "host-state-auto",
            KubernetesRule::UserRequired => "user-required",
            KubernetesRule::UserNotNumeric => "user-not-numeric",
        }
    }
}

impl fmt::Display for KubernetesRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KubernetesRule::BuildIsLocalOnly => {
                "kubernetes: build: is local-only; pin a pre-built image"
            }
            KubernetesRule::ImageRequired => "kubernetes: an image is required; set image:",
            KubernetesRule::HostStateAutoNeedsBinds => {
                "kubernetes: host_state: auto needs host binds; use none"
            }
            KubernetesRule::UserRequired => {
                "kubernetes: user is required (numeric uid or uid:gid, runAsNonRoot); set user:"
            }
            KubernetesRule::UserNotNumeric => "kubernetes: user must be numeric (runAsNonRoot)",
        })
    }
}
