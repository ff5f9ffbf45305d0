//! Screening what a mount does (SANDBOX.md §5.2–§5.4, our decision 2).
//!
//! A [`ScreenContext`] is made once per run: it canonicalises the workspace, the home and the
//! system entries (the only I/O besides resolving each source). [`ScreenContext::sensitivity`]
//! is then a pure judgement of a path, and [`validate_mount`] resolves a source (relative against
//! the workspace, symlinks followed) and judges both the written and the resolved path.
//!
//! Limit, by design: the tree under an accepted source is not walked. A symlink *inside* an
//! accepted directory can still point elsewhere once the container follows it; the kernel then
//! resolves it inside the container's own mount namespace, where host paths are not visible.

use std::path::{Component, Path, PathBuf};

use iterion_vocab::Environment;

use crate::error::{Error, Result};
use crate::mode::Trust;
use crate::mounts::grammar::{
    MountSpec, check_target, is_volume_name, parse_mount, validate_env_pair, validate_plain_arg,
};
use crate::rules::{MountKind, MountRule, Protected, Sensitivity};
use crate::spec::{EngineMount, EngineMountKind, Spec};
use crate::text::{clean_path, has_control, is_clean_absolute};

/// System entries of SANDBOX.md §5.2 (a): a path equal to, under, or an ancestor of one of these
/// is sensitive. The ancestor clause makes `/`, `/etc`, `/var` and `/var/run` sensitive.
pub(super) const SENSITIVE_SYSTEM_ENTRIES: &[&str] = &[
    "/var/run/docker.sock",
    "/run/docker.sock",
    "/var/run/podman/podman.sock",
    "/run/podman/podman.sock",
    "/proc",
    "/sys",
    "/boot",
    "/root",
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/sudoers",
    "/etc/sudoers.d",
    // Added by us (our decision 2).
    "/dev",
    "/run/containerd",
    "/var/run/containerd",
    "/var/lib/docker",
    "/var/lib/containers",
    // Added for issue 15: cron and start-up files run code as root whoever writes them; the
    // per-user runtime dirs hold rootless engine sockets and agents.
    "/etc/crontab",
    "/etc/cron.d",
    "/etc/cron.hourly",
    "/etc/cron.daily",
    "/etc/cron.weekly",
    "/etc/cron.monthly",
    "/etc/anacrontab",
    "/var/spool/cron",
    "/etc/systemd",
    "/etc/profile",
    "/etc/profile.d",
    "/etc/bash.bashrc",
    "/etc/environment",
    "/etc/ld.so.preload",
    "/etc/passwd",
    "/etc/group",
    "/etc/pam.d",
    "/run/user",
    "/var/run/user",
];

/// The system entries a sandbox that shows the host's root read-only may still show
/// ([`ScreenContext::masked_paths`]): they are sensitive to *bind* (writing them runs code as
/// root), not to read, and the programs of that root need them (`id` reads `/etc/passwd`, a
/// login shell `/etc/profile`). `/proc`, `/sys` and `/dev` are not masked either: such a sandbox
/// mounts its own.
const READABLE_SYSTEM_ENTRIES: &[&str] = &[
    "/proc",
    "/sys",
    "/dev",
    "/etc/crontab",
    "/etc/cron.d",
    "/etc/cron.hourly",
    "/etc/cron.daily",
    "/etc/cron.weekly",
    "/etc/cron.monthly",
    "/etc/anacrontab",
    "/etc/systemd",
    "/etc/profile",
    "/etc/profile.d",
    "/etc/bash.bashrc",
    "/etc/environment",
    "/etc/ld.so.preload",
    "/etc/passwd",
    "/etc/group",
    "/etc/pam.d",
];

/// System trees a read-write author bind may not lie under (rule (g), ours): writing there is
/// code execution on the host. Read-only binds of them stay possible for trusted runs.
pub(super) const SYSTEM_TREES: &[&str] = &[
    "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/var", "/srv",
    "/boot", "/snap", "/run", "/root", "/home",
];

/// Shell and session start-up files (rule (f), ours): judged by the last component, outside
/// the workspace.
pub(super) const SHELL_STARTUP_FILES: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".cshrc",
    ".tcshrc",
    ".login",
    ".kshrc",
    ".mkshrc",
    ".inputrc",
    ".xprofile",
    ".xinitrc",
    ".xsession",
    ".xsessionrc",
    ".pam_environment",
    ".gitconfig",
];

/// The prefix of every volume (and container, image, dir) iterion makes: a workflow may never
/// name such a volume (issue 15 item 3: the shared nix store is `iterion-nix-<image id>`).
pub(super) const RESERVED_VOLUME_PREFIX: &str = "iterion";

/// Last components that name a container-engine socket (§5.2 (b)); covers rootless sockets.
pub(super) const ENGINE_SOCKET_NAMES: &[&str] =
    &["docker.sock", "podman.sock", "containerd.sock", "crio.sock"];

/// Components that name a credential store (§5.2 (c)); `.netrc` and `.git-credentials` are ours.
pub(super) const CREDENTIAL_COMPONENTS: &[&str] = &[
    ".ssh",
    ".aws",
    ".gnupg",
    ".kube",
    ".docker",
    ".gcloud",
    ".azure",
    ".npmrc",
    ".pypirc",
    ".netrc",
    ".git-credentials",
];

/// What iterion keeps on the host for a run, which no author mount may reach, and what live
/// sandboxes can write (issue 15 items 1 and 3). The engine fills it; the driver receives it in
/// [`RunInfo`](crate::RunInfo).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MountScope {
    /// The store: `ITERION_HOME` (its database, `runs/`, worktrees, scratch).
    pub store: Vec<PathBuf>,
    /// The runtime root(s): the parent of every run dir.
    pub runtime_roots: Vec<PathBuf>,
    /// The engine binary bound into sandboxes (and run on the host).
    pub engine_binaries: Vec<PathBuf>,
    /// Directories a live sandbox can write (for a SANDBOX.md §14 child: its parent's
    /// workspace). A source inside one is refused when the engine cannot pin it by a staging
    /// mount ([`crate::Stager`]).
    pub sandbox_writable: Vec<PathBuf>,
    /// An untrusted run's own workspace copy, which the engine made inside the runtime root
    /// (issue 15 item 2): accepted as that run's workspace, and as nothing else.
    pub engine_copy: Option<PathBuf>,
}

/// What screening needs to know about the host: the canonical workspace, the user's home and
/// the system entries, each as written and canonicalised; the run's trust; what iterion keeps
/// on the host (the store, the runtime roots).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScreenContext {
    workspace: PathBuf,
    homes: Vec<PathBuf>,
    system_entries: Vec<PathBuf>,
    system_trees: Vec<PathBuf>,
    trust: Trust,
    protected: Vec<(PathBuf, Protected)>,
    /// Temp dirs (written and canonical) whose `iterion-*` children are runtime roots.
    temp_dirs: Vec<PathBuf>,
    /// [`MountScope::engine_copy`], canonical.
    engine_copy: Option<PathBuf>,
    sandbox_writable: Vec<PathBuf>,
}

/// What an author mount asks of the host, whatever its spelling: a workflow or devcontainer
/// `mounts` entry, a `runArgs` `-v`/`--volume`/`--mount`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MountRequest<'a> {
    /// A host path (a bind), as written; relative to the workspace when not absolute.
    HostPath {
        /// The source as written.
        source: &'a str,
        /// Whether the bind is read-only.
        read_only: bool,
    },
    /// A named volume.
    NamedVolume(&'a str),
    /// An anonymous volume or a tmpfs: nothing on the host.
    Anonymous,
}

impl ScreenContext {
    /// Canonicalises `workspace` (it must exist), `home` (as written and, when it exists,
    /// canonical) and every entry of `SENSITIVE_SYSTEM_ENTRIES` that exists here.
    ///
    /// The workspace itself is not screened: call [`ScreenContext::validate_workspace`].
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the workspace cannot be canonicalised.
    pub fn new(workspace: &Path, home: Option<&Path>) -> Result<ScreenContext> {
        let workspace = canonicalize(workspace)?;
        let mut homes = Vec::new();
        if let Some(home) = home.filter(|home| home.is_absolute()) {
            push_written_and_canonical(&mut homes, home);
        }
        let mut system_entries = Vec::new();
        for entry in SENSITIVE_SYSTEM_ENTRIES {
            push_written_and_canonical(&mut system_entries, Path::new(entry));
        }
        let mut system_trees = Vec::new();
        for tree in SYSTEM_TREES {
            push_written_and_canonical(&mut system_trees, Path::new(tree));
        }
        let mut temp_dirs = Vec::new();
        push_written_and_canonical(&mut temp_dirs, &std::env::temp_dir());
        push_written_and_canonical(&mut temp_dirs, Path::new("/tmp"));
        Ok(ScreenContext {
            workspace,
            homes,
            system_entries,
            system_trees,
            trust: Trust::Trusted,
            protected: Vec::new(),
            temp_dirs,
            engine_copy: None,
            sandbox_writable: Vec::new(),
        })
    }

    /// [`ScreenContext::new`] with the home from `env`'s `HOME`, protecting the store named by
    /// `ITERION_HOME` (else `$HOME/.iterion`) and the runtime root under `$XDG_RUNTIME_DIR`.
    /// Trusted; see [`ScreenContext::for_run`].
    ///
    /// # Errors
    ///
    /// As [`ScreenContext::new`].
    pub fn from_env(workspace: &Path, env: &Environment) -> Result<ScreenContext> {
        let home = env.get("HOME").filter(|home| !home.is_empty());
        let ctx = ScreenContext::new(workspace, home.as_deref().map(Path::new))?;
        let mut scope = MountScope::default();
        if let Some(store) = env.get("ITERION_HOME").filter(|h| !h.is_empty()) {
            scope.store.push(PathBuf::from(store));
        }
        if let Some(home) = home {
            scope.store.push(Path::new(&home).join(".iterion"));
        }
        if let Some(binary) = env.get("ITERION_BIN").filter(|b| b.starts_with('/')) {
            scope.engine_binaries.push(PathBuf::from(binary));
        }
        if let Some(xdg) = env.get("XDG_RUNTIME_DIR").filter(|d| d.starts_with('/')) {
            scope.runtime_roots.push(Path::new(&xdg).join("iterion"));
        }
        Ok(ctx.for_run(Trust::Trusted, &scope))
    }

    /// This context for one run: its trust, and what iterion keeps on the host for it (added
    /// to what is already protected).
    #[must_use]
    pub fn for_run(mut self, trust: Trust, scope: &MountScope) -> ScreenContext {
        self.trust = trust;
        for store in &scope.store {
            let mut paths = Vec::new();
            push_written_and_canonical(&mut paths, store);
            self.protected
                .extend(paths.into_iter().map(|p| (p, Protected::Store)));
        }
        for root in &scope.runtime_roots {
            let mut paths = Vec::new();
            push_written_and_canonical(&mut paths, root);
            self.protected
                .extend(paths.into_iter().map(|p| (p, Protected::RuntimeRoot)));
        }
        for binary in &scope.engine_binaries {
            let mut paths = Vec::new();
            push_written_and_canonical(&mut paths, binary);
            self.protected
                .extend(paths.into_iter().map(|p| (p, Protected::EngineBinary)));
        }
        for dir in &scope.sandbox_writable {
            push_written_and_canonical(&mut self.sandbox_writable, dir);
        }
        self.engine_copy = scope
            .engine_copy
            .as_deref()
            .and_then(|copy| std::fs::canonicalize(copy).ok());
        self
    }

    /// What a sandbox showing the host's root read-only must hide (issue 18, the namespace
    /// driver): the same list screening judges mounts by — the secret system entries
    /// (`/etc/shadow`, `/root`, the engine sockets and state, `/run/user`…; not the ones
    /// [`READABLE_SYSTEM_ENTRIES`] names), `/home`, the operator's home (written and
    /// canonical), and what iterion keeps on the host (the store, the runtime roots). Credential
    /// stores (`~/.ssh`, …) live in homes and go with them. Only paths that exist, canonical,
    /// sorted, without duplicates; an entry under another one is kept (the caller skips it when
    /// it has masked the parent).
    pub fn masked_paths(&self) -> Vec<PathBuf> {
        let mut masked: Vec<PathBuf> = Vec::new();
        let readable: Vec<&Path> = READABLE_SYSTEM_ENTRIES.iter().map(Path::new).collect();
        for entry in SENSITIVE_SYSTEM_ENTRIES {
            if !readable.contains(&Path::new(entry)) {
                masked.push(PathBuf::from(entry));
            }
        }
        masked.push(PathBuf::from("/home"));
        masked.extend(self.homes.iter().cloned());
        masked.extend(
            self.protected
                .iter()
                .filter(|(_, what)| matches!(what, Protected::Store | Protected::RuntimeRoot))
                .map(|(path, _)| path.clone()),
        );
        let mut canonical: Vec<PathBuf> = masked
            .iter()
            .filter_map(|path| std::fs::canonicalize(path).ok())
            .collect();
        canonical.sort();
        canonical.dedup();
        canonical
    }

    /// The operator's home as given (its written form), when known.
    pub fn home(&self) -> Option<&Path> {
        self.homes.first().map(PathBuf::as_path)
    }

    /// The run's trust.
    pub fn trust(&self) -> Trust {
        self.trust
    }

    /// The canonical workspace.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// Why `path` (absolute, lexically clean) is sensitive (§5.2 (a)–(d)), or `None`. Pure.
    pub fn sensitivity(&self, path: &Path) -> Option<Sensitivity> {
        self.sensitivity_except(path, None)
    }

    fn sensitivity_except(&self, path: &Path, skip_entry: Option<&Path>) -> Option<Sensitivity> {
        let related = |entry: &Path| path.starts_with(entry) || entry.starts_with(path);
        if let Some(entry) = self
            .system_entries
            .iter()
            .filter(|entry| Some(entry.as_path()) != skip_entry)
            .find(|entry| related(entry))
        {
            return Some(Sensitivity::SystemEntry(entry.clone()));
        }
        if let Some(name) = path.file_name().and_then(|name| name.to_str())
            && ENGINE_SOCKET_NAMES.contains(&name)
        {
            return Some(Sensitivity::EngineSocket(name.to_owned()));
        }
        if let Some(component) = credential_component(path) {
            return Some(Sensitivity::CredentialStore(component));
        }
        if self.homes.iter().any(|home| home.starts_with(path)) {
            return Some(Sensitivity::HomeOrAncestor);
        }
        None
    }

    /// The author-mount rules on top of [`ScreenContext::sensitivity`] (ours, issue 15): inside
    /// the workspace none applies; outside it, a path in a home directory (the operator's, or
    /// under `/home`), a shell start-up file, and a read-write bind under a system tree.
    fn author_sensitivity(&self, path: &Path, read_only: bool) -> Option<Sensitivity> {
        if let Some(why) = self.sensitivity(path) {
            return Some(why);
        }
        if path.starts_with(&self.workspace) {
            return None;
        }
        let home_root = Path::new("/home");
        if let Some(home) = self
            .homes
            .iter()
            .map(PathBuf::as_path)
            .chain([home_root])
            .find(|home| path.starts_with(home) && *home != Path::new("/"))
        {
            return Some(Sensitivity::HomeContents(home.to_owned()));
        }
        if let Some(name) = path
            .components()
            .filter_map(|c| match c {
                Component::Normal(name) => name.to_str(),
                _ => None,
            })
            .find(|name| SHELL_STARTUP_FILES.contains(name))
        {
            return Some(Sensitivity::ShellStartup(name.to_owned()));
        }
        if !read_only && let Some(tree) = self.system_trees.iter().find(|t| path.starts_with(t)) {
            return Some(Sensitivity::WritableSystemTree(tree.clone()));
        }
        None
    }

    /// What iterion keeps on the host that `path` is, contains or lies in (issue 15 item 3):
    /// the store (except inside a workspace that itself lies in the store: a worktree run), a
    /// runtime root (also any `iterion-*` dir of the temp dir, whoever's it is), or `None`.
    fn protected_rule(&self, path: &Path) -> Option<Protected> {
        let related = |entry: &Path| path.starts_with(entry) || entry.starts_with(path);
        for (entry, what) in &self.protected {
            if !related(entry) {
                continue;
            }
            let worktree_inside_store = *what == Protected::Store
                && self.workspace.starts_with(entry)
                && self.workspace != *entry
                && path.starts_with(&self.workspace);
            if !worktree_inside_store {
                return Some(*what);
            }
        }
        for temp in &self.temp_dirs {
            if temp.starts_with(path) {
                return Some(Protected::RuntimeRoot);
            }
            if let Ok(rest) = path.strip_prefix(temp)
                && let Some(Component::Normal(first)) = rest.components().next()
                && first
                    .to_str()
                    .is_none_or(|name| name.starts_with(RESERVED_VOLUME_PREFIX))
            {
                return Some(Protected::RuntimeRoot);
            }
        }
        None
    }

    /// The one decision "may this author mount be planned for this run" (issue 15 item 3).
    /// For a host path, returns its canonical source, which is what the engine must pin and
    /// bind; `None` for volumes and tmpfs.
    ///
    /// - every run: a named volume starting with `iterion` is the engine's own;
    /// - an **untrusted** run: an allow-list — no host path, no named volume; tmpfs and
    ///   anonymous volumes only;
    /// - a trusted run: a host path is resolved (relative against the workspace, which it may
    ///   not leave) and both its lexical and canonical forms are judged: §5.2 (a)–(d), the
    ///   store and the runtime roots (equal, under or an ancestor), and rules (e)–(g) outside
    ///   the workspace. A source that does not exist is refused.
    ///
    /// # Errors
    ///
    /// The rule the mount breaks.
    pub fn admit(
        &self,
        request: &MountRequest<'_>,
    ) -> std::result::Result<Option<PathBuf>, MountRule> {
        match *request {
            MountRequest::Anonymous => Ok(None),
            MountRequest::NamedVolume(name) => {
                if is_reserved_volume(name) {
                    Err(MountRule::ReservedVolume(name.to_owned()))
                } else if self.trust == Trust::Untrusted {
                    Err(MountRule::UntrustedNamedVolume(name.to_owned()))
                } else {
                    Ok(None)
                }
            }
            MountRequest::HostPath { source, .. } if self.trust == Trust::Untrusted => {
                Err(MountRule::UntrustedHostPath(source.to_owned()))
            }
            MountRequest::HostPath { source, read_only } => {
                screen_bind_source(source, read_only, self).map(Some)
            }
        }
    }

    /// Judges a path the engine has opened (the kernel's name for the pinned object, read
    /// back from `/proc/self/fd`) exactly like a canonical source: `None` when it may be bound.
    pub(crate) fn judge_pinned(&self, path: &Path, read_only: bool) -> Option<MountRule> {
        judge_path(path, read_only, self)
    }

    /// The live-sandbox-writable directory `path` lies in, if any.
    pub fn sandbox_writable_dir(&self, path: &Path) -> Option<&Path> {
        self.sandbox_writable
            .iter()
            .find(|dir| path.starts_with(dir))
            .map(PathBuf::as_path)
    }

    /// Screens the workspace, or any directory the engine would bind like it (the bundle dir,
    /// §8 M4), and returns its canonical path (SANDBOX.md §5.3). Refused: `/`; the user's home or
    /// an ancestor of it; a sensitive path under §5.2 (a)–(c), except that a workspace strictly
    /// below `/root` is accepted when the home is `/root` (a project in root's home).
    ///
    /// # Errors
    ///
    /// [`Error::WorkspaceRefused`] naming the rule; [`Error::Io`] when it cannot be resolved.
    pub fn validate_workspace(&self, path: &Path) -> Result<PathBuf> {
        let canonical = canonicalize(path)?;
        match self.workspace_rule(&canonical) {
            None => Ok(canonical),
            Some(rule) => Err(Error::WorkspaceRefused {
                path: canonical,
                rule,
            }),
        }
    }

    /// The pure half of [`ScreenContext::validate_workspace`]: why the canonical path `canonical`
    /// may not be bound as a workspace, or `None`.
    pub fn workspace_rule(&self, canonical: &Path) -> Option<MountRule> {
        if canonical == Path::new("/") {
            return Some(MountRule::RootDirectory);
        }
        if self.engine_copy.as_deref() == Some(canonical) {
            return None;
        }
        let root_home = Path::new("/root");
        let in_root_home = self.homes.iter().any(|home| home == root_home)
            && canonical.starts_with(root_home)
            && canonical != root_home;
        let skip = in_root_home.then_some(root_home);
        if let Some(why) = self.sensitivity_except(canonical, skip) {
            return Some(MountRule::Sensitive {
                path: canonical.to_owned(),
                why,
            });
        }
        // Issue 15 item 3: a workspace may not contain the store or a runtime root (binding it
        // would hand them over), nor lie in a runtime root; one inside the store (a worktree
        // run) is fine.
        let contains_protected = self
            .protected
            .iter()
            .find(|(entry, what)| {
                (*what != Protected::EngineBinary && entry.starts_with(canonical))
                    || (*what == Protected::RuntimeRoot && canonical.starts_with(entry))
            })
            .map(|(_, what)| *what);
        let temp_root = self.temp_dirs.iter().any(|temp| {
            temp.starts_with(canonical)
                || canonical.strip_prefix(temp).is_ok_and(|rest| {
                    rest.components().next().is_some_and(|first| {
                        first
                            .as_os_str()
                            .to_str()
                            .is_none_or(|name| name.starts_with(RESERVED_VOLUME_PREFIX))
                    })
                })
        });
        contains_protected
            .or(temp_root.then_some(Protected::RuntimeRoot))
            .map(|what| MountRule::Protected {
                path: canonical.to_owned(),
                what,
            })
    }
}

/// Whether a volume name is iterion's own (case-insensitive `iterion` prefix).
pub(super) fn is_reserved_volume(name: &str) -> bool {
    name.get(..RESERVED_VOLUME_PREFIX.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(RESERVED_VOLUME_PREFIX))
}

fn push_written_and_canonical(into: &mut Vec<PathBuf>, path: &Path) {
    let written = clean_path(path);
    let canonical = std::fs::canonicalize(&written)
        .ok()
        .filter(|canonical| canonical != &written);
    into.push(written);
    into.extend(canonical);
}

fn credential_component(path: &Path) -> Option<String> {
    let names: Vec<&str> = path
        .components()
        .filter_map(|component| match component {
            Component::Normal(name) => name.to_str(),
            _ => None,
        })
        .collect();
    if let Some(name) = names
        .iter()
        .find(|name| CREDENTIAL_COMPONENTS.contains(name))
    {
        return Some((*name).to_owned());
    }
    names
        .windows(2)
        .any(|pair| pair == [".config", "gcloud"])
        .then(|| ".config/gcloud".to_owned())
}

fn canonicalize(path: &Path) -> Result<PathBuf> {
    std::fs::canonicalize(path).map_err(|source| Error::Io {
        operation: "canonicalize",
        path: path.to_owned(),
        source,
    })
}

/// An author mount that passed screening.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScreenedMount {
    /// The mount as written.
    pub raw: String,
    /// Its parsed form.
    pub spec: MountSpec,
    /// For a bind: the canonical host source, which is what the engine must bind (never the
    /// written one, which a symlink swap could redirect).
    pub host_source: Option<PathBuf>,
}

/// Parses and screens one author mount (SANDBOX.md §5.1–§5.2).
///
/// Any mount with a host source is a bind, whether or not `type=bind` is written. Its source is
/// resolved against the canonical workspace when relative; the lexical path `L` and the
/// canonical path `C` (symlinks resolved) are both judged by [`ScreenContext::sensitivity`]; a
/// source that does not exist is refused. A relative source must stay inside the workspace,
/// lexically and once resolved (defined here: "relative to the workspace" is taken literally, so
/// `../` and a symlink in the tree cannot reach elsewhere).
///
/// # Errors
///
/// [`Error::MountRefused`] naming the mount and the rule.
///
/// ```
/// use iterion_sandbox::{ScreenContext, validate_mount};
/// let ws = tempfile::tempdir()?;
/// std::fs::create_dir(ws.path().join("cache"))?;
/// let ctx = ScreenContext::new(ws.path(), None)?;
/// let screened = validate_mount("source=cache,target=/cache", &ctx)?;
/// assert_eq!(screened.host_source, Some(ws.path().canonicalize()?.join("cache")));
/// assert!(validate_mount("source=/proc,target=/p", &ctx).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn validate_mount(mount: &str, ctx: &ScreenContext) -> Result<ScreenedMount> {
    let spec = parse_mount(mount)?;
    let refuse = |rule| Error::MountRefused {
        mount: mount.to_owned(),
        rule,
    };
    let request = match (spec.kind, spec.source.as_deref()) {
        (MountKind::Bind, Some(source)) => MountRequest::HostPath {
            source,
            read_only: spec.read_only,
        },
        (MountKind::Volume, Some(name)) => MountRequest::NamedVolume(name),
        _ => MountRequest::Anonymous,
    };
    let host_source = ctx.admit(&request).map_err(refuse)?;
    Ok(ScreenedMount {
        raw: mount.to_owned(),
        spec,
        host_source,
    })
}

/// Every path rule of a trusted host source: §5.2 (a)–(d), what iterion protects, then (unless
/// `core_only`) rules (e)–(g) outside the workspace.
fn judge_rules(
    path: &Path,
    read_only: bool,
    core_only: bool,
    ctx: &ScreenContext,
) -> Option<MountRule> {
    let sensitive = |why| MountRule::Sensitive {
        path: path.to_owned(),
        why,
    };
    if let Some(why) = ctx.sensitivity(path) {
        return Some(sensitive(why));
    }
    if let Some(what) = ctx.protected_rule(path) {
        return Some(MountRule::Protected {
            path: path.to_owned(),
            what,
        });
    }
    if core_only {
        return None;
    }
    ctx.author_sensitivity(path, read_only).map(sensitive)
}

fn judge_path(path: &Path, read_only: bool, ctx: &ScreenContext) -> Option<MountRule> {
    judge_rules(path, read_only, false, ctx)
}

fn screen_bind_source(
    source: &str,
    read_only: bool,
    ctx: &ScreenContext,
) -> std::result::Result<PathBuf, MountRule> {
    let written = Path::new(source);
    let relative = !written.is_absolute();
    let lexical = clean_path(&ctx.workspace.join(written));
    let sensitive = |path: &Path| judge_path(path, read_only, ctx);
    if let Some(rule) = judge_rules(&lexical, read_only, true, ctx) {
        return Err(rule);
    }
    if relative && !lexical.starts_with(&ctx.workspace) {
        return Err(MountRule::RelativeSourceEscapesWorkspace(lexical));
    }
    if let Some(rule) = sensitive(&lexical) {
        return Err(rule);
    }
    let canonical = std::fs::canonicalize(&lexical).map_err(|error| {
        if error.kind() == std::io::ErrorKind::NotFound {
            MountRule::SourceMissing(lexical.clone())
        } else {
            MountRule::SourceUnresolvable {
                path: lexical.clone(),
                error: error.to_string(),
            }
        }
    })?;
    if relative && !canonical.starts_with(&ctx.workspace) {
        if let Some(rule) = judge_rules(&canonical, read_only, true, ctx) {
            return Err(rule);
        }
        return Err(MountRule::RelativeSourceEscapesWorkspace(canonical));
    }
    if let Some(rule) = sensitive(&canonical) {
        return Err(rule);
    }
    Ok(canonical)
}

/// Syntax-checks an engine mount (SANDBOX.md §1.2): exempt from the sensitive-path list, not from
/// the syntax rules. The target must be absolute and clean and not `/` (it may lie under
/// `/run/iterion`: that is where the engine puts its own); the source may not be empty, contain a
/// control character or begin with `-`; a bind source must be absolute, a volume a valid name.
///
/// # Errors
///
/// [`Error::MountRefused`] with the mount rendered as `type=…,source=…,target=…`.
pub(super) fn validate_engine_mount(mount: &EngineMount) -> Result<()> {
    let kind = match mount.kind {
        EngineMountKind::Bind => "bind",
        EngineMountKind::Volume => "volume",
    };
    let rendered = format!(
        "type={kind},source={},target={}",
        mount.source, mount.target
    );
    let refuse = |rule| Error::MountRefused {
        mount: rendered.clone(),
        rule,
    };
    if has_control(&mount.source) || has_control(&mount.target) {
        return Err(refuse(MountRule::ControlCharacter));
    }
    if mount.source.is_empty() {
        return Err(refuse(MountRule::InvalidValue {
            key: "source".to_owned(),
            want: "a host path or a volume name",
        }));
    }
    if mount.source.starts_with('-') {
        return Err(refuse(MountRule::LeadingDash));
    }
    if !is_clean_absolute(&mount.target) {
        return Err(refuse(MountRule::TargetNotAbsoluteClean(
            mount.target.clone(),
        )));
    }
    if mount.target == "/" {
        return Err(refuse(MountRule::TargetIsRoot));
    }
    match mount.kind {
        EngineMountKind::Bind if !Path::new(&mount.source).is_absolute() => {
            Err(refuse(MountRule::InvalidValue {
                key: "source".to_owned(),
                want: "an absolute host path",
            }))
        }
        EngineMountKind::Volume if !is_volume_name(&mount.source) => {
            Err(refuse(MountRule::InvalidVolumeName))
        }
        _ => Ok(()),
    }
}

/// Screens everything a spec would hand a container engine (SANDBOX.md §4.5 step 2, and the
/// doctor's `spec-safety` check): the plain-argument checks of the image, the fallback image,
/// the user and the workdir; each tmpfs entry (plain argument, then its target); every author
/// mount through [`validate_mount`]; every engine mount through `validate_engine_mount`; every
/// env pair. Returns the screened author mounts, in order.
///
/// # Errors
///
/// The first refusal, typed as above.
pub fn validate_spec_mounts(spec: &Spec, ctx: &ScreenContext) -> Result<Vec<ScreenedMount>> {
    let plain = [
        ("image", spec.image.as_deref()),
        ("image_fallback", spec.image_fallback.as_deref()),
        ("user", spec.user.as_deref()),
        ("workdir", spec.workspace_folder.as_deref()),
    ];
    for (label, value) in plain {
        if let Some(value) = value {
            validate_plain_arg(label, value)?;
        }
    }
    for entry in &spec.tmpfs {
        validate_plain_arg("tmpfs", entry)?;
        let target = entry
            .split_once(':')
            .map_or(entry.as_str(), |(target, _)| target);
        check_target(target).map_err(|rule| Error::MountRefused {
            mount: entry.clone(),
            rule,
        })?;
    }
    let screened = spec
        .mounts
        .iter()
        .map(|mount| validate_mount(mount, ctx))
        .collect::<Result<Vec<_>>>()?;
    for mount in &spec.engine_mounts {
        validate_engine_mount(mount)?;
    }
    for (key, value) in &spec.env {
        validate_env_pair(key, value)?;
    }
    Ok(screened)
}

/// Checks that a build input lies inside the workspace (SANDBOX.md §5.4): both paths are
/// canonicalised (symlinks resolved), and `target` must be the workspace or under it. Returns the
/// canonical target.
///
/// # Errors
///
/// [`Error::EscapesWorkspace`] reading `<label> <path> escapes the workspace`; [`Error::Io`] when
/// either path cannot be resolved.
pub fn validate_contains_workspace(
    workspace: &Path,
    target: &Path,
    label: &str,
) -> Result<PathBuf> {
    let workspace = canonicalize(workspace)?;
    let target = canonicalize(&workspace.join(target))?;
    if target.starts_with(&workspace) {
        Ok(target)
    } else {
        Err(Error::EscapesWorkspace {
            label: label.to_owned(),
            path: target,
        })
    }
}
