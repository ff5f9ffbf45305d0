//! The kubernetes driver (SANDBOX.md §5.5–§5.11, §16.2–§16.3): one pod per run, in the runner's
//! own namespace, through kube-rs (our decision 7).
//!
//! How it is built:
//!
//! - **Plan, then execute** (STYLE.md §5.3): [`validate_spec`](validate::validate_spec),
//!   [`pod_plan`] (Pod, Secrets, NetworkPolicy as typed k8s-openapi objects),
//!   [`classify_not_ready`] and the [`SchedulingPolicy`] are pure; the driver sequences calls on a
//!   [`KubeApi`].
//! - **One narrow seam** ([`KubeApi`]) with [`KubeRsApi`] as the real implementation. Tests run
//!   that implementation against a fake API server on loopback (`iterion-test-support`), so the
//!   kube-rs path, server-side apply and the exec websocket are exercised for real.
//! - **Rollback**: once the first object is applied, any failure (or the caller dropping
//!   `start`) deletes every object of the run, ignoring "not found" (§5.7).
//!
//! Deliberate differences from SANDBOX.md, each documented where it happens:
//!
//! - readiness is polled (`GET` the pod every [`KubernetesSettings::poll_interval`]) rather than
//!   watched: the same bound and classification, without a long-lived watch stream per run;
//! - a terminal pod seen after the `pod ready` timeout keeps the `PhaseTimeout` error (so the
//!   engine classifies it `SANDBOX_SETUP_TIMEOUT`) and its `scheduling: …` detail goes to the run
//!   log at warn, rather than into the error text;
//! - a gitfile workspace (a linked worktree) gets its git dir copied in at the path where its
//!   unchanged gitfile resolves (§5.7 step 8), into an `emptyDir` (`worktree-git`) mounted there,
//!   so that a non-root pod user can have it at `/home/…`; a relative gitfile resolves against the
//!   pod's workspace folder, and a gitfile without `commondir` (a submodule) gets its own git dir.
//!   The export leaves the host's gitfile and the shared git dir alone (`--exclude=./.git`, no
//!   loose-ref deletion): commits made in the pod stay there, their content comes back as
//!   working-tree changes (`worktree.rs`);
//! - the run-files drain (§5.11) streams the tar through a screening unpacker (`runfiles.rs`);
//!   it declines any name *containing* `..` (the spec's words, so `a..b` too), and a file that
//!   would pass the 256 MiB total, while smaller files after it may still be drained.
//!   `ITERION_ARTIFACT_FILES_DIR` stays withdrawn unless a kept mount serves it (§8.8, §17), and
//!   nothing creates `/iterion/artifact-files` in the pod: the drain serves a `pvc` mounted there,
//!   or an image that ships the dir;
//! - an exec's stdin is never closed before the process exits (closing it ends the whole exec on
//!   the v4 protocol); every command the driver feeds reads a length (`head -c <n>`);
//! - the copy-in (the workspace, the git dir too) and the export stream through bounded pipes;
//!   neither archive is held in memory (`tar_stream.rs`). Because stdin is never closed and
//!   `tar -x` reads a pipe to its EOF, the copy-in scans the tree first (stat only) to announce
//!   the archive's exact length to `head -c`; a file whose size changes between the scan and
//!   the read is copied at its scanned size (cut or zero-padded, warned), a member that vanishes
//!   fails the copy, and sockets are left out (warned) where the tar crate refused them. The
//!   archive is built by our own walk (name order, symlinks kept, no sparse-file encoding)
//!   rather than `tar::Builder::append_dir_all`.
//!
//! The hidden `iterion __egress-probe HOST:PORT` (crates/cli) is the probe's other half; the
//! engine exports a copy-based workspace back and drains its run files at teardown (crates/engine
//! `sandbox/mod.rs`).

mod api;
mod classify;
mod manifest;
mod mounts;
mod probe;
mod reap;
mod run;
pub(crate) mod scheduling;
mod tar_stream;
pub(crate) mod validate;
mod worktree;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

pub use api::{
    ExecSession, FIELD_MANAGER, KubeApi, KubeError, KubeObject, KubeResult, KubeRsApi, ObjectKind,
    exit_code_of,
};
pub use classify::{
    NotReady, PodProgress, TERMINAL_WAITING_REASONS, classify_not_ready, pod_progress,
};
pub use manifest::{
    CA_KEY, COMPONENT_SANDBOX_RUN, DEADLINE_MARGIN_SECONDS, KUBE_CA_DIR, KUBE_CA_PATH,
    KUBE_ENGINE_BIN, KUBE_SECRETS_DIR, LABEL_COMPONENT, PodInputs, PodPlan, RunnerOwner,
    SECRET_MODE, WORKLOAD_CONTAINER, ca_secret_name, pod_labels, pod_name, pod_plan,
    secret_data_key, secret_files_name, secret_files_secret,
};
pub use mounts::{KubeMount, KubeMountKind, mount_volume_name, parse_kube_mount};
pub use probe::probe_api_version;
pub use reap::{KubeReapError, KubeReapReport, reap_kubernetes_objects};
pub use run::{
    EXPORT_TIMEOUT, HEAD_CAPTURE_TIMEOUT, KubernetesRun, exec_argv, export_argv, is_clean_relative,
};
pub use scheduling::{SchedulingInputs, SchedulingPolicy};
pub use tar_stream::{TarWritten, WorkspaceTarPlan};
pub use worktree::{
    GitDirCopy, WORKTREE_GIT_VOLUME, git_dir_copy, git_dir_target_problem, lexical_clean,
    parse_gitfile, read_git_dir_copy,
};

use self::run::{CleanupOnDrop, RunShared, engine_error, kube_error};
use crate::capabilities::Capabilities;
use crate::driver::{
    AdvertisedPort, Driver, LogLevel, NullRunLog, PreparedSpec, Progress, ProxyAddresses,
    ProxyBind, ProxyConfigurer, RunInfo, RunLog, SandboxRun,
};
use crate::env::var;
use crate::error::{Error, Result};
use crate::factory::DriverConstructor;
use crate::phase::{Phase, phase_timeout_from_env, run_with_phase_timeout};
use crate::post_create::run_post_create;
use crate::spec::Spec;

/// The service-account namespace file (SANDBOX.md §5.6).
pub const SERVICE_ACCOUNT_NAMESPACE: &str =
    "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
/// The service-account token file.
pub const SERVICE_ACCOUNT_TOKEN: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";
/// The runner pod's IP (downward API): the proxy's advertise address and the NetworkPolicy peer.
pub const ITERION_POD_IP: &str = "ITERION_POD_IP";
/// The runner pod's name; with [`ITERION_RUNNER_POD_UID`], the owner of every object.
pub const ITERION_RUNNER_POD_NAME: &str = "ITERION_RUNNER_POD_NAME";
/// The runner pod's uid.
pub const ITERION_RUNNER_POD_UID: &str = "ITERION_RUNNER_POD_UID";
/// `host:port` the egress probe dials directly (default [`DEFAULT_EGRESS_PROBE`]); `off` disables.
pub const ITERION_SANDBOX_EGRESS_PROBE: &str = "ITERION_SANDBOX_EGRESS_PROBE";
/// The probe's default target.
pub const DEFAULT_EGRESS_PROBE: &str = "1.1.1.1:443";

/// The in-cluster facts the constructor reads, as values (STYLE.md §5.3).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InClusterSignals {
    /// `KUBERNETES_SERVICE_HOST`.
    pub service_host: Option<String>,
    /// The namespace file's content, when readable.
    pub namespace: Option<String>,
    /// Whether the service-account token file exists.
    pub token_present: bool,
}

impl InClusterSignals {
    /// Reads the variable and the service-account files.
    pub fn from_env() -> InClusterSignals {
        InClusterSignals {
            service_host: var(crate::env::KUBERNETES_SERVICE_HOST),
            namespace: std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE).ok(),
            token_present: Path::new(SERVICE_ACCOUNT_TOKEN).is_file(),
        }
    }
}

/// Whether this process runs in a pod with a service account (SANDBOX.md §5.6): the namespace, or
/// why not (the constructor's [`Error::Unavailable`] reason).
pub fn detect_in_cluster(signals: &InClusterSignals) -> std::result::Result<String, String> {
    if signals
        .service_host
        .as_deref()
        .is_none_or(|h| h.trim().is_empty())
    {
        return Err("KUBERNETES_SERVICE_HOST is not set (not running in a pod)".to_owned());
    }
    let namespace = signals
        .namespace
        .as_deref()
        .map(str::trim)
        .filter(|ns| !ns.is_empty())
        .ok_or_else(|| format!("{SERVICE_ACCOUNT_NAMESPACE} is missing or empty"))?;
    if !signals.token_present {
        return Err(format!(
            "{SERVICE_ACCOUNT_TOKEN} is missing (automountServiceAccountToken is off?)"
        ));
    }
    Ok(namespace.to_owned())
}

/// The driver's knobs, read once from the runner's environment ([`KubernetesSettings::from_env`]).
#[derive(Clone, Debug, PartialEq)]
pub struct KubernetesSettings {
    /// The runner pod that owns every object. Default: none.
    pub owner: Option<RunnerOwner>,
    /// The runner pod's IP. Default: none (a proxied run then fails closed).
    pub pod_ip: Option<String>,
    /// The egress probe target; `None` = off. Default: [`DEFAULT_EGRESS_PROBE`].
    pub egress_probe: Option<String>,
    /// The raw scheduling variables; parsed at every `start` (a bad policy fails each start).
    pub scheduling: SchedulingInputs,
    /// Each apply or delete call. Default: 2 min.
    pub apply_timeout: Duration,
    /// The wait for `Ready`. Default: 10 min.
    pub pod_ready_timeout: Duration,
    /// The workspace copy-in. Default: 15 min.
    pub copy_timeout: Duration,
    /// `post_create`. Default: 30 min.
    pub post_create_timeout: Duration,
    /// How often readiness is read. Default: 1 s.
    pub poll_interval: Duration,
}

impl Default for KubernetesSettings {
    fn default() -> Self {
        KubernetesSettings {
            owner: None,
            pod_ip: None,
            egress_probe: Some(DEFAULT_EGRESS_PROBE.to_owned()),
            scheduling: SchedulingInputs::default(),
            apply_timeout: Phase::KubernetesApply.default_budget(),
            pod_ready_timeout: Phase::PodReady.default_budget(),
            copy_timeout: Phase::WorkspaceCopy.default_budget(),
            post_create_timeout: Phase::PostCreate.default_budget(),
            poll_interval: Duration::from_secs(1),
        }
    }
}

fn non_empty(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

impl KubernetesSettings {
    /// Reads `ITERION_RUNNER_POD_NAME`/`_UID` (both or neither), `ITERION_POD_IP`,
    /// `ITERION_SANDBOX_EGRESS_PROBE`, the scheduling variables and the phase budgets.
    pub fn from_env() -> KubernetesSettings {
        let owner = match (
            non_empty(var(ITERION_RUNNER_POD_NAME)),
            non_empty(var(ITERION_RUNNER_POD_UID)),
        ) {
            (Some(name), Some(uid)) => Some(RunnerOwner { name, uid }),
            _ => None,
        };
        let egress_probe = match non_empty(var(ITERION_SANDBOX_EGRESS_PROBE)) {
            None => Some(DEFAULT_EGRESS_PROBE.to_owned()),
            Some(off) if off.eq_ignore_ascii_case("off") => None,
            Some(target) => Some(target),
        };
        KubernetesSettings {
            owner,
            pod_ip: non_empty(var(ITERION_POD_IP)),
            egress_probe,
            scheduling: SchedulingInputs::from_env(),
            apply_timeout: phase_timeout_from_env(Phase::KubernetesApply),
            pod_ready_timeout: phase_timeout_from_env(Phase::PodReady),
            copy_timeout: phase_timeout_from_env(Phase::WorkspaceCopy),
            post_create_timeout: phase_timeout_from_env(Phase::PostCreate),
            poll_interval: Duration::from_secs(1),
        }
    }
}

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
        validate::validate_spec(&spec)?;
        let image = prepared
            .image
            .clone()
            .or_else(|| spec.image_ref().map(str::to_owned))
            .ok_or(Error::KubernetesRefused {
                rule: validate::KubernetesRule::ImageRequired,
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
    /// [`validate_spec`](validate::validate_spec). No pull: the kubelet pulls. Creates nothing.
    async fn prepare(&self, spec: &Spec, _progress: &dyn Progress) -> Result<PreparedSpec> {
        let mut spec = spec.clone();
        if validate::apply_engine_user_default(&mut spec) {
            self.log(
                LogLevel::Info,
                &format!(
                    "sandbox: kubernetes: no user named; running as {}",
                    validate::DEFAULT_USER
                ),
            );
        }
        validate::validate_spec(&spec)?;
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
}

impl KubernetesConstructor {
    /// The registry entry; settings are read from the environment at construction.
    pub fn from_env() -> KubernetesConstructor {
        KubernetesConstructor { settings: None }
    }
}

fn unavailable(reason: impl Into<String>) -> Error {
    Error::Unavailable {
        driver: run::DRIVER.to_owned(),
        reason: reason.into(),
    }
}

/// The API of this pod's namespace, for the runner's cloud reaper (SANDBOX.md §12.2): the same
/// detection as the driver's constructor.
///
/// # Errors
///
/// [`Error::Unavailable`] when not in a pod with a service account.
pub fn in_cluster_api() -> Result<Arc<dyn KubeApi>> {
    let namespace = detect_in_cluster(&InClusterSignals::from_env()).map_err(unavailable)?;
    let config =
        kube::Config::incluster().map_err(|e| unavailable(format!("in-cluster config: {e}")))?;
    let client = kube::Client::try_from(config).map_err(|e| unavailable(format!("client: {e}")))?;
    Ok(Arc::new(KubeRsApi::new(client, namespace)))
}

#[async_trait]
impl DriverConstructor for KubernetesConstructor {
    async fn construct(&self) -> Result<Arc<dyn Driver>> {
        let namespace = detect_in_cluster(&InClusterSignals::from_env()).map_err(unavailable)?;
        let config = kube::Config::incluster()
            .map_err(|e| unavailable(format!("in-cluster config: {e}")))?;
        let client =
            kube::Client::try_from(config).map_err(|e| unavailable(format!("client: {e}")))?;
        let settings = self
            .settings
            .clone()
            .unwrap_or_else(KubernetesSettings::from_env);
        let api = KubeRsApi::new(client, namespace);
        Ok(Arc::new(KubernetesDriver::new(Arc::new(api), settings)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn in_cluster_detection_needs_the_host_the_namespace_and_the_token() {
        let signals = |host: Option<&str>, ns: Option<&str>, token| InClusterSignals {
            service_host: host.map(str::to_owned),
            namespace: ns.map(str::to_owned),
            token_present: token,
        };
        assert_eq!(
            [
                detect_in_cluster(&signals(Some("10.0.0.1"), Some("iterion\n"), true)),
                detect_in_cluster(&signals(None, Some("iterion"), true)),
                detect_in_cluster(&signals(Some("10.0.0.1"), Some("  "), true)),
                detect_in_cluster(&signals(Some("10.0.0.1"), Some("iterion"), false)),
            ]
            .map(|r| r.map_err(|why| why
                .split(' ')
                .next()
                .unwrap_or_default()
                .to_owned())),
            [
                Ok("iterion".to_owned()),
                Err("KUBERNETES_SERVICE_HOST".to_owned()),
                Err(SERVICE_ACCOUNT_NAMESPACE.to_owned()),
                Err(SERVICE_ACCOUNT_TOKEN.to_owned()),
            ]
        );
    }
}
