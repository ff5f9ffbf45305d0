//! Host kind and driver preference (SANDBOX.md §3.1–§3.2).
//!
//! [`detect_host`] is pure: the signals come in as a [`HostSignals`] value, which
//! [`HostSignals::from_env`] fills from an [`Environment`](iterion_vocab::Environment) snapshot.

use std::fmt;

use serde::Serialize;

/// Where the engine runs (SANDBOX.md §3.1). It picks the driver preference order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HostKind {
    /// A developer machine: docker, then podman.
    Local,
    /// The desktop app: as local.
    Desktop,
    /// A runner pod: kubernetes.
    Cloud,
}

impl HostKind {
    /// `local`, `desktop` or `cloud`.
    pub fn as_str(self) -> &'static str {
        match self {
            HostKind::Local => "local",
            HostKind::Desktop => "desktop",
            HostKind::Cloud => "cloud",
        }
    }
}

impl fmt::Display for HostKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The process facts host detection reads, as values (unset = `None`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostSignals {
    /// `ITERION_MODE`.
    pub iterion_mode: Option<String>,
    /// `KUBERNETES_SERVICE_HOST`.
    pub kubernetes_service_host: Option<String>,
    /// `ITERION_DESKTOP`.
    pub iterion_desktop: Option<String>,
    /// `argv[0]`.
    pub argv0: Option<String>,
}

/// Detects the host kind (SANDBOX.md §3.1), first match wins:
///
/// 1. `ITERION_MODE`, lower-cased: `cloud` or `local` (other values are ignored);
/// 2. `KUBERNETES_SERVICE_HOST` non-empty: cloud;
/// 3. `ITERION_DESKTOP` non-empty, or `argv[0]` lower-cased containing `iterion-desktop`: desktop;
/// 4. otherwise local.
pub fn detect_host(signals: &HostSignals) -> HostKind {
    let non_empty = |value: &Option<String>| value.as_deref().is_some_and(|v| !v.is_empty());
    match signals
        .iterion_mode
        .as_deref()
        .map(|mode| mode.trim().to_ascii_lowercase())
        .as_deref()
    {
        Some("cloud") => return HostKind::Cloud,
        Some("local") => return HostKind::Local,
        _ => {}
    }
    if non_empty(&signals.kubernetes_service_host) {
        return HostKind::Cloud;
    }
    let desktop_binary = signals
        .argv0
        .as_deref()
        .is_some_and(|argv0| argv0.to_ascii_lowercase().contains("iterion-desktop"));
    if non_empty(&signals.iterion_desktop) || desktop_binary {
        return HostKind::Desktop;
    }
    HostKind::Local
}

/// A driver's registry name (SANDBOX.md §3.2). Declaration order is the local preference order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DriverKind {
    /// Docker through its Engine API.
    Docker,
    /// Podman through its Docker-compatible API socket.
    Podman,
    /// One pod per run, in-cluster.
    Kubernetes,
    /// Linux namespaces set up by the iterion binary itself, the host's root read-only as the
    /// image (issue 18): no daemon, no image, only specs that name no image.
    Namespace,
    /// Host passthrough: no isolation.
    Noop,
}

impl DriverKind {
    /// `docker`, `podman`, `kubernetes`, `namespace` or `noop`.
    pub fn as_str(self) -> &'static str {
        match self {
            DriverKind::Docker => "docker",
            DriverKind::Podman => "podman",
            DriverKind::Kubernetes => "kubernetes",
            DriverKind::Namespace => "namespace",
            DriverKind::Noop => "noop",
        }
    }

    /// Parses a registry name (exact).
    pub fn parse(name: &str) -> Option<DriverKind> {
        [
            DriverKind::Docker,
            DriverKind::Podman,
            DriverKind::Kubernetes,
            DriverKind::Namespace,
            DriverKind::Noop,
        ]
        .into_iter()
        .find(|kind| kind.as_str() == name)
    }
}

impl fmt::Display for DriverKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The drivers a host tries, in order (SANDBOX.md §3.2). noop is always last, so `driver()`
/// always succeeds when it is registered; an active spec never gets it (§3.3). The namespace
/// driver comes after the container engines on a developer machine (issue 18): a machine with
/// docker or podman keeps them; one without gets a sandbox with nothing to install. A runner pod
/// does not try it (user namespaces are rarely allowed in a pod, and the pod is the sandbox).
pub(crate) fn preference_order(host: HostKind) -> &'static [DriverKind] {
    match host {
        HostKind::Cloud => &[DriverKind::Kubernetes, DriverKind::Noop],
        HostKind::Local | HostKind::Desktop => &[
            DriverKind::Docker,
            DriverKind::Podman,
            DriverKind::Namespace,
            DriverKind::Noop,
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn signals(mode: &str, k8s: &str, desktop: &str, argv0: &str) -> HostSignals {
        let opt = |v: &str| (!v.is_empty()).then(|| v.to_owned());
        HostSignals {
            iterion_mode: opt(mode),
            kubernetes_service_host: opt(k8s),
            iterion_desktop: opt(desktop),
            argv0: opt(argv0),
        }
    }

    #[test]
    fn host_detection_takes_the_first_matching_signal() {
        let rows = [
            (signals("", "", "", "/usr/bin/iterion"), HostKind::Local),
            (signals("cloud", "", "", ""), HostKind::Cloud),
            (signals("CLOUD", "", "", ""), HostKind::Cloud),
            (signals("local", "10.0.0.1", "1", ""), HostKind::Local),
            (signals("bogus", "10.0.0.1", "", ""), HostKind::Cloud),
            (signals("", "10.0.0.1", "1", ""), HostKind::Cloud),
            (signals("", "", "1", ""), HostKind::Desktop),
            (
                signals("", "", "", "/Applications/Iterion-Desktop"),
                HostKind::Desktop,
            ),
            (signals("bogus", "", "", ""), HostKind::Local),
        ];
        let got: Vec<(HostSignals, HostKind)> = rows
            .iter()
            .map(|(signals, _)| (signals.clone(), detect_host(signals)))
            .collect();
        assert_eq!(got, rows.to_vec());
    }

    #[test]
    fn cloud_prefers_kubernetes_and_local_prefers_docker_then_podman() {
        assert_eq!(
            [HostKind::Cloud, HostKind::Local, HostKind::Desktop].map(preference_order),
            [
                &[DriverKind::Kubernetes, DriverKind::Noop][..],
                &[
                    DriverKind::Docker,
                    DriverKind::Podman,
                    DriverKind::Namespace,
                    DriverKind::Noop
                ][..],
                &[
                    DriverKind::Docker,
                    DriverKind::Podman,
                    DriverKind::Namespace,
                    DriverKind::Noop
                ][..],
            ]
        );
    }
}
