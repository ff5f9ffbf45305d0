//! Steps L3–L4 (SANDBOX.md §0.3): the workflow's `sandbox:` block as a [`Spec`], the mode and the
//! tier that chose it, and the spec an active mode runs with.
//!
//! Not pure. The repository root, the flags, the variables and the default image come in as
//! values, but an active mode also reads the host: `auto` reads the repository's devcontainer
//! (`<root>/.devcontainer/devcontainer.json`, then `<root>/.devcontainer.json`) from disk and
//! resolves it with `resolve_sandbox_spec_with_fallback` (SANDBOX.md §7.5): fused, or the
//! default image with the reason in the label, or refused; its `${localEnv:…}` references are
//! looked up in the engine's environment (the snapshot its entry point took); and the screening
//! context is built from that environment (`HOME`, `ITERION_HOME`, `ITERION_BIN`,
//! `XDG_RUNTIME_DIR`) with its paths canonicalised on the host. Admission (`run_will_be_sandboxed`) and the start call it with the
//! same values, so they ask the same question of the same files and environment.

use std::path::Path;

use iterion_dsl::ir;
use iterion_sandbox::{
    AutoInputs, Build, DefaultImage, DevcontainerText, EnvOverlay, HostState, HostStateSource,
    Mode, ModeInputs, Network, NetworkOrigin, SandboxFlag, ScreenContext, Spec, SpecResolution,
    Trust, pick_host_state, read_from_repo, resolve_sandbox_spec_with_fallback,
};
use iterion_vocab::Environment;

/// The run-time knobs of the sandbox tiers, as the entry point read them.
#[derive(Clone, Debug)]
pub(crate) struct SandboxSettings {
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
            mode: (!n.mode_defaulted).then_some(n.mode),
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

/// What L3–L4 decided.
#[derive(Clone, Debug)]
pub(crate) struct Resolved {
    /// The workflow's block as a spec.
    pub block: Option<Spec>,
    /// The resolved mode.
    pub mode: Mode,
    /// The source label, with auto's detail (` (<path>)`, ` (default image: <ref>)`, …).
    pub label: String,
    /// The spec of an active mode; `None` when inactive, degraded or refused.
    pub spec: Option<Spec>,
    /// Why an active auto has no spec (`no repository root: …`).
    pub skip_reason: Option<String>,
    /// The default image, when the spec uses it.
    pub default_image: Option<DefaultImage>,
    /// The host_state tier that spoke.
    pub host_state_source: HostStateSource,
    /// A refusal of L4 (a hostile devcontainer, a refused mount): the run fails
    /// `SANDBOX_SETUP_FAILED` with this message and nothing starts (SANDBOX.md §7.2, §7.5).
    pub refusal: Option<String>,
    /// Repository env keys stripped by the deny class, sorted (`sandbox_env_denied`).
    pub denied_env: Vec<String>,
    /// The network was defaulted to the `iterion-default` allowlist (`sandbox_network_defaulted`).
    pub repo_network_defaulted: bool,
    /// Run-log lines of the resolution (unusable devcontainer, ignored `runArgs`, …).
    pub run_log: Vec<String>,
    /// What admission asks the factory about when L4 refused: the spec the run would have had
    /// without a devcontainer (admission must still answer; the refusal comes at L4).
    admission_spec: Option<Spec>,
}

impl Resolved {
    /// The mode inputs, for `run_will_be_sandboxed`.
    pub(crate) fn mode_inputs<'a>(&'a self, settings: &SandboxSettings) -> ModeInputs<'a> {
        ModeInputs {
            workflow_block: self.block.as_ref(),
            cli_flag: settings.cli_flag,
            override_env: settings.override_env,
            global: settings.global,
        }
    }

    /// Where the spec's network came from, for `resolve_network_policy` (SANDBOX.md §2.3): the
    /// devcontainer default when L4 defaulted it, else the workflow.
    pub(crate) fn network_origin(&self) -> NetworkOrigin {
        if self.repo_network_defaulted {
            NetworkOrigin::DevcontainerDefault
        } else {
            NetworkOrigin::Workflow
        }
    }

    /// The spec resolution, for `run_will_be_sandboxed` (only read for active modes).
    pub(crate) fn spec_resolution(&self) -> SpecResolution<'_> {
        match self.spec.as_ref().or(self.admission_spec.as_ref()) {
            Some(spec) => SpecResolution::Resolved(spec),
            None => SpecResolution::NoRepositoryRoot,
        }
    }
}

/// L3–L4: picks the mode, labels its source and builds the spec of an active mode from the
/// workflow's `sandbox:` block (the default block when it has none): auto reads
/// the repository's devcontainer and fuses it with the block (SANDBOX.md §7.5), and the operator
/// overlay applies on every path that yields a spec (§7.8).
pub(crate) fn resolve(
    sandbox: &ir::Sandbox,
    settings: &SandboxSettings,
    trust: Trust,
    repo_root: Option<&Path>,
    overlay: &EnvOverlay,
    env: &Environment,
) -> Resolved {
    let block = block_spec(sandbox);
    let inputs = ModeInputs {
        workflow_block: block.as_ref(),
        cli_flag: settings.cli_flag,
        override_env: settings.override_env,
        global: settings.global,
    };
    let (mode, source) = inputs.pick();
    let (host_state, host_state_source) = pick_host_state(
        sandbox.host_state,
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
        refusal: None,
        denied_env: Vec::new(),
        repo_network_defaulted: false,
        run_log: Vec::new(),
        admission_spec: None,
    };
    if !mode.is_active() {
        return resolved;
    }
    let devcontainer = match (mode, repo_root) {
        (Mode::Auto, Some(root)) => read_from_repo(root),
        _ => DevcontainerText::NotFound,
    };
    // Screening is only consulted for a fused devcontainer, which needs a repository root.
    // The run's trust decides the allow-list (issue 15 item 3); the store and the runtime root
    // are protected here already, and again with the engine's own paths at Start.
    let scope = iterion_sandbox::MountScope {
        runtime_roots: vec![crate::sandbox::rundir::runtime_root(env)],
        ..iterion_sandbox::MountScope::default()
    };
    let screen = match ScreenContext::from_env(repo_root.unwrap_or(Path::new("/")), env) {
        Ok(screen) => screen.for_run(trust, &scope),
        Err(error) => {
            resolved.refusal = Some(error.to_string());
            return resolved;
        }
    };
    let lookup = |name: &str| env.get(name);
    let auto = AutoInputs {
        mode,
        source_label: source.label(),
        workflow: block.as_ref(),
        repo_root,
        devcontainer: &devcontainer,
        default_image: Some(&settings.default_image),
        lookup: &lookup,
        overlay,
        screen: &screen,
    };
    match resolve_sandbox_spec_with_fallback(&auto) {
        Ok(out) => {
            resolved.label = out.source;
            resolved.skip_reason = out.skip_reason;
            resolved.denied_env = out.denied_env;
            resolved.repo_network_defaulted = out.repo_network_defaulted;
            resolved.run_log = out.run_log;
            if mode == Mode::Auto && out.devcontainer.is_none() && out.spec.is_some() {
                resolved.default_image = Some(settings.default_image.clone());
            }
            resolved.spec = out.spec.map(|mut spec| {
                spec.mode = mode;
                if host_state.is_set() {
                    spec.host_state = host_state;
                }
                spec
            });
        }
        Err(error) => {
            resolved.refusal = Some(error.to_string());
            let image = &settings.default_image;
            resolved.admission_spec = Some(Spec {
                mode,
                image: Some(image.image.clone()),
                build: None,
                ..block.clone().unwrap_or_default()
            });
        }
    }
    resolved
}
