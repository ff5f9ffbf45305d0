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

use crate::error::{Error, Result};
use crate::mounts::grammar::{
    MountSpec, check_target, is_volume_name, parse_mount, validate_env_pair, validate_plain_arg,
};
use crate::mounts::rules::{MountKind, MountRule, Sensitivity};
use crate::spec::{EngineMount, EngineMountKind, Spec};
use crate::text::{clean_path, has_control, is_clean_absolute};

/// System entries of SANDBOX.md §5.2 (a): a path equal to, under, or an ancestor of one of these
/// is sensitive. The ancestor clause makes `/`, `/etc`, `/var` and `/var/run` sensitive.
pub const SENSITIVE_SYSTEM_ENTRIES: &[&str] = &[
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
];

/// Last components that name a container-engine socket (§5.2 (b)); covers rootless sockets.
pub const ENGINE_SOCKET_NAMES: &[&str] =
    &["docker.sock", "podman.sock", "containerd.sock", "crio.sock"];

/// Components that name a credential store (§5.2 (c)); `.netrc` and `.git-credentials` are ours.
pub const CREDENTIAL_COMPONENTS: &[&str] = &[
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

/// What screening needs to know about the host: the canonical workspace, the user's home and
/// the system entries, each as written and canonicalised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScreenContext {
    workspace: PathBuf,
    homes: Vec<PathBuf>,
    system_entries: Vec<PathBuf>,
}

impl ScreenContext {
    /// Canonicalises `workspace` (it must exist), `home` (as written and, when it exists,
    /// canonical) and every entry of [`SENSITIVE_SYSTEM_ENTRIES`] that exists here.
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
        Ok(ScreenContext {
            workspace,
            homes,
            system_entries,
        })
    }

    /// [`ScreenContext::new`] with the home from `HOME`.
    ///
    /// # Errors
    ///
    /// As [`ScreenContext::new`].
    pub fn from_env(workspace: &Path) -> Result<ScreenContext> {
        let home = crate::env::var("HOME").filter(|home| !home.is_empty());
        ScreenContext::new(workspace, home.as_deref().map(Path::new))
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
        let root_home = Path::new("/root");
        let in_root_home = self.homes.iter().any(|home| home == root_home)
            && canonical.starts_with(root_home)
            && canonical != root_home;
        let skip = in_root_home.then_some(root_home);
        self.sensitivity_except(canonical, skip)
            .map(|why| MountRule::Sensitive {
                path: canonical.to_owned(),
                why,
            })
    }
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
    let host_source = match (spec.kind, spec.source.as_deref()) {
        (MountKind::Bind, Some(source)) => Some(screen_bind_source(source, ctx).map_err(refuse)?),
        _ => None,
    };
    Ok(ScreenedMount {
        raw: mount.to_owned(),
        spec,
        host_source,
    })
}

fn screen_bind_source(
    source: &str,
    ctx: &ScreenContext,
) -> std::result::Result<PathBuf, MountRule> {
    let written = Path::new(source);
    let relative = !written.is_absolute();
    let lexical = clean_path(&ctx.workspace.join(written));
    let sensitive = |path: &Path| {
        ctx.sensitivity(path).map(|why| MountRule::Sensitive {
            path: path.to_owned(),
            why,
        })
    };
    if let Some(rule) = sensitive(&lexical) {
        return Err(rule);
    }
    if relative && !lexical.starts_with(&ctx.workspace) {
        return Err(MountRule::RelativeSourceEscapesWorkspace(lexical));
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
    if let Some(rule) = sensitive(&canonical) {
        return Err(rule);
    }
    if relative && !canonical.starts_with(&ctx.workspace) {
        return Err(MountRule::RelativeSourceEscapesWorkspace(canonical));
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
pub fn validate_engine_mount(mount: &EngineMount) -> Result<()> {
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
/// mount through [`validate_mount`]; every engine mount through [`validate_engine_mount`]; every
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
