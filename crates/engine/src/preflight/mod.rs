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
//!   an `Engine` that decide a sandbox, so the battery needs no store.
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
mod setup;
mod strict;

use std::sync::Once;
use std::time::Duration;

use iterion_sandbox::parse_go_duration;
use iterion_vocab::Environment;

pub use crate::launcher::setup::PreflightSetup;
pub use report::{
    BasicReport, Check, CheckId, CheckStatus, Counts, HostClass, SCHEMA_VERSION, StrictReport,
    Target,
};
pub use setup::{ContainerNeeds, PreflightRequest};

use crate::launcher::engine::RunRequest;
use crate::launcher::launch::LaunchError;

/// Truthy: `iterion run` runs the strict battery first (SANDBOX.md §11.4).
pub const ITERION_SANDBOX_PREFLIGHT: &str = "ITERION_SANDBOX_PREFLIGHT";
/// The bound of each doctor probe (SANDBOX.md §11.1).
pub const ITERION_SANDBOX_DOCTOR_TIMEOUT: &str = "ITERION_SANDBOX_DOCTOR_TIMEOUT";
/// [`ITERION_SANDBOX_DOCTOR_TIMEOUT`]'s default.
pub const DEFAULT_DOCTOR_TIMEOUT: Duration = Duration::from_secs(5);

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

/// Whether `env`'s `ITERION_SANDBOX_PREFLIGHT` is truthy (`1`, `true`, `yes`, `on`; trimmed,
/// any case).
pub fn sandbox_preflight_enabled(env: &Environment) -> bool {
    env.get(ITERION_SANDBOX_PREFLIGHT)
        .is_some_and(|v| iterion_sandbox::is_truthy(&v))
}

/// Parses a doctor timeout as every duration knob is parsed (SANDBOX.md §16.1, §17): a Go-style
/// duration (`1s`, `500ms`, `1m30s`). `None` for anything else, zero, or a bare number (`5`
/// names no unit).
pub(crate) fn parse_doctor_timeout(text: &str) -> Option<Duration> {
    parse_go_duration(text.trim())
        .ok()
        .filter(|duration| !duration.is_zero())
}

/// `env`'s [`ITERION_SANDBOX_DOCTOR_TIMEOUT`], else [`DEFAULT_DOCTOR_TIMEOUT`]. A value that
/// does not parse means the default and one warning per process.
pub fn doctor_timeout_from_env(env: &Environment) -> Duration {
    let Some(value) = env
        .get(ITERION_SANDBOX_DOCTOR_TIMEOUT)
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
            timeout: doctor_timeout_from_env(&setup.environment),
            needs: setup::ContainerNeeds::of(&request.workflow),
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
