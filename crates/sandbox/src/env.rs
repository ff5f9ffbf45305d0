//! The environment variables this crate reads (SANDBOX.md §17), and the thin readers that fetch
//! them for the pure functions elsewhere in the crate.
//!
//! Every variable name is a constant here, so a grep of this one file lists what the crate reads.
//! The readers do nothing but fetch and hand the value to a pure parser; tests call the parsers.

use std::ffi::OsStr;

use crate::error::Result;
use crate::host::HostSignals;
use crate::mode::{HostState, SandboxFlag};
use crate::precedence::{
    DefaultImage, resolve_default_sandbox_image_with_fallback, resolve_global_sandbox_default,
    resolve_host_state_setting, resolve_sandbox_override,
};

/// Host kind override: `local` or `cloud` (§3.1).
pub const ITERION_MODE: &str = "ITERION_MODE";
/// Non-empty: the desktop app's host kind (§3.1).
pub const ITERION_DESKTOP: &str = "ITERION_DESKTOP";
/// Set inside every Kubernetes pod; non-empty means cloud (§3.1).
pub const KUBERNETES_SERVICE_HOST: &str = "KUBERNETES_SERVICE_HOST";
/// The global default tier: `auto` or `none`; unset = `auto` at entry points (§2.1).
pub const ITERION_SANDBOX_DEFAULT: &str = "ITERION_SANDBOX_DEFAULT";
/// The CLI-strength tier when `--sandbox` is absent (§2.1).
pub const ITERION_SANDBOX_OVERRIDE: &str = "ITERION_SANDBOX_OVERRIDE";
/// auto's default image, with no fallback (§2.4).
pub const ITERION_SANDBOX_DEFAULT_IMAGE: &str = "ITERION_SANDBOX_DEFAULT_IMAGE";
/// The global host-state tier: `auto` or `none` (§2.2).
pub const ITERION_SANDBOX_HOST_STATE: &str = "ITERION_SANDBOX_HOST_STATE";
/// Phase `image pull` budget (§16.1).
pub const ITERION_SANDBOX_PULL_TIMEOUT: &str = "ITERION_SANDBOX_PULL_TIMEOUT";
/// Phase `image build` budget (§16.1).
pub const ITERION_SANDBOX_BUILD_TIMEOUT: &str = "ITERION_SANDBOX_BUILD_TIMEOUT";
/// Phase `post_create` budget (§16.1).
pub const ITERION_SANDBOX_POST_CREATE_TIMEOUT: &str = "ITERION_SANDBOX_POST_CREATE_TIMEOUT";
/// Phase `kubernetes apply` budget (§16.1).
pub const ITERION_SANDBOX_K8S_APPLY_TIMEOUT: &str = "ITERION_SANDBOX_K8S_APPLY_TIMEOUT";
/// Phase `pod ready` budget (§16.1).
pub const ITERION_SANDBOX_K8S_POD_READY_TIMEOUT: &str = "ITERION_SANDBOX_K8S_POD_READY_TIMEOUT";
/// Phase `workspace copy` budget (§16.1).
pub const ITERION_SANDBOX_WORKSPACE_COPY_TIMEOUT: &str = "ITERION_SANDBOX_WORKSPACE_COPY_TIMEOUT";
/// Falsy disables the shared `/nix` volume (§4.5).
pub const ITERION_SANDBOX_PERSIST_NIX: &str = "ITERION_SANDBOX_PERSIST_NIX";

/// Whether `value` is truthy: `1`, `true`, `yes` or `on`, trimmed, any case.
pub fn is_truthy(value: &str) -> bool {
    parse_switch(value) == Some(true)
}

/// Whether `value` is falsy: `0`, `false`, `no` or `off`, trimmed, any case.
pub fn is_falsy(value: &str) -> bool {
    parse_switch(value) == Some(false)
}

/// A switch value: `Some(true)` when truthy, `Some(false)` when falsy, `None` otherwise (unset
/// and unknown words are the caller's default).
pub fn parse_switch(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// Reads a variable, lossily decoded; `None` when unset.
pub(crate) fn var(name: impl AsRef<OsStr>) -> Option<String> {
    std::env::var_os(name).map(|value| value.to_string_lossy().into_owned())
}

/// [`resolve_global_sandbox_default`] over `ITERION_SANDBOX_DEFAULT`.
///
/// # Errors
///
/// [`Error::InvalidSetting`](crate::Error::InvalidSetting) for a value other than `auto`/`none`.
pub fn global_sandbox_default_from_env() -> Result<SandboxFlag> {
    resolve_global_sandbox_default(var(ITERION_SANDBOX_DEFAULT).as_deref())
}

/// [`resolve_sandbox_override`] over `ITERION_SANDBOX_OVERRIDE`.
///
/// # Errors
///
/// [`Error::InvalidSetting`](crate::Error::InvalidSetting) for a value other than `auto`/`none`.
pub fn sandbox_override_from_env() -> Result<Option<SandboxFlag>> {
    resolve_sandbox_override(var(ITERION_SANDBOX_OVERRIDE).as_deref())
}

/// [`resolve_host_state_setting`] over `ITERION_SANDBOX_HOST_STATE`.
///
/// # Errors
///
/// [`Error::InvalidSetting`](crate::Error::InvalidSetting) for a value other than `auto`/`none`.
pub fn host_state_from_env() -> Result<HostState> {
    resolve_host_state_setting(var(ITERION_SANDBOX_HOST_STATE).as_deref())
}

/// [`resolve_default_sandbox_image_with_fallback`] with `ITERION_SANDBOX_DEFAULT_IMAGE`.
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

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn switches_are_trimmed_and_case_insensitive() {
        let words = [
            " ON ", "Off", "1", "0", "yes", "NO", "true", "FALSE", "maybe", "",
        ];
        let got: Vec<(&str, Option<bool>)> = words.iter().map(|w| (*w, parse_switch(w))).collect();
        assert_eq!(
            got,
            vec![
                (" ON ", Some(true)),
                ("Off", Some(false)),
                ("1", Some(true)),
                ("0", Some(false)),
                ("yes", Some(true)),
                ("NO", Some(false)),
                ("true", Some(true)),
                ("FALSE", Some(false)),
                ("maybe", None),
                ("", None),
            ]
        );
        assert_eq!((is_truthy(" ON "), is_falsy("Off")), (true, true));
    }
}
