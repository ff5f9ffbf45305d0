//! The docker/podman driver's knobs ([`DockerSettings`]): the phase budgets, the shared `/nix`
//! volume and extra labels.

use std::collections::BTreeMap;
use std::time::Duration;

use iterion_sandbox::{ITERION_SANDBOX_PERSIST_NIX, Phase, is_falsy, phase_timeout_from_env};
use iterion_vocab::Environment;

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

    /// The host environment the mount screen reads at `start`
    /// ([`ScreenContext::from_env`](iterion_sandbox::ScreenContext::from_env): `HOME`,
    /// `ITERION_HOME`, `ITERION_BIN`, `XDG_RUNTIME_DIR`). Default: empty (no home to protect).
    #[must_use]
    pub fn environment(mut self, env: Environment) -> Self {
        self.environment = env;
        self
    }
}
