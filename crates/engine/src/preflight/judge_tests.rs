//! Every check's statuses from values (the CLI suite drives them on a real engine).
use std::collections::BTreeMap;

use iterion_sandbox::{Build, Mode, Network, NetworkMode, NetworkOrigin, resolve_network_policy};
use iterion_sandbox_docker::EngineKind;
use pretty_assertions::assert_eq;

use super::*;

fn statuses(checks: &[Check]) -> Vec<(CheckId, CheckStatus)> {
    checks.iter().map(|c| (c.id, c.status)).collect()
}

fn image_spec(image: &str) -> Spec {
    Spec {
        mode: Mode::Inline,
        image: Some(image.to_owned()),
        ..Spec::default()
    }
}

fn version(kind: EngineKind, version: &str) -> EngineVersion {
    EngineVersion {
        kind,
        version: version.to_owned(),
        api_version: "1.41".to_owned(),
        arch: "amd64".to_owned(),
    }
}

#[test]
fn a_missing_driver_fails_unless_the_target_or_an_empty_registry_relaxes_it() {
    let miss = || DriverMiss::Unavailable {
        obstacle: "no container-runtime driver available (tried: docker: gone)".to_owned(),
        hint: "install and start Docker".to_owned(),
    };
    let checks = [
        driver_available(Ok("docker"), "auto", false),
        driver_available(Err(miss()), "auto", false),
        driver_available(Err(miss()), "inline", true),
        driver_available(Err(DriverMiss::TimedOut("1s".to_owned())), "auto", false),
    ];
    assert_eq!(
        statuses(&checks),
        vec![
            (CheckId::DriverAvailable, CheckStatus::Pass),
            (CheckId::DriverAvailable, CheckStatus::Fail),
            (CheckId::DriverAvailable, CheckStatus::Warn),
            (CheckId::DriverAvailable, CheckStatus::Fail),
        ]
    );
    assert_eq!(
        (checks[1].remediation.as_str(), checks[3].summary.as_str()),
        (
            "install and start Docker, or pass --sandbox none to run on the host",
            "driver selection did not finish within 1s: an engine does not answer"
        )
    );
}

#[test]
fn spec_valid_is_spec_validate() {
    let inline_without_image = Spec {
        mode: Mode::Inline,
        ..Spec::default()
    };
    assert_eq!(
        statuses(&[
            spec_valid(&image_spec("a:1")),
            spec_valid(&inline_without_image)
        ]),
        vec![
            (CheckId::SpecValid, CheckStatus::Pass),
            (CheckId::SpecValid, CheckStatus::Fail),
        ]
    );
}

#[test]
fn the_daemon_passes_locally_warns_remotely_and_fails_without_a_version_or_an_answer() {
    let v = version(EngineKind::Docker, "20.10.24");
    let empty = version(EngineKind::Docker, "");
    let checks = [
        docker_daemon(Ok(("unix:///var/run/docker.sock", &v))),
        docker_daemon(Ok(("tcp://10.1.2.3:2375", &v))),
        docker_daemon(Ok(("unix:///var/run/docker.sock", &empty))),
        docker_daemon(Err("unix:///x.sock: no answer within 1s")),
    ];
    assert_eq!(
        statuses(&checks),
        vec![
            (CheckId::DockerDaemon, CheckStatus::Pass),
            (CheckId::DockerDaemon, CheckStatus::Warn),
            (CheckId::DockerDaemon, CheckStatus::Fail),
            (CheckId::DockerDaemon, CheckStatus::Fail),
        ]
    );
    assert_eq!(
        checks[0].summary,
        "docker 20.10.24 (API 1.41) at unix:///var/run/docker.sock"
    );
}

#[test]
fn the_image_passes_built_or_present_fails_when_it_cannot_be_pulled_and_warns_without_an_engine() {
    let absent = |registry: Registry, fallback: Option<(String, Registry)>| ImageFinding::Absent {
        image: "r.example/a:1".to_owned(),
        registry,
        fallback,
    };
    let unknown = || Registry::Unknown("manifest unknown".to_owned());
    let findings = [
        ImageFinding::Built {
            dockerfile: "Dockerfile".to_owned(),
        },
        ImageFinding::Present {
            image: "a:1".to_owned(),
        },
        absent(Registry::Known, None),
        absent(unknown(), None),
        absent(Registry::Refused("denied".to_owned()), None),
        absent(Registry::Unreachable("no such host".to_owned()), None),
        absent(unknown(), Some(("f:latest".to_owned(), Registry::Known))),
        absent(unknown(), Some(("f:latest".to_owned(), unknown()))),
        absent(
            unknown(),
            Some(("f:latest".to_owned(), Registry::Unreachable("x".to_owned()))),
        ),
        ImageFinding::NoEngine {
            image: "a:1".to_owned(),
        },
        ImageFinding::Missing,
    ];
    let got: Vec<CheckStatus> = findings
        .iter()
        .map(|f| image_resolvable(f).status)
        .collect();
    use CheckStatus::{Fail, Pass, Warn};
    assert_eq!(
        got,
        vec![
            Pass, Pass, Pass, Fail, Fail, Fail, Pass, Fail, Fail, Warn, Fail
        ]
    );
}

#[test]
fn registry_answers_are_classified_by_kind_then_by_the_manifest_words() {
    let answers = [
        Ok(()),
        Err(ApiError::NotFound {
            message: "x".to_owned(),
        }),
        Err(ApiError::Unauthorized {
            message: "x".to_owned(),
        }),
        Err(ApiError::Status {
            status: 500,
            message: "manifest unknown: manifest unknown".to_owned(),
        }),
        Err(ApiError::Status {
            status: 500,
            message: "dial tcp: lookup ghcr.io: no such host".to_owned(),
        }),
        Err(ApiError::Transport {
            message: "timed out".to_owned(),
        }),
    ];
    let got: Vec<&str> = answers
        .iter()
        .map(|a| match Registry::of(a) {
            Registry::Known => "known",
            Registry::Unknown(_) => "unknown",
            Registry::Refused(_) => "refused",
            Registry::Unreachable(_) => "unreachable",
        })
        .collect();
    assert_eq!(
        got,
        vec![
            "known",
            "unknown",
            "refused",
            "unknown",
            "unreachable",
            "unreachable"
        ]
    );
}

/// A little-endian ELF64 header for x86-64 with one program header of type `p_type`.
fn elf(p_type: u32) -> Vec<u8> {
    let mut h = vec![0x7f, b'E', b'L', b'F', 2, 1, 1, 0];
    h.extend([0; 8]);
    h.extend(2u16.to_le_bytes()); // e_type
    h.extend(0x3Eu16.to_le_bytes()); // e_machine
    h.extend(1u32.to_le_bytes()); // e_version
    h.extend(0u64.to_le_bytes()); // e_entry
    h.extend(64u64.to_le_bytes()); // e_phoff
    h.extend(0u64.to_le_bytes()); // e_shoff
    h.extend(0u32.to_le_bytes()); // e_flags
    h.extend(64u16.to_le_bytes()); // e_ehsize
    h.extend(56u16.to_le_bytes()); // e_phentsize
    h.extend(1u16.to_le_bytes()); // e_phnum
    h.extend([0; 6]); // e_shentsize, e_shnum, e_shstrndx
    let mut ph = p_type.to_le_bytes().to_vec();
    ph.extend([0; 52]);
    h.extend(ph);
    h
}

#[test]
fn the_engine_binary_must_be_an_executable_elf_of_the_right_machine_and_static_to_pass() {
    let read = |executable: bool, head: Vec<u8>| BinaryFinding::Read {
        path: "/b/iterion".to_owned(),
        executable,
        head,
    };
    let amd64 = Some(("amd64", "the image's architecture"));
    let checks = [
        engine_binary(&read(true, elf(1)), amd64),
        engine_binary(&read(true, elf(3)), amd64),
        engine_binary(
            &read(true, elf(1)),
            Some(("arm64", "the image's architecture")),
        ),
        engine_binary(&read(true, b"#!/bin/sh\n".to_vec()), amd64),
        engine_binary(&read(false, elf(1)), amd64),
        engine_binary(
            &BinaryFinding::Unreadable {
                path: "/b/iterion".to_owned(),
                reason: "cannot read it: No such file or directory".to_owned(),
            },
            amd64,
        ),
        engine_binary(&BinaryFinding::Unknown, amd64),
    ];
    use CheckStatus::{Fail, Pass, Warn};
    assert_eq!(
        checks.iter().map(|c| c.status).collect::<Vec<_>>(),
        vec![Pass, Warn, Fail, Fail, Fail, Fail, Fail]
    );
    assert_eq!(
        (checks[0].summary.as_str(), checks[2].summary.as_str()),
        (
            "/b/iterion: statically linked, matches amd64 (the image's architecture)",
            "/b/iterion: built for ELF machine 0x3e, but the image is arm64 (aarch64) (the image's architecture)"
        )
    );
}

#[test]
fn kubernetes_refuses_build_a_missing_image_host_state_auto_and_a_user_that_is_not_numeric() {
    let with = |f: fn(&mut Spec)| {
        let mut spec = image_spec("a:1");
        spec.user = Some("1000:1000".to_owned());
        f(&mut spec);
        k8s_spec_compatible(&spec).status
    };
    use CheckStatus::{Fail, Pass};
    assert_eq!(
        vec![
            with(|_| {}),
            with(|s| {
                s.image = None;
                s.build = Some(Build {
                    dockerfile: "Dockerfile".to_owned(),
                    context: None,
                    args: BTreeMap::new(),
                });
            }),
            with(|s| s.host_state = iterion_sandbox::HostState::Auto),
            with(|s| s.user = Some("vscode".to_owned())),
            with(|s| s.user = None),
        ],
        vec![Pass, Fail, Fail, Fail, Fail]
    );
}

#[test]
fn the_kubernetes_context_fails_only_when_kubernetes_is_the_selected_driver() {
    assert_eq!(
        statuses(&[
            k8s_context(Ok("API server 10.0.0.1:443 reachable"), true),
            k8s_context(Err("no in-cluster configuration"), true),
            k8s_context(Err("no in-cluster configuration"), false),
        ]),
        vec![
            (CheckId::K8sContext, CheckStatus::Pass),
            (CheckId::K8sContext, CheckStatus::Fail),
            (CheckId::K8sContext, CheckStatus::Warn),
        ]
    );
}

#[test]
fn a_malformed_scheduling_policy_fails() {
    let error = SandboxError::InvalidSetting {
        variable: "ITERION_SANDBOX_K8S_SPREAD",
        value: "zone".to_owned(),
        want: "a prefixed label key",
    };
    assert_eq!(
        statuses(&[
            k8s_scheduling_policy(Ok("requests none; limits none; spread none".to_owned())),
            k8s_scheduling_policy(Err(&error)),
        ]),
        vec![
            (CheckId::K8sSchedulingPolicy, CheckStatus::Pass),
            (CheckId::K8sSchedulingPolicy, CheckStatus::Fail),
        ]
    );
}

#[test]
fn an_unknown_preset_fails_and_the_rules_compile_with_the_preset_first() {
    let policy = |mode, preset: Option<&str>, rules: &[&str]| {
        resolve_network_policy(
            &Spec {
                network: Some(Network {
                    mode,
                    preset: preset.map(str::to_owned),
                    rules: rules.iter().map(|r| (*r).to_owned()).collect(),
                    inherit: None,
                }),
                ..image_spec("a:1")
            },
            NetworkOrigin::Workflow,
        )
    };
    let preset_size = iterion_netproxy::preset_rules("iterion-default")
        .map(<[&str]>::len)
        .unwrap_or_default();
    let checks = [
        network_preset("iterion-default"),
        network_preset("strict"),
        network_allowlist_syntax(&policy(
            Some(NetworkMode::Allowlist),
            Some("iterion-default"),
            &[
                "!gist.github.com",
                "api.example.test:8443",
                "10.0.0.0/8:5432",
            ],
        )),
        network_allowlist_syntax(&policy(None, None, &["a.*.com"])),
        network_allowlist_syntax(&resolve_network_policy(
            &image_spec("a:1"),
            NetworkOrigin::Workflow,
        )),
    ];
    assert_eq!(
        statuses(&checks),
        vec![
            (CheckId::NetworkPreset, CheckStatus::Pass),
            (CheckId::NetworkPreset, CheckStatus::Fail),
            (CheckId::NetworkAllowlistSyntax, CheckStatus::Pass),
            (CheckId::NetworkAllowlistSyntax, CheckStatus::Fail),
            (CheckId::NetworkAllowlistSyntax, CheckStatus::Pass),
        ]
    );
    assert_eq!(
        (checks[2].summary.clone(), checks[4].summary.as_str()),
        (
            format!(
                "mode=allowlist, {} rule(s); a rule without :port allows ports 443 and 80 only \
                 (ports named: 5432, 8443); non-public addresses are refused unless an IP/CIDR \
                 rule names them",
                preset_size + 3
            ),
            "mode=open, 0 rule(s)"
        )
    );
}

#[test]
fn a_driver_that_cannot_build_fails_a_build_spec() {
    let build = Spec {
        mode: Mode::Inline,
        build: Some(Build {
            dockerfile: "Dockerfile".to_owned(),
            context: None,
            args: BTreeMap::new(),
        }),
        user: Some("1000".to_owned()),
        ..Spec::default()
    };
    let checks = [
        driver_capabilities(&build, "docker", Capabilities::DOCKER),
        driver_capabilities(&build, "kubernetes", Capabilities::KUBERNETES),
    ];
    assert_eq!(
        (statuses(&checks), checks[1].summary.as_str()),
        (
            vec![
                (CheckId::DriverCapabilities, CheckStatus::Pass),
                (CheckId::DriverCapabilities, CheckStatus::Fail),
            ],
            "the kubernetes driver cannot honour: build"
        )
    );
}

#[test]
fn the_binary_is_judged_against_the_image_architecture_before_the_engine_one() {
    assert_eq!(
        (
            binary_arch(Some("arm64"), Some("amd64")),
            binary_arch(Some(""), Some("amd64")),
            binary_arch(None, None),
        ),
        (
            Some(("arm64", "the image's architecture")),
            Some(("amd64", "the engine's architecture")),
            None
        )
    );
}

#[test]
fn image_contents_passes_when_nothing_lacks_and_fails_with_each_remedy() {
    let bash = Lack::Bash(vec!["/bin".to_owned()]);
    let loader = Lack::Loader {
        binary: "/x/iterion".to_owned(),
        loader: "/lib64/ld-linux-x86-64.so.2".to_owned(),
        for_what: "the egress bridge".to_owned(),
    };
    assert_eq!(image_contents("i:1", Ok(&[])).status, CheckStatus::Pass);
    assert_eq!(image_contents("i:1", Err("gone")).status, CheckStatus::Warn);
    let only_bash = image_contents("i:1", Ok(std::slice::from_ref(&bash)));
    assert_eq!(only_bash.status, CheckStatus::Fail);
    assert!(only_bash.remediation.contains("apk add bash"));
    assert!(!only_bash.remediation.contains("build-static"));
    let only_loader = image_contents("i:1", Ok(std::slice::from_ref(&loader)));
    assert!(
        only_loader
            .summary
            .contains("lacks its loader /lib64/ld-linux-x86-64.so.2")
    );
    assert!(only_loader.remediation.contains("scripts/build-static.sh"));
    let both = image_contents("i:1", Ok(&[bash.clone(), loader]));
    assert!(both.remediation.contains("apk add bash") && both.remediation.contains("ITERION_BIN"));
    let claude = Lack::Cli {
        cli: "claude",
        dirs: vec!["/usr/bin".to_owned(), "/bin".to_owned()],
    };
    let no_cli = image_contents("i:1", Ok(std::slice::from_ref(&claude)));
    assert_eq!(no_cli.status, CheckStatus::Fail);
    assert!(
        no_cli
            .summary
            .contains("i:1 has no claude (searched /usr/bin:/bin)"),
        "{}",
        no_cli.summary
    );
    assert!(no_cli.remediation.contains("@anthropic-ai/claude-code"));
    let cli_and_bash = image_contents("i:1", Ok(&[bash, claude]));
    assert!(
        cli_and_bash.remediation.contains("apk add bash")
            && cli_and_bash.remediation.contains("build-default-image.sh")
    );
}
