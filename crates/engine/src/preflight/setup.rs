//! What the battery is given: the parts of an engine that decide a sandbox ([`PreflightSetup`])
//! and the question ([`PreflightRequest`]).

use std::path::PathBuf;
use std::time::Duration;

use iterion_dsl::ir;
use iterion_sandbox::{FactoryOptions, Registry, SandboxFlag, Trust};

use crate::launcher::launch::LaunchOptions;
use crate::preflight::report::Target;

/// The parts of an engine that decide a sandbox — the driver registry, the factory options, the
/// installed global default and the installed engine binary — without its store. Defaults are
/// `Engine::new`'s; `Engine::preflight_setup` copies an engine's.
#[derive(Clone, Debug)]
pub struct PreflightSetup {
    pub(crate) registry: Registry,
    pub(crate) factory_options: FactoryOptions,
    pub(crate) sandbox_default: Option<SandboxFlag>,
    pub(crate) engine_binary: Option<PathBuf>,
}

impl Default for PreflightSetup {
    fn default() -> Self {
        PreflightSetup::new()
    }
}

impl PreflightSetup {
    /// Neutral (no global default), the local registry, host detection, no engine binary.
    pub fn new() -> PreflightSetup {
        PreflightSetup {
            registry: crate::sandbox::registry::product_registry(),
            factory_options: FactoryOptions::default(),
            sandbox_default: None,
            engine_binary: None,
        }
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
        self.registry = registry;
        self
    }

    /// The factory options, as `Engine::with_factory_options`. Default: detect the host.
    #[must_use]
    pub fn with_factory_options(mut self, options: FactoryOptions) -> PreflightSetup {
        self.factory_options = options;
        self
    }
}

/// What the battery is asked about.
#[derive(Clone, Copy, Debug)]
pub struct PreflightRequest<'a> {
    /// The workflow's `sandbox:` block; the default block for "no workflow" (the doctor without
    /// `FILE`).
    pub sandbox: &'a ir::Sandbox,
    /// The run's flags and working directory, as `iterion run` would pass them.
    pub options: &'a LaunchOptions,
    /// The run's trust (an untrusted run's host_state is `none`).
    pub trust: Trust,
    /// Which battery: `auto` follows the selected driver.
    pub target: Target,
    /// The bound of each probe.
    pub timeout: Duration,
}
