//! The thin readers that take the environment for the pure functions elsewhere in the crate
//! (SANDBOX.md §17). Each does nothing but read its variable ([`crate::vars`] names them) from the
//! caller's [`Environment`] snapshot and hand the value to a pure parser; tests call the parsers.

use iterion_vocab::Environment;

use crate::error::Result;
use crate::host::HostSignals;
use crate::mode::{HostState, SandboxFlag};
use crate::precedence::{
    DefaultImage, resolve_default_sandbox_image_with_fallback, resolve_global_sandbox_default,
    resolve_host_state_setting, resolve_sandbox_override,
};
use crate::vars::{
    ITERION_DESKTOP, ITERION_MODE, ITERION_SANDBOX_DEFAULT, ITERION_SANDBOX_DEFAULT_IMAGE,
    ITERION_SANDBOX_DRIVER, ITERION_SANDBOX_HOST_STATE, ITERION_SANDBOX_OVERRIDE,
    KUBERNETES_SERVICE_HOST,
};

/// `resolve_global_sandbox_default` over `ITERION_SANDBOX_DEFAULT`.
///
/// # Errors
///
/// [`Error::InvalidSetting`](crate::Error::InvalidSetting) for a value other than `auto`/`none`.
pub fn global_sandbox_default_from_env(env: &Environment) -> Result<SandboxFlag> {
    resolve_global_sandbox_default(env.get(ITERION_SANDBOX_DEFAULT).as_deref())
}

/// [`parse_sandbox_driver`] over `ITERION_SANDBOX_DRIVER`: the driver an operator pins, for
/// [`FactoryOptions::preferred_driver`](crate::FactoryOptions::preferred_driver).
///
/// # Errors
///
/// As [`parse_sandbox_driver`].
pub fn sandbox_driver_from_env(env: &Environment) -> Result<Option<crate::host::DriverKind>> {
    parse_sandbox_driver(env.get(ITERION_SANDBOX_DRIVER).as_deref())
}

/// `ITERION_SANDBOX_DRIVER`'s grammar: unset, empty or `auto` = walk the host's preference
/// order; otherwise a driver name (case-insensitive), which must then construct. Pure.
///
/// # Errors
///
/// [`Error::InvalidSetting`](crate::Error::InvalidSetting) for any other value.
pub fn parse_sandbox_driver(value: Option<&str>) -> Result<Option<crate::host::DriverKind>> {
    let Some(value) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let lower = value.to_ascii_lowercase();
    if lower == "auto" {
        return Ok(None);
    }
    crate::host::DriverKind::parse(&lower)
        .map(Some)
        .ok_or_else(|| crate::Error::InvalidSetting {
            variable: ITERION_SANDBOX_DRIVER,
            value: value.to_owned(),
            want: "auto, docker, podman, kubernetes, namespace or noop",
        })
}

/// `resolve_sandbox_override` over `ITERION_SANDBOX_OVERRIDE`.
///
/// # Errors
///
/// [`Error::InvalidSetting`](crate::Error::InvalidSetting) for a value other than `auto`/`none`.
pub fn sandbox_override_from_env(env: &Environment) -> Result<Option<SandboxFlag>> {
    resolve_sandbox_override(env.get(ITERION_SANDBOX_OVERRIDE).as_deref())
}

/// `resolve_host_state_setting` over `ITERION_SANDBOX_HOST_STATE`.
///
/// # Errors
///
/// [`Error::InvalidSetting`](crate::Error::InvalidSetting) for a value other than `auto`/`none`.
pub fn host_state_from_env(env: &Environment) -> Result<HostState> {
    resolve_host_state_setting(env.get(ITERION_SANDBOX_HOST_STATE).as_deref())
}

/// `resolve_default_sandbox_image_with_fallback` with `ITERION_SANDBOX_DEFAULT_IMAGE`.
pub fn default_image_from_env(env: &Environment, flag: Option<&str>) -> DefaultImage {
    resolve_default_sandbox_image_with_fallback(
        flag,
        env.get(ITERION_SANDBOX_DEFAULT_IMAGE).as_deref(),
    )
}

impl HostSignals {
    /// Reads `ITERION_MODE`, `KUBERNETES_SERVICE_HOST` and `ITERION_DESKTOP` from `env`, and the
    /// process's `argv[0]`.
    pub fn from_env(env: &Environment) -> HostSignals {
        HostSignals {
            iterion_mode: env.get(ITERION_MODE),
            kubernetes_service_host: env.get(KUBERNETES_SERVICE_HOST),
            iterion_desktop: env.get(ITERION_DESKTOP),
            argv0: std::env::args_os()
                .next()
                .map(|arg| arg.to_string_lossy().into_owned()),
        }
    }
}
