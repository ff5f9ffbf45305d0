//! The pod, Secrets and NetworkPolicy of one run (SANDBOX.md §5.7–§5.10), rendered as typed
//! k8s-openapi objects by one pure function, [`pod_plan`]. The driver only applies the plan; the
//! snapshot tests pin its JSON.

use std::collections::BTreeMap;

use iterion_sandbox::{
    Error, KubernetesRule, LABEL_RUN_ID, Result, RunInfo, SecretFileMount, Spec, managed_labels,
    parse_numeric_user,
};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{
    Capabilities as KubeCapabilities, ConfigMapVolumeSource, Container, EmptyDirVolumeSource,
    EnvVar, KeyToPath, PersistentVolumeClaimVolumeSource, Pod, PodSecurityContext, PodSpec,
    ResourceRequirements, SeccompProfile, Secret, SecretVolumeSource, SecurityContext,
    TopologySpreadConstraint, Volume, VolumeMount,
};
use k8s_openapi::api::networking::v1::{
    IPBlock, NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyIngressRule, NetworkPolicyPeer,
    NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as KubeQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};

use crate::mounts::{KubeMount, KubeMountKind, mount_volume_name};
use crate::scheduling::{ResourceQuantities, SchedulingPolicy};
use crate::worktree::WORKTREE_GIT_VOLUME;

/// The component label every iterion pod object carries; the sandbox pod's value is
/// [`COMPONENT_SANDBOX_RUN`].
pub(crate) const LABEL_COMPONENT: &str = "iterion.io/component";
/// `iterion.io/component` of a sandbox pod (and the spread selector).
pub(crate) const COMPONENT_SANDBOX_RUN: &str = "sandbox-run";
/// The one container of the pod.
pub(crate) const WORKLOAD_CONTAINER: &str = "workload";
/// The engine binary inside the published images (SANDBOX.md §17.2).
pub(crate) const KUBE_ENGINE_BIN: &str = "/usr/local/bin/iterion";
/// Where the default-path file secrets are projected (SANDBOX.md §5.9).
pub(crate) const KUBE_SECRETS_DIR: &str = "/run/iterion/secrets";
/// Where the egress CA Secret is mounted (SANDBOX.md §5.8, §6.11): its one key lands at
/// [`iterion_sandbox::PROXY_CA_TARGET`], where the CA variables point.
pub(crate) const KUBE_CA_DIR: &str = "/run/iterion/ca";
/// The CA Secret's one key.
pub(crate) const CA_KEY: &str = "egress-ca.pem";
/// File-secret and author-secret volumes: group-readable through `fsGroup` (plain 0400 would
/// leave the file unreadable to the non-root user).
pub(crate) const SECRET_MODE: i32 = 0o440;
/// `activeDeadlineSeconds` is the run's budget plus this (SANDBOX.md §5.7).
pub(crate) const DEADLINE_MARGIN_SECONDS: u64 = 1800;

/// The runner pod every object of a run is owned by (SANDBOX.md §5.7), when both
/// `ITERION_RUNNER_POD_NAME` and `ITERION_RUNNER_POD_UID` are set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunnerOwner {
    /// The runner pod's name.
    pub name: String,
    /// Its uid.
    pub uid: String,
}

/// What [`pod_plan`] renders from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PodInputs<'a> {
    /// The validated spec (user defaulted on the engine path).
    pub spec: &'a Spec,
    /// The image to run.
    pub image: &'a str,
    /// The run.
    pub info: &'a RunInfo,
    /// The runner pod, when known.
    pub owner: Option<&'a RunnerOwner>,
    /// The runner pod's IP (`ITERION_POD_IP`); required when a proxy is active.
    pub pod_ip: Option<&'a str>,
    /// Resources and spread.
    pub scheduling: &'a SchedulingPolicy,
    /// The parsed author mounts.
    pub mounts: &'a [KubeMount],
    /// Where a gitfile workspace's git dir is copied in the pod (SANDBOX.md §5.7 step 8): an
    /// `emptyDir` ([`WORKTREE_GIT_VOLUME`]) is mounted there. `None` for any other workspace.
    pub git_dir: Option<&'a str>,
}

/// Everything `start` applies, in apply order: Secrets, Pod, NetworkPolicy.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PodPlan {
    /// `iterion-run-<run id>`.
    pub pod_name: String,
    /// The workspace folder in the pod.
    pub workspace_folder: String,
    /// `<pod>-secret-files`, when the run has file secrets.
    pub secret_files: Option<Secret>,
    /// `<pod>-ca`, when TLS inspection is on.
    pub ca: Option<Secret>,
    /// The pod.
    pub pod: Pod,
    /// The NetworkPolicy, when a proxy is active.
    pub network_policy: Option<NetworkPolicy>,
    /// Spec env keys skipped because the pair is invalid (logged by the driver).
    pub skipped_env: Vec<String>,
}

/// The pod name of a run (SANDBOX.md §5.7): `iterion-run-<run id>`, lower-cased, `_` replaced by
/// `-`, at most 63 characters (a trailing `-` or `.` left by the cut is trimmed).
pub(crate) fn pod_name(run_id: &str) -> String {
    let mut name = format!(
        "iterion-run-{}",
        run_id.to_ascii_lowercase().replace('_', "-")
    );
    name.truncate(63);
    name.trim_end_matches(['-', '.']).to_owned()
}

/// The name of the file-secrets Secret.
pub(crate) fn secret_files_name(pod: &str) -> String {
    format!("{pod}-secret-files")
}

/// The name of the CA Secret.
pub(crate) fn ca_secret_name(pod: &str) -> String {
    format!("{pod}-ca")
}

/// The data key of file secret `index` (SANDBOX.md §5.9): `secret-<index>-<name>`, each
/// character outside `[A-Za-z0-9._-]` made `-`.
pub(crate) fn secret_data_key(index: usize, name: &str) -> String {
    let name: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("secret-{index}-{name}")
}

/// The `<pod>-secret-files` Secret of `secrets` (SANDBOX.md §5.9), or `None` when there are
/// none. Its data holds the values (base64 on the wire); it carries the pod's labels and owner.
pub(crate) fn secret_files_secret(
    pod: &str,
    secrets: &[SecretFileMount],
    info: &RunInfo,
    owner: Option<&RunnerOwner>,
) -> Option<Secret> {
    if secrets.is_empty() {
        return None;
    }
    let data: BTreeMap<String, ByteString> = secrets
        .iter()
        .enumerate()
        .map(|(index, secret)| {
            (
                secret_data_key(index, &secret.name),
                ByteString(secret.value.expose_secret().to_vec()),
            )
        })
        .collect();
    Some(Secret {
        metadata: meta(&secret_files_name(pod), pod_labels(info), owner),
        data: Some(data),
        type_: Some("Opaque".to_owned()),
        ..Secret::default()
    })
}

/// The labels of every object of the run: managed, run id, store, run name, and the component.
pub(crate) fn pod_labels(info: &RunInfo) -> BTreeMap<String, String> {
    let mut labels = managed_labels(info);
    labels.insert(LABEL_COMPONENT.to_owned(), COMPONENT_SANDBOX_RUN.to_owned());
    labels
}

fn meta(name: &str, labels: BTreeMap<String, String>, owner: Option<&RunnerOwner>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        labels: Some(labels),
        owner_references: owner.map(|owner| {
            vec![OwnerReference {
                api_version: "v1".to_owned(),
                kind: "Pod".to_owned(),
                name: owner.name.clone(),
                uid: owner.uid.clone(),
                ..OwnerReference::default()
            }]
        }),
        ..ObjectMeta::default()
    }
}

/// Whether a file secret lands in the shared default dir (one file directly under it).
fn default_path_file(mount_path: &str) -> Option<&str> {
    mount_path
        .strip_prefix(KUBE_SECRETS_DIR)
        .and_then(|rest| rest.strip_prefix('/'))
        .filter(|rest| !rest.is_empty() && !rest.contains('/'))
}

fn quantities(q: &ResourceQuantities) -> Option<BTreeMap<String, KubeQuantity>> {
    let mut map = BTreeMap::new();
    if let Some(cpu) = &q.cpu {
        map.insert("cpu".to_owned(), KubeQuantity(cpu.text.clone()));
    }
    if let Some(memory) = &q.memory {
        map.insert("memory".to_owned(), KubeQuantity(memory.text.clone()));
    }
    (!map.is_empty()).then_some(map)
}

fn env_var(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        value_from: None,
    }
}

/// The container env (SANDBOX.md §5.8): the spec's, sorted by key (invalid pairs skipped and
/// returned), each file secret's `env:` path, the proxy and CA keys, `safe.directory` appended to
/// the `GIT_CONFIG_COUNT` sequence, and `ITERION_ENGINE_BIN`; later tiers win.
fn container_env(
    spec: &Spec,
    info: &RunInfo,
    pod_ip: Option<&str>,
    workspace: &str,
) -> Result<(Vec<EnvVar>, Vec<String>)> {
    let mut skipped = Vec::new();
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    for (key, value) in &spec.env {
        let bad_key = key.is_empty() || key.contains(['=', '\0', '\n', '\r']);
        if bad_key || value.contains('\0') {
            skipped.push(key.clone());
        } else {
            env.insert(key.clone(), value.clone());
        }
    }
    for secret in &spec.secret_files {
        if let Some(name) = &secret.env {
            env.insert(name.clone(), secret.mount_path.clone());
        }
    }
    iterion_sandbox::plant_proxy_env_with(&mut env, info, &[pod_ip.unwrap_or_default()]);
    let count = match env.get("GIT_CONFIG_COUNT").map(|c| c.trim()) {
        None | Some("") => 0,
        Some(count) => count.parse::<u32>().map_err(|_| Error::InvalidSpec {
            field: "env.GIT_CONFIG_COUNT".to_owned(),
            reason: "not a non-negative integer; safe.directory cannot be appended".to_owned(),
        })?,
    };
    env.insert(
        format!("GIT_CONFIG_KEY_{count}"),
        "safe.directory".to_owned(),
    );
    env.insert(format!("GIT_CONFIG_VALUE_{count}"), workspace.to_owned());
    env.insert("GIT_CONFIG_COUNT".to_owned(), (count + 1).to_string());
    env.insert("ITERION_ENGINE_BIN".to_owned(), KUBE_ENGINE_BIN.to_owned());
    Ok((env.iter().map(|(k, v)| env_var(k, v)).collect(), skipped))
}

/// Renders the run's objects (SANDBOX.md §5.7–§5.10). Pure.
///
/// # Errors
///
/// [`Error::InvalidSpec`] for a non-numeric user (the spec was not validated) or a malformed
/// `GIT_CONFIG_COUNT`; [`Error::InvalidSetting`] when a proxy is active and `pod_ip` is unknown
/// (fail closed: no NetworkPolicy could be written).
pub(crate) fn pod_plan(inputs: &PodInputs<'_>) -> Result<PodPlan> {
    let PodInputs {
        spec,
        image,
        info,
        owner,
        pod_ip,
        scheduling,
        mounts,
        git_dir,
    } = *inputs;
    let name = pod_name(&info.run_id);
    let labels = pod_labels(info);
    let workspace = match spec.workspace_folder.as_deref() {
        Some(folder) => folder.to_owned(),
        None => info
            .workspace_path
            .to_str()
            .map(str::to_owned)
            .ok_or_else(|| Error::InvalidSpec {
                field: "workspace_path".to_owned(),
                reason: format!("{} is not valid UTF-8", info.workspace_path.display()),
            })?,
    };
    let user = spec
        .user
        .as_deref()
        .and_then(parse_numeric_user)
        .ok_or_else(|| Error::KubernetesRefused {
            rule: KubernetesRule::UserNotNumeric,
        })?;
    let gid = user.gid_or_default();

    let mut volumes = vec![Volume {
        name: "workspace".to_owned(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    }];
    let mut volume_mounts = vec![VolumeMount {
        name: "workspace".to_owned(),
        mount_path: workspace.clone(),
        ..VolumeMount::default()
    }];
    if let Some(git_dir) = git_dir {
        volumes.push(Volume {
            name: WORKTREE_GIT_VOLUME.to_owned(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Volume::default()
        });
        volume_mounts.push(VolumeMount {
            name: WORKTREE_GIT_VOLUME.to_owned(),
            mount_path: git_dir.to_owned(),
            ..VolumeMount::default()
        });
    }
    for (index, mount) in mounts.iter().enumerate() {
        let volume_name = mount_volume_name(index, &mount.source);
        let items = mount.key.as_ref().map(|key| {
            vec![KeyToPath {
                key: key.clone(),
                path: key.clone(),
                mode: None,
            }]
        });
        let mut volume = Volume {
            name: volume_name.clone(),
            ..Volume::default()
        };
        match mount.kind {
            KubeMountKind::Pvc => {
                volume.persistent_volume_claim = Some(PersistentVolumeClaimVolumeSource {
                    claim_name: mount.source.clone(),
                    read_only: mount.read_only.then_some(true),
                });
            }
            KubeMountKind::ConfigMap => {
                volume.config_map = Some(ConfigMapVolumeSource {
                    name: mount.source.clone(),
                    items,
                    ..ConfigMapVolumeSource::default()
                });
            }
            KubeMountKind::Secret => {
                volume.secret = Some(SecretVolumeSource {
                    secret_name: Some(mount.source.clone()),
                    default_mode: Some(SECRET_MODE),
                    items,
                    ..SecretVolumeSource::default()
                });
            }
        }
        volumes.push(volume);
        volume_mounts.push(VolumeMount {
            name: volume_name,
            mount_path: mount.target.clone(),
            read_only: mount.read_only.then_some(true),
            sub_path: mount.key.clone(),
            ..VolumeMount::default()
        });
    }

    let secret_files = secret_files_secret(&name, &spec.secret_files, info, owner);
    let mut default_items = Vec::new();
    let mut custom_mounts = Vec::new();
    for (index, secret) in spec.secret_files.iter().enumerate() {
        let key = secret_data_key(index, &secret.name);
        match default_path_file(&secret.mount_path) {
            Some(file) => default_items.push(KeyToPath {
                key,
                path: file.to_owned(),
                mode: None,
            }),
            None => custom_mounts.push(VolumeMount {
                name: "iterion-secret-files-custom".to_owned(),
                mount_path: secret.mount_path.clone(),
                read_only: Some(true),
                sub_path: Some(key),
                ..VolumeMount::default()
            }),
        }
    }
    let secret_volume = |volume: &str, items: Option<Vec<KeyToPath>>| Volume {
        name: volume.to_owned(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret_files_name(&name)),
            default_mode: Some(SECRET_MODE),
            items,
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    };
    if !default_items.is_empty() {
        volumes.push(secret_volume("iterion-secret-files", Some(default_items)));
        volume_mounts.push(VolumeMount {
            name: "iterion-secret-files".to_owned(),
            mount_path: KUBE_SECRETS_DIR.to_owned(),
            read_only: Some(true),
            ..VolumeMount::default()
        });
    }
    if !custom_mounts.is_empty() {
        volumes.push(secret_volume("iterion-secret-files-custom", None));
        volume_mounts.extend(custom_mounts);
    }

    let ca = info.proxy_ca_pem.as_ref().map(|pem| Secret {
        metadata: meta(&ca_secret_name(&name), labels.clone(), owner),
        data: Some(BTreeMap::from([(
            CA_KEY.to_owned(),
            ByteString(pem.as_bytes().to_vec()),
        )])),
        type_: Some("Opaque".to_owned()),
        ..Secret::default()
    });
    if ca.is_some() {
        volumes.push(Volume {
            name: "iterion-egress-ca".to_owned(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(ca_secret_name(&name)),
                default_mode: Some(0o444),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        });
        volume_mounts.push(VolumeMount {
            name: "iterion-egress-ca".to_owned(),
            mount_path: KUBE_CA_DIR.to_owned(),
            read_only: Some(true),
            ..VolumeMount::default()
        });
    }

    let (env, skipped_env) = container_env(spec, info, pod_ip, &workspace)?;
    let resources = (!scheduling.requests.is_empty() || !scheduling.limits.is_empty()).then(|| {
        ResourceRequirements {
            requests: quantities(&scheduling.requests),
            limits: quantities(&scheduling.limits),
            ..ResourceRequirements::default()
        }
    });
    let spread = scheduling.spread.as_ref().map(|key| {
        vec![TopologySpreadConstraint {
            max_skew: 1,
            topology_key: key.clone(),
            when_unsatisfiable: "ScheduleAnyway".to_owned(),
            label_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(
                    LABEL_COMPONENT.to_owned(),
                    COMPONENT_SANDBOX_RUN.to_owned(),
                )])),
                ..LabelSelector::default()
            }),
            ..TopologySpreadConstraint::default()
        }]
    });
    let pull_policy = if image.contains("@sha256:") {
        "IfNotPresent"
    } else {
        "Always"
    };
    let container = Container {
        name: WORKLOAD_CONTAINER.to_owned(),
        image: Some(image.to_owned()),
        image_pull_policy: Some(pull_policy.to_owned()),
        command: Some(vec!["sleep".to_owned(), "infinity".to_owned()]),
        working_dir: Some(workspace.clone()),
        env: Some(env),
        volume_mounts: Some(volume_mounts),
        resources,
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            capabilities: Some(KubeCapabilities {
                drop: Some(vec!["ALL".to_owned()]),
                add: None,
            }),
            run_as_non_root: Some(true),
            run_as_user: Some(user.uid),
            run_as_group: Some(gid),
            ..SecurityContext::default()
        }),
        ..Container::default()
    };
    let pod = Pod {
        metadata: meta(&name, labels.clone(), owner),
        spec: Some(PodSpec {
            restart_policy: Some("Never".to_owned()),
            automount_service_account_token: Some(false),
            active_deadline_seconds: (info.max_duration_seconds > 0).then(|| {
                i64::try_from(
                    info.max_duration_seconds
                        .saturating_add(DEADLINE_MARGIN_SECONDS),
                )
                .unwrap_or(i64::MAX)
            }),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                seccomp_profile: Some(SeccompProfile {
                    type_: "RuntimeDefault".to_owned(),
                    localhost_profile: None,
                }),
                fs_group: Some(gid),
                ..PodSecurityContext::default()
            }),
            topology_spread_constraints: spread,
            containers: vec![container],
            volumes: Some(volumes),
            ..PodSpec::default()
        }),
        status: None,
    };

    let network_policy = match (&info.proxy, pod_ip) {
        (None, _) => None,
        (Some(_), None) => {
            return Err(Error::InvalidSetting {
                variable: "ITERION_POD_IP",
                value: String::new(),
                want: "the runner pod's IP (downward API status.podIP) when a proxy is active",
            });
        }
        (Some(_), Some(ip)) => Some(network_policy(&name, info, ip, owner)),
    };
    Ok(PodPlan {
        pod_name: name,
        workspace_folder: workspace,
        secret_files,
        ca,
        pod,
        network_policy,
        skipped_env,
    })
}

/// The run's NetworkPolicy (SANDBOX.md §5.10): the pod may talk to the runner pod only, on every
/// port, and only the runner pod may talk to it. No DNS rule (our decision 3): the proxy
/// resolves.
fn network_policy(
    pod: &str,
    info: &RunInfo,
    runner_ip: &str,
    owner: Option<&RunnerOwner>,
) -> NetworkPolicy {
    let peer = || {
        vec![NetworkPolicyPeer {
            ip_block: Some(IPBlock {
                cidr: format!("{runner_ip}/32"),
                except: None,
            }),
            ..NetworkPolicyPeer::default()
        }]
    };
    NetworkPolicy {
        metadata: meta(pod, managed_labels(info), owner),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(
                    LABEL_RUN_ID.to_owned(),
                    info.run_id.clone(),
                )])),
                ..LabelSelector::default()
            }),
            policy_types: Some(vec!["Egress".to_owned(), "Ingress".to_owned()]),
            egress: Some(vec![NetworkPolicyEgressRule {
                to: Some(peer()),
                ports: None,
            }]),
            ingress: Some(vec![NetworkPolicyIngressRule {
                from: Some(peer()),
                ports: None,
            }]),
        }),
    }
}

#[cfg(test)]
#[path = "manifest_tests.rs"]
mod tests;
