//! The seam between the docker/podman driver and the Engine API (STYLE.md §5.4).
//!
//! [`ContainerApi`] has one method per Engine API call the driver makes, and nothing else: its
//! arguments and answers are small typed values, so the driver's unit tests script a
//! [`ContainerApi`] fake and assert the calls it recorded, and the real implementation
//! ([`BollardApi`](crate::BollardApi)) is a thin translation onto bollard.
//!
//! Errors are classified once, here, into [`ApiError`]: the driver branches on *what happened*
//! (not found, conflict, removal already in progress) and never on an engine's message text.

use std::collections::BTreeMap;
use std::pin::Pin;

use async_trait::async_trait;
use bollard::models::ContainerCreateBody;
use bytes::Bytes;
use futures_util::stream::BoxStream;
use iterion_sandbox::{ImageConfig, ListedResource, PullProgress};
use tokio::io::AsyncWrite;

/// What an Engine API call answered when it did not succeed. The driver decides from the
/// variant; the message is for humans.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// 404: no such container, image, exec or volume.
    #[error("not found: {message}")]
    NotFound {
        /// The engine's message.
        message: String,
    },
    /// 409: a name already in use, or a removal already in progress.
    #[error("conflict: {message}")]
    Conflict {
        /// The engine's message.
        message: String,
    },
    /// 401/403 from a registry behind a pull (the image is private or does not exist).
    #[error("access denied: {message}")]
    Unauthorized {
        /// The engine's message.
        message: String,
    },
    /// Any other HTTP status from the engine.
    #[error("engine answered {status}: {message}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The engine's message.
        message: String,
    },
    /// An error reported inside a progress stream (pull, build), after a 200.
    #[error("{message}")]
    Stream {
        /// The engine's error detail.
        message: String,
    },
    /// The request never got an answer: connection refused, reset, timed out.
    #[error("transport: {message}")]
    Transport {
        /// What the client saw.
        message: String,
    },
    /// A recording fake was called with no reply scripted for this call (tests only): a missing
    /// script is an error, never a panic.
    #[error("no reply scripted for {call}")]
    Unscripted {
        /// The call that found no reply.
        call: String,
    },
}

impl ApiError {
    /// Whether the thing asked about does not exist (404).
    pub fn is_not_found(&self) -> bool {
        matches!(self, ApiError::NotFound { .. })
    }

    /// Whether the registry refused or did not know the image: what makes a pull fall back
    /// (SANDBOX.md §4.3 step 3). A stream error counts when it says so, because the engines
    /// report a missing manifest inside the pull's progress stream.
    pub fn is_image_unavailable(&self) -> bool {
        match self {
            ApiError::NotFound { .. } | ApiError::Unauthorized { .. } => true,
            ApiError::Stream { message } => {
                let message = message.to_ascii_lowercase();
                [
                    "not found",
                    "manifest unknown",
                    "unauthorized",
                    "access denied",
                    "denied:",
                ]
                .iter()
                .any(|needle| message.contains(needle))
            }
            ApiError::Conflict { .. }
            | ApiError::Status { .. }
            | ApiError::Transport { .. }
            | ApiError::Unscripted { .. } => false,
        }
    }
}

/// `Result` of a [`ContainerApi`] call.
pub(crate) type ApiResult<T> = Result<T, ApiError>;

/// A stream of answers from a [`ContainerApi`] call.
pub(crate) type ApiStream<T> = BoxStream<'static, ApiResult<T>>;

/// Which engine answers on the socket (SANDBOX.md §4.2): what `Driver::name` reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// Docker Engine (dockerd).
    Docker,
    /// Podman's Docker-compatible API service (`podman system service`).
    Podman,
}

impl EngineKind {
    /// `docker` or `podman`: the driver's name and the command in rendered log lines.
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Docker => "docker",
            EngineKind::Podman => "podman",
        }
    }

    /// The engine that answered a `/version` whose components are named `component_names`:
    /// podman when one of them is `Podman Engine`, docker otherwise (SANDBOX.md §4.2).
    pub fn from_version_components<'a>(
        component_names: impl IntoIterator<Item = &'a str>,
    ) -> EngineKind {
        if component_names
            .into_iter()
            .any(|name| name.trim().eq_ignore_ascii_case("Podman Engine"))
        {
            EngineKind::Podman
        } else {
            EngineKind::Docker
        }
    }
}

impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What `/version` said, reduced to what the driver uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineVersion {
    /// Docker or Podman.
    pub kind: EngineKind,
    /// The engine's own version (`20.10.24`, `4.3.1`).
    pub version: String,
    /// The API version it speaks (`1.41`).
    pub api_version: String,
    /// The server's architecture as it reports it (`amd64`, `arm64`); empty when unsaid.
    pub arch: String,
}

/// One `docker build` of a context tar (SANDBOX.md §4.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildRequest {
    /// The Dockerfile, relative to the context, `/`-separated.
    pub dockerfile: String,
    /// The tag to give the image.
    pub tag: String,
    /// `--build-arg` pairs.
    pub build_args: BTreeMap<String, String>,
    /// Labels put on the image.
    pub labels: BTreeMap<String, String>,
    /// `none` for an untrusted run; `None` leaves the engine's default.
    pub network_mode: Option<String>,
}

/// One `create_exec` (SANDBOX.md §4.7).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExecRequest {
    /// argv.
    pub cmd: Vec<String>,
    /// `K=V` pairs, already filtered.
    pub env: Vec<String>,
    /// The working directory.
    pub working_dir: Option<String>,
    /// The user.
    pub user: Option<String>,
    /// Whether stdin is attached.
    pub attach_stdin: bool,
}

/// A piece of an exec's output, demultiplexed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExecChunk {
    /// Bytes the process wrote to stdout.
    Stdout(Bytes),
    /// Bytes the process wrote to stderr.
    Stderr(Bytes),
}

/// An exec's stdin.
pub(crate) type ExecStdin = Pin<Box<dyn AsyncWrite + Send>>;

/// An attached exec: its output as it arrives, and its stdin.
pub struct ExecAttachment {
    /// stdout and stderr chunks, in the order the engine sent them; ends when the process's
    /// output ends.
    pub output: ApiStream<ExecChunk>,
    /// The process's stdin. Shutting it down closes the process's stdin.
    pub input: ExecStdin,
}

impl std::fmt::Debug for ExecAttachment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecAttachment").finish_non_exhaustive()
    }
}

/// What `inspect_exec` said.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExecState {
    /// Whether the process still runs.
    pub running: bool,
    /// Its exit code, once known.
    pub exit_code: Option<i64>,
}

/// The Engine API calls the docker/podman driver makes, and only those (STYLE.md §5.4).
///
/// Implementations: [`BollardApi`](crate::BollardApi) (the real engine); a recording fake in the
/// unit tests.
#[async_trait]
pub trait ContainerApi: Send + Sync {
    /// `GET /images/{image}/json`; `Ok(None)` when the image is not present (404).
    async fn inspect_image(&self, image: &str) -> ApiResult<Option<ImageConfig>>;

    /// `POST /images/create?fromImage=…`: the pull's progress, one report per engine message.
    fn pull_image(&self, image: &str) -> ApiStream<PullProgress>;

    /// `POST /build` (classic builder) with `context` as the tar body: the build's output
    /// text, one item per engine message.
    fn build_image(&self, request: BuildRequest, context: Bytes) -> ApiStream<String>;

    /// `DELETE /images/{image}` (pruning: the untagged parents it leaves — a classic build's
    /// intermediate images, some of which carry the run's labels but not yet the store's — are
    /// removed with it, so nothing of the build outlives the run; issue 15 item 13).
    async fn remove_image(&self, image: &str) -> ApiResult<()>;

    /// `GET /images/json` filtered by `label=` filters.
    async fn list_images(&self, label_filters: Vec<String>) -> ApiResult<Vec<ListedResource>>;

    /// `POST /volumes/create` with labels; creating an existing volume is a success.
    async fn create_volume(&self, name: &str, labels: BTreeMap<String, String>) -> ApiResult<()>;

    /// `GET /volumes` filtered by `label=` filters (`id` and `name` are the volume's name).
    async fn list_volumes(&self, label_filters: Vec<String>) -> ApiResult<Vec<ListedResource>>;

    /// `DELETE /volumes/{name}`; a volume in use is refused by the engine (409).
    async fn remove_volume(&self, name: &str) -> ApiResult<()>;

    /// `POST /containers/create?name=…`; returns the container id.
    async fn create_container(&self, name: &str, body: ContainerCreateBody) -> ApiResult<String>;

    /// `POST /containers/{id}/start`.
    async fn start_container(&self, id: &str) -> ApiResult<()>;

    /// `POST /containers/{id}/attach?stream=1&stdin=1&stdout=1&stderr=1`: the container's own
    /// command's stdio (created with `OpenStdin`), attached before its start so nothing it
    /// writes is missed. Default: refused (an API that cannot attach).
    async fn attach_container(&self, id: &str) -> ApiResult<ExecAttachment> {
        Err(ApiError::Status {
            status: 501,
            message: format!("attach to container {id}: not supported"),
        })
    }

    /// `POST /containers/{id}/wait?condition=not-running`: the exit code of the container's
    /// own command once it ends. Default: refused (an API that cannot wait).
    async fn wait_container(&self, id: &str) -> ApiResult<i64> {
        Err(ApiError::Status {
            status: 501,
            message: format!("wait for container {id}: not supported"),
        })
    }

    /// `DELETE /containers/{id}?force=true&v=true`.
    async fn remove_container(&self, id: &str) -> ApiResult<()>;

    /// `POST /containers/{id}/pause`: freezes every process of the container (its cgroup's
    /// freezer), answering once they are frozen.
    async fn pause_container(&self, id: &str) -> ApiResult<()>;

    /// `GET /containers/json?all=true` filtered by `label=` filters.
    async fn list_containers(&self, label_filters: Vec<String>) -> ApiResult<Vec<ListedResource>>;

    /// `GET /containers/json` (running containers only) filtered by `label=` filters.
    async fn list_running_containers(
        &self,
        label_filters: Vec<String>,
    ) -> ApiResult<Vec<ListedResource>>;

    /// `POST /containers/{id}/exec`; returns the exec id.
    async fn create_exec(&self, container: &str, request: ExecRequest) -> ApiResult<String>;

    /// `POST /exec/{id}/start`, attached, no tty.
    async fn start_exec(&self, exec_id: &str) -> ApiResult<ExecAttachment>;

    /// `GET /exec/{id}/json`.
    async fn inspect_exec(&self, exec_id: &str) -> ApiResult<ExecState>;
}
