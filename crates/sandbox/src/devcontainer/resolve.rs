//! Auto resolution (SANDBOX.md §7.5): from the resolved mode, the workflow block, the
//! devcontainer text and the default image to the run's spec, its source-label detail and the
//! facts the engine turns into events. Pure but for mount screening, which resolves host paths
//! through the caller's [`ScreenContext`].

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::mode::Mode;
use crate::mounts::{ScreenContext, validate_mount};
use crate::precedence::DefaultImage;
use crate::spec::Spec;

use super::convert::to_sandbox_spec;
use super::expand::{LocalVars, expand_sandbox_spec};
use super::fuse::fuse_devcontainer_spec;
use super::overlay::{EnvOverlay, merge_environment_overlay};
use super::read::{DevcontainerText, parse_devcontainer};
use super::run_args::screen_run_args;
use crate::error::DevcontainerError;

/// `skip_reason` of auto without a repository root (SANDBOX.md §7.5); degrades from any tier.
pub(super) const AUTO_WITHOUT_REPOSITORY_ROOT: &str =
    "no repository root: sandbox: auto needs a git repository";

/// The message of auto with no devcontainer and no default image (SANDBOX.md §7.5).
pub const NO_DEVCONTAINER_NO_DEFAULT_IMAGE: &str =
    "mode=auto but no .devcontainer/devcontainer.json found";

/// Everything auto resolution needs, as values. The engine fills it from `pick_mode`,
/// `git rev-parse --show-toplevel`, [`read_from_repo`](super::read_from_repo),
/// `resolve_default_sandbox_image_with_fallback`,
/// the overlay sources and [`ScreenContext::from_env`].
pub struct AutoInputs<'a> {
    /// The resolved mode (`pick_mode(..).0`).
    pub mode: Mode,
    /// The tier's label (`pick_mode(..).1.label()`); the detail is appended to it.
    pub source_label: &'a str,
    /// The workflow's compiled `sandbox:` block.
    pub workflow: Option<&'a Spec>,
    /// The repository root; `None` when the workspace is not in a git repository.
    pub repo_root: Option<&'a Path>,
    /// What [`read_from_repo`](super::read_from_repo) found (ignored unless mode is auto).
    pub devcontainer: &'a DevcontainerText,
    /// auto's default image; `None` for an engine without one.
    pub default_image: Option<&'a DefaultImage>,
    /// Host variable lookup; only ever called with allow-listed names (§7.4).
    pub lookup: &'a dyn Fn(&str) -> Option<String>,
    /// The operator overlay (`--sandbox-env` over `ITERION_SANDBOX_ENV_FILE`).
    pub overlay: &'a EnvOverlay,
    /// Mount screening context for the workspace (§5.2).
    pub screen: &'a ScreenContext,
}

impl std::fmt::Debug for AutoInputs<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AutoInputs")
            .field("mode", &self.mode)
            .field("source_label", &self.source_label)
            .field("repo_root", &self.repo_root)
            .finish_non_exhaustive()
    }
}

/// The outcome of [`resolve_sandbox_spec_with_fallback`] (SANDBOX.md §7.5).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResolvedSpec {
    /// The run's spec; `None` for none/inherit and for a skip.
    pub spec: Option<Spec>,
    /// `source_label` followed by `source_detail`: `sandbox_started.source`.
    pub source: String,
    /// The detail alone: ` (<path>)`, ` (default image: <ref>)`,
    /// ` (devcontainer unusable — <error> — default image: <ref>)`, or empty.
    pub source_detail: String,
    /// Why auto degrades (`sandbox_skipped.reason`), when it does.
    pub skip_reason: Option<String>,
    /// The keys the repository contributed (not workflow-authored, not denied).
    pub repo_env: BTreeSet<String>,
    /// Repository keys stripped by the deny class, sorted: emit `sandbox_env_denied` when not
    /// empty.
    pub denied_env: Vec<String>,
    /// Emit `sandbox_network_defaulted` (after `sandbox_env_denied`) and resolve the policy with
    /// [`NetworkOrigin::DevcontainerDefault`](crate::NetworkOrigin::DevcontainerDefault).
    pub repo_network_defaulted: bool,
    /// The devcontainer that was fused, when one was.
    pub devcontainer: Option<PathBuf>,
    /// The overlay keys that were applied, sorted (for the run log; values never logged).
    pub overlay_applied: Vec<String>,
    /// Run-log lines: the unusable-devcontainer warning, `runArgs ignored: …`, the
    /// `initializeCommand` notice.
    pub run_log: Vec<String>,
}

/// Resolves the run's spec (SANDBOX.md §7.5):
///
/// | situation | result |
/// |---|---|
/// | mode none or inherit | no spec |
/// | auto, no repository root | no spec, `AUTO_WITHOUT_REPOSITORY_ROOT` |
/// | auto, devcontainer missing | workflow fields + mode auto + default image, ` (default image: <ref>)`; no default image: error |
/// | auto, devcontainer unusable | the same, ` (devcontainer unusable — <error> — default image: <ref>)` plus a warning; no default image: skip `devcontainer.json unreadable: <error>` |
/// | auto, devcontainer refused | error, no fallback |
/// | auto, devcontainer found | fused (§7.6), ` (<path>)` |
/// | inline | the block, expanded |
///
/// The workflow block is expanded (§7.4) on every path, and the overlay (§7.8) applies on every
/// path that yields a spec. Mounts of a fused spec are screened here (§5.2).
///
/// # Errors
///
/// [`Error::Devcontainer`](crate::Error::Devcontainer) with [`DevcontainerError::RunArgRefused`] or
/// [`DevcontainerError::MountRefused`] (a refusal: `SANDBOX_SETUP_FAILED`, nothing starts),
/// [`DevcontainerError::NoDefaultImage`], [`DevcontainerError::InlineWithoutBlock`];
/// [`Error::MountRefused`](crate::Error::MountRefused) for a refused workflow mount in a fused spec.
pub fn resolve_sandbox_spec_with_fallback(inputs: &AutoInputs<'_>) -> Result<ResolvedSpec> {
    let vars = LocalVars {
        repo_root: inputs.repo_root,
        lookup: inputs.lookup,
    };
    let workflow = inputs.workflow.map(|block| {
        let mut block = block.clone();
        expand_sandbox_spec(&mut block, &vars);
        block
    });
    let mut resolved = ResolvedSpec {
        source: inputs.source_label.to_owned(),
        ..ResolvedSpec::default()
    };
    match inputs.mode {
        Mode::None | Mode::Inherit => return Ok(resolved),
        Mode::Inline => {
            let Some(mut spec) = workflow else {
                return Err(DevcontainerError::InlineWithoutBlock.into());
            };
            resolved.overlay_applied =
                merge_environment_overlay(&mut spec, inputs.overlay, &BTreeSet::new());
            resolved.spec = Some(spec);
            return Ok(resolved);
        }
        Mode::Auto => {}
    }
    let Some(repo_root) = inputs.repo_root else {
        resolved.skip_reason = Some(AUTO_WITHOUT_REPOSITORY_ROOT.to_owned());
        return Ok(resolved);
    };
    let (path, text) = match inputs.devcontainer {
        DevcontainerText::NotFound => {
            let Some(default) = inputs.default_image else {
                return Err(DevcontainerError::NoDefaultImage.into());
            };
            let detail = format!(" (default image: {})", default.image);
            return Ok(fallback(resolved, inputs, workflow, default, detail));
        }
        DevcontainerText::Unusable(error) => {
            return Ok(unusable(resolved, inputs, workflow, error));
        }
        DevcontainerText::Found { path, text } => (path, text),
    };
    let repo = match parse_devcontainer(path, text)
        .and_then(|dc| to_sandbox_spec(&dc, repo_root, &vars))
    {
        Ok(repo) => repo,
        Err(error) if error.is_unusable() => {
            return Ok(unusable(resolved, inputs, workflow, &error));
        }
        Err(error) => return Err(error.into()),
    };
    let ignored = screen_run_args(&repo.run_args, inputs.screen).map_err(|(arg, rule)| {
        DevcontainerError::RunArgRefused {
            path: path.clone(),
            arg,
            rule,
        }
    })?;
    for mount in &repo.spec.mounts {
        validate_mount(mount, inputs.screen).map_err(|source| DevcontainerError::MountRefused {
            path: path.clone(),
            source: Box::new(source),
        })?;
    }
    let fused = fuse_devcontainer_spec(&repo.spec, workflow.as_ref());
    for mount in &fused.spec.mounts {
        validate_mount(mount, inputs.screen)?;
    }
    let mut spec = fused.spec;
    resolved.overlay_applied =
        merge_environment_overlay(&mut spec, inputs.overlay, &fused.repo_env);
    if !ignored.is_empty() {
        resolved
            .run_log
            .push(format!("runArgs ignored: {}", ignored.join(" ")));
    }
    if repo.has_initialize_command {
        resolved
            .run_log
            .push("devcontainer initializeCommand is never run (ignored)".to_owned());
    }
    resolved.source_detail = format!(" ({})", path.display());
    resolved.source.push_str(&resolved.source_detail);
    resolved.spec = Some(spec);
    resolved.repo_env = fused.repo_env;
    resolved.denied_env = fused.denied_env;
    resolved.repo_network_defaulted = fused.network_defaulted;
    resolved.devcontainer = Some(path.clone());
    Ok(resolved)
}

/// A shape failure: the default image with the reason in the label, or a skip without one.
fn unusable(
    mut resolved: ResolvedSpec,
    inputs: &AutoInputs<'_>,
    workflow: Option<Spec>,
    error: &DevcontainerError,
) -> ResolvedSpec {
    let Some(default) = inputs.default_image else {
        resolved.skip_reason = Some(format!("devcontainer.json unreadable: {error}"));
        return resolved;
    };
    resolved.run_log.push(format!(
        "devcontainer unusable, using the default image {}: {error}",
        default.image
    ));
    let detail = format!(
        " (devcontainer unusable — {error} — default image: {})",
        default.image
    );
    fallback(resolved, inputs, workflow, default, detail)
}

/// The workflow block's fields + mode auto + the default image (its network as written).
fn fallback(
    mut resolved: ResolvedSpec,
    inputs: &AutoInputs<'_>,
    workflow: Option<Spec>,
    default: &DefaultImage,
    detail: String,
) -> ResolvedSpec {
    let mut spec = Spec {
        mode: Mode::Auto,
        image: Some(default.image.clone()),
        image_fallback: default.fallback.clone(),
        build: None,
        image_is_default: true,
        ..workflow.unwrap_or_default()
    };
    resolved.overlay_applied =
        merge_environment_overlay(&mut spec, inputs.overlay, &BTreeSet::new());
    resolved.source.push_str(&detail);
    resolved.source_detail = detail;
    resolved.spec = Some(spec);
    resolved
}
