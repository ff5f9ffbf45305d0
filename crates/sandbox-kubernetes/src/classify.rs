//! Pod readiness, read as values (SANDBOX.md §5.7 step 7, §16.3). Pure: the driver reads the pod,
//! these functions decide.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

/// Container waiting reasons that no amount of waiting fixes (SANDBOX.md §16.3).
pub(crate) const TERMINAL_WAITING_REASONS: &[&str] = &[
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "ImageInspectError",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
    "CrashLoopBackOff",
];

/// Where a pod stands while `start` waits for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PodProgress {
    /// Condition `Ready=True`.
    Ready,
    /// Phase `Failed` or `Succeeded`: it will never be ready.
    Ended {
        /// The phase.
        phase: String,
        /// `reason: message` of the pod, when it says.
        why: String,
    },
    /// Keep waiting.
    Waiting,
}

/// The verdict on a pod that did not become ready in time (SANDBOX.md §16.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum NotReady {
    /// Retry elsewhere ([`Error::Capacity`](iterion_sandbox::Error::Capacity)): the cluster could not place or start it.
    Capacity {
        /// `the pod was never scheduled (…)` or `the pod was scheduled but …`.
        why: String,
    },
    /// Nothing to retry: the suffix `scheduling: <reason: message>` for the error.
    Terminal {
        /// `reason: message` (or what was seen).
        scheduling: String,
    },
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn reason_message(reason: Option<&str>, message: Option<&str>) -> String {
    match (
        reason.filter(|r| !r.is_empty()),
        message.filter(|m| !m.is_empty()),
    ) {
        (Some(reason), Some(message)) => format!("{reason}: {message}"),
        (Some(reason), None) => reason.to_owned(),
        (None, Some(message)) => message.to_owned(),
        (None, None) => "no reason given".to_owned(),
    }
}

/// The readiness of a pod as last read.
pub(crate) fn pod_progress(pod: &Pod) -> PodProgress {
    let status = pod.status.as_ref();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        });
    if ready {
        return PodProgress::Ready;
    }
    match phase(pod) {
        "Failed" | "Succeeded" => PodProgress::Ended {
            phase: phase(pod).to_owned(),
            why: reason_message(
                status.and_then(|s| s.reason.as_deref()),
                status.and_then(|s| s.message.as_deref()),
            ),
        },
        _ => PodProgress::Waiting,
    }
}

fn waiting<'a>(pod: &'a Pod) -> impl Iterator<Item = (&'a str, Option<&'a str>)> {
    let status = pod.status.as_ref();
    let all = |list: Option<&'a Vec<ContainerStatus>>| list.into_iter().flatten();
    all(status.and_then(|s| s.init_container_statuses.as_ref()))
        .chain(all(status.and_then(|s| s.container_statuses.as_ref())))
        .filter_map(|c| c.state.as_ref()?.waiting.as_ref())
        .filter_map(|w| Some((w.reason.as_deref()?, w.message.as_deref())))
}

/// Classifies a pod that did not become ready within its bound (SANDBOX.md §16.3), from one read
/// of it (`None`: it could not be read):
///
/// | observation | verdict |
/// |---|---|
/// | unreadable | terminal |
/// | a waiting reason in [`TERMINAL_WAITING_REASONS`] | terminal |
/// | phase other than `Pending` | terminal |
/// | `Pending`, not scheduled | capacity: never scheduled |
/// | `Pending`, scheduled | capacity: scheduled but not started |
pub(crate) fn classify_not_ready(pod: Option<&Pod>) -> NotReady {
    let Some(pod) = pod else {
        return NotReady::Terminal {
            scheduling: "the pod could not be read".to_owned(),
        };
    };
    if let Some((reason, message)) =
        waiting(pod).find(|(reason, _)| TERMINAL_WAITING_REASONS.contains(reason))
    {
        return NotReady::Terminal {
            scheduling: reason_message(Some(reason), message),
        };
    }
    if phase(pod) != "Pending" {
        let status = pod.status.as_ref();
        return NotReady::Terminal {
            scheduling: format!(
                "phase {}: {}",
                if phase(pod).is_empty() {
                    "unknown"
                } else {
                    phase(pod)
                },
                reason_message(
                    status.and_then(|s| s.reason.as_deref()),
                    status.and_then(|s| s.message.as_deref())
                )
            ),
        };
    }
    let scheduled = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|conditions| conditions.iter().find(|c| c.type_ == "PodScheduled"));
    match scheduled {
        Some(condition) if condition.status == "True" => {
            let reasons: Vec<String> = waiting(pod)
                .map(|(reason, message)| reason_message(Some(reason), message))
                .collect();
            NotReady::Capacity {
                why: format!(
                    "the pod was scheduled but its node had not started the container ({})",
                    if reasons.is_empty() {
                        "no waiting reason".to_owned()
                    } else {
                        reasons.join("; ")
                    }
                ),
            }
        }
        Some(condition) => NotReady::Capacity {
            why: format!(
                "the pod was never scheduled ({})",
                reason_message(condition.reason.as_deref(), condition.message.as_deref())
            ),
        },
        None => NotReady::Capacity {
            why: "the pod was never scheduled (no PodScheduled condition yet)".to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "status": status})).unwrap()
    }

    #[test]
    fn readiness_follows_the_ready_condition_and_terminal_phases() {
        let rows = [
            pod(json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})),
            pod(json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]})),
            pod(json!({"phase": "Failed", "reason": "DeadlineExceeded", "message": "too long"})),
            pod(json!({"phase": "Pending"})),
        ];
        assert_eq!(
            rows.iter().map(pod_progress).collect::<Vec<_>>(),
            vec![
                PodProgress::Ready,
                PodProgress::Waiting,
                PodProgress::Ended {
                    phase: "Failed".to_owned(),
                    why: "DeadlineExceeded: too long".to_owned()
                },
                PodProgress::Waiting,
            ]
        );
    }

    #[test]
    fn a_pod_that_was_not_ready_is_capacity_or_terminal_as_the_design_table_says() {
        let unschedulable = pod(json!({"phase": "Pending", "conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0/3 nodes are available: 3 Insufficient cpu."}]}));
        let scheduled_slow = pod(json!({"phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [{"name": "workload", "image": "i", "imageID": "", "ready": false,
                "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}]}));
        let bad_image = pod(json!({"phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [{"name": "workload", "image": "i", "imageID": "", "ready": false,
                "restartCount": 0, "state": {"waiting": {"reason": "ImagePullBackOff",
                "message": "Back-off pulling image \"nope\""}}}]}));
        let running = pod(json!({"phase": "Running"}));
        let got = [
            classify_not_ready(Some(&unschedulable)),
            classify_not_ready(Some(&scheduled_slow)),
            classify_not_ready(Some(&bad_image)),
            classify_not_ready(Some(&running)),
            classify_not_ready(None),
        ];
        assert_eq!(
            got.to_vec(),
            vec![
                NotReady::Capacity {
                    why: "the pod was never scheduled (Unschedulable: 0/3 nodes are available: 3 Insufficient cpu.)".to_owned()
                },
                NotReady::Capacity {
                    why: "the pod was scheduled but its node had not started the container (ContainerCreating)".to_owned()
                },
                NotReady::Terminal {
                    scheduling: "ImagePullBackOff: Back-off pulling image \"nope\"".to_owned()
                },
                NotReady::Terminal {
                    scheduling: "phase Running: no reason given".to_owned()
                },
                NotReady::Terminal {
                    scheduling: "the pod could not be read".to_owned()
                },
            ]
        );
    }
}
