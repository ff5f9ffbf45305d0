//! The seed's step 2 and `iterion sandbox doctor` (SANDBOX.md §11, ARCHITECTURE.md §5 decision
//! 10): a battery of read-only checks on the exact spec a workflow would run with, each a row
//! `{id, status, summary, remediation, duration_ms}`.
//!
//! How it is built, and why:
//!
//! - **The run's question, asked once.** [`build_strict_report`] resolves the spec with the run's
//!   own functions (`settings_from_env`, `resolve`, the factory's `driver_for_spec`, the engine
//!   binary's `engine_binary_for_run`) and screens with the real `validate_spec_mounts`, so the
//!   doctor cannot drift from what `iterion run` does. A [`PreflightSetup`] carries the parts of
//!   an [`Engine`](crate::Engine) that decide a sandbox, so the battery needs no store.
//! - **Judge apart from probe.** `judge` turns what was found into rows (pure, unit-tested per
//!   status); `strict` and `basic` probe and call it.
//! - **Bounded.** Every probe — driver selection, `/version`, image inspection, the registry
//!   question, file reads — gets [`doctor_timeout_from_env`] (`ITERION_SANDBOX_DOCTOR_TIMEOUT`,
//!   5 s): a hung engine fails a check, the doctor does not hang.
//! - **Read-only.** Nothing is pulled, built, created or recorded.
//!
//! [`preflight_sandbox`] is the battery in front of `iterion run` when
//! [`sandbox_preflight_enabled`]: any failure refuses the launch before the store records
//! anything (exit 2). Rendering for people is the CLI's.

mod basic;
mod judge;
mod report;
mod strict;

use std::path::PathBuf;
use std::sync::Once;
use std::time::Duration;

use iterion_dsl::ir;
use iterion_sandbox::{FactoryOptions, Registry, SandboxFlag, Trust, parse_go_duration};

pub use report::{
    BasicReport, Check, CheckId, CheckStatus, Counts, HostClass, SCHEMA_VERSION, StrictReport,
    Target,
};

use crate::engine::{Engine, LaunchOptions, RunRequest};
use crate::launch::LaunchError;

/// Truthy: `iterion run` runs the strict battery first (SANDBOX.md §11.4).
pub const ITERION_SANDBOX_PREFLIGHT: &str = "ITERION_SANDBOX_PREFLIGHT";
/// The bound of each doctor probe (SANDBOX.md §11.1).
pub const ITERION_SANDBOX_DOCTOR_TIMEOUT: &str = "ITERION_SANDBOX_DOCTOR_TIMEOUT";
/// [`ITERION_SANDBOX_DOCTOR_TIMEOUT`]'s default.
pub const DEFAULT_DOCTOR_TIMEOUT: Duration = Duration::from_secs(5);

/// The parts of an engine that decide a sandbox — the driver registry, the factory options, the
/// installed global default and the installed engine binary — without its store. Defaults are
/// [`Engine::new`]'s; [`Engine::preflight_setup`] copies an engine's.
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

    /// The global default, as [`Engine::with_sandbox_default`]. Default: none (neutral).
    #[must_use]
    pub fn with_sandbox_default(mut self, default: SandboxFlag) -> PreflightSetup {
        self.sandbox_default = Some(default);
        self
    }

    /// The installed engine binary, as [`Engine::with_engine_binary`]. Default: none.
    #[must_use]
    pub fn with_engine_binary(mut self, path: impl Into<PathBuf>) -> PreflightSetup {
        self.engine_binary = Some(path.into());
        self
    }

    /// The driver registry, as [`Engine::with_registry`]. Default: the local engines.
    #[must_use]
    pub fn with_registry(mut self, registry: Registry) -> PreflightSetup {
        self.registry = registry;
        self
    }

    /// The factory options, as [`Engine::with_factory_options`]. Default: detect the host.
    #[must_use]
    pub fn with_factory_options(mut self, options: FactoryOptions) -> PreflightSetup {
        self.factory_options = options;
        self
    }
}

impl Engine {
    /// Installs a whole setup: registry, factory options, global default and engine binary.
    #[must_use]
    pub fn with_preflight_setup(mut self, setup: PreflightSetup) -> Engine {
        self.registry = setup.registry;
        self.factory_options = setup.factory_options;
        self.sandbox_default = setup.sandbox_default;
        self.engine_binary = setup.engine_binary;
        self
    }

    /// This engine's sandbox setup, for [`build_strict_report`] and [`preflight_sandbox`].
    pub fn preflight_setup(&self) -> PreflightSetup {
        PreflightSetup {
            registry: self.registry.clone(),
            factory_options: self.factory_options,
            sandbox_default: self.sandbox_default,
            engine_binary: self.engine_binary.clone(),
        }
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

/// The strict battery (SANDBOX.md §11.3): the checks in order, a check that does not apply
/// omitted, `spec-resolution` failing or `sandbox-configured` warning ending it early.
///
/// # Errors
///
/// [`LaunchError::InvalidSetting`] when `ITERION_SANDBOX_OVERRIDE` or
/// `ITERION_SANDBOX_HOST_STATE` holds something other than `auto`/`none` (bad input, exit 2, as
/// for `iterion run`).
pub async fn build_strict_report(
    setup: &PreflightSetup,
    request: &PreflightRequest<'_>,
) -> Result<StrictReport, LaunchError> {
    strict::run(setup, request).await
}

/// The basic report (SANDBOX.md §11.2): the host, the engine, the global default, the drivers,
/// the engine binary and the default image. `default_image_flag` is `--sandbox-default-image`.
pub async fn build_basic_report(
    setup: &PreflightSetup,
    default_image_flag: Option<&str>,
    timeout: Duration,
) -> BasicReport {
    basic::run(setup, default_image_flag, timeout).await
}

/// Whether `ITERION_SANDBOX_PREFLIGHT` is truthy (`1`, `true`, `yes`, `on`; trimmed, any case).
pub fn sandbox_preflight_enabled() -> bool {
    std::env::var(ITERION_SANDBOX_PREFLIGHT).is_ok_and(|v| iterion_sandbox::is_truthy(&v))
}

/// Parses a doctor timeout as every duration knob is parsed (SANDBOX.md §16.1, §17): a Go-style
/// duration (`1s`, `500ms`, `1m30s`). `None` for anything else, zero, or a bare number (`5`
/// names no unit).
pub fn parse_doctor_timeout(text: &str) -> Option<Duration> {
    parse_go_duration(text.trim())
        .ok()
        .filter(|duration| !duration.is_zero())
}

/// [`ITERION_SANDBOX_DOCTOR_TIMEOUT`], else [`DEFAULT_DOCTOR_TIMEOUT`]. A value that does not
/// parse means the default and one warning per process.
pub fn doctor_timeout_from_env() -> Duration {
    let Some(value) = std::env::var(ITERION_SANDBOX_DOCTOR_TIMEOUT)
        .ok()
        .filter(|v| !v.trim().is_empty())
    else {
        return DEFAULT_DOCTOR_TIMEOUT;
    };
    parse_doctor_timeout(&value).unwrap_or_else(|| {
        static WARNED: Once = Once::new();
        WARNED.call_once(|| {
            tracing::warn!(
                "{ITERION_SANDBOX_DOCTOR_TIMEOUT}={value:?} is not a duration (for example 1s, 500ms, 1m30s); using {}",
                iterion_sandbox::format_duration(DEFAULT_DOCTOR_TIMEOUT)
            );
        });
        DEFAULT_DOCTOR_TIMEOUT
    })
}

/// Why the pre-flight refused a launch. Both are bad input (exit 2): no run exists.
#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    /// A check failed (SANDBOX.md §11.4); the checks themselves were logged.
    #[error("sandbox pre-flight failed; run `iterion sandbox doctor --strict {file}` for details")]
    Failed {
        /// The workflow file, as given.
        file: String,
    },
    /// A sandbox setting is malformed (as `iterion run` would refuse it).
    #[error(transparent)]
    Launch(#[from] LaunchError),
}

impl PreflightError {
    /// A stable code: `PREFLIGHT_FAILED`, or the launch error's.
    pub fn code(&self) -> &'static str {
        match self {
            PreflightError::Failed { .. } => "PREFLIGHT_FAILED",
            PreflightError::Launch(error) => error.code(),
        }
    }
}

/// The strict pre-flight of `iterion run` (SANDBOX.md §11.4): the battery with target `auto` on
/// the compiled workflow and the run's flags. Each warning is logged at warn level, each failure
/// at error level with its remediation. Call it before the store records anything; its only
/// caller is `iterion run` (not resume, not the runner).
///
/// # Errors
///
/// [`PreflightError::Failed`] when any check fails (exit 2, nothing recorded), naming
/// `iterion sandbox doctor --strict <file>`; [`PreflightError::Launch`] for a bad setting.
pub async fn preflight_sandbox(
    setup: &PreflightSetup,
    request: &RunRequest,
    file: &str,
) -> Result<StrictReport, PreflightError> {
    let report = build_strict_report(
        setup,
        &PreflightRequest {
            sandbox: &request.workflow.sandbox,
            options: &request.options,
            trust: request.trust,
            target: Target::Auto,
            timeout: doctor_timeout_from_env(),
        },
    )
    .await?;
    for check in &report.checks {
        match check.status {
            CheckStatus::Pass => {}
            CheckStatus::Warn => tracing::warn!(
                "sandbox pre-flight: {}: {} (hint: {})",
                check.id,
                check.summary,
                check.remediation
            ),
            CheckStatus::Fail => tracing::error!(
                "sandbox pre-flight: {}: {} (hint: {})",
                check.id,
                check.summary,
                check.remediation
            ),
        }
    }
    if report.has_failures() {
        return Err(PreflightError::Failed {
            file: file.to_owned(),
        });
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn doctor_timeouts_take_go_durations_only() {
        let words = [
            "1s", "500ms", "1m30s", " 2s ", "5", "0.25", "0", "-1s", "abc", "0s", "",
        ];
        let got: Vec<Option<Duration>> = words.iter().map(|w| parse_doctor_timeout(w)).collect();
        assert_eq!(
            got,
            vec![
                Some(Duration::from_secs(1)),
                Some(Duration::from_millis(500)),
                Some(Duration::from_secs(90)),
                Some(Duration::from_secs(2)),
                None,
                None,
                None,
                None,
                None,
                None,
                None,
            ]
        );
    }
}
