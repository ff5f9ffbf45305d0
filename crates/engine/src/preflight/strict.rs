//! The strict battery (SANDBOX.md §11.3): resolve the spec exactly as `iterion run` does, then
//! probe and judge, in order, each probe bounded by the doctor's budget.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use iterion_sandbox::{
    Capabilities, Driver, EnvOverlay, Factory, HostKind, HostSignals, Mode, Spec, format_duration,
    resolve_network_policy,
};
use iterion_sandbox_docker::{EndpointVars, EngineProbe, NoEngine, probe_endpoints};
use iterion_sandbox_kubernetes::SchedulingPolicy;

use super::judge::{self, BinaryFinding, DriverMiss, ImageFinding, Registry};
use super::report::{Check, CheckId, Counts, HostClass, SCHEMA_VERSION, StrictReport, Target};
use super::setup::PreflightRequest;
use crate::launcher::launch::LaunchError;
use crate::launcher::setup::PreflightSetup;
use crate::sandbox::resolve::{Resolved, resolve};

/// How much of the engine binary is read: enough for any program header table.
const BINARY_HEAD_BYTES: u64 = 1 << 20;

/// Rows as they are judged, each stamped with its duration.
struct Rows {
    checks: Vec<Check>,
}

impl Rows {
    fn push(&mut self, started: Instant, check: Check) {
        self.push_took(started.elapsed(), check);
    }

    fn push_took(&mut self, took: Duration, check: Check) {
        let duration_ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
        self.checks.push(Check {
            duration_ms,
            ..check
        });
    }
}

/// Runs `future` within `budget`; `None` when it did not finish.
async fn bounded<T>(budget: Duration, future: impl Future<Output = T>) -> Option<T> {
    tokio::time::timeout(budget, future).await.ok()
}

/// Why the docker-daemon check has no engine to report.
#[derive(Debug, thiserror::Error)]
enum NoDaemon {
    #[error(transparent)]
    NoEngine(NoEngine),
    #[error("no answer within {}", format_duration(*.0))]
    TimedOut(Duration),
    #[error("the engine probe stopped before answering")]
    Stopped,
}

/// A bounded check that gave no answer.
#[derive(Debug, thiserror::Error)]
enum Unanswered {
    #[error("the check stopped: {0}")]
    Stopped(#[source] tokio::task::JoinError),
    #[error("no answer within {}", format_duration(*.0))]
    TimedOut(Duration),
}

/// Runs blocking `work` on the blocking pool within `budget`; `Err` names a timeout or a panic.
async fn bounded_blocking<T: Send + 'static>(
    budget: Duration,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Unanswered> {
    match tokio::time::timeout(budget, tokio::task::spawn_blocking(work)).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(join)) => Err(Unanswered::Stopped(join)),
        Err(_) => Err(Unanswered::TimedOut(budget)),
    }
}

fn class_of_host(host: HostKind) -> HostClass {
    match host {
        HostKind::Cloud => HostClass::Cloud,
        HostKind::Local | HostKind::Desktop => HostClass::Local,
    }
}

fn class_of_driver(driver: &str) -> Option<HostClass> {
    match driver {
        "kubernetes" => Some(HostClass::Cloud),
        "docker" | "podman" => Some(HostClass::Local),
        _ => None,
    }
}

/// The image a report names: the image, or `build: <dockerfile>`.
fn image_of(spec: &Spec) -> Option<String> {
    match (&spec.build, spec.image_ref()) {
        (Some(build), _) => Some(format!("build: {}", build.dockerfile)),
        (None, Some(image)) => Some(image.to_owned()),
        (None, None) => None,
    }
}

/// Builds the strict report (see [`super::build_strict_report`]).
pub(crate) async fn run(
    setup: &PreflightSetup,
    request: &PreflightRequest<'_>,
) -> Result<StrictReport, LaunchError> {
    let budget = request.timeout;
    let (settings, _) = crate::launcher::launch::settings_from_env(
        setup.sandbox_default,
        request.options,
        &setup.environment,
    )?;
    let factory = Factory::new(
        setup.registry(),
        setup.factory_options,
        &HostSignals::from_env(&setup.environment),
    );
    let host_class = class_of_host(factory.host());
    let mut rows = Rows { checks: Vec::new() };
    let mut report = StrictReport {
        schema_version: SCHEMA_VERSION,
        host: factory.host().as_str().to_owned(),
        target: match request.target {
            Target::Local => HostClass::Local,
            Target::Cloud => HostClass::Cloud,
            Target::Auto => host_class,
        },
        driver: "<none>".to_owned(),
        mode: "none".to_owned(),
        source: String::new(),
        image: None,
        checks: Vec::new(),
        counts: Counts::default(),
    };
    let finish = |mut report: StrictReport, rows: Rows| {
        report.counts = Counts::of(&rows.checks);
        report.checks = rows.checks;
        report
    };

    // spec-resolution: L3–L4 as a run does them, in the directory's repository.
    let started = Instant::now();
    let repo_root =
        crate::sandbox::workspace::sandbox_root_of(&request.options.cwd, &setup.environment).await;
    let overlay = EnvOverlay {
        vars: request.options.sandbox_env.clone(),
    };
    let resolved: Resolved = {
        let (block, settings, root) =
            (request.sandbox.clone(), settings.clone(), repo_root.clone());
        let (trust, env) = (request.trust, setup.environment.clone());
        match bounded_blocking(budget, move || {
            resolve(
                &block,
                &settings,
                trust,
                Some(root.as_path()),
                &overlay,
                &env,
            )
        })
        .await
        {
            Ok(resolved) => resolved,
            Err(why) => {
                rows.push(
                    started,
                    Check::fail(
                        CheckId::SpecResolution,
                        format!("resolving the spec failed: {why}"),
                        "check that the repository's devcontainer is readable",
                    ),
                );
                return Ok(finish(report, rows));
            }
        }
    };
    report.source = resolved.label.clone();
    if let Some(refusal) = &resolved.refusal {
        report.mode = resolved.mode.as_str().to_owned();
        rows.push(
            started,
            Check::fail(
                CheckId::SpecResolution,
                refusal.clone(),
                "the repository's devcontainer asks for something a sandbox never grants: remove the named entry, or pass --sandbox none",
            ),
        );
        return Ok(finish(report, rows));
    }
    rows.push(
        started,
        Check::pass(
            CheckId::SpecResolution,
            format!(
                "mode {}, source {}",
                display_mode(resolved.mode),
                resolved.label
            ),
        ),
    );

    // sandbox-configured: an inactive mode stops here.
    let started = Instant::now();
    let spec = match (resolved.mode.is_active(), resolved.spec.clone()) {
        (true, Some(spec)) => spec,
        (active, _) => {
            let why = match (active, &resolved.skip_reason) {
                (true, Some(reason)) => {
                    format!("mode {} degrades: {reason}", resolved.mode.as_str())
                }
                _ => format!(
                    "no active sandbox (mode {}): the run executes on the host",
                    display_mode(resolved.mode)
                ),
            };
            rows.push(
                started,
                Check::warn(
                    CheckId::SandboxConfigured,
                    why,
                    "add a sandbox: block, pass --sandbox auto, or leave ITERION_SANDBOX_DEFAULT at auto",
                ),
            );
            return Ok(finish(report, rows));
        }
    };
    report.mode = resolved.mode.as_str().to_owned();
    report.image = image_of(&spec);
    rows.push(
        started,
        Check::pass(
            CheckId::SandboxConfigured,
            format!("mode {} is active", resolved.mode.as_str()),
        ),
    );

    // The engine's own answer (docker-daemon) is asked beside the driver selection, so a hung
    // engine costs one budget, not two. Read-only, so asking it when the battery turns out to be
    // kubernetes's costs nothing but the call.
    let vars = EndpointVars::from_env(&setup.environment);
    let daemon = (request.target != Target::Cloud).then(|| {
        tokio::spawn(async move {
            let started = Instant::now();
            let endpoints = probe_endpoints(&vars);
            let answer = match bounded(budget, EngineProbe::connect(&endpoints, budget)).await {
                Some(answer) => answer.map_err(NoDaemon::NoEngine),
                None => Err(NoDaemon::TimedOut(budget)),
            };
            (started.elapsed(), answer)
        })
    });

    // driver-available.
    let started = Instant::now();
    let selected: Option<Arc<dyn Driver>> = {
        let answer = bounded(budget, factory.driver_for_spec(Some(&spec))).await;
        let miss = match &answer {
            Some(Ok(driver)) => {
                report.driver = driver.name().to_owned();
                None
            }
            Some(Err(error)) => Some(DriverMiss::of(error)),
            None => Some(DriverMiss::TimedOut(format_duration(budget))),
        };
        let explicit_mismatch = request.target != Target::Auto && report.target != host_class;
        let relaxed = match &miss {
            None => false,
            Some(DriverMiss::TimedOut(_)) => explicit_mismatch,
            Some(_) => {
                explicit_mismatch
                    || bounded(budget, factory.driver())
                        .await
                        .is_some_and(|any| any.is_err())
            }
        };
        let selected = match answer {
            Some(Ok(driver)) => Some(driver),
            _ => None,
        };
        rows.push(
            started,
            judge::driver_available(
                match (&selected, miss) {
                    (Some(driver), _) => Ok(driver.name()),
                    (None, Some(miss)) => Err(miss),
                    (None, None) => Err(DriverMiss::Other("no driver".to_owned())),
                },
                resolved.mode.as_str(),
                relaxed,
            ),
        );
        selected
    };
    if request.target == Target::Auto
        && let Some(class) = class_of_driver(&report.driver)
    {
        report.target = class;
    }

    // spec-valid.
    let started = Instant::now();
    rows.push(started, judge::spec_valid(&spec));

    match report.target {
        HostClass::Local => {
            let daemon = match daemon {
                Some(task) => task.await.ok(),
                None => None,
            };
            // What execs the engine binary in the container: the egress bridge whenever a
            // proxy is started (a closed network or an untrusted run), the agent runner.
            let mut binary_for = Vec::new();
            if resolve_network_policy(&spec, resolved.network_origin()).mode
                != iterion_vocab::NetworkMode::Open
                || request.trust == iterion_sandbox::Trust::Untrusted
            {
                binary_for.push("the egress bridge");
            }
            if request.needs.agent_runner {
                binary_for.push("the agent runner");
            }
            docker_battery(
                setup,
                request,
                &spec,
                daemon,
                &report.driver,
                &binary_for,
                &mut rows,
            )
            .await;
        }
        HostClass::Cloud => {
            kubernetes_battery(
                &spec,
                report.driver == "kubernetes",
                budget,
                &setup.environment,
                &mut rows,
            )
            .await;
        }
    }

    // network-preset, network-allowlist-syntax.
    let policy = resolve_network_policy(&spec, resolved.network_origin());
    if let Some(preset) = &policy.preset {
        let started = Instant::now();
        rows.push(started, judge::network_preset(preset));
    }
    let started = Instant::now();
    rows.push(started, judge::network_allowlist_syntax(&policy));

    // driver-capabilities: the selected driver when it serves the battery's class, else the
    // class's driver when --target named it; never noop, which honours nothing by design.
    let capabilities = match &selected {
        Some(driver) if class_of_driver(driver.name()) == Some(report.target) => {
            Some((driver.name(), driver.capabilities()))
        }
        _ => match request.target {
            Target::Local => Some(("docker", Capabilities::DOCKER)),
            Target::Cloud => Some(("kubernetes", Capabilities::KUBERNETES)),
            Target::Auto => None,
        },
    };
    if let Some((driver, caps)) = capabilities {
        let started = Instant::now();
        rows.push(started, judge::driver_capabilities(&spec, driver, caps));
    }
    Ok(finish(report, rows))
}

fn display_mode(mode: Mode) -> &'static str {
    if mode.is_active() {
        mode.as_str()
    } else {
        "none"
    }
}

/// docker-daemon, spec-safety, image-resolvable, engine-binary.
async fn docker_battery(
    setup: &PreflightSetup,
    request: &PreflightRequest<'_>,
    spec: &Spec,
    daemon: Option<(Duration, Result<EngineProbe, NoDaemon>)>,
    driver: &str,
    binary_for: &[&str],
    rows: &mut Rows,
) {
    let budget = request.timeout;
    // The namespace driver (issue 18) needs no engine and runs no image: neither the daemon nor
    // the image is asked about.
    let namespace = driver == "namespace";
    // docker-daemon: the answer asked beside the driver selection.
    let (took, probe) = daemon.unwrap_or_else(|| (Duration::ZERO, Err(NoDaemon::Stopped)));
    let why = probe.as_ref().err().map(ToString::to_string);
    if !namespace {
        rows.push_took(
            took,
            judge::docker_daemon(match (&probe, &why) {
                (Ok(probe), _) => Ok((probe.endpoint(), probe.version())),
                (Err(_), why) => Err(why.as_deref().unwrap_or_default()),
            }),
        );
    }
    let probe = probe.ok();

    // spec-safety: the workspace a run would bind, then every mount, argument and env pair.
    let started = Instant::now();
    let workspace =
        crate::sandbox::worktree::workspace_root(&request.options.cwd, &setup.environment).await;
    let screened = {
        let spec = spec.clone();
        // The run's trust: an untrusted run's author mounts meet the allow-list (issue 15).
        let scope = iterion_sandbox::MountScope {
            runtime_roots: vec![crate::sandbox::rundir::runtime_root(&setup.environment)],
            ..iterion_sandbox::MountScope::default()
        };
        let trust = request.trust;
        let env = setup.environment.clone();
        bounded_blocking(budget, move || {
            let ctx =
                iterion_sandbox::ScreenContext::from_env(&workspace, &env)?.for_run(trust, &scope);
            ctx.validate_workspace(&workspace)?;
            iterion_sandbox::validate_spec_mounts(&spec, &ctx).map(|mounts| mounts.len())
        })
        .await
    };
    rows.push(
        started,
        match &screened {
            Ok(result) => judge::spec_safety(spec, result.as_ref().map(|n| *n)),
            Err(why) => Check::fail(
                CheckId::SpecSafety,
                format!("screening did not finish: {why}"),
                "check that the workspace and the mount sources are on a responsive filesystem",
            ),
        },
    );

    // image-resolvable.
    let image_arch = if namespace {
        None
    } else {
        let started = Instant::now();
        let (finding, image_arch) = image_finding(spec, probe.as_ref(), budget).await;
        rows.push(started, judge::image_resolvable(&finding));
        image_arch
    };

    // engine-binary.
    let started = Instant::now();
    let finding = match crate::sandbox::engine_binary::engine_binary_for_run(
        setup.engine_binary.as_deref(),
        &setup.environment,
    ) {
        None => BinaryFinding::Unknown,
        Some(path) => read_binary(path, budget).await,
    };
    let engine_arch = probe.as_ref().map(|p| p.version().arch.clone());
    rows.push(
        started,
        judge::engine_binary(
            &finding,
            judge::binary_arch(image_arch.as_deref(), engine_arch.as_deref()),
        ),
    );

    // image-contents: only a local image can be looked into (a built one is not built yet).
    let (Some(probe), Some(image), true) = (
        probe.as_ref(),
        spec.image_ref(),
        image_arch.is_some() && spec.build.is_none(),
    ) else {
        return;
    };
    let started = Instant::now();
    let loader = match (&finding, binary_for.is_empty()) {
        (BinaryFinding::Read { path, head, .. }, false) => {
            iterion_sandbox::interpreter(head).map(|loader| (path.clone(), loader))
        }
        _ => None,
    };
    let clis = request.needs.clis();
    if !request.needs.bash && loader.is_none() && clis.is_empty() {
        return;
    }
    let answer = bounded(
        budget,
        image_lacks(probe, image, request.needs.bash, loader, binary_for, &clis),
    )
    .await
    .unwrap_or_else(|| Err(format!("no answer within {}", format_duration(budget))));
    rows.push(
        started,
        judge::image_contents(image, answer.as_deref().map_err(String::as_str)),
    );
}

/// The search path when an image sets none (docker's default).
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// What `image` lacks: `bash` in its `PATH` (when `bash`), the binary's loader (when given),
/// each delegate CLI of `clis` in its `PATH`.
async fn image_lacks(
    probe: &EngineProbe,
    image: &str,
    bash: bool,
    loader: Option<(String, String)>,
    binary_for: &[&str],
    clis: &[&'static str],
) -> Result<Vec<judge::Lack>, String> {
    let config = probe
        .inspect_image(image)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| "the image is no longer local".to_owned())?;
    let dirs: Vec<String> = config
        .env
        .iter()
        .find_map(|pair| pair.strip_prefix("PATH="))
        .unwrap_or(DEFAULT_PATH)
        .split(':')
        .filter(|dir| dir.starts_with('/'))
        .map(str::to_owned)
        .collect();
    let mut paths: Vec<String> = if bash {
        dirs.iter()
            .map(|dir| format!("{}/bash", dir.trim_end_matches('/')))
            .collect()
    } else {
        Vec::new()
    };
    let clis_at = paths.len();
    for cli in clis {
        paths.extend(
            dirs.iter()
                .map(|dir| format!("{}/{cli}", dir.trim_end_matches('/'))),
        );
    }
    if let Some((_, loader)) = &loader {
        paths.push(loader.clone());
    }
    let found = probe
        .paths_in_image(image, &paths)
        .await
        .map_err(|e| e.to_string())?;
    let mut lacks = Vec::new();
    let bash_found = &found[..if bash { dirs.len() } else { 0 }];
    if bash && !bash_found.iter().any(|f| *f) {
        lacks.push(judge::Lack::Bash(dirs.clone()));
    }
    for (index, cli) in clis.iter().enumerate() {
        let start = clis_at + index * dirs.len();
        let in_path = found.get(start..start + dirs.len()).unwrap_or_default();
        if !in_path.iter().any(|f| *f) {
            lacks.push(judge::Lack::Cli {
                cli,
                dirs: dirs.clone(),
            });
        }
    }
    if let Some((binary, loader)) = loader
        && found.last() == Some(&false)
    {
        lacks.push(judge::Lack::Loader {
            binary,
            loader,
            for_what: binary_for.join(" and "),
        });
    }
    Ok(lacks)
}

/// What the engine says about the spec's image (and its architecture when present locally).
async fn image_finding(
    spec: &Spec,
    probe: Option<&EngineProbe>,
    budget: Duration,
) -> (ImageFinding, Option<String>) {
    if let Some(build) = &spec.build {
        return (
            ImageFinding::Built {
                dockerfile: build.dockerfile.clone(),
            },
            None,
        );
    }
    let Some(image) = spec.image_ref().map(str::to_owned) else {
        return (ImageFinding::Missing, None);
    };
    let Some(probe) = probe else {
        return (ImageFinding::NoEngine { image }, None);
    };
    match bounded(budget, probe.inspect_image(&image)).await {
        None => (
            ImageFinding::InspectFailed {
                image,
                reason: format!("no answer within {}", format_duration(budget)),
            },
            None,
        ),
        Some(Err(error)) => (
            ImageFinding::InspectFailed {
                image,
                reason: error.to_string(),
            },
            None,
        ),
        Some(Ok(Some(config))) => (ImageFinding::Present { image }, Some(config.architecture)),
        Some(Ok(None)) => {
            let registry = ask_registry(probe, &image, budget).await;
            let fallback = match (&spec.image_fallback, &registry) {
                (Some(fallback), Registry::Unknown(_) | Registry::Refused(_)) => Some((
                    fallback.clone(),
                    ask_registry(probe, fallback, budget).await,
                )),
                _ => None,
            };
            (
                ImageFinding::Absent {
                    image,
                    registry,
                    fallback,
                },
                None,
            )
        }
    }
}

async fn ask_registry(probe: &EngineProbe, image: &str, budget: Duration) -> Registry {
    match bounded(budget, probe.inspect_registry_image(image)).await {
        Some(answer) => Registry::of(&answer),
        None => Registry::Unreachable(format!("no answer within {}", format_duration(budget))),
    }
}

async fn read_binary(path: PathBuf, budget: Duration) -> BinaryFinding {
    let shown = path.display().to_string();
    let read = bounded_blocking(budget, move || {
        use std::io::Read as _;
        use std::os::unix::fs::PermissionsExt as _;
        let meta = std::fs::metadata(&path)?;
        let executable = meta.is_file() && meta.permissions().mode() & 0o111 != 0;
        let mut head = Vec::new();
        if meta.is_file() {
            std::fs::File::open(&path)?
                .take(BINARY_HEAD_BYTES)
                .read_to_end(&mut head)?;
        }
        Ok::<_, std::io::Error>((executable, head))
    })
    .await;
    match read {
        Ok(Ok((executable, head))) => BinaryFinding::Read {
            path: shown,
            executable,
            head,
        },
        Ok(Err(error)) => BinaryFinding::Unreadable {
            path: shown,
            reason: format!("cannot read it: {error}"),
        },
        Err(why) => BinaryFinding::Unreadable {
            path: shown,
            reason: why.to_string(),
        },
    }
}

/// k8s-spec-compatible, k8s-context, k8s-scheduling-policy.
async fn kubernetes_battery(
    spec: &Spec,
    kubernetes_selected: bool,
    budget: Duration,
    env: &iterion_vocab::Environment,
    rows: &mut Rows,
) {
    let started = Instant::now();
    rows.push(started, judge::k8s_spec_compatible(spec));

    let started = Instant::now();
    let answer = match bounded(budget, iterion_sandbox_kubernetes::probe_api_version(env)).await {
        Some(answer) => answer.map_err(|error| error.to_string()),
        None => Err(format!("no answer within {}", format_duration(budget))),
    };
    rows.push(
        started,
        judge::k8s_context(
            answer.as_deref().map_err(String::as_str),
            kubernetes_selected,
        ),
    );

    let started = Instant::now();
    let policy = SchedulingPolicy::from_env(env);
    rows.push(
        started,
        judge::k8s_scheduling_policy(policy.as_ref().map(SchedulingPolicy::summary)),
    );
}
