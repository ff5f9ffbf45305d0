//! The kubernetes driver itself ([`KubernetesDriver`]): `prepare` (the core's policy), `start`
//! (Secrets, the pod, the NetworkPolicy, readiness, copy-in, the egress probe, `post_create`) and
//! the factory's constructor (SANDBOX.md §5.5–§5.7).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use iterion_sandbox::{
    AdvertisedPort, Capabilities, DEFAULT_USER, Driver, DriverConstructor, Error, KubernetesRule,
    LogLevel, NullRunLog, Phase, PreparedSpec, Progress, ProxyAddresses, ProxyBind,
    ProxyConfigurer, Result, RunInfo, RunLog, SandboxRun, Spec, apply_engine_user_default,
    kubernetes_validate_spec, run_post_create, run_with_phase_timeout,
};
use iterion_vocab::Environment;

use crate::api::{FIELD_MANAGER, KubeApi, KubeError, KubeObject, KubeRsApi, ObjectKind};
use crate::classify::{NotReady, PodProgress, classify_not_ready, pod_progress};
use crate::in_cluster::{InClusterError, in_cluster_client};
use crate::manifest::{KUBE_ENGINE_BIN, PodInputs, pod_plan};
use crate::mounts::parse_kube_mount;
use crate::run::{self, CleanupOnDrop, KubernetesRun, RunShared, engine_error, kube_error};
use crate::scheduling::SchedulingPolicy;
use crate::settings::{ITERION_POD_IP, KubernetesSettings};
use crate::worktree::{GitDirCopy, git_dir_target_problem, read_git_dir_copy};

/// The kubernetes driver. Cheap to clone; safe for concurrent runs.
#[derive(Clone)]
pub struct KubernetesDriver {
    api: Arc<dyn KubeApi>,
    settings: Arc<KubernetesSettings>,
    log: Arc<dyn RunLog>,
}

impl std::fmt::Debug for KubernetesDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubernetesDriver")
            .field("namespace", &self.api.namespace())
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl KubernetesDriver {
    /// A driver on `api` with `settings`, logging nowhere until wrapped with a run log.
    pub fn new(api: Arc<dyn KubeApi>, settings: KubernetesSettings) -> KubernetesDriver {
        KubernetesDriver {
            api,
            settings: Arc::new(settings),
            log: Arc::new(NullRunLog),
        }
    }

    /// The API the driver speaks to (the cloud reaper lists and deletes through it).
    pub fn api(&self) -> Arc<dyn KubeApi> {
        Arc::clone(&self.api)
    }

    fn log(&self, level: LogLevel, line: &str) {
        self.log.line(level, line);
    }

    async fn apply(&self, object: KubeObject) -> Result<()> {
        let (kind, name) = (object.kind(), object.name().to_owned());
        self.log(LogLevel::Info, &format!("kubectl apply --server-side --force-conflicts --field-manager={FIELD_MANAGER} {kind}/{name}"));
        run_with_phase_timeout(Phase::KubernetesApply, self.settings.apply_timeout, async {
            self.api
                .apply(&object)
                .await
                .map_err(kube_error(format!("apply {kind}/{name}")))
        })
        .await
    }

    async fn delete_stale_pod(&self, name: &str) -> Result<()> {
        self.log(
            LogLevel::Info,
            &format!("kubectl delete pod {name} --grace-period=0 --wait=false --ignore-not-found"),
        );
        match tokio::time::timeout(
            self.settings.apply_timeout,
            self.api.delete(ObjectKind::Pod, name),
        )
        .await
        {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) if error.is_not_found() => Ok(()),
            Ok(Err(error)) => Err(kube_error(format!("delete stale pod {name}"))(error)),
            Err(_) => Err(engine_error(
                format!("delete stale pod {name}"),
                "deadline exceeded",
            )),
        }
    }

    /// Polls the pod until `Ready=True`; a terminal phase ends the wait with an error.
    async fn wait_ready(&self, name: &str) -> Result<()> {
        loop {
            match self.api.get_pod(name).await {
                Ok(pod) => match pod_progress(&pod) {
                    PodProgress::Ready => return Ok(()),
                    PodProgress::Ended { phase, why } => {
                        let detail = match classify_not_ready(Some(&pod)) {
                            NotReady::Terminal { scheduling } => scheduling,
                            NotReady::Capacity { why } => why,
                        };
                        return Err(engine_error(
                            format!("wait for pod {name}"),
                            format!("pod ended in phase {phase}: {why}\nscheduling: {detail}"),
                        ));
                    }
                    PodProgress::Waiting => {}
                },
                Err(KubeError::Forbidden { message }) => {
                    return Err(kube_error(format!("read pod {name}"))(
                        KubeError::Forbidden { message },
                    ));
                }
                Err(error) => {
                    tracing::debug!(pod = name, %error, "kubernetes: reading the pod failed; retrying");
                }
            }
            tokio::time::sleep(self.settings.poll_interval).await;
        }
    }

    /// The pod-ready phase with the §16.3 classification of a timeout.
    async fn await_ready(&self, name: &str) -> Result<()> {
        let waited = run_with_phase_timeout(
            Phase::PodReady,
            self.settings.pod_ready_timeout,
            self.wait_ready(name),
        )
        .await;
        let Err(error @ Error::PhaseTimeout { .. }) = waited else {
            return waited;
        };
        let pod = tokio::time::timeout(self.settings.apply_timeout, self.api.get_pod(name))
            .await
            .ok()
            .and_then(std::result::Result::ok);
        match classify_not_ready(pod.as_ref()) {
            NotReady::Capacity { why } => Err(Error::Capacity { why }),
            NotReady::Terminal { scheduling } => {
                self.log(
                    LogLevel::Warn,
                    &format!("{error}\nscheduling: {scheduling}"),
                );
                Err(error)
            }
        }
    }

    /// Copy-in (SANDBOX.md §5.7 step 8): the workspace, then a gitfile workspace's git dir, in
    /// one `workspace copy` bound.
    async fn copy_in(
        &self,
        shared: &RunShared,
        workspace: &Path,
        git_dir: Option<&GitDirCopy>,
    ) -> Result<()> {
        run_with_phase_timeout(Phase::WorkspaceCopy, self.settings.copy_timeout, async {
            if workspace.is_dir() {
                shared
                    .copy_dir_in(workspace, &shared.workspace_folder, "copy workspace")
                    .await?;
            }
            if let Some(copy) = git_dir {
                shared
                    .copy_dir_in(&copy.host, &copy.pod, "copy the git dir")
                    .await?;
            }
            Ok(())
        })
        .await
    }

    /// A gitfile workspace's git dir to copy in (SANDBOX.md §5.7 step 8), unless its target in
    /// the pod is refused (warned: git will not work in the pod, the run goes on).
    async fn git_dir_copy(&self, spec: &Spec, info: &RunInfo) -> Option<GitDirCopy> {
        let folder = match spec.workspace_folder.as_deref() {
            Some(folder) => folder.to_owned(),
            None => info.workspace_path.to_str()?.to_owned(),
        };
        let copy = read_git_dir_copy(&info.workspace_path, &folder).await?;
        if let Some(why) = git_dir_target_problem(&copy.pod, &folder) {
            self.log(
                LogLevel::Warn,
                &format!(
                    "sandbox: kubernetes: the workspace's .git is a gitfile, but its git dir {} cannot go to {} in the pod ({why}); git will not work there",
                    copy.host.display(),
                    copy.pod
                ),
            );
            return None;
        }
        self.log(
            LogLevel::Info,
            &format!(
                "sandbox: kubernetes: the workspace's .git is a gitfile; its git dir {} is copied to {} in the pod",
                copy.host.display(),
                copy.pod
            ),
        );
        Some(copy)
    }

    /// The egress probe (SANDBOX.md §5.7 step 9): a direct connect that must fail. A connect
    /// that succeeds fails the run; a blocked one is `Some(true)` (enforced); anything else is
    /// `None` (inconclusive: logged, and `sandbox_started.egress_enforced` is null).
    async fn egress_probe(&self, shared: &RunShared, target: &str) -> Result<Option<bool>> {
        let argv = [KUBE_ENGINE_BIN, "__egress-probe", target]
            .map(str::to_owned)
            .to_vec();
        let probe = tokio::time::timeout(
            Duration::from_secs(30),
            shared.exec_raw(argv, None, false, None, None),
        )
        .await;
        match probe {
            Ok(Ok(result)) if result.exit_code == 0 => Err(engine_error(
                "egress probe",
                format!(
                    "egress not enforced: direct connection to {target} succeeded; the cluster CNI does not enforce NetworkPolicy"
                ),
            )),
            Ok(Ok(result)) if result.exit_code == 1 => {
                self.log(
                    LogLevel::Info,
                    &format!("sandbox: egress probe: direct connection to {target} blocked"),
                );
                Ok(Some(true))
            }
            Ok(Ok(result)) => {
                self.log(LogLevel::Warn, &format!("sandbox: egress probe to {target} inconclusive (exit code {}); enforcement unknown", result.exit_code));
                Ok(None)
            }
            Ok(Err(error)) => {
                self.log(LogLevel::Warn, &format!("sandbox: egress probe to {target} inconclusive ({error}); enforcement unknown"));
                Ok(None)
            }
            Err(_) => {
                self.log(LogLevel::Warn, &format!("sandbox: egress probe to {target} inconclusive (no answer in 30s); enforcement unknown"));
                Ok(None)
            }
        }
    }

    async fn start_inner(
        &self,
        prepared: PreparedSpec,
        info: RunInfo,
        guard: &mut CleanupOnDrop,
    ) -> Result<KubernetesRun> {
        prepared.check_driver(run::DRIVER)?;
        let spec = prepared.spec;
        kubernetes_validate_spec(&spec)?;
        let image = prepared
            .image
            .clone()
            .or_else(|| spec.image_ref().map(str::to_owned))
            .ok_or(Error::KubernetesRefused {
                rule: KubernetesRule::ImageRequired,
            })?;
        let scheduling = SchedulingPolicy::parse(&self.settings.scheduling)?;
        let mounts = spec
            .mounts
            .iter()
            .map(|m| parse_kube_mount(m))
            .collect::<Result<Vec<_>>>()?;
        for mount in &spec.engine_mounts {
            self.log(
                LogLevel::Debug,
                &format!(
                    "sandbox: kubernetes: engine mount {} ({}) not supported; skipped",
                    mount.target, mount.purpose
                ),
            );
        }
        let git_dir = self.git_dir_copy(&spec, &info).await;
        let plan = pod_plan(&PodInputs {
            spec: &spec,
            image: &image,
            info: &info,
            owner: self.settings.owner.as_ref(),
            pod_ip: self.settings.pod_ip.as_deref(),
            scheduling: &scheduling,
            mounts: &mounts,
            git_dir: git_dir.as_ref().map(|copy| copy.pod.as_str()),
        })?;
        for key in &plan.skipped_env {
            self.log(
                LogLevel::Warn,
                &format!("sandbox: env {key:?} skipped (invalid pair)"),
            );
        }
        let shared = Arc::new(RunShared::new(
            Arc::clone(&self.api),
            Arc::clone(&self.log),
            &plan,
            spec.secret_files.clone(),
            info.clone(),
            self.settings.owner.clone(),
            self.settings.apply_timeout,
        ));
        // From the first apply on, every failure deletes what exists (the guard, or the caller).
        guard.shared = Some(Arc::clone(&shared));
        for secret in [&plan.secret_files, &plan.ca].into_iter().flatten() {
            self.apply(KubeObject::Secret(Box::new(secret.clone())))
                .await?;
        }
        self.delete_stale_pod(&plan.pod_name).await?;
        self.apply(KubeObject::Pod(Box::new(plan.pod.clone())))
            .await?;
        if let Some(policy) = &plan.network_policy {
            self.apply(KubeObject::NetworkPolicy(Box::new(policy.clone())))
                .await?;
        }
        self.await_ready(&plan.pod_name).await?;
        self.copy_in(&shared, &info.workspace_path, git_dir.as_ref())
            .await?;
        let egress_enforced =
            if let (Some(_), Some(target)) = (&plan.network_policy, &self.settings.egress_probe) {
                self.egress_probe(&shared, target).await?
            } else {
                None
            };
        let run = KubernetesRun {
            shared: Arc::clone(&shared),
            egress_enforced,
        };
        if let Some(snippet) = spec.post_create.as_deref().filter(|s| !s.trim().is_empty()) {
            run_post_create(
                &run,
                snippet,
                Arc::clone(&self.log),
                self.settings.post_create_timeout,
            )
            .await?;
        }
        self.log(
            LogLevel::Info,
            &format!("sandbox active: kubernetes pod {}", plan.pod_name),
        );
        Ok(run)
    }
}

#[async_trait]
impl Driver for KubernetesDriver {
    fn name(&self) -> &str {
        run::DRIVER
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::KUBERNETES
    }

    /// SANDBOX.md §5.5: default an absent user to `1000:1000` (logged), then
    /// [`validate_spec`](iterion_sandbox::kubernetes_validate_spec). No pull: the kubelet pulls. Creates nothing.
    async fn prepare(&self, spec: &Spec, _progress: &dyn Progress) -> Result<PreparedSpec> {
        let mut spec = spec.clone();
        if apply_engine_user_default(&mut spec) {
            self.log(
                LogLevel::Info,
                &format!(
                    "sandbox: kubernetes: no user named; running as {}",
                    DEFAULT_USER
                ),
            );
        }
        kubernetes_validate_spec(&spec)?;
        Ok(PreparedSpec::new(self.name(), spec))
    }

    /// SANDBOX.md §5.7: Secrets, the pod, the NetworkPolicy, ready, copy-in, egress probe,
    /// `post_create`. Any failure after the first apply deletes everything created.
    async fn start(&self, prepared: PreparedSpec, info: RunInfo) -> Result<Box<dyn SandboxRun>> {
        let mut guard = CleanupOnDrop { shared: None };
        match self.start_inner(prepared, info, &mut guard).await {
            Ok(run) => {
                guard.shared = None;
                Ok(Box::new(run))
            }
            Err(error) => {
                if let Some(shared) = guard.shared.take() {
                    shared
                        .closed
                        .store(true, std::sync::atomic::Ordering::SeqCst);
                    shared.delete_all().await;
                }
                Err(error)
            }
        }
    }

    fn proxy_configurer(&self) -> Option<&dyn ProxyConfigurer> {
        Some(self)
    }

    fn scheduling_policy(&self) -> Option<Result<String>> {
        Some(SchedulingPolicy::parse(&self.settings.scheduling).map(|p| p.summary()))
    }

    fn with_run_log(&self, log: Arc<dyn RunLog>) -> Option<Arc<dyn Driver>> {
        Some(Arc::new(KubernetesDriver {
            api: Arc::clone(&self.api),
            settings: Arc::clone(&self.settings),
            log,
        }))
    }
}

impl ProxyConfigurer for KubernetesDriver {
    /// `0.0.0.0:0`, advertised at `ITERION_POD_IP` (SANDBOX.md §6.2).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidSetting`] without `ITERION_POD_IP`: the pod could not reach the proxy.
    fn proxy_addresses(&self, _run_dir: &Path) -> Result<ProxyAddresses> {
        let ip = self.settings.pod_ip.clone().ok_or(Error::InvalidSetting {
            variable: ITERION_POD_IP,
            value: String::new(),
            want: "the runner pod's IP (downward API status.podIP) when a proxy is active",
        })?;
        Ok(ProxyAddresses {
            bind: ProxyBind::Tcp(std::net::SocketAddr::from(([0, 0, 0, 0], 0))),
            advertise_host: ip,
            advertise_port: AdvertisedPort::Bound,
        })
    }
}

/// Constructs the kubernetes driver for the factory: in-cluster only (SANDBOX.md §5.6).
#[derive(Clone, Debug, Default)]
pub struct KubernetesConstructor {
    settings: Option<KubernetesSettings>,
    env: Environment,
}

impl KubernetesConstructor {
    /// The registry entry; the in-cluster detection and the settings read `env` at construction.
    pub fn from_env(env: &Environment) -> KubernetesConstructor {
        KubernetesConstructor {
            settings: None,
            env: env.clone(),
        }
    }
}

fn unavailable(why: InClusterError) -> Error {
    Error::Unavailable {
        driver: run::DRIVER.to_owned(),
        reason: why.to_string(),
    }
}

#[async_trait]
impl DriverConstructor for KubernetesConstructor {
    async fn construct(&self) -> Result<Arc<dyn Driver>> {
        let (client, namespace) = in_cluster_client(&self.env).map_err(unavailable)?;
        let settings = self
            .settings
            .clone()
            .unwrap_or_else(|| KubernetesSettings::from_env(&self.env));
        let api = KubeRsApi::new(client, namespace);
        Ok(Arc::new(KubernetesDriver::new(Arc::new(api), settings)))
    }
}
