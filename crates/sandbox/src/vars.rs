//! The environment variables this crate reads (SANDBOX.md §17): their names and the switch
//! grammar. A leaf: it imports nothing of the crate, so every module may name a variable; the
//! typed readers that hand a value from the caller's [`Environment`](iterion_vocab::Environment)
//! to a pure parser are in [`crate::env`].
//!
//! Every variable name is a constant here, so a grep of this one file lists what the crate reads.

/// Host kind override: `local` or `cloud` (§3.1).
pub(crate) const ITERION_MODE: &str = "ITERION_MODE";
/// Non-empty: the desktop app's host kind (§3.1).
pub(crate) const ITERION_DESKTOP: &str = "ITERION_DESKTOP";
/// Set inside every Kubernetes pod; non-empty means cloud (§3.1).
pub const KUBERNETES_SERVICE_HOST: &str = "KUBERNETES_SERVICE_HOST";
/// The global default tier: `auto` or `none`; unset = `auto` at entry points (§2.1).
pub const ITERION_SANDBOX_DEFAULT: &str = "ITERION_SANDBOX_DEFAULT";
/// The CLI-strength tier when `--sandbox` is absent (§2.1).
pub(crate) const ITERION_SANDBOX_OVERRIDE: &str = "ITERION_SANDBOX_OVERRIDE";
/// auto's default image, with no fallback (§2.4).
pub(crate) const ITERION_SANDBOX_DEFAULT_IMAGE: &str = "ITERION_SANDBOX_DEFAULT_IMAGE";
/// The driver an operator pins (issue 18): `docker`, `podman`, `kubernetes`, `namespace`, `noop`.
pub const ITERION_SANDBOX_DRIVER: &str = "ITERION_SANDBOX_DRIVER";
/// The global host-state tier: `auto` or `none` (§2.2).
pub(crate) const ITERION_SANDBOX_HOST_STATE: &str = "ITERION_SANDBOX_HOST_STATE";
/// Phase `image pull` budget (§16.1).
pub(crate) const ITERION_SANDBOX_PULL_TIMEOUT: &str = "ITERION_SANDBOX_PULL_TIMEOUT";
/// Phase `image build` budget (§16.1).
pub(crate) const ITERION_SANDBOX_BUILD_TIMEOUT: &str = "ITERION_SANDBOX_BUILD_TIMEOUT";
/// Phase `post_create` budget (§16.1).
pub(crate) const ITERION_SANDBOX_POST_CREATE_TIMEOUT: &str = "ITERION_SANDBOX_POST_CREATE_TIMEOUT";
/// Phase `kubernetes apply` budget (§16.1).
pub(crate) const ITERION_SANDBOX_K8S_APPLY_TIMEOUT: &str = "ITERION_SANDBOX_K8S_APPLY_TIMEOUT";
/// Phase `pod ready` budget (§16.1).
pub(crate) const ITERION_SANDBOX_K8S_POD_READY_TIMEOUT: &str =
    "ITERION_SANDBOX_K8S_POD_READY_TIMEOUT";
/// Phase `workspace copy` budget (§16.1).
pub(crate) const ITERION_SANDBOX_WORKSPACE_COPY_TIMEOUT: &str =
    "ITERION_SANDBOX_WORKSPACE_COPY_TIMEOUT";
/// Falsy disables the shared `/nix` volume (§4.5).
pub const ITERION_SANDBOX_PERSIST_NIX: &str = "ITERION_SANDBOX_PERSIST_NIX";
/// How many pre-started docker/podman sandboxes to keep per sandbox shape (issue 18 item 4);
/// 0 (the default) keeps none.
pub const ITERION_SANDBOX_WARM: &str = "ITERION_SANDBOX_WARM";

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
