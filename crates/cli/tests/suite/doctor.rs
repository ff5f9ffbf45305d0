//! `iterion sandbox doctor` and the strict pre-flight (SANDBOX.md §11) on real conditions: the
//! engine up, down (a dead `DOCKER_HOST`) or hung (a socket that never answers); an image present,
//! absent, or unknown to its registry (a fake registry on loopback, asked by the engine); a
//! hostile mount in the workflow and in the devcontainer; `build:` and user `vscode` against the
//! kubernetes battery. Every strict JSON document is checked against
//! `tests/fixtures/doctor-strict.schema.json`.
use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::Value;
use sha2::Digest as _;

use crate::suite::support::{DEAD_DOCKER, DEAD_PODMAN, Env, IMAGE, docker_or_skip, stderr_of};

const SCHEMA: &str = include_str!("../fixtures/doctor-strict.schema.json");

const TOOL: &str = "tool probe:\n  command: `echo ok`\n\n";

fn workflow(sandbox: &str) -> String {
    format!("{TOOL}workflow a:\n  entry: probe\n{sandbox}  probe -> done\n")
}

/// Validates a strict report against the schema and returns it.
fn strict_json(out: &std::process::Output) -> Value {
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    let schema: Value = serde_json::from_str(SCHEMA).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&report)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}\n{report:#}");
    report
}

/// `(id, status)` of every row.
fn rows(report: &Value) -> Vec<(String, String)> {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_owned(),
                c["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn row<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no {id} row in {report:#}"))
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

/// The static build when the test script made one (engine-binary then passes), else `None`.
fn static_bin() -> Option<String> {
    std::env::var("ITERION_STATIC_BIN")
        .ok()
        .filter(|v| !v.is_empty())
}

fn doctor(env: &Env) -> assert_cmd::Command {
    let mut cmd = env.cmd();
    cmd.args(["sandbox", "doctor"]);
    if let Some(bin) = static_bin() {
        cmd.env("ITERION_BIN", bin);
    }
    cmd
}

#[test]
fn docker_doctor_strict_passes_on_a_healthy_host() {
    if !docker_or_skip("cli::doctor::healthy") {
        return;
    }
    let env = Env::new();
    let out = doctor(&env)
        .args(["--strict", "--json", "--sandbox-default-image", IMAGE])
        .output()
        .unwrap();
    let report = strict_json(&out);
    let binary = if static_bin().is_some() {
        "pass"
    } else {
        "warn"
    };
    assert_eq!(
        (
            out.status.code(),
            report["driver"].as_str(),
            report["mode"].as_str(),
            report["image"].as_str(),
            rows(&report)
        ),
        (
            Some(0),
            Some("docker"),
            Some("auto"),
            Some(IMAGE),
            pairs(&[
                ("spec-resolution", "pass"),
                ("sandbox-configured", "pass"),
                ("driver-available", "pass"),
                ("spec-valid", "pass"),
                ("docker-daemon", "pass"),
                ("spec-safety", "pass"),
                ("image-resolvable", "pass"),
                ("engine-binary", binary),
                ("network-allowlist-syntax", "pass"),
                ("driver-capabilities", "pass"),
            ])
        )
    );
    // The human table says the same, with a count line.
    let human = doctor(&env)
        .args(["--strict", "--sandbox-default-image", IMAGE])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(text.contains("[pass] docker-daemon"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("checks: ") && l.ends_with(" 0 fail")),
        "{text}"
    );
}

#[test]
fn docker_doctor_basic_report_has_the_spec_keys() {
    if !docker_or_skip("cli::doctor::basic") {
        return;
    }
    let env = Env::new();
    let out = doctor(&env)
        .args(["--json", "--sandbox-default-image", IMAGE])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut keys: Vec<&str> = report
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    let drivers = report["available_drivers"].as_array().unwrap();
    assert_eq!(
        (
            keys,
            report["container_runtime"].as_str(),
            report["selected_driver"].as_str(),
            report["sandbox_default"].as_str(),
            report["sandbox_default_source"].as_str(),
            report["default_image_present"].as_bool(),
            drivers.first().and_then(Value::as_str),
            report["capabilities"]["build"].as_bool(),
        ),
        (
            vec![
                "api_version",
                "arch",
                "available_drivers",
                "capabilities",
                "container_runtime",
                "default_image",
                "default_image_present",
                "engine_binary",
                "engine_binary_link",
                "engine_version",
                "host",
                "os",
                "sandbox_default",
                "sandbox_default_source",
                "selected_driver",
                "user_namespaces",
            ],
            Some("docker"),
            Some("docker"),
            Some("auto"),
            Some("built-in sandbox-by-default"),
            Some(true),
            Some("docker"),
            Some(true),
        )
    );
}

#[test]
fn doctor_with_a_dead_engine_fails_the_driver_and_the_daemon() {
    let env = Env::new();
    // Pinned to docker: otherwise the embedded namespace driver answers where no engine does
    // (issue 18; namespace.rs tests that side). A pinned driver that cannot construct leaves no
    // driver at all, which the battery words as a warning; the daemon row carries the failure.
    let out = doctor(&env)
        .env("DOCKER_HOST", DEAD_DOCKER)
        .env("CONTAINER_HOST", DEAD_PODMAN)
        .env("ITERION_SANDBOX_DRIVER", "docker")
        .args(["--strict", "--json", "--sandbox-default-image", IMAGE])
        .output()
        .unwrap();
    let report = strict_json(&out);
    let binary = if static_bin().is_some() {
        "pass"
    } else {
        "warn"
    };
    assert_eq!(
        (out.status.code(), report["driver"].as_str(), rows(&report)),
        (
            Some(1),
            Some("<none>"),
            pairs(&[
                ("spec-resolution", "pass"),
                ("sandbox-configured", "pass"),
                ("driver-available", "warn"),
                ("spec-valid", "pass"),
                ("docker-daemon", "fail"),
                ("spec-safety", "pass"),
                ("image-resolvable", "warn"),
                ("engine-binary", binary),
                ("network-allowlist-syntax", "pass"),
            ])
        )
    );
    assert!(
        row(&report, "driver-available")["summary"]
            .as_str()
            .unwrap()
            .starts_with("no container-runtime driver available (tried: docker: "),
        "{report:#}"
    );
}

/// A unix socket that accepts every connection and never answers, until dropped.
struct HungEngine {
    path: std::path::PathBuf,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl HungEngine {
    fn start(dir: &std::path::Path) -> HungEngine {
        let path = dir.join("hung.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        listener.set_nonblocking(true).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            while !flag.load(std::sync::atomic::Ordering::SeqCst) {
                match listener.accept() {
                    Ok((conn, _)) => held.push(conn),
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        HungEngine { path, stop }
    }
}

impl Drop for HungEngine {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn doctor_with_a_hung_engine_fails_within_its_timeout() {
    let env = Env::new();
    let hung = HungEngine::start(env.home.path());
    let started = Instant::now();
    let out = doctor(&env)
        .env("DOCKER_HOST", format!("unix://{}", hung.path.display()))
        .env("ITERION_SANDBOX_DOCTOR_TIMEOUT", "1s")
        .args(["--strict", "--json", "--sandbox-default-image", IMAGE])
        .output()
        .unwrap();
    let elapsed = started.elapsed();
    let report = strict_json(&out);
    assert_eq!(
        (
            out.status.code(),
            row(&report, "driver-available")["status"].as_str(),
            row(&report, "docker-daemon")["status"].as_str(),
            row(&report, "image-resolvable")["status"].as_str(),
        ),
        (Some(1), Some("fail"), Some("fail"), Some("warn"))
    );
    let daemon = row(&report, "docker-daemon")["summary"].as_str().unwrap();
    assert!(daemon.contains("no answer within 1s"), "{daemon}");
    // The acceptance bound of SANDBOX.md §11.4 (generous: a loaded machine starts slowly).
    assert!(elapsed < Duration::from_secs(6), "took {elapsed:?}");
}

#[test]
fn docker_doctor_absent_image_fails_when_no_registry_can_be_asked() {
    if !docker_or_skip("cli::doctor::absent_image") {
        return;
    }
    // Nothing listens on port 9 of loopback: the engine cannot ask that registry anything.
    let env = Env::new();
    let out = doctor(&env)
        .args([
            "--strict",
            "--json",
            "--sandbox-default-image",
            "127.0.0.1:9/iterion-test/absent:0",
        ])
        .output()
        .unwrap();
    let report = strict_json(&out);
    let image = row(&report, "image-resolvable");
    // The run would pull from the same unreachable registry and fail at setup (issue 19).
    assert_eq!(
        (out.status.code(), image["status"].as_str()),
        (Some(1), Some("fail")),
        "{report:#}"
    );
    assert!(
        image["summary"]
            .as_str()
            .unwrap()
            .contains("cannot be pulled: its registry could not be reached"),
        "{image:#}"
    );
}

/// A registry on loopback speaking just enough of the distribution API for the engine's
/// `GET /distribution/<ref>/json`: `known:1` is a manifest with its config blob, anything else is
/// `MANIFEST_UNKNOWN`. The engine tries TLS first; a connection that does not start with an HTTP
/// method is dropped, and the engine retries in plain HTTP (loopback registries are insecure by
/// default).
struct FakeRegistry {
    port: u16,
}

impl FakeRegistry {
    fn start() -> FakeRegistry {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let config =
            br#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}"#
                .to_vec();
        let config_digest = format!("sha256:{:x}", sha2::Sha256::digest(&config));
        let manifest = format!(
            r#"{{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json","config":{{"mediaType":"application/vnd.docker.container.image.v1+json","size":{},"digest":"{config_digest}"}},"layers":[]}}"#,
            config.len()
        )
        .into_bytes();
        let manifest_digest = format!("sha256:{:x}", sha2::Sha256::digest(&manifest));
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten().take(200) {
                let (config, manifest) = (config.clone(), manifest.clone());
                let (config_digest, manifest_digest) =
                    (config_digest.clone(), manifest_digest.clone());
                std::thread::spawn(move || {
                    let mut conn = conn;
                    conn.set_read_timeout(Some(Duration::from_secs(5))).ok();
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") && head.len() < 16 * 1024 {
                        match conn.read(&mut byte) {
                            Ok(1) => head.push(byte[0]),
                            _ => return,
                        }
                        if head.len() == 1 && !byte[0].is_ascii_uppercase() {
                            return; // a TLS ClientHello: drop it
                        }
                    }
                    let head = String::from_utf8_lossy(&head);
                    let mut words = head.split_whitespace();
                    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
                    let (status, kind, digest, body) = if path == "/v2/" {
                        ("200 OK", "application/json", None, b"{}".to_vec())
                    } else if path == "/v2/known/manifests/1"
                        || path == format!("/v2/known/manifests/{manifest_digest}")
                    {
                        (
                            "200 OK",
                            "application/vnd.docker.distribution.manifest.v2+json",
                            Some(manifest_digest.clone()),
                            manifest,
                        )
                    } else if path == format!("/v2/known/blobs/{config_digest}") {
                        (
                            "200 OK",
                            "application/octet-stream",
                            Some(config_digest.clone()),
                            config,
                        )
                    } else {
                        (
                            "404 Not Found",
                            "application/json",
                            None,
                            br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown","detail":{}}]}"#.to_vec(),
                        )
                    };
                    let mut reply = format!(
                        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nDocker-Distribution-API-Version: registry/2.0\r\nConnection: close\r\n",
                        body.len()
                    );
                    if let Some(digest) = digest {
                        reply.push_str(&format!("Docker-Content-Digest: {digest}\r\n"));
                    }
                    reply.push_str("\r\n");
                    let _ = conn.write_all(reply.as_bytes());
                    if method != "HEAD" {
                        let _ = conn.write_all(&body);
                    }
                });
            }
        });
        FakeRegistry { port }
    }
}

#[test]
fn docker_doctor_asks_the_registry_without_pulling_unknown_fails_known_passes() {
    if !docker_or_skip("cli::doctor::registry") {
        return;
    }
    let registry = FakeRegistry::start();
    let env = Env::new();
    let ask = |image: &str| {
        let out = doctor(&env)
            .args(["--strict", "--json", "--sandbox-default-image", image])
            .output()
            .unwrap();
        let report = strict_json(&out);
        let image = row(&report, "image-resolvable").clone();
        (
            out.status.code(),
            image["status"].as_str().map(str::to_owned),
            image,
        )
    };
    let unknown = ask(&format!("127.0.0.1:{}/nope:1", registry.port));
    let known = ask(&format!("127.0.0.1:{}/known:1", registry.port));
    assert_eq!(
        (
            (unknown.0, unknown.1.as_deref()),
            (known.0, known.1.as_deref())
        ),
        ((Some(1), Some("fail")), (Some(0), Some("pass"))),
        "{:#} {:#}",
        unknown.2,
        known.2
    );
    // Nothing was pulled.
    let images = std::process::Command::new("docker")
        .args([
            "images",
            "-q",
            &format!("127.0.0.1:{}/known", registry.port),
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&images.stdout).trim(), "");
}

#[test]
fn docker_doctor_hostile_workflow_mount_fails_spec_safety() {
    if !docker_or_skip("cli::doctor::hostile_mount") {
        return;
    }
    let env = Env::new();
    env.write(
        "a.iter",
        &workflow(&format!(
            "  sandbox:\n    image: \"{IMAGE}\"\n    mounts: [\"type=bind,source=/var/run/docker.sock,target=/var/run/docker.sock\"]\n"
        )),
    );
    let out = doctor(&env)
        .args(["--strict", "--json", "a.iter"])
        .output()
        .unwrap();
    let report = strict_json(&out);
    let safety = row(&report, "spec-safety");
    assert_eq!(
        (
            out.status.code(),
            report["mode"].as_str(),
            safety["status"].as_str()
        ),
        (Some(1), Some("inline"), Some("fail"))
    );
    assert!(
        safety["summary"]
            .as_str()
            .unwrap()
            .starts_with("sandbox: mount refused: type=bind,source=/var/run/docker.sock"),
        "{safety:#}"
    );
}

#[test]
fn doctor_hostile_devcontainer_mount_fails_spec_resolution_and_stops() {
    let env = Env::new();
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir(home.path().join(".ssh")).unwrap();
    std::fs::create_dir(env.path(".devcontainer")).unwrap();
    env.write(
        ".devcontainer/devcontainer.json",
        r#"{"image": "iterion-test/busybox:1", "mounts": ["source=${localEnv:HOME}/.ssh,target=/home/user/.ssh,type=bind"]}"#,
    );
    let out = doctor(&env)
        .env("HOME", home.path())
        .args(["--strict", "--json", "--sandbox", "auto"])
        .output()
        .unwrap();
    let report = strict_json(&out);
    assert_eq!(
        (out.status.code(), rows(&report)),
        (Some(1), pairs(&[("spec-resolution", "fail")]))
    );
    let summary = row(&report, "spec-resolution")["summary"].as_str().unwrap();
    assert!(summary.contains(".ssh"), "{summary}");
}

#[test]
fn doctor_build_with_target_cloud_fails_kubernetes_compatibility_and_capabilities() {
    let env = Env::new();
    env.write(
        "a.iter",
        &workflow("  sandbox:\n    build:\n      dockerfile: \"Dockerfile\"\n"),
    );
    let out = doctor(&env)
        .args(["--strict", "--json", "--target", "cloud", "a.iter"])
        .output()
        .unwrap();
    let report = strict_json(&out);
    let checks: Vec<(String, String)> = rows(&report)
        .into_iter()
        .filter(|(id, _)| id != "driver-available")
        .collect();
    assert_eq!(
        (out.status.code(), report["target"].as_str(), checks),
        (
            Some(1),
            Some("cloud"),
            pairs(&[
                ("spec-resolution", "pass"),
                ("sandbox-configured", "pass"),
                ("spec-valid", "pass"),
                ("k8s-spec-compatible", "fail"),
                ("k8s-context", "warn"),
                ("k8s-scheduling-policy", "pass"),
                ("network-allowlist-syntax", "pass"),
                ("driver-capabilities", "fail"),
            ])
        )
    );
    assert_eq!(
        row(&report, "k8s-spec-compatible")["summary"].as_str(),
        Some("sandbox: kubernetes: build: is local-only; pin a pre-built image")
    );
    // On this host the selected driver is docker (or none): a cloud target only warns about it.
    assert_ne!(
        row(&report, "driver-available")["status"].as_str(),
        Some("fail")
    );
}

#[test]
fn doctor_user_vscode_with_target_k8s_fails_kubernetes_compatibility() {
    let env = Env::new();
    env.write(
        "a.iter",
        &workflow(&format!(
            "  sandbox:\n    image: \"{IMAGE}\"\n    user: \"vscode\"\n    host_state: none\n"
        )),
    );
    let out = doctor(&env)
        .args(["--strict", "--json", "--target", "k8s", "a.iter"])
        .env("ITERION_SANDBOX_K8S_SPREAD", "zone")
        .output()
        .unwrap();
    let report = strict_json(&out);
    assert_eq!(
        (
            out.status.code(),
            row(&report, "k8s-spec-compatible")["summary"].as_str(),
            row(&report, "k8s-scheduling-policy")["status"].as_str(),
            row(&report, "driver-capabilities")["status"].as_str(),
        ),
        (
            Some(1),
            Some("sandbox: kubernetes: user must be numeric (runAsNonRoot)"),
            Some("fail"),
            Some("pass"),
        )
    );
}

#[test]
fn doctor_without_an_active_sandbox_warns_and_stops() {
    let env = Env::new();
    let out = doctor(&env)
        .args(["--strict", "--json", "--sandbox", "none"])
        .output()
        .unwrap();
    let report = strict_json(&out);
    assert_eq!(
        (out.status.code(), report["mode"].as_str(), rows(&report)),
        (
            Some(0),
            Some("none"),
            pairs(&[("spec-resolution", "pass"), ("sandbox-configured", "warn")])
        )
    );
}

#[test]
fn doctor_bad_input_exits_2() {
    let env = Env::new();
    env.write(
        "preset.iter",
        &workflow(&format!(
            "  sandbox:\n    image: \"{IMAGE}\"\n    network:\n      mode: allowlist\n      preset: \"strict\"\n"
        )),
    );
    let missing = doctor(&env)
        .args(["--strict", "missing.iter"])
        .output()
        .unwrap();
    // An unknown preset never reaches the battery: the compiler refuses it (C044).
    let preset = doctor(&env)
        .args(["--strict", "preset.iter"])
        .output()
        .unwrap();
    let target = doctor(&env)
        .args(["--strict", "--target", "mars"])
        .output()
        .unwrap();
    let setting = doctor(&env)
        .args(["--strict"])
        .env("ITERION_SANDBOX_HOST_STATE", "sometimes")
        .output()
        .unwrap();
    assert_eq!(
        [&missing, &preset, &target, &setting].map(|o| o.status.code()),
        [Some(2); 4]
    );
    assert!(
        stderr_of(&preset).contains("unknown network preset \"strict\""),
        "{}",
        stderr_of(&preset)
    );
    assert!(
        stderr_of(&setting).contains("ITERION_SANDBOX_HOST_STATE"),
        "{}",
        stderr_of(&setting)
    );
}

#[test]
fn docker_preflight_failure_exits_2_and_records_nothing() {
    if !docker_or_skip("cli::doctor::preflight_failure") {
        return;
    }
    let env = Env::new();
    env.write(
        "a.iter",
        &workflow(&format!(
            "  sandbox:\n    image: \"{IMAGE}\"\n    mounts: [\"type=bind,source=/proc,target=/host-proc\"]\n"
        )),
    );
    let out = env
        .cmd()
        .args(["run", "a.iter"])
        .env("ITERION_SANDBOX_PREFLIGHT", " Yes ")
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "sandbox pre-flight failed; run `iterion sandbox doctor --strict a.iter` for details"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("spec-safety"), "{stderr}");
    assert!(!env.db().exists(), "the store was created");
    let inspect = env.cmd().args(["inspect", "--json"]).output().unwrap();
    assert_eq!(
        (
            inspect.status.code(),
            String::from_utf8_lossy(&inspect.stdout).trim().to_owned()
        ),
        (Some(0), "[]".to_owned())
    );
}

#[test]
fn docker_preflight_that_passes_lets_the_run_go_on() {
    if !docker_or_skip("cli::doctor::preflight_pass") {
        return;
    }
    let env = Env::new();
    env.write("a.iter", &workflow(""));
    let mut cmd = env.cmd();
    cmd.args(["run", "a.iter", "--sandbox-default-image", IMAGE])
        .env("ITERION_SANDBOX_PREFLIGHT", "on");
    if let Some(bin) = static_bin() {
        cmd.env("ITERION_BIN", bin);
    }
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(env.only_run().status.as_str(), "finished");
}
