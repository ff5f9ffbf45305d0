//! Resource limits of a sandbox (issue 18): memory, cpu and pids, set by the operator
//! (`ITERION_SANDBOX_MEMORY`, `ITERION_SANDBOX_CPUS`, `ITERION_SANDBOX_PIDS`; docs/sandbox.md
//! "Resource limits") and carried by [`Spec::limits`](crate::Spec::limits). Docker and podman
//! apply them through the container's `HostConfig`, the namespace driver through a cgroup of
//! its own per sandbox where the host lets it make one; a driver that cannot
//! ([`Capabilities::supports_resource_limits`](crate::Capabilities::supports_resource_limits))
//! leaves them unapplied and the engine says so in one event.

use serde::Serialize;

use crate::error::{Error, Result};

/// A setting's value, `None` when unset or blank.
fn set(value: Option<&str>) -> Option<&str> {
    value.map(str::trim).filter(|v| !v.is_empty())
}

/// `ITERION_SANDBOX_MEMORY`: bytes, or a number with `k`, `m`, `g` (binary units).
pub const ITERION_SANDBOX_MEMORY: &str = "ITERION_SANDBOX_MEMORY";
/// `ITERION_SANDBOX_CPUS`: a decimal number of CPUs (`0.5`, `2`).
pub const ITERION_SANDBOX_CPUS: &str = "ITERION_SANDBOX_CPUS";
/// `ITERION_SANDBOX_PIDS`: the most processes (and threads) the sandbox may hold at once.
pub const ITERION_SANDBOX_PIDS: &str = "ITERION_SANDBOX_PIDS";

/// The smallest memory limit accepted (docker's own floor: below it the engine refuses).
pub const MIN_MEMORY_BYTES: u64 = 6 * 1024 * 1024;
/// The smallest cpu limit accepted, in billionths of a CPU (docker's floor, 0.01).
pub const MIN_NANO_CPUS: u64 = 10_000_000;

/// The most processes an untrusted sandbox may hold at once, whatever the operator set: a fork
/// bomb stays inside it instead of exhausting the host's pids (docker, podman, and the namespace
/// driver where it can make a cgroup).
pub const UNTRUSTED_PIDS_LIMIT: u64 = 4096;

/// A sandbox's resource limits; each unset one is the engine's (or the host's) default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct Limits {
    /// The memory limit in bytes (swap included: no swap beyond it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// The cpu limit in billionths of a CPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nano_cpus: Option<u64>,
    /// The most processes (threads count) at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pids: Option<u64>,
}

impl Limits {
    /// Whether no limit is set.
    pub fn is_empty(&self) -> bool {
        *self == Limits::default()
    }

    /// The names of the limits set (`memory`, `cpus`, `pids`), in that order.
    pub fn names(&self) -> Vec<&'static str> {
        [
            ("memory", self.memory_bytes.is_some()),
            ("cpus", self.nano_cpus.is_some()),
            ("pids", self.pids.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, set)| set.then_some(name))
        .collect()
    }

    /// The limits a driver applies to a run: these, with the pids limit of an untrusted run at
    /// most [`UNTRUSTED_PIDS_LIMIT`] (set to it when unset).
    pub fn for_run(&self, untrusted: bool) -> Limits {
        let mut limits = *self;
        if untrusted {
            limits.pids = Some(
                limits
                    .pids
                    .map_or(UNTRUSTED_PIDS_LIMIT, |p| p.min(UNTRUSTED_PIDS_LIMIT)),
            );
        }
        limits
    }

    /// Parses the three settings (each `None` when unset or blank). Pure.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidSetting`] naming the variable for a malformed, zero or too small value.
    pub fn parse(memory: Option<&str>, cpus: Option<&str>, pids: Option<&str>) -> Result<Limits> {
        Ok(Limits {
            memory_bytes: set(memory).map(parse_memory).transpose()?,
            nano_cpus: set(cpus).map(parse_cpus).transpose()?,
            pids: set(pids).map(parse_pids).transpose()?,
        })
    }

    /// [`Limits::parse`] over the operator's environment.
    ///
    /// # Errors
    ///
    /// As [`Limits::parse`].
    pub fn from_env(env: &iterion_vocab::Environment) -> Result<Limits> {
        Limits::parse(
            env.get(ITERION_SANDBOX_MEMORY).as_deref(),
            env.get(ITERION_SANDBOX_CPUS).as_deref(),
            env.get(ITERION_SANDBOX_PIDS).as_deref(),
        )
    }
}

fn invalid(variable: &'static str, value: &str, want: &'static str) -> Error {
    Error::InvalidSetting {
        variable,
        value: value.to_owned(),
        want,
    }
}

const MEMORY_WANT: &str = "bytes, or a whole number with k, m or g (binary units), at least 6m";

fn parse_memory(value: &str) -> Result<u64> {
    let lower = value.to_ascii_lowercase();
    let (digits, unit) = match lower.strip_suffix('b').unwrap_or(&lower) {
        v if v.ends_with('k') => (&v[..v.len() - 1], 1u64 << 10),
        v if v.ends_with('m') => (&v[..v.len() - 1], 1 << 20),
        v if v.ends_with('g') => (&v[..v.len() - 1], 1 << 30),
        v => (v, 1),
    };
    let bytes = (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse::<u64>().ok())
        .flatten()
        .and_then(|n| n.checked_mul(unit))
        // Docker takes an i64.
        .filter(|n| i64::try_from(*n).is_ok())
        .ok_or_else(|| invalid(ITERION_SANDBOX_MEMORY, value, MEMORY_WANT))?;
    if bytes < MIN_MEMORY_BYTES {
        return Err(invalid(ITERION_SANDBOX_MEMORY, value, MEMORY_WANT));
    }
    Ok(bytes)
}

const CPUS_WANT: &str = "a decimal number of CPUs, at least 0.01 (0.5, 2)";

fn parse_cpus(value: &str) -> Result<u64> {
    let (whole, fraction) = value.split_once('.').unwrap_or((value, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty())
        || !digits(whole)
        || !digits(fraction)
        || fraction.len() > 9
        || whole.len() > 6
    {
        return Err(invalid(ITERION_SANDBOX_CPUS, value, CPUS_WANT));
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole
            .parse()
            .map_err(|_| invalid(ITERION_SANDBOX_CPUS, value, CPUS_WANT))?
    };
    let fraction: u64 = format!("{fraction:0<9}")
        .parse()
        .map_err(|_| invalid(ITERION_SANDBOX_CPUS, value, CPUS_WANT))?;
    let nano = whole * 1_000_000_000 + fraction;
    if nano < MIN_NANO_CPUS {
        return Err(invalid(ITERION_SANDBOX_CPUS, value, CPUS_WANT));
    }
    Ok(nano)
}

const PIDS_WANT: &str = "a whole number of processes, at least 1";

fn parse_pids(value: &str) -> Result<u64> {
    value
        .parse::<u64>()
        .ok()
        .filter(|n| *n >= 1 && i64::try_from(*n).is_ok())
        .ok_or_else(|| invalid(ITERION_SANDBOX_PIDS, value, PIDS_WANT))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse_units_and_refuse_what_an_engine_would() {
        let limits = Limits::parse(Some("512m"), Some("1.5"), Some("64")).unwrap();
        assert_eq!(limits.memory_bytes, Some(512 << 20));
        assert_eq!(limits.nano_cpus, Some(1_500_000_000));
        assert_eq!(limits.pids, Some(64));
        assert_eq!(limits.names(), ["memory", "cpus", "pids"]);
        assert_eq!(
            Limits::parse(Some("2G"), Some(".5"), None).unwrap(),
            Limits {
                memory_bytes: Some(2 << 30),
                nano_cpus: Some(500_000_000),
                pids: None,
            }
        );
        assert_eq!(
            Limits::parse(Some("7340032"), None, None)
                .unwrap()
                .memory_bytes,
            Some(7_340_032)
        );
        assert!(Limits::parse(Some(" "), None, None).unwrap().is_empty());
        for (memory, cpus, pids, variable) in [
            (Some("1m"), None, None, ITERION_SANDBOX_MEMORY),
            (Some("-5m"), None, None, ITERION_SANDBOX_MEMORY),
            (Some("12t"), None, None, ITERION_SANDBOX_MEMORY),
            (Some("99999999999g"), None, None, ITERION_SANDBOX_MEMORY),
            (None, Some("0"), None, ITERION_SANDBOX_CPUS),
            (None, Some("0.001"), None, ITERION_SANDBOX_CPUS),
            (None, Some("1,5"), None, ITERION_SANDBOX_CPUS),
            (None, Some("."), None, ITERION_SANDBOX_CPUS),
            (None, None, Some("0"), ITERION_SANDBOX_PIDS),
            (None, None, Some("ten"), ITERION_SANDBOX_PIDS),
        ] {
            match Limits::parse(memory, cpus, pids) {
                Err(Error::InvalidSetting { variable: v, .. }) => assert_eq!(v, variable),
                other => panic!("{memory:?} {cpus:?} {pids:?}: {other:?}"),
            }
        }
    }
}
