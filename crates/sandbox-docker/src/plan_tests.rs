//! The pure plans and their rendering, as whole values and snapshots.

use std::collections::BTreeMap;
use std::path::PathBuf;

use iterion_sandbox::{
    Build, EngineMount, EngineMountKind, Mode, ProxyAttachment, RunInfo, ScreenedMount, Spec,
    Trust, parse_mount,
};
use pretty_assertions::assert_eq;

use super::*;
use crate::plan::{
    CreateInputs, CreatePlan, ExecInputs, ExecPlan, HOST_ALIAS, SCRIPT_STDIN_THRESHOLD,
    build_paths, build_request, create_plan, exec_plan,
};
use crate::render::{render_build, render_exec, render_rm, render_run, shell_quote};
use crate::secrets::{SecretPlan, secret_plan};

fn info() -> RunInfo {
    let mut info = RunInfo::new(
        "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
        "store-1",
        "/work/project",
        "/run/user/1000/iterion/0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
    );
    info.friendly_name = "nightly fix/lint".to_owned();
    info
}

fn spec() -> Spec {
    Spec {
        mode: Mode::Inline,
        image: Some("iterion-test/busybox:1".to_owned()),
        tmpfs: vec!["/tmp:size=64m".to_owned(), "/scratch".to_owned()],
        env: BTreeMap::from([
            ("LANG".to_owned(), "C.UTF-8".to_owned()),
            ("ALL_PROXY".to_owned(), "socks5://example:1080".to_owned()),
        ]),
        user: Some("1000:1000".to_owned()),
        engine_mounts: vec![EngineMount {
            kind: EngineMountKind::Bind,
            source: "/usr/local/bin/iterion".to_owned(),
            target: "/run/iterion/bin/iterion".to_owned(),
            read_only: true,
            purpose: "engine-binary".to_owned(),
        }],
        ..Spec::default()
    }
}

fn screened(mount: &str, host_source: Option<&str>) -> ScreenedMount {
    ScreenedMount {
        raw: mount.to_owned(),
        spec: parse_mount(mount).unwrap(),
        host_source: host_source.map(PathBuf::from),
    }
}

fn author_mounts() -> Vec<ScreenedMount> {
    vec![
        screened(
            "source=./cache,target=/cache,ro,bind-propagation=rprivate",
            Some("/work/project/cache"),
        ),
        screened("type=volume,source=deps,target=/deps,volume-nocopy", None),
        screened(
            "type=tmpfs,target=/fast,tmpfs-size=1048576,tmpfs-mode=1777",
            None,
        ),
    ]
}

fn plan_for(engine: EngineKind, spec: &Spec, info: &RunInfo) -> CreatePlan {
    plan_with_secrets(engine, spec, info, &SecretPlan::default())
}

fn plan_with_secrets(
    engine: EngineKind,
    spec: &Spec,
    info: &RunInfo,
    secrets: &SecretPlan,
) -> CreatePlan {
    let mounts = author_mounts();
    let labels = BTreeMap::from([
        ("iterion.io/test-id".to_owned(), "t1".to_owned()),
        // An extra label never overrides the run's own.
        ("iterion.io/run-id".to_owned(), "forged".to_owned()),
    ]);
    create_plan(&CreateInputs {
        engine,
        image: "iterion-test/busybox:1",
        spec,
        info,
        author_mounts: &mounts,
        nix_volume: Some("iterion-nix-0123456789ab"),
        extra_labels: &labels,
        secrets,
    })
    .unwrap()
}

fn snapshot_settings() -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_sort_maps(true);
    settings.set_snapshot_path("snapshots");
    settings.set_prepend_module_to_snapshot(false);
    settings
}

#[test]
fn the_docker_create_body_is_pinned() {
    let plan = plan_for(EngineKind::Docker, &spec(), &info());
    assert_eq!(plan.name, "iterion-0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b");
    snapshot_settings().bind(|| insta::assert_json_snapshot!("create_body_docker", plan.body));
    snapshot_settings().bind(|| {
        insta::assert_snapshot!("run_line_docker", render_run(EngineKind::Docker, &plan));
    });
}

#[test]
fn a_proxied_run_has_no_network_and_reaches_the_proxy_through_its_sockets() {
    let mut info = info();
    info.proxy = Some(ProxyAttachment {
        endpoint: "http://t:s3cr3t-token@127.0.0.1:3128".to_owned(),
        host_socket: Some(info.run_dir.join("net/proxy.sock")),
        port: Some(3128),
    });
    info.listener_planned = true;
    info.proxy_ca_pem = Some("-----BEGIN CERTIFICATE-----".to_owned());
    info.no_proxy_extra = Some("10.0.0.7".to_owned());
    // File secrets bind read-only, and their env wins over the spec's but not over the proxy's.
    let secret = |name: &str, path: &str, env: &str| iterion_sandbox::SecretFileMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        env: Some(env.to_owned()),
        value: "never-in-the-body".into(),
    };
    let secrets = secret_plan(
        &[
            secret("GH_TOKEN", "/run/iterion/secrets/GH_TOKEN", "LANG"),
            secret("KUBECONFIG", "/home/user/.kube/config", "HTTPS_PROXY"),
        ],
        &info.run_dir,
        Some("1000:1000"),
        0,
    );
    let plan = plan_with_secrets(EngineKind::Podman, &spec(), &info, &secrets);
    assert!(
        !serde_json::to_string(&plan.body)
            .unwrap()
            .contains("never-in-the-body")
    );
    snapshot_settings()
        .bind(|| insta::assert_json_snapshot!("create_body_podman_proxied", plan.body));
    let line = render_run(EngineKind::Podman, &plan);
    assert_eq!(
        (
            line.contains("s3cr3t-token"),
            line.contains("t:***@127.0.0.1:3128")
        ),
        (false, true)
    );
    snapshot_settings().bind(|| insta::assert_snapshot!("run_line_podman_proxied", line));
}

#[test]
fn a_planned_listener_binds_the_net_dir_without_a_proxy_too() {
    let net_bound = |listener: bool| {
        let mut info = info();
        info.listener_planned = listener;
        let plan = plan_for(EngineKind::Docker, &Spec::default(), &info);
        plan.body
            .host_config
            .unwrap()
            .mounts
            .unwrap()
            .iter()
            .filter(|m| m.target.as_deref() == Some("/run/iterion/net"))
            .map(|m| (m.source.clone().unwrap(), m.read_only))
            .collect::<Vec<_>>()
    };
    let net = info().run_dir.join("net").to_string_lossy().into_owned();
    assert_eq!(
        (net_bound(false), net_bound(true)),
        (vec![], vec![(net, Some(true))])
    );
}

#[test]
fn the_host_alias_is_added_only_for_a_planned_listener_without_a_proxy() {
    let alias = |listener: bool, proxy: bool| {
        let mut info = info();
        info.listener_planned = listener;
        info.proxy = proxy.then(|| ProxyAttachment {
            endpoint: "http://t:x@127.0.0.1:3128".to_owned(),
            host_socket: None,
            port: None,
        });
        let plan = plan_for(EngineKind::Docker, &Spec::default(), &info);
        let host = plan.body.host_config.unwrap();
        (host.extra_hosts, host.network_mode)
    };
    assert_eq!(
        [
            alias(false, false),
            alias(true, false),
            alias(true, true),
            alias(false, true)
        ],
        [
            (None, None),
            (Some(vec![HOST_ALIAS.to_owned()]), None),
            (None, Some("none".to_owned())),
            (None, Some("none".to_owned())),
        ]
    );
}

#[test]
fn the_workspace_folder_overrides_same_path_binding() {
    let spec = Spec {
        workspace_folder: Some("/workspace".to_owned()),
        ..Spec::default()
    };
    let plan = plan_for(EngineKind::Docker, &spec, &info());
    let first_mount = plan
        .body
        .host_config
        .and_then(|h| h.mounts)
        .and_then(|m| m.into_iter().next())
        .unwrap();
    assert_eq!(
        (
            plan.body.working_dir.as_deref(),
            first_mount.source.as_deref(),
            first_mount.target.as_deref(),
            first_mount.read_only
        ),
        (
            Some("/workspace"),
            Some("/work/project"),
            Some("/workspace"),
            Some(false)
        )
    );
}

#[test]
fn a_bind_without_a_screened_source_is_refused_not_bound() {
    let mounts = vec![screened("source=./x,target=/x", None)];
    let error = create_plan(&CreateInputs {
        engine: EngineKind::Docker,
        image: "i",
        spec: &Spec::default(),
        info: &info(),
        author_mounts: &mounts,
        nix_volume: None,
        extra_labels: &BTreeMap::new(),
        secrets: &SecretPlan::default(),
    })
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "sandbox: invalid spec: mounts: bind mount to /x has no screened source"
    );
}

fn exec_inputs<'a>(argv: &'a [String], env: &'a [(String, String)]) -> ExecInputs<'a> {
    ExecInputs {
        argv,
        env,
        workdir: None,
        user: None,
        workspace_folder: "/work/project",
        spec_user: Some("1000"),
        has_stdin: false,
        keep_stdin_open: false,
    }
}

#[test]
fn an_exec_keeps_valid_env_pairs_and_skips_the_others() {
    let argv = vec!["env".to_owned()];
    let env: Vec<(String, String)> = [
        ("A", "1"),
        ("", "empty key"),
        ("B=C", "eq"),
        ("D", "line\nbreak"),
        ("E", ""),
        ("F\r", "cr"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    assert_eq!(
        exec_plan(&exec_inputs(&argv, &env)),
        ExecPlan {
            request: ExecRequest {
                cmd: argv.clone(),
                env: vec!["A=1".to_owned(), "E=".to_owned()],
                working_dir: Some("/work/project".to_owned()),
                user: Some("1000".to_owned()),
                attach_stdin: false,
            },
            stdin_script: None,
            skipped_env: vec![
                String::new(),
                "B=C".to_owned(),
                "D".to_owned(),
                "F\r".to_owned()
            ],
        }
    );
}

#[test]
fn a_long_shell_script_goes_through_stdin_and_a_short_one_through_argv() {
    let long = "echo hi\n".repeat(SCRIPT_STDIN_THRESHOLD / 8 + 1);
    let plan = |shell: &str, script: &str, has_stdin: bool| {
        let argv = vec![shell.to_owned(), "-c".to_owned(), script.to_owned()];
        let plan = exec_plan(&ExecInputs {
            has_stdin,
            ..exec_inputs(&argv, &[])
        });
        (
            plan.request
                .cmd
                .iter()
                .map(|a| a.len().min(8))
                .collect::<Vec<_>>(),
            plan.request.attach_stdin,
            plan.stdin_script.map(|s| s.len()),
        )
    };
    assert_eq!(
        [
            plan("sh", &long, false),
            plan("bash", &long, false),
            plan("sh", &long, true),
            plan("zsh", &long, false),
            plan("sh", "echo short", false),
        ],
        [
            (vec![2, 2], true, Some(long.len())),
            (vec![4, 2], true, Some(long.len())),
            (vec![2, 2, 8], true, None),
            (vec![3, 2, 8], false, None),
            (vec![2, 2, 8], false, None),
        ]
    );
}

#[test]
fn exec_options_override_the_workspace_and_the_spec_user() {
    let argv = vec!["id".to_owned()];
    let plan = exec_plan(&ExecInputs {
        workdir: Some("/tmp"),
        user: Some("0:0"),
        keep_stdin_open: true,
        ..exec_inputs(&argv, &[])
    });
    assert_eq!(
        plan.request,
        ExecRequest {
            cmd: argv,
            env: vec![],
            working_dir: Some("/tmp".to_owned()),
            user: Some("0:0".to_owned()),
            attach_stdin: true,
        }
    );
}

#[test]
fn exec_and_cleanup_lines_read_like_the_cli() {
    let request = ExecRequest {
        cmd: vec![
            "sh".to_owned(),
            "-c".to_owned(),
            "echo 'a b'\nexit 3".to_owned(),
        ],
        env: vec![
            "HTTPS_PROXY=http://t:tok@127.0.0.1:3128".to_owned(),
            "X=a b".to_owned(),
        ],
        working_dir: Some("/work/project".to_owned()),
        user: Some("1000".to_owned()),
        attach_stdin: true,
    };
    assert_eq!(
        [
            render_exec(EngineKind::Docker, "abc123", &request),
            render_rm(EngineKind::Podman, "abc123"),
        ],
        [
            "docker exec --interactive --user 1000 --workdir /work/project --env 'HTTPS_PROXY=http://t:***@127.0.0.1:3128' --env 'X=a b' abc123 sh -c $'echo \\'a b\\'\\nexit 3'",
            "podman rm --force abc123",
        ]
    );
}

#[test]
fn the_build_line_names_the_dockerfile_tag_args_and_context() {
    let mut info = info();
    info.trust = Trust::Untrusted;
    let build = Build {
        dockerfile: "docker/Dockerfile".to_owned(),
        context: None,
        args: BTreeMap::from([
            ("Z".to_owned(), "last".to_owned()),
            ("A".to_owned(), "first one".to_owned()),
        ]),
    };
    assert_eq!(
        build_paths(&build),
        ("docker/Dockerfile".to_owned(), "docker".to_owned())
    );
    let request = build_request(
        &build,
        "Dockerfile",
        &info,
        "iterion-sandbox-build:0190a1b2",
        &BTreeMap::new(),
    );
    assert_eq!(
        render_build(EngineKind::Docker, &request, "docker"),
        "docker build -f Dockerfile -t iterion-sandbox-build:0190a1b2 --network none \
         --label iterion.io/managed=true --label iterion.io/run-id=0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b \
         --label iterion.io/run-name=nightly-fix-lint --label iterion.io/store=store-1 \
         --build-arg 'A=first one' --build-arg Z=last docker"
    );
}

#[test]
fn shell_quoting_keeps_one_operation_on_one_line() {
    let got: Vec<String> = [
        "plain-arg_1.2:3",
        "",
        "it's",
        "a b",
        "tab\there",
        "\u{1b}[31m",
    ]
    .iter()
    .map(|a| shell_quote(a))
    .collect();
    assert_eq!(
        got,
        vec![
            "plain-arg_1.2:3",
            "''",
            "'it'\\''s'",
            "'a b'",
            "$'tab\\there'",
            "$'\\u001b[31m'",
        ]
    );
}

#[test]
fn endpoints_follow_the_hosts_variables() {
    let vars = |docker: Option<&str>, container: Option<&str>, xdg: Option<&str>| EndpointVars {
        docker_host: docker.map(str::to_owned),
        container_host: container.map(str::to_owned),
        xdg_runtime_dir: xdg.map(str::to_owned),
    };
    let both = |v: &EndpointVars| {
        (
            endpoints_for(EngineKind::Docker, v),
            endpoints_for(EngineKind::Podman, v),
        )
    };
    assert_eq!(
        [
            both(&vars(None, None, None)),
            both(&vars(None, None, Some("/run/user/1000"))),
            both(&vars(None, None, Some("relative"))),
            both(&vars(
                Some("tcp://127.0.0.1:2375"),
                None,
                Some("/run/user/1000")
            )),
            both(&vars(None, Some("unix:///p.sock"), None)),
            both(&vars(Some(""), None, None)),
        ],
        [
            (
                vec!["unix:///var/run/docker.sock".to_owned()],
                vec!["unix:///run/podman/podman.sock".to_owned()]
            ),
            (
                vec![
                    "unix:///var/run/docker.sock".to_owned(),
                    "unix:///run/user/1000/docker.sock".to_owned()
                ],
                vec![
                    "unix:///run/user/1000/podman/podman.sock".to_owned(),
                    "unix:///run/podman/podman.sock".to_owned()
                ]
            ),
            (
                vec!["unix:///var/run/docker.sock".to_owned()],
                vec!["unix:///run/podman/podman.sock".to_owned()]
            ),
            (vec!["tcp://127.0.0.1:2375".to_owned()], vec![]),
            (vec![], vec!["unix:///p.sock".to_owned()]),
            (
                vec!["unix:///var/run/docker.sock".to_owned()],
                vec!["unix:///run/podman/podman.sock".to_owned()]
            ),
        ]
    );
}

#[test]
fn podman_is_named_by_its_version_components() {
    assert_eq!(
        [
            EngineKind::from_version_components(["Engine", "containerd", "runc"]),
            EngineKind::from_version_components(["Podman Engine", "Conmon"]),
            EngineKind::from_version_components([]),
        ],
        [EngineKind::Docker, EngineKind::Podman, EngineKind::Docker]
    );
}

#[test]
fn registry_errors_that_mean_no_such_image_allow_the_fallback() {
    let errors = [
        ApiError::NotFound {
            message: "x".to_owned(),
        },
        ApiError::Unauthorized {
            message: "x".to_owned(),
        },
        ApiError::Stream {
            message: "manifest unknown: manifest unknown".to_owned(),
        },
        ApiError::Stream {
            message: "Get \"https://unreachable.invalid/v2/\": dial tcp: no such host".to_owned(),
        },
        ApiError::Transport {
            message: "reset".to_owned(),
        },
        ApiError::Status {
            status: 500,
            message: "not found".to_owned(),
        },
    ];
    assert_eq!(
        errors
            .iter()
            .map(ApiError::is_image_unavailable)
            .collect::<Vec<_>>(),
        vec![true, true, true, false, false, false]
    );
}

#[test]
fn the_operators_limits_go_into_the_host_config_and_an_untrusted_pids_limit_stays_capped() {
    let mut limited = spec();
    limited.limits = iterion_sandbox::Limits::parse(Some("64m"), Some("0.5"), Some("100")).unwrap();
    let plan = plan_for(EngineKind::Docker, &limited, &info());
    let host = plan.body.host_config.clone().unwrap();
    assert_eq!(
        (
            host.memory,
            host.memory_swap,
            host.nano_cpus,
            host.pids_limit
        ),
        (Some(64 << 20), Some(64 << 20), Some(500_000_000), Some(100))
    );
    let line = render_run(EngineKind::Docker, &plan);
    assert!(
        line.contains(
            "--memory 67108864b --memory-swap 67108864b --cpus 0.500000000 --pids-limit 100"
        ),
        "{line}"
    );
    // Untrusted: the operator's pids limit only lowers the untrusted cap, never raises it.
    let mut untrusted = info();
    untrusted.trust = Trust::Untrusted;
    limited.limits.pids = Some(1_000_000);
    let host = plan_for(EngineKind::Docker, &limited, &untrusted)
        .body
        .host_config
        .unwrap();
    assert_eq!(host.pids_limit, Some(crate::plan::UNTRUSTED_PIDS_LIMIT));
    limited.limits.pids = Some(50);
    let host = plan_for(EngineKind::Docker, &limited, &untrusted)
        .body
        .host_config
        .unwrap();
    assert_eq!(host.pids_limit, Some(50));
    // No limit set: nothing in the host config (a trusted run keeps the engine's defaults).
    let host = plan_for(EngineKind::Docker, &spec(), &info())
        .body
        .host_config
        .unwrap();
    assert_eq!(
        (host.memory, host.nano_cpus, host.pids_limit),
        (None, None, None)
    );
}

#[test]
fn the_exec_agent_as_pid_1_is_attached_and_the_fallback_idles() {
    let mut with_agent = spec();
    with_agent.exec_agent = Some("/run/iterion/bin/iterion".to_owned());
    let plan = plan_for(EngineKind::Docker, &with_agent, &info());
    assert_eq!(
        (
            plan.body.entrypoint.clone(),
            plan.body.cmd.clone(),
            plan.body.open_stdin,
            plan.body.stdin_once,
        ),
        (
            Some(vec!["/run/iterion/bin/iterion".to_owned()]),
            Some(vec!["__exec-agent".to_owned()]),
            Some(true),
            Some(true),
        )
    );
    assert!(crate::plan::runs_agent(&plan.body));
    let line = render_run(EngineKind::Docker, &plan);
    assert!(
        line.starts_with("docker run --detach --interactive --rm --log-driver none"),
        "{line}"
    );
    let mut idle = plan.body.clone();
    crate::plan::idle_command(&mut idle);
    assert_eq!(idle, plan_for(EngineKind::Docker, &spec(), &info()).body);
}
