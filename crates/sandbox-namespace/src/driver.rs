//! [`NamespaceDriver`]: the [`Driver`] over [`crate::run`], and its constructor.

use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use iterion_sandbox::{
    AdvertisedPort, Capabilities, Driver, DriverConstructor, Error, LogLevel, NullRunLog, Phase,
    PreparedSpec, Progress, ProxyAddresses, ProxyBind, ProxyConfigurer, Result, RunInfo, RunLog,
    SandboxRun, ScreenContext, Spec, Trust, phase_timeout_from_env, run_post_create,
    validate_spec_mounts,
};
use iterion_vocab::Environment;

use crate::cgroup::{CgroupSupport, SandboxCgroup};
use crate::plan::{CA_RUN_DIR_FILE, CA_TARGET, PlanInputs, SECRETS_RUN_DIR};
use crate::run::{DRIVER, NamespaceRun, StartInputs};

/// What `sandbox_started.image` says for a namespace sandbox: there is no image.
pub const HOST_ROOT_IMAGE: &str = "host-root";

/// Constructs the namespace driver when this host lets the engine create the sandbox's
/// namespaces (a trial `unshare` in a child), else reports why ([`Error::Unavailable`]), which
/// the factory records before trying the next driver.
#[derive(Clone, Debug)]
pub struct NamespaceConstructor {
    env: Environment,
}

impl NamespaceConstructor {
    /// The constructor over the engine's environment (`HOME`, `ITERION_HOME`, the runtime root
    /// and the phase timeouts are read from it).
    pub fn from_env(env: &Environment) -> NamespaceConstructor {
        NamespaceConstructor { env: env.clone() }
    }
}

#[async_trait]
impl DriverConstructor for NamespaceConstructor {
    async fn construct(&self) -> Result<Arc<dyn Driver>> {
        let probe = tokio::task::spawn_blocking(|| {
            // The cgroup probe runs once per process; done here, off the async threads.
            let _ = crate::cgroup::support();
            crate::init::probe_unshare()
        })
        .await
        .map_err(|e| Error::Unavailable {
            driver: DRIVER.to_owned(),
            reason: e.to_string(),
        })?;
        match probe {
            Ok(()) => Ok(Arc::new(NamespaceDriver {
                env: self.env.clone(),
                log: Arc::new(NullRunLog),
            })),
            Err(errno) => Err(Error::Unavailable {
                driver: DRIVER.to_owned(),
                reason: format!(
                    "user namespaces are not usable here ({}); `iterion sandbox doctor` says why",
                    errno.desc()
                ),
            }),
        }
    }
}

/// The embedded namespace driver (see the crate doc).
#[derive(Clone)]
pub struct NamespaceDriver {
    env: Environment,
    log: Arc<dyn RunLog>,
}

impl std::fmt::Debug for NamespaceDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamespaceDriver").finish_non_exhaustive()
    }
}

impl NamespaceDriver {
    /// A driver over `env` without probing (tests and embedders that probed already).
    pub fn new(env: &Environment) -> NamespaceDriver {
        NamespaceDriver {
            env: env.clone(),
            log: Arc::new(NullRunLog),
        }
    }
}

/// The proxy listens on `<run dir>/net/proxy.sock`; the sandbox dials the egress bridge on
/// `127.0.0.1:3128`, exactly as on docker (the engine starts the bridge the same way).
impl ProxyConfigurer for NamespaceDriver {
    fn proxy_addresses(&self, run_dir: &Path) -> Result<ProxyAddresses> {
        Ok(ProxyAddresses {
            bind: ProxyBind::UnixSocket(run_dir.join("net").join("proxy.sock")),
            advertise_host: "127.0.0.1".to_owned(),
            advertise_port: AdvertisedPort::Fixed(3128),
        })
    }
}

#[async_trait]
impl Driver for NamespaceDriver {
    fn name(&self) -> &str {
        DRIVER
    }

    /// [`Capabilities::NAMESPACE`], with resource limits where this host lets the engine make
    /// a cgroup per sandbox ([`crate::cgroup::support`], probed once).
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            supports_resource_limits: crate::cgroup::support().is_ready(),
            ..Capabilities::NAMESPACE
        }
    }

    /// Why no cgroup can be made here: the hierarchy, the file and the remedy (`sandbox doctor`
    /// says the same).
    fn resource_limits_refusal(&self) -> Option<String> {
        match crate::cgroup::support() {
            CgroupSupport::Ready(_) => None,
            CgroupSupport::Refused(reason) => Some(format!(
                "the namespace driver can make no cgroup for the sandbox here: {reason}"
            )),
        }
    }

    async fn prepare(&self, spec: &Spec, _progress: &dyn Progress) -> Result<PreparedSpec> {
        spec.validate()?;
        if !spec.runs_without_image() {
            return Err(Error::InvalidSpec {
                field: "image".to_owned(),
                reason:
                    "the namespace driver runs the host's root, not an image; use docker or podman"
                        .to_owned(),
            });
        }
        let mut prepared = PreparedSpec::new(DRIVER, spec.clone());
        prepared.image = Some(HOST_ROOT_IMAGE.to_owned());
        Ok(prepared)
    }

    async fn start(&self, prepared: PreparedSpec, info: RunInfo) -> Result<Box<dyn SandboxRun>> {
        prepared.check_driver(DRIVER)?;
        let spec = prepared.spec;
        let env = self.env.clone();
        let log = Arc::clone(&self.log);
        let started_spec = spec.clone();
        let run = tokio::task::spawn_blocking(move || start_blocking(&spec, &info, &env, log))
            .await
            .map_err(|e| Error::NamespaceSetup {
                step: "start".to_owned(),
                reason: e.to_string(),
            })??;
        if let Some(snippet) = started_spec
            .post_create
            .as_deref()
            .filter(|s| !s.trim().is_empty())
        {
            let budget = phase_timeout_from_env(Phase::PostCreate, &self.env);
            if let Err(error) = run_post_create(&run, snippet, Arc::clone(&self.log), budget).await
            {
                let _ = run.cleanup().await;
                return Err(error);
            }
        }
        self.log.line(
            LogLevel::Info,
            &format!(
                "sandbox active: driver={DRIVER} image={HOST_ROOT_IMAGE} sandbox={} landlock={} workspace={} cgroup={}",
                run.id(),
                run.landlock,
                run.workdir(),
                if run.cgroup_paths.is_empty() {
                    "none".to_owned()
                } else {
                    run.cgroup_paths
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                },
            ),
        );
        Ok(Box::new(run))
    }

    fn proxy_configurer(&self) -> Option<&dyn ProxyConfigurer> {
        Some(self)
    }

    fn with_run_log(&self, log: Arc<dyn RunLog>) -> Option<Arc<dyn Driver>> {
        Some(Arc::new(NamespaceDriver {
            env: self.env.clone(),
            log,
        }))
    }
}

fn io(operation: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.to_owned();
    move |source| Error::Io {
        operation,
        path,
        source,
    }
}

/// The blocking part of a start: screening, the files of the run dir, the plan, the fork.
fn start_blocking(
    spec: &Spec,
    info: &RunInfo,
    env: &Environment,
    log: Arc<dyn RunLog>,
) -> Result<NamespaceRun> {
    let ctx =
        ScreenContext::from_env(&info.workspace_path, env)?.for_run(info.trust, &info.mount_scope);
    let workspace = ctx.validate_workspace(&info.workspace_path)?;
    let screened = validate_spec_mounts(spec, &ctx)?;
    let masked = ctx.masked_paths();
    let engine_ids = (
        nix::unistd::geteuid().as_raw(),
        nix::unistd::getegid().as_raw(),
    );
    let ids = crate::plan::ids(spec, info.trust, engine_ids)?;
    // The secret files and the CA, written into the run dir for the binds.
    let mut made: Vec<PathBuf> = Vec::new();
    let mut secret_sources: Vec<(PathBuf, String)> = Vec::new();
    if !spec.secret_files.is_empty() {
        let dir = info.run_dir.join(SECRETS_RUN_DIR);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(&dir)
            .map_err(io("create", &dir))?;
        made.push(dir.clone());
        for (index, secret) in spec.secret_files.iter().enumerate() {
            let path = dir.join(format!(
                "{index}-{}",
                iterion_vocab::secret_file_name(&secret.name)
            ));
            write_private(&path, secret.value.expose_secret(), 0o400, ids)?;
            secret_sources.push((path, secret.mount_path.clone()));
        }
    }
    if let Some(pem) = &info.proxy_ca_pem {
        let path = info.run_dir.join(CA_RUN_DIR_FILE);
        if let Some(parent) = path.parent() {
            std::fs::DirBuilder::new()
                .mode(0o755)
                .recursive(true)
                .create(parent)
                .map_err(io("create", parent))?;
            made.push(parent.to_owned());
        }
        write_private(&path, pem.as_bytes(), 0o444, ids)?;
        secret_sources.push((path, CA_TARGET.to_owned()));
    }
    // Issue 22: the egress bridge's DNS stub is the sandbox's resolver.
    if info.transparent_egress {
        let path = info.run_dir.join(iterion_sandbox::RESOLV_CONF_RUN_DIR_FILE);
        if let Some(parent) = path.parent() {
            std::fs::DirBuilder::new()
                .mode(0o755)
                .recursive(true)
                .create(parent)
                .map_err(io("create", parent))?;
            made.push(parent.to_owned());
        }
        write_private(&path, iterion_sandbox::RESOLV_CONF.as_bytes(), 0o444, ids)?;
        secret_sources.push((path, iterion_sandbox::RESOLV_CONF_TARGET.to_owned()));
    }
    let plan = crate::plan::plan(
        spec,
        info,
        &PlanInputs {
            engine_ids,
            masked: &masked,
            screened: &screened,
            workspace: &workspace,
            secret_sources: &secret_sources,
        },
    )?;
    let cgroup = match sandbox_cgroup(spec, info) {
        Ok(cgroup) => cgroup,
        Err(error) => {
            for path in &made {
                let _ = std::fs::remove_dir_all(path);
            }
            return Err(error);
        }
    };
    let started = crate::run::start(StartInputs {
        run_id: info.run_id.clone(),
        plan,
        staging: PathBuf::from("/tmp"),
        made: made.clone(),
        log,
        cgroup,
    });
    if started.is_err() {
        for path in &made {
            let _ = std::fs::remove_dir_all(path);
        }
    }
    started
}

/// The sandbox's cgroup with the spec's limits ([`iterion_sandbox::Limits::for_run`]: an
/// untrusted run's pids capped): `None` when none is asked, or when this host can make none (the
/// engine reported [`Driver::resource_limits_refusal`] in an event already).
///
/// # Errors
///
/// [`Error::NamespaceSetup`] when a cgroup can be made here but a step of it fails: the sandbox
/// never runs unlimited in silence.
fn sandbox_cgroup(spec: &Spec, info: &RunInfo) -> Result<Option<SandboxCgroup>> {
    let CgroupSupport::Ready(placement) = crate::cgroup::support() else {
        return Ok(None);
    };
    // An untrusted run's pids are capped as on docker, where a cgroup can be made.
    let limits = spec.limits.for_run(info.trust == Trust::Untrusted);
    if limits.is_empty() {
        return Ok(None);
    }
    SandboxCgroup::create(placement, &info.run_id, &limits)
        .map(Some)
        .map_err(|error| Error::NamespaceSetup {
            step: format!("cgroup {}", error.step),
            reason: format!(
                "{}: {} (the limits of ITERION_SANDBOX_MEMORY, ITERION_SANDBOX_CPUS and ITERION_SANDBOX_PIDS cannot be applied; unset them to run without limits)",
                error.path.display(),
                error.reason
            ),
        })
}

/// Writes `bytes` to a new file of mode `mode`, owned by the sandbox's host uid when the engine
/// is root and they differ (the sandbox must read it; nobody else may).
fn write_private(path: &Path, bytes: &[u8], mode: u32, ids: crate::plan::Ids) -> Result<()> {
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(io("create", path))?;
    file.write_all(bytes).map_err(io("write", path))?;
    if nix::unistd::geteuid().is_root() && ids.host_uid != 0 {
        std::os::unix::fs::chown(path, Some(ids.host_uid), Some(ids.host_gid))
            .map_err(io("chown", path))?;
    }
    Ok(())
}
