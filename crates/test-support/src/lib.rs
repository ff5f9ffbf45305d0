//! iterion-test-support: fixtures shared by the workspace's tests (never shipped).
//!
//! Integration tests run against a real container engine (ARCHITECTURE.md §6). This crate is the one
//! place that knows how they find it, which images they may use, and how they clean up:
//!
//! - [`BUSYBOX_IMAGE`] and [`DEBIAN_IMAGE`] are built locally by `scripts/build-test-images.sh`
//!   (no registry is reachable in CI, so tests never pull);
//! - [`docker_or_skip`] connects to the engine. With `ITERION_IT_DOCKER` set (as `scripts/test.sh`
//!   does) a missing engine **fails** the test; without it, the test prints why it is skipped.
//!   A green CI run therefore always means the container tests ran (STYLE.md §6.7);
//! - every test container carries the label [`TEST_ID_LABEL`]`=<test id>` ([`test_labels`]) and is
//!   force-removed by a [`ContainerGuard`] when the test ends, even when it panics.
//!
//! [`fake_model::FakeModel`] is a scripted model server (both APIs) for agent-node tests;
//! [`https::HttpsServer`] is a local HTTPS server (HTTP/1.1 and HTTP/2, SSE, a WebSocket echo)
//! with a test CA, for the egress proxy's tests.
//!
//! It has no dependency on the other iterion crates: the
//! crates depend on it (as a dev-dependency), never the other way round.

// Test-only code: panicking with a clear message is how a fixture reports a broken environment, and
// telling the developer why a test was skipped is the point of printing to stderr.
#![allow(clippy::print_stderr, clippy::expect_used, clippy::unwrap_used)]
#![deny(missing_docs)]

pub mod fake_model;
pub mod https;

use std::collections::HashMap;
use std::sync::mpsc;
use std::time::Duration;

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::models::ContainerCreateBody;
use bollard::query_parameters::{
    ListContainersOptionsBuilder, LogsOptionsBuilder, RemoveContainerOptionsBuilder,
};
use futures_util::{StreamExt, TryStreamExt};

/// Busybox-static rootfs (`/bin/sh`, coreutils applets, `/tmp`, users `root` and `user` = uid 1000).
/// Small and fast to start: use it unless a test needs a real distribution.
pub const BUSYBOX_IMAGE: &str = "iterion-test/busybox:1";

/// Debian bookworm minbase with bash, coreutils, curl, git, ca-certificates and jq, plus a uid 1000
/// `user`. For tests that need a real userland (git, TLS through the proxy, JSON on the command line).
pub const DEBIAN_IMAGE: &str = "iterion-test/debian:bookworm";

/// [`DEBIAN_IMAGE`] plus the `claude` and `codex` CLIs in `/usr/local/bin`, at the versions the
/// tag names (`scripts/build-test-images.sh` pins the same ones): the delegate backends' tests.
pub const DELEGATES_IMAGE: &str = "iterion-test/delegates:claude-2.1.328-codex-0.169.0";

/// Label put on every container a test creates; its value is the test's id. A leftover container
/// can be traced to its test with `docker ps -a --filter label=iterion.io/test-id`.
pub const TEST_ID_LABEL: &str = "iterion.io/test-id";

/// Label the test images carry (`scripts/build-test-images.sh`).
pub const TEST_IMAGE_LABEL: &str = "iterion.io/test-image";

/// Environment variable that turns an absent container engine into a test failure.
pub const REQUIRE_DOCKER_ENV: &str = "ITERION_IT_DOCKER";

/// How long a ping, a negotiation or a cleanup may take before the engine counts as unreachable.
const ENGINE_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether `ITERION_IT_DOCKER` asks for a hard failure when the engine is missing:
/// `1`, `true`, `yes` or `on` (any case). Anything else, or unset, means "skip".
pub fn docker_required() -> bool {
    std::env::var(REQUIRE_DOCKER_ENV).is_ok_and(|value| is_truthy(&value))
}

fn is_truthy(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes" | "on"
    )
}

/// Connect to the engine as the tests do: `DOCKER_HOST` if set (else `/var/run/docker.sock`),
/// then negotiate the API version down to what the engine speaks (Debian's docker.io speaks 1.41,
/// bollard asks for newer and the engine would refuse), then ping. Each step is bounded.
pub async fn connect() -> Result<Docker, String> {
    let host =
        std::env::var("DOCKER_HOST").unwrap_or_else(|_| "unix:///var/run/docker.sock".to_owned());
    let docker =
        Docker::connect_with_defaults().map_err(|e| format!("cannot connect to {host}: {e}"))?;
    let docker = tokio::time::timeout(ENGINE_TIMEOUT, docker.negotiate_version())
        .await
        .map_err(|_| format!("{host}: no answer to /version within {ENGINE_TIMEOUT:?}"))?
        .map_err(|e| format!("{host}: version negotiation failed: {e}"))?;
    tokio::time::timeout(ENGINE_TIMEOUT, docker.ping())
        .await
        .map_err(|_| format!("{host}: no answer to ping within {ENGINE_TIMEOUT:?}"))?
        .map_err(|e| format!("{host}: ping failed: {e}"))?;
    Ok(docker)
}

/// The engine for a container test, or `None` when the test should be skipped.
///
/// When the engine is unreachable:
/// - with `ITERION_IT_DOCKER` truthy (see [`docker_required`]) this **panics**: CI promised an
///   engine, so its absence is a failure, not a green skip;
/// - otherwise it prints the reason to stderr and returns `None`; the test should `return`.
///
/// Before returning the engine it removes containers left labelled with `test_id` by an earlier
/// run of the same test that was killed before its guards ran.
///
/// ```no_run
/// # async fn t() {
/// let Some(docker) = iterion_test_support::docker_or_skip("my_crate::docker_smoke").await else {
///     return;
/// };
/// # drop(docker);
/// # }
/// ```
pub async fn docker_or_skip(test_id: &str) -> Option<Docker> {
    match connect().await {
        Ok(docker) => {
            remove_test_containers(&docker, test_id).await;
            Some(docker)
        }
        Err(reason) if docker_required() => panic!(
            "{test_id}: container engine required ({REQUIRE_DOCKER_ENV} is set) but unreachable: \
             {reason}. Run scripts/test.sh (it installs and starts dockerd and builds the test \
             images), or unset {REQUIRE_DOCKER_ENV} to skip container tests."
        ),
        Err(reason) => {
            eprintln!(
                "SKIPPED {test_id}: no container engine ({reason}). Run scripts/test.sh, or set \
                 {REQUIRE_DOCKER_ENV}=1 to make this a failure."
            );
            None
        }
    }
}

/// The labels every test container must carry: `iterion.io/test-id=<test_id>`.
pub fn test_labels(test_id: &str) -> HashMap<String, String> {
    HashMap::from([(TEST_ID_LABEL.to_owned(), test_id.to_owned())])
}

/// Add the test labels to a create body, keeping any labels it already has.
pub fn label_for_test(mut body: ContainerCreateBody, test_id: &str) -> ContainerCreateBody {
    body.labels
        .get_or_insert_with(HashMap::new)
        .extend(test_labels(test_id));
    body
}

/// Ids of all containers (running or not) labelled with `test_id`.
pub async fn test_container_ids(docker: &Docker, test_id: &str) -> Vec<String> {
    let filters = HashMap::from([("label", vec![format!("{TEST_ID_LABEL}={test_id}")])]);
    let options = ListContainersOptionsBuilder::new()
        .all(true)
        .filters(&filters)
        .build();
    docker
        .list_containers(Some(options))
        .await
        .unwrap_or_else(|e| panic!("{test_id}: listing test containers failed: {e}"))
        .into_iter()
        .filter_map(|summary| summary.id)
        .collect()
}

/// Force-remove every container labelled with `test_id`.
pub async fn remove_test_containers(docker: &Docker, test_id: &str) {
    for id in test_container_ids(docker, test_id).await {
        force_remove(docker, &id)
            .await
            .unwrap_or_else(|e| panic!("{test_id}: removing leftover container {id} failed: {e}"));
    }
}

async fn force_remove(docker: &Docker, id: &str) -> Result<(), String> {
    let options = RemoveContainerOptionsBuilder::new()
        .force(true)
        .v(true)
        .build();
    match tokio::time::timeout(ENGINE_TIMEOUT, docker.remove_container(id, Some(options))).await {
        Ok(Ok(())) => Ok(()),
        // Already gone (removed by the test itself, or auto-removed): nothing to do.
        Ok(Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        })) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {ENGINE_TIMEOUT:?}")),
    }
}

/// Force-removes one container when dropped: at the end of the test, or while unwinding from a
/// failed assertion.
///
/// `Drop` cannot await, and blocking a tokio worker on the test's own runtime could deadlock it
/// (`#[tokio::test]` is single-threaded). So the removal runs on a fresh OS thread with its own
/// small runtime and its own engine connection (a pooled connection of the test's client would be
/// driven by the blocked runtime), and `drop` waits for it, bounded, so that the container is gone
/// before the test process exits.
#[derive(Debug)]
pub struct ContainerGuard {
    id: String,
}

impl ContainerGuard {
    /// Guard the container with this id (or name).
    pub fn new(id: impl Into<String>) -> Self {
        Self { id: id.into() }
    }

    /// The guarded container's id.
    pub fn id(&self) -> &str {
        &self.id
    }
}

impl Drop for ContainerGuard {
    fn drop(&mut self) {
        let id = self.id.clone();
        let (done_tx, done_rx) = mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("container-guard".to_owned())
            .spawn(move || {
                let result = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| format!("cannot build a cleanup runtime: {e}"))
                    .and_then(|runtime| {
                        runtime.block_on(async {
                            let docker = connect().await?;
                            force_remove(&docker, &id).await
                        })
                    });
                let _ = done_tx.send(result);
            });
        // Cleanup failures are reported, never raised: panicking in drop while already unwinding
        // would abort and hide the test's own failure.
        let outcome = match spawned {
            Err(e) => Err(format!("cannot spawn cleanup thread: {e}")),
            Ok(_) => done_rx
                .recv_timeout(ENGINE_TIMEOUT * 3)
                .unwrap_or_else(|_| Err("cleanup did not finish in time".to_owned())),
        };
        if let Err(reason) = outcome {
            eprintln!(
                "warning: could not remove test container {}: {reason} (remove it with `docker rm -f {}`)",
                self.id, self.id
            );
        }
    }
}

/// What a container printed and how it exited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerOutput {
    /// Exit status of the container's main process.
    pub exit_code: i64,
    /// Everything written to stdout, lossily decoded as UTF-8.
    pub stdout: String,
    /// Everything written to stderr, lossily decoded as UTF-8.
    pub stderr: String,
}

/// Run `cmd` in a new container of `image` until it exits, and return its output.
///
/// The container is labelled with `test_id` and removed afterwards (also on panic). Any engine
/// error panics with the step that failed: this is a fixture, not code under test.
pub async fn run_to_completion(
    docker: &Docker,
    test_id: &str,
    image: &str,
    cmd: &[&str],
) -> ContainerOutput {
    let body = label_for_test(
        ContainerCreateBody {
            image: Some(image.to_owned()),
            cmd: Some(cmd.iter().map(|s| (*s).to_owned()).collect()),
            ..Default::default()
        },
        test_id,
    );
    let created = docker
        .create_container(None, body)
        .await
        .unwrap_or_else(|e| {
            panic!("{test_id}: create from {image} failed: {e} (run scripts/build-test-images.sh?)")
        });
    let guard = ContainerGuard::new(created.id);
    docker
        .start_container(guard.id(), None)
        .await
        .unwrap_or_else(|e| panic!("{test_id}: start failed: {e}"));
    let exit_code = wait_for_exit(docker, guard.id()).await;
    let (stdout, stderr) = collect_logs(docker, guard.id()).await;
    ContainerOutput {
        exit_code,
        stdout,
        stderr,
    }
}

/// Wait for a started container to exit and return its exit code.
pub async fn wait_for_exit(docker: &Docker, id: &str) -> i64 {
    let mut stream = docker.wait_container(id, None);
    match stream.next().await {
        Some(Ok(response)) => response.status_code,
        // bollard reports a non-zero exit as an error; for a test it is just a value.
        Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => code,
        Some(Err(e)) => panic!("waiting for container {id} failed: {e}"),
        None => panic!("waiting for container {id}: the engine closed the stream"),
    }
}

/// The complete stdout and stderr of a container (which should have exited).
pub async fn collect_logs(docker: &Docker, id: &str) -> (String, String) {
    let options = LogsOptionsBuilder::new().stdout(true).stderr(true).build();
    let chunks: Vec<LogOutput> = docker
        .logs(id, Some(options))
        .try_collect()
        .await
        .unwrap_or_else(|e| panic!("reading logs of container {id} failed: {e}"));
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    for chunk in chunks {
        match chunk {
            LogOutput::StdOut { message } | LogOutput::Console { message } => {
                stdout.extend_from_slice(&message);
            }
            LogOutput::StdErr { message } => stderr.extend_from_slice(&message),
            LogOutput::StdIn { .. } => {}
        }
    }
    (
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

/// Environment variable naming the statically linked `iterion` that container tests mount at
/// `/run/iterion/bin/iterion` (SANDBOX.md §8.4). `scripts/test.sh` builds it with
/// `scripts/build-static.sh` and exports its path here.
pub const STATIC_BIN_ENV: &str = "ITERION_STATIC_BIN";

/// The static `iterion` to mount into test containers, or `None` when the test should be skipped.
///
/// The path comes from [`STATIC_BIN_ENV`] only (never guessed, so a stale build is never used
/// silently). When it is unset or names no file: with `ITERION_IT_DOCKER` truthy this **panics**
/// (CI promised the container tests); otherwise it prints why the test is skipped.
pub fn static_iterion_or_skip(test_id: &str) -> Option<std::path::PathBuf> {
    let found = match std::env::var_os(STATIC_BIN_ENV) {
        None => Err(format!("{STATIC_BIN_ENV} is not set")),
        Some(path) => {
            let path = std::path::PathBuf::from(path);
            if path.is_file() {
                Ok(path)
            } else {
                Err(format!("{STATIC_BIN_ENV}={} is not a file", path.display()))
            }
        }
    };
    match found {
        Ok(path) => Some(path),
        Err(reason) if docker_required() => panic!(
            "{test_id}: the static iterion binary is required ({REQUIRE_DOCKER_ENV} is set): \
             {reason}. Run scripts/test.sh, or build it with scripts/build-static.sh and set \
             {STATIC_BIN_ENV} to the path it prints."
        ),
        Err(reason) => {
            eprintln!(
                "SKIPPED {test_id}: {reason}. Build it with scripts/build-static.sh and set \
                 {STATIC_BIN_ENV} to the path it prints."
            );
            None
        }
    }
}

/// The default bridge network's gateway, the host as a container on that network sees it: the
/// IPAM config's `Gateway` when the engine lists one, else the IPv4 address of the bridge's own
/// interface (`com.docker.network.bridge.name`, default `docker0`) — dockerd leaves the IPAM
/// gateway empty on some hosts, and no address is assumed.
///
/// # Panics
///
/// When neither can be read (a test cannot run without it).
pub fn docker_bridge_gateway() -> String {
    let inspect = |format: &str| {
        std::process::Command::new("docker")
            .args(["network", "inspect", "bridge", "-f", format])
            .output()
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
            .unwrap_or_default()
    };
    let ipam = inspect("{{range .IPAM.Config}}{{.Gateway}} {{end}}");
    if let Some(ip) = ipam
        .split_whitespace()
        .find(|ip| ip.parse::<std::net::Ipv4Addr>().is_ok())
    {
        return ip.to_owned();
    }
    let name = inspect(r#"{{index .Options "com.docker.network.bridge.name"}}"#);
    let name = if name.is_empty() || name == "<no value>" {
        "docker0".to_owned()
    } else {
        name
    };
    let out = std::process::Command::new("ip")
        .args(["-4", "-o", "addr", "show", "dev", &name])
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
        .unwrap_or_default();
    let ip = out
        .split_whitespace()
        .skip_while(|word| *word != "inet")
        .nth(1)
        .and_then(|cidr| cidr.split('/').next())
        .filter(|ip| ip.parse::<std::net::Ipv4Addr>().is_ok());
    match ip {
        Some(ip) => ip.to_owned(),
        None => panic!(
            "no gateway for docker's bridge network: IPAM lists none and {name} has no IPv4 address"
        ),
    }
}

/// A directory holding the `claude` and `codex` executables of [`DELEGATES_IMAGE`], for tests
/// that run a delegate node on the host: copied out of the image once (the same pinned CLIs the
/// container tests run) into the temp dir, keyed by the image's tag. `None` (the test is
/// skipped) when the image is not there; with `ITERION_IT_DOCKER` truthy that **panics** instead.
pub fn delegate_clis_or_skip(test_id: &str) -> Option<std::path::PathBuf> {
    use std::process::Command;
    let key: String = DELEGATES_IMAGE
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let dir = std::env::temp_dir().join(format!("iterion-test-clis-{key}"));
    if dir.join("claude").is_file() && dir.join("codex").is_file() {
        return Some(dir);
    }
    let skip = |reason: String| {
        if docker_required() {
            panic!(
                "{test_id}: {DELEGATES_IMAGE} is required ({REQUIRE_DOCKER_ENV} is set): {reason}. \
                 Build it with scripts/build-test-images.sh."
            );
        }
        eprintln!("SKIPPED {test_id}: {reason}. Build it with scripts/build-test-images.sh.");
        None
    };
    let created = match Command::new("docker")
        .args([
            "create",
            "--label",
            &format!("{TEST_ID_LABEL}={test_id}"),
            DELEGATES_IMAGE,
            "true",
        ])
        .output()
    {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        Ok(out) => {
            return skip(format!(
                "docker create {DELEGATES_IMAGE} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Err(e) => return skip(format!("docker cannot be run: {e}")),
    };
    // Copy into a private staging dir, then rename: concurrent tests never see half a binary.
    let staging = std::env::temp_dir().join(format!("{key}-{}-{}", std::process::id(), created));
    let copied = std::fs::create_dir_all(&staging).is_ok()
        && ["claude", "codex"].iter().all(|name| {
            Command::new("docker")
                .args(["cp", &format!("{created}:/usr/local/bin/{name}")])
                .arg(staging.join(name))
                .status()
                .is_ok_and(|s| s.success())
        });
    let _ = Command::new("docker").args(["rm", "-f", &created]).output();
    if !copied {
        let _ = std::fs::remove_dir_all(&staging);
        return skip(format!(
            "the CLIs could not be copied out of {DELEGATES_IMAGE}"
        ));
    }
    if std::fs::rename(&staging, &dir).is_err() {
        // Another test got there first.
        let _ = std::fs::remove_dir_all(&staging);
    }
    Some(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truthy_values_require_the_engine() {
        let verdicts: Vec<(&str, bool)> = ["1", "true", "YES", " on ", "0", "false", "", "2"]
            .into_iter()
            .map(|v| (v, is_truthy(v)))
            .collect();
        assert_eq!(
            verdicts,
            [
                ("1", true),
                ("true", true),
                ("YES", true),
                (" on ", true),
                ("0", false),
                ("false", false),
                ("", false),
                ("2", false),
            ]
        );
    }

    #[test]
    fn label_for_test_keeps_existing_labels() {
        let body = ContainerCreateBody {
            labels: Some(HashMap::from([("a".to_owned(), "b".to_owned())])),
            ..Default::default()
        };
        let labels = label_for_test(body, "t1").labels;
        assert_eq!(
            labels,
            Some(HashMap::from([
                ("a".to_owned(), "b".to_owned()),
                (TEST_ID_LABEL.to_owned(), "t1".to_owned()),
            ]))
        );
    }
}
