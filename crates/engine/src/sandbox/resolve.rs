//! Steps L3–L4 (SANDBOX.md §0.3): the workflow's `sandbox:` block as a [`Spec`], the mode and the
//! tier that chose it, and the spec an active mode runs with.
//!
//! Pure: the repository root, the flags, the variables and the default image come in as values,
//! so admission (`run_will_be_sandboxed`) and the start ask exactly the same question. The
//! repository's devcontainer is not read yet (SANDBOX.md §7 is a later issue): `auto` always takes
//! the "devcontainer missing" row of §7.5 — the block's fields, mode auto and the default image.

use std::path::PathBuf;

use iterion_dsl::ir;
use iterion_sandbox::{
    Build, DefaultImage, HostState, HostStateSource, Mode, ModeInputs, Network, NetworkMode,
    SandboxFlag, Spec, SpecResolution, Trust, pick_host_state,
};

/// The run-time knobs of the sandbox tiers, as the entry point read them.
#[derive(Clone, Debug)]
pub struct SandboxSettings {
    /// `--sandbox`.
    pub cli_flag: Option<SandboxFlag>,
    /// `ITERION_SANDBOX_OVERRIDE`.
    pub override_env: Option<SandboxFlag>,
    /// The installed global default (`None`: a neutral engine).
    pub global: Option<SandboxFlag>,
    /// `--sandbox-host-state`.
    pub host_state_cli: HostState,
    /// `ITERION_SANDBOX_HOST_STATE`.
    pub host_state_env: HostState,
    /// auto's default image (flag, variable or built-in).
    pub default_image: DefaultImage,
}

/// The workflow's block as a spec (`None` when the workflow has no `sandbox:`). Its host_state is
/// left unset: [`resolve`] applies the host_state tiers.
pub(crate) fn block_spec(block: &ir::Sandbox) -> Option<Spec> {
    let mode = match block.mode {
        ir::SandboxMode::Inherit => return None,
        ir::SandboxMode::None => Mode::None,
        ir::SandboxMode::Auto => Mode::Auto,
        ir::SandboxMode::Inline => Mode::Inline,
    };
    Some(Spec {
        mode,
        image: block.image.clone(),
        build: block.build.as_ref().map(|b| Build {
            dockerfile: b.dockerfile.clone(),
            context: b.context.clone(),
            args: b.args.clone(),
        }),
        user: block.user.clone(),
        workspace_folder: block.workspace_folder.clone(),
        post_create: block.post_create.clone(),
        env: block.env.clone(),
        mounts: block.mounts.clone(),
        network: block.network.as_ref().map(|n| Network {
            mode: (!n.mode_defaulted).then_some(match n.mode {
                ir::NetworkMode::Open => NetworkMode::Open,
                ir::NetworkMode::Allowlist => NetworkMode::Allowlist,
                ir::NetworkMode::Denylist => NetworkMode::Denylist,
            }),
            preset: n.preset.map(|_| iterion_sandbox::DEFAULT_PRESET.to_owned()),
            rules: n.rules.clone(),
            inherit: n.inherit.map(|i| match i {
                ir::NetworkInherit::Replace => iterion_sandbox::Inherit::Replace,
                ir::NetworkInherit::Append => iterion_sandbox::Inherit::Append,
            }),
        }),
        ..Spec::default()
    })
}

fn block_host_state(block: &ir::Sandbox) -> HostState {
    match block.host_state {
        ir::HostState::Unset => HostState::Unset,
        ir::HostState::Auto => HostState::Auto,
        ir::HostState::None => HostState::None,
    }
}

/// What L3–L4 decided.
#[derive(Clone, Debug)]
pub(crate) struct Resolved {
    /// The workflow's block as a spec.
    pub block: Option<Spec>,
    /// The resolved mode.
    pub mode: Mode,
    /// The source label, with auto's detail (` (default image: <ref>)`).
    pub label: String,
    /// The spec of an active mode; `None` when inactive or degraded.
    pub spec: Option<Spec>,
    /// Why an active auto has no spec (`no repository root: …`).
    pub skip_reason: Option<String>,
    /// The default image, when the spec uses it.
    pub default_image: Option<DefaultImage>,
    /// The host_state tier that spoke.
    pub host_state_source: HostStateSource,
}

impl Resolved {
    /// The mode inputs, for `run_will_be_sandboxed`.
    pub fn mode_inputs<'a>(&'a self, settings: &SandboxSettings) -> ModeInputs<'a> {
        ModeInputs {
            workflow_block: self.block.as_ref(),
            cli_flag: settings.cli_flag,
            override_env: settings.override_env,
            global: settings.global,
        }
    }

    /// The spec resolution, for `run_will_be_sandboxed` (only read for active modes).
    pub fn spec_resolution(&self) -> SpecResolution<'_> {
        match &self.spec {
            Some(spec) => SpecResolution::Resolved(spec),
            None => SpecResolution::NoRepositoryRoot,
        }
    }
}

/// The skip reason of an auto run outside a repository (SANDBOX.md §7.5).
pub(crate) const NO_REPOSITORY_ROOT: &str =
    "no repository root: sandbox: auto needs a git repository";

/// L3–L4: picks the mode, labels its source and builds the spec of an active mode.
pub(crate) fn resolve(
    wf: &ir::Workflow,
    settings: &SandboxSettings,
    trust: Trust,
    repo_root: Option<&PathBuf>,
) -> Resolved {
    let block = block_spec(&wf.sandbox);
    let inputs = ModeInputs {
        workflow_block: block.as_ref(),
        cli_flag: settings.cli_flag,
        override_env: settings.override_env,
        global: settings.global,
    };
    let (mode, source) = inputs.pick();
    let (host_state, host_state_source) = pick_host_state(
        block_host_state(&wf.sandbox),
        settings.host_state_cli,
        settings.host_state_env,
        trust,
    );
    let mut resolved = Resolved {
        block: block.clone(),
        mode,
        label: source.label().to_owned(),
        spec: None,
        skip_reason: None,
        default_image: None,
        host_state_source,
    };
    let mut spec = match mode {
        Mode::Inherit | Mode::None => return resolved,
        Mode::Inline => block.unwrap_or_default(),
        Mode::Auto => {
            if repo_root.is_none() {
                resolved.skip_reason = Some(NO_REPOSITORY_ROOT.to_owned());
                return resolved;
            }
            let image = settings.default_image.clone();
            resolved.label = format!("{} (default image: {})", source.label(), image.image);
            let mut spec = block.unwrap_or_default();
            spec.image = Some(image.image.clone());
            spec.image_fallback = image.fallback.clone();
            spec.build = None;
            resolved.default_image = Some(image);
            spec
        }
    };
    spec.mode = mode;
    if host_state.is_set() {
        spec.host_state = host_state;
    }
    resolved.spec = Some(spec);
    resolved
}
