//! [`ContainerApi`] over bollard: the real Docker Engine API, and podman's compatible one.
//!
//! Each method is a direct translation: build bollard's options, call, classify the error
//! ([`classify`]). Connecting ([`BollardApi::connect`]) negotiates the API version first, because
//! bollard asks for a newer API than Debian's engines speak (1.41) and they would refuse it.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use async_trait::async_trait;
use bollard::Docker;
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::models::{ContainerCreateBody, VolumeCreateRequest};
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, BuildImageOptionsBuilder, CreateContainerOptionsBuilder,
    CreateImageOptionsBuilder, ListContainersOptionsBuilder, ListImagesOptionsBuilder,
    RemoveContainerOptionsBuilder, RemoveImageOptionsBuilder, WaitContainerOptionsBuilder,
};
use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use iterion_sandbox::{ImageConfig, ListedResource, PullProgress};

use crate::api::{
    ApiError, ApiResult, ApiStream, BuildRequest, ContainerApi, EngineKind, EngineVersion,
    ExecAttachment, ExecChunk, ExecRequest, ExecState,
};

/// The Engine API through bollard. Cheap to clone (one shared connection pool).
#[derive(Clone, Debug)]
pub struct BollardApi {
    docker: Docker,
}

/// Turns bollard's error into what the driver branches on.
fn classify(error: bollard::errors::Error) -> ApiError {
    use bollard::errors::Error as B;
    match error {
        B::DockerResponseServerError {
            status_code,
            message,
        } => match status_code {
            404 => ApiError::NotFound { message },
            409 => ApiError::Conflict { message },
            401 | 403 => ApiError::Unauthorized { message },
            status => ApiError::Status { status, message },
        },
        B::DockerStreamError { error } => ApiError::Stream { message: error },
        other => ApiError::Transport {
            message: other.to_string(),
        },
    }
}

/// An attached process's output as stdout and stderr chunks.
fn demuxed(
    output: std::pin::Pin<
        Box<dyn futures_util::Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>,
    >,
) -> ApiStream<ExecChunk> {
    output
        .map_err(classify)
        .try_filter_map(|chunk| async move {
            Ok(match chunk {
                LogOutput::StdOut { message } | LogOutput::Console { message } => {
                    Some(ExecChunk::Stdout(message))
                }
                LogOutput::StdErr { message } => Some(ExecChunk::Stderr(message)),
                LogOutput::StdIn { .. } => None,
            })
        })
        .boxed()
}

fn label_filters(filters: Vec<String>) -> HashMap<&'static str, Vec<String>> {
    HashMap::from([("label", filters)])
}

fn sorted(labels: Option<HashMap<String, String>>) -> BTreeMap<String, String> {
    labels.unwrap_or_default().into_iter().collect()
}

/// The step of [`BollardApi::connect`] that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectStep {
    /// Building the client for the endpoint.
    Client,
    /// `GET /version`.
    Version,
    /// Negotiating the API version.
    Negotiation,
    /// `GET /_ping`.
    Ping,
}

impl ConnectStep {
    /// What the step is, in the message: nothing for the client, `/version failed: ` and so on.
    fn prefix(self) -> &'static str {
        match self {
            ConnectStep::Client => "",
            ConnectStep::Version => "/version failed: ",
            ConnectStep::Negotiation => "version negotiation failed: ",
            ConnectStep::Ping => "ping failed: ",
        }
    }
}

/// Why one endpoint does not answer (SANDBOX.md §4.2); the message names the endpoint.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// A step failed.
    #[error("{endpoint}: {}{source}", step.prefix())]
    Failed {
        /// The endpoint tried.
        endpoint: String,
        /// The step that failed.
        step: ConnectStep,
        /// The client's error.
        #[source]
        source: bollard::errors::Error,
    },
    /// The whole connection did not finish in its budget.
    #[error("{endpoint}: no answer within {within:?}")]
    Timeout {
        /// The endpoint tried.
        endpoint: String,
        /// The budget.
        within: Duration,
    },
}

impl BollardApi {
    /// Wraps a connected client (its API version already negotiated).
    pub fn new(docker: Docker) -> BollardApi {
        BollardApi { docker }
    }

    /// Connects to `endpoint` (`unix:///…`, `tcp://…`, `http://…`), negotiates the API version,
    /// reads `/version` (to tell docker from podman) and pings, all within `within`
    /// (SANDBOX.md §4.2).
    ///
    /// # Errors
    ///
    /// Why the endpoint does not answer ([`ConnectError`]), for
    /// [`Error::Unavailable`](iterion_sandbox::Error::Unavailable).
    pub async fn connect(
        endpoint: &str,
        within: Duration,
    ) -> Result<(BollardApi, EngineVersion), ConnectError> {
        let failed = |step| {
            move |source| ConnectError::Failed {
                endpoint: endpoint.to_owned(),
                step,
                source,
            }
        };
        let docker = Docker::connect_with_host(endpoint).map_err(failed(ConnectStep::Client))?;
        let probe = async {
            // One `/version` both names the engine and negotiates the API version: podman
            // answers it by running its runtime and conmon binaries, so it is not cheap, and
            // bollard's own `negotiate_version` would ask a second time.
            let version = docker
                .version()
                .await
                .map_err(failed(ConnectStep::Version))?;
            let docker = match negotiated(endpoint, &docker, version.api_version.as_deref()) {
                Some(downgraded) => downgraded.map_err(failed(ConnectStep::Client))?,
                None => docker
                    .negotiate_version()
                    .await
                    .map_err(failed(ConnectStep::Negotiation))?,
            };
            docker.ping().await.map_err(failed(ConnectStep::Ping))?;
            Ok::<_, ConnectError>((docker, version))
        };
        let (docker, version) =
            tokio::time::timeout(within, probe)
                .await
                .map_err(|_| ConnectError::Timeout {
                    endpoint: endpoint.to_owned(),
                    within,
                })??;
        let names = version
            .components
            .iter()
            .flatten()
            .map(|component| component.name.as_str());
        let version = EngineVersion {
            kind: EngineKind::from_version_components(names),
            version: version.version.unwrap_or_default(),
            api_version: version.api_version.unwrap_or_default(),
            arch: version.arch.unwrap_or_default(),
        };
        Ok((BollardApi { docker }, version))
    }

    /// `GET /distribution/{image}/json`: whether the image's registry knows it, asked through the
    /// engine (its credentials, its proxy, its mirrors) without pulling anything. For the
    /// doctor's `image-resolvable` check (SANDBOX.md §11.3); the driver itself never calls it.
    ///
    /// # Errors
    ///
    /// The engine's answer, classified: [`ApiError::NotFound`] for an unknown manifest,
    /// [`ApiError::Unauthorized`] for a refusal, [`ApiError::Status`] for anything else the
    /// engine relays (an unreachable registry is usually a 500 naming the network error).
    pub async fn inspect_registry_image(&self, image: &str) -> ApiResult<()> {
        self.docker
            .inspect_registry_image(image, None)
            .await
            .map(drop)
            .map_err(classify)
    }

    /// Which of `paths` exist in `image`'s filesystem, in order, for the doctor's
    /// `image-contents` check (issue 19): a container is created from the image — never
    /// started, no network, labelled `iterion.io/doctor` — each path is stat'ed through
    /// `HEAD /containers/{id}/archive` (a final symlink counts as present), and the container is
    /// removed whatever happened. The image must be local (nothing is pulled).
    ///
    /// # Errors
    ///
    /// The engine's answer to the create or a stat, classified.
    pub async fn paths_in_image(&self, image: &str, paths: &[String]) -> ApiResult<Vec<bool>> {
        let body = ContainerCreateBody {
            image: Some(image.to_owned()),
            entrypoint: Some(vec!["/iterion-doctor-never-started".to_owned()]),
            cmd: Some(Vec::new()),
            network_disabled: Some(true),
            labels: Some(HashMap::from([(
                "iterion.io/doctor".to_owned(),
                "image-contents".to_owned(),
            )])),
            ..ContainerCreateBody::default()
        };
        let id = self
            .docker
            .create_container(
                None::<bollard::query_parameters::CreateContainerOptions>,
                body,
            )
            .await
            .map(|created| created.id)
            .map_err(classify)?;
        let mut found = Vec::with_capacity(paths.len());
        let mut failure = None;
        for path in paths {
            let options = bollard::query_parameters::ContainerArchiveInfoOptionsBuilder::default()
                .path(path)
                .build();
            match self
                .docker
                .get_container_archive_info(&id, Some(options))
                .await
                .map_err(classify)
            {
                Ok(_) => found.push(true),
                Err(error) if error.is_not_found() => found.push(false),
                Err(error) => {
                    failure = Some(error);
                    break;
                }
            }
        }
        let removed = self.remove_container(&id).await;
        match (failure, removed) {
            (Some(error), _) | (None, Err(error)) => Err(error),
            (None, Ok(())) => Ok(found),
        }
    }
}

/// A client for `endpoint` speaking `api_version` when the engine speaks an older API than
/// bollard's default; the same client when it speaks the default or newer; `None` when the
/// version cannot be read or the scheme has no direct constructor (then bollard negotiates).
fn negotiated(
    endpoint: &str,
    docker: &Docker,
    api_version: Option<&str>,
) -> Option<Result<Docker, bollard::errors::Error>> {
    let (major, minor) = api_version?.trim().split_once('.')?;
    let server = bollard::ClientVersion {
        major_version: major.parse().ok()?,
        minor_version: minor.parse().ok()?,
    };
    let client = docker.client_version();
    if (server.major_version, server.minor_version) >= (client.major_version, client.minor_version)
    {
        return Some(Ok(docker.clone()));
    }
    // Only a unix socket is rebuilt directly: a `tcp://` endpoint may be TLS (DOCKER_TLS_VERIFY),
    // which only bollard's own constructor knows how to set up, so it negotiates instead.
    const REQUEST_TIMEOUT_SECS: u64 = 120;
    endpoint
        .starts_with("unix://")
        .then(|| Docker::connect_with_unix(endpoint, REQUEST_TIMEOUT_SECS, &server))
}

impl BollardApi {
    /// `GET /containers/json`, every container (`all`) or the running ones, by label filters.
    async fn listed_containers(
        &self,
        all: bool,
        label_filters_: Vec<String>,
    ) -> ApiResult<Vec<ListedResource>> {
        let options = ListContainersOptionsBuilder::default()
            .all(all)
            .filters(&label_filters(label_filters_))
            .build();
        let containers = self
            .docker
            .list_containers(Some(options))
            .await
            .map_err(classify)?;
        Ok(containers
            .into_iter()
            .map(|container| ListedResource {
                id: container.id.unwrap_or_default(),
                name: container
                    .names
                    .and_then(|names| names.into_iter().next())
                    .map(|name| name.trim_start_matches('/').to_owned())
                    .unwrap_or_default(),
                labels: sorted(container.labels),
            })
            .collect())
    }
}

#[async_trait]
impl ContainerApi for BollardApi {
    async fn inspect_image(&self, image: &str) -> ApiResult<Option<ImageConfig>> {
        match self.docker.inspect_image(image).await.map_err(classify) {
            Ok(inspect) => Ok(Some(ImageConfig {
                id: inspect.id.unwrap_or_default(),
                env: inspect.config.and_then(|c| c.env).unwrap_or_default(),
                architecture: inspect.architecture.unwrap_or_default(),
            })),
            Err(error) if error.is_not_found() => Ok(None),
            Err(error) => Err(error),
        }
    }

    fn pull_image(&self, image: &str) -> ApiStream<PullProgress> {
        let options = CreateImageOptionsBuilder::default()
            .from_image(image)
            .build();
        self.docker
            .create_image(Some(options), None, None)
            .map(|item| {
                let info = item.map_err(classify)?;
                let status = info.status.unwrap_or_default();
                let detail = info.progress_detail.unwrap_or_default();
                Ok(PullProgress {
                    layer: info.id.unwrap_or_else(|| status.clone()),
                    status,
                    current: detail
                        .current
                        .and_then(|c| u64::try_from(c).ok())
                        .unwrap_or(0),
                    total: detail.total.and_then(|t| u64::try_from(t).ok()),
                })
            })
            .boxed()
    }

    fn build_image(&self, request: BuildRequest, context: Bytes) -> ApiStream<String> {
        let build_args: HashMap<String, String> = request.build_args.into_iter().collect();
        let labels: HashMap<String, String> = request.labels.into_iter().collect();
        let mut options = BuildImageOptionsBuilder::default()
            .dockerfile(&request.dockerfile)
            .t(&request.tag)
            .rm(true)
            .forcerm(true)
            .buildargs(&build_args)
            .labels(&labels);
        if let Some(network) = &request.network_mode {
            options = options.networkmode(network);
        }
        let options = options.build();
        // bollard's build stream borrows its client; a task owns a clone and forwards. Dropping
        // the returned stream closes the channel, the task drops the request, and the engine
        // cancels the build.
        let (tx, rx) = tokio::sync::mpsc::channel::<ApiResult<String>>(64);
        let docker = self.docker.clone();
        tokio::spawn(async move {
            let mut stream = docker.build_image(options, None, Some(bollard::body_full(context)));
            while let Some(item) = stream.next().await {
                let item = item
                    .map_err(classify)
                    .map(|info| info.stream.or(info.status).unwrap_or_default());
                if tx.send(item).await.is_err() {
                    break;
                }
            }
        });
        futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        })
        .boxed()
    }

    async fn remove_image(&self, image: &str) -> ApiResult<()> {
        // Never prune: an untagged parent may be a cache layer a concurrent build is using
        // (issue 15 item 13 removes a run's own intermediates by label instead).
        let options = RemoveImageOptionsBuilder::default().noprune(true).build();
        self.docker
            .remove_image(image, Some(options), None)
            .await
            .map(drop)
            .map_err(classify)
    }

    async fn list_images(&self, label_filters_: Vec<String>) -> ApiResult<Vec<ListedResource>> {
        // `all`: a build's intermediate images are listed too.
        let options = ListImagesOptionsBuilder::default()
            .all(true)
            .filters(&label_filters(label_filters_))
            .build();
        let images = self
            .docker
            .list_images(Some(options))
            .await
            .map_err(classify)?;
        Ok(images
            .into_iter()
            .map(|image| ListedResource {
                name: image.repo_tags.first().cloned().unwrap_or_default(),
                id: image.id,
                labels: image.labels.into_iter().collect(),
            })
            .collect())
    }

    async fn create_volume(&self, name: &str, labels: BTreeMap<String, String>) -> ApiResult<()> {
        let request = VolumeCreateRequest {
            name: Some(name.to_owned()),
            labels: Some(labels.into_iter().collect()),
            ..VolumeCreateRequest::default()
        };
        self.docker
            .create_volume(request)
            .await
            .map(drop)
            .map_err(classify)
    }

    async fn list_volumes(&self, label_filters_: Vec<String>) -> ApiResult<Vec<ListedResource>> {
        let options = bollard::query_parameters::ListVolumesOptionsBuilder::default()
            .filters(&label_filters(label_filters_))
            .build();
        let listed = self
            .docker
            .list_volumes(Some(options))
            .await
            .map_err(classify)?;
        Ok(listed
            .volumes
            .unwrap_or_default()
            .into_iter()
            .map(|volume| ListedResource {
                id: volume.name.clone(),
                name: volume.name,
                labels: volume.labels.into_iter().collect(),
            })
            .collect())
    }

    async fn remove_volume(&self, name: &str) -> ApiResult<()> {
        self.docker
            .remove_volume(name, None::<bollard::query_parameters::RemoveVolumeOptions>)
            .await
            .map_err(classify)
    }

    async fn create_container(&self, name: &str, body: ContainerCreateBody) -> ApiResult<String> {
        let options = CreateContainerOptionsBuilder::default().name(name).build();
        self.docker
            .create_container(Some(options), body)
            .await
            .map(|created| created.id)
            .map_err(classify)
    }

    async fn start_container(&self, id: &str) -> ApiResult<()> {
        self.docker
            .start_container(id, None)
            .await
            .map_err(classify)
    }

    async fn attach_container(&self, id: &str) -> ApiResult<ExecAttachment> {
        let options = AttachContainerOptionsBuilder::new()
            .stream(true)
            .stdin(true)
            .stdout(true)
            .stderr(true)
            .build();
        let attached = self
            .docker
            .attach_container(id, Some(options))
            .await
            .map_err(classify)?;
        Ok(ExecAttachment {
            output: demuxed(attached.output),
            input: attached.input,
        })
    }

    async fn wait_container(&self, id: &str) -> ApiResult<i64> {
        let options = WaitContainerOptionsBuilder::default()
            .condition("not-running")
            .build();
        let mut waited = std::pin::pin!(self.docker.wait_container(id, Some(options)));
        match waited.next().await {
            Some(Ok(response)) => Ok(response.status_code),
            // bollard reports a non-zero status as an error carrying it.
            Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => Ok(code),
            Some(Err(error)) => Err(classify(error)),
            None => Err(ApiError::Status {
                status: 500,
                message: format!("wait for container {id}: no answer"),
            }),
        }
    }

    async fn remove_container(&self, id: &str) -> ApiResult<()> {
        let options = RemoveContainerOptionsBuilder::default()
            .force(true)
            .v(true)
            .build();
        self.docker
            .remove_container(id, Some(options))
            .await
            .map_err(classify)
    }

    async fn pause_container(&self, id: &str) -> ApiResult<()> {
        self.docker.pause_container(id).await.map_err(classify)
    }

    async fn list_containers(&self, label_filters_: Vec<String>) -> ApiResult<Vec<ListedResource>> {
        self.listed_containers(true, label_filters_).await
    }

    async fn list_running_containers(
        &self,
        label_filters_: Vec<String>,
    ) -> ApiResult<Vec<ListedResource>> {
        self.listed_containers(false, label_filters_).await
    }

    async fn create_exec(&self, container: &str, request: ExecRequest) -> ApiResult<String> {
        let options = CreateExecOptions::<String> {
            attach_stdin: Some(request.attach_stdin),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            tty: Some(false),
            env: Some(request.env),
            cmd: Some(request.cmd),
            user: request.user,
            working_dir: request.working_dir,
            ..CreateExecOptions::default()
        };
        self.docker
            .create_exec(container, options)
            .await
            .map(|created| created.id)
            .map_err(classify)
    }

    async fn start_exec(&self, exec_id: &str) -> ApiResult<ExecAttachment> {
        let options = StartExecOptions {
            detach: false,
            tty: false,
            // Frames are at most the engine's 32 KiB copy buffer; a larger read buffer means
            // fewer wake-ups on a large output.
            output_capacity: Some(64 * 1024),
        };
        match self
            .docker
            .start_exec(exec_id, Some(options))
            .await
            .map_err(classify)?
        {
            StartExecResults::Attached { output, input } => Ok(ExecAttachment {
                output: demuxed(output),
                input,
            }),
            StartExecResults::Detached => Err(ApiError::Status {
                status: 200,
                message: "the engine detached an exec that was started attached".to_owned(),
            }),
        }
    }

    async fn inspect_exec(&self, exec_id: &str) -> ApiResult<ExecState> {
        let inspect = self.docker.inspect_exec(exec_id).await.map_err(classify)?;
        Ok(ExecState {
            running: inspect.running.unwrap_or(false),
            exit_code: inspect.exit_code,
        })
    }
}
