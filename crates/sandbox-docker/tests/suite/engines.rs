//! The two engines the docker/podman driver suite runs against, and how a test reaches each.
//!
//! - docker: `DOCKER_HOST`, else `/var/run/docker.sock` (dockerd, started by scripts/test.sh);
//! - podman: `ITERION_IT_PODMAN_HOST`, else `CONTAINER_HOST`, else `/run/podman/podman.sock`
//!   (`podman system service`, started by scripts/test.sh).
//!
//! With `ITERION_IT_DOCKER=1` (set by scripts/test.sh) an engine that does not answer **fails**
//! the test; without it the test says why it is skipped and returns. Every container a test
//! makes carries `iterion.io/test-id=<test id>` (through [`DockerSettings::extra_label`]) and is
//! removed by an [`EngineGuard`] even when the test panics; leftovers of an earlier, killed run
//! of the same test are removed first. The driver's mount screen gets the test process's own
//! `HOME`, `ITERION_HOME`, `ITERION_BIN` and `XDG_RUNTIME_DIR` ([`screen_environment`]), as the
//! product's does.

// Test code: a failed unwrap is the assertion.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::mpsc;
use std::time::Duration;

use bollard::Docker;
use bollard::query_parameters::{
    ListContainersOptionsBuilder, RemoveContainerOptionsBuilder, RemoveImageOptionsBuilder,
};
use iterion_sandbox::DriverKind;
use iterion_sandbox_docker::{DockerDriver, DockerSettings, EngineKind};
use iterion_test_support::{REQUIRE_DOCKER_ENV, TEST_ID_LABEL, docker_required};
use iterion_vocab::Environment;

const ENGINE_TIMEOUT: Duration = Duration::from_secs(10);

/// The variables the mount screen reads, as this test process has them.
pub fn screen_environment() -> Environment {
    Environment::from_pairs(
        ["HOME", "ITERION_HOME", "ITERION_BIN", "XDG_RUNTIME_DIR"]
            .into_iter()
            .filter_map(|name| std::env::var_os(name).map(|value| (name, value))),
    )
}

/// An engine under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Docker,
    Podman,
}

impl Engine {
    pub fn kind(self) -> EngineKind {
        match self {
            Engine::Docker => EngineKind::Docker,
            Engine::Podman => EngineKind::Podman,
        }
    }

    /// docker: `DOCKER_HOST`, else the default socket. podman: `ITERION_IT_PODMAN_HOST` (set by
    /// scripts/test.sh), else `CONTAINER_HOST`, else `/run/podman/podman.sock`.
    pub fn endpoint(self) -> String {
        let (vars, default): (&[&str], &str) = match self {
            Engine::Docker => (&["DOCKER_HOST"], "unix:///var/run/docker.sock"),
            Engine::Podman => (
                &["ITERION_IT_PODMAN_HOST", "CONTAINER_HOST"],
                "unix:///run/podman/podman.sock",
            ),
        };
        vars.iter()
            .find_map(|var| std::env::var(var).ok().filter(|v| !v.is_empty()))
            .unwrap_or_else(|| default.to_owned())
    }

    fn how_to_start(self) -> &'static str {
        match self {
            Engine::Docker => "scripts/test.sh installs and starts dockerd",
            Engine::Podman => {
                "scripts/test.sh installs podman and starts `podman system service --time=0 unix:///run/podman/podman.sock`"
            }
        }
    }

    /// A plain bollard client for assertions (inspect, kill, list), version negotiated.
    pub async fn client(self) -> Result<Docker, Trouble> {
        let endpoint = self.endpoint();
        let refused = |source| Trouble::Engine {
            endpoint: endpoint.clone(),
            source,
        };
        let docker = Docker::connect_with_host(&endpoint).map_err(refused)?;
        tokio::time::timeout(ENGINE_TIMEOUT, docker.negotiate_version())
            .await
            .map_err(|_| Trouble::Timeout {
                what: endpoint.clone(),
            })?
            .map_err(refused)
    }

    /// The driver for this engine, labelling everything with `test_id`, or `None` to skip.
    pub async fn driver_or_skip(
        self,
        test_id: &str,
        settings: DockerSettings,
    ) -> Option<(DockerDriver, Docker)> {
        let settings = settings
            .extra_label(TEST_ID_LABEL, test_id)
            .environment(screen_environment());
        let kind = match self {
            Engine::Docker => DriverKind::Docker,
            Engine::Podman => DriverKind::Podman,
        };
        // The product gives an engine 3 s to answer (SANDBOX.md §4.2); a test on a loaded
        // machine gives it three chances before calling it unreachable.
        let mut connected = DockerDriver::connect(kind, &[self.endpoint()], settings.clone()).await;
        for _ in 0..2 {
            if connected.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
            connected = DockerDriver::connect(kind, &[self.endpoint()], settings.clone()).await;
        }
        let client = self.client().await;
        match (connected, client) {
            (Ok(driver), Ok(client)) => {
                remove_labelled(&client, test_id).await;
                Some((driver, client))
            }
            (Err(error), _) => self.unreachable(test_id, &error.to_string()),
            (_, Err(error)) => self.unreachable(test_id, &error.to_string()),
        }
    }

    fn unreachable<T>(self, test_id: &str, reason: &str) -> Option<T> {
        if docker_required() {
            panic!(
                "{test_id}: {self:?} engine required ({REQUIRE_DOCKER_ENV} is set) but unreachable: {reason}. \
                 {}; or unset {REQUIRE_DOCKER_ENV} to skip container tests.",
                self.how_to_start()
            );
        }
        #[allow(clippy::print_stderr)]
        {
            eprintln!(
                "SKIPPED {test_id}: {self:?} engine unreachable ({reason}). {}; set {REQUIRE_DOCKER_ENV}=1 to make this a failure.",
                self.how_to_start()
            );
        }
        None
    }
}

/// Ids of the containers labelled with `test_id`, in every state.
pub async fn labelled(client: &Docker, test_id: &str) -> Vec<String> {
    let filters = HashMap::from([("label", vec![format!("{TEST_ID_LABEL}={test_id}")])]);
    let options = ListContainersOptionsBuilder::new()
        .all(true)
        .filters(&filters)
        .build();
    client
        .list_containers(Some(options))
        .await
        .unwrap_or_else(|e| panic!("{test_id}: listing containers failed: {e}"))
        .into_iter()
        .filter_map(|c| c.id)
        .collect()
}

async fn remove_labelled(client: &Docker, test_id: &str) {
    for id in labelled(client, test_id).await {
        let _ = force_remove(client, &id).await;
    }
}

/// Why a fixture could not do what it asked of an engine.
#[derive(Debug, thiserror::Error)]
pub enum Trouble {
    /// The engine refused or failed.
    #[error("{endpoint}: {source}")]
    Engine {
        /// The endpoint (or the object) asked.
        endpoint: String,
        /// bollard's error.
        #[source]
        source: bollard::errors::Error,
    },
    /// No answer in [`ENGINE_TIMEOUT`].
    #[error("{what}: no answer within {ENGINE_TIMEOUT:?}")]
    Timeout {
        /// What was asked.
        what: String,
    },
    /// The guard's thread or runtime could not start.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The guard's cleanup did not finish in time.
    #[error("cleanup did not finish in time")]
    Late,
}

async fn force_remove(client: &Docker, id: &str) -> Result<(), Trouble> {
    let options = RemoveContainerOptionsBuilder::new()
        .force(true)
        .v(true)
        .build();
    match tokio::time::timeout(ENGINE_TIMEOUT, client.remove_container(id, Some(options))).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404 | 409,
            ..
        })) => Ok(()),
        Ok(Err(source)) => Err(Trouble::Engine {
            endpoint: id.to_owned(),
            source,
        }),
        Err(_) => Err(Trouble::Timeout {
            what: id.to_owned(),
        }),
    }
}

/// What an [`EngineGuard`] removes.
#[derive(Clone, Debug)]
enum Guarded {
    Container(String),
    Image(String),
}

/// Removes a container (or an image) on one engine when dropped, even while unwinding. As
/// `iterion_test_support::ContainerGuard`, but for either engine: the removal runs on a fresh
/// thread with its own runtime and connection, and `drop` waits for it, bounded.
#[derive(Debug)]
pub struct EngineGuard {
    engine: Engine,
    what: Guarded,
}

impl EngineGuard {
    pub fn container(engine: Engine, id: impl Into<String>) -> Self {
        EngineGuard {
            engine,
            what: Guarded::Container(id.into()),
        }
    }

    pub fn image(engine: Engine, reference: impl Into<String>) -> Self {
        EngineGuard {
            engine,
            what: Guarded::Image(reference.into()),
        }
    }
}

impl Drop for EngineGuard {
    fn drop(&mut self) {
        let (engine, what) = (self.engine, self.what.clone());
        let (tx, rx) = mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("engine-guard".to_owned())
            .spawn(move || {
                let result = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(Trouble::from)
                    .and_then(|runtime| {
                        runtime.block_on(async {
                            let client = engine.client().await?;
                            match &what {
                                Guarded::Container(id) => force_remove(&client, id).await,
                                Guarded::Image(image) => {
                                    let options =
                                        RemoveImageOptionsBuilder::new().force(true).build();
                                    match client.remove_image(image, Some(options), None).await {
                                        Ok(_)
                                        | Err(
                                            bollard::errors::Error::DockerResponseServerError {
                                                status_code: 404,
                                                ..
                                            },
                                        ) => Ok(()),
                                        Err(source) => Err(Trouble::Engine {
                                            endpoint: image.clone(),
                                            source,
                                        }),
                                    }
                                }
                            }
                        })
                    });
                let _ = tx.send(result);
            });
        let outcome = match spawned {
            Err(e) => Err(Trouble::Io(e)),
            Ok(_) => rx
                .recv_timeout(ENGINE_TIMEOUT * 3)
                .unwrap_or(Err(Trouble::Late)),
        };
        if let Err(reason) = outcome {
            #[allow(clippy::print_stderr)]
            {
                eprintln!(
                    "warning: {:?} guard could not remove {:?}: {reason}",
                    self.engine, self.what
                );
            }
        }
    }
}

/// Runs a test body once per engine: `engine_tests!(name, ...)` makes `docker::name` and
/// `podman::name`, each calling `name(Engine::…)`. Both paths contain `docker` (the suite module
/// is `docker_driver`), so nextest puts them in the container-engine group.
#[macro_export]
macro_rules! engine_tests {
    ($($name:ident),* $(,)?) => {
        mod docker {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::suite::engines::Engine::Docker).await;
                }
            )*
        }
        mod podman {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::suite::engines::Engine::Podman).await;
                }
            )*
        }
    };
}
