//! Kubernetes policy (SANDBOX.md §5.5): what a spec must be to run as a pod — `validate_spec`,
//! the numeric user and its default. Pure, so it lives in the core: the kubernetes driver's
//! `prepare`, the doctor and the pre-flight all call it, and the last two need no cluster client.
//!
//! The engine path and the doctor path differ in one place, on purpose: `Driver::prepare` first
//! defaults an absent `user` to [`DEFAULT_USER`] (`1000:1000`, the uid of the published images;
//! [`apply_engine_user_default`]) and logs it, *then* validates. The doctor and the pre-flight
//! call [`validate_spec`] on the resolved spec themselves, without the default, so they fail a
//! cloud workflow that names no user: an operator learns before the fleet does that the image's
//! user is a guess.

use crate::error::{Error, Result};
use crate::mode::HostState;
use crate::rules::KubernetesRule;
use crate::spec::Spec;

/// The user `prepare` gives a spec that names none (SANDBOX.md §5.5): uid and gid of the
/// published images.
pub const DEFAULT_USER: &str = "1000:1000";

/// The gid used when the user names only a uid (pod `fsGroup`, `runAsGroup`; SANDBOX.md §5.8).
pub(crate) const DEFAULT_GID: i64 = 1000;

/// A numeric user: `uid` or `uid:gid`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NumericUser {
    /// `runAsUser`.
    pub uid: i64,
    /// `runAsGroup` and `fsGroup`; `None` when the user named only a uid.
    pub gid: Option<i64>,
}

impl NumericUser {
    /// The gid to run as: the named one, else `DEFAULT_GID`.
    pub fn gid_or_default(self) -> i64 {
        self.gid.unwrap_or(DEFAULT_GID)
    }
}

fn digits(part: &str) -> Option<i64> {
    if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    part.parse().ok()
}

/// Parses `uid` or `uid:gid`, each all ASCII digits (and within `i64`). `None` for anything else
/// (a name, a sign, spaces, an empty part, a third part).
pub fn parse_numeric_user(user: &str) -> Option<NumericUser> {
    match user.split_once(':') {
        None => Some(NumericUser {
            uid: digits(user)?,
            gid: None,
        }),
        Some((uid, gid)) => Some(NumericUser {
            uid: digits(uid)?,
            gid: Some(digits(gid)?),
        }),
    }
}

/// The engine path's default (SANDBOX.md §5.5): an absent (or empty) user becomes
/// [`DEFAULT_USER`]. Returns whether it did, so the caller can log it. The doctor and the
/// pre-flight do not call this.
pub fn apply_engine_user_default(spec: &mut Spec) -> bool {
    if spec.user.as_deref().is_some_and(|user| !user.is_empty()) {
        return false;
    }
    spec.user = Some(DEFAULT_USER.to_owned());
    true
}

/// Validates a spec for the kubernetes driver (SANDBOX.md §5.5). Checks run in order, and the
/// first failure is returned:
///
/// 1. [`Spec::validate`];
/// 2. `build` set: [`KubernetesRule::BuildIsLocalOnly`];
/// 3. empty `image`: [`KubernetesRule::ImageRequired`];
/// 4. `host_state` explicitly `auto` ([`HostState::Unset`] passes):
///    [`KubernetesRule::HostStateAutoNeedsBinds`];
/// 5. `user` absent: [`KubernetesRule::UserRequired`];
/// 6. `user` not `uid` or `uid:gid` in digits: [`KubernetesRule::UserNotNumeric`].
///
/// Pure: no cluster is asked. The engine path applies [`apply_engine_user_default`] first.
///
/// # Errors
///
/// The error of [`Spec::validate`], else [`Error::KubernetesRefused`] with the rule.
///
/// ```
/// use iterion_sandbox::{Error, KubernetesRule, Mode, Spec, kubernetes_validate_spec};
/// let spec = Spec { mode: Mode::Inline, image: Some("alpine:3".into()),
///                   user: Some("vscode".into()), ..Spec::default() };
/// let Err(Error::KubernetesRefused { rule }) = kubernetes_validate_spec(&spec) else { panic!() };
/// assert_eq!(rule, KubernetesRule::UserNotNumeric);
/// ```
pub fn validate_spec(spec: &Spec) -> Result<()> {
    spec.validate()?;
    let refuse = |rule| Err(Error::KubernetesRefused { rule });
    if spec.build.is_some() {
        return refuse(KubernetesRule::BuildIsLocalOnly);
    }
    if spec.image_ref().is_none() {
        return refuse(KubernetesRule::ImageRequired);
    }
    if spec.host_state == HostState::Auto {
        return refuse(KubernetesRule::HostStateAutoNeedsBinds);
    }
    match spec.user.as_deref() {
        None | Some("") => refuse(KubernetesRule::UserRequired),
        Some(user) if parse_numeric_user(user).is_none() => refuse(KubernetesRule::UserNotNumeric),
        Some(_) => Ok(()),
    }
}

#[cfg(test)]
#[path = "kubernetes_tests.rs"]
mod tests;
