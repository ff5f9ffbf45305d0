//! The docker/podman driver itself ([`DockerDriver`]): connecting to an engine, `prepare` (pull),
//! `start` (screen, create, start, `post_create`) and the listing and removal calls the reaper
//! makes (SANDBOX.md §4).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use futures_util::StreamExt;
use iterion_sandbox::{
    AdvertisedPort, Builder, CLEANUP_TIMEOUT, Capabilities, Driver, DriverKind, Error, LABEL_IMAGE,
    LABEL_MANAGED, LABEL_PURPOSE, LABEL_RUN_ID, LABEL_STORE, LogLevel, ManagedResource, NullRunLog,
    Phase, PreparedSpec, Progress, ProxyAddresses, ProxyBind, ProxyConfigurer, Result, RunInfo,
    RunLog, SandboxRun, ScreenContext, Spec, Stager, build_image_tag, filter_managed,
    managed_filters, nix_volume_name, run_post_create, run_with_phase_timeout,
    validate_spec_mounts,
};

use crate::api::{ApiError, ContainerApi, EngineKind, ExecAttachment};
use crate::bollard_api::BollardApi;
use crate::endpoints::{CONTAINER_HOST, DOCKER_HOST};
use crate::plan::{
    self, CreateInputs, NIX_VOLUME_PURPOSE, create_plan, nix_volume_labels, workspace_folder,
};
use crate::run::{self, DockerRun, RemoveOnDrop, RunParts};
use crate::secrets::{self, SecretPlan, secret_plan};
use crate::settings::DockerSettings;
use crate::shared::Shared;
use crate::warm::{self, NotPooled, WarmPool};
use crate::{agent, engine_binary, render};
use iterion_sandbox::exec_agent::AttachedAgent;
use iterion_sandbox::exec_agent::frame::Greeting;

pub(crate) use crate::endpoints::CONNECT_TIMEOUT;
/// The fixed in-sandbox port of the egress proxy (SANDBOX.md §4.6).
pub(crate) const PROXY_PORT: u16 = 3128;

/// The docker/podman driver. Cheap to clone; safe for concurrent runs.
#[derive(Clone)]
pub struct DockerDriver {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for DockerDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerDriver")
            .field("engine", &self.shared.engine)
            .field("settings", &self.shared.settings)
            .finish_non_exhaustive()
    }
}

impl DockerDriver {
    /// A driver over `api`, which speaks to `engine`. Writes to no run log until
    /// [`Driver::with_run_log`].
    pub fn new(api: Arc<dyn ContainerApi>, engine: EngineKind, settings: DockerSettings) -> Self {
        let pool = Arc::new(WarmPool::new(settings.warm, Arc::clone(&api), engine));
        DockerDriver {
            shared: Arc::new(Shared {
                api,
                engine,
                settings,
                log: Arc::new(NullRunLog),
                pool,
            }),
        }
    }

    /// Connects to the first endpoint that answers (negotiating the API version, reading
    /// `/version`, pinging; `CONNECT_TIMEOUT` each) and names the driver after the engine
    /// found there.
    ///
    /// # Errors
    ///
    /// [`Error::Unavailable`] for `driver` listing each endpoint's reason.
    pub async fn connect(
        driver: DriverKind,
        endpoints: &[String],
        settings: DockerSettings,
    ) -> Result<DockerDriver> {
        let mut reasons = Vec::new();
        for endpoint in endpoints {
            match BollardApi::connect(endpoint, CONNECT_TIMEOUT).await {
                Ok((api, version)) => {
                    tracing::debug!(
                        "sandbox: {} {} (API {}) answers at {endpoint}",
                        version.kind,
                        version.version,
                        version.api_version
                    );
                    let api: Arc<dyn ContainerApi> = Arc::new(api);
                    let pool =
                        warm::process_pool(endpoint, version.kind, settings.warm, Arc::clone(&api));
                    return Ok(DockerDriver {
                        shared: Arc::new(Shared {
                            api,
                            engine: version.kind,
                            settings,
                            log: Arc::new(NullRunLog),
                            pool,
                        }),
                    });
                }
                Err(reason) => reasons.push(reason.to_string()),
            }
        }
        Err(Error::Unavailable {
            driver: driver.as_str().to_owned(),
            reason: if reasons.is_empty() {
                format!(
                    "no endpoint to try ({DOCKER_HOST} or {CONTAINER_HOST} is set for the other engine)"
                )
            } else {
                reasons.join("; ")
            },
        })
    }

    /// The ids of the warm pool's entries ready to be claimed (issue 18 item 4; empty without
    /// `ITERION_SANDBOX_WARM`). Refills run in the background: this is a snapshot.
    pub fn warm_ready(&self) -> Vec<String> {
        self.shared.pool.ready_ids()
    }

    /// The engine that answers.
    pub fn engine(&self) -> EngineKind {
        self.shared.engine
    }

    /// This store's managed containers, in every state (SANDBOX.md §4.10): `{id, name, run_id}`,
    /// `run_id = ""` when the label is absent.
    ///
    /// # Errors
    ///
    /// [`Error::Engine`] when the engine cannot list.
    pub async fn list_managed(&self, store_id: &str) -> Result<Vec<ManagedResource>> {
        let listed = self
            .shared
            .api
            .list_containers(managed_filters(store_id))
            .await
            .map_err(self.shared.engine_error("list managed containers"))?;
        Ok(filter_managed(&listed, store_id))
    }

    /// This store's managed images (built images; SANDBOX.md §4.10).
    ///
    /// # Errors
    ///
    /// [`Error::Engine`] when the engine cannot list.
    pub async fn list_managed_images(&self, store_id: &str) -> Result<Vec<ManagedResource>> {
        let listed = self
            .shared
            .api
            .list_images(managed_filters(store_id))
            .await
            .map_err(self.shared.engine_error("list managed images"))?;
        Ok(filter_managed(&listed, store_id))
    }

    /// Removes an image (never its untagged parents: they may be a concurrent build's cache);
    /// one that is already gone is a success, one still in use is the engine's refusal.
    ///
    /// # Errors
    ///
    /// [`Error::Engine`] when the engine refuses.
    pub async fn remove_image(&self, image: &str) -> Result<()> {
        match self.shared.api.remove_image(image).await {
            Err(error) if error.is_not_found() => Ok(()),
            other => other.map_err(self.shared.engine_error(format!("remove image {image}"))),
        }
    }

    /// Images labelled managed and with a run id that carry no store label: the intermediate
    /// images of a classic build (its `LABEL` steps commit one image per label, the store's
    /// last), left when a run's cleanup did not finish. Each is unique to its run (the run id is
    /// in it), so no other build's cache is among them. A managed image without a run id (the
    /// first `LABEL` step, shared by every build from the same base through the cache) is never
    /// listed: removing it could pull a layer from under a concurrent build.
    ///
    /// # Errors
    ///
    /// [`Error::Engine`] when the engine cannot list.
    pub async fn list_unattributed_images(&self) -> Result<Vec<ManagedResource>> {
        let listed = self
            .shared
            .api
            .list_images(vec![format!("{LABEL_MANAGED}=true")])
            .await
            .map_err(self.shared.engine_error("list managed images"))?;
        Ok(listed
            .into_iter()
            .filter(|image| {
                !image.labels.contains_key(LABEL_STORE)
                    && image
                        .labels
                        .get(LABEL_RUN_ID)
                        .is_some_and(|run| !run.is_empty())
            })
            .map(|image| ManagedResource {
                run_id: image.labels.get(LABEL_RUN_ID).cloned().unwrap_or_default(),
                id: image.id,
                name: image.name,
            })
            .collect())
    }

    /// This store's shared `/nix` volumes, each with the image id prefix it was made for
    /// (`None` for a volume whose name does not say it).
    ///
    /// # Errors
    ///
    /// [`Error::Engine`] when the engine cannot list.
    pub async fn list_nix_volumes(&self, store_id: &str) -> Result<Vec<(String, Option<String>)>> {
        let mut filters = managed_filters(store_id);
        filters.push(format!("{LABEL_PURPOSE}={NIX_VOLUME_PURPOSE}"));
        let listed = self
            .shared
            .api
            .list_volumes(filters)
            .await
            .map_err(self.shared.engine_error("list managed volumes"))?;
        Ok(listed
            .into_iter()
            .filter(|v| {
                let label = |key: &str| v.labels.get(key).map(String::as_str);
                label(LABEL_MANAGED) == Some("true")
                    && label(LABEL_STORE) == Some(store_id)
                    && label(LABEL_PURPOSE) == Some(NIX_VOLUME_PURPOSE)
            })
            .map(|volume| {
                let prefix = match volume.labels.get(LABEL_IMAGE).cloned() {
                    // A volume made before the image label existed: its name holds the prefix.
                    None => volume.name.strip_prefix("iterion-nix-").map(str::to_owned),
                    Some(image) => Some(image),
                };
                (volume.name, prefix)
            })
            .collect())
    }

    /// Whether the image `prefix` names is gone from the engine (an inspect error keeps it).
    pub async fn image_is_gone(&self, prefix: &str) -> bool {
        matches!(self.shared.api.inspect_image(prefix).await, Ok(None))
    }

    /// Removes this store's shared `/nix` volumes whose image is gone (each trusted build makes a
    /// new image, so a new volume; issue 15 item 13). A volume still in use is refused by the
    /// engine and kept. Returns the volumes removed.
    ///
    /// # Errors
    ///
    /// [`Error::Engine`] when the engine cannot list.
    pub async fn reap_nix_volumes(&self, store_id: &str) -> Result<Vec<String>> {
        let mut removed = Vec::new();
        for (name, prefix) in self.list_nix_volumes(store_id).await? {
            let Some(prefix) = prefix else { continue };
            if !self.image_is_gone(&prefix).await {
                continue;
            }
            match self.shared.api.remove_volume(&name).await {
                Ok(()) => removed.push(name),
                Err(error) if error.is_not_found() => {}
                Err(error) => tracing::debug!("reaper: keep volume {name}: {error}"),
            }
        }
        Ok(removed)
    }

    /// Force-removes a container; one that is already gone (or being removed) is a success.
    ///
    /// # Errors
    ///
    /// [`Error::Engine`] when the engine refuses or does not answer in `REMOVE_TIMEOUT`.
    pub async fn remove(&self, id: &str) -> Result<()> {
        run::remove_container(&self.shared, id).await
    }

    /// Removes every managed container of `store_id` labelled with `run_id`; returns how many
    /// were there.
    ///
    /// # Errors
    ///
    /// The first listing or removal failure.
    pub async fn remove_run(&self, store_id: &str, run_id: &str) -> Result<usize> {
        let mut filters = managed_filters(store_id);
        filters.push(format!("{LABEL_RUN_ID}={run_id}"));
        let listed = self
            .shared
            .api
            .list_containers(filters)
            .await
            .map_err(self.shared.engine_error("list run containers"))?;
        let owned: Vec<ManagedResource> = filter_managed(&listed, store_id)
            .into_iter()
            .filter(|resource| resource.run_id == run_id)
            .collect();
        for resource in &owned {
            self.remove(&resource.id).await?;
        }
        Ok(owned.len())
    }

    /// Inspects `image`, pulling it when absent; falls back to `fallback` when the registry does
    /// not know it or refuses it (SANDBOX.md §4.3). Returns the image used and its config.
    async fn ensure_image(
        &self,
        image: &str,
        fallback: Option<&str>,
        progress: &dyn Progress,
    ) -> Result<(String, iterion_sandbox::ImageConfig)> {
        let shared = &self.shared;
        if let Some(config) = shared
            .api
            .inspect_image(image)
            .await
            .map_err(shared.engine_error(format!("inspect image {image}")))?
        {
            return Ok((image.to_owned(), config));
        }
        let pulled =
            run_with_phase_timeout(Phase::ImagePull, shared.settings.pull_timeout, async {
                match self.pull(image, progress).await {
                    Ok(()) => Ok(image.to_owned()),
                    Err(error) if error.is_image_unavailable() && fallback.is_some() => {
                        let fallback = fallback.unwrap_or_default();
                        shared.log(
                            LogLevel::Warn,
                            &format!("sandbox: {image} not found; using fallback {fallback}"),
                        );
                        self.pull(fallback, progress)
                            .await
                            .map(|()| fallback.to_owned())
                            .map_err(|error| pull_failed(fallback, &error))
                    }
                    Err(error) => Err(pull_failed(image, &error)),
                }
            })
            .await?;
        let config = shared
            .api
            .inspect_image(&pulled)
            .await
            .map_err(shared.engine_error(format!("inspect image {pulled}")))?
            .ok_or_else(|| Error::PullFailed {
                image: pulled.clone(),
                reason: "the engine does not list the image after pulling it".to_owned(),
            })?;
        Ok((pulled, config))
    }

    async fn pull(
        &self,
        image: &str,
        progress: &dyn Progress,
    ) -> std::result::Result<(), ApiError> {
        self.shared.log(
            LogLevel::Info,
            &render::render_pull(self.shared.engine, image),
        );
        let mut stream = self.shared.api.pull_image(image);
        while let Some(update) = stream.next().await {
            progress.pull(&update?);
        }
        Ok(())
    }

    /// Step 4–5 of a cold start: create (a name conflict is a leftover of this run id: remove
    /// it, retry once), arm the guard, start. A plan whose PID 1 is the exec agent is attached
    /// before the start and greeted after it; an agent that does not greet is logged, its
    /// container removed, and the run goes on with the idle command (the engine then starts
    /// the agent through an exec, or uses the driver's exec).
    async fn create_and_start(
        &self,
        plan: &plan::CreatePlan,
        guard: &mut RemoveOnDrop,
    ) -> Result<(String, Option<AttachedAgent>)> {
        let shared = &self.shared;
        if !plan::runs_agent(&plan.body) {
            return Ok((self.create_then_start(plan, guard, false).await?.0, None));
        }
        let (id, attachment) = self.create_then_start(plan, guard, true).await?;
        let why = match attachment {
            // Created with the run's env: the greeting adds nothing.
            Some(Ok(attachment)) => match agent::greet(
                attachment,
                agent::exit_code(Arc::clone(&shared.api), id.clone()),
                &Greeting::default(),
                agent::GREET_WITHIN,
            )
            .await
            {
                Ok(agent) => return Ok((id, Some(agent))),
                Err(why) => why,
            },
            Some(Err(error)) => error.to_string(),
            None => "no attach".to_owned(),
        };
        shared.log(
            LogLevel::Warn,
            &format!(
                "sandbox: exec agent unavailable as the container's command ({why}); starting it with {} {}",
                plan::SANDBOX_ENTRYPOINT,
                plan::SANDBOX_CMD
            ),
        );
        guard.disarm();
        run::remove_container(shared, &id).await?;
        let mut idle = plan.clone();
        plan::idle_command(&mut idle.body);
        Ok((self.create_then_start(&idle, guard, false).await?.0, None))
    }

    /// Create, arm, (attach,) start.
    async fn create_then_start(
        &self,
        plan: &plan::CreatePlan,
        guard: &mut RemoveOnDrop,
        attach: bool,
    ) -> Result<(
        String,
        Option<std::result::Result<ExecAttachment, ApiError>>,
    )> {
        let shared = &self.shared;
        shared.log(LogLevel::Info, &render::render_run(shared.engine, plan));
        let id = match shared
            .api
            .create_container(&plan.name, plan.body.clone())
            .await
        {
            Err(ApiError::Conflict { .. }) => {
                run::remove_container(shared, &plan.name).await?;
                shared
                    .api
                    .create_container(&plan.name, plan.body.clone())
                    .await
            }
            other => other,
        }
        .map_err(shared.engine_error(format!("create container {}", plan.name)))?;
        guard.arm(&id);
        // Attached before the start, so the agent's hello is not missed.
        let attachment = if attach {
            Some(shared.api.attach_container(&id).await)
        } else {
            None
        };
        // Step 5: start. Step 6 (the egress bridge) is the engine's, right after start returns:
        // a proxied container has no route until the bridge is ready.
        shared
            .api
            .start_container(&id)
            .await
            .map_err(shared.engine_error(format!("start container {}", plan.name)))?;
        Ok((id, attachment))
    }

    /// Attaches to a claimed pool entry's own command, the exec agent waiting unattached, and
    /// greets it with the run's container env (the entry was created without it). An agent that
    /// does not answer is logged and left to idle: the engine then starts one through an exec,
    /// whose env the driver's exec supplies.
    async fn attach_claimed(&self, id: &str, env: &[(String, String)]) -> Option<AttachedAgent> {
        let shared = &self.shared;
        let greeting = Greeting { env: env.to_vec() };
        let why = match shared.api.attach_container(id).await {
            Ok(attachment) => {
                let exit_code = agent::exit_code(Arc::clone(&shared.api), id.to_owned());
                match agent::greet(
                    attachment,
                    exit_code,
                    &greeting,
                    agent::CLAIMED_GREET_WITHIN,
                )
                .await
                {
                    Ok(agent) => return Some(agent),
                    Err(why) => why,
                }
            }
            Err(error) => error.to_string(),
        };
        shared.log(
            LogLevel::Warn,
            &format!(
                "sandbox: exec agent of warm pool entry {id} unavailable ({why}); the engine starts one"
            ),
        );
        None
    }

    /// Takes a ready pool entry of `shape` and hands it the run's per-run binds: the entry's id
    /// and the slots to remove at cleanup. A hand-over that fails removes the entry (it may
    /// hold part of the run's dirs) and answers `None`: the run starts cold.
    async fn claim(&self, shape: &warm::Shape, store: &str) -> Option<(String, Vec<PathBuf>)> {
        let shared = &self.shared;
        let entry = shared.pool.take(shape, store).await?;
        let handed = {
            let (shape, entry) = (shape.clone(), entry.clone());
            tokio::task::spawn_blocking(move || warm::hand_over(&shape, &entry))
                .await
                .unwrap_or_else(|join| Err(join.to_string()))
        };
        match handed {
            Ok(mut leftovers) => {
                // The claim marker goes with the container, after it.
                leftovers.extend(warm::claim_of(&entry));
                Some((entry.id, leftovers))
            }
            Err(reason) => {
                shared.log(
                    LogLevel::Warn,
                    &format!(
                        "sandbox: warm pool entry {} not used ({reason}); starting cold",
                        entry.id
                    ),
                );
                let _ = run::remove_container(shared, &entry.id).await;
                let slots = warm::entry_slots(&entry);
                let _ = tokio::task::spawn_blocking(move || {
                    warm::remove_slots(slots.iter().map(PathBuf::as_path));
                })
                .await;
                None
            }
        }
    }

    async fn start_inner(
        &self,
        prepared: PreparedSpec,
        info: RunInfo,
        guard: &mut RemoveOnDrop,
    ) -> Result<DockerRun> {
        let shared = &self.shared;
        prepared.check_driver(shared.engine.as_str())?;
        let spec = &prepared.spec;
        let Some(image) = prepared.image.clone().filter(|image| !image.is_empty()) else {
            return Err(Error::InvalidSpec {
                field: "image".to_owned(),
                reason: "nothing to run: prepare (and build) did not resolve an image".to_owned(),
            });
        };
        // Steps 1–2: the workspace is there and bindable; every mount, argument and env pair is
        // screened before the first API call.
        let mut info = info;
        // Each author bind is then pinned (issue 15 item 1): the engine is handed a staging
        // mount of the very object screened, under the per-run dir, released once started.
        // Engine binds inside a directory a live sandbox writes (a §14 child's bundle dir in
        // the shared workspace) are pinned the same way.
        let (canonical_workspace, screened, mut stager, pinned_engine) = {
            let spec = spec.clone();
            let workspace = info.workspace_path.clone();
            let (trust, scope, run_dir) =
                (info.trust, info.mount_scope.clone(), info.run_dir.clone());
            let env = shared.settings.environment.clone();
            tokio::task::spawn_blocking(move || {
                let ctx = ScreenContext::from_env(&workspace, &env)?.for_run(trust, &scope);
                let canonical = ctx.validate_workspace(&workspace)?;
                let mut screened = validate_spec_mounts(&spec, &ctx)?;
                let mut stager = Stager::new(&run_dir);
                for mount in &mut screened {
                    if let Some(source) = mount.host_source.take() {
                        let pinned = stager.pin(&mount.raw, &source, mount.spec.read_only, &ctx)?;
                        mount.host_source = Some(pinned);
                    }
                }
                let mut pinned_engine = Vec::new();
                for (index, mount) in spec.engine_mounts.iter().enumerate() {
                    let source = Path::new(&mount.source);
                    let inside_writable = ctx
                        .sandbox_writable_dir(source)
                        .is_some_and(|dir| dir != source);
                    if mount.kind == iterion_sandbox::EngineMountKind::Bind && inside_writable {
                        let rendered =
                            format!("type=bind,source={},target={}", mount.source, mount.target);
                        let pinned = stager.pin_engine(&rendered, source, mount.read_only, &ctx)?;
                        pinned_engine.push((index, pinned));
                    }
                }
                Ok::<_, Error>((canonical, screened, stager, pinned_engine))
            })
            .await
            .map_err(|join| Error::Io {
                operation: "screen mounts for",
                path: info.workspace_path.clone(),
                source: std::io::Error::other(join.to_string()),
            })??
        };
        // Bind what was screened, never the path as handed in.
        info.workspace_path = canonical_workspace;
        // Step 3: the secret files and the CA the container trusts, in the per-run dir.
        let secrets = if spec.secret_files.is_empty() {
            SecretPlan::default()
        } else {
            let secret_files = spec.secret_files.clone();
            let (run_dir, user) = (info.run_dir.clone(), spec.user.clone());
            tokio::task::spawn_blocking(move || {
                let host_uid = run_dir_owner(&run_dir)?;
                let plan = secret_plan(&secret_files, &run_dir, user.as_deref(), host_uid);
                secrets::write_secret_files(&plan, &secret_files)?;
                Ok::<_, Error>(plan)
            })
            .await
            .map_err(|join| Error::Io {
                operation: "write secret files in",
                path: info.run_dir.clone(),
                source: std::io::Error::other(join.to_string()),
            })??
        };
        if let Some(pem) = &info.proxy_ca_pem {
            write_ca(&info.run_dir, pem).await?;
        }
        if info.transparent_egress {
            write_run_file(
                &info.run_dir,
                iterion_sandbox::RESOLV_CONF_RUN_DIR_FILE,
                iterion_sandbox::RESOLV_CONF,
            )
            .await?;
        }
        let nix_volume = if shared.settings.persist_nix {
            prepared
                .image_config
                .as_ref()
                .and_then(|config| nix_volume_name(&config.id, info.trust, None))
        } else {
            None
        };
        let pinned = !pinned_engine.is_empty();
        let pinned_spec;
        let spec = if pinned_engine.is_empty() {
            spec
        } else {
            let mut patched = spec.clone();
            for (index, pinned) in pinned_engine {
                if let Some(mount) = patched.engine_mounts.get_mut(index) {
                    mount.source = pinned.to_string_lossy().into_owned();
                }
            }
            pinned_spec = patched;
            &pinned_spec
        };
        let plan = create_plan(&CreateInputs {
            engine: shared.engine,
            image: &image,
            spec,
            info: &info,
            author_mounts: &screened,
            nix_volume: nix_volume.as_deref(),
            extra_labels: &shared.settings.extra_labels,
            secrets: &secrets,
        })?;
        if let Some(volume) = &nix_volume {
            let labels = nix_volume_labels(&info.store_id, volume);
            shared.log(
                LogLevel::Info,
                &render::render_volume_create(shared.engine, volume, &labels),
            );
            shared
                .api
                .create_volume(volume, labels)
                .await
                .map_err(shared.engine_error(format!("create volume {volume}")))?;
        }
        let workspace = workspace_folder(spec, &info)?;
        let built = build_image_tag(&info.run_id);
        let built_image = (image == built).then_some(built);
        // Issue 18 item 4: a ready entry of the same shape stands in for create + start.
        let shape = if shared.pool.enabled() {
            let not = NotPooled {
                secret_files: !spec.secret_files.is_empty(),
                built_image: built_image.is_some(),
                staged_binds: screened.iter().any(|m| m.host_source.is_some()) || pinned,
            };
            // A pool entry runs the agent as its command too, unattached until a run claims
            // it and greets it with its env ([`DockerDriver::attach_claimed`]).
            let body = plan.body.clone();
            let info_for_shape = info.clone();
            let shaped = tokio::task::spawn_blocking(move || {
                warm::shape_of(&body, &info_for_shape, not, &warm::host_kind)
            })
            .await
            .unwrap_or_else(|join| Err(join.to_string()));
            match shaped {
                Ok(shape) => Some(shape),
                Err(reason) => {
                    shared.log(
                        LogLevel::Info,
                        &format!("sandbox: warm pool: this run is not poolable ({reason})"),
                    );
                    None
                }
            }
        } else {
            None
        };
        let claimed = match &shape {
            Some(shape) => self.claim(shape, &info.store_id).await,
            None => None,
        };
        let warm = claimed.is_some();
        let mut attached = None;
        let (id, base_env, leftovers) = match claimed {
            Some((id, leftovers)) => {
                shared.log(
                    LogLevel::Info,
                    &format!(
                        "sandbox: claimed warm pool entry {id} for run {}",
                        info.run_id
                    ),
                );
                guard.arm_claimed(&id, &leftovers);
                let env = shape.as_ref().map(|s| s.env.clone()).unwrap_or_default();
                if plan::runs_agent(&plan.body) {
                    attached = self.attach_claimed(&id, &env).await;
                }
                (id, env, leftovers)
            }
            None => {
                let started = self.create_and_start(&plan, guard).await;
                // On an error the stager's drop releases the staging mounts.
                let (id, agent) = started?;
                attached = agent;
                (id, Vec::new(), Vec::new())
            }
        };
        // The started container's mount namespace holds its own reference to every staged
        // source; the staging mounts go now (and on every failure, when the stager drops).
        stager.release()?;
        if let Some(shape) = &shape {
            shared.pool.refill(&shape.key, &info.store_id);
        }
        let run = DockerRun::new(
            Arc::clone(shared),
            RunParts {
                id: id.clone(),
                workspace: workspace.clone(),
                spec_user: spec.user.clone(),
                built_image,
                run_dir: info.run_dir.clone(),
                run_id: info.run_id.clone(),
                secrets,
                base_env,
                warm_leftovers: leftovers,
                claimed: warm,
                attached,
            },
        );
        // Step 7: post_create, logged at info, bounded by its phase.
        if let Some(snippet) = spec.post_create.as_deref().filter(|s| !s.trim().is_empty()) {
            run_post_create(
                &run.logged_at(LogLevel::Info),
                snippet,
                Arc::clone(&shared.log),
                shared.settings.post_create_timeout,
            )
            .await?;
        }
        // Step 8.
        let short: String = id.chars().take(12).collect();
        shared.log(
            LogLevel::Info,
            &format!(
                "sandbox active: driver={} image={image} container={short} network={} workspace={workspace}{}",
                shared.engine,
                if info.proxy.is_some() { "none" } else { "default" },
                if warm { " warm=claimed" } else { "" },
            ),
        );
        Ok(run)
    }
}

/// The uid the engine runs as, read from the per-run dir it created (created here, 0700, when
/// the caller did not). Blocking.
fn run_dir_owner(run_dir: &Path) -> Result<u32> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let io = |operation| {
        let path = run_dir.to_owned();
        move |source| Error::Io {
            operation,
            path,
            source,
        }
    };
    if !run_dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(run_dir)
            .map_err(io("create"))?;
    }
    Ok(std::fs::metadata(run_dir).map_err(io("stat"))?.uid())
}

fn pull_failed(image: &str, error: &ApiError) -> Error {
    Error::PullFailed {
        image: image.to_owned(),
        reason: error.to_string(),
    }
}

async fn write_ca(run_dir: &Path, pem: &str) -> Result<()> {
    write_run_file(run_dir, plan::CA_RUN_DIR_FILE, pem).await
}

/// Writes `contents` at `relative` under the per-run dir, world-readable (bound read-only).
async fn write_run_file(run_dir: &Path, relative: &str, contents: &str) -> Result<()> {
    let path = run_dir.join(relative);
    let io = |operation| {
        let path = path.clone();
        move |source| Error::Io {
            operation,
            path,
            source,
        }
    };
    if let Some(dir) = path.parent() {
        tokio::fs::create_dir_all(dir).await.map_err(io("create"))?;
    }
    tokio::fs::write(&path, contents)
        .await
        .map_err(io("write"))?;
    use std::os::unix::fs::PermissionsExt;
    tokio::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))
        .await
        .map_err(io("chmod"))
}

#[async_trait]
impl Driver for DockerDriver {
    fn name(&self) -> &str {
        self.shared.engine.as_str()
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::DOCKER
    }

    /// SANDBOX.md §4.3: validate; for an image, inspect it and pull it when absent (bounded by
    /// `image pull`, progress to `progress`, falling back to `image_fallback` when the registry
    /// does not have it), then check the engine binary against its architecture. A `build:`
    /// spec is prepared as it is; [`Builder::build`] makes its image. Creates nothing.
    async fn prepare(&self, spec: &Spec, progress: &dyn Progress) -> Result<PreparedSpec> {
        spec.validate()?;
        let mut prepared = PreparedSpec::new(self.name(), spec.clone());
        if spec.build.is_some() {
            return Ok(prepared);
        }
        let Some(image) = spec.image_ref() else {
            return Err(Error::InvalidSpec {
                field: "image".to_owned(),
                reason: format!("the {} driver needs an image or a build", self.name()),
            });
        };
        iterion_sandbox::validate_plain_arg("image", image)?;
        let (image, config) = self
            .ensure_image(image, spec.image_fallback.as_deref(), progress)
            .await?;
        engine_binary::check_engine_binary(spec, &config.architecture).await?;
        prepared.image = Some(image);
        prepared.image_config = Some(config);
        Ok(prepared)
    }

    /// SANDBOX.md §4.5: screen, create `iterion-<run id>` running `sleep infinity`, start it, run
    /// `post_create`. Any failure after the create removes the container before returning.
    async fn start(&self, prepared: PreparedSpec, info: RunInfo) -> Result<Box<dyn SandboxRun>> {
        let mut guard = RemoveOnDrop::new(Arc::clone(&self.shared));
        match self.start_inner(prepared, info, &mut guard).await {
            Ok(run) => {
                guard.disarm();
                Ok(Box::new(run))
            }
            Err(error) => match guard.take() {
                None => Err(error),
                Some((id, slots)) => {
                    // A fresh budget, never the failed (or cancelled) one. A claimed entry's
                    // leftover slots go with it (they are no run's dir: nobody else would).
                    let cleanup = tokio::time::timeout(
                        CLEANUP_TIMEOUT,
                        run::remove_with_slots(&self.shared, &id, slots),
                    )
                    .await
                    .unwrap_or_else(|_| {
                        Err(self.shared.engine_error(format!("remove container {id}"))(
                            ApiError::Transport {
                                message: format!("no answer within {CLEANUP_TIMEOUT:?}"),
                            },
                        ))
                    });
                    match cleanup {
                        Ok(()) => Err(error),
                        Err(cleanup) => Err(Error::CleanupFailed {
                            error: Box::new(error),
                            cleanup: Box::new(cleanup),
                        }),
                    }
                }
            },
        }
    }

    fn builder(&self) -> Option<&dyn Builder> {
        Some(self)
    }

    fn proxy_configurer(&self) -> Option<&dyn ProxyConfigurer> {
        Some(self)
    }

    fn with_run_log(&self, log: Arc<dyn RunLog>) -> Option<Arc<dyn Driver>> {
        Some(Arc::new(DockerDriver {
            shared: Arc::new(Shared {
                api: Arc::clone(&self.shared.api),
                engine: self.shared.engine,
                settings: self.shared.settings.clone(),
                log,
                pool: Arc::clone(&self.shared.pool),
            }),
        }))
    }
}

impl ProxyConfigurer for DockerDriver {
    /// The proxy listens on `<run dir>/net/proxy.sock`; the sandbox dials `127.0.0.1:3128`,
    /// which the egress bridge splices to that socket (SANDBOX.md §4.6).
    fn proxy_addresses(&self, run_dir: &Path) -> Result<ProxyAddresses> {
        Ok(ProxyAddresses {
            bind: ProxyBind::UnixSocket(run_dir.join("net").join("proxy.sock")),
            advertise_host: "127.0.0.1".to_owned(),
            advertise_port: AdvertisedPort::Fixed(PROXY_PORT),
        })
    }
}

/// The run-dir path a test or the engine can expect the CA at.
pub fn ca_host_path(run_dir: &Path) -> PathBuf {
    run_dir.join(plan::CA_RUN_DIR_FILE)
}
