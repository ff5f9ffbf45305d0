use iterion_sandbox::{Mode, ProxyAttachment, SecretBytes, SecretFileMount};
use pretty_assertions::assert_eq;

use super::*;

fn info() -> RunInfo {
    let mut info = RunInfo::new(
        "019300aa-bbbb-7ccc-8ddd-eeeeffff0001",
        "store-1",
        "/work/repo",
        "/tmp/runs/r1",
    );
    info.friendly_name = "nightly build".to_owned();
    info
}

fn spec() -> Spec {
    Spec {
        mode: Mode::Inline,
        image: Some("ghcr.io/iterion/sandbox:1".to_owned()),
        user: Some("1001".to_owned()),
        env: BTreeMap::from([
            ("LANG".to_owned(), "C.UTF-8".to_owned()),
            ("ALL_PROXY".to_owned(), "socks5://elsewhere".to_owned()),
            ("BAD=KEY".to_owned(), "x".to_owned()),
        ]),
        ..Spec::default()
    }
}

fn plan(spec: &Spec, info: &RunInfo, pod_ip: Option<&str>, mounts: &[KubeMount]) -> PodPlan {
    let owner = RunnerOwner {
        name: "iterion-runner-5d9c".to_owned(),
        uid: "0f4c-uid".to_owned(),
    };
    let scheduling = SchedulingPolicy::parse(&crate::scheduling::SchedulingInputs {
        requests_cpu: Some("500m".to_owned()),
        requests_memory: Some("1Gi".to_owned()),
        limits_memory: Some("2Gi".to_owned()),
        spread: Some("hostname".to_owned()),
        ..Default::default()
    })
    .unwrap();
    pod_plan(&PodInputs {
        spec,
        image: spec.image.as_deref().unwrap(),
        info,
        owner: Some(&owner),
        pod_ip,
        scheduling: &scheduling,
        mounts,
        git_dir: None,
    })
    .unwrap()
}

fn json<T: serde::Serialize>(value: &T) -> serde_json::Value {
    serde_json::to_value(value).unwrap()
}

#[test]
fn the_plain_pod_manifest_is_pinned() {
    let plan = plan(&spec(), &info(), None, &[]);
    assert_eq!(
        (
            plan.secret_files.is_none(),
            plan.ca.is_none(),
            plan.network_policy.is_none()
        ),
        (true, true, true)
    );
    assert_eq!(plan.skipped_env, vec!["BAD=KEY".to_owned()]);
    insta::assert_json_snapshot!("pod_plain", json(&plan.pod));
}

#[test]
fn a_proxied_run_with_secrets_ca_mounts_and_a_deadline_is_pinned() {
    let mut spec = spec();
    spec.user = Some("1001:2002".to_owned());
    spec.workspace_folder = Some("/workspaces/repo".to_owned());
    spec.image = Some("ghcr.io/iterion/sandbox@sha256:abcd".to_owned());
    spec.env
        .insert("GIT_CONFIG_COUNT".to_owned(), "2".to_owned());
    spec.secret_files = vec![
        SecretFileMount {
            name: "GH_TOKEN".to_owned(),
            mount_path: "/run/iterion/secrets/GH_TOKEN".to_owned(),
            env: Some("GH_TOKEN_FILE".to_owned()),
            value: SecretBytes::from("ghp_not_in_the_snapshot"),
        },
        SecretFileMount {
            name: "kube config".to_owned(),
            mount_path: "/home/dev/.kube/config".to_owned(),
            env: None,
            value: SecretBytes::from("apiVersion: v1"),
        },
    ];
    let mut info = info();
    info.max_duration_seconds = 3600;
    info.proxy = Some(ProxyAttachment {
        endpoint: "http://t:TOKEN@10.1.2.3:40111".to_owned(),
        host_socket: None,
        port: Some(40111),
    });
    info.proxy_ca_pem =
        Some("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n".to_owned());
    let mounts = [
        crate::mounts::parse_kube_mount("type=pvc,source=Cache_Claim,target=/cache").unwrap(),
        crate::mounts::parse_kube_mount(
            "type=configmap,source=settings,target=/etc/app.toml,key=app.toml,ro",
        )
        .unwrap(),
        crate::mounts::parse_kube_mount("type=secret,source=creds,target=/run/creds,ro").unwrap(),
    ];
    let plan = plan(&spec, &info, Some("10.1.2.3"), &mounts);
    let secret = plan.secret_files.clone().unwrap();
    // The values are in the Secret (that is its job), base64 on the wire, never in the pod.
    assert_eq!(
        secret
            .data
            .as_ref()
            .unwrap()
            .keys()
            .cloned()
            .collect::<Vec<_>>(),
        vec![
            "secret-0-GH_TOKEN".to_owned(),
            "secret-1-kube-config".to_owned()
        ]
    );
    let pod_text = json(&plan.pod).to_string();
    assert!(!pod_text.contains("ghp_not_in_the_snapshot"));
    let mut secret_redacted = json(&secret);
    secret_redacted["data"] = serde_json::json!("[redacted]");
    insta::assert_json_snapshot!("pod_proxied", json(&plan.pod));
    insta::assert_json_snapshot!("secret_files", secret_redacted);
    insta::assert_json_snapshot!("secret_ca", json(&plan.ca.unwrap()));
    insta::assert_json_snapshot!("network_policy", json(&plan.network_policy.unwrap()));
}

#[test]
fn the_network_policy_has_no_dns_rule_and_only_the_runner_as_peer() {
    let mut info = info();
    info.proxy = Some(ProxyAttachment {
        endpoint: "http://t:TOKEN@10.1.2.3:40111".to_owned(),
        host_socket: None,
        port: Some(40111),
    });
    let policy = plan(&spec(), &info, Some("10.1.2.3"), &[])
        .network_policy
        .unwrap();
    let spec = policy.spec.unwrap();
    let egress = spec.egress.unwrap();
    assert_eq!(egress.len(), 1);
    assert_eq!(
        egress[0].ports, None,
        "every port of the runner, and no port 53 rule"
    );
    assert_eq!(
        json(&egress[0].to),
        serde_json::json!([{"ipBlock": {"cidr": "10.1.2.3/32"}}])
    );
}

#[test]
fn a_proxy_without_the_runner_pod_ip_fails_closed() {
    let mut info = info();
    info.proxy = Some(ProxyAttachment {
        endpoint: "http://t:TOKEN@10.1.2.3:40111".to_owned(),
        host_socket: None,
        port: Some(40111),
    });
    let spec = spec();
    let error = pod_plan(&PodInputs {
        spec: &spec,
        image: "alpine:3",
        info: &info,
        owner: None,
        pod_ip: None,
        scheduling: &SchedulingPolicy::default(),
        mounts: &[],
        git_dir: None,
    })
    .unwrap_err();
    assert_eq!(
        (
            error.code(),
            error.to_string().starts_with("ITERION_POD_IP=\"\"")
        ),
        ("SANDBOX_SETUP_FAILED", true)
    );
}

#[test]
fn a_malformed_git_config_count_is_a_hard_error() {
    let mut spec = spec();
    spec.env
        .insert("GIT_CONFIG_COUNT".to_owned(), "two".to_owned());
    let error = pod_plan(&PodInputs {
        spec: &spec,
        image: "alpine:3",
        info: &info(),
        owner: None,
        pod_ip: None,
        scheduling: &SchedulingPolicy::default(),
        mounts: &[],
        git_dir: None,
    })
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "sandbox: invalid spec: env.GIT_CONFIG_COUNT: not a non-negative integer; safe.directory cannot be appended"
    );
}

#[test]
fn pod_names_are_lowercase_dns_labels() {
    assert_eq!(
        [
            pod_name("019300AA_bbbb"),
            pod_name(&"a".repeat(80)),
            pod_name(&format!("{}_{}", "a".repeat(50), "b")),
        ],
        [
            "iterion-run-019300aa-bbbb".to_owned(),
            format!("iterion-run-{}", "a".repeat(51)),
            format!("iterion-run-{}", "a".repeat(50)),
        ]
    );
}

#[test]
fn a_gitfile_workspace_gets_an_empty_dir_at_its_git_dir() {
    let spec = spec();
    let plan = pod_plan(&PodInputs {
        spec: &spec,
        image: "alpine:3",
        info: &info(),
        owner: None,
        pod_ip: None,
        scheduling: &SchedulingPolicy::default(),
        mounts: &[],
        git_dir: Some("/home/u/repo/.git"),
    })
    .unwrap();
    let pod = json(&plan.pod);
    assert_eq!(
        (
            pod["spec"]["volumes"][1].clone(),
            pod["spec"]["containers"][0]["volumeMounts"][1].clone(),
        ),
        (
            serde_json::json!({"name": "worktree-git", "emptyDir": {}}),
            serde_json::json!({"name": "worktree-git", "mountPath": "/home/u/repo/.git"}),
        )
    );
}

#[test]
fn the_ca_secret_lands_where_the_shared_ca_variables_point() {
    assert_eq!(
        format!("{KUBE_CA_DIR}/{CA_KEY}"),
        iterion_sandbox::PROXY_CA_TARGET
    );
}
