//! Setup phases and their time bounds (SANDBOX.md §16.1).
//!
//! [`resolve_phase_timeout`] is pure (the knob's value comes in); [`phase_timeout_from_env`]
//! reads the variable from the caller's environment and warns once per process about a value it had to ignore. Bounding a
//! future by its phase is [`crate::timeout`]'s, which names the error this file must not (the
//! crate's error names a [`Phase`]).

use std::collections::BTreeSet;
use std::fmt;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use crate::vars;
use iterion_vocab::Environment;
use serde::Serialize;

/// A bounded setup phase (SANDBOX.md §16.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(into = "&'static str")]
pub enum Phase {
    /// Pulling the image (docker/podman).
    ImagePull,
    /// Building a `build:` spec (docker/podman).
    ImageBuild,
    /// Waiting for the egress bridge's `ready` (docker/podman; fixed).
    EgressBridge,
    /// Running `post_create` (all drivers).
    PostCreate,
    /// Each kubernetes apply or delete call.
    KubernetesApply,
    /// Waiting for the pod to be ready.
    PodReady,
    /// Copying the workspace into the pod.
    WorkspaceCopy,
}

impl Phase {
    /// Every phase, in table order.
    pub const ALL: [Phase; 7] = [
        Phase::ImagePull,
        Phase::ImageBuild,
        Phase::EgressBridge,
        Phase::PostCreate,
        Phase::KubernetesApply,
        Phase::PodReady,
        Phase::WorkspaceCopy,
    ];

    /// The exact label (`image pull`, `post_create`, …); also `run_failed.phase`.
    pub fn label(self) -> &'static str {
        match self {
            Phase::ImagePull => "image pull",
            Phase::ImageBuild => "image build",
            Phase::EgressBridge => "egress bridge",
            Phase::PostCreate => "post_create",
            Phase::KubernetesApply => "kubernetes apply",
            Phase::PodReady => "pod ready",
            Phase::WorkspaceCopy => "workspace copy",
        }
    }

    /// The variable that sets the budget, or `None` for a fixed one.
    pub fn env_var(self) -> Option<&'static str> {
        match self {
            Phase::ImagePull => Some(vars::ITERION_SANDBOX_PULL_TIMEOUT),
            Phase::ImageBuild => Some(vars::ITERION_SANDBOX_BUILD_TIMEOUT),
            Phase::EgressBridge => None,
            Phase::PostCreate => Some(vars::ITERION_SANDBOX_POST_CREATE_TIMEOUT),
            Phase::KubernetesApply => Some(vars::ITERION_SANDBOX_K8S_APPLY_TIMEOUT),
            Phase::PodReady => Some(vars::ITERION_SANDBOX_K8S_POD_READY_TIMEOUT),
            Phase::WorkspaceCopy => Some(vars::ITERION_SANDBOX_WORKSPACE_COPY_TIMEOUT),
        }
    }

    /// The budget when the variable is unset or unusable.
    pub fn default_budget(self) -> Duration {
        let minutes = |m: u64| Duration::from_secs(m * 60);
        match self {
            Phase::ImagePull => minutes(10),
            Phase::ImageBuild => minutes(30),
            Phase::EgressBridge => Duration::from_secs(10),
            Phase::PostCreate => minutes(30),
            Phase::KubernetesApply => minutes(2),
            Phase::PodReady => minutes(10),
            Phase::WorkspaceCopy => minutes(15),
        }
    }

    /// The smallest budget a knob may set (`pod ready`: 1 s).
    pub fn minimum_budget(self) -> Duration {
        match self {
            Phase::PodReady => Duration::from_secs(1),
            _ => Duration::ZERO,
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

impl From<Phase> for &'static str {
    fn from(phase: Phase) -> &'static str {
        phase.label()
    }
}

/// Teardown bound: the final `cleanup()` (SANDBOX.md §16.1, §4.5).
pub const CLEANUP_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a duration did not parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Nothing to parse.
    #[error("empty duration")]
    Empty,
    /// Not `<number>[.<digits>]<unit>…`.
    #[error("malformed duration")]
    Malformed,
    /// A number without a unit (`5`).
    #[error("missing unit in duration")]
    MissingUnit,
    /// A negative duration.
    #[error("negative duration")]
    Negative,
    /// Too large to represent.
    #[error("duration out of range")]
    Overflow,
}

/// Parses a Go-style duration (SANDBOX.md §16.1): a trimmed sequence of
/// `<number>[.<digits>]<unit>` with units `ns`, `us`, `µs`, `ms`, `s`, `m`, `h` (`90s`, `1m30s`,
/// `250ms`). A lone `0` is zero, as in Go.
///
/// # Errors
///
/// A [`DurationError`] naming what is wrong; a leading `-` is [`DurationError::Negative`].
///
/// ```
/// use std::time::Duration;
/// use iterion_sandbox::parse_go_duration;
/// assert_eq!(parse_go_duration("1m30s"), Ok(Duration::from_secs(90)));
/// assert!(parse_go_duration("5").is_err());
/// ```
pub fn parse_go_duration(text: &str) -> std::result::Result<Duration, DurationError> {
    let text = text.trim();
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if body.is_empty() {
        return Err(if text.is_empty() {
            DurationError::Empty
        } else {
            DurationError::Malformed
        });
    }
    if body == "0" {
        return Ok(Duration::ZERO);
    }
    let mut rest = body;
    let mut total_nanos: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (int_part, after_int) = rest.split_at(int_len);
        let (frac_part, after_number) = match after_int.strip_prefix('.') {
            Some(after_dot) => {
                let frac_len = after_dot
                    .find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(after_dot.len());
                after_dot.split_at(frac_len)
            }
            None => ("", after_int),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(DurationError::Malformed);
        }
        let unit_len = after_number
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after_number.len());
        let (unit, next) = after_number.split_at(unit_len);
        let unit_nanos: u128 = match unit {
            "" => return Err(DurationError::MissingUnit),
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(DurationError::Malformed),
        };
        let whole: u128 = if int_part.is_empty() {
            0
        } else {
            int_part.parse().map_err(|_| DurationError::Overflow)?
        };
        let mut nanos = whole
            .checked_mul(unit_nanos)
            .ok_or(DurationError::Overflow)?;
        let mut scale = unit_nanos;
        for digit in frac_part.bytes() {
            scale /= 10;
            if scale == 0 {
                break;
            }
            nanos += u128::from(digit - b'0') * scale;
        }
        total_nanos = total_nanos
            .checked_add(nanos)
            .ok_or(DurationError::Overflow)?;
        rest = next;
    }
    if negative && total_nanos > 0 {
        return Err(DurationError::Negative);
    }
    let secs = u64::try_from(total_nanos / 1_000_000_000).map_err(|_| DurationError::Overflow)?;
    let sub = u32::try_from(total_nanos % 1_000_000_000).map_err(|_| DurationError::Overflow)?;
    Ok(Duration::new(secs, sub))
}

/// Formats a duration as Go's `Duration.String` does (`1m30s`, `2.5s`, `250ms`, `0s`), so
/// messages read the same as the knobs are written.
pub fn format_duration(duration: Duration) -> String {
    let nanos = duration.as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    if nanos < 1_000_000 {
        return format!("{}µs", decimal(nanos, 1_000));
    }
    if nanos < 1_000_000_000 {
        return format!("{}ms", decimal(nanos, 1_000_000));
    }
    let hours = nanos / 3_600_000_000_000;
    let minutes = (nanos / 60_000_000_000) % 60;
    let second_nanos = nanos % 60_000_000_000;
    let mut out = String::new();
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if hours > 0 || minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    out.push_str(&format!("{}s", decimal(second_nanos, 1_000_000_000)));
    out
}

/// `value / unit` with the fraction's trailing zeros dropped.
fn decimal(value: u128, unit: u128) -> String {
    let whole = value / unit;
    let frac = value % unit;
    if frac == 0 {
        return whole.to_string();
    }
    let width = unit.ilog10() as usize;
    let digits = format!("{frac:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// A phase's budget, and the warning to give when the knob's value was ignored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PhaseBudget {
    /// The budget to enforce.
    pub budget: Duration,
    /// Set when the knob held a value that does not parse or is ≤ 0.
    pub warning: Option<String>,
}

/// The budget of `phase` given its knob's value (SANDBOX.md §16.1). Empty or unset means the
/// default; a value that does not parse, or is ≤ 0 (including a bare `5`), means the default
/// plus a warning. A budget under the phase's minimum is raised to it.
pub(crate) fn resolve_phase_timeout(phase: Phase, value: Option<&str>) -> PhaseBudget {
    let default = PhaseBudget {
        budget: phase.default_budget(),
        warning: None,
    };
    let Some(value) = value.map(str::trim).filter(|value| !value.is_empty()) else {
        return default;
    };
    match parse_go_duration(value) {
        Ok(budget) if !budget.is_zero() => PhaseBudget {
            budget: budget.max(phase.minimum_budget()),
            warning: None,
        },
        parsed => {
            let why = match parsed {
                Ok(_) => "must be greater than zero".to_owned(),
                Err(error) => error.to_string(),
            };
            PhaseBudget {
                warning: Some(format!(
                    "{}=\"{}\" ignored ({why}); using the default {} for phase {}",
                    phase.env_var().unwrap_or(phase.label()),
                    crate::text::escape_controls(value),
                    format_duration(phase.default_budget()),
                    phase.label()
                )),
                ..default
            }
        }
    }
}

/// `resolve_phase_timeout` over the phase's variable in `env`. An ignored value is warned about
/// once per process and variable.
pub fn phase_timeout_from_env(phase: Phase, env: &Environment) -> Duration {
    let value = phase.env_var().and_then(|name| env.get(name));
    let resolved = resolve_phase_timeout(phase, value.as_deref());
    if let Some(warning) = resolved.warning
        && first_warning_for(phase)
    {
        tracing::warn!("{warning}");
    }
    resolved.budget
}

fn first_warning_for(phase: Phase) -> bool {
    static WARNED: OnceLock<Mutex<BTreeSet<Phase>>> = OnceLock::new();
    let warned = WARNED.get_or_init(|| Mutex::new(BTreeSet::new()));
    match warned.lock() {
        Ok(mut set) => set.insert(phase),
        Err(poisoned) => poisoned.into_inner().insert(phase),
    }
}

#[cfg(test)]
#[path = "phase_tests.rs"]
mod tests;
