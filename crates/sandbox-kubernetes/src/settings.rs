//! The kubernetes driver's knobs ([`KubernetesSettings`]), read once from the runner's
//! environment snapshot: the owner pod, its IP, the egress probe, scheduling and the phase
//! budgets.

use std::time::Duration;

use iterion_sandbox::{Phase, phase_timeout_from_env};
use iterion_vocab::Environment;

use crate::manifest::RunnerOwner;
use crate::scheduling::SchedulingInputs;

/// The runner pod's IP (downward API): the proxy's advertise address and the NetworkPolicy peer.
pub(crate) const ITERION_POD_IP: &str = "ITERION_POD_IP";
/// The runner pod's name; with `ITERION_RUNNER_POD_UID`, the owner of every object.
pub const ITERION_RUNNER_POD_NAME: &str = "ITERION_RUNNER_POD_NAME";
/// The runner pod's uid.
pub(crate) const ITERION_RUNNER_POD_UID: &str = "ITERION_RUNNER_POD_UID";
/// `host:port` the egress probe dials directly (default [`DEFAULT_EGRESS_PROBE`]); `off` disables.
pub(crate) const ITERION_SANDBOX_EGRESS_PROBE: &str = "ITERION_SANDBOX_EGRESS_PROBE";
/// The probe's default target.
pub(crate) const DEFAULT_EGRESS_PROBE: &str = "1.1.1.1:443";

/// The driver's knobs, read once from the runner's environment ([`KubernetesSettings::from_env`]).
#[derive(Clone, Debug, PartialEq)]
pub struct KubernetesSettings {
    /// The runner pod that owns every object. Default: none.
    pub owner: Option<RunnerOwner>,
    /// The runner pod's IP. Default: none (a proxied run then fails closed).
    pub pod_ip: Option<String>,
    /// The egress probe target; `None` = off. Default: `DEFAULT_EGRESS_PROBE`.
    pub egress_probe: Option<String>,
    /// The raw scheduling variables; parsed at every `start` (a bad policy fails each start).
    pub scheduling: SchedulingInputs,
    /// Each apply or delete call. Default: 2 min.
    pub apply_timeout: Duration,
    /// The wait for `Ready`. Default: 10 min.
    pub pod_ready_timeout: Duration,
    /// The workspace copy-in. Default: 15 min.
    pub copy_timeout: Duration,
    /// `post_create`. Default: 30 min.
    pub post_create_timeout: Duration,
    /// How often readiness is read. Default: 1 s.
    pub poll_interval: Duration,
}

impl Default for KubernetesSettings {
    fn default() -> Self {
        KubernetesSettings {
            owner: None,
            pod_ip: None,
            egress_probe: Some(DEFAULT_EGRESS_PROBE.to_owned()),
            scheduling: SchedulingInputs::default(),
            apply_timeout: Phase::KubernetesApply.default_budget(),
            pod_ready_timeout: Phase::PodReady.default_budget(),
            copy_timeout: Phase::WorkspaceCopy.default_budget(),
            post_create_timeout: Phase::PostCreate.default_budget(),
            poll_interval: Duration::from_secs(1),
        }
    }
}

fn non_empty(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

impl KubernetesSettings {
    /// Reads `ITERION_RUNNER_POD_NAME`/`_UID` (both or neither), `ITERION_POD_IP`,
    /// `ITERION_SANDBOX_EGRESS_PROBE`, the scheduling variables and the phase budgets from `env`.
    pub fn from_env(env: &Environment) -> KubernetesSettings {
        let owner = match (
            non_empty(env.get(ITERION_RUNNER_POD_NAME)),
            non_empty(env.get(ITERION_RUNNER_POD_UID)),
        ) {
            (Some(name), Some(uid)) => Some(RunnerOwner { name, uid }),
            _ => None,
        };
        let egress_probe = match non_empty(env.get(ITERION_SANDBOX_EGRESS_PROBE)) {
            None => Some(DEFAULT_EGRESS_PROBE.to_owned()),
            Some(off) if off.eq_ignore_ascii_case("off") => None,
            Some(target) => Some(target),
        };
        KubernetesSettings {
            owner,
            pod_ip: non_empty(env.get(ITERION_POD_IP)),
            egress_probe,
            scheduling: SchedulingInputs::from_env(env),
            apply_timeout: phase_timeout_from_env(Phase::KubernetesApply, env),
            pod_ready_timeout: phase_timeout_from_env(Phase::PodReady, env),
            copy_timeout: phase_timeout_from_env(Phase::WorkspaceCopy, env),
            post_create_timeout: phase_timeout_from_env(Phase::PostCreate, env),
            poll_interval: Duration::from_secs(1),
        }
    }
}
