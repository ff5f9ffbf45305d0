//! Precedence (SANDBOX.md §2): which tier chose the mode, the host state, the network policy and
//! the default image, each returned with the label of the tier that spoke.
//!
//! Every function here is pure: flag and variable values come in as parameters, and the thin
//! readers in [`crate::env`] fetch them. The labels only label (our decision 1, invariant I2):
//! behaviour keys on the resolved value, never on where it was written.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::mode::{HostState, Mode, NetworkMode, SandboxFlag, Trust};
use crate::spec::{Network, Spec};

/// Which precedence tier chose the mode (SANDBOX.md §2.1). It labels events and refusals;
/// nothing branches on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(into = "&'static str")]
pub enum Source {
    /// `--sandbox` (or `ITERION_SANDBOX_OVERRIDE` in its place).
    CliFlag,
    /// `--sandbox=auto` yielded to a workflow block naming `image:` or `build:`.
    WorkflowOverridesAutoFlag,
    /// The workflow's `sandbox:` block.
    WorkflowBlock,
    /// The entry point's global default (`ITERION_SANDBOX_DEFAULT`, else auto).
    GlobalDefault,
    /// Nothing configured.
    Default,
}

/// The label of the global-default tier (the seed's `sandboxDefaultSource`).
pub(crate) const SANDBOX_DEFAULT_SOURCE: &str = "global sandbox default";

impl Source {
    /// The exact label of SANDBOX.md §2.1.
    pub fn label(self) -> &'static str {
        match self {
            Source::CliFlag => "cli flag --sandbox",
            Source::WorkflowOverridesAutoFlag => {
                "workflow sandbox: block (overrides --sandbox=auto)"
            }
            Source::WorkflowBlock => "workflow sandbox: block",
            Source::GlobalDefault => SANDBOX_DEFAULT_SOURCE,
            Source::Default => "default (no sandbox)",
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

impl From<Source> for &'static str {
    fn from(source: Source) -> &'static str {
        source.label()
    }
}

/// The CLI tier: `--sandbox` when given, else `ITERION_SANDBOX_OVERRIDE` (the flag beats the
/// variable; defined in SANDBOX.md §2.1).
pub(crate) fn cli_tier(
    flag: Option<SandboxFlag>,
    override_env: Option<SandboxFlag>,
) -> Option<SandboxFlag> {
    flag.or(override_env)
}

/// Picks the run's mode and the tier that chose it (SANDBOX.md §2.1).
///
/// `workflow_block` is the workflow's compiled `sandbox:` block (a block without `mode:` is
/// already inline, per DSL.md); `cli` is `cli_tier`; `global` is the entry point's default
/// (`None` for a neutral engine).
///
/// Precedence, first match wins: CLI `none` beats everything, even an inline block; `--sandbox=auto`
/// is the one tier that yields, to an inline block naming `image:` or `build:` (the more specific
/// statement of the same intent); then the block; then the global default; then nothing.
///
/// ```
/// use iterion_sandbox::{Mode, SandboxFlag, Source, Spec, pick_mode};
/// let block = Spec { mode: Mode::Inline, image: Some("alpine".into()), ..Spec::default() };
/// assert_eq!(
///     pick_mode(Some(&block), Some(SandboxFlag::Auto), None),
///     (Mode::Inline, Source::WorkflowOverridesAutoFlag)
/// );
/// assert_eq!(pick_mode(Some(&block), Some(SandboxFlag::None), None), (Mode::None, Source::CliFlag));
/// ```
pub fn pick_mode(
    workflow_block: Option<&Spec>,
    cli: Option<SandboxFlag>,
    global: Option<SandboxFlag>,
) -> (Mode, Source) {
    let block_mode = workflow_block.map_or(Mode::Inherit, |block| block.mode);
    let block_names_container =
        workflow_block.is_some_and(|block| block.mode == Mode::Inline && block.names_container());
    match (cli, block_mode, global) {
        (Some(SandboxFlag::None), _, _) => (Mode::None, Source::CliFlag),
        (Some(SandboxFlag::Auto), _, _) if block_names_container => {
            (Mode::Inline, Source::WorkflowOverridesAutoFlag)
        }
        (Some(SandboxFlag::Auto), _, _) => (Mode::Auto, Source::CliFlag),
        (None, Mode::None | Mode::Auto | Mode::Inline, _) => (block_mode, Source::WorkflowBlock),
        (None, Mode::Inherit, Some(global)) => (global.mode(), Source::GlobalDefault),
        (None, Mode::Inherit, None) => (Mode::Inherit, Source::Default),
    }
}

/// Whether the workflow's sandbox is active, by the mode alone (SANDBOX.md §2.5).
pub fn workflow_sandbox_active(
    workflow_block: Option<&Spec>,
    cli: Option<SandboxFlag>,
    global: Option<SandboxFlag>,
) -> bool {
    pick_mode(workflow_block, cli, global).0.is_active()
}

/// The global default from the value of `ITERION_SANDBOX_DEFAULT` (SANDBOX.md §2.1): trimmed
/// and lower-cased; unset or empty means `auto` (sandbox by default).
///
/// # Errors
///
/// [`Error::InvalidSetting`] naming the variable for anything but `auto` or `none`; entry points
/// exit 2 on it.
pub(crate) fn resolve_global_sandbox_default(value: Option<&str>) -> Result<SandboxFlag> {
    parse_two_word(crate::vars::ITERION_SANDBOX_DEFAULT, value)
        .map(|flag| flag.unwrap_or(SandboxFlag::Auto))
}

/// The CLI-strength override from the value of `ITERION_SANDBOX_OVERRIDE`: unset or empty means
/// none given.
///
/// # Errors
///
/// [`Error::InvalidSetting`] naming the variable for anything but `auto` or `none` (defined here:
/// a misspelt override must not silently leave the run unsandboxed or sandboxed).
pub(crate) fn resolve_sandbox_override(value: Option<&str>) -> Result<Option<SandboxFlag>> {
    parse_two_word(crate::vars::ITERION_SANDBOX_OVERRIDE, value)
}

fn parse_two_word(variable: &'static str, value: Option<&str>) -> Result<Option<SandboxFlag>> {
    match value.map(str::trim) {
        None | Some("") => Ok(None),
        Some(word) => SandboxFlag::parse(word)
            .map(Some)
            .ok_or_else(|| Error::InvalidSetting {
                variable,
                value: word.to_owned(),
                want: "auto or none",
            }),
    }
}

/// Which tier chose the host state (SANDBOX.md §2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(into = "&'static str")]
pub enum HostStateSource {
    /// The run is untrusted: forced `none`, because an untrusted working tree must not get the
    /// operator's home.
    UntrustedRun,
    /// `--sandbox-host-state`.
    CliFlag,
    /// The workflow's `sandbox.host_state`.
    WorkflowBlock,
    /// `ITERION_SANDBOX_HOST_STATE`.
    Env,
    /// Nothing spoke.
    Default,
}

impl HostStateSource {
    /// The exact label of SANDBOX.md §2.2.
    pub fn label(self) -> &'static str {
        match self {
            HostStateSource::UntrustedRun => "untrusted run",
            HostStateSource::CliFlag => "cli flag --sandbox-host-state",
            HostStateSource::WorkflowBlock => "workflow sandbox.host_state",
            HostStateSource::Env => crate::vars::ITERION_SANDBOX_HOST_STATE,
            HostStateSource::Default => "default",
        }
    }
}

impl From<HostStateSource> for &'static str {
    fn from(source: HostStateSource) -> &'static str {
        source.label()
    }
}

impl std::fmt::Display for HostStateSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// Picks the host state and its tier (SANDBOX.md §2.2). Each argument is [`HostState::Unset`]
/// when its tier said nothing.
///
/// An untrusted run is forced to `none` first. The default tier returns [`HostState::Unset`], so
/// the spec is written only when a tier spoke, and `Unset` acts per driver (auto with host binds,
/// none without).
pub fn pick_host_state(
    block: HostState,
    cli: HostState,
    global: HostState,
    trust: Trust,
) -> (HostState, HostStateSource) {
    if trust == Trust::Untrusted {
        return (HostState::None, HostStateSource::UntrustedRun);
    }
    [
        (cli, HostStateSource::CliFlag),
        (block, HostStateSource::WorkflowBlock),
        (global, HostStateSource::Env),
    ]
    .into_iter()
    .find(|(state, _)| state.is_set())
    .unwrap_or((HostState::Unset, HostStateSource::Default))
}

/// The global host-state tier from the value of `ITERION_SANDBOX_HOST_STATE`: trimmed and
/// lower-cased; unset or empty means [`HostState::Unset`].
///
/// # Errors
///
/// [`Error::InvalidSetting`] naming the variable for anything but `auto` or `none`.
pub(crate) fn resolve_host_state_setting(value: Option<&str>) -> Result<HostState> {
    match value.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
        None | Some("") => Ok(HostState::Unset),
        Some("auto") => Ok(HostState::Auto),
        Some("none") => Ok(HostState::None),
        Some(_) => Err(Error::InvalidSetting {
            variable: crate::vars::ITERION_SANDBOX_HOST_STATE,
            value: value.unwrap_or_default().trim().to_owned(),
            want: "auto or none",
        }),
    }
}

/// Whether a spec's network block was written by the workflow or defaulted upstream for a
/// devcontainer-fused spec (SANDBOX.md §7.9, `repo_network_defaulted`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetworkOrigin {
    /// As the workflow wrote it (or absent).
    Workflow,
    /// Defaulted to the `iterion-default` allowlist because the spec was fused from a
    /// repository devcontainer.
    DevcontainerDefault,
}

/// Which row of SANDBOX.md §2.3 resolved the network policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(into = "&'static str")]
pub enum NetworkSource {
    /// No network block: open.
    Default,
    /// A block without `mode:`: allowlist (our decision 6).
    WorkflowNoMode,
    /// A block with a mode.
    Workflow,
    /// The devcontainer default (`iterion-default` allowlist).
    DevcontainerDefault,
}

impl NetworkSource {
    /// The exact label of SANDBOX.md §2.3 (written to `sandbox_started.network_source`).
    pub fn label(self) -> &'static str {
        match self {
            NetworkSource::Default => "default (open)",
            NetworkSource::WorkflowNoMode => "workflow sandbox.network (no mode: allowlist)",
            NetworkSource::Workflow => "workflow sandbox.network",
            NetworkSource::DevcontainerDefault => "devcontainer default (iterion-default)",
        }
    }
}

impl From<NetworkSource> for &'static str {
    fn from(source: NetworkSource) -> &'static str {
        source.label()
    }
}

/// The run-log warning for a network block without a mode (SANDBOX.md §2.3).
pub(crate) const NETWORK_NO_MODE_WARNING: &str = "network: block has no mode; enforcing allowlist";

/// The resolved egress policy (SANDBOX.md §2.3). The preset's rules come before `rules`; the
/// preset is expanded by the proxy crate, which owns the preset tables (§6.7).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NetworkPolicy {
    /// The enforced mode.
    pub mode: NetworkMode,
    /// The preset whose rules come first, if any.
    pub preset: Option<String>,
    /// The block's own rules, in order.
    pub rules: Vec<String>,
    /// Which row resolved it.
    pub source: NetworkSource,
}

impl NetworkPolicy {
    /// The warning to log, when the row has one (`NETWORK_NO_MODE_WARNING`).
    pub fn warning(&self) -> Option<&'static str> {
        (self.source == NetworkSource::WorkflowNoMode).then_some(NETWORK_NO_MODE_WARNING)
    }
}

/// Resolves the spec's network block into the enforced policy (SANDBOX.md §2.3). Only the
/// workflow block supplies a network: there is no CLI or env tier. A block without a mode is an
/// allowlist, so an empty block refuses every host (fail closed).
pub fn resolve_network_policy(spec: &Spec, origin: NetworkOrigin) -> NetworkPolicy {
    let Some(Network {
        mode,
        preset,
        rules,
        ..
    }) = spec.network.as_ref()
    else {
        return NetworkPolicy {
            mode: NetworkMode::Open,
            preset: None,
            rules: Vec::new(),
            source: NetworkSource::Default,
        };
    };
    let source = match (origin, mode) {
        (NetworkOrigin::DevcontainerDefault, _) => NetworkSource::DevcontainerDefault,
        (NetworkOrigin::Workflow, None) => NetworkSource::WorkflowNoMode,
        (NetworkOrigin::Workflow, Some(_)) => NetworkSource::Workflow,
    };
    NetworkPolicy {
        mode: mode.unwrap_or(NetworkMode::Allowlist),
        preset: preset.clone(),
        rules: rules.clone(),
        source,
    }
}

macro_rules! image_repository {
    () => {
        "ghcr.io/socialgouv/iterion-sandbox"
    };
}

/// The one place the published sandbox images' repository is named (SANDBOX.md §2.4); the
/// variants append `-slim` or `-full`.
pub(crate) const DEFAULT_IMAGE_REPOSITORY: &str = image_repository!();

/// The built-in default's fallback: pulled when the versioned tag is not published.
pub(crate) const DEFAULT_IMAGE_FALLBACK: &str = concat!(image_repository!(), "-slim:latest");

/// The published image variants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageVariant {
    /// The default: `iterion-sandbox-slim`.
    Slim,
    /// The opt-in full variant: `iterion-sandbox-full`.
    Full,
}

/// The tag of the published images matching this build: `v<version>` in release builds, `edge`
/// in any other build.
pub(crate) fn image_tag() -> String {
    if cfg!(debug_assertions) {
        "edge".to_owned()
    } else {
        format!("v{}", env!("CARGO_PKG_VERSION"))
    }
}

/// The published image reference of a variant at `image_tag`.
pub fn built_in_image(variant: ImageVariant) -> String {
    let suffix = match variant {
        ImageVariant::Slim => "slim",
        ImageVariant::Full => "full",
    };
    format!("{DEFAULT_IMAGE_REPOSITORY}-{suffix}:{}", image_tag())
}

/// Which tier chose the default image (SANDBOX.md §2.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(into = "&'static str")]
pub enum DefaultImageSource {
    /// `--sandbox-default-image`.
    CliFlag,
    /// `ITERION_SANDBOX_DEFAULT_IMAGE`.
    Env,
    /// The built-in slim image.
    BuiltIn,
}

impl DefaultImageSource {
    /// The exact label of SANDBOX.md §2.4.
    pub fn label(self) -> &'static str {
        match self {
            DefaultImageSource::CliFlag => "cli flag --sandbox-default-image",
            DefaultImageSource::Env => crate::vars::ITERION_SANDBOX_DEFAULT_IMAGE,
            DefaultImageSource::BuiltIn => "built-in default",
        }
    }
}

impl From<DefaultImageSource> for &'static str {
    fn from(source: DefaultImageSource) -> &'static str {
        source.label()
    }
}

/// The image auto uses when the repository has no devcontainer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DefaultImage {
    /// The image reference.
    pub image: String,
    /// Set only for the built-in default: what to pull when `image` is not published. Goes to
    /// [`Spec::image_fallback`].
    pub fallback: Option<String>,
    /// Which tier chose it.
    pub source: DefaultImageSource,
}

/// Resolves auto's default image (SANDBOX.md §2.4): the flag, else `ITERION_SANDBOX_DEFAULT_IMAGE`,
/// else the built-in slim image with [`DEFAULT_IMAGE_FALLBACK`]. Empty or blank values count as
/// unset. An operator-chosen image never gets a fallback.
pub(crate) fn resolve_default_sandbox_image_with_fallback(
    flag: Option<&str>,
    env_value: Option<&str>,
) -> DefaultImage {
    let given = |value: Option<&str>| {
        value
            .map(str::trim)
            .filter(|value| !value.is_empty())
            .map(str::to_owned)
    };
    if let Some(image) = given(flag) {
        return DefaultImage {
            image,
            fallback: None,
            source: DefaultImageSource::CliFlag,
        };
    }
    if let Some(image) = given(env_value) {
        return DefaultImage {
            image,
            fallback: None,
            source: DefaultImageSource::Env,
        };
    }
    DefaultImage {
        image: built_in_image(ImageVariant::Slim),
        fallback: Some(DEFAULT_IMAGE_FALLBACK.to_owned()),
        source: DefaultImageSource::BuiltIn,
    }
}

/// Why a run will not get a container (SANDBOX.md §2.5): exactly one of these when the verdict is
/// "no".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(into = "&'static str")]
pub enum NotSandboxedCause {
    /// `ITERION_SANDBOX_OVERRIDE=none` filled the CLI tier.
    OverrideNone,
    /// An explicit `none` from the flag, the workflow block or the global default.
    OptedOut,
    /// Nothing configured (mode inherit).
    NoSandboxConfiguration,
    /// auto, but the workspace is not in a git repository.
    AutoWithoutRepositoryRoot,
    /// An active mode, but no container-runtime driver answers.
    NoContainerRuntime,
}

impl NotSandboxedCause {
    /// The exact cause text of SANDBOX.md §2.5.
    pub fn label(self) -> &'static str {
        match self {
            NotSandboxedCause::OverrideNone => "override none",
            NotSandboxedCause::OptedOut => "opted out",
            NotSandboxedCause::NoSandboxConfiguration => "no sandbox configuration",
            NotSandboxedCause::AutoWithoutRepositoryRoot => "auto without repository root",
            NotSandboxedCause::NoContainerRuntime => "no container runtime",
        }
    }
}

impl From<NotSandboxedCause> for &'static str {
    fn from(cause: NotSandboxedCause) -> &'static str {
        cause.label()
    }
}

/// Whether a run gets a sandbox; a "no" always says why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sandboxing {
    /// A driver other than noop comes back.
    Sandboxed,
    /// No container, for this reason.
    NotSandboxed(NotSandboxedCause),
}

/// The answer to "will this run be sandboxed?" (SANDBOX.md §2.5), shared by admission, the
/// attachments-dir forecast and the file-secret delivery decision. Serialized as
/// `{yes, mode, source, cause}`, `cause` null exactly when `yes`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxVerdict {
    /// Sandboxed, or why not.
    pub answer: Sandboxing,
    /// The resolved mode.
    pub mode: Mode,
    /// The tier that chose it.
    pub source: Source,
}

impl SandboxVerdict {
    /// Whether the run gets a sandbox.
    pub fn is_sandboxed(&self) -> bool {
        self.answer == Sandboxing::Sandboxed
    }

    /// Why not, when the run gets no sandbox.
    pub fn cause(&self) -> Option<NotSandboxedCause> {
        match self.answer {
            Sandboxing::Sandboxed => None,
            Sandboxing::NotSandboxed(cause) => Some(cause),
        }
    }
}

impl Serialize for SandboxVerdict {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut out = serializer.serialize_struct("SandboxVerdict", 4)?;
        out.serialize_field("yes", &self.is_sandboxed())?;
        out.serialize_field("mode", &self.mode)?;
        out.serialize_field("source", &self.source)?;
        out.serialize_field("cause", &self.cause())?;
        out.end()
    }
}

/// The mode inputs of one run, kept apart so the verdict can tell an override from an opt-out.
#[derive(Clone, Copy, Debug, Default)]
pub struct ModeInputs<'a> {
    /// The workflow's compiled `sandbox:` block.
    pub workflow_block: Option<&'a Spec>,
    /// `--sandbox`, when given.
    pub cli_flag: Option<SandboxFlag>,
    /// `ITERION_SANDBOX_OVERRIDE`, when set.
    pub override_env: Option<SandboxFlag>,
    /// The installed global default (`None`: a neutral engine).
    pub global: Option<SandboxFlag>,
}

impl ModeInputs<'_> {
    /// [`pick_mode`] over these inputs, with the CLI tier filled by `cli_tier`.
    pub fn pick(&self) -> (Mode, Source) {
        pick_mode(
            self.workflow_block,
            cli_tier(self.cli_flag, self.override_env),
            self.global,
        )
    }
}

/// How the spec of an active mode resolved (SANDBOX.md §7.5), as far as the verdict cares.
#[derive(Clone, Copy, Debug)]
pub enum SpecResolution<'a> {
    /// The spec the run would get.
    Resolved(&'a Spec),
    /// auto found no repository root: the run degrades, whatever tier spoke.
    NoRepositoryRoot,
}

/// The pure half of [`run_will_be_sandboxed`](crate::run_will_be_sandboxed): decides "no" for an
/// inactive mode or an auto run without a repository; otherwise returns the spec to ask the
/// factory about.
pub(crate) fn verdict_before_driver<'a>(
    inputs: &ModeInputs<'_>,
    resolution: SpecResolution<'a>,
) -> Result<(Mode, Source, &'a Spec), SandboxVerdict> {
    let (mode, source) = inputs.pick();
    let no = |cause| SandboxVerdict {
        answer: Sandboxing::NotSandboxed(cause),
        mode,
        source,
    };
    match mode {
        Mode::Inherit => Err(no(NotSandboxedCause::NoSandboxConfiguration)),
        Mode::None
            if inputs.cli_flag.is_none() && inputs.override_env == Some(SandboxFlag::None) =>
        {
            Err(no(NotSandboxedCause::OverrideNone))
        }
        Mode::None => Err(no(NotSandboxedCause::OptedOut)),
        Mode::Auto | Mode::Inline => match resolution {
            SpecResolution::NoRepositoryRoot => {
                Err(no(NotSandboxedCause::AutoWithoutRepositoryRoot))
            }
            SpecResolution::Resolved(spec) => Ok((mode, source, spec)),
        },
    }
}

#[cfg(test)]
#[path = "precedence_tests.rs"]
mod tests;
