//! The thin readers that fetch the environment for the pure functions elsewhere in the crate
//! (SANDBOX.md §17). Each does nothing but read its variable ([`crate::vars`] names them) and hand
//! the value to a pure parser; tests call the parsers.

use crate::error::Result;
use crate::host::HostSignals;
use crate::mode::{HostState, SandboxFlag};
use crate::precedence::{
    DefaultImage, resolve_default_sandbox_image_with_fallback, resolve_global_sandbox_default,
    resolve_host_state_setting, resolve_sandbox_override,
};
use crate::vars::{
    ITERION_DESKTOP, ITERION_MODE, ITERION_SANDBOX_DEFAULT, ITERION_SANDBOX_DEFAULT_IMAGE,
    ITERION_SANDBOX_HOST_STATE, ITERION_SANDBOX_OVERRIDE, KUBERNETES_SERVICE_HOST, var,
};

/// `resolve_global_sandbox_default` over `ITERION_SANDBOX_DEFAULT`.
///
/// # Errors
///
/// [`Error::InvalidSetting`](crate::Error::InvalidSetting) for a value other than `auto`/`none`.
pub fn global_sandbox_default_from_env() -> Result<SandboxFlag> {
    resolve_global_sandbox_default(var(ITERION_SANDBOX_DEFAULT).as_deref())
}

/// `resolve_sandbox_override` over `ITERION_SANDBOX_OVERRIDE`.
///
/// # Errors
///
/// [`Error::InvalidSetting`](crate::Error::InvalidSetting) for a value other than `auto`/`none`.
pub fn sandbox_override_from_env() -> Result<Option<SandboxFlag>> {
    resolve_sandbox_override(var(ITERION_SANDBOX_OVERRIDE).as_deref())
}

/// `resolve_host_state_setting` over `ITERION_SANDBOX_HOST_STATE`.
///
/// # Errors
///
/// [`Error::InvalidSetting`](crate::Error::InvalidSetting) for a value other than `auto`/`none`.
pub fn host_state_from_env() -> Result<HostState> {
    resolve_host_state_setting(var(ITERION_SANDBOX_HOST_STATE).as_deref())
}

/// `resolve_default_sandbox_image_with_fallback` with `ITERION_SANDBOX_DEFAULT_IMAGE`.
pub fn default_image_from_env(flag: Option<&str>) -> DefaultImage {
    resolve_default_sandbox_image_with_fallback(flag, var(ITERION_SANDBOX_DEFAULT_IMAGE).as_deref())
}

impl HostSignals {
    /// Reads `ITERION_MODE`, `KUBERNETES_SERVICE_HOST`, `ITERION_DESKTOP` and `argv[0]`.
    pub fn from_env() -> HostSignals {
        HostSignals {
            iterion_mode: var(ITERION_MODE),
            kubernetes_service_host: var(KUBERNETES_SERVICE_HOST),
            iterion_desktop: var(ITERION_DESKTOP),
            argv0: std::env::args_os()
                .next()
                .map(|arg| arg.to_string_lossy().into_owned()),
        }
    }
}
