use std::collections::VecDeque;
use std::sync::Mutex;

use super::*;
use crate::capabilities::Capabilities;
use crate::driver::{NullRunLog, PreparedSpec, Progress, RunInfo, SandboxRun};
use crate::mode::{Mode, SandboxFlag};
use async_trait::async_trait;
use pretty_assertions::assert_eq;

/// Every constructor call, in order, across one test's fakes.
type CallLog = Arc<Mutex<Vec<DriverKind>>>;

/// A constructor that answers from a script: `Ok` constructs a [`FakeDriver`], `Err(reason)`
/// is `Error::Unavailable`. A call without a scripted answer fails the test.
struct FakeConstructor {
    kind: DriverKind,
    script: Mutex<VecDeque<std::result::Result<(), &'static str>>>,
    calls: CallLog,
    /// Names of the drivers it made that were bound to a run log.
    bound: Arc<Mutex<Vec<&'static str>>>,
}

impl FakeConstructor {
    fn new(
        kind: DriverKind,
        calls: &CallLog,
        script: &[std::result::Result<(), &'static str>],
    ) -> Self {
        FakeConstructor {
            kind,
            script: Mutex::new(script.iter().copied().collect()),
            calls: Arc::clone(calls),
            bound: Arc::default(),
        }
    }
}

#[async_trait]
impl DriverConstructor for FakeConstructor {
    async fn construct(&self) -> Result<Arc<dyn Driver>> {
        self.calls.lock().unwrap().push(self.kind);
        let answer = self.script.lock().unwrap().pop_front().unwrap_or_else(|| {
            panic!(
                "fake {} constructor called without a scripted answer",
                self.kind
            )
        });
        match answer {
            Ok(()) => Ok(Arc::new(FakeDriver {
                name: self.kind.as_str(),
                bound: Arc::clone(&self.bound),
            })),
            Err(reason) => Err(Error::Unavailable {
                driver: self.kind.as_str().to_owned(),
                reason: reason.to_owned(),
            }),
        }
    }
}

struct FakeDriver {
    name: &'static str,
    bound: Arc<Mutex<Vec<&'static str>>>,
}

#[async_trait]
impl Driver for FakeDriver {
    fn name(&self) -> &str {
        self.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::DOCKER
    }

    async fn prepare(&self, spec: &Spec, _progress: &dyn Progress) -> Result<PreparedSpec> {
        Ok(PreparedSpec::new(self.name, spec.clone()))
    }

    async fn start(&self, _prepared: PreparedSpec, _info: RunInfo) -> Result<Box<dyn SandboxRun>> {
        panic!("the factory never starts a driver")
    }

    fn with_run_log(&self, _log: Arc<dyn RunLog>) -> Option<Arc<dyn Driver>> {
        self.bound.lock().unwrap().push(self.name);
        Some(Arc::new(FakeDriver {
            name: self.name,
            bound: Arc::clone(&self.bound),
        }))
    }
}

fn local() -> HostSignals {
    HostSignals::default()
}

fn factory(registry: Registry, options: FactoryOptions, signals: &HostSignals) -> Factory {
    Factory::new(registry, options, signals)
}

fn active(mode: Mode) -> Spec {
    Spec {
        mode,
        image: Some("alpine".to_owned()),
        ..Spec::default()
    }
}

fn tried(error: &Error) -> Vec<(String, String)> {
    match error {
        Error::DriverUnavailable { tried } => tried
            .iter()
            .map(|a| (a.driver.clone(), a.reason.clone()))
            .collect(),
        other => panic!("not DriverUnavailable: {other}"),
    }
}

fn pair(driver: &str, reason: &str) -> (String, String) {
    (driver.to_owned(), reason.to_owned())
}

#[tokio::test]
async fn a_local_host_takes_docker_when_it_answers() {
    let calls = CallLog::default();
    let registry = Registry::with_noop()
        .register(
            DriverKind::Docker,
            FakeConstructor::new(DriverKind::Docker, &calls, &[Ok(())]),
        )
        .register(
            DriverKind::Podman,
            FakeConstructor::new(DriverKind::Podman, &calls, &[]),
        );
    let factory = factory(registry, FactoryOptions::default(), &local());
    let driver = factory
        .driver_for_spec(Some(&active(Mode::Inline)))
        .await
        .unwrap();
    assert_eq!(
        (factory.host(), driver.name(), calls.lock().unwrap().clone()),
        (HostKind::Local, "docker", vec![DriverKind::Docker])
    );
}

#[tokio::test]
async fn podman_is_tried_when_docker_is_down() {
    let calls = CallLog::default();
    let registry = Registry::with_noop()
        .register(
            DriverKind::Docker,
            FakeConstructor::new(DriverKind::Docker, &calls, &[Err("connection refused")]),
        )
        .register(
            DriverKind::Podman,
            FakeConstructor::new(DriverKind::Podman, &calls, &[Ok(())]),
        );
    let factory = factory(registry, FactoryOptions::default(), &local());
    let driver = factory.driver().await.unwrap();
    assert_eq!(
        (driver.name(), calls.lock().unwrap().clone()),
        ("podman", vec![DriverKind::Docker, DriverKind::Podman])
    );
}

#[tokio::test]
async fn with_every_engine_down_an_active_spec_is_refused_for_auto_and_inline_alike() {
    let calls = CallLog::default();
    let registry = Registry::with_noop()
        .register(
            DriverKind::Docker,
            FakeConstructor::new(DriverKind::Docker, &calls, &[Err("dead DOCKER_HOST")]),
        )
        .register(
            DriverKind::Podman,
            FakeConstructor::new(DriverKind::Podman, &calls, &[Err("no socket")]),
        );
    let factory = factory(registry, FactoryOptions::default(), &local());

    let auto = factory
        .driver_for_spec(Some(&active(Mode::Auto)))
        .await
        .err()
        .unwrap();
    let inline = factory
        .driver_for_spec(Some(&active(Mode::Inline)))
        .await
        .err()
        .unwrap();
    let inactive = factory
        .driver_for_spec(Some(&Spec {
            mode: Mode::None,
            ..Spec::default()
        }))
        .await
        .unwrap();
    let absent = factory.driver_for_spec(None).await.unwrap();
    let plain = factory.driver().await.unwrap();

    let expected = vec![
        pair("docker", "dead DOCKER_HOST"),
        pair("podman", "no socket"),
    ];
    assert_eq!(
        (
            tried(&auto),
            tried(&inline),
            auto.code(),
            inactive.name(),
            absent.name(),
            plain.name()
        ),
        (
            expected.clone(),
            expected,
            "SANDBOX_DRIVER_UNAVAILABLE",
            "noop",
            "noop",
            "noop"
        )
    );
    // Memoised: five questions, one probe of each engine.
    assert_eq!(
        calls.lock().unwrap().clone(),
        vec![DriverKind::Docker, DriverKind::Podman]
    );
}

#[tokio::test]
async fn a_cloud_host_prefers_kubernetes_even_with_docker_running() {
    for signals in [
        HostSignals {
            iterion_mode: Some("cloud".to_owned()),
            ..HostSignals::default()
        },
        HostSignals {
            kubernetes_service_host: Some("10.96.0.1".to_owned()),
            ..HostSignals::default()
        },
    ] {
        let calls = CallLog::default();
        let registry = Registry::with_noop()
            .register(
                DriverKind::Docker,
                FakeConstructor::new(DriverKind::Docker, &calls, &[]),
            )
            .register(
                DriverKind::Kubernetes,
                FakeConstructor::new(DriverKind::Kubernetes, &calls, &[Ok(())]),
            );
        let factory = factory(registry, FactoryOptions::default(), &signals);
        let driver = factory.driver().await.unwrap();
        assert_eq!(
            (factory.host(), driver.name(), calls.lock().unwrap().clone()),
            (HostKind::Cloud, "kubernetes", vec![DriverKind::Kubernetes])
        );
    }
}

#[tokio::test]
async fn a_pinned_driver_must_construct_and_nothing_else_is_tried() {
    let calls = CallLog::default();
    let registry = Registry::with_noop()
        .register(
            DriverKind::Docker,
            FakeConstructor::new(DriverKind::Docker, &calls, &[Err("down")]),
        )
        .register(
            DriverKind::Podman,
            FakeConstructor::new(DriverKind::Podman, &calls, &[]),
        );
    let options = FactoryOptions {
        preferred_driver: Some(DriverKind::Docker),
        ..FactoryOptions::default()
    };
    let factory = factory(registry, options, &local());
    let error = factory.driver().await.err().unwrap();
    assert_eq!(
        (tried(&error), calls.lock().unwrap().clone()),
        (vec![pair("docker", "down")], vec![DriverKind::Docker])
    );

    let unregistered = Factory::new(
        Registry::with_noop(),
        FactoryOptions {
            preferred_driver: Some(DriverKind::Kubernetes),
            ..FactoryOptions::default()
        },
        &local(),
    );
    let error = unregistered.driver().await.err().unwrap();
    assert_eq!(tried(&error), vec![pair("kubernetes", "not registered")]);
}

#[tokio::test]
async fn a_pinned_noop_serves_an_active_spec() {
    let options = FactoryOptions {
        preferred_driver: Some(DriverKind::Noop),
        ..FactoryOptions::default()
    };
    let factory = Factory::new(Registry::with_noop(), options, &local());
    let driver = factory
        .driver_for_spec(Some(&active(Mode::Inline)))
        .await
        .unwrap();
    assert_eq!(driver.name(), "noop");
}

#[tokio::test]
async fn without_noop_registered_no_driver_at_all_is_an_error_for_any_spec() {
    let calls = CallLog::default();
    let registry = Registry::empty().register(
        DriverKind::Docker,
        FakeConstructor::new(DriverKind::Docker, &calls, &[Err("down")]),
    );
    let factory = factory(registry, FactoryOptions::default(), &local());
    let error = factory.driver_for_spec(None).await.err().unwrap();
    assert_eq!(tried(&error), vec![pair("docker", "down")]);
}

#[tokio::test]
async fn select_sandbox_driver_binds_the_run_log_and_prefixes_its_errors() {
    let calls = CallLog::default();
    let docker = FakeConstructor::new(DriverKind::Docker, &calls, &[Ok(())]);
    let bound = Arc::clone(&docker.bound);
    let up = Registry::with_noop().register(DriverKind::Docker, docker);
    let factory_up = factory(up, FactoryOptions::default(), &local());
    let driver =
        select_sandbox_driver(Some(&active(Mode::Auto)), Arc::new(NullRunLog), &factory_up)
            .await
            .unwrap();
    assert_eq!(
        (driver.name(), bound.lock().unwrap().clone()),
        ("docker", vec!["docker"])
    );

    let down = Registry::with_noop();
    let factory_down = factory(down, FactoryOptions::default(), &local());
    let error = select_sandbox_driver(
        Some(&active(Mode::Inline)),
        Arc::new(NullRunLog),
        &factory_down,
    )
    .await
    .err()
    .unwrap();
    assert_eq!(
        (
            error.code(),
            error.is_driver_unavailable(),
            error.to_string()
        ),
        (
            "SANDBOX_DRIVER_UNAVAILABLE",
            true,
            "sandbox: select driver: sandbox: no container-runtime driver available".to_owned()
        )
    );
}

#[tokio::test]
async fn run_will_be_sandboxed_says_yes_only_for_a_real_driver() {
    let inline = active(Mode::Inline);
    let inputs = ModeInputs {
        workflow_block: Some(&inline),
        global: Some(SandboxFlag::Auto),
        ..ModeInputs::default()
    };
    let calls = CallLog::default();
    let up = factory(
        Registry::with_noop().register(
            DriverKind::Docker,
            FakeConstructor::new(DriverKind::Docker, &calls, &[Ok(())]),
        ),
        FactoryOptions::default(),
        &local(),
    );
    let down = factory(Registry::with_noop(), FactoryOptions::default(), &local());
    let pinned_noop = Factory::new(
        Registry::with_noop(),
        FactoryOptions {
            preferred_driver: Some(DriverKind::Noop),
            ..FactoryOptions::default()
        },
        &local(),
    );
    let resolved = SpecResolution::Resolved(&inline);
    let verdict = |yes: bool, cause: Option<NotSandboxedCause>| SandboxVerdict {
        answer: match cause.filter(|_| !yes) {
            None => Sandboxing::Sandboxed,
            Some(cause) => Sandboxing::NotSandboxed(cause),
        },
        mode: Mode::Inline,
        source: crate::precedence::Source::WorkflowBlock,
    };
    assert_eq!(
        [
            run_will_be_sandboxed(&inputs, resolved, &up).await,
            run_will_be_sandboxed(&inputs, resolved, &down).await,
            run_will_be_sandboxed(&inputs, resolved, &pinned_noop).await,
        ],
        [
            verdict(true, None),
            verdict(false, Some(NotSandboxedCause::NoContainerRuntime)),
            verdict(false, Some(NotSandboxedCause::NoContainerRuntime)),
        ]
    );
    // An inactive mode never probes an engine.
    let opted_out = ModeInputs {
        cli_flag: Some(SandboxFlag::None),
        ..inputs
    };
    let untouched = CallLog::default();
    let never = factory(
        Registry::with_noop().register(
            DriverKind::Docker,
            FakeConstructor::new(DriverKind::Docker, &untouched, &[]),
        ),
        FactoryOptions::default(),
        &local(),
    );
    let verdict = run_will_be_sandboxed(&opted_out, resolved, &never).await;
    assert_eq!(
        (
            verdict.is_sandboxed(),
            verdict.cause(),
            untouched.lock().unwrap().len()
        ),
        (false, Some(NotSandboxedCause::OptedOut), 0)
    );
}

#[tokio::test]
async fn the_doctor_probe_lists_every_available_driver() {
    let calls = CallLog::default();
    let registry = Registry::with_noop()
        .register(
            DriverKind::Docker,
            FakeConstructor::new(DriverKind::Docker, &calls, &[Err("down")]),
        )
        .register(
            DriverKind::Podman,
            FakeConstructor::new(DriverKind::Podman, &calls, &[Ok(())]),
        );
    let factory = factory(registry, FactoryOptions::default(), &local());
    assert_eq!(
        factory.probe_available().await,
        vec![DriverKind::Podman, DriverKind::Noop]
    );
}

#[tokio::test]
async fn with_no_engine_the_namespace_driver_serves_auto_default_image_but_never_a_named_image() {
    let calls = CallLog::default();
    let registry = Registry::with_noop()
        .register(
            DriverKind::Docker,
            FakeConstructor::new(DriverKind::Docker, &calls, &[Err("docker down")]),
        )
        .register(
            DriverKind::Podman,
            FakeConstructor::new(DriverKind::Podman, &calls, &[Err("podman down")]),
        )
        .register(
            DriverKind::Namespace,
            FakeConstructor::new(DriverKind::Namespace, &calls, &[Ok(())]),
        );
    let factory = factory(registry, FactoryOptions::default(), &local());
    let default_image = Spec {
        mode: Mode::Auto,
        image: Some("ghcr.io/x/default".to_owned()),
        image_is_default: true,
        ..Spec::default()
    };
    let driver = factory.driver_for_spec(Some(&default_image)).await.unwrap();
    assert_eq!(driver.name(), "namespace");
    for (spec, why) in [
        (
            active(Mode::Auto),
            "runs the host's root, not an image (the workflow names alpine)",
        ),
        (
            active(Mode::Inline),
            "runs the host's root, not an image (the workflow names alpine)",
        ),
        (
            Spec {
                mode: Mode::Auto,
                build: Some(crate::spec::Build::default()),
                ..Spec::default()
            },
            "runs the host's root and cannot build an image (the workflow has build:)",
        ),
    ] {
        let error = factory.driver_for_spec(Some(&spec)).await.err().unwrap();
        assert_eq!(
            tried(&error),
            vec![
                pair("docker", "docker down"),
                pair("podman", "podman down"),
                pair("namespace", why)
            ]
        );
    }
    // Docker and podman were asked first, once; the selection is memoised.
    assert_eq!(
        calls.lock().unwrap().clone(),
        vec![
            DriverKind::Docker,
            DriverKind::Podman,
            DriverKind::Namespace
        ]
    );
}

#[tokio::test]
async fn a_running_docker_keeps_precedence_over_the_namespace_driver() {
    let calls = CallLog::default();
    let registry = Registry::with_noop()
        .register(
            DriverKind::Docker,
            FakeConstructor::new(DriverKind::Docker, &calls, &[Ok(())]),
        )
        .register(
            DriverKind::Namespace,
            FakeConstructor::new(DriverKind::Namespace, &calls, &[]),
        );
    let factory = factory(registry, FactoryOptions::default(), &local());
    let driver = factory
        .driver_for_spec(Some(&active(Mode::Auto)))
        .await
        .unwrap();
    assert_eq!(
        (driver.name(), calls.lock().unwrap().clone()),
        ("docker", vec![DriverKind::Docker])
    );
}

#[test]
fn iterion_sandbox_driver_names_a_driver_or_auto() {
    use crate::env::parse_sandbox_driver;
    assert_eq!(
        [
            None,
            Some(""),
            Some("auto"),
            Some("Namespace"),
            Some(" docker ")
        ]
        .map(|v| parse_sandbox_driver(v).unwrap()),
        [
            None,
            None,
            None,
            Some(DriverKind::Namespace),
            Some(DriverKind::Docker)
        ]
    );
    assert_eq!(
        parse_sandbox_driver(Some("chroot"))
            .unwrap_err()
            .to_string(),
        "ITERION_SANDBOX_DRIVER=\"chroot\": want auto, docker, podman, kubernetes, namespace or noop"
    );
}
