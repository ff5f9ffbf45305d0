//! The docker/podman driver's knobs ([`DockerSettings`]): the phase budgets, the shared `/nix`
//! volume and extra labels.

use std::collections::BTreeMap;
use std::time::Duration;

use iterion_sandbox::{
    ITERION_SANDBOX_PERSIST_NIX, ITERION_SANDBOX_WARM, Phase, is_falsy, phase_timeout_from_env,
};
use iterion_vocab::Environment;

/// The largest warm pool per sandbox shape; a larger `ITERION_SANDBOX_WARM` is capped.
pub(crate) const MAX_WARM: usize = 16;

/// The driver's knobs. Built with setters; [`DockerSettings::from_env`] reads the phase budgets
/// and `ITERION_SANDBOX_PERSIST_NIX` from an environment snapshot the way the engine does, and
/// keeps the snapshot for the mount screen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DockerSettings {
    pub(crate) pull_timeout: Duration,
    pub(crate) build_timeout: Duration,
    pub(crate) post_create_timeout: Duration,
    pub(crate) persist_nix: bool,
    pub(crate) extra_labels: BTreeMap<String, String>,
    pub(crate) environment: Environment,
    pub(crate) warm: usize,
}

impl Default for DockerSettings {
    fn default() -> Self {
        DockerSettings {
            pull_timeout: Phase::ImagePull.default_budget(),
            build_timeout: Phase::ImageBuild.default_budget(),
            post_create_timeout: Phase::PostCreate.default_budget(),
            persist_nix: true,
            extra_labels: BTreeMap::new(),
            environment: Environment::empty(),
            warm: 0,
        }
    }
}

impl DockerSettings {
    /// The phase budgets from `ITERION_SANDBOX_PULL_TIMEOUT`, `ITERION_SANDBOX_BUILD_TIMEOUT`
    /// and `ITERION_SANDBOX_POST_CREATE_TIMEOUT`, and the `/nix` volume unless
    /// `ITERION_SANDBOX_PERSIST_NIX` is falsy, all read from `env`; the mount screen reads `env`
    /// too (see [`DockerSettings::environment`]).
    pub fn from_env(env: &Environment) -> DockerSettings {
        DockerSettings {
            pull_timeout: phase_timeout_from_env(Phase::ImagePull, env),
            build_timeout: phase_timeout_from_env(Phase::ImageBuild, env),
            post_create_timeout: phase_timeout_from_env(Phase::PostCreate, env),
            persist_nix: !env
                .get(ITERION_SANDBOX_PERSIST_NIX)
                .is_some_and(|v| is_falsy(&v)),
            extra_labels: BTreeMap::new(),
            environment: env.clone(),
            warm: warm_from(env.get(ITERION_SANDBOX_WARM).as_deref()),
        }
    }

    /// The `image pull` budget. Default: 10 min.
    #[must_use]
    pub fn pull_timeout(mut self, budget: Duration) -> Self {
        self.pull_timeout = budget;
        self
    }

    /// The `image build` budget. Default: 30 min.
    #[must_use]
    pub fn build_timeout(mut self, budget: Duration) -> Self {
        self.build_timeout = budget;
        self
    }

    /// The `post_create` budget. Default: 30 min.
    #[must_use]
    pub fn post_create_timeout(mut self, budget: Duration) -> Self {
        self.post_create_timeout = budget;
        self
    }

    /// Whether trusted runs share a `/nix` volume per image (SANDBOX.md §4.5). Default: on.
    #[must_use]
    pub fn persist_nix(mut self, persist: bool) -> Self {
        self.persist_nix = persist;
        self
    }

    /// A label put on every container and built image, besides the run's own (which it never
    /// overrides). For embedders and tests (`iterion.io/test-id`). Default: none.
    #[must_use]
    pub fn extra_label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.extra_labels.insert(key.into(), value.into());
        self
    }

    /// How many pre-started sandboxes to keep per sandbox shape (`ITERION_SANDBOX_WARM`; issue
    /// 18 item 4), at most 16. Default: 0, none.
    #[must_use]
    pub fn warm(mut self, size: usize) -> Self {
        self.warm = size.min(MAX_WARM);
        self
    }

    /// The host environment the mount screen reads at `start`
    /// ([`ScreenContext::from_env`](iterion_sandbox::ScreenContext::from_env): `HOME`,
    /// `ITERION_HOME`, `ITERION_BIN`, `XDG_RUNTIME_DIR`). Default: empty (no home to protect).
    #[must_use]
    pub fn environment(mut self, env: Environment) -> Self {
        self.environment = env;
        self
    }
}

/// `ITERION_SANDBOX_WARM`: a count, capped at [`MAX_WARM`]; unset, empty or not a count is 0
/// (a warning names the bad value: a pool is an optimisation, never a reason to fail a run).
fn warm_from(value: Option<&str>) -> usize {
    match value.map(str::trim) {
        None | Some("") => 0,
        Some(value) => match value.parse::<usize>() {
            Ok(size) => size.min(MAX_WARM),
            Err(_) => {
                tracing::warn!(
                    "sandbox: {ITERION_SANDBOX_WARM}={:?} is not a count; no warm pool",
                    iterion_vocab::escape_controls(value)
                );
                0
            }
        },
    }
}
