//! The parts of an engine that decide a sandbox, apart from its store: what `Engine` is built
//! from and what the pre-flight battery is given ([`PreflightSetup`]).

use std::path::PathBuf;

use iterion_sandbox::{FactoryOptions, Registry, SandboxFlag};
use iterion_vocab::Environment;

/// The parts of an engine that decide a sandbox — the driver registry, the factory options, the
/// installed global default, the installed engine binary and the environment — without its
/// store. Defaults are `Engine::new`'s; `Engine::preflight_setup` copies an engine's.
#[derive(Clone, Debug)]
pub struct PreflightSetup {
    /// `None`: the product registry over `environment`.
    pub(crate) registry: Option<Registry>,
    pub(crate) factory_options: FactoryOptions,
    pub(crate) sandbox_default: Option<SandboxFlag>,
    pub(crate) engine_binary: Option<PathBuf>,
    pub(crate) environment: Environment,
}

impl Default for PreflightSetup {
    fn default() -> Self {
        PreflightSetup::new()
    }
}

impl PreflightSetup {
    /// Neutral (no global default), the local registry, host detection, no engine binary, an
    /// empty environment.
    pub fn new() -> PreflightSetup {
        PreflightSetup {
            registry: None,
            factory_options: FactoryOptions::default(),
            sandbox_default: None,
            engine_binary: None,
            environment: Environment::empty(),
        }
    }

    /// The environment, as `Engine::with_environment`. Default: empty.
    #[must_use]
    pub fn with_environment(mut self, environment: Environment) -> PreflightSetup {
        self.environment = environment;
        self
    }

    /// The registry the battery selects from: the installed one, else the product registry over
    /// the environment.
    pub(crate) fn registry(&self) -> Registry {
        crate::sandbox::registry::registry_or_product(self.registry.as_ref(), &self.environment)
    }

    /// The global default, as `Engine::with_sandbox_default`. Default: none (neutral).
    #[must_use]
    pub fn with_sandbox_default(mut self, default: SandboxFlag) -> PreflightSetup {
        self.sandbox_default = Some(default);
        self
    }

    /// The installed engine binary, as `Engine::with_engine_binary`. Default: none.
    #[must_use]
    pub fn with_engine_binary(mut self, path: impl Into<PathBuf>) -> PreflightSetup {
        self.engine_binary = Some(path.into());
        self
    }

    /// The driver registry, as `Engine::with_registry`. Default: the local engines.
    #[must_use]
    pub fn with_registry(mut self, registry: Registry) -> PreflightSetup {
        self.registry = Some(registry);
        self
    }

    /// The factory options, as `Engine::with_factory_options`. Default: detect the host.
    #[must_use]
    pub fn with_factory_options(mut self, options: FactoryOptions) -> PreflightSetup {
        self.factory_options = options;
        self
    }
}
