//! The kubernetes scheduling policy (SANDBOX.md §16.2): pod resources and a soft topology spread,
//! read once from the runner's environment.
//!
//! [`SchedulingPolicy::parse`] is pure (the values come in as [`SchedulingInputs`]);
//! [`SchedulingInputs::from_env`] fetches them from an environment snapshot. A malformed policy is an
//! [`Error::InvalidSetting`] naming the variable: the runner refuses to start on it, the doctor
//! reports it, and every `start` returns it — a policy is never half-applied.
//!
//! Quantities follow the Kubernetes grammar (a decimal number, then a suffix: `m`, `k`, `M`, `G`,
//! `T`, `P`, `E`, `Ki` … `Ei`, or an exponent `e<n>`/`E<n>`), narrowed where a suffix cannot mean
//! what the operator meant: `m` on memory is a millibyte, and a byte suffix on CPU is a typo for
//! memory, so both are refused. Zero is refused (a zero request is no request: leave it unset).

use std::cmp::Ordering;
use std::fmt;

use iterion_sandbox::{Error, Result};
use iterion_vocab::Environment;
use serde::Serialize;

/// `resources.requests.cpu`.
pub(crate) const ITERION_SANDBOX_K8S_REQUESTS_CPU: &str = "ITERION_SANDBOX_K8S_REQUESTS_CPU";
/// `resources.requests.memory`.
pub(crate) const ITERION_SANDBOX_K8S_REQUESTS_MEMORY: &str = "ITERION_SANDBOX_K8S_REQUESTS_MEMORY";
/// `resources.limits.cpu`; needs the CPU request and may not be below it.
pub(crate) const ITERION_SANDBOX_K8S_LIMITS_CPU: &str = "ITERION_SANDBOX_K8S_LIMITS_CPU";
/// `resources.limits.memory`; needs the memory request and may not be below it.
pub(crate) const ITERION_SANDBOX_K8S_LIMITS_MEMORY: &str = "ITERION_SANDBOX_K8S_LIMITS_MEMORY";
/// The topology key of a soft spread: `none`/`off` (unset), `hostname`, or a prefixed label key.
pub(crate) const ITERION_SANDBOX_K8S_SPREAD: &str = "ITERION_SANDBOX_K8S_SPREAD";

/// The node label `ITERION_SANDBOX_K8S_SPREAD=hostname` spreads over.
pub(crate) const HOSTNAME_TOPOLOGY_KEY: &str = "kubernetes.io/hostname";

/// The raw values of the five variables (unset or blank = `None`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SchedulingInputs {
    /// `ITERION_SANDBOX_K8S_REQUESTS_CPU`.
    pub requests_cpu: Option<String>,
    /// `ITERION_SANDBOX_K8S_REQUESTS_MEMORY`.
    pub requests_memory: Option<String>,
    /// `ITERION_SANDBOX_K8S_LIMITS_CPU`.
    pub limits_cpu: Option<String>,
    /// `ITERION_SANDBOX_K8S_LIMITS_MEMORY`.
    pub limits_memory: Option<String>,
    /// `ITERION_SANDBOX_K8S_SPREAD`.
    pub spread: Option<String>,
}

impl SchedulingInputs {
    /// Reads the five variables from `env`.
    pub fn from_env(env: &Environment) -> SchedulingInputs {
        SchedulingInputs {
            requests_cpu: env.get(ITERION_SANDBOX_K8S_REQUESTS_CPU),
            requests_memory: env.get(ITERION_SANDBOX_K8S_REQUESTS_MEMORY),
            limits_cpu: env.get(ITERION_SANDBOX_K8S_LIMITS_CPU),
            limits_memory: env.get(ITERION_SANDBOX_K8S_LIMITS_MEMORY),
            spread: env.get(ITERION_SANDBOX_K8S_SPREAD),
        }
    }
}

/// What a quantity measures; it decides which suffixes are refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resource {
    /// Cores; `m` allowed, byte suffixes refused.
    Cpu,
    /// Bytes; `m` refused.
    Memory,
}

/// A parsed, positive quantity: its text as written (trimmed, sent to the API as is) and its
/// value in base units (cores or bytes), used only to compare a limit with its request.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Quantity {
    /// The quantity as the operator wrote it, trimmed.
    pub text: String,
    /// Cores or bytes.
    #[serde(skip)]
    pub value: f64,
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The suffix's multiplier, or `None` when the suffix is unknown.
fn multiplier(suffix: &str) -> Option<f64> {
    let binary = |power: i32| 1024_f64.powi(power);
    let decimal = |power: i32| 10_f64.powi(power);
    Some(match suffix {
        "" => 1.0,
        "m" => 1e-3,
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(1),
        "Mi" => binary(2),
        "Gi" => binary(3),
        "Ti" => binary(4),
        "Pi" => binary(5),
        "Ei" => binary(6),
        exponent => {
            let digits = exponent
                .strip_prefix('e')
                .or_else(|| exponent.strip_prefix('E'))?;
            let unsigned = digits.strip_prefix(['+', '-']).unwrap_or(digits);
            if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            decimal(digits.parse::<i32>().ok()?)
        }
    })
}

fn is_byte_suffix(suffix: &str) -> bool {
    matches!(
        suffix,
        "k" | "M" | "G" | "T" | "P" | "E" | "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei"
    )
}

/// Parses one quantity of `resource` (SANDBOX.md §16.2). `Err` holds what is accepted.
pub(crate) fn parse_quantity(
    resource: Resource,
    text: &str,
) -> std::result::Result<Quantity, &'static str> {
    let text = text.trim();
    let number_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(number_end);
    let want = match resource {
        Resource::Cpu => "a positive CPU quantity such as 500m, 1 or 2.5 (no byte suffix)",
        Resource::Memory => "a positive memory quantity such as 512Mi, 2Gi or 1G (no m suffix)",
    };
    let well_formed = !number.is_empty()
        && number.bytes().any(|b| b.is_ascii_digit())
        && number.matches('.').count() <= 1;
    if !well_formed {
        return Err(want);
    }
    let refused_suffix = match resource {
        Resource::Cpu => is_byte_suffix(suffix),
        Resource::Memory => suffix == "m",
    };
    if refused_suffix {
        return Err(want);
    }
    let (Some(scale), Ok(number)) = (multiplier(suffix), number.parse::<f64>()) else {
        return Err(want);
    };
    let value = number * scale;
    if !value.is_finite() || value <= 0.0 {
        return Err(want);
    }
    Ok(Quantity {
        text: text.to_owned(),
        value,
    })
}

/// Requests or limits: a CPU and a memory quantity, each optional.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ResourceQuantities {
    /// Cores.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Quantity>,
    /// Bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<Quantity>,
}

impl ResourceQuantities {
    /// Whether neither is set.
    pub fn is_empty(&self) -> bool {
        self.cpu.is_none() && self.memory.is_none()
    }
}

impl fmt::Display for ResourceQuantities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(cpu) = &self.cpu {
            parts.push(format!("cpu={cpu}"));
        }
        if let Some(memory) = &self.memory {
            parts.push(format!("memory={memory}"));
        }
        if parts.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&parts.join(" "))
        }
    }
}

/// The scheduling policy of every sandbox pod this runner starts (SANDBOX.md §16.2).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SchedulingPolicy {
    /// `resources.requests`.
    pub requests: ResourceQuantities,
    /// `resources.limits`.
    pub limits: ResourceQuantities,
    /// The topology key of the soft spread (`maxSkew: 1`, `ScheduleAnyway`, selector
    /// `iterion.io/component=sandbox-run`); `None` = no constraint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spread: Option<String>,
}

fn non_blank(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

fn quantity(
    variable: &'static str,
    resource: Resource,
    value: &Option<String>,
) -> Result<Option<Quantity>> {
    non_blank(value)
        .map(|text| {
            parse_quantity(resource, text).map_err(|want| Error::InvalidSetting {
                variable,
                value: text.to_owned(),
                want,
            })
        })
        .transpose()
}

fn check_limit(
    variable: &'static str,
    request: Option<&Quantity>,
    limit: Option<&Quantity>,
    missing_request: &'static str,
) -> Result<()> {
    let Some(limit) = limit else { return Ok(()) };
    let refuse = |want| {
        Err(Error::InvalidSetting {
            variable,
            value: limit.text.clone(),
            want,
        })
    };
    match request {
        None => refuse(missing_request),
        Some(request) if limit.value.partial_cmp(&request.value) == Some(Ordering::Less) => {
            refuse("a limit at least its request")
        }
        Some(_) => Ok(()),
    }
}

/// Whether `key` is a prefixed label key: `<dns subdomain>/<name>`.
fn is_prefixed_label_key(key: &str) -> bool {
    let Some((prefix, name)) = key.split_once('/') else {
        return false;
    };
    let prefix_ok = !prefix.is_empty()
        && prefix.len() <= 253
        && prefix.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    prefix_ok && name_ok
}

impl SchedulingPolicy {
    /// Parses the policy (SANDBOX.md §16.2). Pure.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidSetting`] naming the first bad variable: a quantity outside the grammar,
    /// `m` on memory, a byte suffix on CPU, zero, a limit without its request or below it, a
    /// spread that is a bare word.
    pub fn parse(inputs: &SchedulingInputs) -> Result<SchedulingPolicy> {
        let requests = ResourceQuantities {
            cpu: quantity(
                ITERION_SANDBOX_K8S_REQUESTS_CPU,
                Resource::Cpu,
                &inputs.requests_cpu,
            )?,
            memory: quantity(
                ITERION_SANDBOX_K8S_REQUESTS_MEMORY,
                Resource::Memory,
                &inputs.requests_memory,
            )?,
        };
        let limits = ResourceQuantities {
            cpu: quantity(
                ITERION_SANDBOX_K8S_LIMITS_CPU,
                Resource::Cpu,
                &inputs.limits_cpu,
            )?,
            memory: quantity(
                ITERION_SANDBOX_K8S_LIMITS_MEMORY,
                Resource::Memory,
                &inputs.limits_memory,
            )?,
        };
        check_limit(
            ITERION_SANDBOX_K8S_LIMITS_CPU,
            requests.cpu.as_ref(),
            limits.cpu.as_ref(),
            "a CPU limit with ITERION_SANDBOX_K8S_REQUESTS_CPU set",
        )?;
        check_limit(
            ITERION_SANDBOX_K8S_LIMITS_MEMORY,
            requests.memory.as_ref(),
            limits.memory.as_ref(),
            "a memory limit with ITERION_SANDBOX_K8S_REQUESTS_MEMORY set",
        )?;
        let spread = match non_blank(&inputs.spread) {
            None => None,
            Some(word) if matches!(word.to_ascii_lowercase().as_str(), "none" | "off") => None,
            Some("hostname") => Some(HOSTNAME_TOPOLOGY_KEY.to_owned()),
            Some(key) if is_prefixed_label_key(key) => Some(key.to_owned()),
            Some(other) => {
                return Err(Error::InvalidSetting {
                    variable: ITERION_SANDBOX_K8S_SPREAD,
                    value: other.to_owned(),
                    want: "none, off, hostname, or a prefixed node label key (topology.kubernetes.io/zone)",
                });
            }
        };
        Ok(SchedulingPolicy {
            requests,
            limits,
            spread,
        })
    }

    /// [`SchedulingPolicy::parse`] over `env`.
    ///
    /// # Errors
    ///
    /// As [`SchedulingPolicy::parse`].
    pub fn from_env(env: &Environment) -> Result<SchedulingPolicy> {
        SchedulingPolicy::parse(&SchedulingInputs::from_env(env))
    }

    /// One line for the doctor and the runner's start-up log:
    /// `requests cpu=500m memory=1Gi; limits none; spread kubernetes.io/hostname`.
    pub fn summary(&self) -> String {
        format!(
            "requests {}; limits {}; spread {}",
            self.requests,
            self.limits,
            self.spread.as_deref().unwrap_or("none")
        )
    }
}

#[cfg(test)]
#[path = "scheduling_tests.rs"]
mod tests;
