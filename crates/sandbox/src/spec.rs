//! [`Spec`]: everything a driver needs to give a run its sandbox (SANDBOX.md §1.2), and its
//! driver-independent validation (§1.3).
//!
//! The fields are public because the engine composes a spec in steps (devcontainer fusion, the
//! operator overlay, then the mount plan M1–M14 of §8), each editing it in place; a builder would
//! have to be taken apart and rebuilt at every step. [`Spec::validate`] is the one gate, and
//! `Driver::prepare` runs it before any I/O.
//!
//! Secret bytes are the exception to "serialisable": [`SecretBytes`] has a redacting `Debug`, no
//! `Display` and no `Serialize`, and [`SecretFileMount`] skips it when serialised (invariant I6).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::mode::{HostState, Inherit, Mode, NetworkMode};
use crate::text::{clean, has_control, is_clean_absolute, is_env_name};

/// The network presets this build knows (SANDBOX.md §6.7). An unknown preset name is an
/// [`Error::InvalidSpec`], never silently dropped.
pub(crate) const KNOWN_PRESETS: &[&str] = &["iterion-default"];

/// The preset a devcontainer-fused spec defaults to (SANDBOX.md §7.9).
pub const DEFAULT_PRESET: &str = "iterion-default";

/// A `build:` request: build the sandbox image from a Dockerfile in the workspace (SANDBOX.md
/// §4.4). Paths are relative to the workspace and must stay inside it (§5.4).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Build {
    /// The Dockerfile, relative to the workspace. Default: `Dockerfile`.
    #[serde(default = "default_dockerfile")]
    pub dockerfile: String,
    /// The build context, relative to the workspace. Default (`None`): the Dockerfile's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// `--build-arg` pairs; passed sorted by key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub args: BTreeMap<String, String>,
}

fn default_dockerfile() -> String {
    "Dockerfile".to_owned()
}

impl Default for Build {
    fn default() -> Self {
        Build {
            dockerfile: default_dockerfile(),
            context: None,
            args: BTreeMap::new(),
        }
    }
}

/// A workflow's `network:` block (SANDBOX.md §1.2, §2.3). A block with rules but no mode is an
/// allowlist (our decision 6), so an empty block refuses all egress.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Network {
    /// `open`, `allowlist` or `denylist`; `None` resolves to allowlist (fail closed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<NetworkMode>,
    /// A named rule set from `KNOWN_PRESETS`; its rules come first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// Host rules, after the preset's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<String>,
    /// Node blocks only (not honoured at run time): replace or append; omitted = merge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inherit: Option<Inherit>,
}

/// What an [`EngineMount`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineMountKind {
    /// A host path bound into the sandbox; dropped on drivers without host binds (§8.8).
    Bind,
    /// A named engine volume.
    Volume,
}

/// A mount the engine itself adds (SANDBOX.md §8): attachments, run files, host state, scratch,
/// the engine binary, the worktree git dir. Syntax-checked but exempt from the sensitive-path
/// list, because the engine builds it from known paths (for example `/root/.iterion` when running
/// as root). Never built from workflow or repository input.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineMount {
    /// Bind or volume.
    pub kind: EngineMountKind,
    /// Host path (bind) or volume name (volume).
    pub source: String,
    /// Absolute, clean path inside the sandbox.
    pub target: String,
    /// Whether the sandbox may only read it.
    pub read_only: bool,
    /// Why it exists (`attachments`, `engine-binary`, …), for events and logs.
    pub purpose: String,
}

/// Secret bytes. `Debug` prints `SecretBytes { .. }`; there is no `Display` and no `Serialize`, so
/// the value cannot reach a log line, an event or a JSON document by accident (invariant I6).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SecretBytes(Vec<u8>);

impl SecretBytes {
    /// Wraps a secret value.
    pub fn new(value: impl Into<Vec<u8>>) -> Self {
        SecretBytes(value.into())
    }

    /// The value itself. Named loudly: call it only where the value is delivered (a file written
    /// into the per-run dir, a Secret manifest), never where it could be logged.
    pub fn expose_secret(&self) -> &[u8] {
        &self.0
    }

    /// The value's length in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the value is empty (a refresh with an empty value is refused).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for SecretBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretBytes").finish_non_exhaustive()
    }
}

impl From<String> for SecretBytes {
    fn from(value: String) -> Self {
        SecretBytes(value.into_bytes())
    }
}

impl From<&str> for SecretBytes {
    fn from(value: &str) -> Self {
        SecretBytes(value.as_bytes().to_vec())
    }
}

/// A workflow secret declared `as: file` (SANDBOX.md §8.7): delivered as a read-only file at
/// `mount_path`, with `env` (when set) naming that path. Serialises without its value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SecretFileMount {
    /// The secret's name (used in file names and `[REDACTED:<NAME>]`).
    pub name: String,
    /// Absolute, clean path of the file in the sandbox.
    pub mount_path: String,
    /// Variable set to `mount_path` in the sandbox, matching `[A-Za-z_][A-Za-z0-9_]*`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    /// The value. Never serialised, never printed.
    #[serde(skip_serializing)]
    pub value: SecretBytes,
}

/// Everything a driver needs to give a run its sandbox (SANDBOX.md §1.2).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Spec {
    /// Whether a sandbox is wanted.
    pub mode: Mode,
    /// Image reference; exclusive with `build`. Empty counts as unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Set only when the engine chose the built-in default image (§2.4); the driver may pull it
    /// when `image` is not found (§4.3).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_fallback: Option<String>,
    /// Build the image from a Dockerfile in the workspace; exclusive with `image`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build: Option<Build>,
    /// Whether `image` is auto's default image, chosen by the resolution rather than named by
    /// the workflow or a devcontainer (set only by [`resolve_sandbox_spec_with_fallback`]'s
    /// fallback). A driver that brings its own root (namespace, issue 18) may replace such an
    /// image; it may never replace one a workflow named. Default: false.
    ///
    /// [`resolve_sandbox_spec_with_fallback`]: crate::resolve_sandbox_spec_with_fallback
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub image_is_default: bool,
    /// Author mounts (workflow block, devcontainer) in `--mount` syntax; always screened
    /// (§5.1–§5.2), never trusted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mounts: Vec<String>,
    /// Mounts the engine adds (§8); syntax-checked, exempt from the sensitive-path list.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub engine_mounts: Vec<EngineMount>,
    /// `<target>[:<options>]`; docker/podman only.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tmpfs: Vec<String>,
    /// Container environment.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// `uid`, `uid:gid` or a name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Shell snippet run once after start with `sh -c`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub post_create: Option<String>,
    /// Workspace path inside the sandbox; `None` = the host's absolute workspace path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace_folder: Option<String>,
    /// Whether the operator's host state is bound.
    pub host_state: HostState,
    /// The workflow's network block; absent = open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<Network>,
    /// File secrets (values never serialised).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub secret_files: Vec<SecretFileMount>,
    /// The in-sandbox path of the engine binary to run as the sandbox's own command, serving
    /// the exec agent on its stdin/stdout (issue 18; [`crate::exec_agent`]), set by the engine
    /// when the agent is on and the binary is bound. A driver that can attach to its sandbox's
    /// command (docker, podman) does so and hands the channel over
    /// ([`SandboxRun::take_attached_agent`](crate::SandboxRun::take_attached_agent)); any
    /// other ignores it. `None`: the sandbox's command is the driver's own idle process.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exec_agent: Option<String>,
    /// Resource limits (issue 18; [`crate::Limits`]), set by the engine from the operator's
    /// settings; a driver without
    /// [`supports_resource_limits`](crate::Capabilities::supports_resource_limits) ignores them.
    #[serde(skip_serializing_if = "crate::Limits::is_empty")]
    pub limits: crate::Limits,
}

impl Spec {
    /// The image reference, when one is set and non-empty.
    pub fn image_ref(&self) -> Option<&str> {
        self.image.as_deref().filter(|image| !image.is_empty())
    }

    /// Whether the spec names a container (`image:` or `build:`); what lets a workflow block win
    /// over `--sandbox=auto` (SANDBOX.md §2.1, tier 2).
    pub fn names_container(&self) -> bool {
        self.image_ref().is_some() || self.build.is_some()
    }

    /// Whether a driver without images (namespace, issue 18) can honour this spec: no `build:`,
    /// and no image but auto's default ([`Spec::image_is_default`]), which the host's root
    /// replaces.
    pub fn runs_without_image(&self) -> bool {
        self.build.is_none() && (self.image_ref().is_none() || self.image_is_default)
    }

    /// Validates the spec without any driver knowledge (SANDBOX.md §1.3). Checks run in order
    /// and the first failure is returned:
    ///
    /// 1. the mode is valid (guaranteed by the type: [`Mode::parse`] is the only way in);
    /// 2. inline has an image or a build;
    /// 3. not both image and build;
    /// 4. network: `inherit` is replace/append (guaranteed by [`Inherit::parse`]); a preset is
    ///    one of `KNOWN_PRESETS`;
    /// 5. `workspace_folder` is absolute and clean, not `/` and not under `/run/iterion`;
    /// 6. each secret file: `mount_path` absolute, clean, not `/`, no newline, carriage return,
    ///    NUL or comma; `env` a portable name; no two sharing a `mount_path`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidSpec`] naming the field.
    ///
    /// ```
    /// use iterion_sandbox::{Error, Mode, Spec};
    /// let spec = Spec { mode: Mode::Inline, ..Spec::default() };
    /// let Err(Error::InvalidSpec { field, .. }) = spec.validate() else { panic!() };
    /// assert_eq!(field, "image");
    /// ```
    pub fn validate(&self) -> Result<()> {
        if self.mode == Mode::Inline && !self.names_container() {
            return Err(invalid("image", "mode inline needs image or build"));
        }
        if self.image_ref().is_some() && self.build.is_some() {
            return Err(invalid(
                "image",
                "image and build are exclusive; set only one",
            ));
        }
        if let Some(preset) = self.network.as_ref().and_then(|n| n.preset.as_deref())
            && !KNOWN_PRESETS.contains(&preset)
        {
            return Err(invalid(
                "network.preset",
                &format!(
                    "unknown preset \"{}\" (known: {})",
                    crate::text::escape_controls(preset),
                    KNOWN_PRESETS.join(", ")
                ),
            ));
        }
        if let Some(folder) = self.workspace_folder.as_deref() {
            check_clean_absolute("workspace_folder", folder)?;
            // The same target rule as every mount: not `/`, not under the engine's reserved
            // `/run/iterion` (the engine binary, the bridge socket, the secrets live there).
            crate::mounts::check_target(folder)
                .map_err(|rule| invalid("workspace_folder", &format!("{folder}: {rule}")))?;
        }
        self.validate_secret_files()
    }

    fn validate_secret_files(&self) -> Result<()> {
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        for (index, secret) in self.secret_files.iter().enumerate() {
            let field = format!("secret_files[{index}].mount_path");
            let path = secret.mount_path.as_str();
            if path.contains(['\n', '\r', '\0', ',']) {
                return Err(invalid(
                    &field,
                    "may not contain a newline, carriage return, NUL or comma",
                ));
            }
            check_clean_absolute(&field, path)?;
            if path == "/" {
                return Err(invalid(&field, "may not be /"));
            }
            if let Some(env) = secret.env.as_deref()
                && !is_env_name(env)
            {
                return Err(invalid(
                    &format!("secret_files[{index}].env"),
                    &format!(
                        "\"{}\" is not a variable name ([A-Za-z_][A-Za-z0-9_]*)",
                        crate::text::escape_controls(env)
                    ),
                ));
            }
            if !seen.insert(path) {
                return Err(invalid(
                    &field,
                    &format!("{path} is already the mount_path of another secret file"),
                ));
            }
        }
        Ok(())
    }
}

fn check_clean_absolute(field: &str, path: &str) -> Result<()> {
    if has_control(path) {
        return Err(invalid(field, "may not contain control characters"));
    }
    if !path.starts_with('/') {
        return Err(invalid(field, &format!("{path} is not absolute")));
    }
    if !is_clean_absolute(path) {
        return Err(invalid(
            field,
            &format!("{path} is not clean (want {})", clean(path)),
        ));
    }
    Ok(())
}

fn invalid(field: &str, reason: &str) -> Error {
    Error::InvalidSpec {
        field: field.to_owned(),
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
#[path = "spec_tests.rs"]
mod tests;
